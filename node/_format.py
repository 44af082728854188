"""Formatting a node's directories (``kraftlog storage format``) and checking them at start.

``meta.properties`` (cluster id, node id, a directory id per dir) goes into every log dir and the
metadata log dir of the node's config. The cluster id replaces ZooKeeper's ``/cluster/id``: every
node of a cluster is formatted with the same one, and a node refuses to start unformatted, with
another node's dirs or with another cluster's id (`check_formatted`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlog import storage
from kraftlog.common import kafka_uuid, parse_uuid
from kraftlog.metadata_log import METADATA_VERSION, FeatureLevelRecord, MetadataRecord, format_feature_levels
from kraftlog.node._errors import NodeStartupError
from kraftlog.quorum import (
    DynamicVoter,
    DynamicVoterError,
    check_voter_directory,
    read_bootstrap_voters,
    write_bootstrap_records,
    write_bootstrap_voters,
)

__all__ = [
    "FormatResult",
    "check_formatted",
    "format_node_dirs",
    "is_valid_cluster_id",
    "new_cluster_id",
    "node_dirs",
    "resolve_quorum",
]


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's Uuid.randomUuid, never one starting with '-', which a command line would take for
    an option.
    """
    while True:
        cid = kafka_uuid(uuid.uuid4())
        if not cid.startswith("-"):
            return cid


def is_valid_cluster_id(value: str) -> bool:
    """Whether ``value`` is a UUID in Kafka's 22-character form (the form ``meta.properties`` holds)."""
    if len(value) != 22:
        return False
    try:
        parse_uuid(value)
    except ValueError:
        return False
    return True


def node_dirs(cfg: Any) -> list[Path]:
    """Every directory a node stores data in: its log dirs and its metadata log dir."""
    dirs = [Path(d) for d in cfg.log_dirs]
    meta = cfg.metadata_log_dir
    if meta and Path(meta) not in dirs:
        dirs.append(Path(meta))
    return dirs


def check_formatted(cfg: Any) -> str:
    """The cluster id every dir of the node agrees on; raises `NodeStartupError` when a dir is unformatted,
    belongs to another node, or to another cluster."""
    cluster_ids = set()
    for d in node_dirs(cfg):
        meta = storage.read_meta_properties(d)
        if meta is None:
            raise NodeStartupError(f"{d} is not formatted: run 'kraftlog storage format -t CLUSTER_ID -c CONFIG'")
        if meta.node_id != cfg.node_id:
            raise NodeStartupError(f"{d} belongs to node {meta.node_id}, this node is {cfg.node_id}")
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise NodeStartupError(f"the node's dirs belong to different clusters: {sorted(cluster_ids)}")
    return cluster_ids.pop()


@dataclass
class FormatResult:
    """What `format_node_dirs` did: the dirs it wrote and those already formatted alike."""

    written: list[str] = field(default_factory=list)
    already_formatted: list[str] = field(default_factory=list)
    #: the feature levels the bootstrap metadata finalizes (when the metadata log dir was written now)
    features: dict[str, int] = field(default_factory=dict)


def format_node_dirs(
    cfg: Any,
    cluster_id: str,
    *,
    ignore_formatted: bool = False,
    bootstrap_records: Sequence[MetadataRecord] = (),
    initial_voters: Mapping[int, DynamicVoter] | None = None,
    features: Mapping[str, int] | None = None,
) -> FormatResult:
    """Write ``meta.properties`` into every dir of the node.

    Every dir is checked before any is written, so a refusal leaves nothing half-formatted: a dir of
    another cluster or node is refused; one of this cluster and node is refused unless
    ``ignore_formatted``. Raises `NodeStartupError` naming the dir (or the bad cluster id).

    ``bootstrap_records`` (``--add-scram``'s credentials) go into the metadata log dir's
    ``bootstrap.checkpoint`` when that dir is formatted now, before its ``meta.properties``: a dir
    that says it is formatted holds its bootstrap file. The first active controller of the empty
    log commits them (`kraftlog.quorum.read_bootstrap_records`).

    The feature levels of `format_feature_levels` (its defaults, ``share.version`` 1 as Kafka
    4.2's, with ``features``, ``--feature name=level``, over them) go first into that same file,
    one ``FeatureLevelRecord`` per feature not at 0 (``metadata.version`` first), so the cluster's
    first batch finalizes them before any broker registers. A bad ``features`` raises
    `NodeStartupError` naming the feature, before anything is written.

    ``initial_voters`` (``--standalone`` / ``--initial-controllers``, a dynamic quorum) go into the
    metadata log dir's voters file, written before its ``meta.properties`` too; that dir takes the
    directory id this node's voter entry names (Kafka's Formatter does the same), so the voter is
    bound to this very directory.
    """
    if not is_valid_cluster_id(cluster_id):
        raise NodeStartupError(
            f"invalid cluster id {cluster_id!r}: expected 16 bytes in URL-safe base64 "
            "(22 characters), e.g. from 'kraftlog storage random-uuid'"
        )
    try:
        levels = format_feature_levels(features)
    except ValueError as err:
        raise NodeStartupError(str(err)) from None
    feature_records: list[MetadataRecord] = [
        FeatureLevelRecord(name=name, feature_level=level)
        for name, level in sorted(levels.items(), key=lambda item: (item[0] != METADATA_VERSION, item[0]))
        if level != 0
    ]
    bootstrap = [*feature_records, *bootstrap_records]
    result = FormatResult(features=levels)
    dirs = node_dirs(cfg)
    metadata_dir = Path(cfg.metadata_log_dir)
    for d in dirs:
        meta = storage.read_meta_properties(d)
        if meta is None:
            continue
        if meta.cluster_id != cluster_id or meta.node_id != cfg.node_id:
            raise NodeStartupError(f"{d} is already formatted for cluster {meta.cluster_id} node {meta.node_id}")
        if not ignore_formatted:
            raise NodeStartupError(f"{d} is already formatted; use --ignore-formatted to accept that")
    for d in dirs:
        if storage.read_meta_properties(d) is not None:
            result.already_formatted.append(str(d))
            continue
        directory_id = new_cluster_id()
        if d == metadata_dir:
            if bootstrap:
                write_bootstrap_records(d, bootstrap)
            if initial_voters is not None:
                d.mkdir(parents=True, exist_ok=True)
                write_bootstrap_voters(d, initial_voters)
                own = initial_voters.get(cfg.node_id)
                if own is not None:
                    directory_id = own.directory_id
        storage.write_meta_properties(
            d, storage.MetaProperties(cluster_id=cluster_id, node_id=cfg.node_id, directory_id=directory_id)
        )
        result.written.append(str(d))
    return result


def resolve_quorum(cfg: Any) -> Any:
    """The config this node runs with: as loaded for a static quorum (``controller.quorum.voters``)
    or a broker of a dynamic one; for a controller of a dynamic quorum (KIP-853), with the voter set
    its metadata log dir was formatted with (`NodeConfig.with_formatted_voters`).

    A dynamic-quorum controller whose dir holds no voter set (``--no-initial-controllers``) is
    returned as loaded: it starts as an observer. Raises `NodeStartupError` when it is not a voter, when its
    metadata dir is not the directory its voter entry names, or when a static config meets a dir
    formatted for a dynamic quorum.
    """
    from kraftlog.common.config import ConfigError

    metadata_dir = Path(cfg.metadata_log_dir)
    try:
        formatted = read_bootstrap_voters(metadata_dir)
    except DynamicVoterError as err:
        raise NodeStartupError(str(err)) from None
    if formatted is None:
        # a dynamic quorum's controller formatted with --no-initial-controllers: an observer, which
        # learns the voters from controller.quorum.bootstrap.servers at start (`discover_voters`)
        return cfg
    if not cfg.is_controller:
        return cfg
    meta = storage.read_meta_properties(metadata_dir)
    try:
        check_voter_directory(formatted, cfg.node_id, meta.directory_id if meta is not None else None)
        return cfg.with_formatted_voters(formatted.endpoints())
    except (DynamicVoterError, ConfigError) as err:
        raise NodeStartupError(str(err)) from None
