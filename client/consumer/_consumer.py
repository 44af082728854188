"""`Consumer`: assign partitions (or subscribe as a member of a group), seek, and poll records from
their leaders.

With ``group_id`` and `subscribe`, the group hands out the partitions (`kraftlog.client.consumer._consumer_groups`:
rebalances from `poll`, positions from committed offsets, auto commit, `commit`, `committed`).
Either way, as Kafka's Java consumer:

- each assigned partition has a *position* (the offset of the next record to return). A new
  assignment, `seek_to_beginning`, `seek_to_end` and an out-of-range fetch leave it unset; it is
  resolved with ListOffsets at the next `poll` or `position` (``auto_offset_reset`` ``earliest`` or
  ``latest``; ``none`` raises `NoOffsetForPartitionError`);
- `poll` sends one Fetch per leader broker carrying every partition it leads (``fetch_min_bytes``,
  ``fetch_max_wait_ms`` long polling, ``fetch_max_bytes`` and ``max_partition_fetch_bytes``),
  keeps at most one fetch in flight per broker across polls, and returns up to
  ``max_poll_records`` records; records before the position in the first batch (the broker returns
  whole batches) and control batches are skipped; with ``isolation_level="read_committed"`` the
  brokers answer only up to the last stable offset and the records of aborted transactions are
  dropped, by the answer's aborted-transaction list;
- settings this client cannot honour as properties (``security.protocol=SSL``: pass the
  ``security_protocol`` and ``ssl_*`` arguments instead) raise `UnsupportedConfigError` instead of
  pretending; the keys and their defaults are `CONSUMER_CONFIG` (`client._config`);
- OFFSET_OUT_OF_RANGE resets the position per ``auto_offset_reset`` (``none``: `poll` raises
  `OffsetOutOfRangeError`); NOT_LEADER_OR_FOLLOWER and the other stale-metadata errors take the
  broker's leader hint when there is one (KIP-951) or refresh metadata, and back the partition off
  for ``retry_backoff_ms``; other errors are raised from `poll` as typed `common.errors` exceptions;
- ``interceptors=[...]`` (`client.consumer._interceptors`, rules in `client._interceptors`): Kafka's
  ConsumerInterceptors, ``on_consume`` on the records of each `poll` before they are returned,
  ``on_commit`` after each successful commit.

A consumer is meant for one thread, as Java's. ``transport=`` (a `MockTransport`) replaces the
network, for unit tests without servers.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._config import CONSUMER_CONFIG
from kraftlog.client._config import CONSUMER_CONFIG as _C
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client._security import client_security
from kraftlog.client.consumer._consumer_fetch import _ConsumerFetches
from kraftlog.client.consumer._consumer_group import GroupMembership
from kraftlog.client.consumer._consumer_groups import OffsetAndMetadata, _ConsumerGroups, make_assignors
from kraftlog.client.consumer._consumer_membership import ConsumerProtocolMembership
from kraftlog.client.consumer._fetched import CompletedFetch, ConsumerRecord
from kraftlog.client.consumer._interceptors import ConsumerInterceptor, ConsumerInterceptors
from kraftlog.client.consumer._offsets import OffsetLookups
from kraftlog.client.consumer._positions import LogTruncationError, PartitionState
from kraftlog.common import errors as kerr

__all__ = [
    "Consumer",
    "ConsumerRecord",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "consumer_config_from_properties",
]

_log = structlog.get_logger(__name__)

EARLIEST = -2
LATEST = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class NoOffsetForPartitionError(kerr.OffsetOutOfRangeError):
    """No position and no reset policy (auto_offset_reset="none") for some partitions."""


def consumer_config_from_properties(props: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Kafka consumer properties -> `Consumer` keywords, plus the names this client does not know,
    parsed by `CONSUMER_CONFIG`. Settings this client cannot honour raise `UnsupportedConfigError`
    (here or in `Consumer`), naming the setting."""
    return CONSUMER_CONFIG.from_properties(props)


class Consumer(_ConsumerFetches, _ConsumerGroups):
    """A consumer of assigned partitions, or of a group's (``group_id`` and `subscribe`); see the
    module docstring."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        fetch_min_bytes: int = _C.default("fetch.min.bytes"),
        fetch_max_wait_ms: int = _C.default("fetch.max.wait.ms"),
        fetch_max_bytes: int = _C.default("fetch.max.bytes"),
        max_partition_fetch_bytes: int = _C.default("max.partition.fetch.bytes"),
        isolation_level: str | int = _C.default("isolation.level"),
        auto_offset_reset: str = _C.default("auto.offset.reset"),
        max_poll_records: int = _C.default("max.poll.records"),
        check_crcs: bool = _C.default("check.crcs"),
        request_timeout_ms: int = _C.default("request.timeout.ms"),
        retry_backoff_ms: int = _C.default("retry.backoff.ms"),
        retry_backoff_max_ms: int = _C.default("retry.backoff.max.ms"),
        metadata_max_age_ms: int = _C.default("metadata.max.age.ms"),
        default_api_timeout_ms: int = _C.default("default.api.timeout.ms"),
        client_rack: str = _C.default("client.rack"),
        allow_auto_topic_creation: bool = _C.default("allow.auto.create.topics"),
        group_id: str | None = _C.default("group.id"),
        enable_auto_commit: bool | None = _C.default("enable.auto.commit"),
        auto_commit_interval_ms: int = _C.default("auto.commit.interval.ms"),
        session_timeout_ms: int | None = _C.default("session.timeout.ms"),
        heartbeat_interval_ms: int | None = _C.default("heartbeat.interval.ms"),
        max_poll_interval_ms: int = _C.default("max.poll.interval.ms"),
        group_instance_id: str | None = _C.default("group.instance.id"),
        partition_assignment_strategy: str | Sequence[str] | None = _C.default("partition.assignment.strategy"),
        group_protocol: str = _C.default("group.protocol"),
        group_remote_assignor: str | None = _C.default("group.remote.assignor"),
        client_id: str = _C.default("client.id"),
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        interceptors: Sequence[ConsumerInterceptor] | None = None,
        security_protocol: str = "PLAINTEXT",
        **ssl: Any,
    ) -> None:
        security = client_security(security_protocol, **ssl)  # kafka-python's ssl_*/sasl_* arguments
        self._interceptors = ConsumerInterceptors(interceptors)
        self.group_id, self.enable_auto_commit = self._check_group_settings(group_id, enable_auto_commit)
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = self._isolation(isolation_level)
        reset = auto_offset_reset.strip().lower()
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        self.auto_offset_reset = reset
        self.max_poll_records = max(1, max_poll_records)
        self.check_crcs = check_crcs
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.client_rack = client_rack
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._pool = ChannelPool(max_message_bytes=max(104_857_600, 2 * fetch_max_bytes), security=security)
        self._cond = threading.Condition()
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            self._pool,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
            request_timeout_ms=request_timeout_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
            on_update=self._notify,
        )
        self._offsets = OffsetLookups(
            self._metadata,
            self._pool,
            isolation_level=self.isolation_level,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            default_api_timeout_ms=default_api_timeout_ms,
        )
        self._assignment: dict[TopicPartition, PartitionState] = {}
        self._buffer: deque[CompletedFetch] = deque()
        self._in_flight: dict[int, Any] = {}  # node id -> grpc future of its Fetch
        self._responses: deque[tuple[int, dict[TopicPartition, int], Any]] = deque()
        self._closed = False
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self._subscription: set[str] | None = None
        self._pattern = None
        self._listener = None
        self._pattern_refresh = 0.0
        self._assigned_counts: dict[str, int] = {}
        self._awaiting_committed: set[TopicPartition] = set()
        self._async_commits = None
        self._next_auto_commit = time.monotonic() + auto_commit_interval_ms / 1000.0
        self._group: GroupMembership | ConsumerProtocolMembership | None = None
        protocol = group_protocol.strip().lower()
        if protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be classic or consumer, not {group_protocol!r}")
        if protocol == "consumer":
            for key, value in (
                ("partition.assignment.strategy", partition_assignment_strategy),
                ("session.timeout.ms", session_timeout_ms),
                ("heartbeat.interval.ms", heartbeat_interval_ms),
            ):
                if value is not None:  # as Kafka: the coordinator decides these under KIP-848
                    raise ValueError(f"{key} is not supported with group.protocol=consumer (the coordinator sets it)")
        elif group_remote_assignor is not None:
            raise ValueError("group.remote.assignor is only for group.protocol=consumer")
        if group_id is not None and protocol == "consumer":
            self._group = ConsumerProtocolMembership(
                group_id,
                self._pool,
                self._metadata,
                server_assignor=group_remote_assignor,
                max_poll_interval_ms=max_poll_interval_ms,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_rack=client_rack,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
            )
        elif group_id is not None:
            self._group = GroupMembership(
                group_id,
                self._pool,
                self._metadata,
                make_assignors(partition_assignment_strategy or "range,cooperative-sticky"),
                session_timeout_ms=session_timeout_ms if session_timeout_ms is not None else 45_000,
                heartbeat_interval_ms=heartbeat_interval_ms if heartbeat_interval_ms is not None else 3_000,
                max_poll_interval_ms=max_poll_interval_ms,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_rack=client_rack,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
            )

    @staticmethod
    def _isolation(value: str | int) -> int:
        """``read_uncommitted`` (0) or ``read_committed`` (1): the brokers then answer up to the
        last stable offset and list the aborted transactions, whose records the consumer drops."""
        if isinstance(value, int):
            if value not in (0, 1):
                raise ValueError("isolation_level is 0 (read_uncommitted) or 1 (read_committed)")
            return value
        names = {"read_uncommitted": 0, "read_committed": 1}
        key = value.strip().lower()
        if key not in names:
            raise ValueError(f"isolation_level must be read_uncommitted or read_committed, not {value!r}")
        return names[key]

    @staticmethod
    def _check_group_settings(group_id: str | None, enable_auto_commit: bool | None) -> tuple[str | None, bool]:
        """Kafka's rules: auto commit defaults to on with a group id and off without one, and
        cannot be on without a group; an empty group id is no group."""
        if group_id is not None and not group_id.strip():
            raise kerr.InvalidGroupIdError("group.id must not be empty (leave it unset for no group)")
        if enable_auto_commit is None:
            enable_auto_commit = group_id is not None
        if enable_auto_commit and group_id is None:
            raise ValueError("enable.auto.commit cannot be true without a group.id (as in Kafka)")
        return group_id, enable_auto_commit

    @property
    def metadata(self) -> ClusterMetadata:
        return self._metadata

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # ================================================================= assignment and positions

    def partitions_for_topic(self, topic: str, timeout_ms: int | None = None) -> list[int]:
        """The partition ids of ``topic`` (refreshing metadata if needed)."""
        return self._metadata.wait_for_topic(topic, self._timeout(timeout_ms))

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly ``partitions`` (replacing any previous assignment). Positions of
        partitions already assigned are kept; new ones start per ``auto_offset_reset``."""
        wanted = [TopicPartition(t, p) for t, p in partitions]
        if self._subscription is not None:
            raise RuntimeError("Subscription to topics, partitions and pattern are mutually exclusive")
        old = self._assignment
        self._assignment = {tp: old.get(tp) or PartitionState() for tp in wanted}
        for _tp, state in self._assignment.items():
            if state.position is None and state.reset is None:
                state.reset = self._default_reset()
        self._buffer = deque(c for c in self._buffer if c.tp in self._assignment)
        self._metadata.add_topics({tp.topic for tp in wanted})

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def unsubscribe(self) -> None:
        """Stop consuming: a group member gives its partitions up and leaves the group."""
        if self._subscription is not None and self._group is not None:
            owned = set(self._assignment)
            self._before_revoke(owned)
            if self._listener is not None and owned:
                self._listener.on_partitions_revoked(owned)
            self._group.leave("the consumer unsubscribed")
            self._group.owned = []
            self._subscription, self._pattern = None, None
        self._assignment = {}
        self._buffer.clear()

    def _default_reset(self) -> int | None:
        return {"earliest": EARLIEST, "latest": LATEST}.get(self.auto_offset_reset)

    def _state(self, tp: tuple[str, int]) -> PartitionState:
        state = self._assignment.get(TopicPartition(*tp))
        if state is None:
            raise ValueError(f"partition {TopicPartition(*tp)} is not assigned to this consumer")
        return state

    def _drop_buffered(self, tp: TopicPartition) -> None:
        self._buffer = deque(c for c in self._buffer if c.tp != tp)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Fetch ``tp`` from ``offset`` at the next poll."""
        if offset < 0:
            raise ValueError(f"seek offset must not be negative: {offset}")
        state = self._state(tp)
        state.seek(offset)
        self._drop_buffered(TopicPartition(*tp))

    def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        """Move to the log start offset (looked up lazily); every assigned partition when none given."""
        self._seek_reset(partitions, EARLIEST)

    def seek_to_end(self, *partitions: tuple[str, int]) -> None:
        """Move to the end (high watermark, or LSO with read_committed), looked up lazily."""
        self._seek_reset(partitions, LATEST)

    def _seek_reset(self, partitions: Sequence[tuple[str, int]], where: int) -> None:
        flat: list[tuple[str, int]] = []
        for item in partitions:  # accept seek_to_end(tp1, tp2) and seek_to_end([tp1, tp2])
            if isinstance(item, list | set | frozenset) or (
                isinstance(item, tuple) and item and isinstance(item[0], tuple)
            ):
                flat.extend(item)
            else:
                flat.append(item)
        for tp in flat or list(self._assignment):
            state = self._state(tp)
            state.seek(None, reset=where)
            self._drop_buffered(TopicPartition(*tp))

    def seek_to_timestamp(self, tp: tuple[str, int], timestamp_ms: int, timeout_ms: int | None = None) -> None:
        """Move to the first record at or after ``timestamp_ms`` (the end when there is none)."""
        found = self.offsets_for_times({tp: timestamp_ms}, timeout_ms)[TopicPartition(*tp)]
        if found is None:
            self.seek_to_end(tp)
        else:
            self.seek(tp, found.offset)

    def position(self, tp: tuple[str, int], timeout_ms: int | None = None) -> int:
        """The offset of the next record `poll` returns for ``tp`` (resolving a pending reset)."""
        state = self._state(tp)
        if state.position is None:
            self._reset_positions([TopicPartition(*tp)], time.monotonic() + self._timeout(timeout_ms) / 1000.0)
        assert state.position is not None
        return state.position

    def highwater(self, tp: tuple[str, int]) -> int | None:
        """The high watermark of ``tp`` from the last fetch answer (None before one)."""
        hw = self._state(tp).high_watermark
        return hw if hw >= 0 else None

    def pause(self, *partitions: tuple[str, int]) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: tuple[str, int]) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._assignment.items() if s.paused}

    def _timeout(self, timeout_ms: int | None) -> int:
        return self.default_api_timeout_ms if timeout_ms is None else timeout_ms

    # ================================================================= offsets lookups

    def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        found = self._offsets.list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions}, timeout_ms)
        return {tp: r[0] for tp, r in found.items()}

    def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        found = self._offsets.list_offsets({TopicPartition(*tp): LATEST for tp in partitions}, timeout_ms)
        return {tp: r[0] for tp, r in found.items()}

    def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition the earliest offset whose timestamp is at or after the given one
        (None when every record is older)."""
        query = {}
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(
                    f"the target time for partition {TopicPartition(*tp)} is {ts}: it should be non-negative"
                )
            query[TopicPartition(*tp)] = ts
        found = self._offsets.list_offsets(query, timeout_ms)
        return {
            tp: (OffsetAndTimestamp(found[tp][0], found[tp][1], found[tp][2]) if found[tp][0] >= 0 else None)
            for tp in query
        }

    def _reset_positions(self, tps: Iterable[TopicPartition], deadline: float) -> None:
        pending: dict[TopicPartition, int] = {}
        for tp in tps:
            state = self._assignment[tp]
            if state.position is not None:
                continue
            if state.reset is None:
                raise NoOffsetForPartitionError(
                    f"Undefined offset with no reset policy for partitions: [{tp}]", partitions=[tp]
                )
            pending[tp] = state.reset
        if not pending:
            return
        found = self._offsets.list_offsets(pending, None, deadline=deadline)
        for tp, (offset, _ts, _epoch) in found.items():
            found_state = self._assignment.get(tp)
            if found_state is not None and found_state.position is None and found_state.reset == pending[tp]:
                found_state.seek(offset)  # no epoch: a looked-up position needs no validation (Kafka)
                found_state.leader_epoch = self._metadata.leader_epoch(tp)
                _log.debug("consumer_reset_offset", tp=str(tp), offset=offset)

    # ================================================================= poll

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout_ms`` for some to arrive."""
        if self._closed:
            raise RuntimeError("This consumer has already been closed.")
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        self._maybe_rebalance()
        self._maybe_auto_commit()
        self._run_commit_callbacks()
        self._fetch_committed(max(0.5, deadline - time.monotonic()))  # positions of new partitions
        while True:
            self._process_responses()
            waiting = self._awaiting_committed
            unset = [tp for tp, s in self._assignment.items() if s.position is None and tp not in waiting]
            if unset:
                try:
                    self._reset_positions(unset, max(deadline, time.monotonic() + 1.0))
                except kerr.RequestTimedOutError:
                    if time.monotonic() >= deadline:
                        return []
            self._offsets.validate(
                self._assignment, max(deadline, time.monotonic() + 1.0), self._default_reset(), self._drop_buffered
            )
            records = self._drain(self.max_poll_records)
            if records:
                self._send_fetches()  # prefetch while the caller works on these
                # positions are those of the records fetched, whatever the interceptors return
                return self._interceptors.on_consume(records) if self._interceptors else records
            self._send_fetches()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            with self._cond:
                if not self._responses:
                    wait = remaining
                    backoffs = [
                        s.backoff_until for s in self._assignment.values() if s.backoff_until > time.monotonic()
                    ]
                    if backoffs:
                        wait = min(wait, max(0.0, min(backoffs) - time.monotonic()))
                    if not self._in_flight and not backoffs:
                        wait = min(wait, self.retry_backoff_ms / 1000.0)  # nothing to fetch from yet
                    self._cond.wait(wait)

    def _drain(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        skipped: list[CompletedFetch] = []  # of paused partitions: kept for when they resume
        while self._buffer and len(out) < max_records:
            completed = self._buffer[0]
            state = self._assignment.get(completed.tp)
            if state is None or state.paused or state.awaiting_validation:
                self._buffer.popleft()
                if state is not None:
                    skipped.append(completed)
                continue
            take = completed.records[completed.index : completed.index + max_records - len(out)]
            out.extend(take)
            completed.index += len(take)
            if completed.index >= len(completed.records):
                self._buffer.popleft()
                if completed.next_fetch_offset >= (state.position or 0):
                    state.position = completed.next_fetch_offset
                    if completed.last_epoch is not None:
                        state.offset_epoch = completed.last_epoch
            else:
                state.position = take[-1].offset + 1
                if take[-1].leader_epoch >= 0:
                    state.offset_epoch = take[-1].leader_epoch
        self._buffer.extendleft(reversed(skipped))
        return out

    # ================================================================= closing

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_group()  # its last commit still reaches the interceptors' on_commit
        self._interceptors.close()
        for future in list(self._in_flight.values()):
            future.cancel()
        self._in_flight.clear()
        self._metadata.close()
        self._pool.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
