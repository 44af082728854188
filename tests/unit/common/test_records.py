"""Tests of the RecordBatch v2 codec in `storage._records`.

Round trips are property-based (hypothesis); interoperability is checked against kafka-python, an
independent implementation of the same format; corruption tests patch bytes and re-CRC by hand.
"""

from __future__ import annotations

import struct

import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import (
    ControlRecord,
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from kraftlog.common.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_batch,
    build_control_batch,
    crc32c,
    iter_batches,
    read_varint,
    rewrite_offset_and_epoch,
    set_log_append_time,
    varint_size,
    write_varint,
)
from kraftlog.common.records.compression import CompressionType, compress
from kraftlog.storage._errors import (
    CorruptRecordError,
    InvalidRecordError,
    StorageError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kraftlog.storage._record_set import split_batches

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1

# header field positions (big-endian), see the module docstring of storage._records
BASE_OFFSET_AT = 0
LENGTH_AT = 8
EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
RECORDS_COUNT_AT = 57

ALL_CODECS = list(CompressionType)
PROPS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


# ---------------------------------------------------------------------------------------------
# helpers


def recrc(buf: bytearray) -> None:
    """Recompute the CRC-32C over attributes..end and store it at byte 17."""
    struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[ATTRIBUTES_AT:])))


def with_records_section(batch: bytes, section: bytes, *, count: int | None = None) -> bytes:
    """Rebuild ``batch`` around another (uncompressed) records section, re-compressing it with the
    batch's codec, fixing batchLength, optionally recordsCount, and the CRC."""
    codec = RecordBatch(batch).compression
    payload = compress(codec, section) if codec != CompressionType.NONE else section
    buf = bytearray(batch[:HEADER_SIZE]) + payload
    struct.pack_into(">i", buf, LENGTH_AT, len(buf) - LOG_OVERHEAD)
    if count is not None:
        struct.pack_into(">i", buf, RECORDS_COUNT_AT, count)
    recrc(buf)
    return bytes(buf)


def sample_batch(codec: CompressionType = CompressionType.NONE, n: int = 5, **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(base_offset=kwargs.pop("base_offset", 100), compression=codec, **kwargs)
    for i in range(n):
        builder.append(
            1_700_000_000_000 + i * 7,
            b"key-%d" % i if i % 2 else None,
            b"value-%d " % i * 20,
            [Header("h\u00e9", b"v%d" % i), Header("n", None)],
        )
    return builder.build()


# ---------------------------------------------------------------------------------------------
# strategies

keys_st = st.none() | st.binary(max_size=40)
values_st = st.none() | st.binary(max_size=200)
headers_st = st.lists(
    st.builds(Header, st.text(max_size=12), st.none() | st.binary(max_size=24)),
    max_size=4,
).map(tuple)
timestamps_st = st.one_of(
    st.integers(0, INT64_MAX),
    st.integers(1_700_000_000_000 - 10**6, 1_700_000_000_000 + 10**6),
    st.sampled_from([0, 1, 2**31, 2**32, INT64_MAX]),
)
gaps_st = st.integers(1, 3) | st.integers(1, 2**24)
record_specs_st = st.lists(st.tuples(keys_st, values_st, headers_st, timestamps_st, gaps_st), min_size=1, max_size=20)
batch_params_st = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 2**62),
        "compression": st.sampled_from(ALL_CODECS),
        "timestamp_type": st.sampled_from(list(TimestampType)),
        "producer_id": st.just(NO_PRODUCER_ID) | st.integers(0, INT64_MAX),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, INT32_MAX),
        "is_transactional": st.booleans(),
        "partition_leader_epoch": st.integers(-1, INT32_MAX),
    }
)


def build_from_specs(params: dict, specs: list, explicit_offsets: bool) -> tuple[bytes, list[tuple]]:
    """Build a batch with our builder; returns it and the expected (offset, ts, key, value, headers)."""
    builder = RecordBatchBuilder(**params)
    expected = []
    delta = -1
    for key, value, headers, ts, gap in specs:
        if explicit_offsets:
            delta += gap
            builder.append(ts, key, value, headers, offset=params["base_offset"] + delta)
        else:
            delta += 1
            builder.append(ts, key, value, headers)
        expected.append((params["base_offset"] + delta, ts, key, value, tuple(headers)))
    assert builder.records_count == len(specs)
    return builder.build(), expected


# ---------------------------------------------------------------------------------------------
# 1. varints


KAFKA_VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (150, "ac02"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    # Kafka's ByteUtilsTest vectors for the int32 / int64 extremes
    (INT32_MAX, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), KAFKA_VARINT_VECTORS)
def test_varint_known_encodings(value: int, encoded: str) -> None:
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == encoded
    assert varint_size(value) == len(out)
    assert read_varint(bytes.fromhex(encoded), 0) == (value, len(out))


@settings(max_examples=examples(300), deadline=None)
@given(value=st.integers(INT64_MIN, INT64_MAX), prefix=st.binary(max_size=5), suffix=st.binary(max_size=5))
def test_varint_round_trip_full_int64_range(value: int, prefix: bytes, suffix: bytes) -> None:
    out = bytearray(prefix)
    write_varint(out, value)
    size = len(out) - len(prefix)
    assert size == varint_size(value)
    assert 1 <= size <= 10
    buf = bytes(out) + suffix
    assert read_varint(buf, len(prefix)) == (value, len(prefix) + size)
    assert read_varint(memoryview(buf), len(prefix)) == (value, len(prefix) + size)
    # same bytes as kafka-python's independent encoder
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert bytes(out[len(prefix) :]) == bytes(theirs)


@settings(max_examples=examples(200), deadline=None)
@given(value=st.integers(INT64_MIN, INT64_MAX))
def test_varint_reads_kafka_python_encoding(value: int) -> None:
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert read_varint(bytes(theirs), 0) == (value, len(theirs))
    assert kp_decode_varint(theirs, 0) == (value, len(theirs))


@pytest.mark.parametrize("value", [64, 300, 2**31, INT64_MAX, INT64_MIN])
def test_varint_truncated_raises(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    for cut in range(len(out)):
        with pytest.raises(CorruptRecordError):
            read_varint(bytes(out[:cut]), 0)


def test_varint_longer_than_ten_bytes_raises() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 11, 0)


def test_varint_sizes_at_boundaries() -> None:
    # zig-zag: |v| < 64 fits one byte, each further 7 bits one more byte
    assert varint_size(63) == 1 and varint_size(-64) == 1
    assert varint_size(64) == 2 and varint_size(-65) == 2
    assert varint_size(8191) == 2 and varint_size(8192) == 3
    assert varint_size(INT64_MAX) == 10 and varint_size(INT64_MIN) == 10


# ---------------------------------------------------------------------------------------------
# 1. batch round trip


def check_batch_against(buf: bytes, params: dict, expected: list[tuple]) -> RecordBatch:
    batch = RecordBatch(buf)
    batch.ensure_valid()
    assert batch.is_valid()
    count = len(expected)
    timestamps = [e[1] for e in expected]
    last_offset = expected[-1][0]
    assert batch.magic == MAGIC_V2
    assert batch.size_bytes == len(buf)
    assert batch.batch_length == len(buf) - LOG_OVERHEAD
    assert batch.to_bytes() == buf
    assert batch.base_offset == params["base_offset"]
    assert batch.last_offset == last_offset
    assert batch.last_offset_delta == last_offset - params["base_offset"]
    assert batch.next_offset == last_offset + 1
    assert batch.records_count == count
    assert batch.base_timestamp == timestamps[0]
    assert batch.max_timestamp == max(timestamps)
    assert batch.compression == params["compression"]
    assert batch.timestamp_type == params["timestamp_type"]
    assert batch.is_transactional == params["is_transactional"]
    assert not batch.is_control
    assert batch.control_type() is None
    assert not batch.has_delete_horizon
    assert batch.delete_horizon_ms == NO_TIMESTAMP
    assert batch.producer_id == params["producer_id"]
    assert batch.has_producer_id == (params["producer_id"] >= 0)
    assert batch.producer_epoch == params["producer_epoch"]
    assert batch.base_sequence == params["base_sequence"]
    if params["base_sequence"] == NO_SEQUENCE:
        assert batch.last_sequence == NO_SEQUENCE
    else:
        assert batch.last_sequence == (params["base_sequence"] + batch.last_offset_delta) % 2**31
    assert batch.partition_leader_epoch == params["partition_leader_epoch"]

    records = batch.records()
    assert list(batch) == records
    assert len(records) == count
    log_append = params["timestamp_type"] == TimestampType.LOG_APPEND_TIME
    for rec, (offset, ts, key, value, headers) in zip(records, expected, strict=False):
        assert isinstance(rec, Record)
        assert rec.offset == offset
        assert rec.timestamp_ms == (max(timestamps) if log_append else ts)
        assert rec.key == key
        assert rec.value == value
        assert rec.headers == headers
        assert all(isinstance(h, Header) for h in rec.headers)
        assert rec.key is None or type(rec.key) is bytes
        assert rec.value is None or type(rec.value) is bytes
    section = batch.records_section()
    assert sum(r.size_bytes for r in records) == len(section)
    if params["compression"] == CompressionType.NONE:
        assert section == buf[HEADER_SIZE:]
    return batch


@PROPS
@given(params=batch_params_st, specs=record_specs_st, explicit_offsets=st.booleans())
def test_build_decode_round_trip(params: dict, specs: list, explicit_offsets: bool) -> None:
    buf, expected = build_from_specs(params, specs, explicit_offsets)
    batch = check_batch_against(buf, params, expected)
    # what LogValidator would say of this batch coming from a producer
    dense = expected[-1][0] - params["base_offset"] == len(expected) - 1
    pid, epoch, seq = params["producer_id"], params["producer_epoch"], params["base_sequence"]
    if pid >= 0:  # an idempotent batch carries its epoch and a sequence
        bad_producer_fields = epoch < 0 or seq < 0
    else:  # a plain batch carries neither and is not transactional
        bad_producer_fields = params["is_transactional"] or epoch != -1 or seq != -1
    if dense and not bad_producer_fields:
        batch.ensure_producer_batch_valid()
    else:
        with pytest.raises(InvalidRecordError):
            batch.ensure_producer_batch_valid()


@PROPS
@given(params=batch_params_st, specs=record_specs_st)
def test_builder_size_estimate_and_buffer_types(params: dict, specs: list) -> None:
    params = dict(params, compression=CompressionType.NONE)
    builder = RecordBatchBuilder(**params)
    for key, value, headers, ts, _gap in specs:
        builder.append(ts, key, value, headers)
    buf = builder.build()
    assert builder.estimated_size_bytes == len(buf)
    max_ts = max(s[3] for s in specs)
    log_append = params["timestamp_type"] == TimestampType.LOG_APPEND_TIME
    expected = [
        (params["base_offset"] + i, max_ts if log_append else s[3], s[0], s[1], tuple(s[2]))
        for i, s in enumerate(specs)
    ]
    # a batch decodes the same from bytes, bytearray and a memoryview into a larger buffer
    for view in (buf, bytearray(buf), memoryview(b"xx" + buf + b"yy")[2 : 2 + len(buf)]):
        batch = RecordBatch(view)
        batch.ensure_valid()
        assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records()] == expected


def test_empty_batch() -> None:
    buf = RecordBatchBuilder(base_offset=42).build()
    batch = RecordBatch(buf)
    batch.ensure_valid()
    assert len(buf) == HEADER_SIZE
    assert batch.records_count == 0
    assert batch.records() == []
    assert batch.base_timestamp == NO_TIMESTAMP
    assert batch.max_timestamp == NO_TIMESTAMP
    assert batch.last_offset_delta == 0
    with pytest.raises(InvalidRecordError):
        batch.ensure_producer_batch_valid()


def test_builder_defaults() -> None:
    builder = RecordBatchBuilder()
    builder.append(5, b"k", b"v")
    batch = RecordBatch(builder.build())
    assert batch.base_offset == 0
    assert batch.producer_id == NO_PRODUCER_ID
    assert batch.producer_epoch == NO_PRODUCER_EPOCH
    assert batch.base_sequence == NO_SEQUENCE
    assert batch.partition_leader_epoch == NO_PARTITION_LEADER_EPOCH
    assert batch.compression == CompressionType.NONE
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert not batch.has_producer_id
    assert batch.last_sequence == NO_SEQUENCE
    assert "base_offset=0" in repr(batch)


def test_record_with_empty_key_value_and_header_value_is_not_null() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"", b"", [("", b""), ("x", None)])
    builder.append(2, None, None)
    r1, r2 = RecordBatch(builder.build()).records()
    assert (r1.key, r1.value, r1.headers) == (b"", b"", (Header("", b""), Header("x", None)))
    assert (r2.key, r2.value, r2.headers) == (None, None, ())


def test_large_record_and_many_records_round_trip_every_codec() -> None:
    big = bytes(range(256)) * 600  # > 150 KiB: several xerial / lz4 blocks
    for codec in ALL_CODECS:
        builder = RecordBatchBuilder(base_offset=7, compression=codec)
        builder.append(10, b"big", big)
        for i in range(500):
            builder.append(10 + i, str(i).encode(), b"v" * (i % 13), [("i", str(i).encode())])
        batch = RecordBatch(builder.build())
        batch.ensure_valid()
        records = batch.records()
        assert len(records) == 501 and batch.last_offset == 507
        assert records[0].value == big
        assert records[-1].key == b"499" and records[-1].headers == (Header("i", b"499"),)


def test_last_sequence_wraps_at_int32() -> None:
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1)
    for i in range(4):
        builder.append(i, None, b"x")
    batch = RecordBatch(builder.build())
    assert batch.last_sequence == 1  # MAX-1, MAX, 0, 1
    assert DefaultRecordBatch(builder.build()).last_sequence == 1


def test_explicit_offsets_must_increase() -> None:
    builder = RecordBatchBuilder(base_offset=10)
    builder.append(1, None, b"a", offset=12)
    with pytest.raises(InvalidRecordError):
        builder.append(1, None, b"b", offset=12)
    with pytest.raises(InvalidRecordError):
        builder.append(1, None, b"b", offset=11)
    builder.append(1, None, b"c")  # dense after the explicit one
    assert [r.offset for r in RecordBatch(builder.build()).records()] == [12, 13]


def test_set_last_offset_keeps_original_range() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    builder.append(1, b"a", b"1", offset=100)
    builder.append(2, b"c", b"3", offset=102)
    with pytest.raises(InvalidRecordError):
        builder.set_last_offset(101)
    builder.set_last_offset(110)
    batch = RecordBatch(builder.build())
    batch.ensure_valid()
    assert batch.last_offset == 110 and batch.next_offset == 111
    assert batch.records_count == 2
    assert [r.offset for r in batch.records()] == [100, 102]
    with pytest.raises(InvalidRecordError):
        batch.ensure_producer_batch_valid()


def test_delete_horizon() -> None:
    builder = RecordBatchBuilder(delete_horizon_ms=5_000)
    builder.append(7_000, b"k", None)
    builder.append(4_000, b"j", b"v")
    batch = RecordBatch(builder.build())
    batch.ensure_valid()
    assert batch.has_delete_horizon
    assert batch.delete_horizon_ms == 5_000
    assert batch.base_timestamp == 5_000
    assert batch.max_timestamp == 7_000
    assert [r.timestamp_ms for r in batch.records()] == [7_000, 4_000]


def test_explicit_base_timestamp() -> None:
    builder = RecordBatchBuilder(base_timestamp=1_000)
    builder.append(900, None, b"a")
    builder.append(1_100, None, b"b")
    batch = RecordBatch(builder.build())
    assert batch.base_timestamp == 1_000
    assert [r.timestamp_ms for r in batch.records()] == [900, 1_100]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_build_batch_helper(codec: CompressionType) -> None:
    buf = build_batch(
        [(b"k1", b"v1"), (None, b"v2", [Header("h", b"x")]), (b"k3", None)],
        timestamp_ms=1234,
        base_offset=9,
        compression=codec,
        producer_id=5,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=3,
    )
    batch = RecordBatch(buf)
    batch.ensure_valid()
    batch.ensure_producer_batch_valid()
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 2, 40)
    assert batch.partition_leader_epoch == 3
    assert batch.last_sequence == 42
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records()] == [
        (9, 1234, b"k1", b"v1", ()),
        (10, 1234, None, b"v2", (Header("h", b"x"),)),
        (11, 1234, b"k3", None, ()),
    ]


def test_negative_timestamps_max_timestamp_is_consistent() -> None:
    """BUG (reported): a batch of records all stamped below -1 gets maxTimestamp -1 (NO_TIMESTAMP).

    Kafka's MemoryRecordsBuilder refuses negative timestamps other than -1; this builder accepts
    them, then starts its running maximum at NO_TIMESTAMP (-1), so the header claims a max
    timestamp that no record has.  Either refusing the timestamp or reporting the true maximum
    would be consistent.
    """
    builder = RecordBatchBuilder()
    try:
        builder.append(-5, b"k", b"v")
        builder.append(-10, b"k", b"v")
    except (StorageError, ValueError):
        return  # refusing negative timestamps, as Kafka does, is fine
    batch = RecordBatch(builder.build())
    assert batch.max_timestamp == max(r.timestamp_ms for r in batch.records()) == -5


# ---------------------------------------------------------------------------------------------
# 2. interop with kafka-python


def kp_build(
    codec: int,
    specs: list,
    *,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> tuple[bytes, list[tuple]]:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**30,
    )
    expected = []
    delta = -1
    for key, value, headers, ts, gap in specs:
        delta += gap
        meta = builder.append(delta, ts, key, value, list(headers))
        assert meta is not None
        expected.append((delta, ts, key, value, tuple(headers)))
    return bytes(builder.build()), expected


@PROPS
@given(
    codec=st.sampled_from(ALL_CODECS),
    specs=record_specs_st,
    dense=st.booleans(),
    transactional=st.booleans(),
    producer_id=st.just(-1) | st.integers(0, INT64_MAX),
    producer_epoch=st.integers(-1, 2**15 - 1),
    base_sequence=st.integers(-1, INT32_MAX),
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, INT32_MAX),
)
def test_kafka_python_batches_decode_with_ours(
    codec: CompressionType,
    specs: list,
    dense: bool,
    transactional: bool,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    leader_epoch: int,
) -> None:
    if dense:
        specs = [s[:4] + (1,) for s in specs]
    buf, expected = kp_build(
        codec,
        specs,
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    used_codec = CompressionType(buf[ATTRIBUTES_AT + 1] & 0x07)  # kafka-python skips useless compression
    assert used_codec in (codec, CompressionType.NONE)
    batch = RecordBatch(buf)
    batch.ensure_valid()
    assert batch.base_offset == 0 and batch.partition_leader_epoch == 0
    assert batch.compression == used_codec
    assert batch.is_transactional == transactional
    assert not batch.is_control
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert batch.records_count == len(expected)
    assert batch.last_offset_delta == expected[-1][0]
    assert batch.base_timestamp == expected[0][1]
    assert batch.max_timestamp == max(e[1] for e in expected)
    assert batch.last_sequence == DefaultRecordBatch(buf).last_sequence
    got = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [(o, t, k, v, tuple(Header(*h) for h in hs)) for o, t, k, v, hs in expected]

    # the broker assigns offsets and the leader epoch in place: CRC stays valid
    moved = bytearray(buf)
    rewrite_offset_and_epoch(moved, 0, base_offset, leader_epoch)
    batch = RecordBatch(bytes(moved))
    batch.ensure_valid()
    assert batch.base_offset == base_offset and batch.partition_leader_epoch == leader_epoch
    assert [r.offset for r in batch.records()] == [base_offset + e[0] for e in expected]
    assert batch.last_offset == base_offset + expected[-1][0]
    assert DefaultRecordBatch(moved).validate_crc()


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("variant", ["plain", "keys_headers", "idempotent", "transactional"])
def test_kafka_python_compressed_batches_every_codec(codec: CompressionType, variant: str) -> None:
    specs = []
    for i in range(50):
        key = (b"key-%03d" % i) if variant != "plain" else None
        headers = (Header("trace-\u00fc", b"abc" * (i % 3)), Header("none", None)) if variant != "plain" else ()
        specs.append((key, b"the same compressible value " * 8, headers, 1_700_000_000_000 + (i * 37) % 11, 1))
    kwargs = {}
    if variant == "idempotent":
        kwargs = dict(producer_id=123456789, producer_epoch=7, base_sequence=1000)
    if variant == "transactional":
        kwargs = dict(transactional=True, producer_id=99, producer_epoch=3, base_sequence=0)
    buf, expected = kp_build(codec, specs, **kwargs)
    batch = RecordBatch(buf)
    batch.ensure_valid()
    batch.ensure_producer_batch_valid()
    assert batch.compression == codec  # the data compresses, so kafka-python kept the codec
    assert batch.is_transactional == (variant == "transactional")
    assert batch.producer_id == kwargs.get("producer_id", -1)
    assert batch.producer_epoch == kwargs.get("producer_epoch", -1)
    assert batch.base_sequence == kwargs.get("base_sequence", -1)
    assert batch.max_timestamp == 1_700_000_000_010
    got = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [(o, t, k, v, tuple(hs)) for o, t, k, v, hs in expected]


def kp_records(buf: bytes) -> tuple[DefaultRecordBatch, list]:
    theirs = DefaultRecordBatch(buf)
    assert theirs.validate_crc()
    return theirs, list(theirs)


@PROPS
@given(params=batch_params_st, specs=record_specs_st, explicit_offsets=st.booleans())
def test_our_batches_decode_with_kafka_python(params: dict, specs: list, explicit_offsets: bool) -> None:
    buf, expected = build_from_specs(params, specs, explicit_offsets)
    ours = RecordBatch(buf)
    theirs, records = kp_records(buf)
    assert theirs.magic == 2
    assert theirs.size_in_bytes == len(buf)
    assert theirs.base_offset == params["base_offset"]
    assert theirs.leader_epoch == params["partition_leader_epoch"]
    assert theirs.crc == ours.crc
    assert theirs.compression_type == int(params["compression"])
    assert theirs.timestamp_type == int(params["timestamp_type"])
    assert theirs.is_transactional == params["is_transactional"]
    assert not theirs.is_control_batch
    assert theirs.producer_id == params["producer_id"]
    assert theirs.producer_epoch == params["producer_epoch"]
    assert theirs.base_sequence == params["base_sequence"]
    assert theirs.last_sequence == ours.last_sequence
    assert theirs.records_count == len(expected)
    assert theirs.last_offset == expected[-1][0]
    assert theirs.next_offset == ours.next_offset
    assert theirs.first_timestamp == expected[0][1]
    assert theirs.max_timestamp == max(e[1] for e in expected)
    log_append = params["timestamp_type"] == TimestampType.LOG_APPEND_TIME
    assert len(records) == len(expected)
    for rec, (offset, ts, key, value, headers) in zip(records, expected, strict=False):
        assert rec.offset == offset
        assert rec.timestamp == (theirs.max_timestamp if log_append else ts)
        assert rec.key == key
        assert rec.value == value
        assert rec.headers == [tuple(h) for h in headers]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_our_compressed_batches_decode_with_kafka_python(codec: CompressionType) -> None:
    buf = sample_batch(
        codec, n=40, producer_id=77, producer_epoch=1, base_sequence=5, is_transactional=True, partition_leader_epoch=12
    )
    theirs, records = kp_records(buf)
    assert theirs.compression_type == int(codec)
    assert theirs.is_transactional and theirs.producer_id == 77
    ours = RecordBatch(buf).records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in ours
    ]


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_control_batch_interop(marker: ControlRecordType) -> None:
    buf = build_control_batch(
        marker,
        producer_id=4242,
        producer_epoch=9,
        coordinator_epoch=17,
        timestamp_ms=1_700_000_000_123,
        base_offset=300,
        partition_leader_epoch=6,
    )
    ours = RecordBatch(buf)
    ours.ensure_valid()
    assert ours.is_control and ours.is_transactional
    assert ours.control_type() is marker
    assert (ours.producer_id, ours.producer_epoch) == (4242, 9)
    assert ours.base_offset == 300 and ours.last_offset == 300 and ours.records_count == 1
    assert ours.partition_leader_epoch == 6
    assert ours.max_timestamp == 1_700_000_000_123
    with pytest.raises(InvalidRecordError):
        ours.ensure_producer_batch_valid()
    (rec,) = ours.records()
    assert rec.key == struct.pack(">hh", 0, int(marker))
    assert rec.value == struct.pack(">hi", 0, 17)

    theirs, records = kp_records(buf)
    assert theirs.is_control_batch and theirs.is_transactional
    assert theirs.producer_id == 4242 and theirs.producer_epoch == 9
    assert theirs.base_offset == 300 and theirs.leader_epoch == 6
    (krec,) = records
    assert isinstance(krec, ControlRecord)
    assert krec.version == 0
    assert krec.type == int(marker)
    assert krec.commit == (marker is ControlRecordType.COMMIT)
    assert krec.abort == (marker is ControlRecordType.ABORT)
    assert krec.offset == 300
    assert krec.timestamp == 1_700_000_000_123
    assert struct.unpack(">hi", krec.value) == (0, 17)


def test_control_type_of_unknown_marker_is_a_storage_error() -> None:
    """BUG (reported): an unknown control record type makes `control_type()` raise a bare
    ValueError ("7 is not a valid ControlRecordType") instead of a storage error.

    Kafka's ControlRecordType.parse maps unknown ids to UNKNOWN; here the caller, which catches
    StorageError to turn it into an error code, gets an unexpected ValueError instead.
    """
    builder = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    builder.append(5, struct.pack(">hh", 0, 7), struct.pack(">hi", 0, 3))
    batch = RecordBatch(builder.build())
    batch.ensure_valid()
    try:
        batch.control_type()
    except StorageError:
        pass


def test_control_batch_with_short_key_is_corrupt() -> None:
    for key in (None, b"", b"\x00\x00\x01"):
        builder = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
        builder.append(5, key, b"")
        with pytest.raises(CorruptRecordError):
            RecordBatch(builder.build()).control_type()


# ---------------------------------------------------------------------------------------------
# 3. corruption

SAMPLE_BATCHES = {codec: sample_batch(codec, producer_id=3, producer_epoch=1, base_sequence=0) for codec in ALL_CODECS}


@settings(max_examples=examples(200), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), data=st.data(), mask=st.integers(1, 255))
def test_any_flipped_byte_in_crc_range_is_detected(codec: CompressionType, data: st.DataObject, mask: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[codec])
    pos = data.draw(st.integers(ATTRIBUTES_AT, len(buf) - 1), label="pos")
    buf[pos] ^= mask
    batch = RecordBatch(bytes(buf))
    with pytest.raises(CorruptRecordError):
        batch.ensure_valid()
    assert not batch.is_valid()


@settings(max_examples=examples(100), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), pos=st.integers(CRC_AT, ATTRIBUTES_AT - 1), mask=st.integers(1, 255))
def test_flipped_crc_byte_is_detected(codec: CompressionType, pos: int, mask: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[codec])
    buf[pos] ^= mask
    with pytest.raises(CorruptRecordError):
        RecordBatch(bytes(buf)).ensure_valid()


@settings(max_examples=examples(100), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), pos=st.integers(LENGTH_AT, EPOCH_AT - 1), mask=st.integers(1, 255))
def test_flipped_length_byte_is_detected(codec: CompressionType, pos: int, mask: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[codec])
    buf[pos] ^= mask
    with pytest.raises(CorruptRecordError):
        RecordBatch(bytes(buf)).ensure_valid()


@settings(max_examples=examples(100), deadline=None)
@given(
    codec=st.sampled_from(ALL_CODECS),
    pos=st.integers(BASE_OFFSET_AT, LENGTH_AT - 1) | st.integers(EPOCH_AT, MAGIC_AT - 1),
    mask=st.integers(1, 255),
)
def test_base_offset_and_epoch_are_outside_the_crc(codec: CompressionType, pos: int, mask: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[codec])
    buf[pos] ^= mask
    RecordBatch(bytes(buf)).ensure_valid()


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_unsupported(magic: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    buf[MAGIC_AT] = magic
    batch = RecordBatch(bytes(buf))
    with pytest.raises(UnsupportedForMessageFormatError):
        batch.ensure_valid()
    assert not batch.is_valid()


@pytest.mark.parametrize("magic", [3, 4, 127, 0x80, 0xFF])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    buf[MAGIC_AT] = magic
    batch = RecordBatch(bytes(buf))
    with pytest.raises(CorruptRecordError):
        batch.ensure_valid()
    assert not batch.is_valid()


def test_truncated_buffer_raises() -> None:
    buf = SAMPLE_BATCHES[CompressionType.GZIP]
    for cut in range(HEADER_SIZE):
        with pytest.raises(CorruptRecordError):
            RecordBatch(buf[:cut])
    for cut in range(HEADER_SIZE, len(buf)):
        batch = RecordBatch(buf[:cut])
        with pytest.raises(CorruptRecordError):
            batch.ensure_valid()
        assert not batch.is_valid()


@pytest.mark.parametrize("length", [-1, 0, HEADER_SIZE - LOG_OVERHEAD - 1])
def test_batch_length_below_minimum_is_corrupt(length: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    struct.pack_into(">i", buf, LENGTH_AT, length)
    with pytest.raises(CorruptRecordError):
        RecordBatch(bytes(buf)).ensure_valid()


def test_split_batches_returns_each_batch() -> None:
    parts = [sample_batch(codec, base_offset=i * 10, n=i + 1) for i, codec in enumerate(ALL_CODECS)]
    batches = split_batches(b"".join(parts))
    assert [b.to_bytes() for b in batches] == parts
    assert [b.base_offset for b in batches] == [0, 10, 20, 30, 40]
    for b in batches:
        b.ensure_valid()
    assert [b.base_offset for b in split_batches(bytearray(parts[0]))] == [0]


@pytest.mark.parametrize(
    "garbage", [b"\x00", b"\x00" * 11, b"\x00" * 12, b"\x00" * 61, struct.pack(">qi", 0, 1000) + b"\x00" * 49]
)
def test_split_batches_refuses_trailing_garbage(garbage: bytes) -> None:
    payload = SAMPLE_BATCHES[CompressionType.NONE] + SAMPLE_BATCHES[CompressionType.LZ4] + garbage
    with pytest.raises(CorruptRecordError):
        split_batches(payload)


def test_split_batches_refuses_a_partial_batch() -> None:
    first = SAMPLE_BATCHES[CompressionType.NONE]
    second = SAMPLE_BATCHES[CompressionType.ZSTD]
    for cut in (1, LOG_OVERHEAD, HEADER_SIZE, len(second) - 1):
        with pytest.raises(CorruptRecordError):
            split_batches(first + second[:cut])


def test_split_batches_refuses_empty_input() -> None:
    with pytest.raises(InvalidRecordError):
        split_batches(b"")


def test_iter_batches_yields_positions_and_stops_at_partial_batch() -> None:
    parts = [SAMPLE_BATCHES[c] for c in ALL_CODECS]
    whole = b"".join(parts)
    positions = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    got = list(iter_batches(whole))
    assert [pos for pos, _ in got] == positions
    assert [b.to_bytes() for _, b in got] == parts
    for cut in range(1, len(parts[-1])):
        got = list(iter_batches(whole[:-cut]))
        assert [pos for pos, _ in got] == positions[:-1]
    assert [pos for pos, _ in iter_batches(whole, positions[2])] == positions[2:]
    assert list(iter_batches(b"")) == []
    # a bogus length field ends the iteration
    bogus = whole + struct.pack(">qi", 0, 3) + b"\x00" * 60
    assert [pos for pos, _ in iter_batches(bogus)] == positions


def test_ensure_producer_batch_valid_refusals() -> None:
    ok = RecordBatch(SAMPLE_BATCHES[CompressionType.NONE])
    ok.ensure_producer_batch_valid()

    # record count that does not match lastOffsetDelta + 1 (patched with a valid CRC)
    for count in (4, 6):
        buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
        struct.pack_into(">i", buf, RECORDS_COUNT_AT, count)
        recrc(buf)
        batch = RecordBatch(bytes(buf))
        batch.ensure_valid()
        with pytest.raises(InvalidRecordError):
            batch.ensure_producer_batch_valid()
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, 7)
    recrc(buf)
    with pytest.raises(InvalidRecordError):
        RecordBatch(bytes(buf)).ensure_producer_batch_valid()

    # zero records
    with pytest.raises(InvalidRecordError):
        RecordBatch(RecordBatchBuilder().build()).ensure_producer_batch_valid()
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    struct.pack_into(">i", buf, RECORDS_COUNT_AT, 0)
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, -1)
    recrc(buf)
    with pytest.raises(InvalidRecordError):
        RecordBatch(bytes(buf)).ensure_producer_batch_valid()

    # control batches
    control = build_control_batch(
        ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp_ms=0
    )
    with pytest.raises(InvalidRecordError):
        RecordBatch(control).ensure_producer_batch_valid()

    # transactional without a producer id
    txn = sample_batch(is_transactional=True)
    assert RecordBatch(txn).is_transactional and RecordBatch(txn).producer_id == NO_PRODUCER_ID
    with pytest.raises(InvalidRecordError):
        RecordBatch(txn).ensure_producer_batch_valid()
    RecordBatch(
        sample_batch(is_transactional=True, producer_id=0, producer_epoch=0, base_sequence=0)
    ).ensure_producer_batch_valid()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id_is_refused(codec_id: int) -> None:
    buf = bytearray(SAMPLE_BATCHES[CompressionType.NONE])
    buf[ATTRIBUTES_AT + 1] = (buf[ATTRIBUTES_AT + 1] & ~0x07) | codec_id
    recrc(buf)
    batch = RecordBatch(bytes(buf))
    batch.ensure_valid()
    with pytest.raises(UnsupportedCompressionTypeError):
        batch.ensure_producer_batch_valid()
    with pytest.raises(UnsupportedCompressionTypeError):
        batch.records()


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("count", [-1, 0, 4, 6, 1000, INT32_MAX])
def test_lying_record_count_is_corrupt(codec: CompressionType, count: int) -> None:
    good = SAMPLE_BATCHES[codec]
    buf = bytearray(good)
    struct.pack_into(">i", buf, RECORDS_COUNT_AT, count)
    recrc(buf)
    batch = RecordBatch(bytes(buf))
    batch.ensure_valid()  # the CRC is right: only the records section gives it away
    assert batch.records_count == count
    with pytest.raises(CorruptRecordError):
        batch.records()


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("trailing", [b"\x00", b"\x02", b"\xff" * 3, b"\x0e\x00\x00\x02\x01\x01\x00\x00"])
def test_trailing_bytes_after_records_are_corrupt(codec: CompressionType, trailing: bytes) -> None:
    good = SAMPLE_BATCHES[codec]
    section = RecordBatch(good).records_section()
    same = with_records_section(good, section)
    assert RecordBatch(same).records() == RecordBatch(good).records()  # the helper itself is sound
    bad = RecordBatch(with_records_section(good, section + trailing))
    bad.ensure_valid()
    with pytest.raises(CorruptRecordError):
        bad.records()


def test_record_length_lies_are_corrupt() -> None:
    good = SAMPLE_BATCHES[CompressionType.NONE]
    section = bytearray(RecordBatch(good).records_section())
    first_len, pos = read_varint(section, 0)
    for wrong in (first_len - 1, first_len + 1, 0, -1, 10**6):
        out = bytearray()
        write_varint(out, wrong)
        patched = bytes(out) + bytes(section[pos:])
        batch = RecordBatch(with_records_section(good, patched))
        batch.ensure_valid()
        with pytest.raises(CorruptRecordError):
            batch.records()


def test_negative_header_count_and_null_header_key_are_corrupt() -> None:
    def one_record(body: bytes) -> bytes:
        out = bytearray()
        write_varint(out, len(body))
        return bytes(out) + body

    base = sample_batch(n=1)
    # attrs, tsDelta 0, offsetDelta 0, key null, value null, headerCount -1
    neg_headers = one_record(b"\x00\x00\x00\x01\x01\x01")
    null_hkey = one_record(b"\x00\x00\x00\x01\x01\x02\x01\x01")  # 1 header whose key is null
    for section in (neg_headers, null_hkey):
        batch = RecordBatch(with_records_section(base, section, count=1))
        batch.ensure_valid()
        with pytest.raises(CorruptRecordError):
            batch.records()
    ok = RecordBatch(with_records_section(base, one_record(b"\x00\x00\x00\x01\x01\x00"), count=1))
    assert ok.records()[0].key is None and ok.records()[0].headers == ()


@settings(max_examples=examples(200), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), data=st.data())
def test_mangled_records_section_raises_only_corrupt_record_error(codec: CompressionType, data: st.DataObject) -> None:
    """Whatever a (CRC-valid) records section holds, decoding succeeds or raises CorruptRecordError."""
    good = SAMPLE_BATCHES[codec]
    section = bytearray(RecordBatch(good).records_section())
    edits = data.draw(
        st.lists(st.tuples(st.integers(0, len(section) - 1), st.integers(0, 255)), min_size=1, max_size=4),
        label="edits",
    )
    for pos, byte in edits:
        section[pos] = byte
    cut = data.draw(st.integers(0, len(section)), label="cut")
    batch = RecordBatch(with_records_section(good, bytes(section[:cut])))
    batch.ensure_valid()
    try:
        batch.records()
    except CorruptRecordError:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(codec=st.sampled_from([c for c in ALL_CODECS if c != CompressionType.NONE]), data=st.data())
def test_mangled_compressed_payload_raises_only_corrupt_record_error(
    codec: CompressionType, data: st.DataObject
) -> None:
    buf = bytearray(SAMPLE_BATCHES[codec])
    pos = data.draw(st.integers(HEADER_SIZE, len(buf) - 1), label="pos")
    buf[pos] ^= data.draw(st.integers(1, 255), label="mask")
    recrc(buf)
    batch = RecordBatch(bytes(buf))
    batch.ensure_valid()
    try:
        batch.records()
    except CorruptRecordError:
        pass


# ---------------------------------------------------------------------------------------------
# 4. in-place rewrites


@settings(max_examples=examples(100), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), base_offset=st.integers(0, 2**62), epoch=st.integers(-1, INT32_MAX))
def test_rewrite_offset_and_epoch_keeps_crc(codec: CompressionType, base_offset: int, epoch: int) -> None:
    first, second = SAMPLE_BATCHES[CompressionType.NONE], SAMPLE_BATCHES[codec]
    buf = bytearray(first + second)
    crc_before = RecordBatch(second).crc
    rewrite_offset_and_epoch(buf, len(first), base_offset, epoch)
    assert bytes(buf[: len(first)]) == first  # the other batch is untouched
    batch = RecordBatch(bytes(buf[len(first) :]))
    batch.ensure_valid()
    assert batch.crc == crc_before
    assert batch.base_offset == base_offset and batch.partition_leader_epoch == epoch
    assert batch.last_offset == base_offset + 4
    assert [r.offset for r in batch.records()] == [base_offset + i for i in range(5)]
    assert DefaultRecordBatch(bytes(buf[len(first) :])).validate_crc()


@settings(max_examples=examples(100), deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), append_time=st.integers(0, INT64_MAX))
def test_set_log_append_time(codec: CompressionType, append_time: int) -> None:
    first, second = SAMPLE_BATCHES[CompressionType.NONE], SAMPLE_BATCHES[codec]
    buf = bytearray(first + second + first)
    set_log_append_time(buf, len(first), len(second), append_time)
    assert bytes(buf[: len(first)]) == first and bytes(buf[-len(first) :]) == first
    batches = split_batches(buf)
    for b in batches:
        b.ensure_valid()
    batch = batches[1]
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.compression == codec  # the other attribute bits survive
    assert batch.producer_id == 3
    assert batch.max_timestamp == append_time
    records = batch.records()
    assert [r.timestamp_ms for r in records] == [append_time] * 5
    assert [r.value for r in records] == [r.value for r in RecordBatch(second).records()]
    theirs, krecords = kp_records(batch.to_bytes())
    assert theirs.timestamp_type == 1
    assert [r.timestamp for r in krecords] == [append_time] * 5


# ---------------------------------------------------------------------------------------------
# error metadata


def test_error_codes_match_kafka() -> None:
    assert (CorruptRecordError.error_code, CorruptRecordError.error_name) == (2, "CORRUPT_MESSAGE")
    assert CorruptRecordError.retriable
    assert (InvalidRecordError.error_code, InvalidRecordError.error_name) == (87, "INVALID_RECORD")
    assert (UnsupportedForMessageFormatError.error_code, UnsupportedForMessageFormatError.error_name) == (
        43,
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    )
    assert (UnsupportedCompressionTypeError.error_code, UnsupportedCompressionTypeError.error_name) == (
        76,
        "UNSUPPORTED_COMPRESSION_TYPE",
    )
    assert not issubclass(InvalidRecordError, CorruptRecordError)
