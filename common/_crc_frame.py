"""The CRC frame of kraftlog's own files: ``u32 length | u32 crc32c(payload) | payload``, so that a
torn or flipped record is detected instead of being decoded.

Two persisted formats use this frame with opposite byte orders, and neither may change (files
written by an older node must still open): the Raft journal, its meta file and the full dump
(`quorum.raft._journal`, `quorum.raft._serializer`) are little endian; the metadata log's segments and
snapshots (`metadata_log.log_files._log_frames`) are big endian. So the byte order is a parameter of every
function here, never a default.

The CRC is CRC-32C (Castagnoli), the checksum Kafka uses for record batches (`common.records.crc32c`).
"""

from __future__ import annotations

import struct
from typing import Final, Literal

from kraftlog.common.records import crc32c

__all__ = ["CRC_FRAME_HEADER_SIZE", "FrameByteOrder", "crc_frame_header", "crc_frame_problem", "encode_crc_frame"]

FrameByteOrder = Literal["big", "little"]

_HEADERS: Final[dict[str, struct.Struct]] = {"big": struct.Struct(">II"), "little": struct.Struct("<II")}

#: the header's bytes (length and CRC), in either byte order
CRC_FRAME_HEADER_SIZE: Final = 8

_MAX_UINT32: Final = 0xFFFFFFFF


def crc_frame_header(byte_order: FrameByteOrder) -> struct.Struct:
    """The header ``u32 length | u32 crc32c`` in ``byte_order``: ``unpack_from(buf, pos)`` gives
    ``(length, crc)``."""
    try:
        return _HEADERS[byte_order]
    except KeyError:
        raise ValueError(f"byte order must be 'big' or 'little', not {byte_order!r}") from None


def encode_crc_frame(payload: bytes | bytearray | memoryview, byte_order: FrameByteOrder) -> bytes:
    """``payload`` preceded by its length and CRC-32C in ``byte_order``."""
    if len(payload) > _MAX_UINT32:
        raise ValueError(f"frame payload of {len(payload)} bytes does not fit a uint32 length")
    return crc_frame_header(byte_order).pack(len(payload), crc32c(payload)) + bytes(payload)


def crc_frame_problem(payload: bytes | bytearray | memoryview, stored_crc: int) -> str | None:
    """Why ``payload`` does not match the CRC its frame header stored, or None when it does."""
    actual = crc32c(payload)
    if actual != stored_crc:
        return f"crc mismatch: stored {stored_crc:#010x}, computed {actual:#010x}"
    return None
