"""The producer state of a partition log (part of `storage._log.Log`): the idempotence checks of a
leader's append, the state every replica keeps from what it writes, and rebuilding it at load and
after a truncation from the newest producer snapshot plus the batches after it.

Ordering rules: a leader checks a batch against the state before any byte is written and records
it only after the write; a duplicate is answered with the offsets of the batch it repeats and
nothing is written. The state covers exactly the log below ``map_end_offset``: a truncation (or a
truncation to empty) drops it and rebuilds it from the newest snapshot below the new end, and a
snapshot is only ever written for an offset the state covers.
"""

from __future__ import annotations

from kraftlog.common import errors as kerr
from kraftlog.common.records import CONTROL_FLAG, HEADER_SIZE, HEADER_STRUCT

from ._log_state import _LogState
from ._producer_state import BatchMetadata, ProducerStateEntry, ProducerStateManager
from ._record_set import BatchHeader


class _LogProducers(_LogState):
    """Producer state of the log (see the module docstring)."""

    producer_state: ProducerStateManager

    def _rebuild_producer_state(self) -> None:
        """Newest snapshot at or below the log end, then every batch after it (lock held)."""
        psm = self.producer_state
        start = psm.load_snapshot(self._log_start_offset, self._log_end_offset, self._clock_ms())
        replayed = 0
        for i, seg in enumerate(self._segments):
            next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
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
                pid, epoch, seq, count = fields[9], fields[10], fields[11], fields[12]
                if pid >= 0 and not fields[5] & CONTROL_FLAG:  # control batches carry no sequence
                    last_seq = seq + max(count, 1) - 1 if seq >= 0 else -1
                    psm.update(pid, epoch, seq, last_seq, loc.base_offset, loc.last_offset, loc.max_timestamp)
                    replayed += 1
                psm.advance(loc.last_offset + 1)
        psm.advance(self._log_end_offset)
        if replayed or psm.producers:
            self._bound.info(
                "producer_state_loaded", snapshot_offset=start, batches_replayed=replayed, producers=len(psm.producers)
            )

    def _check_producers(self, headers: list[BatchHeader]) -> BatchMetadata | None:
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
            duplicate = self.producer_state.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq)
        return duplicate

    def _record_producers(self, headers: list[BatchHeader], first_offsets: list[int], timestamps: list[int]) -> None:
        """What the leader just wrote (lock held)."""
        psm = self.producer_state
        for h, first, ts in zip(headers, first_offsets, timestamps, strict=True):
            if h.producer_id >= 0 and not h.is_control:
                last_seq = h.base_sequence + h.records_count - 1
                psm.update(
                    h.producer_id, h.producer_epoch, h.base_sequence, last_seq, first, first + h.last_offset_delta, ts
                )
        psm.advance(self._log_end_offset)

    def _record_replicated(self, batches: list[tuple[int, int, int, int, int, int, int, bool]]) -> None:
        """What a follower just wrote: (pid, epoch, base seq, count, first, last, max ts, control)."""
        psm = self.producer_state
        for pid, epoch, seq, count, first, last, ts, control in batches:
            if pid >= 0 and not control:
                psm.update(pid, epoch, seq, seq + count - 1 if seq >= 0 else -1, first, last, ts)
        psm.advance(self._log_end_offset)

    def _producer_snapshot(self) -> None:
        """Snapshot the state at the log end (a roll, a clean close); lock held."""
        psm = self.producer_state
        if psm.map_end_offset != self._log_end_offset:
            self._rebuild_producer_state()
        try:
            psm.take_snapshot()
        except OSError as err:
            self._bound.warning("producer_snapshot_failed", error=str(err))

    # ================================================================== public

    def active_producers(self) -> list[ProducerStateEntry]:
        """The producers this replica knows (DescribeProducers), by producer id."""
        with self._lock:
            return [self.producer_state.producers[p] for p in sorted(self.producer_state.producers)]

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``; how many went."""
        with self._lock:
            return self.producer_state.remove_expired(self._clock_ms() if now_ms is None else now_ms)
