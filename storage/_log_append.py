"""Where an append's bytes go: the offsets, epochs and timestamps a leader stamps on a validated
produce payload and the write that carries them, and the checks and locations of a follower's
fetched batches. Pure functions of the payload and the log's end, called by `Log` under its lock;
nothing here touches a file.

Ordering rule: the write plan describes bytes exactly as they will reach the file, so the segment
indexes built from ``locations`` name the offsets and positions the write gives them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kraftlog.common.records import CONTROL_FLAG as _CONTROL_FLAG
from kraftlog.common.records import LOG_OVERHEAD as _LOG_OVERHEAD
from kraftlog.common.records import MAGIC_V2 as _MAGIC
from kraftlog.common.records import RecordBatch, set_log_append_time, set_max_timestamp
from kraftlog.storage._errors import OffsetsOutOfOrderError
from kraftlog.storage._record_set import BatchHeader
from kraftlog.storage._segment import BatchLocation

__all__ = ["AppendPlan", "plan_follower_append", "plan_leader_append"]

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


class AppendPlan(NamedTuple):
    """One append's write: ``iov`` (the pieces, in order), the batches' ``locations``, the
    ``written`` bytes when they are one patched copy (else None: the caller's buffer, pieced),
    the largest timestamp and the offset it is at, the record count and the next offset."""

    iov: list[bytes | bytearray | memoryview]
    locations: list[BatchLocation]
    written: bytearray | None
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int
    next_offset: int


def plan_leader_append(
    view: memoryview,
    headers: Sequence[BatchHeader],
    max_timestamps: Sequence[int],
    total_bytes: int,
    first_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None,
) -> AppendPlan:
    """The write of a leader's validated payload: each batch gets the next offsets and
    ``leader_epoch``; with ``log_append_time_ms`` (message.timestamp.type=LogAppendTime) every
    data batch that time, else a header whose max timestamp disagrees with its records gets the
    records' (Kafka keeps the records' max).

    Small appends: one copy, patched in place, one pwrite. Large ones: a vectored write of each
    batch's patched 17-byte prefix (baseOffset, batchLength, partitionLeaderEpoch, magic) plus the
    untouched rest of the caller's buffer, so a 1 MiB batch is never copied in memory. LogAppendTime
    also changes attributes, maxTimestamp and the CRC, so that case always patches a copy."""
    log_append = log_append_time_ms is not None
    rewrite = not log_append and list(max_timestamps) != [h.max_timestamp for h in headers]
    copy = bytearray(view[:total_bytes]) if total_bytes < _COPY_BELOW_BYTES or log_append or rewrite else None
    iov: list[bytes | bytearray | memoryview] = [copy] if copy is not None else []
    locs: list[BatchLocation] = []
    offset = first_offset
    max_ts, offset_of_max_ts, num_records = -1, offset, 0
    for h, true_max_ts in zip(headers, max_timestamps, strict=False):
        pos, size = h.position, h.size
        batch_max_ts = h.max_timestamp
        if copy is not None:
            _pack_int64(copy, pos, offset)
            _pack_int32(copy, pos + 12, leader_epoch)
            if log_append_time_ms is not None and not h.attributes & _CONTROL_FLAG:
                set_log_append_time(copy, pos, size, log_append_time_ms)
                batch_max_ts = log_append_time_ms
            elif true_max_ts != batch_max_ts:
                set_max_timestamp(copy, pos, size, true_max_ts)
                batch_max_ts = true_max_ts
        else:  # the prefix packed anew: batchLength and magic were validated
            iov.append(_pack_prefix(offset, size - _LOG_OVERHEAD, leader_epoch, _MAGIC))
            iov.append(view[pos + _PREFIX_BYTES : pos + size])
        last = offset + h.last_offset_delta
        locs.append(_new_tuple(BatchLocation, (pos, size, offset, last, batch_max_ts, leader_epoch)))
        if batch_max_ts > max_ts:
            max_ts, offset_of_max_ts = batch_max_ts, last
        num_records += h.records_count
        offset = last + 1
    return _new_tuple(AppendPlan, (iov, locs, copy, max_ts, offset_of_max_ts, num_records, offset))


def plan_follower_append(
    view: memoryview, batches: Sequence[tuple[int, RecordBatch]], log_end_offset: int, name: str
) -> AppendPlan | None:
    """The write of a follower's fetched ``batches`` (positions in ``view``), offsets and epochs
    unchanged: the first must start at or after ``log_end_offset`` and offsets must increase,
    else `OffsetsOutOfOrderError` naming the partition ``name``. None without a whole batch."""
    locs: list[BatchLocation] = []
    end = 0
    num_records = 0
    max_ts, offset_of_max_ts = -1, -1
    prev_last = log_end_offset - 1
    for pos, b in batches:
        if b.base_offset <= prev_last or b.last_offset < b.base_offset:
            raise OffsetsOutOfOrderError(
                f"follower append of batch {b.base_offset}..{b.last_offset} does not follow "
                f"offset {prev_last} of {name}"
            )
        locs.append(
            BatchLocation(pos, b.size_bytes, b.base_offset, b.last_offset, b.max_timestamp, b.partition_leader_epoch)
        )
        if b.max_timestamp > max_ts:
            max_ts, offset_of_max_ts = b.max_timestamp, b.last_offset
        num_records += b.records_count
        prev_last = b.last_offset
        end = pos + b.size_bytes
    if not locs:
        return None
    return AppendPlan([view[:end]], locs, None, max_ts, offset_of_max_ts, num_records, prev_last + 1)
