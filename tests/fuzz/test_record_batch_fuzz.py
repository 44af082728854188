"""Property tests (hypothesis) of the RecordBatch v2 decoder and the leader's validator (issue 12 §4).

Both directions:

- decode of arbitrary and of mutated bytes (real batches with bytes flipped, inserted, deleted or
  header fields overwritten, the CRC recomputed or not): every entry point returns a value or
  raises the package's own typed error (`storage.StorageError`); nothing else, no hang, bounded
  memory (the decompression bound holds);
- encode -> validate -> decode round trip: what the builder writes passes the leader's validator
  and decodes back to the input;
- what the validator accepts, both decoders (the broker's `storage` one and the consumer's
  `client` one) decode completely, with the offsets the header promises: a batch that passed the
  leader can never stall a consumer;
- the scan's fast path (runs checked with strided slices) agrees with its record-by-record path.

Budget: ``KRAFTLOG_FUZZ_EXAMPLES`` examples per property (default 40; ``make fuzz`` sets a long one).
"""

from __future__ import annotations

import os
import struct
import time
import tracemalloc
from typing import Any

import pytest
from _decoder_fuzz import RANDOM_SEARCH
from _oracle import kafka_python_can_judge
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kraftlog.common import errors as kerr
from kraftlog.common.records import HEADER_SIZE, Header, RecordBatch, RecordBatchBuilder, crc32c, iter_batches
from kraftlog.common.records.compression import MIN_INFLATE_BOUND
from kraftlog.storage import CompressionType, LogConfig, StorageError
from kraftlog.storage._record_set import split_batches, validate_record_set
from kraftlog.storage._scan import Malformed, scan_records
from kraftlog.storage._validator import check_stored_batch, records_section, validate_leader_batches

EXAMPLES = int(os.environ.get("KRAFTLOG_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not RANDOM_SEARCH,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
pytestmark = pytest.mark.timeout(max(300, EXAMPLES))

NOW = 1_700_000_000_000
CONFIG = LogConfig()
_HEADER = struct.Struct(">qiibIhiqqqhii")
_FIELDS = {  # header field -> (byte position, struct format)
    "length": (8, ">i"),
    "magic": (16, ">b"),
    "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"),
    "base_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"),
    "producer_id": (43, ">q"),
    "producer_epoch": (51, ">h"),
    "base_sequence": (53, ">i"),
    "records_count": (57, ">i"),
}
_HANG_S = 30.0  # one example taking this long is a hang, whatever the machine's load


# ---------------------------------------------------------------------------------------------
# strategies


@st.composite
def batches(draw: st.DrawFn, *, max_records: int = 40, uniform: bool | None = None) -> bytes:
    """A valid producer batch: any codec, keys/values/headers (null or not), timestamps near NOW.
    ``uniform`` batches repeat one record shape, so the scan's run path is exercised."""
    codec = draw(st.sampled_from(list(CompressionType)))
    n = draw(st.integers(1, max_records))
    builder = RecordBatchBuilder(compression=codec)
    if uniform is None:
        uniform = draw(st.booleans())
    if uniform:
        key = draw(st.none() | st.binary(max_size=12))
        value = draw(st.none() | st.binary(max_size=150))
        spread = draw(st.sampled_from([0, 50, 5000]))
        for i in range(n):
            builder.append(NOW + (i * spread) // max(n, 1), key, value)
        return builder.build()
    for _ in range(n):
        builder.append(
            draw(st.integers(NOW - 10**6, NOW + 10**6)),
            draw(st.none() | st.binary(max_size=30)),
            draw(st.none() | st.binary(max_size=80)),
            draw(st.lists(st.builds(Header, st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=2)),
        )
    return builder.build()


@st.composite
def mutated(draw: st.DrawFn, source: st.SearchStrategy[bytes]) -> bytes:
    """``source`` with 1..4 mutations, then (usually) a correct length and CRC again."""
    buf = bytearray(draw(source))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "field", "truncate"]))
        at = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[at] ^= draw(st.integers(1, 255))
        elif kind == "set" and buf:
            buf[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif kind == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete" and buf:
            del buf[at : at + draw(st.integers(1, 4))]
        elif kind == "field" and len(buf) >= HEADER_SIZE:
            name = draw(st.sampled_from(sorted(_FIELDS)))
            pos, fmt = _FIELDS[name]
            bits = struct.calcsize(fmt) * 8
            value = draw(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) | st.integers(-2, 70))
            struct.pack_into(fmt, buf, pos, max(-(2 ** (bits - 1)), min(value, 2 ** (bits - 1) - 1)))
        elif kind == "truncate":
            del buf[at:]
    if len(buf) >= HEADER_SIZE and draw(st.integers(0, 4)):  # 4 in 5: content checks, not the CRC
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def arbitrary() -> st.SearchStrategy[bytes]:
    """Random bytes behind a plausible header (magic 2, right length, right CRC) or none at all."""

    def framed(body: bytes, count: int, lod: int, attrs: int) -> bytes:
        header = bytearray(
            _HEADER.pack(0, HEADER_SIZE - 12 + len(body), -1, 2, 0, attrs, lod, NOW, NOW, -1, -1, -1, count)
        )
        struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + body))
        return bytes(header) + body

    return st.binary(max_size=300) | st.builds(
        framed, st.binary(max_size=300), st.integers(-2, 12), st.integers(-2, 12), st.integers(0, 7)
    )


# ---------------------------------------------------------------------------------------------
# the checks


def _bounded(fn: Any, *args: Any) -> Any:
    """Run ``fn``: it returns or raises `StorageError`; never more than the decompression bound
    of memory, never a hang."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        return fn(*args)
    except StorageError:
        return None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert time.monotonic() - start < _HANG_S
        assert peak < 2 * MIN_INFLATE_BOUND, f"{peak} bytes allocated"


def _decode_everything(buf: bytes) -> None:
    for _pos, b in iter_batches(buf):
        b.ensure_valid()
        b.records()
        if b.is_control:
            b.control_type()
    b = RecordBatch(buf)
    repr(b)
    b.records()


def _validate(buf: bytes) -> list[int]:
    headers = validate_record_set(buf, from_client=True)
    return validate_leader_batches(buf, headers, config=CONFIG, now=NOW, from_client=True)


def _accepted_batches_decode(buf: bytes) -> None:
    """If the leader accepts ``buf``, ours and an independent decoder (kafka-python) read every
    record it claims."""
    try:
        _validate(buf)
    except StorageError:
        return
    for _pos, b in iter_batches(buf):
        check_stored_batch(b)  # what a follower and a fetch check
        records = b.records()
        assert [r.offset for r in records] == list(range(b.base_offset, b.next_offset))
        if not kafka_python_can_judge(b, records):
            continue
        theirs = DefaultRecordBatch(b.to_bytes())
        assert theirs.validate_crc()
        assert [(r.offset, r.key, r.value, r.timestamp) for r in theirs] == [
            (r.offset, r.key, r.value, r.timestamp_ms) for r in records
        ]


def _every_entry_point(buf: bytes) -> None:
    _bounded(_decode_everything, buf)
    _bounded(split_batches, buf)
    _bounded(lambda: validate_record_set(buf, from_client=False))
    _bounded(_validate, buf)
    _bounded(_accepted_batches_decode, buf)
    for _pos, b in iter_batches(buf):
        _bounded(check_stored_batch, b)


@FUZZ
@given(buf=arbitrary())
def test_arbitrary_bytes_decode_or_raise_a_typed_error(buf: bytes) -> None:
    _every_entry_point(buf)


@FUZZ
@given(buf=mutated(batches()))
def test_mutated_batches_decode_or_raise_a_typed_error(buf: bytes) -> None:
    _every_entry_point(buf)


@FUZZ
@given(buf=mutated(batches(max_records=300, uniform=True)))
def test_mutated_uniform_batches_decode_or_raise_a_typed_error(buf: bytes) -> None:
    _every_entry_point(buf)


@FUZZ
@given(buf=batches())
def test_encode_validate_decode_round_trip(buf: bytes) -> None:
    b = RecordBatch(buf)
    [max_ts] = _validate(buf)
    records = b.records()
    assert max_ts == max(r.timestamp_ms for r in records) == b.max_timestamp
    assert len(records) == b.records_count
    _accepted_batches_decode(buf)
    again = RecordBatchBuilder(compression=b.compression)
    for r in records:
        again.append(r.timestamp_ms, r.key, r.value, r.headers)
    assert RecordBatch(again.build()).records() == records


def _scan_outcome(data: bytes, count: int, lod: int, dense: bool, runs: bool) -> Any:
    try:
        return scan_records(data, count, last_offset_delta=lod, dense=dense, runs=runs)
    except Malformed as bad:
        return ("malformed", bad.index, bad.message)


@FUZZ
@given(
    buf=mutated(batches(max_records=300, uniform=True)) | mutated(batches()),
    dense=st.booleans(),
    count_shift=st.sampled_from([0, 0, 0, -1, 1]),
)
def test_scan_runs_agree_with_the_record_by_record_path(buf: bytes, dense: bool, count_shift: int) -> None:
    if len(buf) < HEADER_SIZE:
        return
    b = RecordBatch(buf)
    try:
        data = records_section(memoryview(buf)[: min(len(buf), b.size_bytes)], b.attributes)
    except StorageError:
        return
    count = max(b.records_count + count_shift, 0)
    lod = b.last_offset_delta
    assert _scan_outcome(data, count, lod, dense, True) == _scan_outcome(data, count, lod, dense, False)


@pytest.mark.parametrize("n", [63, 64, 65, 66, 130, 8191, 8192, 8193, 8200])
def test_scan_paths_agree_across_varint_width_boundaries(n: int) -> None:
    """Offset deltas change varint width at 64 and 8192, timestamp deltas at 64 ms: runs must stop
    there, and a broken record must be named by both paths alike."""
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(NOW + i % 100, b"key", b"v" * 20)
    buf = builder.build()
    data = buf[HEADER_SIZE:]
    for dense in (True, False):
        assert _scan_outcome(data, n, n - 1, dense, True) == _scan_outcome(data, n, n - 1, dense, False)
    for at in (len(data) // 3, len(data) - 2, 7):
        broken = data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1 :]
        assert _scan_outcome(broken, n, n - 1, True, True) == _scan_outcome(broken, n, n - 1, True, False)


def test_typed_errors_are_kafkas() -> None:
    """The storage errors the validator raises map onto Kafka's table by code and name."""
    from kraftlog.storage import CorruptRecordError, InvalidRecordError, InvalidTimestampError

    for err in (CorruptRecordError, InvalidRecordError, InvalidTimestampError):
        assert kerr.error_for_code(err.error_code).error_name == err.error_name
