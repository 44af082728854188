"""The client's own v2 batch codec (`client._records`) against `storage`'s and kafka-python's.

The client may not import `storage` (DESIGN.md §2), so it has its own encoder and decoder; these
tests make the two (and an independent third, kafka-python) agree byte for byte on every codec.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kraftlog.client._records import (
    CODECS,
    HEADER_SIZE,
    Batch,
    BatchBuilder,
    codec_id,
    compress,
    decompress,
    iter_batches,
    record_size_upper_bound,
)
from kraftlog.common import errors as kerr
from kraftlog.storage._compression import CompressionType
from kraftlog.storage._compression import compress as s_compress
from kraftlog.storage._compression import decompress as s_decompress
from kraftlog.storage._records import (
    ControlRecordType,
    Header,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    rewrite_offset_and_epoch,
    write_varint,
)

ALL = [CompressionType(c) for c in CODECS.values()]
PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blob = st.binary(max_size=300)
maybe_blob = st.none() | blob
header_st = st.tuples(st.text(max_size=10), maybe_blob)
record_st = st.tuples(maybe_blob, maybe_blob, st.lists(header_st, max_size=3),
                      st.integers(0, 2**41))
records_st = st.lists(record_st, min_size=1, max_size=20)


def ours(codec: int, records: list, **kwargs) -> bytes:
    b = BatchBuilder(codec, **kwargs)
    for key, value, headers, ts in records:
        b.append(ts, key, value, headers)
    return b.build()


def as_tuples(recs) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in recs]


def expected(records: list, base: int = 0) -> list[tuple]:
    return [(base + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, hs, ts) in enumerate(records)]


# ------------------------------------------------------------------------------ round trips


@PROPS
@given(codec=st.sampled_from(ALL), records=records_st)
def test_round_trip(codec: CompressionType, records: list) -> None:
    raw = ours(int(codec), records)
    (batch,) = list(iter_batches(raw))
    batch.ensure_valid()
    assert batch.is_valid() and batch.codec == int(codec)
    assert batch.records_count == len(records) and batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(r[3] for r in records)
    assert as_tuples(batch.records()) == expected(records)


@PROPS
@given(codec=st.sampled_from(ALL), records=records_st, base=st.integers(0, 2**60),
       epoch=st.integers(-1, 2**31 - 1))
def test_storage_decodes_ours_byte_for_byte(codec: CompressionType, records: list, base: int, epoch: int) -> None:
    raw = ours(int(codec), records)
    # the same records through storage's builder give the same bytes
    sb = RecordBatchBuilder(compression=codec)
    for key, value, headers, ts in records:
        sb.append(ts, key, value, [Header(k, v) for k, v in headers])
    assert sb.build() == raw  # same libraries, same settings: the very same bytes
    theirs = RecordBatch(raw)
    theirs.ensure_valid()
    theirs.ensure_producer_batch_valid()
    assert [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers])
            for r in theirs.records()] == expected(records)
    # the broker rewrites base offset and leader epoch in place: our decoder follows
    moved = bytearray(raw)
    rewrite_offset_and_epoch(moved, 0, base, epoch)
    batch = Batch(bytes(moved))
    batch.ensure_valid()
    assert (batch.base_offset, batch.partition_leader_epoch) == (base, epoch)
    assert as_tuples(batch.records()) == expected(records, base)


@PROPS
@given(codec=st.sampled_from(ALL), records=records_st, log_append=st.booleans(), transactional=st.booleans())
def test_ours_decodes_storage(codec: CompressionType, records: list, log_append: bool, transactional: bool) -> None:
    sb = RecordBatchBuilder(compression=codec, base_offset=1000, partition_leader_epoch=3,
                            timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
                            producer_id=5 if transactional else -1, producer_epoch=0 if transactional else -1,
                            base_sequence=0 if transactional else -1, is_transactional=transactional)
    for key, value, headers, ts in records:
        sb.append(ts, key, value, [Header(k, v) for k, v in headers])
    (batch,) = list(iter_batches(sb.build()))
    batch.ensure_valid()
    assert batch.timestamp_type == int(log_append) and batch.is_transactional == transactional
    assert batch.producer_id == (5 if transactional else -1)
    assert batch.compression_type == codec.name.lower()
    want = expected(records, 1000)
    if log_append:
        want = [(o, batch.max_timestamp, k, v, h) for o, _t, k, v, h in want]
    assert as_tuples(batch.records()) == want


@pytest.mark.parametrize("codec", ALL)
def test_kafka_python_reads_ours_and_we_read_theirs(codec: CompressionType) -> None:
    records = [(b"key-%d" % i if i % 3 else None, b"value %d " % i * 20 if i % 5 else None,
                [("trace", b"t%d" % i), ("null", None)] if i % 2 else [], 1_700_000_000_000 + i * 7)
               for i in range(40)]
    raw = ours(int(codec), records)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc() and theirs.compression_type == int(codec)
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs] == \
        expected(records)

    kb = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                   producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    for i, (key, value, headers, ts) in enumerate(records):
        kb.append(i, ts, key, value, headers)
    (batch,) = list(iter_batches(bytes(kb.build())))
    batch.ensure_valid()
    assert as_tuples(batch.records()) == expected(records)


def test_control_batches_are_flagged() -> None:
    raw = build_control_batch(ControlRecordType.COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=2,
                              timestamp_ms=5, base_offset=42)
    (batch,) = list(iter_batches(raw))
    assert batch.is_control and batch.is_transactional and batch.control_type() == 1
    plain = Batch(ours(0, [(None, b"v", [], 1)]))
    assert not plain.is_control and plain.control_type() is None


# ------------------------------------------------------------------------------ codecs


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("data", [b"", b"a", b"kafka " * 10_000, bytes(range(256)) * 300])
def test_codecs_agree_with_storage(codec: CompressionType, data: bytes) -> None:
    assert s_decompress(codec, compress(int(codec), data)) == data
    assert decompress(int(codec), s_compress(codec, data)) == data


def test_bare_raw_snappy_is_accepted() -> None:
    import cramjam

    data = b"raw snappy without xerial framing " * 50
    assert decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data


def test_codec_names_and_bad_codecs() -> None:
    assert {n: codec_id(n) for n in CODECS} == {c.name.lower(): int(c) for c in CompressionType}
    assert codec_id("GZIP") == 1 and codec_id(None) == 0 and codec_id(CompressionType.ZSTD) == 4
    with pytest.raises(kerr.UnsupportedCompressionTypeError):
        codec_id("brotli")
    with pytest.raises(kerr.UnsupportedCompressionTypeError):
        codec_id(7)
    with pytest.raises(kerr.CorruptMessageError):
        decompress(1, b"not gzip at all")


# ------------------------------------------------------------------------------ framing and damage


def test_iter_batches_skips_a_partial_tail() -> None:
    one = ours(0, [(b"k", b"v", [], 1)])
    two = ours(0, [(b"k2", b"v2", [], 2), (None, None, [], 3)])
    assert [b.records_count for b in iter_batches(one + two)] == [1, 2]
    assert [b.records_count for b in iter_batches(one + two[:-5])] == [1]
    assert list(iter_batches(one[:30])) == []


def test_corruption_is_detected() -> None:
    raw = bytearray(ours(0, [(b"key", b"value", [], 1)]))
    raw[-1] ^= 0x01
    batch = Batch(bytes(raw))
    assert not batch.is_valid()
    with pytest.raises(kerr.CorruptMessageError, match="corrupt"):
        batch.ensure_valid()
    bad_magic = bytearray(ours(0, [(b"k", b"v", [], 1)]))
    bad_magic[16] = 1
    with pytest.raises(kerr.CorruptMessageError, match="magic"):
        Batch(bytes(bad_magic)).ensure_valid()
    too_short = bytearray(ours(0, [(b"k", b"v", [], 1)]))
    struct.pack_into(">i", too_short, 8, 10)
    with pytest.raises(kerr.CorruptMessageError):
        list(iter_batches(bytes(too_short)))
    with pytest.raises(kerr.CorruptMessageError):
        Batch(b"\x00" * 20)


def test_truncated_records_section_is_corrupt() -> None:
    raw = bytearray(ours(0, [(b"key", b"value" * 10, [], 1)]))
    # claim two records where there is one
    struct.pack_into(">i", raw, 57, 2)
    with pytest.raises(kerr.CorruptMessageError):
        Batch(bytes(raw)).records()


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varints_match_storage(value: int) -> None:
    from kraftlog.client._records import _read_varint, _varint

    buf = bytearray()
    write_varint(buf, value)
    assert _varint(value) == bytes(buf)
    assert _read_varint(bytes(buf), 0) == (value, len(buf))


def test_empty_builder_and_size_bound() -> None:
    with pytest.raises(ValueError):
        BatchBuilder().build()
    b = BatchBuilder()
    key, value, headers = b"k" * 100, b"v" * 1000, [("h" * 5, b"x" * 50), ("n", None)]
    b.append(2**40, key, value, headers)
    assert len(b.build()) - HEADER_SIZE <= record_size_upper_bound(key, value, headers)
    assert b.size_bytes == len(b.build())
