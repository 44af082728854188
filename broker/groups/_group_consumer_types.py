"""Values of KIP-848 consumer groups: the member, the heartbeat request and its answer, the
group's configuration, and the reconciliation of one member towards its target assignment
(Kafka's ``CurrentAssignmentBuilder``)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kraftlog.broker.groups._group_records_consumer import Assignment, TopicMetadata, assignment_of
from kraftlog.common import errors as kerr

__all__ = [
    "MemberState",
    "ConsumerMember",
    "ConsumerGroupConfig",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "ConsumerGroupState",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "as_map",
    "check_epoch",
    "reconcile",
    "subscription_metadata",
]

Error = type[kerr.KafkaError] | None
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must give up partitions before it gets more
    UNRELEASED_PARTITIONS = 2  # waits for partitions other members still own
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch is past the target assignment's
    RECONCILING = "Reconciling"  # some member has not reached the target yet
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = ()
    pending_revocation: Assignment = ()

    def with_epoch(self, epoch: int) -> ConsumerMember:
        """The member at ``epoch``; the one it had becomes the previous (Kafka's updateMemberEpoch)."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
    regex_refresh_interval_ms: int = 600_000  # group.consumer.regex.refresh.interval.ms
    # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (a constant there): the least time between two
    # resolutions of one group's regexes
    regex_refresh_min_interval_ms: int = 10_000


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat. ``None`` means "unchanged" for the optional fields, as in Kafka."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    #: the topics, of those a regex matched, the heartbeating member may Describe (KAFKA-18813:
    #: a regex resolves only to topics its member is authorized to see); None: all of them
    describable: Callable[[frozenset[str]], frozenset[str]] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class HeartbeatResponse:
    error: Error = None
    message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member was last told


def as_map(assignment: Assignment) -> dict[str, set[int]]:
    return {t: set(ps) for t, ps in assignment}


def _owns_any(owned: Assignment | None, partitions: Mapping[str, set[int]]) -> bool:
    """Whether the member (by what it says it owns) still holds any of ``partitions``; a member
    that did not say (``None``) is taken to hold them."""
    if owned is None:
        return True
    return any(p in partitions.get(t, set()) for t, ps in owned for p in ps)


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[str, int], int],
    owned: Assignment | None,
) -> ConsumerMember:
    """The member's next step towards ``target`` (Kafka's CurrentAssignmentBuilder): partitions it
    must give up are revoked first (UNREVOKED_PARTITIONS, its epoch unchanged) and only once it says
    it no longer owns them does it move to the target epoch; partitions another member still owns
    (``partition_epoch`` != -1) are withheld (UNRELEASED_PARTITIONS) until they are free. A member
    in an UNKNOWN state must come back owning nothing (FENCED_MEMBER_EPOCH otherwise)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, as_map(member.pending_revocation)):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise kerr.FencedMemberEpochError(
            "the member is in an unknown state; it must give up its partitions and rejoin"
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(
    member: ConsumerMember,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[str, int], int],
    owned: Assignment | None,
) -> ConsumerMember:
    goal, current = as_map(target), as_map(member.assigned)
    assigned: dict[str, set[int]] = {}
    revoking: dict[str, set[int]] = {}
    adding: dict[str, set[int]] = {}
    unreleased = False
    for topic_id in set(goal) | set(current):
        want, have = goal.get(topic_id, set()), current.get(topic_id, set())
        assigned[topic_id] = have & want
        revoking[topic_id] = have - want
        free = set()
        for p in want - have:
            if partition_epoch(topic_id, p) != -1:
                unreleased = True
            else:
                free.add(p)
        adding[topic_id] = free
    revoking = {t: ps for t, ps in revoking.items() if ps}
    adding = {t: ps for t, ps in adding.items() if ps}
    if revoking and _owns_any(owned, revoking):
        return replace(
            member.with_epoch(epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assignment_of(assigned),
            pending_revocation=assignment_of(revoking),
        )
    for t, ps in adding.items():
        assigned.setdefault(t, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(
        member.with_epoch(target_epoch), state=state, assigned=assignment_of(assigned), pending_revocation=()
    )


def check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
    """Kafka's epoch check: a member ahead of the coordinator, or behind it other than by one lost
    answer (its previous epoch, owning a subset of what it is assigned), is fenced."""
    if received > member.member_epoch:
        raise kerr.FencedMemberEpochError(
            f"member epoch {received} is ahead of the coordinator's {member.member_epoch}; rejoin"
        )
    if received < member.member_epoch:
        assigned = as_map(member.assigned)
        subset = owned is not None and all(p in assigned.get(t, set()) for t, ps in owned for p in ps)
        if received != member.previous_member_epoch or not subset:
            raise kerr.FencedMemberEpochError(
                f"member epoch {received} is behind the coordinator's {member.member_epoch}; rejoin"
            )


def subscription_metadata(
    topics: set[str], lookup: Callable[[str], tuple[str, int] | None]
) -> dict[str, TopicMetadata]:
    """The subscribed topics that exist, with their ids and partition counts, by name (sorted)."""
    out: dict[str, TopicMetadata] = {}
    for name in sorted(topics):
        found = lookup(name)
        if found is not None:
            out[name] = TopicMetadata(found[0], name, found[1])
    return out
