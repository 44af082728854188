"""``kraftlog metadata tree``: the metadata image laid out as the ZooKeeper tree it replaces, built
from a controller (online) or from log segments and snapshots on disk (offline, also as of an
earlier offset); see `cli._metadata` for the command.

ACLs and SCRAM users are drawn offline only (the admin service has no DescribeAcls or
DescribeUserScramCredentials yet): ``/kafka-acl/<ResourceType>/<name>`` for LITERAL ACLs and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED ones, as Kafka's ZooKeeper ACL
stores laid them out, and ``/config/users/<user>`` naming each SCRAM mechanism with its iteration
count only: salts and keys are never printed.

Client quotas are drawn online and offline where ZooKeeper kept them: ``/config/users/<user>``
(shared with the SCRAM mechanisms, as in ZooKeeper), ``/config/users/<user>/clients/<client>``,
``/config/clients/<client>``, ``<default>`` standing for a default entity.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import (
    error_failed,
    error_name,
    raise_if_error,
    report_error,
)
from kraftlog.cli._common import (
    UserError,
    topic_id_text,
)
from kraftlog.common import METADATA_PARTITION_DIR
from kraftlog.metadata_log import ConfigResourceType


@dataclass
class TreeImage:
    """What the tree is drawn from, offline or online, in one shape.

    Offline it is filled from a replayed `MetadataImage`; online from admin responses. Fields that
    one side cannot know stay None (offline: the current controller; online: producer ids).
    """

    source: str
    offset: int | None = None
    epoch: int | None = None
    timestamp_ms: int | None = None
    cluster_id: str | None = None
    controller_id: int | None = None
    controller_epoch: int | None = None
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    # name -> {"topic_id": str, "partitions": {pid: state dict with replicas/adding/removing}}
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)  # "" = cluster default
    next_producer_id: int | None = None
    # ZooKeeper ACL node path -> its ACL entries; None online (not served yet)
    acls: dict[str, list[dict[str, str]]] | None = None
    # user -> {SCRAM mechanism name: iterations}; None online (not served yet)
    scram_users: dict[str, dict[str, int]] | None = None
    # ZooKeeper quota node path -> {quota key: value text}
    quotas: dict[str, dict[str, str]] = field(default_factory=dict)


def _endpoint_text(ep: Any) -> str:
    return f"{ep.name}://{ep.host}:{ep.port}"


def _zk_host_port(endpoints: Any) -> tuple[str | None, int]:
    """ZooKeeper's top-level ``host``/``port`` of a broker: its first PLAINTEXT endpoint, else
    null and -1 (as Kafka wrote them since listeners arrived)."""
    for ep in endpoints:
        if ep.security_protocol == "PLAINTEXT":
            return ep.host, ep.port
    return None, -1


def _tree_from_image(image: Any, provenance: Any, source: str, cluster_id: str | None) -> TreeImage:
    tree = TreeImage(
        source=source,
        offset=image.offset,
        epoch=image.epoch,
        timestamp_ms=image.timestamp_ms,
        cluster_id=cluster_id,
        controller_epoch=image.epoch if image.epoch >= 0 else None,
    )
    for bid in sorted(image.cluster.brokers):
        reg = image.cluster.brokers[bid]
        host, port = _zk_host_port(reg.endpoints)
        tree.brokers[bid] = {
            "host": host,
            "port": port,
            "timestamp": provenance.broker_registered_ms.get(bid),
            "endpoints": [_endpoint_text(ep) for ep in reg.endpoints],
            "listener_security_protocol_map": {ep.name: ep.security_protocol for ep in reg.endpoints},
            "rack": reg.rack,
            "epoch": reg.broker_epoch,
            "fenced": reg.fenced,
            "in_controlled_shutdown": reg.in_controlled_shutdown,
            "incarnation_id": topic_id_text(reg.incarnation_id),
        }
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        parts = {}
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            parts[pid] = {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "controller_epoch": provenance.partition_epochs.get((topic.topic_id, pid)),
            }
        tree.topics[name] = {"topic_id": topic_id_text(topic.topic_id), "partitions": parts}
    for (rtype, rname), values in image.configs.resources.items():
        if rtype == ConfigResourceType.TOPIC:
            tree.topic_configs[rname] = dict(values)
        elif rtype == ConfigResourceType.BROKER:
            tree.broker_configs[rname] = dict(values)
    if image.producer_ids.next_producer_id > 0:
        tree.next_producer_id = image.producer_ids.next_producer_id
    tree.acls = _acl_nodes(image.acls.acls.values())
    tree.scram_users = {
        user: {mechanism.mechanism_name: iterations for mechanism, iterations in image.scram.describe(user)}
        for user in image.scram.users()
    }
    tree.quotas = quota_nodes(image.quotas.entities.items())
    return tree


def _quota_value_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _quota_name(name: str | None) -> str:
    return "<default>" if name is None else _zk_sanitize(name)


def quota_nodes(entities: Any) -> dict[str, dict[str, str]]:
    """ZooKeeper quota node path -> its config, for ``(entity, values)`` pairs (an entity being
    ``(entity_type, name or None)`` pairs); ip entities under ``/config/ips``."""
    nodes: dict[str, dict[str, str]] = {}
    for entity, values in entities:
        parts = dict(entity)
        if "user" in parts and "client-id" in parts:
            path = f"/config/users/{_quota_name(parts['user'])}/clients/{_quota_name(parts['client-id'])}"
        elif "user" in parts:
            path = f"/config/users/{_quota_name(parts['user'])}"
        elif "client-id" in parts:
            path = f"/config/clients/{_quota_name(parts['client-id'])}"
        elif "ip" in parts:
            path = f"/config/ips/{_quota_name(parts['ip'])}"
        else:
            continue
        nodes[path] = {key: _quota_value_text(v) for key, v in sorted(values.items())}
    return nodes


# Kafka's ZooKeeper ACL stores: LITERAL patterns under /kafka-acl, every other pattern type under
# /kafka-acl-extended/<pattern type in lower case> (LiteralAclStore / ExtendedAclStore).
_LITERAL_ACL_ROOT = "/kafka-acl"
_EXTENDED_ACL_ROOT = "/kafka-acl-extended"


def _acl_path(binding: Any) -> str:
    root = _LITERAL_ACL_ROOT
    if binding.pattern_type.name != "LITERAL":
        root = f"{_EXTENDED_ACL_ROOT}/{binding.pattern_type.name.lower()}"
    return f"{root}/{binding.resource_type.display_name}/{binding.resource_name}"


def _acl_nodes(bindings: Any) -> dict[str, list[dict[str, str]]]:
    """The ACL entries of each ZooKeeper ACL node, in Kafka's JSON shape (``AclEntry.toMap``),
    sorted so the output is stable."""
    nodes: dict[str, list[dict[str, str]]] = {}
    for b in bindings:
        nodes.setdefault(_acl_path(b), []).append(
            {
                "host": b.host,
                "permissionType": b.permission_type.display_name,
                "operation": b.operation.display_name,
                "principal": b.principal,
            }
        )
    for entries in nodes.values():
        entries.sort(key=lambda e: (e["principal"], e["host"], e["operation"], e["permissionType"]))
    return nodes


def _zk_sanitize(name: str) -> str:
    """A user name as a ZooKeeper config node name (Kafka's ``Sanitizer.sanitize``: URL encoding in
    UTF-8 with ``%20`` for a space and ``%2A`` for ``*``; Java's encoder also encodes ``~``)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def _path_order(path: str) -> tuple[Any, ...]:
    """Sort key: path components, numbers numerically (partition 10 after 9)."""
    return tuple((0, int(c), "") if c.isdigit() else (1, 0, c) for c in path.split("/"))


# ZooKeeper's data versions of the nodes drawn here, as Kafka 3.x wrote them: broker registration
# v5 (with features), topic assignment v3 (with topic_id); partition state, config and producer-id
# block nodes are version 1.
_ZK_BROKER_VERSION = 5
_ZK_TOPIC_VERSION = 3


def _config_node(values: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "config": dict(sorted(values.items()))}


def tree_nodes(tree: TreeImage) -> list[tuple[str, Any]]:
    """The ZooKeeper nodes of ``tree`` as ``(path, data)``, in tree order."""
    nodes: list[tuple[str, Any]] = []
    reassigning = []
    for name, topic in tree.topics.items():
        for pid, p in topic["partitions"].items():
            if p["adding_replicas"] or p["removing_replicas"]:
                reassigning.append(
                    {
                        "topic": name,
                        "partition": pid,
                        "replicas": p["replicas"],
                        "target_replicas": [r for r in p["replicas"] if r not in p["removing_replicas"]],
                        "adding_replicas": p["adding_replicas"],
                        "removing_replicas": p["removing_replicas"],
                    }
                )
    if reassigning:
        reassigning.sort(key=lambda r: (r["topic"], r["partition"]))
        nodes.append(("/admin/reassign_partitions", {"version": 1, "partitions": reassigning}))
    for bid, data in tree.brokers.items():
        registered_ms = data.get("timestamp")
        nodes.append(
            (
                f"/brokers/ids/{bid}",
                {
                    "version": _ZK_BROKER_VERSION,
                    **data,
                    "timestamp": None if registered_ms is None else str(registered_ms),
                    "jmx_port": -1,
                },
            )
        )
    for name, topic in tree.topics.items():
        parts = topic["partitions"]
        data = {
            "version": _ZK_TOPIC_VERSION,
            "topic_id": topic["topic_id"],
            "partitions": {str(pid): p["replicas"] for pid, p in parts.items()},
            "adding_replicas": {str(pid): p["adding_replicas"] for pid, p in parts.items() if p["adding_replicas"]},
            "removing_replicas": {
                str(pid): p["removing_replicas"] for pid, p in parts.items() if p["removing_replicas"]
            },
        }
        nodes.append((f"/brokers/topics/{name}", data))
        for pid, p in parts.items():
            nodes.append(
                (
                    f"/brokers/topics/{name}/partitions/{pid}/state",
                    {
                        "version": 1,
                        "controller_epoch": p["controller_epoch"],
                        "leader": p["leader"],
                        "leader_epoch": p["leader_epoch"],
                        "isr": p["isr"],
                        "partition_epoch": p["partition_epoch"],
                    },
                )
            )
    if tree.cluster_id:
        nodes.append(("/cluster/id", {"version": "1", "id": tree.cluster_id}))
    for name in tree.topics:  # every topic has a config node, as in ZooKeeper (empty: defaults)
        nodes.append((f"/config/topics/{name}", _config_node(tree.topic_configs.get(name, {}))))
    for rname, values in tree.broker_configs.items():
        if values:
            nodes.append((f"/config/brokers/{rname or '<default>'}", _config_node(values)))
    if tree.controller_id is not None:
        # the shape a KRaft controller writes to /controller during a ZooKeeper migration
        controller = {"version": 2, "brokerid": tree.controller_id}
        if tree.controller_epoch is not None:
            controller["kraftControllerEpoch"] = tree.controller_epoch
        nodes.append(("/controller", controller))
    if tree.controller_epoch is not None:
        nodes.append(("/controller_epoch", tree.controller_epoch))
    if tree.next_producer_id is not None:
        nodes.append(("/latest_producer_id_block", {"version": 1, "next_producer_id": tree.next_producer_id}))
    for path, entries in (tree.acls or {}).items():
        nodes.append((path, {"version": 1, "acls": entries}))
    configs: dict[str, dict[str, str]] = {path: dict(values) for path, values in tree.quotas.items()}
    for user, mechanisms in (tree.scram_users or {}).items():
        config = configs.setdefault(f"/config/users/{_zk_sanitize(user)}", {})
        config.update({name: f"iterations={iterations}" for name, iterations in mechanisms.items()})
    for path, config in configs.items():
        nodes.append((path, _config_node(config)))
    nodes.sort(key=lambda n: _path_order(n[0]))
    return nodes


def _metadata_dir(text: str) -> Path:
    d = Path(text)
    if not d.exists():
        raise UserError(f"--log-dir {d}: no such directory")
    if not d.is_dir():
        raise UserError(f"--log-dir {d}: not a directory")
    return d / METADATA_PARTITION_DIR if (d / METADATA_PARTITION_DIR).is_dir() else d


def _cluster_id_near(*dirs: Path) -> str | None:
    """The cluster id of the ``meta.properties`` in one of ``dirs`` (or their parents), if any."""
    try:
        from kraftlog import storage
    except ImportError:
        return None
    seen: set[Path] = set()
    for d in dirs:
        for candidate in (d, d.parent):
            if candidate in seen:
                continue
            seen.add(candidate)
            try:
                meta = storage.read_meta_properties(candidate)
            except Exception:  # a damaged meta.properties does not stop the tree
                meta = None
            if meta is not None:
                return meta.cluster_id
    return None


def image_from_files(
    snapshot: str | None, log_dir: str | None, as_of_offset: int | None = None
) -> tuple[Any, Any, list[str]]:
    """Replay a snapshot and/or a metadata log dir offline.

    Returns the image, its `MetadataProvenance` (the controller epoch that last wrote each
    partition, ZooKeeper's ``controller_epoch`` of the partition state, and each broker's
    registration time), and notes for stderr (torn tails, a log that ends before ``as_of_offset``). Raises UserError for
    bad arguments and lets the readers' errors (corrupt files, gaps) through.
    """
    from kraftlog import metadata_log

    notes: list[str] = []
    provenance = metadata_log.MetadataProvenance()
    mdir = _metadata_dir(log_dir) if log_dir is not None else None
    if (
        mdir is not None
        and snapshot is None
        and not metadata_log.list_segments(mdir)
        and not metadata_log.list_snapshots(mdir)
    ):
        raise UserError(
            f"--log-dir {log_dir}: no metadata log segments or snapshots there (give the "
            f"node's metadata.log.dir or its {METADATA_PARTITION_DIR} directory)"
        )
    snap = None
    if snapshot is not None:
        p = Path(snapshot)
        if not p.is_file():
            raise UserError(f"--snapshot {p}: no such file")
        snap = metadata_log.read_snapshot(p)
        if as_of_offset is not None and as_of_offset < snap.offset:
            raise UserError(f"--as-of-offset {as_of_offset} is before the snapshot's offset {snap.offset}")
    elif mdir is not None:
        candidates = sorted(metadata_log.list_snapshots(mdir), key=lambda s: s.offset)
        if as_of_offset is not None:
            candidates = [s for s in candidates if s.offset <= as_of_offset]
        if candidates:
            snap = metadata_log.read_snapshot(candidates[-1].path)
    image = metadata_log.MetadataImage.EMPTY
    start = 0
    if snap is not None:
        image = metadata_log.MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
        provenance = metadata_log.MetadataProvenance.from_snapshot(snap.records, snap.epoch, snap.timestamp_ms)
        start = snap.offset + 1
    if mdir is None:
        return image, provenance, notes

    def on_torn(path: Path, bad: Any) -> None:
        notes.append(f"torn tail in {path} at position {bad.position} ({bad.reason}); the entries after it are ignored")

    delta = metadata_log.MetadataDelta(image)
    replayed = 0
    for entry in metadata_log.read_log_dir(mdir, from_offset=start, on_torn=on_torn):
        if as_of_offset is not None and entry.offset > as_of_offset:
            break
        delta.replay(entry)
        provenance.observe(entry)
        replayed += 1
    if replayed:
        image = delta.apply()
    if as_of_offset is not None and image.offset < as_of_offset:
        notes.append(f"the metadata log ends at offset {image.offset}, before --as-of-offset {as_of_offset}")
    return image, provenance, notes


def _offline_tree(args: argparse.Namespace) -> TreeImage:
    image, provenance, notes = image_from_files(args.snapshot, args.log_dir, args.as_of_offset)
    for note in notes:
        print(f"kraftlog metadata: warning: {note}", file=sys.stderr)
    sources = []
    dirs: list[Path] = []
    if args.snapshot is not None:
        sources.append(f"snapshot {args.snapshot}")
        dirs.append(Path(args.snapshot).resolve().parent)
    if args.log_dir is not None:
        sources.append(f"log dir {args.log_dir}")
        d = Path(args.log_dir).resolve()
        dirs += [d, d / METADATA_PARTITION_DIR]
    return _tree_from_image(image, provenance, " + ".join(sources), _cluster_id_near(*dirs))


def _online_tree(admin: Any, args: argparse.Namespace) -> TreeImage:
    cluster = admin.describe_cluster()
    raise_if_error(cluster.error)
    quorum = admin.describe_quorum()
    raise_if_error(quorum.error)
    topics = admin.describe_topics([])
    tree = TreeImage(
        source="cluster " + ",".join(args.bootstrap_server),
        cluster_id=cluster.cluster_id or None,
        controller_id=quorum.leader_id if quorum.leader_id >= 0 else None,
        controller_epoch=quorum.leader_epoch,
    )
    for b in sorted(cluster.brokers, key=lambda b: b.broker_id):
        plaintext = b.security_protocol == "PLAINTEXT"
        tree.brokers[b.broker_id] = {
            "host": b.host if b.host and plaintext else None,
            "port": b.port if b.host and plaintext else -1,
            "timestamp": b.registration_timestamp_ms if b.HasField("registration_timestamp_ms") else None,
            "endpoints": [f"{b.security_protocol or 'PLAINTEXT'}://{b.host}:{b.port}"] if b.host else [],
            "rack": b.rack or None,
            "epoch": b.broker_epoch,
            "fenced": b.fenced,
            "in_controlled_shutdown": b.in_controlled_shutdown,
        }
    for t in sorted(topics.topics, key=lambda t: t.name):
        raise_if_error(t.error)
        parts = {}
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            parts[p.partition_index] = {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "controller_epoch": p.controller_epoch if p.HasField("controller_epoch") else None,
            }
        tree.topics[t.name] = {"topic_id": topic_id_text(t.topic_id), "partitions": parts}
        if t.configs:
            tree.topic_configs[t.name] = dict(t.configs)
    resources = [(ConfigResourceType.BROKER, str(bid)) for bid in tree.brokers] + [(ConfigResourceType.BROKER, "")]
    configs = admin.describe_configs(resources)
    for result in configs.results:
        if error_failed(result.error):
            report_error(
                args,
                f"configs of broker {result.resource.resource_name or '<default>'}: "
                f"{error_name(result.error)}: {result.error.message}",
            )
            continue
        wanted = "DYNAMIC_BROKER_CONFIG" if result.resource.resource_name else "DYNAMIC_DEFAULT_BROKER_CONFIG"
        values: dict[str, str | None] = {
            e.name: (e.value if e.has_value and not e.is_sensitive else None)
            for e in result.configs
            if e.source == wanted
        }
        if values:
            tree.broker_configs[result.resource.resource_name] = values
    try:
        tree.quotas = quota_nodes(admin.describe_client_quotas())
    except Exception as err:  # an older cluster, or no DescribeConfigs on the cluster: say so
        report_error(args, f"client quotas: {err}")
    return tree
