"""Share partitions on their leader (Kafka's ``SharePartitionManager``): the shell that holds one
`SharePartition` per (group, topic partition) this broker leads, loads it from the share
coordinator on first use, reads the log for it, persists its changes, and runs its acquisition
locks from the one clock.

Rules:
- a share partition is loaded (ReadShareGroupState at the partition's leader epoch, which fences
  the previous leader's writes) the first time a member fetches or acknowledges it, and again when
  the leader epoch changed; a partition never initialized answers what the coordinator says; a
  start offset of -1 is resolved by ``share.auto.offset.reset`` (latest: the high watermark, or
  the last stable offset under read_committed) and written at once;
- changes to one share partition happen one at a time (its lock): acquire from the log,
  acknowledge, release, expire. Every acknowledgement, release and expiry is written
  (WriteShareGroupState: the start offset and the whole in-flight window) before it is answered;
  a write that fails drops the partition, which is loaded again from the coordinator (its
  acquired records come back available there: at least once, never lost);
- records archived by REJECT or by the delivery limit go to the group's dead-letter topic
  (KIP-1191, `DeadLetterWriter`) after they are archived in memory and before the archive is
  written, under the partition's lock: the DLQ write is acknowledged (or given up) first;
- acquisition locks end at `SharePartition.next_deadline`: one timer task sleeps until the earliest
  deadline of all partitions (at most ``max_wait_ms``) and expires what is due;
- a long poll waits in the replica manager's fetch purgatory until its partitions hold
  ``min_bytes`` of acquirable records or ``max_wait_ms`` passed (Kafka's DelayedShareFetch; it
  acquires nothing meanwhile), woken by appends and high watermark moves of its partitions, and by
  records this broker made available again (release, expiry).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import structlog

from kraftlog.broker.replica import DelayedOperation
from kraftlog.broker.share._share_dlq import DeadLetterWriter, originals_reader
from kraftlog.broker.share._share_fetch import fetched_batches
from kraftlog.broker.share._share_partition import SharePartition, initial_start_offset
from kraftlog.broker.share._share_persister import SharePersister
from kraftlog.broker.share._share_shard_types import ReadStateRequest, WriteStateRequest
from kraftlog.broker.share._share_types import (
    AcknowledgementBatch,
    AcquiredRecords,
    AcquireMode,
    ArchivedRecord,
    AutoOffsetReset,
    ChangeResult,
    RecordState,
    SharePartitionConfig,
    parse_auto_offset_reset,
)
from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError, share_group_configs
from kraftlog.common.security import spawn

__all__ = ["SharePartitionManager", "SharePartitionStats", "PartitionFetch", "ShareKey3", "group_partition_config"]

_log = structlog.get_logger(__name__)

#: (group id, topic id, partition)
ShareKey3 = tuple[str, str, int]
Error = type[kerr.KafkaError] | None


@dataclass
class PartitionFetch:
    """One partition's part of a ShareFetch answer."""

    error: Error = None
    message: str = ""
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()
    leader_id: int = -1
    leader_epoch: int = -1


class SharePartitionStats(NamedTuple):
    """One share partition's figures (`SharePartitionManager.share_partition_stats`)."""

    group_id: str
    topic: str
    partition: int
    available: int
    acquired: int
    archived_total: int
    lag: int


@dataclass
class _Held:
    topic: str
    core: SharePartition
    leader_epoch: int
    state_epoch: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class _DelayedShareFetch(DelayedOperation):
    """A long-polling ShareFetch: done once its partitions may hand out ``min_bytes`` of records
    (``ready``), or when its wait ends."""

    def __init__(self, delay_ms: int, ready: Callable[[], bool]) -> None:
        super().__init__(delay_ms)
        self._ready = ready

    def try_complete(self) -> bool:
        return self.force_complete() if self._ready() else False


class SharePartitionManager:
    """The share partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        *,
        replicas: Callable[[], Any],
        persister: SharePersister,
        clock_ms: Callable[[], int],
        group_config: Callable[[str, SharePartitionConfig], SharePartitionConfig] | None = None,
        max_wait_ms: int = 1_000,
        dead_letters: DeadLetterWriter | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._replicas = replicas
        self.persister = persister
        self.clock_ms = clock_ms
        self.max_wait_ms = max_wait_ms
        self.partition_config = SharePartitionConfig(
            record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            delivery_count_limit=config["group.share.delivery.count.limit"],
            max_record_locks=config["group.share.partition.max.record.locks"],
            auto_offset_reset=AutoOffsetReset("latest"),
        )
        #: a group's settings: the broker's with the group's own configs (share.record.lock.duration.ms,
        #: share.auto.offset.reset, share.isolation.level) in their place
        self._group_config = group_config or (lambda _group, base: base)
        #: KIP-1191: writes what REJECT and the delivery limit archive to the group's DLQ topic
        self.dead_letters = dead_letters
        #: records archived by REJECT or the delivery limit per share partition, since loaded here
        self.archived_total: dict[ShareKey3, int] = {}
        self._held: dict[ShareKey3, _Held] = {}
        self._loading: dict[ShareKey3, asyncio.Lock] = {}
        self._deadlines: list[tuple[int, ShareKey3]] = []
        self._waiting: set[_DelayedShareFetch] = set()
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._log = _log.bind(node_id=broker_id)

    def lock_duration_ms(self, group_id: str) -> int:
        """The acquisition lock duration of ``group_id``'s records (its own config, else the broker's)."""
        duration: int = self._group_config(group_id, self.partition_config).record_lock_duration_ms
        return duration

    # ================================================================ lifecycle

    def start(self) -> None:
        self._timer = spawn(self._run_timers(), name="share-locks")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for op in list(self._waiting):
            op.force_complete()

    # ================================================================== loading

    def _leader(self, topic: str, partition: int) -> Any:
        """The local leader replica, or the Kafka error of a broker that does not lead it."""
        manager = self._replicas()
        p = manager.get_partition(topic, partition) if manager is not None else None
        if p is None or not p.is_leader:
            raise kerr.NotLeaderOrFollowerError(f"{topic}-{partition} is not led here")
        return p

    async def _get(self, group_id: str, topic_id: str, topic: str, partition: int) -> _Held:
        """The share partition, loaded (or loaded again at a new leader epoch) first."""
        key = (group_id, topic_id, partition)
        try:
            p = self._leader(topic, partition)
        except kerr.NotLeaderOrFollowerError:
            self._held.pop(key, None)  # led elsewhere now: its state is the new leader's to read
            raise
        held = self._held.get(key)
        if held is not None and held.leader_epoch == p.leader_epoch:
            return held
        loading = self._loading.setdefault(key, asyncio.Lock())
        async with loading:
            held = self._held.get(key)
            p = self._leader(topic, partition)
            if held is not None and held.leader_epoch == p.leader_epoch:
                return held
            epoch = p.leader_epoch
            result = await self.persister.call(ReadStateRequest(group_id, topic_id, partition, epoch))
            if result.error is not None:
                raise result.error(result.message or result.error.error_name)
            config = self._group_config(group_id, self.partition_config)
            start = result.start_offset
            resolved = start < 0
            if resolved:
                end = p.log.last_stable_offset if config.read_committed else p.high_watermark
                start = initial_start_offset(
                    config.auto_offset_reset, p.log_start_offset, end, self._offset_for_time(p), self.clock_ms()
                )
            start = max(start, p.log_start_offset)
            core = SharePartition.from_state(config, start, result.state_batches)
            held = _Held(topic, core, epoch, result.state_epoch)
            self._held[key] = held
            self._log.info(
                "share_partition_loaded", group_id=group_id, topic=topic, partition=partition, start_offset=start
            )
            if resolved:
                async with held.lock:
                    await self._persist(key, held)
            return held

    @staticmethod
    def _offset_for_time(p: Any) -> Callable[[int], int | None]:
        """The first offset of ``p`` with a timestamp at or after a time (``by_duration``)."""

        def find(timestamp_ms: int) -> int | None:
            found = p.fetch_offset_for_timestamp(timestamp_ms)
            return None if found is None else int(found.offset)

        return find

    async def _persist(self, key: ShareKey3, held: _Held) -> None:
        """Write the partition's state (under its lock); a failed write drops the partition."""
        group_id, topic_id, partition = key
        core = held.core
        req = WriteStateRequest(
            group_id,
            topic_id,
            partition,
            held.state_epoch,
            held.leader_epoch,
            core.start_offset,
            tuple(core.state_batches()),
            core.delivery_complete_count(),
        )
        result = await self.persister.call(req)
        if result.error is not None:
            if self._held.get(key) is held:
                del self._held[key]
            self._log.warning(
                "share_state_write_failed", group_id=group_id, topic=held.topic, error=result.error.error_name
            )
            raise result.error(result.message or result.error.error_name)

    async def _dead_letter(self, key: ShareKey3, held: _Held, archived: Sequence[ArchivedRecord]) -> None:
        """KIP-1191: the records just archived (in memory, under the partition's lock) go to the
        group's DLQ topic before the archive is written to the share coordinator (see
        `broker.share._share_dlq` for why this order, and what a failed write does)."""
        if not archived:
            return
        self.archived_total[key] = self.archived_total.get(key, 0) + len(archived)
        if self.dead_letters is None:
            return
        group_id, _topic_id, partition = key

        def read(offset: int, max_bytes: int) -> bytes:
            p = self._leader(held.topic, partition)
            return bytes(p.fetch_records(fetch_offset=offset, max_bytes=max_bytes, isolation_level=0).records)

        await self.dead_letters.write(group_id, held.topic, partition, archived, originals_reader(read))

    def _after_change(self, key: ShareKey3, held: _Held, change: ChangeResult) -> None:
        deadline = held.core.next_deadline()
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, key))
            self._wake.set()
        if change.changed:
            self._wake_fetches()

    def _wake_fetches(self) -> None:
        for op in list(self._waiting):
            op.force_complete()

    async def _change_held(self, key: ShareKey3, change_of: Callable[[SharePartition], ChangeResult]) -> None:
        """A change the broker makes on its own (a session's release, expired locks) to the partition
        ``key`` when it is held here: made under its lock, persisted when it changed anything; a
        failed write leaves the waiters unwoken (`_persist` has dropped the partition for a reload)."""
        held = self._held.get(key)
        if held is None:
            return
        async with held.lock:
            change = change_of(held.core)
            await self._dead_letter(key, held, change.archived)
            if change.changed:
                try:
                    await self._persist(key, held)
                except kerr.KafkaError:
                    return
            self._after_change(key, held, change)

    # ================================================================== calls

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: str,
        topic: str,
        partition: int,
        batches: Sequence[AcknowledgementBatch],
    ) -> None:
        """Apply one partition's acknowledgements and persist them; raises the Kafka error."""
        key = (group_id, topic_id, partition)
        held = await self._get(group_id, topic_id, topic, partition)
        async with held.lock:
            change = held.core.acknowledge(member_id, batches, self.clock_ms())
            await self._dead_letter(key, held, change.archived)
            if change.changed or change.start_offset_moved:
                await self._persist(key, held)
            self._after_change(key, held, change)

    async def release(self, group_id: str, member_id: str, parts: Iterable[tuple[str, str, int]]) -> None:
        """The member's share session closed: release what it holds in ``parts``."""
        for topic_id, _topic, partition in parts:
            key = (group_id, topic_id, partition)
            await self._change_held(key, lambda core: core.release_member(member_id))

    async def release_members(self, group_id: str, member_ids: Iterable[str]) -> None:
        """Members left ``group_id`` or were fenced: every share partition of the group held here
        gives back what they hold at once, delivery counts kept (Kafka's ShareGroupListener
        ``onMemberLeave``), instead of when the acquisition locks end."""
        members = tuple(member_ids)

        def release(core: SharePartition) -> ChangeResult:
            archived: list[ArchivedRecord] = []
            moved = changed = False
            for member_id in members:
                change = core.release_member(member_id)
                archived.extend(change.archived)
                moved, changed = moved or change.start_offset_moved, changed or change.changed
            return ChangeResult(tuple(archived), moved, changed)

        for key in [k for k in self._held if k[0] == group_id]:
            await self._change_held(key, release)

    async def forget_group(self, group_id: str) -> None:
        """The (empty) group's share-partition state was altered or deleted through the share
        coordinator: the partitions held here are dropped (Kafka's onGroupEmpty removal), so that
        the next fetch reads the new state."""
        for key in [k for k in self._held if k[0] == group_id]:
            held = self._held.get(key)
            if held is None:
                continue
            async with held.lock:
                if self._held.get(key) is held:
                    del self._held[key]

    async def forget_all(self) -> None:
        """Drop every share partition held here (``share.version`` went to 0, Kafka's
        ``onShareVersionToggle``): their state is the share coordinator's, read back by the first
        fetch once share groups are on again; records acquired meanwhile are not held by anyone."""
        for group_id in sorted({k[0] for k in self._held}):
            await self.forget_group(group_id)

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        parts: Sequence[tuple[str, str, int]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        mode: AcquireMode,
        min_bytes: int = 1,
    ) -> dict[tuple[str, int], PartitionFetch]:
        """Acquire records of ``parts`` (topic id, name, partition) for the member (read_committed
        as the group's ``share.isolation.level`` says). As Kafka's DelayedShareFetch, nothing is
        acquired until ``min_bytes`` of acquirable records are in the logs (counted from each
        partition's next fetch offset to its high watermark, or last stable offset) or
        ``max_wait_ms`` has passed; then whatever can be acquired is. An error answers at once."""
        deadline = self.clock_ms() + max(0, max_wait_ms)
        for topic_id, topic, partition in parts:  # loaded first, so that the wait judges their state
            try:
                await self._get(group_id, topic_id, topic, partition)
            except kerr.KafkaError:
                break  # answered by the fetch below
        while True:
            remaining = deadline - self.clock_ms()
            if remaining <= 0 or not parts or self._ready(group_id, parts, min_bytes):
                out = await self._fetch_once(group_id, member_id, parts, max_bytes, max_records, mode)
                if any(f.acquired or f.error is not None for f in out.values()):
                    return out
                remaining = deadline - self.clock_ms()
                if remaining <= 0 or not parts:
                    return out
            await self._wait_for_records(group_id, parts, remaining, min_bytes)

    async def _fetch_once(
        self,
        group_id: str,
        member_id: str,
        parts: Sequence[tuple[str, str, int]],
        max_bytes: int,
        max_records: int,
        mode: AcquireMode,
    ) -> dict[tuple[str, int], PartitionFetch]:
        out: dict[tuple[str, int], PartitionFetch] = {}
        left_records = max(1, max_records)
        left_bytes = max(1, max_bytes)
        for topic_id, topic, partition in parts:
            key = (group_id, topic_id, partition)
            try:
                held = await self._get(group_id, topic_id, topic, partition)
                p = self._leader(topic, partition)
            except kerr.KafkaError as err:
                out[(topic_id, partition)] = PartitionFetch(type(err), str(err))
                continue
            if left_records <= 0 or left_bytes <= 0:
                continue
            async with held.lock:
                core = held.core
                if p.log_start_offset > core.start_offset:
                    core.move_log_start(p.log_start_offset)
                if not core.can_acquire():
                    continue
                offset = core.next_fetch_offset()
                try:
                    read = p.fetch_records(
                        fetch_offset=offset,
                        max_bytes=left_bytes,
                        isolation_level=1 if core.config.read_committed else 0,
                    )
                except kerr.OffsetOutOfRangeError:
                    core.move_log_start(p.log_start_offset)
                    continue
                except kerr.KafkaError as err:
                    out[(topic_id, partition)] = PartitionFetch(type(err), str(err))
                    continue
                records = bytes(read.records)
                batches = fetched_batches(records)
                if not batches:
                    continue
                result = core.acquire(member_id, batches, self.clock_ms(), left_records, mode, read.aborted)
                if result.archived:  # a delivery limit lowered since: archived, persisted
                    await self._dead_letter(key, held, result.archived)
                    try:
                        await self._persist(key, held)
                    except kerr.KafkaError as err:
                        out[(topic_id, partition)] = PartitionFetch(type(err), str(err))
                        continue
                self._after_change(key, held, ChangeResult())
            if result.acquired:
                left_records -= result.count
                left_bytes -= len(records)
                out[(topic_id, partition)] = PartitionFetch(
                    records=records, acquired=result.acquired, leader_id=self.broker_id, leader_epoch=held.leader_epoch
                )
        return out

    def _ready(self, group_id: str, parts: Sequence[tuple[str, str, int]], min_bytes: int = 1) -> bool:
        """Whether ``parts`` hold ``min_bytes`` of records that could be acquired now (or one of
        them answers an error): the bytes of each log from the share partition's next fetch offset
        (a record made available again, else the window's end) up to its high watermark (last
        stable offset under read_committed), as Kafka's DelayedShareFetch counts them."""
        manager = self._replicas()
        accumulated = 0
        for topic_id, topic, partition in parts:
            held = self._held.get((group_id, topic_id, partition))
            p = manager.get_partition(topic, partition) if manager is not None else None
            if held is None or p is None or not p.is_leader or p.leader_epoch != held.leader_epoch:
                return True
            core = held.core
            if not core.can_acquire():
                continue
            end = p.log.last_stable_offset if core.config.read_committed else p.high_watermark
            offset = max(core.next_fetch_offset(), p.log_start_offset)
            if offset >= end:
                continue
            if min_bytes <= 1:
                return True
            try:
                info = p.log.read(offset, min_bytes - accumulated, max_offset=end, verify=False)
            except Exception:  # noqa: BLE001 - the fetch answers what went wrong
                return True
            accumulated += len(info.records)
            if accumulated >= min_bytes:
                return True
        return False

    async def _wait_for_records(
        self, group_id: str, parts: Sequence[tuple[str, str, int]], wait_ms: int, min_bytes: int
    ) -> None:
        manager = self._replicas()
        op = _DelayedShareFetch(wait_ms, lambda: self._ready(group_id, parts, min_bytes))
        self._waiting.add(op)
        try:
            manager.fetch_purgatory.try_complete_else_watch(op, [(topic, partition) for _t, topic, partition in parts])
            await op.future
        finally:
            self._waiting.discard(op)

    def share_partition_stats(self) -> list[SharePartitionStats]:
        """The share partitions led here, for the share-group lag metrics (a partition no longer led
        here is left out): records available to the group (AVAILABLE in the window, and every record
        past the window's end up to the high watermark), acquired, archived by REJECT or the delivery
        limit since loaded here, and the lag KIP-1226 defines (high watermark minus start offset minus
        records acknowledged or archived in the window)."""
        out: list[SharePartitionStats] = []
        for key, held in list(self._held.items()):
            try:
                p = self._leader(held.topic, key[2])
            except kerr.KafkaError:
                continue
            core = held.core
            end = p.log.last_stable_offset if core.config.read_committed else p.high_watermark
            counts = core.counts()
            past_window = max(0, end - core.end_offset)
            lag = max(0, end - core.start_offset - core.delivery_complete_count())
            out.append(
                SharePartitionStats(
                    key[0],
                    held.topic,
                    key[2],
                    counts[RecordState.AVAILABLE] + past_window,
                    counts[RecordState.ACQUIRED],
                    self.archived_total.get(key, 0),
                    lag,
                )
            )
        return out

    # ================================================================== timers

    async def _run_timers(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock_ms()
            wait_ms = self.max_wait_ms
            if self._deadlines:
                wait_ms = max(0, min(wait_ms, self._deadlines[0][0] - now))
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000.0)
            except TimeoutError:
                pass
            try:
                await self.expire_due(self.clock_ms())
            except Exception as err:  # noqa: BLE001 - the timer must keep running
                self._log.error("share_lock_expiry_failed", error=repr(err))

    async def expire_due(self, now_ms: int) -> None:
        """Release every acquired record whose lock ended at or before ``now_ms``, persisted."""
        due: set[ShareKey3] = set()
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            due.add(heapq.heappop(self._deadlines)[1])
        for key in due:
            await self._change_held(key, lambda core: core.expire_locks(now_ms))


def group_partition_config(
    own: Mapping[str, str], base: SharePartitionConfig, broker: Callable[[str], Any]
) -> SharePartitionConfig:
    """``base`` (the broker's settings) with a share group's own configs (``own``, as the GROUP
    config resource stores them) in their place; a stored value the broker's bounds no longer
    admit leaves the broker's, as for consumer groups."""
    if not own:
        return base
    try:
        values = share_group_configs(own, broker)
        reset = parse_auto_offset_reset(str(values["share.auto.offset.reset"]))
    except (ConfigError, ValueError) as err:
        _log.warning("share_group_config_ignored", error=str(err))
        return base
    return replace(
        base,
        record_lock_duration_ms=int(values["share.record.lock.duration.ms"]),
        auto_offset_reset=reset,
        read_committed=values["share.isolation.level"] == "read_committed",
    )
