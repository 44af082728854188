"""The Raft identity a controller starts its quorum with (`quorum.raft.NodeIdentity`, ``node-key``
mode; None in ``password`` mode): its own key, the public key of every voter it starts with, and its
metadata log dir's directory id.

Where the voters' keys come from (issue 26, KIP-853): ``controller.quorum.raft.voter.keys``, and in
a dynamic quorum also the committed voter set this controller kept beside its Raft log
(``raft/voters.msgpack``, `quorum.raft.read_voters_file`), whose keys win over configured ones of
the same ids. A voter added at run time carries its key in the voter change, so every voter that
committed the change has it on disk: a restarted voter needs only its own key configured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from kraftlog.common import RAFT_DIR
from kraftlog.common.errors import CorruptMessageError
from kraftlog.common.security import TlsSettings, client_context, listener_prefix, listener_protocol, server_context
from kraftlog.quorum.raft import NodeIdentity, RaftTls, identity_from_config, kraft_version_of, read_voters_file
from kraftlog.storage import read_meta_properties

__all__ = ["kept_kraft_version", "raft_identity"]


def kept_kraft_version(metadata_log_dir: str | Path) -> int:
    """The kraft.version of the committed voter set this controller's Raft dir kept
    (``raft/voters.msgpack``): 1 once a static quorum was upgraded (every voter has a directory
    id), else 0 -- also for no file or an undecodable one (the Raft log still says who votes)."""
    try:
        kept = read_voters_file(Path(metadata_log_dir) / RAFT_DIR)
    except CorruptMessageError:
        return 0
    return kraft_version_of(kept) if kept is not None else 0


def raft_identity(config: Any, *, node_id: int, voter_ids: Collection[int], dynamic: bool) -> NodeIdentity | None:
    """The identity for ``node_id`` starting with voters ``voter_ids`` (this node may be an
    observer, outside them). Raises ``ConfigError`` naming the key for a bad combination, and
    ``CorruptMessageError`` for an undecodable voter file."""
    committed = read_voters_file(Path(config.metadata_log_dir) / RAFT_DIR) if dynamic else None
    identity = identity_from_config(
        config,
        node_id=node_id,
        voters=set(voter_ids) | {node_id},
        metadata_log_dir=config.metadata_log_dir,
        dynamic=dynamic,
        committed_keys={vid: v.public_key for vid, v in (committed or {}).items() if v.public_key},
    )
    if identity is None:
        return None
    meta = read_meta_properties(Path(config.metadata_log_dir))
    keys = {vid: k for vid, k in identity.voter_keys.items() if vid in voter_ids}
    return dataclasses.replace(identity, voter_keys=keys, directory_id=meta.directory_id if meta is not None else None)


#: the listener whose security the Raft port follows (Kafka runs Raft over the CONTROLLER listener)
_CONTROLLER_LISTENER = "CONTROLLER"


def raft_tls(config: Mapping[str, object]) -> RaftTls | None:
    """TLS for the Raft port when the CONTROLLER listener is SSL or SASL_SSL (issue 26), else None.

    It uses that listener's ``ssl.*`` settings (``listener.name.controller.``-prefixed values
    winning) with certificates always required on both sides, whatever ``ssl.client.auth`` says:
    the peer's certificate is what names its node id (``CN=node-<id>``, `quorum.raft._raft_tls`),
    so a TLS Raft port needs every controller's certificate and a trust store. Raises
    ``TlsConfigError`` naming the key when the material is missing or does not load."""
    if listener_protocol(config, _CONTROLLER_LISTENER) not in ("SSL", "SASL_SSL"):
        return None
    settings = TlsSettings.from_config(config, listener_prefix(_CONTROLLER_LISTENER))
    settings = dataclasses.replace(settings, client_auth="required", endpoint_identification_algorithm="")
    return RaftTls(server=server_context(settings), client=client_context(settings))
