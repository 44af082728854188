"""`LogReader`: reading a partition log — fetches, timestamp and epoch lookups — over its `LocalLog`.

It owns what reads remember: which offsets written by an earlier process were already checked
(`VerifiedRanges`), where those offsets end, and which corrupt batches were already reported. A
read takes the log's lock only to find the bytes; checking them happens outside it.
"""

from __future__ import annotations

import bisect

from kraftlog.common.records import (
    RecordBatch,
    iter_batches,
)
from kraftlog.storage._epoch_cache import LeaderEpochCache
from kraftlog.storage._errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    UnsupportedForMessageFormatError,
)
from kraftlog.storage._local_log import LocalLog
from kraftlog.storage._log_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchDataInfo,
    TimestampAndOffset,
)
from kraftlog.storage._segment import LogSegment
from kraftlog.storage._validator import VerifiedRanges, check_stored_batch

__all__ = ["LogReader"]


class LogReader:
    """Reads: fetches by offset, lookups by timestamp and by leader epoch."""

    def __init__(self, local: LocalLog, epoch_cache: LeaderEpochCache) -> None:
        self._local = local
        self._epoch_cache = epoch_cache
        self._verified = VerifiedRanges()
        self._unverified_end = 0  # offsets below this were on disk at load: checked when read
        self._reported_corrupt: set[int] = set()

    def loaded(self) -> None:
        """The log was just loaded: everything below its end was written by an earlier process."""
        self._unverified_end = self._local.log_end_offset

    def truncated(self, offset: int) -> None:
        """Nothing at or past ``offset`` is left of what was on disk at load."""
        self._unverified_end = min(self._unverified_end, offset)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        verify: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes``.

        ``max_offset`` (exclusive) bounds what a consumer may see: the high watermark. Raises
        `OffsetOutOfRangeError` outside [log start offset, log end offset]. Batches that were on
        disk when the log was loaded are checked once (``verify``, see `_verify_read`): the read
        ends before a corrupt one, and raises `CorruptRecordError` naming its offset when the
        corrupt batch is the first one read.
        """
        info = self._read(start_offset, max_bytes, max_offset, min_one_message)
        if verify and info.records and info.first_batch_offset < self._unverified_end:
            return self._verify_read(info)
        return info

    def read_region(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo:
        """`read`, but the batches come as ``region`` (a `FileRegion` of the segment file, for
        sendfile) and ``records`` is empty. The caller closes the region. Batches that an earlier
        process wrote and no read checked yet are read and checked as `read` does, and come back
        as ``records`` instead: checking needs the bytes."""
        info = self._read(start_offset, max_bytes, max_offset, min_one_message, as_region=True)
        region = info.region
        if (
            region is not None
            and info.first_batch_offset < self._unverified_end
            and not self._verified.covers(info.first_batch_offset, min(info.next_offset, self._unverified_end))
        ):
            try:
                data = region.read()
            finally:
                region.close()
            return self._verify_read(info._replace(records=data, region=None))
        return info

    def _verify_read(self, info: FetchDataInfo) -> FetchDataInfo:
        """Check the batches of a read that an earlier process wrote (`check_stored_batch`),
        outside the lock; remember the checked range so the next read of it skips the scan."""
        first = last = -1
        for pos, b in iter_batches(info.records):
            if b.base_offset >= self._unverified_end:
                break
            if not self._verified.covers(b.base_offset, b.next_offset):
                try:
                    check_stored_batch(b)
                except (CorruptRecordError, UnsupportedForMessageFormatError) as err:
                    if b.base_offset not in self._reported_corrupt:
                        self._reported_corrupt.add(b.base_offset)
                        self._local.bound.error("corrupt_batch_on_disk", offset=b.base_offset, error=str(err))
                    if pos == 0:
                        raise CorruptRecordError(f"{self._local.topic}-{self._local.partition}: {err}") from None
                    info = info._replace(records=info.records[:pos], next_offset=b.base_offset)
                    break
            if first < 0:
                first = b.base_offset
            last = b.next_offset
        if first >= 0:
            with self._local.lock:
                self._verified.add(first, last)
        return info

    def _read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_message: bool,
        *,
        as_region: bool = False,
    ) -> FetchDataInfo:
        with self._local.lock:
            self._local.ensure_open()
            leo = self._local.log_end_offset
            if start_offset < self._local.log_start_offset or start_offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {start_offset} is outside [{self._local.log_start_offset}, {leo}] "
                    f"of {self._local.topic}-{self._local.partition}"
                )
            empty = FetchDataInfo(b"", -1, start_offset, self._local.high_watermark, self._local.log_start_offset, leo)
            if start_offset == leo or (max_offset is not None and start_offset >= max_offset):
                return empty
            i = max(bisect.bisect_right(self._local.bases, start_offset) - 1, 0)
            while i < len(self._local.segments):
                segment = self._local.segments[i]
                span = segment.read_span(
                    start_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
                )
                if span is not None:
                    position, size, first_base, next_offset = span
                    if not size:
                        return empty._replace(next_offset=next_offset)
                    if as_region:
                        return FetchDataInfo(
                            b"",
                            first_base,
                            next_offset,
                            self._local.high_watermark,
                            self._local.log_start_offset,
                            leo,
                            segment.region(position, size),
                        )
                    return FetchDataInfo(
                        segment.read_at(position, size),
                        first_base,
                        next_offset,
                        self._local.high_watermark,
                        self._local.log_start_offset,
                        leo,
                    )
                i += 1
            return empty

    def batches(self, start_offset: int | None = None) -> list[RecordBatch]:
        """Every batch from ``start_offset`` (default: log start), decoded shallowly and not
        checked (a dump shows corrupt batches too). For tools and tests; the fetch path uses
        `read`."""
        out: list[RecordBatch] = []
        offset = self._local.log_start_offset if start_offset is None else start_offset
        while offset < self._local.log_end_offset:
            info = self.read(offset, 8 * 1024 * 1024, verify=False)
            if not info.records:
                break
            out.extend(b for _pos, b in iter_batches(info.records))
            offset = info.next_offset
        return out

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp is >= ``timestamp``.

        ``EARLIEST_TIMESTAMP`` (-2) gives the log start, ``LATEST_TIMESTAMP`` (-1) the log end and
        ``MAX_TIMESTAMP`` (-3) the record with the largest timestamp.
        """
        with self._local.lock:
            self._local.ensure_open()
            if timestamp == EARLIEST_TIMESTAMP:
                return TimestampAndOffset(
                    -1, self._local.log_start_offset, self._epoch_cache.epoch_for_offset(self._local.log_start_offset)
                )
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._local.log_end_offset, self._epoch_cache.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp_offset()
            if timestamp < 0:
                raise InvalidRecordError(f"invalid target timestamp {timestamp}")
            start = self._local.log_start_offset
            for seg in self._local.segments:
                if seg.largest_timestamp < timestamp:
                    continue
                # a batch whose max timestamp qualifies may hold the matching records only below
                # the log start (after DeleteRecords): keep searching the batches after it
                for loc in seg.batches_from_timestamp(timestamp, start):
                    for rec in seg.read_batch(loc).records():
                        if rec.timestamp_ms >= timestamp and rec.offset >= start:
                            return TimestampAndOffset(rec.timestamp_ms, rec.offset, loc.partition_leader_epoch)
            return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        best: tuple[LogSegment, int] | None = None
        for seg in self._local.segments:
            if (
                seg.size
                and seg.max_timestamp_so_far >= 0
                and (best is None or seg.max_timestamp_so_far > best[0].max_timestamp_so_far)
            ):
                best = (seg, seg.max_timestamp_so_far)
        if best is None:
            return None
        seg, ts = best
        for loc in seg.batches_from_timestamp(ts, self._local.log_start_offset):
            for rec in seg.read_batch(loc).records():
                if rec.timestamp_ms == ts and rec.offset >= self._local.log_start_offset:
                    return TimestampAndOffset(ts, rec.offset, loc.partition_leader_epoch)
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end_offset)`` as the leader-epoch cache answers it."""
        with self._local.lock:
            return self._epoch_cache.end_offset_for(epoch, self._local.log_end_offset)
