"""One share partition (KIP-932's ``SharePartition``): the records of one topic partition that one
share group is delivering, on the partition's leader.

The share partition start offset (``start_offset``, Kafka's SPSO) is the first offset not yet
done with: below it every record was acknowledged or archived. The in-flight window runs from it
to ``end_offset`` (exclusive: one past the highest offset ever acquired). Inside the window each
record present in the log has a state, AVAILABLE -> ACQUIRED -> ACKNOWLEDGED or ARCHIVED, and a
delivery count; offsets the log has no record for (gaps between batches of a compacted topic)
are not in it. Past ``end_offset`` every record is implicitly AVAILABLE and never delivered.

Pure: no clock, no timer, no I/O. Time is the ``now_ms`` of each call; acquisition locks expire
when the shell calls `expire_locks` (at `next_deadline`). The shell reads the log from
`next_fetch_offset` and hands the read's batch headers to `acquire`; it writes `state_batches`
(with `start_offset`) to the share coordinator after a change, and builds a partition back
from such a state with `SharePartition.from_state` when leadership moves.

Ordering rules:
- a record is acquired by at most one member at a time; acquiring increments its delivery count;
- a record released (RELEASE, lock expiry, its member gone) with its delivery count at
  ``delivery_count_limit`` is archived instead of made available, so the count never exceeds it;
- records enter the window only at its end (new offsets, in log order, while the window holds
  fewer than ``max_record_locks`` offsets) and leave it only at its start, once the prefix is
  acknowledged or archived;
- an acknowledgement call is all or nothing: any offset it may not change fails the whole call
  (INVALID_RECORD_STATE; a malformed range or one past the window's end INVALID_REQUEST) and
  changes nothing; a range the start offset moved into is applied from the start offset on,
  one wholly below it is INVALID_RECORD_STATE (Kafka's rules);
- records archived by REJECT or by the delivery limit are returned once, by the call that
  archived them (for the dead-letter topic); records archived as GAP or as aborted are not.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kraftlog.broker.share._share_fetch import FetchedBatch, aborted_ranges
from kraftlog.broker.share._share_types import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AcquireMode,
    AcquireResult,
    ArchivedRecord,
    ArchiveReason,
    AutoOffsetReset,
    ChangeResult,
    RecordState,
    SharePartitionConfig,
    StateBatch,
)
from kraftlog.common import errors as kerr

__all__ = ["SharePartition", "initial_start_offset", "UNINITIALIZED_START_OFFSET"]

#: the start offset of a share partition whose state was initialized without one (Kafka's
#: ``PartitionFactory.UNINITIALIZED_START_OFFSET``): `share.auto.offset.reset` decides it
UNINITIALIZED_START_OFFSET = -1


def initial_start_offset(
    reset: AutoOffsetReset,
    log_start_offset: int,
    latest_offset: int,
    offset_for_timestamp: Callable[[int], int | None],
    now_ms: int,
) -> int:
    """Where a share partition with no start offset starts (``share.auto.offset.reset``):
    ``earliest`` the log start offset, ``latest`` ``latest_offset`` (the high watermark, or the
    last stable offset under read_committed), ``by_duration`` the first offset with a timestamp at
    or after ``now_ms`` minus the duration (``latest_offset`` when there is none)."""
    if reset.kind == "earliest":
        return log_start_offset
    if reset.kind == "by_duration":
        found = offset_for_timestamp(now_ms - reset.duration_ms)
        return latest_offset if found is None else max(found, log_start_offset)
    return latest_offset


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int = -1  # the acquisition lock's end while ACQUIRED


_TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class SharePartition:
    """The delivery state of one (group, topic partition) on its leader (see the module docstring)."""

    def __init__(self, config: SharePartitionConfig, start_offset: int) -> None:
        if start_offset < 0:
            raise ValueError(f"share partition start offset {start_offset} is negative: resolve it first")
        self.config = config
        self._start = start_offset
        self._end = start_offset
        self._records: dict[int, _InFlight] = {}
        self._order: deque[int] = deque()  # offsets of _records, ascending
        self._locks: list[tuple[int, int]] = []  # (deadline, offset); stale entries skipped

    # ================================================================ state and rebuild

    @classmethod
    def from_state(
        cls, config: SharePartitionConfig, start_offset: int, batches: Iterable[StateBatch]
    ) -> SharePartition:
        """A partition rebuilt from what the share coordinator holds (a new leader's read).
        Acquired records of the old leader come back AVAILABLE with their delivery count (their
        consumers lost them with the leader); batches below ``start_offset`` are dropped."""
        part = cls(config, start_offset)
        for first, last, state_id, count in sorted(batches):
            state = RecordState(state_id)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(first, start_offset, part._end), last + 1):
                part._records[offset] = _InFlight(state, count)
                part._order.append(offset)
            part._end = max(part._end, last + 1)
        part._advance_start()
        return part

    def state_batches(self) -> list[StateBatch]:
        """The in-flight window as the share coordinator stores it: runs of consecutive offsets
        with one state and delivery count. An acquired record is written AVAILABLE: if this leader
        goes, its consumer's lock goes with it."""
        out: list[StateBatch] = []
        for offset in self._order:
            rec = self._records[offset]
            state = RecordState.AVAILABLE if rec.state is RecordState.ACQUIRED else rec.state
            if out and out[-1].last_offset == offset - 1 and out[-1][2:] == (state.value, rec.delivery_count):
                out[-1] = out[-1]._replace(last_offset=offset)
            else:
                out.append(StateBatch(offset, offset, state.value, rec.delivery_count))
        return out

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        """One past the highest offset ever acquired (the window's end; ``start_offset`` when empty)."""
        return self._end

    def record(self, offset: int) -> tuple[RecordState, int, str | None]:
        """(state, delivery count, member holding it) of ``offset``; below the window a record is
        done (ACKNOWLEDGED as far as anyone can tell), at or past its end never delivered."""
        if offset < self._start:
            return RecordState.ACKNOWLEDGED, 0, None
        rec = self._records.get(offset)
        if rec is None:
            return RecordState.AVAILABLE, 0, None
        return rec.state, rec.delivery_count, rec.member_id

    def in_flight(self) -> int:
        """Offsets the window spans (what ``max_record_locks`` bounds)."""
        return self._end - self._start

    def counts(self) -> dict[RecordState, int]:
        """How many records of the window are in each state (lag metrics, describe)."""
        out = dict.fromkeys(RecordState, 0)
        for rec in self._records.values():
            out[rec.state] += 1
        return out

    def delivery_complete_count(self) -> int:
        """Records of the window acknowledged or archived (KIP-1226's delivery-complete count, which
        a write carries so that lag can be told without this partition)."""
        return sum(1 for rec in self._records.values() if rec.state in _TERMINAL)

    def acquired_by(self, member_id: str) -> list[int]:
        """The offsets ``member_id`` holds now."""
        return [o for o in self._order if self._records[o].member_id == member_id]

    # ========================================================================== acquire

    def next_fetch_offset(self) -> int:
        """Where the shell reads the log from: the first AVAILABLE record of the window, else its end."""
        for offset in self._order:
            if self._records[offset].state is RecordState.AVAILABLE:
                return offset
        return self._end

    def can_acquire(self) -> bool:
        """Whether an acquisition could hand out anything: an AVAILABLE record in the window, or
        room in the window for new ones."""
        return self.next_fetch_offset() < self._end or self.in_flight() < self.config.max_record_locks

    def acquire(
        self,
        member_id: str,
        batches: Sequence[FetchedBatch],
        now_ms: int,
        max_records: int,
        mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
        aborted: Iterable[tuple[int, int]] = (),
    ) -> AcquireResult:
        """Acquire for ``member_id`` the AVAILABLE records of ``batches`` (the headers of a log
        read from `next_fetch_offset`, in offset order), each locked until ``now_ms`` plus the lock
        duration. ``max_records`` bounds the count as ``mode`` says; new offsets past the window's
        end are taken only while the window stays within ``max_record_locks`` offsets (the first one
        that does not fit stops the walk). Offsets between the window's end and the next batch are
        taken to hold no record (the read skipped them), so the batches must come from a read at or
        before `end_offset`. Under read_committed the records of ``aborted`` transactions (producer
        id, first offset, from the read) are archived instead."""
        if max_records <= 0:
            return AcquireResult(())
        skip = aborted_ranges(batches, aborted) if self.config.read_committed else []
        deadline = now_ms + self.config.record_lock_duration_ms
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        archived: list[ArchivedRecord] = []
        n_aborted = 0
        stop = False
        for batch in batches:
            if stop:
                break
            lo, hi = max(batch.base_offset, self._start), batch.last_offset
            is_aborted = any(first <= batch.base_offset and batch.last_offset <= last for first, last in skip)
            for offset in range(lo, hi + 1):
                if mode is AcquireMode.RECORD_LIMIT and len(taken) >= max_records:
                    stop = True
                    break
                rec = self._records.get(offset)
                if rec is None and offset < self._end:
                    continue  # a gap the window knows has no record
                if rec is None:
                    if offset + 1 - self._start > self.config.max_record_locks:
                        stop = True  # no room in the window for a new record
                        break
                    rec = _InFlight(RecordState.AVAILABLE, 0)
                    self._records[offset] = rec
                    self._order.append(offset)
                    self._end = offset + 1
                if rec.state is not RecordState.AVAILABLE:
                    continue
                if is_aborted:
                    rec.state = RecordState.ARCHIVED
                    n_aborted += 1
                    continue
                if rec.delivery_count >= self.config.delivery_count_limit:  # a limit lowered since
                    rec.state = RecordState.ARCHIVED
                    archived.append(ArchivedRecord(offset, rec.delivery_count, ArchiveReason.DELIVERY_LIMIT))
                    continue
                rec.state = RecordState.ACQUIRED
                rec.delivery_count += 1
                rec.member_id = member_id
                rec.deadline_ms = deadline
                heapq.heappush(self._locks, (deadline, offset))
                taken.append((offset, rec.delivery_count))
            if mode is AcquireMode.BATCH_OPTIMIZED and len(taken) >= max_records:
                stop = True
        self._advance_start()  # aborted or archived records at the start are done with
        return AcquireResult(_runs(taken), n_aborted, tuple(archived))

    # ==================================================================== acknowledge

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> ChangeResult:
        """Apply ``member_id``'s acknowledgements (all or nothing, see the module docstring):
        ACCEPT acknowledges, RELEASE makes available again (archived at the delivery limit),
        REJECT archives, RENEW extends the lock to ``now_ms`` plus the lock duration (KIP-1222),
        GAP archives an offset that holds no record."""
        plan: list[tuple[int, AcknowledgeType]] = []
        seen: set[int] = set()
        for batch in batches:
            first, last, types = batch
            if first > last or first < 0:
                raise kerr.InvalidRequestError(f"acknowledgement range {first}-{last} is empty or negative")
            if len(types) not in (1, last - first + 1):
                raise kerr.InvalidRequestError(
                    f"acknowledgement range {first}-{last} has {len(types)} types for {last - first + 1} offsets"
                )
            try:
                kinds = [AcknowledgeType(t) for t in types]
            except ValueError as err:
                raise kerr.InvalidRequestError(f"unknown acknowledge type in {types}") from err
            if last >= self._end:
                raise kerr.InvalidRequestError(f"acknowledgement range {first}-{last} is past the acquired records")
            if last < self._start:
                raise kerr.InvalidRecordStateError(f"acknowledgement range {first}-{last} is below the start offset")
            for i, offset in enumerate(range(first, last + 1)):
                kind = kinds[0] if len(kinds) == 1 else kinds[i]
                if offset in seen:
                    raise kerr.InvalidRequestError(f"offset {offset} is acknowledged twice in one request")
                seen.add(offset)
                if offset < self._start:
                    continue  # the start moved into the range (the records were archived since)
                rec = self._records.get(offset)
                if rec is None:
                    if kind is AcknowledgeType.GAP:
                        continue  # no record there: nothing to change
                    raise kerr.InvalidRecordStateError(f"offset {offset} holds no record")
                if rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                    raise kerr.InvalidRecordStateError(
                        f"offset {offset} is {rec.state.name.lower()}, not acquired by member {member_id}"
                    )
                plan.append((offset, kind))
        archived: list[ArchivedRecord] = []
        for offset, kind in plan:
            rec = self._records[offset]
            if kind is AcknowledgeType.RENEW:
                rec.deadline_ms = now_ms + self.config.record_lock_duration_ms
                heapq.heappush(self._locks, (rec.deadline_ms, offset))
                continue
            if kind is AcknowledgeType.ACCEPT:
                self._settle(rec, RecordState.ACKNOWLEDGED)
            elif kind is AcknowledgeType.GAP:
                self._settle(rec, RecordState.ARCHIVED)
            elif kind is AcknowledgeType.REJECT:
                self._settle(rec, RecordState.ARCHIVED)
                archived.append(ArchivedRecord(offset, rec.delivery_count, ArchiveReason.REJECTED))
            else:
                self._release(offset, rec, archived)
        moved = self._advance_start()
        return ChangeResult(tuple(archived), moved, bool(plan))

    def release_member(self, member_id: str) -> ChangeResult:
        """``member_id`` left (its share session closed): every record it holds is released."""
        archived: list[ArchivedRecord] = []
        offsets = self.acquired_by(member_id)
        for offset in offsets:
            self._release(offset, self._records[offset], archived)
        return ChangeResult(tuple(archived), self._advance_start(), bool(offsets))

    # ========================================================================== time

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock ends (None: nothing is acquired)."""
        while self._locks:
            deadline, offset = self._locks[0]
            rec = self._records.get(offset)
            if rec is not None and rec.state is RecordState.ACQUIRED and rec.deadline_ms == deadline:
                return deadline
            heapq.heappop(self._locks)
        return None

    def expire_locks(self, now_ms: int) -> ChangeResult:
        """Release every record whose lock ended at or before ``now_ms`` (archived at the limit)."""
        archived: list[ArchivedRecord] = []
        changed = False
        while (deadline := self.next_deadline()) is not None and deadline <= now_ms:
            _deadline, offset = heapq.heappop(self._locks)
            self._release(offset, self._records[offset], archived)
            changed = True
        return ChangeResult(tuple(archived), self._advance_start(), changed)

    # =================================================================== log changes

    def move_log_start(self, log_start_offset: int) -> bool:
        """The log's start moved past records of the window (retention, DeleteRecords): they are
        gone, so the share partition starts there too (as Kafka's ``updateCacheAndOffsets``).
        True when the start offset moved."""
        if log_start_offset <= self._start:
            return False
        while self._order and self._order[0] < log_start_offset:
            del self._records[self._order.popleft()]
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self._advance_start()
        return True

    # ======================================================================= helpers

    def _settle(self, rec: _InFlight, state: RecordState) -> None:
        rec.state = state
        rec.member_id = None
        rec.deadline_ms = -1

    def _release(self, offset: int, rec: _InFlight, archived: list[ArchivedRecord]) -> None:
        if rec.delivery_count >= self.config.delivery_count_limit:
            self._settle(rec, RecordState.ARCHIVED)
            archived.append(ArchivedRecord(offset, rec.delivery_count, ArchiveReason.DELIVERY_LIMIT))
        else:
            self._settle(rec, RecordState.AVAILABLE)

    def _advance_start(self) -> bool:
        """Move the start past the acknowledged or archived prefix of the window (and past gaps
        with no record); True when it moved."""
        before = self._start
        while self._order and self._records[self._order[0]].state in _TERMINAL:
            offset = self._order.popleft()
            del self._records[offset]
            self._start = offset + 1
        self._start = self._order[0] if self._order else self._end
        return self._start != before


def _runs(taken: list[tuple[int, int]]) -> tuple[AcquiredRecords, ...]:
    """Consecutive offsets with one delivery count, as runs."""
    out: list[AcquiredRecords] = []
    for offset, count in taken:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = out[-1]._replace(last_offset=offset)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return tuple(out)
