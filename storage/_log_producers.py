"""`LogProducers`: the producer state of a partition log — the idempotence checks of a leader's
append, the state every replica keeps from what it writes, and rebuilding it at load and after a
truncation from the newest producer snapshot plus the batches after it. It owns the log's
`ProducerStateManager` and reads the segments of its `LocalLog` (Kafka's UnifiedLog keeps the
same split: the producer state manager beside the local log).

Ordering rules: a leader checks a batch against the state before any byte is written and records
it only after the write; a duplicate is answered with the offsets of the batch it repeats and
nothing is written. The state covers exactly the log below ``map_end_offset``: a truncation (or a
truncation to empty) drops it and rebuilds it from the newest snapshot below the new end, and a
snapshot is only ever written for an offset the state covers.
"""

from __future__ import annotations

import struct

from kraftlog.common import errors as kerr
from kraftlog.common.records import CONTROL_FLAG, HEADER_SIZE, HEADER_STRUCT, ControlRecordType, RecordBatch
from kraftlog.storage._local_log import LocalLog
from kraftlog.storage._producer_state import BatchMetadata, ProducerStateEntry, ProducerStateManager
from kraftlog.storage._record_set import BatchHeader
from kraftlog.storage._segment import LogSegment
from kraftlog.storage._txn_index import AbortedTxn

_TRANSACTIONAL_FLAG = 0x10
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def marker_of(batch: RecordBatch) -> tuple[ControlRecordType, int]:
    """A control batch's marker type and the coordinator epoch in its record's value."""
    kind = batch.control_type()
    assert kind is not None
    value = batch.records()[0].value
    coordinator_epoch = _MARKER_VALUE.unpack_from(value, 0)[1] if value is not None and len(value) >= 6 else -1
    return kind, coordinator_epoch


__all__ = ["LogProducers", "marker_of"]


class LogProducers:
    """Producer state of the log (see the module docstring). Every method but the two public
    queries expects the log's lock held."""

    def __init__(self, local: LocalLog, state: ProducerStateManager) -> None:
        self._local = local
        self.state = state

    def rebuild(self) -> None:
        """Newest snapshot at or below the log end, then every batch after it (lock held)."""
        psm = self.state
        start = psm.load_snapshot(self._local.log_start_offset, self._local.log_end_offset, self._local.clock_ms())
        replayed = 0
        for i, seg in enumerate(self._local.segments):
            next_base = self._local.bases[i + 1] if i + 1 < len(self._local.bases) else None
            if next_base is not None and next_base <= start:
                continue
            _off, pos = seg.offset_index.lookup(start)
            for loc in seg.batches_from(pos):
                if loc.last_offset < start:
                    continue
                head = seg.read_at(loc.position, HEADER_SIZE)
                if len(head) < HEADER_SIZE:
                    break
                fields = HEADER_STRUCT.unpack(head)
                attrs, pid, epoch, seq, count = fields[5], fields[9], fields[10], fields[11], fields[12]
                if pid >= 0 and attrs & CONTROL_FLAG:
                    self._replay_marker(seg, seg.read_batch(loc))
                elif pid >= 0:
                    last_seq = seq + max(count, 1) - 1 if seq >= 0 else -1
                    transactional = bool(attrs & _TRANSACTIONAL_FLAG)
                    psm.update(
                        pid, epoch, seq, last_seq, loc.base_offset, loc.last_offset, loc.max_timestamp, transactional
                    )
                    replayed += 1
                psm.advance(loc.last_offset + 1)
        psm.advance(self._local.log_end_offset)
        if replayed or psm.producers:
            self._local.bound.info(
                "producer_state_loaded", snapshot_offset=start, batches_replayed=replayed, producers=len(psm.producers)
            )

    def _replay_marker(self, seg: LogSegment, batch: RecordBatch) -> None:
        """A marker met while rebuilding the state: the transaction closes, and an abort that the
        segment's transaction index lacks (a crash before it was flushed) is written again."""
        kind, coordinator_epoch = marker_of(batch)
        done = self.state.complete_txn(
            batch.producer_id, batch.producer_epoch, coordinator_epoch, batch.base_offset, batch.max_timestamp
        )
        if done is None or kind is not ControlRecordType.ABORT:
            return
        first, last = done
        if any(t.producer_id == batch.producer_id and t.last_offset == last for t in seg.txn_index.entries):
            return
        unstable = self.state.first_unstable_offset()
        seg.txn_index.append(AbortedTxn(batch.producer_id, first, last, last + 1 if unstable is None else unstable))

    def _complete_marker(self, batch: RecordBatch, marker_offset: int) -> None:
        """A marker just written (by the leader or a follower): close the transaction and index an
        abort in the active segment's transaction index (lock held)."""
        kind, coordinator_epoch = marker_of(batch)
        done = self.state.complete_txn(
            batch.producer_id, batch.producer_epoch, coordinator_epoch, marker_offset, batch.max_timestamp
        )
        if done is not None and kind is ControlRecordType.ABORT:
            first, last = done
            unstable = self.state.first_unstable_offset()
            lso = last + 1 if unstable is None else unstable
            self._local.segments[-1].txn_index.append(AbortedTxn(batch.producer_id, first, last, lso))

    def check_markers(self, view: memoryview, headers: list[BatchHeader], *, strict: bool = False) -> None:
        """A coordinator's write, before it is written: markers and transactional data of a
        fenced producer (or coordinator) epoch are refused; no sequences are checked. ``strict``:
        a marker must carry an epoch newer than the producer's (transaction version 2)."""
        for h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                _kind, coordinator_epoch = marker_of(RecordBatch(view[h.position : h.position + h.size]))
                self.state.check_marker(h.producer_id, h.producer_epoch, coordinator_epoch, strict=strict)
            else:
                self.state.check_epoch(h.producer_id, h.producer_epoch)

    def check_producers(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """The leader's idempotence check of a client's batches (lock held): the batch this append
        repeats, or None to write it; raises the producer errors. A request with a producer id
        carries one batch per partition, as Kafka requires of idempotent producers."""
        duplicate = None
        for h in headers:
            if h.producer_id < 0:
                continue
            if len(headers) > 1:
                raise kerr.InvalidRecordError("an idempotent producer sends one batch per partition per request")
            last_seq = h.base_sequence + h.records_count - 1
            transactional = bool(h.attributes & _TRANSACTIONAL_FLAG)
            duplicate = self.state.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq, transactional)
        return duplicate

    def record_leader_appends(
        self, view: memoryview, headers: list[BatchHeader], first_offsets: list[int], timestamps: list[int]
    ) -> None:
        """What the leader just wrote (lock held)."""
        psm = self.state
        for h, first, ts in zip(headers, first_offsets, timestamps, strict=True):
            if h.producer_id < 0:
                continue
            if h.is_control:
                self._complete_marker(RecordBatch(view[h.position : h.position + h.size]), first)
                continue
            last_seq = h.base_sequence + h.records_count - 1
            transactional = bool(h.attributes & _TRANSACTIONAL_FLAG)
            last = first + h.last_offset_delta
            psm.update(h.producer_id, h.producer_epoch, h.base_sequence, last_seq, first, last, ts, transactional)
        psm.advance(self._local.log_end_offset)

    def record_replicated(self, batches: list[RecordBatch]) -> None:
        """What a follower just wrote, batches with producer ids (lock held)."""
        psm = self.state
        for b in batches:
            if b.is_control:
                self._complete_marker(b, b.base_offset)
                continue
            seq = b.base_sequence
            last_seq = seq + b.records_count - 1 if seq >= 0 else -1
            psm.update(
                b.producer_id, b.producer_epoch, seq, last_seq, b.base_offset, b.last_offset, b.max_timestamp,
                b.is_transactional,
            )  # fmt: skip
        psm.advance(self._local.log_end_offset)

    # ============================================================== read committed

    @property
    def last_stable_offset(self) -> int:
        """Below this offset every transaction is decided: the high watermark, or the first offset
        of the oldest open transaction when that is lower (what read_committed may read)."""
        unstable = self.state.first_unstable_offset()
        return self._local.high_watermark if unstable is None else min(unstable, self._local.high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_offset), from the transaction
        indexes of the segments from the one holding ``fetch_offset`` on (Kafka's
        collectAbortedTransactions)."""
        with self._local.lock:
            out: list[AbortedTxn] = []
            for i, seg in enumerate(self._local.segments):
                next_base = self._local.bases[i + 1] if i + 1 < len(self._local.bases) else None
                if next_base is not None and next_base <= fetch_offset:
                    continue
                found, complete = seg.txn_index.collect(fetch_offset, upper_offset)
                out.extend(found)
                if complete:
                    break
            return out

    def snapshot(self) -> None:
        """Snapshot the state at the log end (a roll, a clean close); lock held."""
        psm = self.state
        if psm.map_end_offset != self._local.log_end_offset:
            self.rebuild()
        try:
            psm.take_snapshot()
        except OSError as err:
            self._local.bound.warning("producer_snapshot_failed", error=str(err))

    # ================================================================== public

    def active(self) -> list[ProducerStateEntry]:
        """The producers this replica knows (DescribeProducers), by producer id."""
        with self._local.lock:
            return [self.state.producers[p] for p in sorted(self.state.producers)]

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``; how many went."""
        with self._local.lock:
            return self.state.remove_expired(self._local.clock_ms() if now_ms is None else now_ms)
