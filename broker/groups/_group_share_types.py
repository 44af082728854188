"""Values of share groups (KIP-932): the member, the heartbeat request and its answer, the group's
configuration and state, the request checks that depend on no group, the job that has a group's
share-partition state initialized, and the subscribed topics' metadata hash."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraftlog.broker.groups._group_records_consumer import Assignment
from kraftlog.broker.groups._group_share_assignor import SHARE_ASSIGNORS
from kraftlog.common import errors as kerr

__all__ = [
    "LEAVE_EPOCH",
    "SHARE_PROTOCOL_TYPE",
    "ShareGroupConfig",
    "ShareGroupState",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResponse",
    "ShareInitJob",
    "ShareMembersGone",
    "ShareMember",
    "metadata_hash",
    "validate_share_heartbeat",
]

Error = type[kerr.KafkaError] | None
LEAVE_EPOCH = -1
SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0  # Kafka's MemberState; a share member is always STABLE (0)
    assigned: Assignment = ()


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    assignors: tuple[str, ...] = SHARE_ASSIGNORS  # group.share.assignors (exactly one)
    # Kafka's group.share.initialize.retry.interval.ms (internal there): how long a partition stays
    # "initializing" before a heartbeat asks for its state again (at least offsets.commit.timeout.ms)
    initialize_retry_interval_ms: int = 30_000


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    """ShareGroupHeartbeat (v1: the member id is the client's own). ``None``: unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResponse:
    error: Error = None
    message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member was last told


@dataclass(frozen=True)
class ShareInitJob:
    """Partitions whose share-group state is to be initialized (Kafka's
    InitializeShareGroupStateParameters), handed out once the heartbeat that marked them
    "initializing" is written: topic id -> (topic name, partitions)."""

    group_id: str
    group_epoch: int
    topics: tuple[tuple[str, str, tuple[int, ...]], ...]

    def partitions(self) -> dict[str, set[int]]:
        return {t: set(ps) for t, _name, ps in self.topics}


@dataclass(frozen=True)
class ShareMembersGone:
    """Members that left a share group (a heartbeat with epoch -1) or whose session ended, handed
    out once the records removing them are written: the share partitions give back the records
    they hold at once (Kafka's ShareGroupListener ``onMemberLeave``), not when their locks end."""

    group_id: str
    member_ids: tuple[str, ...]


def validate_share_heartbeat(req: ShareHeartbeatRequest) -> kerr.KafkaError | None:
    """Kafka's checks of a ShareGroupHeartbeat that depend on no group (GroupCoordinatorService)."""
    if not req.member_id:
        return kerr.InvalidRequestError("MemberId can't be empty.")
    if not req.group_id:
        return kerr.InvalidRequestError("GroupId can't be empty.")
    if req.rack_id == "":
        return kerr.InvalidRequestError("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            return kerr.InvalidRequestError("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        return kerr.InvalidRequestError("MemberEpoch is invalid.")
    return None


def metadata_hash(topics: Iterable[str], lookup: Callable[[str], tuple[str, int] | None]) -> int:
    """The subscribed topics' metadata hash (Kafka's ModernGroup.computeMetadataHash): a signed
    64-bit digest of each existing topic's name, id and partition count, in name order; 0 for
    none. Its role is Kafka's: when it changes, the group epoch is bumped. (Kafka digests with
    XXH3; a Kafka broker loading kraftlog's records sees another value and bumps the epoch once,
    which is all a changed hash does.)"""
    digest = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(set(topics)):
        topic = lookup(name)
        if topic is None:
            continue
        found = True
        digest.update(f"{name}\x00{topic[0]}\x00{topic[1]}\x00".encode())
    return int.from_bytes(digest.digest(), "big", signed=True) if found else 0
