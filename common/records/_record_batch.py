"""Reading RecordBatch v2: `RecordBatch` (a view over one batch's bytes) and `iter_batches`
(see `kraftlog.common.records`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kraftlog.common.errors import CorruptMessageError as CorruptRecordError
from kraftlog.common.errors import InvalidRecordError, UnsupportedForMessageFormatError
from kraftlog.common.records._record_format import (
    _DELETE_HORIZON_FLAG,
    _TIMESTAMP_TYPE_FLAG,
    _TRANSACTIONAL_FLAG,
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    OFFSET_LENGTH_STRUCT,
    ControlRecordType,
    Header,
    Record,
    TimestampType,
    crc32c,
    read_varint,
    varint_size,
)
from kraftlog.common.records.compression import CompressionType, decompress


class RecordBatch:
    """A read-only view of one v2 batch over a bytes-like buffer.

    The header is parsed once on construction; records are decoded (and decompressed) only when
    asked for. Construction checks only that the header fits: call `ensure_valid` to check magic,
    length and CRC before trusting the content.
    """

    __slots__ = (
        "buffer",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )

    buffer: bytes | bytearray | memoryview
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    def __init__(self, buffer: bytes | bytearray | memoryview) -> None:
        if len(buffer) < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch of {len(buffer)} bytes is smaller than the {HEADER_SIZE}-byte header"
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = HEADER_STRUCT.unpack_from(buffer, 0)
        self.buffer = buffer

    # -- header-derived properties
    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_id(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & _TIMESTAMP_TYPE_FLAG) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int:
        """KIP-534: the time after which the cleaner may drop this batch's tombstones."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    # -- validation
    def compute_crc(self) -> int:
        return crc32c(memoryview(self.buffer)[ATTRIBUTES_POS : self.size_bytes])

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except (CorruptRecordError, UnsupportedForMessageFormatError):
            return False
        return True

    def ensure_valid(self) -> None:
        """Check magic, length and CRC; raises `CorruptRecordError` (or unsupported format)."""
        if self.magic != MAGIC_V2:
            if self.magic in (0, 1):
                raise UnsupportedForMessageFormatError(
                    f"message format v{self.magic} at offset {self.base_offset}: only v2 is supported"
                )
            raise CorruptRecordError(f"invalid magic {self.magic} at offset {self.base_offset}")
        if self.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"batch length {self.batch_length} at offset {self.base_offset} is below the minimum"
            )
        if self.size_bytes > len(self.buffer):
            raise CorruptRecordError(
                f"batch at offset {self.base_offset} claims {self.size_bytes} bytes, {len(self.buffer)} present"
            )
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch in batch at offset {self.base_offset}: "
                f"stored {self.crc:#010x}, computed {computed:#010x}"
            )

    def ensure_producer_batch_valid(self) -> None:
        """The checks Kafka's LogValidator makes on a batch a client sent (beyond `ensure_valid`).

        The record count must match the offset range (a producer assigns dense deltas from 0), a
        client may not write control batches, and a transactional batch needs a producer id.
        """
        if self.is_control:
            raise InvalidRecordError("clients may not produce control batches")
        if self.records_count <= 0:
            raise InvalidRecordError(f"invalid record count {self.records_count}")
        if self.last_offset_delta + 1 != self.records_count:
            raise InvalidRecordError(
                f"record count {self.records_count} does not match the offset range "
                f"(lastOffsetDelta {self.last_offset_delta})"
            )
        check_producer_fields(self.attributes, self.producer_id, self.producer_epoch, self.base_sequence)
        CompressionType.from_id(self.attributes & COMPRESSION_MASK)  # UNSUPPORTED_COMPRESSION_TYPE

    # -- records
    def records_section(self) -> bytes:
        """The uncompressed records section."""
        raw = memoryview(self.buffer)[HEADER_SIZE : self.size_bytes]
        codec = self.attributes & COMPRESSION_MASK
        if codec == 0:
            return bytes(raw)
        return decompress(CompressionType.from_id(codec), raw)

    def records(self) -> list[Record]:
        """Decode every record; a malformed records section raises `CorruptRecordError`."""
        data = self.records_section()
        log_append = bool(self.attributes & _TIMESTAMP_TYPE_FLAG)
        out: list[Record] = []
        pos = 0
        end = len(data)
        base_offset = self.base_offset
        base_ts = self.base_timestamp
        for _ in range(self.records_count):
            if pos >= end:
                raise CorruptRecordError(
                    f"batch at offset {base_offset} declares {self.records_count} records, holds {len(out)}"
                )
            length, pos = read_varint(data, pos)
            start = pos
            stop = pos + length
            if length < 1 or stop > end:
                raise CorruptRecordError(f"invalid record length {length} in batch at {base_offset}")
            pos += 1  # record attributes, unused
            ts_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            key_len, pos = read_varint(data, pos)
            if key_len < -1 or key_len > stop - pos:
                raise CorruptRecordError(f"invalid key length {key_len} in batch at {base_offset}")
            if key_len >= 0:
                key: bytes | None = data[pos : pos + key_len]
                pos += key_len
            else:
                key = None
            value_len, pos = read_varint(data, pos)
            if value_len < -1 or value_len > stop - pos:
                raise CorruptRecordError(f"invalid value length {value_len} in batch at {base_offset}")
            if value_len >= 0:
                value: bytes | None = data[pos : pos + value_len]
                pos += value_len
            else:
                value = None
            header_count, pos = read_varint(data, pos)
            headers: tuple[Header, ...] = ()
            if header_count:
                if header_count < 0 or header_count > (stop - pos) // 2:
                    raise CorruptRecordError(f"invalid header count {header_count} in batch at {base_offset}")
                hs = []
                for _h in range(header_count):
                    hk_len, pos = read_varint(data, pos)
                    if hk_len < 0 or hk_len > stop - pos:
                        raise CorruptRecordError(f"invalid header key length {hk_len}")
                    hkey = data[pos : pos + hk_len].decode("utf-8", errors="replace")
                    pos += hk_len
                    hv_len, pos = read_varint(data, pos)
                    if hv_len < -1 or hv_len > stop - pos:
                        raise CorruptRecordError(f"invalid header value length {hv_len}")
                    if hv_len >= 0:
                        hval: bytes | None = data[pos : pos + hv_len]
                        pos += hv_len
                    else:
                        hval = None
                    hs.append(Header(hkey, hval))
                headers = tuple(hs)
            if pos != stop:
                raise CorruptRecordError(
                    f"record of declared length {length} spans {pos - start} bytes in batch at {base_offset}"
                )
            timestamp = self.max_timestamp if log_append else base_ts + ts_delta
            out.append(
                Record(base_offset + offset_delta, timestamp, key, value, headers, stop - start + varint_size(length))
            )
        if pos != end:
            raise CorruptRecordError(
                f"{end - pos} trailing bytes after {self.records_count} records in batch at {base_offset}"
            )
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_type(self) -> ControlRecordType | None:
        """For a control batch, the marker type of its record (ABORT or COMMIT)."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs or recs[0].key is None or len(recs[0].key) < 4:
            raise CorruptRecordError("control batch without a valid control record key")
        _version, ctype = struct.unpack_from(">hh", recs[0].key, 0)
        try:
            return ControlRecordType(ctype)
        except ValueError:
            return ControlRecordType.UNKNOWN  # a marker type from a newer version: skip, as Kafka does

    def to_bytes(self) -> bytes:
        return bytes(memoryview(self.buffer)[: self.size_bytes])

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={self.size_bytes}, "
            f"compression={self.compression.name.lower()}, epoch={self.partition_leader_epoch})"
        )


def iter_batches(
    buffer: bytes | bytearray | memoryview, start: int = 0, *, strict: bool = False
) -> Iterator[tuple[int, RecordBatch]]:
    """Yield ``(position, batch)`` for each whole batch in ``buffer`` (shallow: no CRC check).

    A partial batch at the end (as a size-limited fetch may return) is not yielded. A batch length
    below the header's ends the walk quietly (recovery's reading: the rest is a torn tail), or,
    with ``strict`` (a consumer reading a fetch), raises `CorruptRecordError`.
    """
    view = memoryview(buffer)
    pos = start
    end = len(view)
    while pos + LOG_OVERHEAD <= end:
        _base, length = OFFSET_LENGTH_STRUCT.unpack_from(view, pos)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            if strict:
                raise CorruptRecordError(f"record batch length {length} at byte {pos} is below the minimum")
            return
        if pos + size > end:
            return
        yield pos, RecordBatch(view[pos : pos + size])
        pos += size


def check_producer_fields(attrs: int, pid: int, epoch: int, sequence: int) -> None:
    """Producer id, epoch and base sequence must agree, as Kafka's LogValidator wants them: a
    batch with a producer id carries its epoch and a sequence; one without carries neither (this
    broker keeps no producer state, so it can only check that the fields are consistent); a
    transactional batch needs a producer id."""
    if pid < NO_PRODUCER_ID:
        raise InvalidRecordError(f"invalid producer id {pid}")
    if pid >= 0:
        if sequence < 0:
            raise InvalidRecordError(f"invalid sequence number {sequence} in a batch with producer id {pid}")
        if epoch < 0:
            raise InvalidRecordError(f"invalid producer epoch {epoch} in a batch with producer id {pid}")
    else:
        if attrs & _TRANSACTIONAL_FLAG:
            raise InvalidRecordError("transactional batch without a producer id")
        if sequence != NO_SEQUENCE or epoch != NO_PRODUCER_EPOCH:
            raise InvalidRecordError(f"producer epoch {epoch} and sequence {sequence} in a batch without a producer id")
