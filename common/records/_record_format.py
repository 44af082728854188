"""The RecordBatch v2 layout: header offsets and flags, the record types, zig-zag varints and CRC-32C
(see `kraftlog.common.records`).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import NamedTuple

import crc32c as _crc32c

from kraftlog.common.errors import CorruptMessageError as CorruptRecordError

MAGIC_V2 = 2


HEADER_SIZE = 61


LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count


NO_PRODUCER_ID = -1


NO_PRODUCER_EPOCH = -1


NO_SEQUENCE = -1


NO_PARTITION_LEADER_EPOCH = -1


NO_TIMESTAMP = -1


HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")


OFFSET_LENGTH_STRUCT = struct.Struct(">qi")


_INT64 = struct.Struct(">q")


_INT32 = struct.Struct(">i")


_UINT32 = struct.Struct(">I")


BASE_OFFSET_POS = 0


LENGTH_POS = 8


PARTITION_LEADER_EPOCH_POS = 12


MAGIC_POS = 16


CRC_POS = 17


ATTRIBUTES_POS = 21


MAX_TIMESTAMP_POS = 35


COMPRESSION_MASK = 0x07


_TIMESTAMP_TYPE_FLAG = 0x08


_TRANSACTIONAL_FLAG = 0x10


CONTROL_FLAG = 0x20


_DELETE_HORIZON_FLAG = 0x40


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C (Castagnoli), hardware-accelerated where the CPU has it."""
    return _crc32c.crc32c(data, value)


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    """Type of the single record of a control batch (transaction markers)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1


class Header(NamedTuple):
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    size_bytes: int = 0


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` zig-zag encoded as a base-128 varint."""
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def varint_size(value: int) -> int:
    v = (value << 1) ^ (value >> 63)
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


# Lengths and deltas are mostly small: -1 (null) .. 4094 come from a table (~8k entries, 1-2 bytes).
_SMALL_VARINTS = tuple(_encode_varint(v) for v in range(-1, 1 << 12))


def _varint_bytes(value: int) -> bytes:
    """``value`` zig-zag encoded as a base-128 varint, as bytes."""
    if -1 <= value < 4095:
        return _SMALL_VARINTS[value + 1]
    return _encode_varint(value)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; returns ``(value, next_pos)``."""
    try:
        b = buf[pos]
        pos += 1
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos
        result = b & 0x7F
        shift = 7
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint is longer than 10 bytes")
    except IndexError as err:
        raise CorruptRecordError("record ends inside a varint") from err
