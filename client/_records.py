"""Kafka v2 record batches as the client writes and reads them.

The client may import only `proto` (DESIGN.md §2), so it carries its own small codec rather than
`storage`'s; the unit tests check the two against each other (and against kafka-python) for every
codec, so they cannot drift apart.

A batch is a 61-byte header followed by the records section, all big-endian::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) |
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordsCount int32 | records...

and each record is ``length | attributes int8 | timestampDelta | offsetDelta | keyLength | key |
valueLength | value | headerCount | (keyLength key valueLength value)*`` with zig-zag varints and -1
for null. Attributes bits 0-2 name the codec of the whole records section: none, gzip (RFC 1952),
snappy (xerial framing, as the Java client writes it; bare raw snappy is accepted on read), lz4 (a
frame with independent blocks) and zstd.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cramjam
import crc32c as _crc32c
import lz4.frame

from kraftlog.common import errors as kerr

__all__ = [
    "CODECS",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "Batch",
    "BatchBuilder",
    "Record",
    "codec_id",
    "compress",
    "decompress",
    "iter_batches",
    "record_size_upper_bound",
]

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LENGTH = struct.Struct(">qi")
_CRC_POS = 17
_ATTRIBUTES_POS = 21

#: ``compression.type`` names -> codec ids (attributes bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CODEC_NAMES = {v: k for k, v in CODECS.items()}
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_FLAG = 0x08
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20


def codec_id(codec: str | int | None) -> int:
    """A ``compression.type`` name (or id, or an enum with an int value) -> codec id."""
    if codec is None:
        return 0
    if isinstance(codec, str):
        try:
            return CODECS[codec.strip().lower()]
        except KeyError:
            raise kerr.UnsupportedCompressionTypeError(
                f"unknown compression type {codec!r} (one of {', '.join(CODECS)})") from None
    value = int(codec)
    if value not in _CODEC_NAMES:
        raise kerr.UnsupportedCompressionTypeError(f"unknown compression codec id {value}")
    return value


# ------------------------------------------------------------------------------------- codecs

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == 0:
        return bytes(data)
    if codec == 1:
        z = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip header and trailer
        return z.compress(data) + z.flush()
    if codec == 2:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(view[start:start + _XERIAL_BLOCK])))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == 3:
        return lz4.frame.compress(bytes(data), block_linked=False, content_checksum=False)
    if codec == 4:
        return bytes(cramjam.zstd.compress(bytes(data)))
    raise kerr.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a records section; a malformed stream raises `CorruptMessageError`."""
    try:
        if codec == 0:
            return bytes(data)
        if codec == 1:
            return gzip.decompress(bytes(data))
        if codec == 2:
            view = memoryview(data)
            if bytes(view[:8]) != _XERIAL_MAGIC:
                return bytes(cramjam.snappy.decompress_raw(bytes(view)))
            pos, out = len(_XERIAL_HEADER), []
            while pos < len(view):
                (size,) = struct.unpack_from(">i", view, pos)
                pos += 4
                if size < 0 or pos + size > len(view):
                    raise ValueError("truncated xerial snappy block")
                out.append(bytes(cramjam.snappy.decompress_raw(bytes(view[pos:pos + size]))))
                pos += size
            return b"".join(out)
        if codec == 3:
            return lz4.frame.decompress(bytes(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except Exception as err:  # every codec library raises its own error type
        raise kerr.CorruptMessageError(
            f"cannot decompress {_CODEC_NAMES.get(codec, codec)} records: {err}") from err
    raise kerr.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


# ------------------------------------------------------------------------------------ varints


def _zigzag_varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SMALL = [_zigzag_varint(i) for i in range(-1, 1 << 12)]  # lengths and deltas are mostly small


def _varint(value: int) -> bytes:
    if -1 <= value < 4095:
        return _SMALL[value + 1]
    return _zigzag_varint(value)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result, shift = b & 0x7F, 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos + 1
            shift += 7
            if shift > 63:
                raise kerr.CorruptMessageError("varint longer than 10 bytes")
    except IndexError:
        raise kerr.CorruptMessageError("record ends inside a varint") from None


def record_size_upper_bound(key: bytes | None, value: bytes | None,
                            headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
    """An upper bound of one record's encoded size (varints at their widest for the deltas)."""
    size = 5 + 1 + 10 + 5 + 5 + (len(key) if key else 0) + 5 + (len(value) if value else 0) + 5
    for hkey, hval in headers:
        size += 10 + len(hkey.encode("utf-8")) + (len(hval) if hval else 0)
    return size


# ----------------------------------------------------------------------------------- building


class BatchBuilder:
    """Accumulates records for one batch; `build` writes the header, compresses and CRCs.

    Offset deltas are dense from 0 (the broker assigns the base offset), timestamps are stored as
    deltas from the first record's.
    """

    __slots__ = ("codec", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                 "_parts", "_size", "_count", "_base_ts", "_max_ts")

    def __init__(self, codec: int = 0, *, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, is_transactional: bool = False) -> None:
        self.codec = codec_id(codec)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self._parts: list[bytes] = []
        self._size = 0
        self._count = 0
        self._base_ts: int | None = None
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        """Header plus the uncompressed records section so far."""
        return HEADER_SIZE + self._size

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
        """Add a record; returns its offset delta in the batch."""
        if self._base_ts is None:
            self._base_ts = timestamp_ms
        delta = self._count
        parts = [b"\x00", _varint(timestamp_ms - self._base_ts), _varint(delta)]
        if key is None:
            parts.append(b"\x01")
        else:
            parts.append(_varint(len(key)))
            parts.append(key)
        if value is None:
            parts.append(b"\x01")
        else:
            parts.append(_varint(len(value)))
            parts.append(value)
        parts.append(_varint(len(headers)))
        for hkey, hval in headers:
            raw = hkey.encode("utf-8")
            parts.append(_varint(len(raw)))
            parts.append(raw)
            if hval is None:
                parts.append(b"\x01")
            else:
                parts.append(_varint(len(hval)))
                parts.append(hval)
        body = b"".join(parts)
        length = _varint(len(body))
        self._parts.append(length)
        self._parts.append(body)
        self._size += len(length) + len(body)
        self._count += 1
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        return delta

    def build(self, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        records = b"".join(self._parts)
        if self.codec:
            records = compress(self.codec, records)
        attributes = self.codec | (_TRANSACTIONAL_FLAG if self.is_transactional else 0)
        header = bytearray(_HEADER.pack(
            base_offset, HEADER_SIZE - LOG_OVERHEAD + len(records), partition_leader_epoch, MAGIC, 0,
            attributes, self._count - 1, self._base_ts, self._max_ts, self.producer_id,
            self.producer_epoch, self.base_sequence, self._count))
        crc = _crc32c.crc32c(records, _crc32c.crc32c(memoryview(header)[_ATTRIBUTES_POS:]))
        struct.pack_into(">I", header, _CRC_POS, crc)
        return bytes(header) + records


# ----------------------------------------------------------------------------------- decoding


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class Batch:
    """One v2 batch read from a fetch: header fields at once, records on `records`."""

    __slots__ = ("buffer", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                 "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "records_count")

    def __init__(self, buffer: bytes | memoryview) -> None:
        if len(buffer) < HEADER_SIZE:
            raise kerr.CorruptMessageError(f"record batch of {len(buffer)} bytes is shorter than its header")
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence,
         self.records_count) = _HEADER.unpack_from(buffer, 0)
        self.buffer = buffer

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def compression_type(self) -> str:
        return _CODEC_NAMES.get(self.codec, str(self.codec))

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & _TIMESTAMP_TYPE_FLAG) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_FLAG)

    def is_valid(self) -> bool:
        return self.magic == MAGIC and \
            _crc32c.crc32c(memoryview(self.buffer)[_ATTRIBUTES_POS:self.size_bytes]) == self.crc

    def ensure_valid(self) -> None:
        if self.magic != MAGIC:
            raise kerr.CorruptMessageError(f"unsupported magic {self.magic} at offset {self.base_offset}")
        computed = _crc32c.crc32c(memoryview(self.buffer)[_ATTRIBUTES_POS:self.size_bytes])
        if computed != self.crc:
            raise kerr.CorruptMessageError(
                f"record batch at offset {self.base_offset} is corrupt "
                f"(stored crc {self.crc:#010x}, computed {computed:#010x})")

    def control_type(self) -> int | None:
        """For a control batch the marker type (0 ABORT, 1 COMMIT), else None."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs or recs[0].key is None or len(recs[0].key) < 4:
            raise kerr.CorruptMessageError("control batch without a control record key")
        return struct.unpack_from(">hh", recs[0].key, 0)[1]

    def records(self) -> list[Record]:
        data = decompress(self.codec, memoryview(self.buffer)[HEADER_SIZE:self.size_bytes]) \
            if self.codec else bytes(memoryview(self.buffer)[HEADER_SIZE:self.size_bytes])
        base_offset, base_ts = self.base_offset, self.base_timestamp
        log_append = self.attributes & _TIMESTAMP_TYPE_FLAG
        out: list[Record] = []
        pos, end = 0, len(data)
        read = _read_varint
        try:
            for _ in range(self.records_count):
                length, pos = read(data, pos)
                stop = pos + length
                pos += 1  # record attributes
                ts_delta, pos = read(data, pos)
                off_delta, pos = read(data, pos)
                n, pos = read(data, pos)
                key = None
                if n >= 0:
                    key = data[pos:pos + n]
                    pos += n
                n, pos = read(data, pos)
                value = None
                if n >= 0:
                    value = data[pos:pos + n]
                    pos += n
                count, pos = read(data, pos)
                headers: list[tuple[str, bytes | None]] = []
                for _h in range(count):
                    n, pos = read(data, pos)
                    if n < 0:
                        raise kerr.CorruptMessageError("null header key")
                    hkey = data[pos:pos + n].decode("utf-8", errors="replace")
                    pos += n
                    n, pos = read(data, pos)
                    hval = None
                    if n >= 0:
                        hval = data[pos:pos + n]
                        pos += n
                    headers.append((hkey, hval))
                if pos != stop or pos > end:
                    raise kerr.CorruptMessageError(
                        f"record of declared length {length} does not end where it says "
                        f"(batch at offset {base_offset})")
                out.append(Record(base_offset + off_delta,
                                  self.max_timestamp if log_append else base_ts + ts_delta,
                                  key, value, headers))
        except IndexError:
            raise kerr.CorruptMessageError(f"truncated record in batch at offset {base_offset}") from None
        return out

    def __repr__(self) -> str:
        return (f"Batch(base_offset={self.base_offset}, count={self.records_count}, "
                f"size={self.size_bytes}, compression={self.compression_type})")


def iter_batches(buffer: bytes | memoryview) -> Iterator[Batch]:
    """Every whole batch in ``buffer``; a partial batch at the end (a size-limited fetch) is skipped."""
    view = memoryview(buffer)
    pos, end = 0, len(view)
    while pos + LOG_OVERHEAD <= end:
        _base, length = _OFFSET_LENGTH.unpack_from(view, pos)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise kerr.CorruptMessageError(f"record batch length {length} at byte {pos} is below the minimum")
        if pos + size > end:
            return
        yield Batch(view[pos:pos + size])
        pos += size
