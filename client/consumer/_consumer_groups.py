"""The consumer's group side (a mixin of `kraftlog.client.Consumer`): `subscribe` with a listener,
rebalances driven from `poll`, positions starting from committed offsets, `commit`,
`commit_async`, `committed`, and auto commit every ``auto_commit_interval_ms`` (and before
partitions are given up, and on close), as Kafka's consumer does with a ``group.id``."""

from __future__ import annotations

import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.assignors import (
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from kraftlog.client.consumer._consumer_group import CommitFailedError, GroupMembership, RebalanceListener
from kraftlog.client.consumer._consumer_membership import ConsumerProtocolMembership
from kraftlog.client.consumer._fetched import CompletedFetch
from kraftlog.client.consumer._interceptors import ConsumerInterceptors
from kraftlog.client.consumer._positions import PartitionState
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

__all__ = ["_ConsumerGroups", "OffsetAndMetadata", "make_assignors", "ASSIGNOR_NAMES"]

_log = structlog.get_logger("kraftlog.client.consumer._consumer")

#: ``partition.assignment.strategy`` values: Kafka's short names and its class names
ASSIGNOR_NAMES: dict[str, Callable[[], PartitionAssignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.StickyAssignor": StickyAssignor,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor,
}


def make_assignors(strategy: str | Iterable[str]) -> list[PartitionAssignor]:
    """Assignors for ``partition.assignment.strategy`` (a comma-separated string or names), in
    preference order; an unknown name is refused naming it."""
    names = [n.strip() for n in strategy.split(",")] if isinstance(strategy, str) else [n.strip() for n in strategy]
    out: list[PartitionAssignor] = []
    for name in filter(None, names):
        factory = ASSIGNOR_NAMES.get(name)
        if factory is None:
            raise ValueError(
                f"partition.assignment.strategy: unknown assignor {name!r} (one of range, roundrobin, sticky, "
                "cooperative-sticky)"
            )
        out.append(factory())
    if not out:
        raise ValueError("partition.assignment.strategy names no assignor")
    return out


class ConsumerGroupMetadata(NamedTuple):
    """Who this consumer is in its group right now (Kafka's ``ConsumerGroupMetadata``): what
    ``send_offsets_to_transaction`` needs, and what a caller needs to tell generations apart.
    ``generation_id`` is the classic protocol's generation, or the member's epoch under KIP-848."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class OffsetAndMetadata(tuple[int, str, int]):
    """A committed offset: ``offset``, ``metadata``, ``leader_epoch`` (-1: unknown)."""

    __slots__ = ()

    def __new__(cls, offset: int, metadata: str = "", leader_epoch: int = -1) -> OffsetAndMetadata:
        return super().__new__(cls, (offset, metadata, leader_epoch))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def metadata(self) -> str:
        return self[1]

    @property
    def leader_epoch(self) -> int:
        return self[2]


class _ConsumerGroups:
    """Group membership and committed offsets; state lives on the Consumer."""

    group_id: str | None
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    default_api_timeout_ms: int
    metadata_max_age_ms: int
    _pool: ChannelPool
    _metadata: ClusterMetadata
    _assignment: dict[TopicPartition, PartitionState]
    _buffer: deque[CompletedFetch]
    _group: GroupMembership | ConsumerProtocolMembership | None
    _subscription: set[str] | None
    _pattern: re.Pattern[str] | None
    _listener: RebalanceListener | None
    _next_auto_commit: float
    _pattern_refresh: float
    _assigned_counts: dict[str, int]
    _awaiting_committed: set[TopicPartition]
    _async_commits: Any
    _interceptors: ConsumerInterceptors

    if TYPE_CHECKING:

        def _default_reset(self) -> int | None: ...

        def _timeout(self, timeout_ms: int | None) -> int: ...

    request_timeout_ms: int

    # ================================================================ subscribing

    def subscribe(
        self, topics: Iterable[str] | str | re.Pattern[str], listener: RebalanceListener | None = None
    ) -> None:
        """Join the group for ``topics`` (names, or a regex pattern matched against every topic);
        partitions come from the group at the next `poll`."""
        if self._group is None:
            raise kerr.InvalidGroupIdError("subscribe needs a group_id (group.id)")
        if self._assignment and self._subscription is None and self._pattern is None:
            raise RuntimeError("Subscription to topics, partitions and pattern are mutually exclusive")
        if isinstance(topics, re.Pattern):
            self._pattern, self._subscription = topics, set()
            self._pattern_refresh = 0.0
        elif isinstance(topics, str):
            raise TypeError("subscribe takes a list of topic names or a compiled pattern, not one string")
        else:
            self._pattern, self._subscription = None, set(topics)
            self._metadata.add_topics(self._subscription)
        self._listener = listener
        self._group.note_poll()
        self._group.request_rejoin()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The consumer's group, generation (or member epoch) and member id, as Kafka's
        ``groupMetadata()``; generation -1 and no member id outside a group."""
        group = self._group
        if group is None:
            raise kerr.InvalidGroupIdError("group_metadata needs a group_id (group.id)")
        return ConsumerGroupMetadata(group.group_id, group.generation, group.member_id, group.group_instance_id)

    def subscription(self) -> set[str]:
        return set(self._subscription or ())

    def _subscribed_topics(self) -> set[str]:
        if self._pattern is None:
            return set(self._subscription or ())
        now = time.monotonic()
        if now >= self._pattern_refresh:
            self._pattern_refresh = now + self.metadata_max_age_ms / 1000.0
            matched = {t for t in self._all_topics() if self._pattern.fullmatch(t)}
            if matched != self._subscription:
                self._subscription = matched
                self._metadata.add_topics(matched)
                if self._group is not None:
                    self._group.request_rejoin()
        return set(self._subscription or ())

    def _all_topics(self) -> list[str]:
        for address in self._metadata.candidates():
            try:
                r = self._pool.stub(address).Metadata(broker_pb2.MetadataRequest(all_topics=True), timeout=10.0)
            except Exception:  # noqa: BLE001 - an unreachable broker: ask the next one
                continue
            return [t.name for t in r.topics if t.error.code == 0 and not t.is_internal]  # as Kafka, no internals
        return []

    # ================================================================ rebalancing

    def _maybe_rebalance(self) -> None:
        """From `poll`: lost partitions told as lost, a rebalance started when the group needs one
        (eager assignors give everything up first) and, once it is done, its assignment applied:
        partitions taken away revoked, new ones started at their committed offsets, the listener
        told after the consumer holds them (so it may seek there)."""
        group = self._group
        if group is None or (self._subscription is None and self._pattern is None):
            return
        group.check_fatal()
        group.note_poll()
        topics = self._subscribed_topics()
        if isinstance(group, ConsumerProtocolMembership):
            self._follow_coordinator(group, topics)
            return
        if group.rebalancing:
            assigned = group.finished()
            if assigned is not None:
                self._apply_assignment(set(assigned))
            return
        if group.take_lost():
            lost = set(self._assignment)
            self._drop_partitions(lost)
            if self._listener is not None and lost:
                self._listener.on_partitions_lost(lost)
        if not group.needs_rejoin and group.leader and self._partition_counts(topics) != self._assigned_counts:
            group.request_rejoin()  # the leader saw partitions added: the group needs a new assignment
        if not group.needs_rejoin:
            return
        if not group.cooperative and self._assignment:  # eager: give everything up before joining
            revoked = set(self._assignment)
            self._before_revoke(revoked)
            if self._listener is not None:
                self._listener.on_partitions_revoked(revoked)
            self._drop_partitions(revoked)
        self._assigned_counts = self._partition_counts(topics)
        group.start_rebalance(topics)

    def _follow_coordinator(self, group: ConsumerProtocolMembership, topics: set[str]) -> None:
        """The consumer protocol (KIP-848): the coordinator assigns. Partitions of a fenced member
        are lost (the listener hears so before the member rejoins); a new assignment is applied
        (revocations first) and the coordinator is told at once what the consumer owns now."""
        group.set_subscription(topics)
        if group.take_lost():
            lost = set(self._assignment)
            self._drop_partitions(lost)
            if self._listener is not None and lost:
                self._listener.on_partitions_lost(lost)
            group.released()
        assigned = group.take_assignment()
        if assigned is not None:
            self._apply_assignment(assigned)
            group.acknowledge()

    def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        return {t: len(self._metadata.partitions_for_topic(t) or []) for t in sorted(topics)}

    def _drop_partitions(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self._assignment.pop(tp, None)
            self._awaiting_committed.discard(tp)
        self._buffer = deque(c for c in self._buffer if c.tp in self._assignment)
        if self._group is not None:
            self._group.owned = sorted(self._assignment)

    def _apply_assignment(self, assigned: set[TopicPartition]) -> None:
        assert self._group is not None
        old = set(self._assignment)
        revoked = old - assigned  # cooperative: what moves away now (eager held nothing)
        if revoked:
            self._before_revoke(revoked)
            if self._listener is not None:
                self._listener.on_partitions_revoked(revoked)
            self._drop_partitions(revoked)
        for tp in sorted(assigned - old):
            self._assignment[tp] = PartitionState()
            self._awaiting_committed.add(tp)
        self._group.owned = sorted(self._assignment)
        self._metadata.add_topics({tp.topic for tp in assigned})
        self._fetch_committed(self.default_api_timeout_ms / 1000.0)
        if self._listener is not None:
            self._listener.on_partitions_assigned(assigned - old)
        if revoked and self._group.cooperative:
            self._group.request_rejoin()  # KIP-429: the second round hands the revoked ones over

    def _fetch_committed(self, timeout_s: float) -> None:
        """Positions of newly assigned partitions from the group's committed offsets; a failed
        lookup is tried again at the next poll (the partitions wait, unfetched)."""
        if not self._awaiting_committed or self._group is None:
            return
        wanted = sorted(self._awaiting_committed)
        try:
            committed = self._group.committed(wanted, timeout_s)
        except kerr.KafkaError as err:
            _log.info("committed_offsets_lookup_failed", group=self.group_id, error=str(err))
            return
        for tp in wanted:
            state = self._assignment.get(tp)
            self._awaiting_committed.discard(tp)
            if state is None:
                continue
            offset, epoch, _meta = committed.get(tp, (-1, -1, ""))
            if offset >= 0:
                state.seek(offset, epoch=epoch if epoch >= 0 else None)
            else:
                state.seek(None, reset=self._default_reset())

    def _before_revoke(self, partitions: set[TopicPartition]) -> None:
        """Partitions are about to be given up: commit their positions first (auto commit)."""
        if self.enable_auto_commit:
            positions = self._positions_of(partitions)
            try:
                self._commit_now(positions, self.default_api_timeout_ms / 1000.0)
            except (CommitFailedError, kerr.KafkaError) as err:
                _log.warning("auto_commit_failed", group=self.group_id, error=str(err))

    def _maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit or self._group is None or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000.0
        try:
            self._commit_now(self._positions_of(self._assignment), self.default_api_timeout_ms / 1000.0)
        except (CommitFailedError, kerr.KafkaError) as err:
            _log.warning("auto_commit_failed", group=self.group_id, error=str(err))

    # ================================================================ committed offsets

    def _positions_of(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp in tps:
            state = self._assignment.get(tp)
            if state is not None and state.position is not None:
                epoch = state.offset_epoch if state.offset_epoch is not None else -1
                out[tp] = OffsetAndMetadata(state.position, "", epoch)
        return out

    def _commit_now(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float) -> None:
        if self._group is None:
            raise kerr.InvalidGroupIdError("committing offsets needs a group_id (group.id)")
        payload = {
            tp: (o.offset, o.leader_epoch, o.metadata) if isinstance(o, OffsetAndMetadata) else (int(o), -1, "")
            for tp, o in offsets.items()
        }
        self._group.commit(payload, timeout_s)
        if self._interceptors:  # after a successful commit only, as Kafka's onCommit
            self._interceptors.on_commit(
                {TopicPartition(*tp): OffsetAndMetadata(o, m, e) for tp, (o, e, m) in payload.items()}
            )

    def commit(
        self, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int] | None = None, timeout_ms: int | None = None
    ) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait for it.
        Raises `CommitFailedError` when the group rebalanced meanwhile."""
        if offsets is None:
            chosen: Mapping[TopicPartition, Any] = self._positions_of(self._assignment)
        else:
            chosen = {TopicPartition(*tp): o for tp, o in offsets.items()}
        self._commit_now(
            {tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o) for tp, o in chosen.items()},
            self._timeout(timeout_ms) / 1000.0,
        )

    def commit_async(
        self,
        offsets: Mapping[tuple[str, int], OffsetAndMetadata | int] | None = None,
        callback: Callable[[Mapping[tuple[str, int], Any], BaseException | None], None] | None = None,
    ) -> None:
        """Commit without waiting: commits go out in order from one worker, and ``callback(offsets,
        error)`` runs in a later `poll` (or `close`), as Kafka's commitAsync."""
        if offsets is None:
            chosen: dict[tuple[str, int], Any] = {tp: o for tp, o in self._positions_of(self._assignment).items()}
        else:
            chosen = {TopicPartition(*tp): o for tp, o in offsets.items()}
        if self._async_commits is None:
            self._async_commits = _AsyncCommits(self.commit)
        self._async_commits.submit(chosen, callback)

    def _run_commit_callbacks(self) -> None:
        if self._async_commits is not None:
            self._async_commits.run_callbacks()

    def committed(self, partitions: tuple[str, int] | Iterable[tuple[str, int]], timeout_ms: int | None = None) -> Any:
        """The group's committed offset: for one partition an `OffsetAndMetadata` or None, for
        several a dict of them (None where nothing is committed)."""
        if self._group is None:
            raise kerr.InvalidGroupIdError("committed offsets need a group_id (group.id)")
        single = isinstance(partitions, tuple) and len(partitions) == 2 and isinstance(partitions[0], str)
        if single:
            one = cast(tuple[str, int], partitions)
            tps = [TopicPartition(one[0], one[1])]
        else:
            tps = [TopicPartition(t, p) for t, p in cast(Iterable[tuple[str, int]], partitions)]
        found = self._group.committed(tps, self._timeout(timeout_ms) / 1000.0)
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in tps:
            offset, epoch, metadata = found.get(tp, (-1, -1, ""))
            result[tp] = OffsetAndMetadata(offset, metadata, epoch) if offset >= 0 else None
        return result[tps[0]] if single else result

    def _close_group(self) -> None:
        if self._group is None:
            return
        if self._async_commits is not None:
            self._async_commits.close()
        held = set(self._assignment)
        # Kafka's close: auto commit first, then onLeavePrepare, which tells the listener the
        # partitions were lost (not revoked) when the member was already out of the group
        in_group = self._group.generation > 0 and not self._group.take_lost()
        if self.enable_auto_commit and held and in_group:
            try:
                self._commit_now(self._positions_of(self._assignment), self.default_api_timeout_ms / 1000.0)
            except (CommitFailedError, kerr.KafkaError) as err:
                _log.warning("auto_commit_failed", group=self.group_id, error=str(err))
        if self._listener is not None and held:
            if in_group:
                self._listener.on_partitions_revoked(held)
            else:
                self._listener.on_partitions_lost(held)
        self._group.close()


class _AsyncCommits:
    """commitAsync's queue: one worker sends the commits in order; finished ones wait for the
    poll thread to run their callbacks."""

    def __init__(self, commit: Callable[..., None]) -> None:
        self._commit = commit
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue()
        self._done: queue.Queue[tuple[Any, Any, BaseException | None]] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="commit-async", daemon=True)
        self._thread.start()

    def submit(self, offsets: Any, callback: Any) -> None:
        self._queue.put((offsets, callback))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            offsets, callback = item
            error: BaseException | None = None
            try:
                self._commit(offsets)
            except Exception as err:  # noqa: BLE001 - handed to the callback
                error = err
            self._done.put((offsets, callback, error))

    def run_callbacks(self) -> None:
        while True:
            try:
                offsets, callback, error = self._done.get_nowait()
            except queue.Empty:
                return
            if callback is not None:
                callback(offsets, error)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
        self.run_callbacks()
