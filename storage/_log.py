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

import threading
from collections.abc import Callable
from pathlib import Path

from kraftlog.common.records import RecordBatch, TimestampType, iter_batches
from kraftlog.storage._config import LogConfig
from kraftlog.storage._epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kraftlog.storage._errors import (
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from kraftlog.storage._local_log import LocalLog
from kraftlog.storage._log_append import plan_follower_append, plan_leader_append
from kraftlog.storage._log_dir_failure import reports_io_errors
from kraftlog.storage._log_loader import load_segments
from kraftlog.storage._log_producers import LogProducers
from kraftlog.storage._log_read import LogReader
from kraftlog.storage._log_retention import LogRetention
from kraftlog.storage._log_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    PARTITION_METADATA_FILE,
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    TimestampAndOffset,
    _wall_clock_ms,
    parse_topic_partition,
    partition_dir_name,
)
from kraftlog.storage._producer_state import ProducerStateEntry, ProducerStateManager
from kraftlog.storage._segment import BatchLocation, LogSegment
from kraftlog.storage._txn_index import AbortedTxn
from kraftlog.storage._validator import PreparedAppend, check_stored_batch, prepare_leader_append

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


_new_tuple = tuple.__new__  # builds a NamedTuple without its Python-level __new__ (hot path)


class Log:
    """A partition's log in one directory ``{topic}-{partition}`` (Kafka's ``UnifiedLog``).

    It holds collaborators that own their state, all under one lock: the `LocalLog` (segments,
    offsets, roll and flush), the leader-epoch cache, the `LogProducers` (producer state), the
    `LogReader` (fetches and lookups, and what reads verified) and the `LogRetention` (retention,
    DeleteRecords, compaction swaps). It validates and assigns offsets to appends, and keeps the
    collaborators in step where one change touches several (appends, truncation, close).

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
        self._clock_ms = clock_ms
        #: told of a write that failed with an OSError (set by the `LogManager`: the dir goes offline)
        self.on_io_error: Callable[[BaseException], None] | None = None
        self._lock = threading.RLock()
        local = self._local = LocalLog(
            directory,
            config,
            lock=self._lock,
            clock_ms=clock_ms,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
        )
        self.dir, self.topic, self.partition = local.dir, local.topic, local.partition
        self.epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        self._producers = LogProducers(local, ProducerStateManager(self.dir, expiration_ms=producer_id_expiration_ms))
        local.before_roll = self._producers.snapshot  # Kafka's: producers as of the new segment's base
        self._reader = LogReader(local, self.epoch_cache)
        self._retention = LogRetention(local, self.epoch_cache, self._producers)
        self._load(had_clean_shutdown)
        self._producers.rebuild()

    def _load(self, had_clean_shutdown: bool) -> None:
        local = self._local
        recovered_any = load_segments(local, had_clean_shutdown, self._assign_epoch_on_recovery)
        if local.log_end_offset < local.log_start_offset:
            # every byte up to the checkpointed start offset is gone: start there
            self._truncate_fully_locked(local.log_start_offset)
        local.advance_log_start(local.segments[0].base_offset)
        self.epoch_cache.truncate_from_end(local.log_end_offset)
        self.epoch_cache.truncate_from_start(local.log_start_offset)
        local.clamp_high_watermark(local.high_watermark)
        self._reader.loaded()
        local.bound.debug(
            "log_loaded",
            segments=len(local.segments),
            log_start_offset=local.log_start_offset,
            log_end_offset=local.log_end_offset,
            recovered=recovered_any,
        )

    def _assign_epoch_on_recovery(self, loc: BatchLocation) -> None:
        if loc.partition_leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(loc.partition_leader_epoch, loc.base_offset)

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._local.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._local.high_watermark

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def structure_version(self) -> int:
        """Changes when segments are truncated or removed (not by appends, rolls or cleaner
        swaps); read it under `lock` together with the segments a background pass plans on."""
        return self._local.structure_version

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._local.segments)

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._local.config = config

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers.state

    @property
    def cleaner_checkpoint(self) -> int:
        """Offsets below it were compacted (the cleaner's checkpoint)."""
        return self._retention.cleaner_checkpoint

    @cleaner_checkpoint.setter
    def cleaner_checkpoint(self, offset: int) -> None:
        self._retention.cleaner_checkpoint = offset

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns the value set."""
        with self._lock:
            return self._local.clamp_high_watermark(offset)

    # ================================================================== append

    def prepare_append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        max_inflate_bytes: int | None = None,
    ) -> PreparedAppend:
        """Validate (and recompress) a produce payload for `append_as_leader` without taking the
        log's lock or touching its state: safe on a worker thread, so decompressing and scanning a
        large payload need not hold the event loop. ``max_inflate_bytes``: see
        `prepare_leader_append`."""
        return prepare_leader_append(
            records,
            config=self._local.config,
            now=self._clock_ms(),
            from_client=origin is AppendOrigin.CLIENT,
            max_inflate_bytes=max_inflate_bytes,
        )

    @reports_io_errors
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        prepared: PreparedAppend | None = None,
        transaction_version: int = 0,
        verification_guard: object | None = None,
    ) -> LogAppendInfo:
        """Validate a produce payload, assign offsets from the log end, and append it.

        ``verification_guard``: a transactional batch verified with its coordinator (KIP-890
        part 1) is written only while the guard is still the producer's (see
        `ProducerStateManager.check_verification`).

        ``transaction_version`` 2 (a coordinator's marker of a KIP-890 transaction): the marker's
        epoch must be newer than the producer's epoch here, as the end bumped it; a copy of an
        older marker delayed past the producer's next transaction is refused instead of closing it.

        Every batch is validated first (`validate_record_set`, then `validate_leader_batches`: the
        records' framing is scanned, never decoded into objects). Only ``baseOffset`` and
        ``partitionLeaderEpoch`` of each batch are rewritten (outside the CRC); the max timestamp
        is rewritten, and the CRC recomputed, with ``message.timestamp.type=LogAppendTime`` or when
        the producer's header disagrees with its records. Records are re-encoded only when the
        topic's ``compression.type`` differs from the producer's codec.

        ``prepared``: what `prepare_append` made of these ``records`` (on another thread); used
        when it was made for the log's current config, else the payload is prepared again here.
        """
        from_client = origin is AppendOrigin.CLIENT
        now = self._clock_ms()
        cfg = self._local.config
        if prepared is None or prepared.config is not cfg:  # none, or checked for an older config
            prepared = prepare_leader_append(records, config=cfg, now=now, from_client=from_client)
        records, headers, max_timestamps = prepared.records, prepared.headers, prepared.max_timestamps
        total = headers[-1].position + headers[-1].size
        log_append = cfg.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        view = memoryview(records)
        with self._lock:
            if self._local.closed:
                self._local.ensure_open()
            if verification_guard is not None:
                first = headers[0]
                self._producers.state.check_verification(first.producer_id, first.producer_epoch, verification_guard)
            duplicate = self._producers.check_producers(headers) if from_client else None
            if origin is AppendOrigin.COORDINATOR:
                self._producers.check_markers(view, headers, strict=transaction_version >= 2)
            if duplicate is not None:  # a retry of a batch already written: its offsets, nothing written
                return _new_tuple(
                    LogAppendInfo,
                    (
                        duplicate.first_offset,
                        duplicate.last_offset,
                        duplicate.timestamp,
                        duplicate.last_offset,
                        -1,
                        self._local.log_start_offset,
                        0,
                        0,
                        0,
                    ),
                )
            first_offset = self._local.log_end_offset
            plan = plan_leader_append(
                view,
                headers,
                max_timestamps,
                total,
                first_offset,
                leader_epoch,
                log_append_time_ms=now if log_append else None,
            )
            if leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(leader_epoch, first_offset)
            locs = plan.locations
            self._local.append(plan.iov, locs, plan.num_records, plan.max_timestamp, total)
            if any(h.producer_id >= 0 for h in headers):
                written = memoryview(plan.written) if plan.written is not None else view
                self._producers.record_leader_appends(
                    written, headers, [loc.base_offset for loc in locs], [loc.max_timestamp for loc in locs]
                )
            else:
                self._producers.state.advance(self._local.log_end_offset)
            return _new_tuple(
                LogAppendInfo,
                (
                    first_offset,
                    plan.next_offset - 1,
                    plan.max_timestamp,
                    plan.offset_of_max_timestamp,
                    now if log_append else -1,
                    self._local.log_start_offset,
                    len(locs),
                    plan.num_records,
                    total,
                ),
            )

    @staticmethod
    def check_replicated(records: bytes | bytearray | memoryview) -> None:
        """`check_stored_batch` of every whole batch of a follower's fetch, touching no log state:
        safe on a worker thread (then `append_as_follower` with ``checked=True``)."""
        for _pos, b in iter_batches(memoryview(records)):
            check_stored_batch(b)

    @reports_io_errors
    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, checked: bool = False
    ) -> LogAppendInfo | None:
        """Append the leader's batches with their offsets and epochs unchanged.

        A partial batch at the end (a size-limited fetch) is ignored. Every batch must pass
        `check_stored_batch` (CRC and framing; else `CorruptRecordError`). The first batch must
        start at or after the log end, and offsets must increase; otherwise
        `OffsetsOutOfOrderError`. On any error the log is unchanged. Returns None when ``records``
        holds no whole batch. ``checked``: `check_replicated` already passed these very bytes.
        """
        view = memoryview(records)
        batches = list(iter_batches(view))
        for _pos, b in () if checked else batches:  # CRC and framing, before the lock: a scan may take a while
            check_stored_batch(b)
        with self._lock:
            self._local.ensure_open()
            plan = plan_follower_append(view, batches, self._local.log_end_offset, f"{self.topic}-{self.partition}")
            if plan is None:
                return None
            locs = plan.locations
            end = locs[-1].position + locs[-1].size
            if end > self.config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"append of {end} bytes exceeds segment.bytes {self.config.segment_bytes}"
                )
            for loc in locs:
                if loc.partition_leader_epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(loc.partition_leader_epoch, loc.base_offset)
            self._local.append(plan.iov, locs, plan.num_records, plan.max_timestamp, end)
            self._producers.record_replicated([b for _pos, b in batches if b.producer_id >= 0])
            return LogAppendInfo(
                locs[0].base_offset,
                locs[-1].last_offset,
                plan.max_timestamp,
                plan.offset_of_max_timestamp,
                -1,
                self._local.log_start_offset,
                len(locs),
                plan.num_records,
                end,
            )

    # ================================================================== roll and flush (`LocalLog`)

    @reports_io_errors
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        with self._lock:
            self._local.ensure_open()
            if self._local.active_segment.size == 0:
                return self._local.active_segment
            return self._local.roll(self._local.log_end_offset)

    @reports_io_errors
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to_offset`` (default: the log end) and
        move the recovery point there."""
        with self._lock:
            self._local.ensure_open()
            self._local.flush(self._local.log_end_offset if up_to_offset is None else up_to_offset)

    @reports_io_errors
    def maybe_flush(self) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush (the scheduler's check)."""
        with self._lock:
            return self._local.flush_if_due()

    # ================================================================== read (`LogReader`)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        verify: bool = True,
    ) -> FetchDataInfo:
        """See `LogReader.read`."""
        return self._reader.read(
            start_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message, verify=verify
        )

    def read_region(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo:
        """See `LogReader.read_region`."""
        return self._reader.read_region(start_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message)

    def batches(self, start_offset: int | None = None) -> list[RecordBatch]:
        """See `LogReader.batches`."""
        return self._reader.batches(start_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """See `LogReader.offset_for_timestamp`."""
        return self._reader.offset_for_timestamp(timestamp)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """See `LogReader.end_offset_for_epoch`."""
        return self._reader.end_offset_for_epoch(epoch)

    # ================================================================== producers (`LogProducers`)

    @property
    def last_stable_offset(self) -> int:
        """See `LogProducers.last_stable_offset`."""
        return self._producers.last_stable_offset

    def collect_aborted(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """See `LogProducers.collect_aborted`."""
        return self._producers.collect_aborted(fetch_offset, upper_offset)

    def active_producers(self) -> list[ProducerStateEntry]:
        """See `LogProducers.active`."""
        return self._producers.active()

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """See `LogProducers.remove_expired`."""
        return self._producers.remove_expired(now_ms)

    # ================================================================== truncation

    @reports_io_errors
    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or past ``offset``; returns True if anything was removed.

        Used by a follower whose log diverged from the leader's. The whole batch that holds
        ``offset`` is removed, so the new log end may fall below ``offset`` if it was mid-batch.
        The epoch cache, the producer state and the reader follow the segments down.
        """
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to negative offset {offset}")
        local = self._local
        with self._lock:
            local.ensure_open()
            if offset >= local.log_end_offset:
                return False
            if offset < local.segments[0].base_offset:
                self._truncate_fully_locked(offset)
                return True
            local.truncate_to(offset)
            end = local.log_end_offset
            self.epoch_cache.truncate_from_end(end)
            self._reader.truncated(end)
            self._producers.state.delete_snapshots_from(end + 1)
            self._producers.rebuild()  # the producers of the shorter log
            local.bound.info("truncated", to_offset=offset, log_end_offset=end)
            return True

    @reports_io_errors
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset`` (a follower far behind the leader's
        log start)."""
        with self._lock:
            self._local.ensure_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        self._local.truncate_fully(offset)
        self._reader.truncated(offset)
        self._retention.cleaner_checkpoint = offset
        self.epoch_cache.clear()
        self._producers.state.delete_snapshots_from(0)
        self._producers.state.clear(offset)
        self._local.bound.info("truncated_fully", start_offset=offset)

    # ================================================================== retention (`LogRetention`)

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """See `LogRetention.maybe_increment_log_start_offset`."""
        return self._retention.maybe_increment_log_start_offset(new_start)

    def delete_old_segments(self) -> int:
        """See `LogRetention.delete_old_segments`."""
        return self._retention.delete_old_segments()

    def replace_segments(
        self, new_segment: LogSegment, old: list[LogSegment], *, expected_version: int | None = None
    ) -> bool:
        """See `LogRetention.replace_segments`."""
        return self._retention.replace_segments(new_segment, old, expected_version=expected_version)

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """See `LogRetention.new_cleaned_segment`."""
        return self._retention.new_cleaned_segment(base_offset)

    # ================================================================== lifecycle

    def write_partition_metadata(self, topic_id: str) -> None:
        """``partition.metadata``: the topic id this directory belongs to (KIP-516)."""
        self._local.write_partition_metadata(topic_id)

    def read_partition_metadata(self) -> str | None:
        """The topic id in ``partition.metadata``, None without the file. As Kafka's reader: the
        file must say ``version: 0`` and name a topic id; anything else is a `KafkaStorageError`."""
        return self._local.read_partition_metadata()

    def close(self) -> None:
        """Flush everything and close the files (a clean shutdown of this log)."""
        local = self._local
        with self._lock:
            if local.closed:
                return
            local.flush(local.log_end_offset)
            self._producers.snapshot()  # a clean shutdown: the next load replays nothing
            local.close()

    def close_without_flush(self) -> None:
        """Close the files as a crash would leave them (tests of recovery)."""
        with self._lock:
            self._local.close_without_flush()

    def delete(self) -> None:
        """Remove the partition's directory and every file in it."""
        with self._lock:
            self._local.delete()

    def __repr__(self) -> str:
        local = self._local
        return (
            f"Log({self.topic}-{self.partition}, start={local.log_start_offset}, "
            f"end={local.log_end_offset}, hw={local.high_watermark}, segments={len(local.segments)})"
        )
