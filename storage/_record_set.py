"""Splitting a produce payload into batches and checking each one's header and CRC.

The first step of an append, before `storage._validator` looks at the records: one header unpack
and one CRC-32C per batch. Separate from `storage._records` (the batch codec) so that neither file
outgrows its subject.
"""

from __future__ import annotations

from typing import NamedTuple

from kraftlog.common.records import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    OFFSET_LENGTH_STRUCT,
    RecordBatch,
    check_producer_fields,
    crc32c,
)
from kraftlog.common.records.compression import CompressionType
from kraftlog.storage._errors import CorruptRecordError, InvalidRecordError, UnsupportedForMessageFormatError

__all__ = ["BatchHeader", "validate_record_set", "split_batches"]

_new_tuple = tuple.__new__  # builds a NamedTuple without its Python-level __new__ (once per appended batch)


class BatchHeader(NamedTuple):
    """Header fields of a validated batch and its byte position in the produce payload."""

    position: int
    size: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    records_count: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_MASK


def validate_record_set(buffer: bytes | bytearray | memoryview, *, from_client: bool) -> list[BatchHeader]:
    """Split a produce payload into batches and check each one's header and CRC.

    The append hot path: one header unpack and one CRC-32C per batch, no record decoding. Checks
    length, magic, CRC and, for client batches (``from_client``), what Kafka checks of a producer's
    batch header: baseOffset 0, a record count matching the offset range, no control batches,
    consistent producer id, epoch and sequence, a known codec. The records themselves are checked
    by `storage._validator`. Raises the typed error; nothing is returned partially.
    """
    view = memoryview(buffer)
    end = len(view)
    if end == 0:
        raise InvalidRecordError("empty record set")
    out: list[BatchHeader] = []
    pos = 0
    unpack = HEADER_STRUCT.unpack_from
    while pos < end:
        if pos + HEADER_SIZE > end:
            raise CorruptRecordError(f"{end - pos} trailing bytes are not a record batch")
        (base, length, _ple, magic, crc, attrs, lod, base_ts, max_ts, pid, pe, seq, count) = unpack(view, pos)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch length {length} at byte {pos} is below the minimum")
        if pos + size > end:
            raise CorruptRecordError(f"batch at byte {pos} claims {size} bytes, {end - pos} present")
        if magic != MAGIC_V2:
            if magic in (0, 1):
                raise UnsupportedForMessageFormatError(f"message format v{magic}: only v2 (magic 2) is supported")
            raise CorruptRecordError(f"invalid magic {magic} in batch at byte {pos}")
        computed = crc32c(view[pos + ATTRIBUTES_POS : pos + size])
        if computed != crc:
            raise CorruptRecordError(
                f"CRC mismatch in batch at byte {pos}: stored {crc:#010x}, computed {computed:#010x}"
            )
        if from_client:
            if base != 0:  # Kafka's UnifiedLog: a producer's v2 batch starts at offset 0
                raise InvalidRecordError(f"the baseOffset of a produced batch must be 0, not {base}")
            if attrs & CONTROL_FLAG:
                raise InvalidRecordError("clients may not produce control batches")
            if count <= 0 or lod + 1 != count:
                raise InvalidRecordError(
                    f"record count {count} does not match the offset range (lastOffsetDelta {lod})"
                )
            check_producer_fields(attrs, pid, pe, seq)
            if attrs & COMPRESSION_MASK > 4:
                CompressionType.from_id(attrs & COMPRESSION_MASK)
        out.append(_new_tuple(BatchHeader, (pos, size, lod, base_ts, max_ts, count, attrs, pid, pe, seq)))
        pos += size
    return out


def split_batches(buffer: bytes | bytearray | memoryview) -> list[RecordBatch]:
    """Split a produce payload into batches, refusing any byte that is not part of a whole batch."""
    view = memoryview(buffer)
    batches: list[RecordBatch] = []
    pos = 0
    end = len(view)
    if end == 0:
        raise InvalidRecordError("empty record set")
    while pos < end:
        if pos + LOG_OVERHEAD > end:
            raise CorruptRecordError(f"{end - pos} trailing bytes are not a record batch")
        _base, length = OFFSET_LENGTH_STRUCT.unpack_from(view, pos)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch length {length} at byte {pos} is below the minimum")
        if pos + size > end:
            raise CorruptRecordError(f"batch at byte {pos} claims {size} bytes, {end - pos} present")
        batches.append(RecordBatch(view[pos : pos + size]))
        pos += size
    return batches
