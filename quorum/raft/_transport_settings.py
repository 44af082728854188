"""What `quorum.raft._transport.RaftTransport` is configured with, and the node standing for an observer.

Kept apart from the transport so the settings (built by `quorum.raft._raft_quorum`) can be read
without the connection machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pysyncobj.node import Node

from kraftlog.quorum.raft._identity import NodeIdentity, ObserverPeer
from kraftlog.quorum.raft._raft_tls import RaftTls

__all__ = ["MAX_OBSERVERS", "ObserverNode", "TransportSettings"]

#: observers a voter tracks at most (a dynamic quorum's controllers not in the voter set, issue 26)
MAX_OBSERVERS: Final = 16


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """What the transport needs beyond pysyncobj's conf (`MetadataQuorum` builds it)."""

    node_id: int
    #: voter id -> Raft ``host:port``, this node included
    voters: Mapping[int, str]
    cluster_id: str
    #: the shared-password key (``password`` mode); unused when ``identity`` is set
    auth_key: bytes
    bind_host: str
    handshake_timeout_s: float = 2.0
    max_unauthenticated: int = 32
    backlog: int = 256
    #: this node's own key and every voter's public key (``node-key`` mode, `quorum.raft._identity`)
    identity: NodeIdentity | None = None
    #: this node starts as an observer (not in ``voters``): it dials every voter and accepts no one
    observer: bool = False
    #: accept observers' connections (``node-key`` mode only): they get the log, never a vote
    admit_observers: bool = False
    #: the most observers tracked at once (see `quorum.raft._transport`'s docstring)
    max_observers: int = MAX_OBSERVERS
    #: TLS on the Raft port, the peer's certificate bound to its node id (`quorum.raft._raft_tls`);
    #: None: the handshake's key (``node-key``) or shared password alone
    tls: RaftTls | None = None


class ObserverNode(Node):
    """pysyncobj's read-only node standing for one connected observer (its leader sends it entries
    and never counts it towards a commit)."""

    def __init__(self, observer: ObserverPeer) -> None:
        super().__init__(f"observer-{observer.node_id}")
        self.kl_observer = observer
