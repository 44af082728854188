"""The frame of the Raft journal (`quorum._journal`) and the full-dump serializer
(`quorum._serializer`). Durable writes (fsync, atomic replace) are `kraftlog.common`'s.

Frames: every length-prefixed record of ours is ``u32 length | u32 crc32c(payload) | payload``
(little endian), so a torn or flipped record is detected instead of being decoded.
"""

from __future__ import annotations

import struct
from typing import Final

import crc32c

__all__ = ["FRAME", "frame", "crc"]

#: ``u32 payload length | u32 crc32c(payload)``, little endian.
FRAME: Final = struct.Struct("<II")


def crc(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum Kafka uses for record batches."""
    return crc32c.crc32c(data) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    """``payload`` preceded by its length and CRC-32C."""
    return FRAME.pack(len(payload), crc(payload)) + payload
