"""The compiled records scan (storage/_cscan.c) decides as the Python scan does.

`scan_records` asks the compiled scan first and trusts a "well formed" answer with its figures, so
the two must agree on every input: same verdict, same (min, max) timestamp deltas and null keys.
On "malformed" the Python scan runs and names the record, so only the verdict of the compiled one
matters there. The Python run scan (the fallback where nothing was compiled) is held to the same
reference, the record-by-record loop.

The compiled module must be present here: the install builds it wherever a C compiler is at hand,
and CI machines have one; a build that silently fell back would leave the benchmark figures short.
"""

from __future__ import annotations

from typing import Any

import pytest
from _decoder_fuzz import FUZZ, INTERESTING_INTS, TIMEOUT, mutated
from hypothesis import given
from hypothesis import strategies as st

from kraftlog.common.records import HEADER_SIZE, RecordBatchBuilder, crc32c
from kraftlog.storage import LogConfig, StorageError, _scan, _validator
from kraftlog.storage._record_set import validate_record_set
from kraftlog.storage._scan import Malformed, RecordsScan, scan_records
from kraftlog.storage._validator import validate_leader_batches

pytestmark = pytest.mark.timeout(TIMEOUT)

NOW = 1_700_000_000_000


def _compiled() -> Any:
    from kraftlog.storage import _cscan

    return _cscan


def test_the_compiled_scan_is_built() -> None:
    assert _scan.compiled_scan is not None, "kraftlog.storage._cscan was not built (no C compiler at install?)"
    assert _compiled().scan(b"", 0, 0, 0, True, -1) == (0, 0, 0)


def _reference(data: bytes, count: int, lod: int, dense: bool, start: int, end: int) -> Any:
    try:
        return scan_records(data, count, last_offset_delta=lod, dense=dense, runs=False, start=start, end=end)
    except Malformed:
        return None


def _python_runs(data: bytes, count: int, lod: int, dense: bool, start: int, end: int) -> Any:
    saved = _scan.compiled_scan
    _scan.compiled_scan = None
    try:
        return scan_records(data, count, last_offset_delta=lod, dense=dense, start=start, end=end)
    except Malformed:
        return None
    finally:
        _scan.compiled_scan = saved


def _check(data: bytes, count: int, lod: int, dense: bool, start: int = 0, end: int | None = None) -> None:
    end = len(data) if end is None else end
    expected = _reference(data, count, lod, dense, start, end)
    got = _compiled().scan(data, start, end, count, dense, lod)
    assert (None if got is None else RecordsScan(*got)) == expected
    assert _python_runs(data, count, lod, dense, start, end) == expected


@st.composite
def sections(draw: st.DrawFn) -> tuple[bytes, int]:
    """An uncompressed records section: uniform, mixed, with headers, with far timestamps."""
    n = draw(st.integers(0, 120))
    builder = RecordBatchBuilder()
    kind = draw(st.sampled_from(("uniform", "mixed", "headers", "far")))
    for i in range(n):
        if kind == "uniform":
            builder.append(NOW + draw(st.integers(0, 200)), b"k%03d" % (i % 1000), b"v" * 30)
        elif kind == "headers":
            headers = [(f"h{j}", draw(st.none() | st.binary(max_size=6))) for j in range(draw(st.integers(0, 3)))]
            builder.append(NOW, draw(st.none() | st.binary(max_size=4)), b"x", headers)
        elif kind == "far":  # timestamp deltas of 8+ varint bytes, either sign
            builder.append(draw(st.integers(0, 2**62)), None, draw(st.binary(max_size=10)))
        else:
            builder.append(
                NOW + draw(st.integers(-100, 100)),
                draw(st.none() | st.binary(max_size=8)),
                draw(st.none() | st.binary(max_size=300)),
            )
    return builder.build()[HEADER_SIZE:], n


@FUZZ
@given(
    sections(),
    st.data(),
    st.booleans(),
    st.sampled_from((0, 0, 0, -1, 1)),
    st.binary(max_size=12),
    st.binary(max_size=12),
)
def test_compiled_scan_decides_as_the_python_scan(
    case: tuple[bytes, int], data: st.DataObject, dense: bool, shift: int, before: bytes, after: bytes
) -> None:
    section, count = case
    section = data.draw(st.just(section) | mutated(section))
    count = max(count + shift, 0)
    lod = data.draw(st.sampled_from((count - 1, count + 3, max(count - 3, -1))))
    _check(section, count, lod, dense)
    _check(before + section + after, count, lod, dense, len(before), len(before) + len(section))


@pytest.mark.parametrize("value", INTERESTING_INTS + (2**63, 2**64 - 1, 2**64, 2**70 - 1))
def test_varint_limits_agree(value: int) -> None:
    """A record whose timestamp-delta varint carries ``value`` (zig-zag already applied): 10-byte
    varints are at the int64 limit, longer ones malformed."""
    varint = bytearray()
    v = value
    while True:
        if v < 0x80:
            varint.append(v)
            break
        varint.append(v & 0x7F | 0x80)
        v >>= 7
    body = b"\x00" + bytes(varint) + b"\x00\x01\x00\x00"  # attributes, ts, offset 0, key -1, value 0, no headers
    length = len(body)
    section = bytes([length << 1]) + body
    for dense in (True, False):
        _check(section, 1, 0, dense)


def test_bad_windows_are_refused_not_read() -> None:
    data = bytes(10)
    assert _compiled().scan(data, 5, 20, 1, True, 0) is None
    assert _compiled().scan(data, 6, 5, 1, True, 0) is None
    assert _compiled().scan(data, -1, 5, 1, True, 0) is None


def _leader_outcome(buf: bytes, config: LogConfig) -> Any:
    try:
        headers = validate_record_set(buf, from_client=True)
        return validate_leader_batches(buf, headers, config=config, now=NOW, from_client=True)
    except StorageError as err:
        return (type(err).__name__, str(err), getattr(err, "record_errors", None))


@st.composite
def produce_payloads(draw: st.DrawFn) -> bytes:
    """One or two uncompressed producer batches (CRC recomputed after a mutation of the records)."""
    out = b""
    for _ in range(draw(st.integers(1, 2))):
        section, count = draw(sections())
        if not count:
            continue
        section = draw(st.just(section) | mutated(section))
        builder = RecordBatchBuilder()
        for i in range(count):
            builder.append(NOW + i, b"k", b"v")
        head = bytearray(builder.build()[:HEADER_SIZE])
        head[8:12] = (HEADER_SIZE - 12 + len(section)).to_bytes(4, "big")
        body = bytes(head[21:]) + section
        head[17:21] = crc32c(body).to_bytes(4, "big")
        out += bytes(head[:21]) + body
    return out or RecordBatchBuilder().build()


@FUZZ
@given(produce_payloads(), st.sampled_from(("delete", "compact")))
def test_the_leader_decides_alike_with_and_without_the_compiled_scan(buf: bytes, policy: str) -> None:
    """The validator calls the compiled scan itself: without it (an install with no C compiler)
    every payload gets the same answer, refusals word for word."""
    config = LogConfig(cleanup_policy=frozenset({policy}), message_timestamp_before_max_ms=10_000)
    with_compiled = _leader_outcome(buf, config)
    saved = _validator.compiled_scan
    _validator.compiled_scan = None
    try:
        assert _leader_outcome(buf, config) == with_compiled
    finally:
        _validator.compiled_scan = saved
