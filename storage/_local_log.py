"""`LocalLog`: a partition log's segments and the offsets they define (Kafka's ``LocalLog``).

It owns the segment list (with the base offsets beside it, for bisection), the log start and end
offsets, the high watermark, the recovery point, the structure version, and the rolling and
flushing of segments. `Log` (Kafka's ``UnifiedLog``) holds one and adds what spans more than the
segments: validation, the leader-epoch cache, producer state, retention.

Ordering rules: data before index (index entries reach the disk when the log is flushed, and the
recovery point moves only after an fsync); a rolled segment is fsynced off the append path by one
FIFO worker, so the recovery point it sets covers every earlier segment too. Every method that
changes the segments or offsets runs under `lock`, which the owning `Log` shares with its other
collaborators.
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kraftlog.storage._config import LogConfig
from kraftlog.storage._errors import KafkaStorageError, OffsetsOutOfOrderError
from kraftlog.storage._log_types import (
    _INT32_MAX,
    DELETED_SUFFIX,
    PARTITION_METADATA_FILE,
    SWAP_SUFFIX,
    _log,
    parse_topic_partition,
)
from kraftlog.storage._segment import BatchLocation, LogSegment

__all__ = ["LocalLog"]

# Rolled segments are fsynced off the append path, as Kafka's scheduler does after a roll.
_flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-flusher")


class LocalLog:
    """The segments of one partition directory and their offsets.

    ``before_roll`` is called (lock held) before a new active segment starts: the owner snapshots
    its producer state there, as Kafka does at every roll.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        lock: threading.RLock,
        clock_ms: Callable[[], int],
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
    ) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self.lock = lock
        self.clock_ms = clock_ms
        self.bound: Any = _log.bind(topic=self.topic, partition=self.partition)
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []
        self.log_start_offset = log_start_offset
        self.log_end_offset = 0
        self.recovery_point = recovery_point
        self.high_watermark = high_watermark
        # bumped whenever segments leave the log other than by a cleaner swap (truncation,
        # retention, close): a cleaning pass planned before that must not install its output
        self.structure_version = 0
        self.closed = False
        self.before_roll: Callable[[], None] = lambda: None
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KafkaStorageError(f"cannot create log dir {self.dir}: {err}") from err

    # ------------------------------------------------------------------ segments

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self.clock_ms(),
            suffix=suffix,
        )

    def add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self.bases.append(seg.base_offset)

    def next_base(self, i: int) -> int | None:
        """The base offset of the segment after the ``i``-th, None for the active one."""
        return self.bases[i + 1] if i + 1 < len(self.bases) else None

    def segments_from(self, offset: int) -> Iterator[LogSegment]:
        """The segments that may hold ``offset`` or anything after it, in order."""
        for i, seg in enumerate(self.segments):
            nxt = self.next_base(i)
            if nxt is not None and nxt <= offset:
                continue
            yield seg

    def ensure_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    def clamp_high_watermark(self, offset: int) -> int:
        """Set the high watermark within [log start, log end]; the value set."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    # ------------------------------------------------------------------ append, roll, flush

    def append(
        self,
        buffers: list[bytes | bytearray | memoryview],
        locs: list[BatchLocation],
        num_records: int,
        max_timestamp: int,
        total_bytes: int,
    ) -> None:
        """Write validated batches with assigned offsets at the log end (lock held), rolling
        first when the active segment is full or old."""
        first, last = locs[0], locs[-1]
        if first.base_offset < self.log_end_offset:
            raise OffsetsOutOfOrderError(f"append at {first.base_offset} below log end {self.log_end_offset}")
        self._maybe_roll(total_bytes, max_timestamp, first.base_offset, last.last_offset)
        self.segments[-1].append(buffers, total_bytes, locs)
        self.log_end_offset = last.last_offset + 1
        self._unflushed_messages += num_records
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush(self.log_end_offset)

    def _maybe_roll(self, incoming_bytes: int, max_timestamp: int, first_offset: int, last_offset: int) -> None:
        seg = self.segments[-1]
        cfg = self.config
        if seg.size == 0:
            if first_offset != seg.base_offset:
                # an empty segment must start where the data starts (e.g. a follower after a gap)
                self._replace_empty_active(first_offset)
            return
        if seg.rolling_based_timestamp is not None and seg.rolling_based_timestamp >= 0:
            waited = max_timestamp - seg.rolling_based_timestamp
        else:
            waited = self.clock_ms() - seg.created_ms
        if (
            seg.size > cfg.segment_bytes - incoming_bytes
            or waited > cfg.segment_ms - cfg.segment_jitter_ms
            or seg.offset_index.is_full
            or seg.time_index.is_full
            or last_offset - seg.base_offset > _INT32_MAX
        ):
            self.roll(first_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        seg = self.segments.pop()
        self.bases.pop()
        seg.delete()
        self.add_segment(self.new_segment(base_offset))

    def roll(self, new_base: int) -> LogSegment:
        """Start a new active segment at ``new_base`` (lock held); the old one is fsynced in the
        background."""
        self.before_roll()
        old = self.active_segment
        old.offset_index.flush()  # index files complete on disk; fsync of the log follows below
        old.time_index.flush()
        seg = self.new_segment(new_base)
        self.add_segment(seg)
        self.bound.info("rolled_segment", base_offset=new_base, previous_size=old.size)
        _flusher.submit(self._flush_rolled, old, new_base)
        return seg

    def _flush_rolled(self, seg: LogSegment, up_to: int) -> None:
        try:
            with self.lock:
                if self.closed or seg not in self.segments:
                    return
                seg.flush()
                # earlier rolled segments were flushed first (one FIFO worker), so every offset
                # below ``up_to`` that is still in the log is now durable
                self.recovery_point = max(self.recovery_point, min(up_to, self.log_end_offset))
        except Exception as err:  # background task: report, do not lose the error silently
            self.bound.error("flush_after_roll_failed", error=str(err))

    def flush(self, up_to: int) -> None:
        """fsync the segments holding offsets below ``up_to`` and move the recovery point there
        (lock held)."""
        if up_to <= self.recovery_point:
            return
        for seg in self.segments_from(self.recovery_point):
            if seg.base_offset >= up_to:
                break
            seg.flush()
        self.recovery_point = min(up_to, self.log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock_ms()

    def flush_if_due(self) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush (lock held)."""
        if self.closed or self.log_end_offset <= self.recovery_point:
            return False
        if self.clock_ms() - self._last_flush_ms >= self.config.flush_ms:
            self.flush(self.log_end_offset)
            return True
        return False

    # ------------------------------------------------------------------ shrinking

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or past ``offset`` from the segments (lock held; ``offset`` is
        within the first segment or later). The whole batch holding ``offset`` goes."""
        self.structure_version += 1
        while len(self.segments) > 1 and self.bases[-1] > offset:
            seg = self.segments.pop()
            self.bases.pop()
            seg.delete()
        seg = self.active_segment
        seg.truncate_to(offset)
        self.log_end_offset = seg.read_next_offset()
        if seg.size == 0 and self.log_end_offset != offset and len(self.segments) == 1:
            self.log_end_offset = seg.base_offset
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        if self.log_start_offset > self.log_end_offset:
            self.log_start_offset = self.log_end_offset

    def truncate_fully(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset`` (lock held)."""
        self.structure_version += 1
        for seg in self.segments:
            seg.delete()
        self.segments, self.bases = [], []
        self.add_segment(self.new_segment(offset))
        self.log_end_offset = offset
        self.log_start_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset

    def advance_log_start(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (never down); the new log start."""
        self.log_start_offset = max(self.log_start_offset, offset)
        return self.log_start_offset

    def delete_leading(self, doomed: list[LogSegment]) -> None:
        """Take the first segments out of the log (lock held): renamed ``.deleted``, files removed
        by the caller once the lock is released; the log start moves to the first one left."""
        self.structure_version += 1
        self._take_out(doomed)
        self.advance_log_start(self.segments[0].base_offset)

    def swap_in(self, new_segment: LogSegment, old: list[LogSegment]) -> None:
        """Replace ``old`` by the complete ``new_segment`` (``.swap`` files) in one step (lock
        held): a cleaner swap, which leaves `structure_version` as it is. The caller deletes the
        old files once the lock is released."""
        self._take_out(old)
        new_segment.rename_all(SWAP_SUFFIX, "")
        i = bisect.bisect_left(self.bases, new_segment.base_offset)
        self.segments.insert(i, new_segment)
        self.bases.insert(i, new_segment.base_offset)

    def _take_out(self, doomed: list[LogSegment]) -> None:
        for seg in doomed:
            self.segments.remove(seg)
            self.bases.remove(seg.base_offset)
            seg.rename_for_deletion(DELETED_SUFFIX)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush the segments and close their files (lock held; the owner flushed the log first
        and wrote what must be on disk before a clean shutdown)."""
        self.structure_version += 1
        for seg in self.segments:
            seg.flush()
            seg.close()
        self.closed = True

    def close_without_flush(self) -> None:
        self.structure_version += 1
        for seg in self.segments:
            seg.close_without_flush()
        self.closed = True

    def delete(self) -> None:
        self.close_without_flush()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_partition_metadata(self, topic_id: str) -> None:
        path = self.dir / PARTITION_METADATA_FILE
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"version: 0\ntopic_id: {topic_id}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def read_partition_metadata(self) -> str | None:
        path = self.dir / PARTITION_METADATA_FILE
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise KafkaStorageError(f"cannot read {path}: {err}") from err
        fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in lines)}
        if fields.get("version") != "0":
            raise KafkaStorageError(f"{path}: unrecognised version {fields.get('version')!r}")
        topic_id = fields.get("topic_id", "")
        if not topic_id or any(c.isspace() for c in topic_id):
            raise KafkaStorageError(f"{path} has no valid topic_id")
        return topic_id
