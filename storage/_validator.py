"""What a leader checks of a produced batch before any byte is written (Kafka's ``LogValidator``),
and what a follower or a fetch checks of a stored one.

Leader, per batch of a produce payload, after `validate_record_set` checked length, magic, CRC and
the producer's header fields:

- size within ``max.message.bytes`` (MESSAGE_TOO_LARGE);
- the records decode completely, decompressed once where compressed (a stream that does not
  inflate, or inflates past `inflate_bound`: CORRUPT_MESSAGE), every varint and length inside its
  record, offset deltas exactly ``0..n-1`` (INVALID_RECORD naming the record, as Kafka's
  ``InvalidRecordException`` from ``DefaultRecord.readFrom``);
- a key on every record of a compacted topic (INVALID_RECORD with one record error per record);
- CreateTime topics: every record timestamp (except -1, "none") within
  ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]`` (KIP-937;
  INVALID_TIMESTAMP with record errors), and a producer may not flag its batch LogAppendTime.

The leader also learns each batch's true max timestamp: Kafka rewrites ``maxTimestamp`` from the
records rather than trusting the producer's header, and so does `Log` with what this returns.

Follower and fetch (`check_stored_batch`): length, magic, CRC and the same framing scan, with
offset deltas only required to increase (a compacted batch keeps its offsets with gaps); any
failure is CORRUPT_MESSAGE naming the batch's base offset.

Errors are raised before anything is appended; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kraftlog.common.records import (
    CONTROL_FLAG,
    HEADER_SIZE,
    NO_TIMESTAMP,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
)
from kraftlog.common.records.compression import CompressionType, decompress_chunks, inflate_bound
from kraftlog.storage._config import LogConfig
from kraftlog.storage._errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kraftlog.storage._record_set import BatchHeader, validate_record_set
from kraftlog.storage._scan import Malformed, compiled_scan, join_chunks, record_fields, scan_records

__all__ = [
    "PreparedAppend",
    "prepare_leader_append",
    "validate_leader_batches",
    "check_stored_batch",
    "records_section",
    "recompress",
    "target_codec",
    "VerifiedRanges",
]

_TIMESTAMP_TYPE_FLAG = 0x08
_COMPRESSION_MASK = 0x07
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_SHOWN_ERRORS = 3  # record errors quoted in the error message, as Kafka's processRecordErrors


def records_section(batch: memoryview | bytes, attributes: int, max_inflate_bytes: int | None = None) -> bytes:
    """The uncompressed records section of one whole batch (decompressed once, bounded by
    `inflate_bound`, or by ``max_inflate_bytes`` when that is less: `InflateLimitError` past it;
    large sections in pieces joined without the GIL, see `decompress_chunks`)."""
    raw = batch[HEADER_SIZE:]
    codec = attributes & _COMPRESSION_MASK
    if codec == 0:
        return bytes(raw)
    limit = inflate_bound(len(raw))
    if max_inflate_bytes is not None:
        limit = min(limit, max_inflate_bytes)
    chunks = decompress_chunks(CompressionType.from_id(codec), raw, limit)
    return chunks[0] if len(chunks) == 1 else join_chunks(chunks)


def _summary(what: str, errors: Sequence[RecordError]) -> str:
    shown = "; ".join(f"record {e.batch_index}: {e.message}" for e in errors[:_SHOWN_ERRORS])
    more = f" (and {len(errors) - _SHOWN_ERRORS} more)" if len(errors) > _SHOWN_ERRORS else ""
    return f"{len(errors)} record(s) refused for {what}: {shown}{more}"


def validate_leader_batches(
    buffer: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    *,
    config: LogConfig,
    now: int,
    from_client: bool,
    max_inflate_bytes: int | None = None,
) -> list[int]:
    """Check every batch of a produce payload; returns each batch's true max timestamp.
    ``max_inflate_bytes``: what one batch may inflate to, when less than `inflate_bound` (see
    `records_section`).

    ``headers`` come from `validate_record_set` (header and CRC already checked). The returned
    max timestamp is computed from the records for CreateTime topics (-1 for a batch whose records
    carry none); control batches and LogAppendTime topics keep the header's value. Raises the
    first error found; batches are checked in order.
    """
    view = memoryview(buffer)
    create_time = config.message_timestamp_type == TimestampType.CREATE_TIME
    compacted = "compact" in config.cleanup_policy  # config.compact, without a property call per append
    lo = max(now - config.message_timestamp_before_max_ms, _LONG_MIN)
    hi = min(now + config.message_timestamp_after_max_ms, _LONG_MAX)
    max_bytes = config.max_message_bytes
    out: list[int] = []
    first_index = 0  # of the batch's first record in the payload: record errors count from there
    for h in headers:
        if h.size > max_bytes:
            raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes {max_bytes}")
        count = h.records_count
        if count <= 0 or h.last_offset_delta != count - 1:
            raise InvalidRecordError(
                f"record count {count} does not match the offset range (lastOffsetDelta {h.last_offset_delta})"
            )
        control = h.attributes & CONTROL_FLAG
        if from_client and create_time and h.attributes & _TIMESTAMP_TYPE_FLAG:
            msg = "a producer may not set the timestamp type LogAppendTime"
            errors = [RecordError(first_index + k, msg) for k in range(count)]
            raise InvalidTimestampError(_summary("their timestamp type", errors), record_errors=errors)
        if h.attributes & _COMPRESSION_MASK or not isinstance(buffer, bytes):
            data = records_section(view[h.position : h.position + h.size], h.attributes, max_inflate_bytes)
            start, end = 0, len(data)
        else:  # uncompressed records scanned where they are: a 1 MiB copy costs ~30 us
            data, start, end = buffer, h.position + HEADER_SIZE, h.position + h.size
        # the compiled scan directly (the common case, its figures as a plain tuple); scan_records
        # when there is none or it refuses, so that the refusal names the record
        figures = compiled_scan(data, start, end, count, True, count - 1) if compiled_scan is not None else None
        if figures is None:
            try:
                figures = scan_records(data, count, last_offset_delta=count - 1, dense=True, start=start, end=end)
            except Malformed as bad:
                err = RecordError(first_index + bad.index, bad.message)
                raise InvalidRecordError(
                    f"record {err.batch_index} does not decode: {bad.message}", record_errors=[err]
                ) from None
        min_ts_delta, max_ts_delta, null_keys = figures
        if compacted and null_keys and not control:
            msg = "a compacted topic cannot accept a record without a key"
            errors = [
                RecordError(first_index + k, msg)
                for k, (_ts, key_len) in enumerate(record_fields(data, count, start, end))
                if key_len < 0
            ]
            raise InvalidRecordError(_summary("a missing key", errors), record_errors=errors)
        max_ts = h.max_timestamp
        if create_time and not control:
            base = h.base_timestamp
            if base + min_ts_delta < lo or base + max_ts_delta > hi:
                _check_timestamps(data, start, end, count, base, lo, hi, first_index, config)
            max_ts = base + max_ts_delta
        out.append(max_ts)
        first_index += count
    return out


class PreparedAppend(NamedTuple):
    """A produce payload checked (and recompressed where the topic asks) for one `LogConfig`:
    what `Log.append_as_leader` writes, its batches' headers and their true max timestamps."""

    config: LogConfig
    records: bytes | bytearray | memoryview
    headers: list[BatchHeader]
    max_timestamps: list[int]


def prepare_leader_append(
    records: bytes | bytearray | memoryview,
    *,
    config: LogConfig,
    now: int,
    from_client: bool,
    max_inflate_bytes: int | None = None,
) -> PreparedAppend:
    """Everything a leader does to a produce payload before it takes the log's lock: validate
    every batch (`validate_record_set`, `validate_leader_batches`), recompress to the topic's
    ``compression.type`` where it differs from the producer's codec, and check the sizes.

    It reads no log state, so it may run on any thread (the broker runs large or compressed
    payloads on its produce-validation pool, off the event loop); raises what the checks raise.
    ``max_inflate_bytes``: the most one batch may inflate to when less than `inflate_bound` (the
    pool charges its memory budget for that much, and asks again with more on `InflateLimitError`).
    """
    headers = validate_record_set(records, from_client=from_client)
    max_timestamps = validate_leader_batches(
        records, headers, config=config, now=now, from_client=from_client, max_inflate_bytes=max_inflate_bytes
    )
    codec = target_codec(config.compression_type)
    if codec is not None and any(not h.is_control and h.compression_id != codec for h in headers):
        view = memoryview(records)
        records = b"".join(
            bytes(view[h.position : h.position + h.size])
            if h.is_control or h.compression_id == codec
            else recompress(RecordBatch(view[h.position : h.position + h.size]), codec)
            for h in headers
        )
        headers = validate_record_set(records, from_client=False)
        for h in headers:  # a recompressed batch can come out larger than it went in
            if h.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {h.size} bytes after recompression to {config.compression_type} "
                    f"exceeds max.message.bytes {config.max_message_bytes}"
                )
    total = headers[-1].position + headers[-1].size
    if total > config.segment_bytes:
        raise RecordBatchTooLargeError(f"append of {total} bytes exceeds segment.bytes {config.segment_bytes}")
    return PreparedAppend(config, records, headers, max_timestamps)


def _check_timestamps(
    data: bytes, start: int, end: int, count: int, base: int, lo: int, hi: int, first_index: int, config: LogConfig
) -> None:
    """The slow path once a batch's timestamp range crossed a bound: name each record outside it
    (a timestamp of -1 means "none" and is never out of range)."""
    errors = []
    for k, (delta, _key_len) in enumerate(record_fields(data, count, start, end)):
        ts = base + delta
        if ts != NO_TIMESTAMP and not lo <= ts <= hi:
            errors.append(
                RecordError(
                    first_index + k,
                    f"timestamp {ts} is outside [{lo}, {hi}] "
                    f"(message.timestamp.before.max.ms "
                    f"{config.message_timestamp_before_max_ms}, "
                    f"message.timestamp.after.max.ms "
                    f"{config.message_timestamp_after_max_ms})",
                )
            )
    if errors:
        raise InvalidTimestampError(_summary("their timestamp", errors), record_errors=errors)


def check_stored_batch(batch: RecordBatch) -> None:
    """Length, magic, CRC and framing of a batch a follower fetched or a fetch read from disk.

    Raises `CorruptRecordError` naming the batch's base offset; offsets need only increase.
    """
    try:
        batch.ensure_valid()
        if batch.records_count < 0 or batch.last_offset_delta < 0:
            raise CorruptRecordError(f"record count {batch.records_count}, last offset delta {batch.last_offset_delta}")
        if batch.attributes & _COMPRESSION_MASK or not isinstance(batch.buffer, bytes):
            data = records_section(memoryview(batch.buffer)[: batch.size_bytes], batch.attributes)
            start, end = 0, len(data)
        else:  # scanned in place, as the leader does
            data, start, end = batch.buffer, HEADER_SIZE, batch.size_bytes
        scan_records(
            data, batch.records_count, last_offset_delta=batch.last_offset_delta, dense=False, start=start, end=end
        )
    except Malformed as bad:
        raise CorruptRecordError(
            f"batch at offset {batch.base_offset} is corrupt: record {bad.index}: {bad.message}"
        ) from None
    except UnsupportedForMessageFormatError:
        raise
    except (CorruptRecordError, UnsupportedCompressionTypeError) as err:
        raise CorruptRecordError(f"batch at offset {batch.base_offset} is corrupt: {err}") from None


def target_codec(compression_type: str) -> CompressionType | None:
    """The codec a topic's ``compression.type`` asks for; None for ``producer`` (keep as sent)."""
    if compression_type == "producer":
        return None
    if compression_type == "uncompressed":
        return CompressionType.NONE
    return CompressionType.from_name(compression_type)


def recompress(b: RecordBatch, codec: CompressionType) -> bytes:
    """Re-encode a validated batch with the topic's codec (``compression.type`` other than
    ``producer``): the records are decoded into objects here, the one place the leader does so."""
    builder = RecordBatchBuilder(
        base_offset=b.base_offset,
        compression=codec,
        timestamp_type=b.timestamp_type,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence,
        is_transactional=b.is_transactional,
        partition_leader_epoch=b.partition_leader_epoch,
        base_timestamp=b.base_timestamp,
    )
    for r in b.records():
        builder.append(r.timestamp_ms, r.key, r.value, r.headers, offset=r.offset)
    return builder.build()


class VerifiedRanges:
    """Offset ranges ``[start, end)`` whose stored batches passed `check_stored_batch`, kept
    sorted, disjoint and merged, so a fetch re-reading old data scans it only once."""

    __slots__ = ("_ranges",)

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int]] = []

    def covers(self, start: int, end: int) -> bool:
        """Is all of ``[start, end)`` inside one verified range?"""
        for lo, hi in self._ranges:
            if lo <= start and end <= hi:
                return True
            if lo > start:
                return False
        return False

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        merged: list[tuple[int, int]] = []
        for lo, hi in self._ranges:
            if hi < start or lo > end:
                merged.append((lo, hi))
            else:
                start, end = min(lo, start), max(hi, end)
        merged.append((start, end))
        merged.sort()
        self._ranges = merged

    def __repr__(self) -> str:
        return f"VerifiedRanges({self._ranges})"
