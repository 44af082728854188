"""Fuzz the metadata record codec (`decode_record`, `decode_entry`): bytes from the Raft log, a
segment file, a snapshot or a fetch answer.

Property: the decoder returns a record (or entry) or raises `MetadataRecordError`; nothing else, no
hang, and memory bounded by the input. A returned value must encode again and decode to itself, so
nothing that reaches the image is half-decoded.
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, any_bytes, bounded_call, mutated
from _metadata_strategies import entries, msgpack_values, record_like_maps, records, wire_ints
from hypothesis import example, given
from hypothesis import strategies as st

from kraftlog.metadata_log._records import (
    LogEntry,
    MetadataRecord,
    MetadataRecordError,
    decode_entry,
    decode_record,
    encode_entry,
    encode_record,
)

pytestmark = pytest.mark.timeout(TIMEOUT)


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


# ------------------------------------------------------------------ the checks


def _check_record(data: bytes) -> None:
    try:
        record = decode_record(data)
    except MetadataRecordError:
        return
    assert isinstance(record, MetadataRecord)
    assert decode_record(encode_record(record)) == record


def _check_entry(data: bytes) -> None:
    try:
        entry = decode_entry(data)
    except MetadataRecordError:
        return
    assert isinstance(entry, LogEntry)
    assert decode_entry(encode_entry(entry)) == entry


@FUZZ
@given(records)
def test_records_round_trip(record: MetadataRecord) -> None:
    assert decode_record(encode_record(record)) == record


@FUZZ
@given(entries)
def test_entries_round_trip(entry: LogEntry) -> None:
    assert decode_entry(encode_entry(entry)) == entry


@FUZZ
@given(any_bytes)
def test_record_from_random_bytes(data: bytes) -> None:
    _check_record(data)


@FUZZ
@given(mutated(records.map(encode_record)))
# found by this test: an endpoint whose "port" key was flipped to "qort" raised KeyError
@example(
    b"\x85\xa4type\x00\xa9broker_id\x00\xaeincarnation_id\xa0\xacbroker_epoch\x00\xa9endpoints"
    b"\x91\x84\xa4name\xa0\xa4host\xa0\xa4qort\x00\xb1security_protocol\xa0"
)
def test_record_from_mutated_encoding(data: bytes) -> None:
    _check_record(data)


@FUZZ
@given(record_like_maps().map(_pack))
# found by this test: an unhashable type id made the type lookup raise TypeError
@example(b"\x81\xa4type\x91\x01")
# found by this test: an endpoint map without its keys raised KeyError from BrokerEndpoint.from_wire
@example(b"\x85\xa4type\x00\xa9broker_id\x01\xaeincarnation_id\xa1x\xacbroker_epoch\x01\xa9endpoints\x91\x80")
# found by this test (in CI): a NoOpRecord whose leader_id was nil decoded, and could not be encoded
@example(b"\x83\xa4type\x14\xb0SENSITIVE_FIELDS\xc0\xa9leader_id\xc0")
def test_record_from_record_like_map(data: bytes) -> None:
    _check_record(data)


@FUZZ
@given(msgpack_values.map(_pack))
def test_record_from_any_msgpack_value(data: bytes) -> None:
    _check_record(data)


@FUZZ
@given(any_bytes)
def test_entry_from_random_bytes(data: bytes) -> None:
    _check_entry(data)


@FUZZ
@given(mutated(entries.map(encode_entry)))
def test_entry_from_mutated_encoding(data: bytes) -> None:
    _check_entry(data)


_entry_maps = st.fixed_dictionaries(
    {},
    optional={
        "offset": wire_ints | msgpack_values,
        "epoch": wire_ints | msgpack_values,
        "timestamp_ms": wire_ints | msgpack_values,
        "record": record_like_maps() | msgpack_values,
    },
).map(_pack)


@FUZZ
@given(_entry_maps)
# found by this test: a string offset raised ValueError from int(), an infinite one OverflowError
@example(b"\x84\xa6offset\xa1x\xa5epoch\x00\xactimestamp_ms\x00\xa6record\x81\xa4type\x14")
@example(
    b"\x84\xa6offset\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00\xa5epoch\x00\xactimestamp_ms\x00\xa6record\x81\xa4type\x14"
)
def test_entry_from_entry_like_map(data: bytes) -> None:
    _check_entry(data)


@pytest.mark.parametrize(
    "header",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 of 4 G elements
        b"\xdf\xff\xff\xff\xff",  # map32 of 4 G pairs
        b"\xc6\xff\xff\xff\xff",  # bin32 of 4 GiB
        b"\xdb\xff\xff\xff\xff",  # str32 of 4 GiB
        b"\xc9\xff\xff\xff\xff\x01",  # ext32 of 4 GiB
    ],
)
def test_huge_declared_length_fails_fast(header: bytes) -> None:
    for decode in (decode_record, decode_entry):
        _result, error = bounded_call(lambda: decode(header + b"\x00" * 16))
        assert isinstance(error, MetadataRecordError)


@FUZZ
@given(_entry_maps)
def test_spark_fast_entry_agrees_with_decode_entry(data: bytes) -> None:
    """The Spark job decodes entries through a fast path that must give what `decode_entry` gives,
    and fall back to it (for its error) on anything else."""
    from kraftlog.spark._decode import _fast_entry, _slow_entry

    try:
        fast = _fast_entry(msgpack.unpackb(data, raw=False, strict_map_key=False))
    except Exception:  # what the job does: any failure of the fast path falls back
        fast = None
    try:
        slow = _slow_entry(data)
    except MetadataRecordError:
        assert fast is None
        return
    if fast is not None:
        assert fast == slow
