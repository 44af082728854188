"""Requests, responses and members of the classic group protocol, as the coordinator core sees them.

The wire formats (gRPC today, Kafka's protocol later) translate to and from these; the core
(`kraftlog.broker.groups._group_classic`) never sees a socket. A response carries its error as one of
Kafka's error classes (`kraftlog.common.errors`), None for success.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kraftlog.common import errors as kerr

__all__ = [
    "GroupState",
    "ClassicGroupConfig",
    "Protocol",
    "JoinRequest",
    "JoinedMember",
    "JoinResponse",
    "SyncRequest",
    "SyncResponse",
    "LeaveResult",
    "ClassicMember",
    "UNKNOWN_MEMBER_ID",
    "NO_GENERATION",
    "CONSUMER_PROTOCOL_TYPE",
    "subscription_topics",
]

UNKNOWN_MEMBER_ID = ""
CONSUMER_PROTOCOL_TYPE = "consumer"  # the protocol type of Kafka's consumers (ConsumerProtocol)
NO_GENERATION = -1
ErrorType = type[kerr.KafkaError] | None


class GroupState(Enum):
    """Kafka's classic group states, with the names Kafka's tools print."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: the states each state may be entered from (Kafka's ClassicGroupState)
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True)
class ClassicGroupConfig:
    """The broker settings a classic group obeys (Kafka's names, in ms)."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's fixed 5 minutes for a new member's first join
    max_size: int = 2**31 - 1  # group.max.size


@dataclass(frozen=True)
class Protocol:
    """One assignment protocol a member supports (name, e.g. ``range``, and its subscription)."""

    name: str
    metadata: bytes


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    #: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its id (KIP-394)
    requires_known_member_id: bool = True
    #: JoinGroup v9+: a static leader rejoining a stable group may skip assignment (KIP-814)
    supports_skip_assignment: bool = True


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResponse:
    error: ErrorType
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()  # only the leader gets them


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()  # the leader's: member id -> assignment


@dataclass(frozen=True)
class SyncResponse:
    error: ErrorType
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeaveResult:
    """One member of a LeaveGroup request: its ids and its error."""

    member_id: str
    group_instance_id: str | None
    error: ErrorType


@dataclass
class ClassicMember:
    """A member as the coordinator keeps it. ``join_waiter`` / ``sync_waiter`` are the caller's
    tokens of the JoinGroup / SyncGroup request parked for this member (None: none parked)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: object | None = None
    sync_waiter: object | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting in a rebalance needs no heartbeat, except a new one (it may expire)."""
        return False if self.is_new else self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol_name: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer's ConsumerProtocolSubscription (every version starts with an int16
    version and the topic names, int32 count and int16-length strings), None if unreadable."""
    try:
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        if len(metadata) < 6 or count < 0:
            return None
        pos, topics = 6, set()
        for _ in range(count):
            size = int.from_bytes(metadata[pos : pos + 2], "big", signed=True)
            if size < 0 or pos + 2 + size > len(metadata):
                return None
            topics.add(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except UnicodeDecodeError:
        return None
