"""Kafka's record-batch compression codecs: none, gzip, snappy, lz4 and zstd.

The whole records section of a v2 batch is compressed as one stream. Formats follow what the Java
client writes so that batches move between kraftlog and Kafka tools unchanged:

- gzip: an RFC 1952 stream.
- snappy: the Java client wraps raw snappy blocks in xerial's stream framing; the decoder accepts
  both framed and bare raw-snappy payloads (librdkafka and older clients send either).
- lz4: an LZ4 frame with independent blocks (Kafka's LZ4 reader refuses linked blocks).
- zstd: a standard zstd frame.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import lz4.frame

from ._errors import CorruptRecordError, UnsupportedCompressionTypeError

__all__ = ["CompressionType", "compress", "decompress"]


class CompressionType(enum.IntEnum):
    """Codec ids as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> "CompressionType":
        """Parse a ``compression.type`` value (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        try:
            return cls[name.strip().upper()]
        except KeyError as err:
            raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}") from err

    @classmethod
    def from_id(cls, codec_id: int) -> "CompressionType":
        try:
            return cls(codec_id)
        except ValueError as err:
            raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec_id}") from err


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy_encode(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decode(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy stream header")
    pos = len(_XERIAL_HEADER)
    out = []
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CorruptRecordError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + size])))
        pos += size
    return b"".join(out)


def compress(codec: CompressionType, data: bytes | memoryview) -> bytes:
    """Compress a records section with ``codec``."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        # wbits 31: a gzip header and trailer, as java.util.zip.GZIPOutputStream writes.
        comp = zlib.compressobj(6, zlib.DEFLATED, 31)
        return comp.compress(data) + comp.flush()
    if codec == CompressionType.SNAPPY:
        return _snappy_encode(data)
    if codec == CompressionType.LZ4:
        return lz4.frame.compress(bytes(data), block_linked=False, content_checksum=False)
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec!r}")


def decompress(codec: CompressionType, data: bytes | memoryview) -> bytes:
    """Decompress a records section; a malformed stream raises `CorruptRecordError`."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            if not len(data):
                raise CorruptRecordError("empty gzip stream")
            return gzip.decompress(bytes(data))  # every member, as java.util.zip.GZIPInputStream
        if codec == CompressionType.SNAPPY:
            return _snappy_decode(data)
        if codec == CompressionType.LZ4:
            return lz4.frame.decompress(bytes(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as err:  # every codec library has its own error type
        raise CorruptRecordError(f"cannot decompress {codec.name.lower()} records: {err}") from err
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec!r}")
