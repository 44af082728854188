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
import struct
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import zstandard

from kraftlog.common.errors import CorruptMessageError as CorruptRecordError
from kraftlog.common.errors import UnsupportedCompressionTypeError

__all__ = ["CompressionType", "InflateLimitError", "compress", "decompress", "decompress_chunks", "inflate_bound"]


class CompressionType(enum.IntEnum):
    """Codec ids as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse a ``compression.type`` value (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        try:
            return cls[name.strip().upper()]
        except KeyError as err:
            raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}") from err

    @classmethod
    def of(cls, value: str | int | CompressionType | None) -> CompressionType:
        """A ``compression.type`` as a client config gives it: a name, a codec id, or None (none)."""
        if value is None:
            return cls.NONE
        if isinstance(value, str):
            return cls.from_name(value)
        return cls.from_id(int(value))

    @classmethod
    def from_id(cls, codec_id: int) -> CompressionType:
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
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


class InflateLimitError(CorruptRecordError):
    """A records section inflates past the limit it was decompressed under (CORRUPT_MESSAGE, as
    any stream that will not inflate); ``limit_bytes`` names that limit, so a caller that asked
    for less than `inflate_bound` (the produce pool charges its memory budget by steps) can tell
    its own limit from the bound and try again with more."""

    limit_bytes: int


def _snappy_decode(data: bytes | memoryview, max_bytes: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        if cramjam.snappy.decompress_raw_len(view) > max_bytes:
            raise InflateLimitError(f"snappy records inflate past {max_bytes} bytes", limit_bytes=max_bytes)
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy stream header")
    pos = len(_XERIAL_HEADER)
    out = []
    total = 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CorruptRecordError("truncated xerial snappy block")
        block = view[pos : pos + size]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_bytes:
            raise InflateLimitError(f"snappy records inflate past {max_bytes} bytes", limit_bytes=max_bytes)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += size
    return b"".join(out)


def _decode_members(
    data: bytes | memoryview, max_bytes: int, codec: str, member: str, new_decompressor: Callable[[], Any]
) -> bytes:
    """Every member (gzip) or frame (lz4) of a stream of concatenated ones, never more than
    ``max_bytes`` of output: the bound is passed to each decompressor, so it is checked while
    inflating, not after. A stream that is empty or ends inside a member is corrupt."""
    rest = bytes(data)
    if not rest:
        raise CorruptRecordError(f"empty {codec} stream")
    out: list[bytes] = []
    total = 0
    while rest:
        d = new_decompressor()
        chunk = d.decompress(rest, max_length=max_bytes - total + 1)
        total += len(chunk)
        if total > max_bytes:
            raise InflateLimitError(f"{codec} records inflate past {max_bytes} bytes", limit_bytes=max_bytes)
        out.append(chunk)
        if not d.eof:
            raise CorruptRecordError(f"{codec} stream ends inside a {member}")
        rest = d.unused_data
    return b"".join(out)


#: output of one step of `decompress_chunks`: a thread inflating a large section holds the GIL only
#: between steps (zlib and lz4 release it while they inflate)
STEP_BYTES = 1 << 20


def _stepped_members(
    data: bytes | memoryview, max_bytes: int, codec: str, member: str, new_decompressor: Callable[[], Any]
) -> list[bytes]:
    """`_decode_members` in pieces of at most `STEP_BYTES`, as a list (never joined here). Works
    with zlib's decompressor (the input it did not take is in ``unconsumed_tail``) and lz4's (it
    keeps it, and is fed ``b""`` for more); two steps in a row without output and without new
    input mean the stream ends inside a member."""
    rest = bytes(data)
    if not rest:
        raise CorruptRecordError(f"empty {codec} stream")
    out: list[bytes] = []
    total = 0
    while rest:
        d = new_decompressor()
        feed = rest
        idle = 0
        while True:
            chunk = d.decompress(feed, max_length=min(STEP_BYTES, max_bytes - total + 1))
            total += len(chunk)
            if total > max_bytes:
                raise InflateLimitError(f"{codec} records inflate past {max_bytes} bytes", limit_bytes=max_bytes)
            if d.eof:
                if chunk:
                    out.append(chunk)
                break
            feed = getattr(d, "unconsumed_tail", b"")
            if chunk:
                out.append(chunk)
                idle = 0
            elif not feed:
                idle += 1
                if idle > 1:
                    raise CorruptRecordError(f"{codec} stream ends inside a {member}")
        rest = d.unused_data
    return out


def _gzip_decode(data: bytes | memoryview, max_bytes: int) -> bytes:
    """Every member of a gzip stream, as java.util.zip.GZIPInputStream reads it."""
    return _decode_members(data, max_bytes, "gzip", "member", lambda: zlib.decompressobj(wbits=31))


def _lz4_decode(data: bytes | memoryview, max_bytes: int) -> bytes:
    """Every LZ4 frame in ``data``."""
    return _decode_members(data, max_bytes, "lz4", "frame", lz4.frame.LZ4FrameDecompressor)


def _zstd_decode(data: bytes | memoryview, max_bytes: int) -> bytes:
    """A zstd stream into a buffer that doubles (up to ``max_bytes``) while it is too small.

    cramjam has no bounded streaming decoder, so a too-small buffer is retried bigger; the error
    it raises for "buffer too small" is told apart from a corrupt stream by its message.
    """
    declared = _zstd_content_size(data)
    size = min(max_bytes, declared if declared is not None else max(64 * 1024, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = cramjam.zstd.decompress_into(data, out)
        except cramjam.DecompressionError as err:
            if "failed to write whole buffer" not in str(err):
                raise CorruptRecordError(f"cannot decompress zstd records: {err}") from err
            if size >= max_bytes:
                raise InflateLimitError(f"zstd records inflate past {max_bytes} bytes", limit_bytes=max_bytes) from err
            size = min(max_bytes, max(size * 2, 64 * 1024))
            continue
        del out[n:]
        return bytes(out)


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_FCS_BYTES = (0, 2, 4, 8)
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)


_ZSTD_SKIPPABLE_MAGIC_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_RLE = 1
_ZSTD_BLOCK_RESERVED = 3


def _zstd_frames_end(data: bytes) -> None:
    """Walk the frames of a zstd stream by their headers and block headers only (RFC 8878 §3.1),
    raising `CorruptRecordError` unless every frame is whole: the stepped decoder reads what it
    can, so a stream cut inside a frame would otherwise go unnoticed."""
    pos, size = 0, len(data)
    while pos < size:
        if size - pos < 4:
            raise CorruptRecordError("zstd stream ends inside a frame header")
        (magic,) = struct.unpack_from("<I", data, pos)
        if magic & _ZSTD_SKIPPABLE_MAGIC_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if size - pos < 8:
                raise CorruptRecordError("zstd stream ends inside a skippable frame")
            (length,) = struct.unpack_from("<I", data, pos + 4)
            pos += 8 + length
            if pos > size:
                raise CorruptRecordError("zstd stream ends inside a skippable frame")
            continue
        if data[pos : pos + 4] != _ZSTD_MAGIC or size - pos < 5:
            raise CorruptRecordError("zstd stream has no frame where one should begin")
        descriptor = data[pos + 4]
        single_segment = bool(descriptor & 0x20)
        fcs_bytes = _ZSTD_FCS_BYTES[descriptor >> 6] or (1 if single_segment else 0)
        checksum = bool(descriptor & 0x04)
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_BYTES[descriptor & 0x03] + fcs_bytes
        last = False
        while not last:
            if size - pos < 3:
                raise CorruptRecordError("zstd stream ends inside a frame")
            header = int.from_bytes(data[pos : pos + 3], "little")
            last, block_type, block_size = bool(header & 1), (header >> 1) & 3, header >> 3
            if block_type == _ZSTD_BLOCK_RESERVED:
                raise CorruptRecordError("zstd block of the reserved type")
            pos += 3 + (1 if block_type == _ZSTD_BLOCK_RLE else block_size)
        pos += 4 if checksum else 0
        if pos > size:
            raise CorruptRecordError("zstd stream ends inside a frame")


def _zstd_stepped(data: bytes | memoryview, max_bytes: int) -> list[bytes]:
    """A zstd stream in pieces of at most `STEP_BYTES`, through zstandard's streaming reader, which
    decompresses without the GIL (cramjam holds it for the whole inflate: 240 ms for 256 MiB,
    during which the event loop waits); its frames are checked whole first."""
    raw = bytes(data)
    if not raw:
        raise CorruptRecordError("empty zstd stream")
    _zstd_frames_end(raw)
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    out: list[bytes] = []
    total = 0
    while True:
        piece = reader.read(min(STEP_BYTES, max_bytes - total + 1))
        if not piece:
            return out
        total += len(piece)
        if total > max_bytes:
            raise InflateLimitError(f"zstd records inflate past {max_bytes} bytes", limit_bytes=max_bytes)
        out.append(piece)


def _zstd_content_size(data: bytes | memoryview) -> int | None:
    """The first frame's Frame_Content_Size (RFC 8878 §3.1.1.1) when its header declares one."""
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    single_segment = bool(descriptor & 0x20)
    fcs_flag = descriptor >> 6
    fcs_bytes = _ZSTD_FCS_BYTES[fcs_flag] or (1 if single_segment else 0)
    if not fcs_bytes:
        return None
    pos = 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_BYTES[descriptor & 0x03]
    if pos + fcs_bytes > len(data):
        return None
    value = int.from_bytes(data[pos : pos + fcs_bytes], "little")
    return value + 256 if fcs_bytes == 2 else value


#: Default bound on a records section's inflated size: Kafka has none, but a few compressed bytes
#: must not make the broker allocate without limit (a "decompression bomb").
MIN_INFLATE_BOUND = 64 * 1024 * 1024
INFLATE_RATIO_BOUND = 16


def inflate_bound(compressed_bytes: int) -> int:
    """How large a records section of ``compressed_bytes`` may inflate: 64 MiB, or 16 times its
    compressed size when that is more."""
    return max(MIN_INFLATE_BOUND, INFLATE_RATIO_BOUND * compressed_bytes)


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
        compressed: bytes = lz4.frame.compress(bytes(data), block_linked=False, content_checksum=False)
        return compressed
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec!r}")


def decompress_chunks(codec: CompressionType, data: bytes | memoryview, max_bytes: int | None = None) -> list[bytes]:
    """`decompress`, as a list of pieces whose concatenation is the records section: gzip, lz4 and
    zstd inflate in steps of `STEP_BYTES` (a worker thread then holds the GIL only briefly at a
    time; the caller joins the pieces without it), snappy in one piece (cramjam's raw snappy
    releases the GIL)."""
    limit = inflate_bound(len(data)) if max_bytes is None else max_bytes
    try:
        if codec == CompressionType.GZIP:
            return _stepped_members(data, limit, "gzip", "member", lambda: zlib.decompressobj(wbits=31))
        if codec == CompressionType.LZ4:
            return _stepped_members(data, limit, "lz4", "frame", lz4.frame.LZ4FrameDecompressor)
        if codec == CompressionType.ZSTD:
            return _zstd_stepped(data, limit)
    except CorruptRecordError:
        raise
    except Exception as err:  # every codec library has its own error type
        raise CorruptRecordError(f"cannot decompress {codec.name.lower()} records: {err}") from err
    return [decompress(codec, data, limit)]


def decompress(codec: CompressionType, data: bytes | memoryview, max_bytes: int | None = None) -> bytes:
    """Decompress a records section; a malformed stream, or one inflating past ``max_bytes``
    (default `inflate_bound`), raises `CorruptRecordError`."""
    limit = inflate_bound(len(data)) if max_bytes is None else max_bytes
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return _gzip_decode(data, limit)
        if codec == CompressionType.SNAPPY:
            return _snappy_decode(data, limit)
        if codec == CompressionType.LZ4:
            return _lz4_decode(data, limit)
        if codec == CompressionType.ZSTD:
            return _zstd_decode(data, limit)
    except CorruptRecordError:
        raise
    except Exception as err:  # every codec library has its own error type
        raise CorruptRecordError(f"cannot decompress {codec.name.lower()} records: {err}") from err
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec!r}")
