"""The one RecordBatch v2 codec (`kraftlog.common.records`), as the client uses it, against kafka-python.

There used to be two codecs (the client's and storage's) held together by tests; now the producer,
the consumer, the broker and the tools share one (issue 13 §2). kafka-python is the independent
implementation every codec must agree with, byte for byte.
"""

from __future__ import annotations

import struct

import cramjam
import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kraftlog.client.consumer._fetched as fetched
import kraftlog.client.producer._producer_types as producer
import kraftlog.storage as storage
from kraftlog.common import errors as kerr
from kraftlog.common import records as codec_module
from kraftlog.common.records import (
    HEADER_SIZE,
    ControlRecordType,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
    record_size_upper_bound,
)
from kraftlog.common.records.compression import CompressionType, compress, decompress

ALL = list(CompressionType)
PROPS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])

blob = st.binary(max_size=300)
maybe_blob = st.none() | blob
header_st = st.tuples(st.text(max_size=10), maybe_blob)
record_st = st.tuples(maybe_blob, maybe_blob, st.lists(header_st, max_size=3), st.integers(0, 2**41))
records_st = st.lists(record_st, min_size=1, max_size=20)


def ours(codec: CompressionType, records: list, **kwargs: object) -> bytes:
    b = RecordBatchBuilder(compression=codec, **kwargs)
    for key, value, headers, ts in records:
        b.append(ts, key, value, headers)
    return b.build()


def as_tuples(recs: list) -> list[tuple]:
    return [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in recs]


def expected(records: list, base: int = 0) -> list[tuple]:
    return [(base + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, hs, ts) in enumerate(records)]


def test_one_codec_serves_client_and_storage() -> None:
    assert producer.RecordBatchBuilder is codec_module.RecordBatchBuilder is storage.RecordBatchBuilder
    assert fetched.RecordBatch is codec_module.RecordBatch is storage.RecordBatch


@PROPS
@given(codec=st.sampled_from(ALL), records=records_st)
def test_round_trip(codec: CompressionType, records: list) -> None:
    raw = ours(codec, records)
    ((_pos, batch),) = list(iter_batches(raw))
    batch.ensure_valid()
    assert batch.is_valid() and batch.compression == codec
    assert batch.records_count == len(records) and batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(r[3] for r in records)
    assert as_tuples(batch.records()) == expected(records)


@pytest.mark.parametrize("codec", ALL)
def test_kafka_python_reads_ours_and_we_read_theirs(codec: CompressionType) -> None:
    records = [
        (
            b"key-%d" % i if i % 3 else None,
            b"value %d " % i * 20 if i % 5 else None,
            [("trace", b"t%d" % i), ("null", None)] if i % 2 else [],
            1_700_000_000_000 + i * 7,
        )
        for i in range(40)
    ]
    raw = ours(codec, records)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc() and theirs.compression_type == int(codec)
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs] == expected(records)

    kb = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        kb.append(i, ts, key, value, headers)
    ((_pos, batch),) = list(iter_batches(bytes(kb.build())))
    batch.ensure_valid()
    assert as_tuples(batch.records()) == expected(records)


def test_control_batches_are_flagged() -> None:
    raw = build_control_batch(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=2, timestamp_ms=5, base_offset=42
    )
    ((_pos, batch),) = list(iter_batches(raw))
    assert batch.is_control and batch.is_transactional and batch.control_type() == 1
    plain = RecordBatch(ours(CompressionType.NONE, [(None, b"v", [], 1)]))
    assert not plain.is_control and plain.control_type() is None


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("data", [b"", b"a", b"kafka " * 10_000, bytes(range(256)) * 300])
def test_codecs_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_bare_raw_snappy_is_accepted() -> None:
    data = b"raw snappy without xerial framing " * 50
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_client_config_names_and_bad_codecs() -> None:
    assert {c.name.lower(): CompressionType.of(c.name.lower()) for c in CompressionType} == {
        c.name.lower(): c for c in CompressionType
    }
    assert CompressionType.of("GZIP") == 1 and CompressionType.of(None) == 0
    assert CompressionType.of(CompressionType.ZSTD) == 4 and CompressionType.of(3) == 3
    with pytest.raises(kerr.UnsupportedCompressionTypeError):
        CompressionType.of("brotli")
    with pytest.raises(kerr.UnsupportedCompressionTypeError):
        CompressionType.of(7)
    with pytest.raises(kerr.CorruptMessageError):
        decompress(CompressionType.GZIP, b"not gzip at all")


def test_iter_batches_skips_a_partial_tail() -> None:
    one = ours(CompressionType.NONE, [(b"k", b"v", [], 1)])
    two = ours(CompressionType.NONE, [(b"k2", b"v2", [], 2), (None, None, [], 3)])
    assert [b.records_count for _p, b in iter_batches(one + two)] == [1, 2]
    assert [b.records_count for _p, b in iter_batches(one + two[:-5])] == [1]
    assert list(iter_batches(one[:30])) == []


def test_corruption_is_detected() -> None:
    raw = bytearray(ours(CompressionType.NONE, [(b"key", b"value", [], 1)]))
    raw[-1] ^= 0x01
    batch = RecordBatch(bytes(raw))
    assert not batch.is_valid()
    with pytest.raises(kerr.CorruptMessageError, match="CRC"):
        batch.ensure_valid()
    bad_magic = bytearray(ours(CompressionType.NONE, [(b"k", b"v", [], 1)]))
    bad_magic[16] = 7
    with pytest.raises(kerr.CorruptMessageError, match="magic"):
        RecordBatch(bytes(bad_magic)).ensure_valid()
    too_short = bytearray(ours(CompressionType.NONE, [(b"k", b"v", [], 1)]))
    struct.pack_into(">i", too_short, 8, 10)
    assert list(iter_batches(bytes(too_short))) == []  # recovery: a torn tail ends the walk
    with pytest.raises(kerr.CorruptMessageError):  # a consumer: the fetch is corrupt
        list(iter_batches(bytes(too_short), strict=True))
    with pytest.raises(kerr.CorruptMessageError):
        RecordBatch(b"\x00" * 20)


def test_truncated_records_section_is_corrupt() -> None:
    raw = bytearray(ours(CompressionType.NONE, [(b"key", b"value" * 10, [], 1)]))
    struct.pack_into(">i", raw, 57, 2)  # claim two records where there is one
    with pytest.raises(kerr.CorruptMessageError):
        RecordBatch(bytes(raw)).records()


def test_size_bound_and_offset_deltas() -> None:
    b = RecordBatchBuilder()
    key, value, headers = b"k" * 100, b"v" * 1000, [("h" * 5, b"x" * 50), ("n", None)]
    assert b.append(2**40, key, value, headers) == 0
    assert b.append(2**40, None, b"x") == 1
    assert len(b.build()) - HEADER_SIZE <= record_size_upper_bound(key, value, headers) + record_size_upper_bound(
        None, b"x"
    )
    assert b.estimated_size_bytes == len(b.build())
