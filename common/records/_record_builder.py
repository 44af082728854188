"""Writing RecordBatch v2: `RecordBatchBuilder`, control batches, and the in-place header rewrites
the leader makes when it appends (see `kraftlog.common.records`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kraftlog.common.errors import InvalidRecordError
from kraftlog.common.records._record_format import (
    _DELETE_HORIZON_FLAG,
    _INT32,
    _INT64,
    _TIMESTAMP_TYPE_FLAG,
    _TRANSACTIONAL_FLAG,
    _UINT32,
    ATTRIBUTES_POS,
    BASE_OFFSET_POS,
    CONTROL_FLAG,
    CRC_POS,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    MAX_TIMESTAMP_POS,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_POS,
    ControlRecordType,
    Header,
    TimestampType,
    _varint_bytes,
    crc32c,
)
from kraftlog.common.records.compression import CompressionType, compress


@dataclass
class RecordBatchBuilder:
    """Builds one v2 batch; records are encoded once, at `append`.

    Offsets default to dense deltas from ``base_offset``, as a producer writes them; the log
    cleaner passes explicit offsets to keep the originals.
    """

    base_offset: int = 0
    compression: CompressionType = CompressionType.NONE
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    is_control: bool = False
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    delete_horizon_ms: int = NO_TIMESTAMP
    base_timestamp: int | None = None
    _parts: list[bytes] = field(default_factory=list, repr=False)
    _size: int = 0
    _count: int = 0
    _last_offset_delta: int = -1
    _max_timestamp: int = NO_TIMESTAMP

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]] = (),
        offset: int | None = None,
    ) -> int:
        """Add a record; returns its offset delta in the batch.

        The producer's hot path: a record is a list of byte strings joined once (varints of small
        values come from a table), which measured ~40 % faster per record than appending field by
        field to one bytearray.
        """
        if timestamp_ms < NO_TIMESTAMP:
            raise InvalidRecordError(f"invalid negative timestamp {timestamp_ms}")
        if offset is None:
            offset_delta = self._last_offset_delta + 1
        else:
            offset_delta = offset - self.base_offset
            if offset_delta <= self._last_offset_delta:
                raise InvalidRecordError(
                    f"offset {offset} does not increase past {self.base_offset + self._last_offset_delta}"
                )
        if self.base_timestamp is None:
            self.base_timestamp = self.delete_horizon_ms if self.delete_horizon_ms != NO_TIMESTAMP else timestamp_ms
        varint = _varint_bytes
        parts = [b"\x00", varint(timestamp_ms - self.base_timestamp), varint(offset_delta)]  # attributes 0
        if key is None:
            parts.append(b"\x01")  # zig-zag -1: null
        else:
            parts.append(varint(len(key)))
            parts.append(key)
        if value is None:
            parts.append(b"\x01")
        else:
            parts.append(varint(len(value)))
            parts.append(value)
        if headers:
            parts.append(varint(len(headers)))
            for hkey, hval in headers:
                encoded = hkey.encode("utf-8")
                parts.append(varint(len(encoded)))
                parts.append(encoded)
                if hval is None:
                    parts.append(b"\x01")
                else:
                    parts.append(varint(len(hval)))
                    parts.append(hval)
        else:
            parts.append(b"\x00")
        body = b"".join(parts)
        length = varint(len(body))
        self._parts.append(length)
        self._parts.append(body)
        self._size += len(length) + len(body)
        self._count += 1
        self._last_offset_delta = offset_delta
        if timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        return offset_delta

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def estimated_size_bytes(self) -> int:
        return HEADER_SIZE + self._size

    def set_last_offset(self, last_offset: int) -> None:
        """Keep a batch's original last offset after the cleaner removed its tail records."""
        if last_offset - self.base_offset < self._last_offset_delta:
            raise InvalidRecordError("last offset below the records already appended")
        self._last_offset_delta = last_offset - self.base_offset

    def build(self) -> bytes:
        records = b"".join(self._parts)
        if self.compression != CompressionType.NONE:
            records = compress(self.compression, records)
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= _TIMESTAMP_TYPE_FLAG
        if self.is_transactional:
            attributes |= _TRANSACTIONAL_FLAG
        if self.is_control:
            attributes |= CONTROL_FLAG
        if self.delete_horizon_ms != NO_TIMESTAMP:
            attributes |= _DELETE_HORIZON_FLAG
        base_ts = self.base_timestamp if self.base_timestamp is not None else NO_TIMESTAMP
        max_ts = self._max_timestamp
        header = bytearray(
            HEADER_STRUCT.pack(
                self.base_offset,
                HEADER_SIZE - LOG_OVERHEAD + len(records),
                self.partition_leader_epoch,
                MAGIC_V2,
                0,
                attributes,
                max(self._last_offset_delta, 0),
                base_ts,
                max_ts,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                self._count,
            )
        )
        crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_POS:]))
        _UINT32.pack_into(header, CRC_POS, crc)
        return bytes(header) + records


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[Header | tuple[str, bytes | None]] = ()
) -> int:
    """An upper bound of one record's encoded size (varints at their widest for the deltas): what a
    producer reserves for a record before it knows its batch."""
    size = 5 + 1 + 10 + 5 + 5 + (len(key) if key else 0) + 5 + (len(value) if value else 0) + 5
    for hkey, hval in headers:
        size += 10 + len(hkey.encode("utf-8")) + (len(hval) if hval else 0)
    return size


def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None]]
    | Iterable[tuple[bytes | None, bytes | None, Sequence[Header]]],
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    **kwargs: object,
) -> bytes:
    """Build a batch of ``(key, value[, headers])`` records all stamped ``timestamp_ms``."""
    builder = RecordBatchBuilder(base_offset=base_offset, compression=compression, **kwargs)  # type: ignore[arg-type]
    for rec in records:
        headers: Sequence[Header] = rec[2] if len(rec) > 2 else ()
        builder.append(timestamp_ms, rec[0], rec[1], headers)
    return builder.build()


def build_control_batch(
    marker: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker: one control record, key ``(version 0, type)``, value
    ``(version 0, coordinator epoch)``."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp_ms, struct.pack(">hh", 0, int(marker)), struct.pack(">hi", 0, coordinator_epoch))
    return builder.build()


def rewrite_offset_and_epoch(buf: bytearray, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Set ``baseOffset`` and ``partitionLeaderEpoch`` of the batch at ``pos`` in place.

    Both fields precede the CRC'd range, so the stored CRC stays valid.
    """
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, leader_epoch)


def set_max_timestamp(buf: bytearray, pos: int, size: int, timestamp_ms: int) -> None:
    """Set a CreateTime batch's ``maxTimestamp`` to what its records hold, then re-CRC."""
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp_ms)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])
    _UINT32.pack_into(buf, pos + CRC_POS, crc)


_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
PRODUCER_ID_POS = 43


def set_producer_fields(buf: bytearray, pos: int, size: int, producer_id: int, epoch: int, base_sequence: int) -> None:
    """Stamp a batch with a producer id, epoch and base sequence (an idempotent producer's epoch
    bump re-stamps the batches it still has to send), then re-CRC."""
    _PRODUCER_FIELDS.pack_into(buf, pos + PRODUCER_ID_POS, producer_id, epoch, base_sequence)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])
    _UINT32.pack_into(buf, pos + CRC_POS, crc)


def set_log_append_time(buf: bytearray, pos: int, size: int, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime: set the type flag and maxTimestamp, then re-CRC."""
    attrs_pos = pos + ATTRIBUTES_POS
    (attrs,) = struct.unpack_from(">h", buf, attrs_pos)
    struct.pack_into(">h", buf, attrs_pos, attrs | _TIMESTAMP_TYPE_FLAG)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp_ms)
    crc = crc32c(memoryview(buf)[attrs_pos : pos + size])
    _UINT32.pack_into(buf, pos + CRC_POS, crc)
