"""Kafka's primitive types for the records of the internal topics (``__consumer_offsets``,
``__transaction_state``): the fixed-width and varint numbers, strings, bytes and arrays of both
the classic (non-flexible) and the flexible versions (compact lengths, tagged fields), uuids.
Decoding errors are CORRUPT_MESSAGE."""

from __future__ import annotations

import struct
import uuid

from kraftlog.common.errors import CorruptMessageError

__all__ = ["I8", "I16", "I32", "I64", "Reader", "string", "bytes_", "uvarint", "compact_string", "compact_array_length"]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def string(value: str | None) -> bytes:
    if value is None:
        return I16.pack(-1)
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is longer than a Kafka string may be")
    return I16.pack(len(raw)) + raw


def bytes_(value: bytes) -> bytes:
    return I32.pack(len(value)) + value


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(value: str | None) -> bytes:
    """A flexible version's string: length + 1 as an unsigned varint (0: null), then UTF-8."""
    if value is None:
        return b"\x00"
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is longer than a Kafka string may be")
    return uvarint(len(raw) + 1) + raw


def compact_array_length(n: int) -> bytes:
    return uvarint(n + 1)


class Reader:
    """Kafka's primitive types off one buffer; any overrun or bad length is CORRUPT_MESSAGE."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptMessageError(f"{self.what} ends {self.pos + n - len(self.data)} bytes early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            (b,) = self._take(1)
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
        raise CorruptMessageError(f"{self.what} has a varint longer than 5 bytes")

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError as err:
            raise CorruptMessageError(f"{self.what} has a string that is not UTF-8") from err

    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise CorruptMessageError(f"{self.what} has a null or negative-length string where one is required")
        return self._text(self._take(n))

    def required_string(self, flexible: bool) -> str:
        value = self.string(flexible)
        assert value is not None
        return value

    def bytes_(self, flexible: bool) -> bytes:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CorruptMessageError(f"{self.what} has null bytes where bytes are required")
        return self._take(n)

    def array_length(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CorruptMessageError(f"{self.what} has a null array where one is required")
        if n > len(self.data) - self.pos:  # every element takes at least a byte
            raise CorruptMessageError(f"{self.what} claims {n} elements in {len(self.data) - self.pos} bytes")
        return n

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptMessageError(f"{self.what} has {len(self.data) - self.pos} bytes after its last field")

    def skip(self, n: int) -> None:
        self._take(n)

    def int8(self) -> int:
        return int(I8.unpack(self._take(1))[0])

    def uuid(self) -> str:
        """A uuid, in the canonical text form kraftlog keeps topic ids in."""
        return str(uuid.UUID(bytes=self._take(16)))
