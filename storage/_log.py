"""`Log`: one partition's replica on disk — segments, offsets, epochs, retention, recovery.

Ordering rules this class keeps:

- Validate before write: a batch is checked (size, magic, CRC, record count, the framing of every
  record, keys, timestamps: `storage._validator`) before any byte reaches the file, and a bad
  batch leaves the log unchanged. A follower checks CRC and framing of what it fetched.
- Verify before serve: batches below the log end at load were written by an earlier process (maybe
  an older version that validated less); a read checks their framing once (`VerifiedRanges`) and
  stops before a corrupt one, or raises `CorruptRecordError` naming its offset when it comes first.
- Epoch before data: a batch from a new leader epoch is recorded in the leader-epoch cache (and its
  checkpoint file) before the batch is appended.
- Data before index: index entries describe bytes already written, and reach the disk only when the
  log is flushed; the recovery point moves only after an fsync.
- Nothing past the high watermark is deleted by retention, and the log start offset never passes it.
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kraftlog.common.records import (
    CONTROL_FLAG as _CONTROL_FLAG,
)
from kraftlog.common.records import LOG_OVERHEAD as _LOG_OVERHEAD
from kraftlog.common.records import MAGIC_V2 as _MAGIC
from kraftlog.common.records import (
    RecordBatch,
    TimestampType,
    iter_batches,
    set_log_append_time,
    set_max_timestamp,
)
from kraftlog.storage._log_producers import _LogProducers
from kraftlog.storage._log_read import _LogReads
from kraftlog.storage._log_recovery import _LogRecovery
from kraftlog.storage._log_retention import _LogRetention
from kraftlog.storage._log_types import (
    _INT32_MAX,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    PARTITION_METADATA_FILE,
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    TimestampAndOffset,
    _log,
    _wall_clock_ms,
    parse_topic_partition,
    partition_dir_name,
)

from ._config import LogConfig
from ._epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from ._errors import (
    KafkaStorageError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from ._producer_state import ProducerStateManager
from ._record_set import validate_record_set
from ._segment import BatchLocation, LogSegment
from ._validator import (
    VerifiedRanges,
    check_stored_batch,
    recompress,
    target_codec,
    validate_leader_batches,
)

__all__ = [
    "Log",
    "LogAppendInfo",
    "FetchDataInfo",
    "TimestampAndOffset",
    "AppendOrigin",
    "parse_topic_partition",
    "partition_dir_name",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "PARTITION_METADATA_FILE",
]


# Below this many bytes, patching one copy of the payload is cheaper than a vectored write of two
# pieces per batch. Measured (CPU time per append, storage_bench.py batches): the vector saves
# ~1 us at 8 and 16 KiB and ~4 us at 64 KiB; at 4 KiB and below the copy is as cheap or cheaper.
_COPY_BELOW_BYTES = 6 * 1024
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic: before the CRC
_PREFIX_BYTES = _PREFIX.size  # 17
_pack_prefix = _PREFIX.pack
_pack_int64 = struct.Struct(">q").pack_into
_pack_int32 = struct.Struct(">i").pack_into
_new_tuple = tuple.__new__  # builds a NamedTuple without its Python-level __new__ (hot path)
# Rolled segments are fsynced off the append path, as Kafka's scheduler does after a roll.
_flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-flusher")


class Log(_LogRecovery, _LogReads, _LogRetention, _LogProducers):
    """A partition's log in one directory ``{topic}-{partition}``.

    Thread-safe: every public method holds the log's lock. Reads return copies of file bytes, so a
    later truncation cannot change data already handed out.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self._clock_ms = clock_ms
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = high_watermark
        self._log_end_offset = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self.cleaner_checkpoint = 0
        # bumped whenever segments leave the log other than by a cleaner swap (truncation,
        # retention, close): a cleaning pass planned before that must not install its output
        self._structure_version = 0
        self._closed = False
        self._verified = VerifiedRanges()
        self._unverified_end = 0  # offsets below this were on disk at load: checked when read
        self._reported_corrupt: set[int] = set()
        self._bound = _log.bind(topic=self.topic, partition=self.partition)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KafkaStorageError(f"cannot create log dir {self.dir}: {err}") from err
        self.epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(self.dir, expiration_ms=producer_id_expiration_ms)
        self._load(had_clean_shutdown)
        self._rebuild_producer_state()

    # ================================================================== loading and recovery

    # ================================================================== properties

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def structure_version(self) -> int:
        """Changes when segments are truncated or removed (not by appends, rolls or cleaner
        swaps); read it under `lock` together with the segments a background pass plans on."""
        return self._structure_version

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns the value set."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
            return self._high_watermark

    # ================================================================== append

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, *, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """Validate a produce payload, assign offsets from the log end, and append it.

        Every batch is validated first (`validate_record_set`, then `validate_leader_batches`: the
        records' framing is scanned, never decoded into objects). Only ``baseOffset`` and
        ``partitionLeaderEpoch`` of each batch are rewritten (outside the CRC); the max timestamp
        is rewritten, and the CRC recomputed, with ``message.timestamp.type=LogAppendTime`` or when
        the producer's header disagrees with its records. Records are re-encoded only when the
        topic's ``compression.type`` differs from the producer's codec.
        """
        from_client = origin is AppendOrigin.CLIENT
        headers = validate_record_set(records, from_client=from_client)
        now = self._clock_ms()
        cfg = self._config
        max_timestamps = validate_leader_batches(records, headers, config=cfg, now=now, from_client=from_client)
        codec = target_codec(cfg.compression_type)
        if codec is not None and any(not h.is_control and h.compression_id != codec for h in headers):
            view = memoryview(records)
            records = b"".join(
                bytes(view[h.position : h.position + h.size])
                if h.is_control or h.compression_id == codec
                else recompress(RecordBatch(view[h.position : h.position + h.size]), codec)
                for h in headers
            )
            headers = validate_record_set(records, from_client=False)
            for h in headers:  # a recompressed batch can come out larger than it went in
                if h.size > cfg.max_message_bytes:
                    raise RecordTooLargeError(
                        f"batch of {h.size} bytes after recompression to {cfg.compression_type} "
                        f"exceeds max.message.bytes {cfg.max_message_bytes}"
                    )
        total = headers[-1].position + headers[-1].size
        if total > cfg.segment_bytes:
            raise RecordBatchTooLargeError(f"append of {total} bytes exceeds segment.bytes {cfg.segment_bytes}")
        log_append = cfg.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        view = memoryview(records)
        with self._lock:
            if self._closed:
                self._ensure_open()
            duplicate = self._check_producers(headers) if from_client else None
            if origin is AppendOrigin.COORDINATOR:
                self._check_markers(view, headers)
            if duplicate is not None:  # a retry of a batch already written: its offsets, nothing written
                return _new_tuple(
                    LogAppendInfo,
                    (
                        duplicate.first_offset,
                        duplicate.last_offset,
                        duplicate.timestamp,
                        duplicate.last_offset,
                        -1,
                        self._log_start_offset,
                        0,
                        0,
                        0,
                    ),
                )
            offset = first_offset = self._log_end_offset
            locs: list[BatchLocation] = []
            # Small appends: one copy, patched in place, one pwrite. Large ones: a vectored write
            # of each batch's patched 17-byte prefix (baseOffset, batchLength,
            # partitionLeaderEpoch, magic) plus the untouched rest of the caller's buffer, so a
            # 1 MiB batch is never copied in memory. LogAppendTime also changes attributes,
            # maxTimestamp and the CRC, so that case always patches a copy.
            rewrite = not log_append and max_timestamps != [h.max_timestamp for h in headers]
            copy = bytearray(view[:total]) if total < _COPY_BELOW_BYTES or log_append or rewrite else None
            iov: list[bytes | bytearray | memoryview] = [copy] if copy is not None else []
            max_ts, offset_of_max_ts, num_records = -1, offset, 0
            for h, true_max_ts in zip(headers, max_timestamps, strict=False):
                pos, size = h.position, h.size
                batch_max_ts = h.max_timestamp
                if copy is not None:
                    _pack_int64(copy, pos, offset)
                    _pack_int32(copy, pos + 12, leader_epoch)
                    if log_append and not h.attributes & _CONTROL_FLAG:
                        set_log_append_time(copy, pos, size, now)
                        batch_max_ts = now
                    elif true_max_ts != batch_max_ts:  # Kafka keeps the records' max, not the header's
                        set_max_timestamp(copy, pos, size, true_max_ts)
                        batch_max_ts = true_max_ts
                else:  # the prefix packed anew: batchLength and magic were validated above
                    iov.append(_pack_prefix(offset, size - _LOG_OVERHEAD, leader_epoch, _MAGIC))
                    iov.append(view[pos + _PREFIX_BYTES : pos + size])
                last = offset + h.last_offset_delta
                locs.append(_new_tuple(BatchLocation, (pos, size, offset, last, batch_max_ts, leader_epoch)))
                if batch_max_ts > max_ts:
                    max_ts, offset_of_max_ts = batch_max_ts, last
                num_records += h.records_count
                offset = last + 1
            if leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(leader_epoch, first_offset)
            self._append_locked(iov, locs, num_records, max_ts, total)
            if any(h.producer_id >= 0 for h in headers):
                written = memoryview(copy) if copy is not None else view
                self._record_producers(
                    written, headers, [loc.base_offset for loc in locs], [loc.max_timestamp for loc in locs]
                )
            else:
                self.producer_state.advance(self._log_end_offset)
            return _new_tuple(
                LogAppendInfo,
                (
                    first_offset,
                    offset - 1,
                    max_ts,
                    offset_of_max_ts,
                    now if log_append else -1,
                    self._log_start_offset,
                    len(locs),
                    num_records,
                    total,
                ),
            )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo | None:
        """Append the leader's batches with their offsets and epochs unchanged.

        A partial batch at the end (a size-limited fetch) is ignored. Every batch must pass
        `check_stored_batch` (CRC and framing; else `CorruptRecordError`). The first batch must
        start at or after the log end, and offsets must increase; otherwise
        `OffsetsOutOfOrderError`. On any error the log is unchanged. Returns None when ``records``
        holds no whole batch.
        """
        view = memoryview(records)
        batches = list(iter_batches(view))
        for _pos, b in batches:  # CRC and framing, before the lock: a scan may take a while
            check_stored_batch(b)
        locs: list[BatchLocation] = []
        end = 0
        num_records = 0
        max_ts, offset_of_max_ts = -1, -1
        with self._lock:
            self._ensure_open()
            prev_last = self._log_end_offset - 1
            for pos, b in batches:
                if b.base_offset <= prev_last or b.last_offset < b.base_offset:
                    raise OffsetsOutOfOrderError(
                        f"follower append of batch {b.base_offset}..{b.last_offset} does not "
                        f"follow offset {prev_last} of {self.topic}-{self.partition}"
                    )
                locs.append(
                    BatchLocation(
                        pos, b.size_bytes, b.base_offset, b.last_offset, b.max_timestamp, b.partition_leader_epoch
                    )
                )
                if b.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = b.max_timestamp, b.last_offset
                num_records += b.records_count
                prev_last = b.last_offset
                end = pos + b.size_bytes
            if not locs:
                return None
            if end > self.config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"append of {end} bytes exceeds segment.bytes {self.config.segment_bytes}"
                )
            for loc in locs:
                if loc.partition_leader_epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(loc.partition_leader_epoch, loc.base_offset)
            self._append_locked([view[:end]], locs, num_records, max_ts, end)
            self._record_replicated([b for _pos, b in batches if b.producer_id >= 0])
            return LogAppendInfo(
                locs[0].base_offset,
                locs[-1].last_offset,
                max_ts,
                offset_of_max_ts,
                -1,
                self._log_start_offset,
                len(locs),
                num_records,
                end,
            )

    def _append_locked(
        self,
        buffers: list[bytes | bytearray | memoryview],
        locs: list[BatchLocation],
        num_records: int,
        max_timestamp: int,
        total_bytes: int,
    ) -> None:
        first, last = locs[0], locs[-1]
        if first.base_offset < self._log_end_offset:
            raise OffsetsOutOfOrderError(f"append at {first.base_offset} below log end {self._log_end_offset}")
        self._maybe_roll(total_bytes, max_timestamp, first.base_offset, last.last_offset)
        self._segments[-1].append(buffers, total_bytes, locs)
        self._log_end_offset = last.last_offset + 1
        self._unflushed_messages += num_records
        if self._unflushed_messages >= self._config.flush_messages:
            self._flush_locked(self._log_end_offset)

    # ================================================================== roll and flush

    def _maybe_roll(self, incoming_bytes: int, max_timestamp: int, first_offset: int, last_offset: int) -> None:
        seg = self._segments[-1]
        cfg = self._config
        if seg.size == 0:
            if first_offset != seg.base_offset:
                # an empty segment must start where the data starts (e.g. a follower after a gap)
                self._replace_empty_active(first_offset)
            return
        if seg.rolling_based_timestamp is not None and seg.rolling_based_timestamp >= 0:
            waited = max_timestamp - seg.rolling_based_timestamp
        else:
            waited = self._clock_ms() - seg.created_ms
        if (
            seg.size > cfg.segment_bytes - incoming_bytes
            or waited > cfg.segment_ms - cfg.segment_jitter_ms
            or seg.offset_index.is_full
            or seg.time_index.is_full
            or last_offset - seg.base_offset > _INT32_MAX
        ):
            self._roll_locked(first_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        seg = self._segments.pop()
        self._bases.pop()
        seg.delete()
        self._add_segment(self._new_segment(base_offset))

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        with self._lock:
            self._ensure_open()
            if self.active_segment.size == 0:
                return self.active_segment
            return self._roll_locked(self._log_end_offset)

    def _roll_locked(self, new_base: int) -> LogSegment:
        self._producer_snapshot()  # Kafka's: the producers as of the new segment's base offset
        old = self.active_segment
        old.offset_index.flush()  # index files complete on disk; fsync of the log follows below
        old.time_index.flush()
        seg = self._new_segment(new_base)
        self._add_segment(seg)
        self._bound.info("rolled_segment", base_offset=new_base, previous_size=old.size)
        _flusher.submit(self._flush_rolled, old, new_base)
        return seg

    def _flush_rolled(self, seg: LogSegment, up_to: int) -> None:
        try:
            with self._lock:
                if self._closed or seg not in self._segments:
                    return
                seg.flush()
                # earlier rolled segments were flushed first (one FIFO worker), so every offset
                # below ``up_to`` that is still in the log is now durable
                self._recovery_point = max(self._recovery_point, min(up_to, self._log_end_offset))
        except Exception as err:  # background task: report, do not lose the error silently
            self._bound.error("flush_after_roll_failed", error=str(err))

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to_offset`` (default: the log end) and
        move the recovery point there."""
        with self._lock:
            self._ensure_open()
            self._flush_locked(self._log_end_offset if up_to_offset is None else up_to_offset)

    def _flush_locked(self, up_to: int) -> None:
        if up_to <= self._recovery_point:
            return
        for i, seg in enumerate(self._segments):
            next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if next_base is not None and next_base <= self._recovery_point:
                continue
            if seg.base_offset >= up_to:
                break
            seg.flush()
        self._recovery_point = min(up_to, self._log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock_ms()

    def maybe_flush(self) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush (the scheduler's check)."""
        with self._lock:
            if self._closed or self._log_end_offset <= self._recovery_point:
                return False
            if self._clock_ms() - self._last_flush_ms >= self.config.flush_ms:
                self._flush_locked(self._log_end_offset)
                return True
            return False

    # ================================================================== read

    # ================================================================== truncation

    # ================================================================== retention

    # ================================================================== compaction support

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    # ================================================================== lifecycle

    def write_partition_metadata(self, topic_id: str) -> None:
        """``partition.metadata``: the topic id this directory belongs to (KIP-516)."""
        path = self.dir / PARTITION_METADATA_FILE
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"version: 0\ntopic_id: {topic_id}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def read_partition_metadata(self) -> str | None:
        """The topic id in ``partition.metadata``, None without the file. As Kafka's reader: the
        file must say ``version: 0`` and name a topic id; anything else is a `KafkaStorageError`."""
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

    def close(self) -> None:
        """Flush everything and close the files (a clean shutdown of this log)."""
        with self._lock:
            if self._closed:
                return
            self._structure_version += 1
            self._flush_locked(self._log_end_offset)
            self._producer_snapshot()  # a clean shutdown: the next load replays nothing
            for seg in self._segments:
                seg.flush()
                seg.close()
            self._closed = True

    def close_without_flush(self) -> None:
        """Close the files as a crash would leave them (tests of recovery)."""
        with self._lock:
            self._structure_version += 1
            for seg in self._segments:
                seg.close_without_flush()
            self._closed = True

    def delete(self) -> None:
        """Remove the partition's directory and every file in it."""
        with self._lock:
            self._structure_version += 1
            for seg in self._segments:
                seg.close_without_flush()
            self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def _ensure_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._log_end_offset}, hw={self._high_watermark}, segments={len(self._segments)})"
        )
