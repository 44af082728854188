"""Tests of `storage.Log`: append (leader and follower), validation, read, ListOffsets, the
leader-epoch cache, truncation, retention and flushing. Time is an injected fake clock.
"""

from __future__ import annotations

import hashlib
import random
import struct
import time
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.common.records import crc32c
from kraftlog.storage import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatch,
    RecordBatchBuilder,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    TimestampType,
    UnsupportedForMessageFormatError,
    build_batch,
    build_control_batch,
    iter_batches,
)

NOW = 1_700_000_000_000
DAY = 24 * 3600 * 1000


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_log(tmp_path: Path, clock: FakeClock | None = None, *, name: str = "topic-0", **cfg: object) -> Log:
    return Log(tmp_path / name, LogConfig(**cfg), clock_ms=clock or FakeClock())


def batch_of(n: int, ts: int = NOW, *, prefix: str = "k", value_size: int = 20, **kw: object) -> bytes:
    return build_batch(
        [(f"{prefix}{i}".encode(), bytes([65 + i % 26]) * value_size) for i in range(n)], timestamp_ms=ts, **kw
    )


def batch_ts(timestamps: list[int], **kw: object) -> bytes:
    """One batch whose records carry the given timestamps."""
    b = RecordBatchBuilder(**kw)
    for i, ts in enumerate(timestamps):
        b.append(ts, f"k{i}".encode(), b"v" * 10)
    return b.build()


def recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def log_files_digest(log: Log) -> tuple:
    files = sorted(p for p in log.dir.iterdir() if p.is_file())
    return tuple((p.name, hashlib.sha1(p.read_bytes()).hexdigest()) for p in files)


def state(log: Log) -> tuple:
    return (
        log.log_end_offset,
        log.log_start_offset,
        log.high_watermark,
        [(s.base_offset, s.size) for s in log.segments],
        log.epoch_cache.entries,
        log_files_digest(log),
    )


def all_records(log: Log) -> list:
    return [r for b in log.batches() for r in b.records()]


def assert_every_offset_readable(log: Log) -> None:
    for off in range(log.log_start_offset, log.log_end_offset):
        info = log.read(off, 1)
        batches = [b for _p, b in iter_batches(info.records)]
        assert batches, f"no batch returned for offset {off}"
        first = batches[0]
        assert first.base_offset <= off <= first.last_offset, (off, first)
        assert info.first_batch_offset == first.base_offset
        assert first.is_valid()


def wait_until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(0.002)


# ============================================================================ leader append


def test_offsets_dense_and_only_offset_and_epoch_bytes_change(tmp_path: Path) -> None:
    rng = random.Random(11)
    log = make_log(tmp_path, segment_bytes=4096)
    produced: list[tuple[bytes, int, int]] = []  # (bytes, expected base offset, epoch)
    next_offset = 0
    for i in range(150):
        epoch = i // 50
        nbatches = 1 if i % 7 else 3  # some produce requests carry several batches
        payload = []
        for _ in range(nbatches):
            n = rng.randrange(1, 6)
            b = batch_of(
                n,
                NOW + i,
                value_size=rng.randrange(1, 60),
                compression=rng.choice([CompressionType.NONE, CompressionType.GZIP]),
            )
            payload.append(b)
        info = log.append_as_leader(b"".join(payload), epoch)
        assert info.first_offset == next_offset
        for b in payload:
            produced.append((b, next_offset, epoch))
            next_offset += RecordBatch(b).records_count
        assert info.last_offset == next_offset - 1
        assert log.log_end_offset == next_offset
    assert len(log.segments) > 3
    stored = log.batches()
    assert len(stored) == len(produced)
    for sb, (pb, base, epoch) in zip(stored, produced, strict=False):
        raw = sb.to_bytes()
        assert len(raw) == len(pb)
        assert raw[8:12] == pb[8:12] and raw[16:] == pb[16:], "only baseOffset/epoch may change"
        assert struct.unpack_from(">q", raw, 0)[0] == base
        assert struct.unpack_from(">i", raw, 12)[0] == epoch
        assert sb.is_valid()
    # the files hold exactly those batches, back to back
    file_bytes = b"".join(s.log_path.read_bytes() for s in log.segments)
    assert file_bytes == b"".join(b.to_bytes() for b in stored)
    offsets = [r.offset for r in all_records(log)]
    assert offsets == list(range(next_offset))


def test_append_info_fields(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch_of(2), 0)
    info = log.append_as_leader(batch_ts([NOW + 5, NOW + 9, NOW + 1]), 0)
    assert (info.first_offset, info.last_offset) == (2, 4)
    assert info.max_timestamp == NOW + 9
    assert info.num_records == 3 and info.num_batches == 1
    assert info.log_append_time_ms == -1


def test_log_append_time_stamps_max_timestamp(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock, message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    original = batch_ts([NOW - 5000, NOW - 4000])
    info = log.append_as_leader(original, 0)
    assert info.log_append_time_ms == clock.now
    [b] = log.batches()
    assert b.is_valid()
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert b.max_timestamp == clock.now
    assert [r.timestamp_ms for r in b.records()] == [clock.now, clock.now]
    assert [r.key for r in b.records()] == [b"k0", b"k1"]
    # a timestamp far outside the CreateTime bounds is fine: the broker stamps its own
    log.append_as_leader(batch_of(1, NOW + 10 * DAY), 0)
    assert log.batches()[-1].max_timestamp == clock.now


@pytest.mark.parametrize("producer_codec", [CompressionType.NONE, CompressionType.LZ4])
def test_topic_compression_recompresses(tmp_path: Path, producer_codec: CompressionType) -> None:
    log = make_log(tmp_path, compression_type="gzip")
    log.append_as_leader(batch_of(1), 0)
    log.append_as_leader(batch_of(4, compression=producer_codec), 3)
    b = log.batches()[-1]
    assert b.compression == CompressionType.GZIP
    assert b.is_valid()
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (1, 4, 3)
    assert [(r.offset, r.key, r.value) for r in b.records()] == [
        (1 + i, f"k{i}".encode(), bytes([65 + i]) * 20) for i in range(4)
    ]


def test_producer_compression_kept_byte_for_byte(tmp_path: Path) -> None:
    log = make_log(tmp_path)  # compression.type=producer
    produced = batch_of(5, compression=CompressionType.ZSTD)
    log.append_as_leader(produced, 2)
    raw = log.batches()[0].to_bytes()
    assert raw[16:] == produced[16:]


def test_recompression_that_grows_past_max_message_bytes_is_refused(tmp_path: Path) -> None:
    # Kafka re-checks max.message.bytes after re-compression (UnifiedLog.append,
    # "re-validate message sizes if there's a possibility that they have changed")
    log = make_log(tmp_path, compression_type="uncompressed", max_message_bytes=2000)
    payload = build_batch([(b"k", b"\0" * 1000)] * 10, timestamp_ms=NOW, compression=CompressionType.GZIP)
    assert len(payload) < 2000
    before = state(log)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(payload, 0)
    assert state(log) == before


# ============================================================================ bad input


def _good_then(bad: bytes) -> bytes:
    return batch_of(2) + bad


def _corrupt_crc() -> bytes:
    b = bytearray(batch_of(3))
    b[-1] ^= 0xFF
    return bytes(b)


def _wrong_magic(magic: int) -> bytes:
    b = bytearray(batch_of(3))
    b[16] = magic
    return bytes(b)


def _count_mismatch() -> bytes:
    b = bytearray(batch_of(3))
    struct.pack_into(">i", b, 57, 4)  # recordsCount
    return recrc(b)


def _delta_mismatch() -> bytes:
    b = bytearray(batch_of(3))
    struct.pack_into(">i", b, 23, 5)  # lastOffsetDelta
    return recrc(b)


BAD_INPUTS = [
    ("crc", _corrupt_crc, CorruptRecordError, "CORRUPT_MESSAGE"),
    ("magic3", lambda: _wrong_magic(3), CorruptRecordError, "CORRUPT_MESSAGE"),
    ("magic1", lambda: _wrong_magic(1), UnsupportedForMessageFormatError, "UNSUPPORTED_FOR_MESSAGE_FORMAT"),
    ("truncated", lambda: batch_of(3)[:-5], CorruptRecordError, "CORRUPT_MESSAGE"),
    ("truncated_header", lambda: batch_of(3)[:30], CorruptRecordError, "CORRUPT_MESSAGE"),
    ("count", _count_mismatch, InvalidRecordError, "INVALID_RECORD"),
    ("delta", _delta_mismatch, InvalidRecordError, "INVALID_RECORD"),
    (
        "control",
        lambda: build_control_batch(
            ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=1, timestamp_ms=NOW
        ),
        InvalidRecordError,
        "INVALID_RECORD",
    ),
    ("future", lambda: batch_of(2, NOW + 3_600_001), InvalidTimestampError, "INVALID_TIMESTAMP"),
]


@pytest.mark.parametrize("name,make,err,err_name", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize("after_good", [False, True], ids=["alone", "after_good_batch"])
def test_bad_input_rejected_and_log_unchanged(tmp_path: Path, name, make, err, err_name, after_good: bool) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch_of(4), 0)
    before = state(log)
    payload = _good_then(make()) if after_good else make()
    with pytest.raises(err) as info:
        log.append_as_leader(payload, 1)
    assert info.value.error_name == err_name
    assert state(log) == before
    # the log still works
    assert log.append_as_leader(batch_of(1), 1).first_offset == 4


def test_timestamp_bounds(tmp_path: Path) -> None:
    log = make_log(tmp_path, message_timestamp_before_max_ms=1000)
    log.append_as_leader(batch_of(1, NOW + 3_600_000), 0)  # exactly at the bound
    log.append_as_leader(batch_of(1, NOW - 1000), 0)
    before = state(log)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch_of(1, NOW - 1001), 0)
    with pytest.raises(InvalidTimestampError):  # one record too old in a batch
        log.append_as_leader(batch_ts([NOW, NOW - 2000]), 0)
    assert state(log) == before


def test_too_large_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path, max_message_bytes=300)
    ok = batch_of(1, value_size=100)
    assert len(ok) <= 300
    log.append_as_leader(ok, 0)
    big = batch_of(1, value_size=400)
    before = state(log)
    with pytest.raises(RecordTooLargeError) as info:
        log.append_as_leader(big, 0)
    assert info.value.error_name == "MESSAGE_TOO_LARGE"
    assert state(log) == before


def test_append_larger_than_segment_refused(tmp_path: Path) -> None:
    one = batch_of(1, value_size=100)
    log = make_log(tmp_path, segment_bytes=len(one) * 2)
    before = state(log)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(one * 3, 0)
    assert state(log) == before


def test_keyless_record_to_compacted_topic(tmp_path: Path) -> None:
    log = make_log(tmp_path, cleanup_policy=frozenset({"compact"}))
    log.append_as_leader(batch_of(2), 0)
    before = state(log)
    keyless = build_batch([(b"a", b"1"), (None, b"2")], timestamp_ms=NOW)
    with pytest.raises(InvalidRecordError) as info:
        log.append_as_leader(keyless, 0)
    assert info.value.error_name == "INVALID_RECORD"
    assert state(log) == before


def test_control_batch_from_coordinator_is_accepted(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    marker = build_control_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=1, timestamp_ms=NOW
    )
    info = log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0
    assert log.batches()[0].is_control


# ============================================================================ follower append


def leader_batches(start: int, spec: list[tuple[int, int]]) -> list[bytes]:
    """Batches as a leader stored them: (records, epoch) each, offsets dense from ``start``."""
    out, off = [], start
    for n, epoch in spec:
        out.append(batch_of(n, base_offset=off, partition_leader_epoch=epoch))
        off += n
    return out


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    bs = leader_batches(0, [(2, 1), (3, 1), (1, 4)])
    info = log.append_as_follower(b"".join(bs))
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert [b.to_bytes() for b in log.batches()] == bs  # stored unchanged
    assert log.epoch_cache.entries == [(1, 0), (4, 5)]
    assert log.log_end_offset == 6


def test_follower_append_refuses_offsets_going_backwards(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_follower(b"".join(leader_batches(0, [(3, 0), (3, 0)])))
    before = state(log)
    for bad in (
        leader_batches(5, [(2, 0)]),  # overlaps the log end
        leader_batches(0, [(2, 0)]),
        leader_batches(6, [(2, 0)]) + leader_batches(7, [(1, 0)]),
    ):  # 2nd goes back
        with pytest.raises(OffsetsOutOfOrderError) as info:
            log.append_as_follower(b"".join(bad))
        assert info.value.error_name == "INVALID_RECORD"
        assert state(log) == before


def test_follower_append_ignores_partial_trailing_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    bs = leader_batches(0, [(2, 0), (2, 0), (2, 0)])
    payload = b"".join(bs)
    info = log.append_as_follower(payload[:-7])
    assert info.last_offset == 3
    assert log.log_end_offset == 4
    assert log.active_segment.size == len(bs[0]) + len(bs[1])
    assert log.append_as_follower(bs[2][:40]) is None  # nothing whole
    assert log.log_end_offset == 4
    log.append_as_follower(bs[2])
    assert log.log_end_offset == 6


def test_follower_append_rejects_corrupt_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    bs = leader_batches(0, [(2, 0), (2, 0)])
    bad = bytearray(bs[1])
    bad[-2] ^= 0x10
    before = state(log)
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bs[0] + bytes(bad))
    assert state(log) == before


def test_follower_append_accepts_gap(tmp_path: Path) -> None:
    # a compacted leader's log can have gaps; offsets only need to increase
    log = make_log(tmp_path)
    log.append_as_follower(b"".join(leader_batches(0, [(2, 0)])))
    log.append_as_follower(b"".join(leader_batches(10, [(2, 0)])))
    assert log.log_end_offset == 12
    assert [b.base_offset for b in log.batches()] == [0, 10]
    assert log.read(5, 10_000).first_batch_offset == 10


# ============================================================================ read


@pytest.fixture()
def three_record_log(tmp_path: Path) -> Log:
    """40 batches of 3 records (offsets 0..119) over several segments."""
    one = batch_of(3)
    log = make_log(tmp_path, segment_bytes=len(one) * 7, index_interval_bytes=len(one) + 1)
    for i in range(40):
        log.append_as_leader(batch_of(3, NOW + i), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_read_returns_whole_batches_from_the_batch_holding_the_offset(three_record_log: Log) -> None:
    log = three_record_log
    size = len(batch_of(3))
    for start in (0, 1, 2, 3, 22, 23, 24, 50):
        info = log.read(start, size * 2 + size // 2)
        batches = [b for _p, b in iter_batches(info.records)]
        assert len(info.records) == sum(b.size_bytes for b in batches), "whole batches only"
        assert batches[0].base_offset == start - start % 3
        assert info.first_batch_offset == batches[0].base_offset
        assert len(batches) == 2
        assert info.log_end_offset == 120 and info.high_watermark == 120


def test_read_min_one_message(three_record_log: Log) -> None:
    log = three_record_log
    size = len(batch_of(3))
    info = log.read(4, 10)
    assert len(info.records) == size
    assert RecordBatch(info.records).base_offset == 3
    info = log.read(4, 10, min_one_message=False)
    assert info.records == b""


def test_read_stays_in_one_segment_and_does_not_split(three_record_log: Log) -> None:
    log = three_record_log
    info = log.read(0, 10**6)
    batches = [b for _p, b in iter_batches(info.records)]
    assert batches[-1].next_offset == log.segments[1].base_offset
    assert len(info.records) == log.segments[0].size


def test_read_respects_max_offset(three_record_log: Log) -> None:
    log = three_record_log
    log.update_high_watermark(30)
    info = log.read(0, 10**6, max_offset=log.high_watermark)
    batches = [b for _p, b in iter_batches(info.records)]
    assert batches and all(b.last_offset < 30 for b in batches)
    assert log.segments[1].base_offset == 21
    info = log.read(21, 10**6, max_offset=30)
    assert [b.base_offset for _p, b in iter_batches(info.records)] == [21, 24, 27]
    info = log.read(22, 10**6, max_offset=log.log_end_offset)
    assert [b.base_offset for _p, b in iter_batches(info.records)] == [21, 24, 27, 30, 33, 36, 39]
    assert log.read(30, 10**6, max_offset=30).records == b""
    assert log.read(35, 10**6, max_offset=30).records == b""
    assert log.read(35, 10**6).records != b""  # followers read up to the log end


def test_read_every_offset(three_record_log: Log) -> None:
    assert_every_offset_readable(three_record_log)


def test_read_out_of_range(three_record_log: Log) -> None:
    log = three_record_log
    info = log.read(120, 1000)
    assert info.records == b"" and info.log_end_offset == 120
    for bad in (-1, 121, 10**6):
        with pytest.raises(OffsetOutOfRangeError) as err:
            log.read(bad, 1000)
        assert err.value.error_name == "OFFSET_OUT_OF_RANGE"
    assert log.maybe_increment_log_start_offset(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 1000)
    info = log.read(10, 1000)
    assert info.log_start_offset == 10 and info.first_batch_offset == 9


def test_read_returns_a_copy(three_record_log: Log) -> None:
    log = three_record_log
    info = log.read(100, 10**6)
    data = bytes(info.records)
    log.truncate_to(90)
    assert info.records == data


# ============================================================================ offset_for_timestamp


@pytest.fixture()
def ts_log(tmp_path: Path) -> Log:
    """Batches of records with timestamps NOW + 100*i + {0, 10, 20}, over several segments; one batch
    in the middle carries the largest timestamp of all."""
    log = make_log(tmp_path, segment_bytes=600, index_interval_bytes=100)
    for i in range(30):
        base = NOW - 100_000 + 100 * i
        tss = [base, base + 10, base + 20]
        if i == 13:
            tss = [base, NOW + 5000, base + 20]
        log.append_as_leader(batch_ts(tss), i // 10)
    assert len(log.segments) >= 4
    return log


def test_offset_for_timestamp_special_values(ts_log: Log) -> None:
    log = ts_log
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    latest = log.offset_for_timestamp(LATEST_TIMESTAMP)
    assert latest.offset == 90 and latest.leader_epoch == 2
    mx = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (mx.timestamp, mx.offset, mx.leader_epoch) == (NOW + 5000, 13 * 3 + 1, 1)
    log.update_high_watermark(90)
    log.maybe_increment_log_start_offset(40)
    e = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
    assert e.offset == 40 and e.leader_epoch == 1


def test_offset_for_timestamp_exact_and_between(ts_log: Log) -> None:
    log = ts_log
    records = all_records(log)
    epochs = {r.offset: b.partition_leader_epoch for b in log.batches() for r in b.records()}

    def brute(target: int):  # Kafka's contract: the earliest offset whose timestamp >= target
        for r in records:
            if r.timestamp_ms >= target:
                return (r.timestamp_ms, r.offset, epochs[r.offset])
        return None

    targets = sorted({t + d for r in records for t in (r.timestamp_ms,) for d in (-1, 0, 1, 5, 50)})
    for target in targets:
        res = log.offset_for_timestamp(target)
        got = None if res is None else (res.timestamp, res.offset, res.leader_epoch)
        assert got == brute(target), target
    t0 = NOW - 100_000
    # spot checks: exact, between records, between batches across a segment boundary
    assert log.offset_for_timestamp(t0 + 310).offset == 10
    assert log.offset_for_timestamp(t0 + 315).offset == 11
    seg1 = log.segments[1].base_offset
    assert log.offset_for_timestamp(t0 + 100 * (seg1 // 3 - 1) + 50).offset == seg1
    # after the middle batch, its far-future record is the earliest one at or past any target
    assert log.offset_for_timestamp(t0 + 100 * 20).offset == 40
    assert log.offset_for_timestamp(t0 - 1).offset == 0
    assert log.offset_for_timestamp(NOW + 5001) is None


def test_offset_for_timestamp_skips_records_below_log_start_but_not_later_batches(tmp_path: Path) -> None:
    # ListOffsets after DeleteRecords moved the log start into a batch: the first batch whose max
    # timestamp reaches the target only has matching records below the log start, so the search must
    # go on with the next batch of the same segment (Kafka's FileRecords.searchForTimestamp)
    log = make_log(tmp_path)
    log.append_as_leader(batch_ts([NOW - 1000, NOW + 500, NOW - 1000]), 0)  # offsets 0..2
    log.append_as_leader(batch_ts([NOW + 200, NOW + 200]), 0)  # offsets 3..4
    log.update_high_watermark(5)
    assert log.maybe_increment_log_start_offset(2)
    res = log.offset_for_timestamp(NOW + 200)
    assert res is not None and (res.timestamp, res.offset) == (NOW + 200, 3)


def test_offset_for_timestamp_after_reopen(ts_log: Log) -> None:
    log = ts_log
    expected = [log.offset_for_timestamp(NOW - 100_000 + 37 * k) for k in range(0, 90)]
    mx = log.offset_for_timestamp(MAX_TIMESTAMP)
    log.close()
    again = Log(log.dir, log.config, had_clean_shutdown=True, recovery_point=log.log_end_offset, clock_ms=FakeClock())
    assert [again.offset_for_timestamp(NOW - 100_000 + 37 * k) for k in range(0, 90)] == expected
    assert again.offset_for_timestamp(MAX_TIMESTAMP) == mx


# ============================================================================ leader epochs


def test_epoch_cache_on_leader_appends(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for epoch, n in [(0, 3), (0, 2), (1, 4), (1, 1), (3, 2)]:
        log.append_as_leader(batch_of(n), epoch)
    assert log.epoch_cache.entries == [(0, 0), (1, 5), (3, 10)]
    assert [b.partition_leader_epoch for b in log.batches()] == [0, 0, 1, 1, 3]
    assert log.latest_epoch == 3
    ck = (log.dir / "leader-epoch-checkpoint").read_text()
    assert ck == "0\n3\n0 0\n1 5\n3 10\n"


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for epoch, n in [(2, 3), (4, 5), (7, 2)]:
        log.append_as_leader(batch_of(n), epoch)
    leo = log.log_end_offset
    assert leo == 10
    assert log.end_offset_for_epoch(7) == (7, leo)  # latest: the log end
    assert log.end_offset_for_epoch(4) == (4, 8)  # start of the next higher epoch
    assert log.end_offset_for_epoch(2) == (2, 3)
    assert log.end_offset_for_epoch(5) == (4, 8)  # unknown in between: floor epoch, next start
    assert log.end_offset_for_epoch(3) == (2, 3)
    assert log.end_offset_for_epoch(8) == (-1, -1)  # larger than latest
    assert log.end_offset_for_epoch(1) == (1, 0)  # smaller than first: (requested, first start)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    empty = make_log(tmp_path, name="empty-0")
    assert empty.end_offset_for_epoch(0) == (-1, -1)


def test_epoch_checkpoint_persisted_and_reloaded(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for epoch in (0, 0, 2, 5, 5):
        log.append_as_leader(batch_of(2), epoch)
    entries = log.epoch_cache.entries
    log.close()
    again = Log(log.dir, log.config, had_clean_shutdown=True, recovery_point=10, clock_ms=FakeClock())
    assert again.epoch_cache.entries == entries == [(0, 0), (2, 4), (5, 6)]
    again.close()
    # without the checkpoint file, recovery rebuilds it from the batches
    (log.dir / "leader-epoch-checkpoint").unlink()
    rebuilt = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=FakeClock())
    assert rebuilt.epoch_cache.entries == entries


def test_epochs_truncated_with_the_log(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for epoch, n in [(0, 3), (1, 3), (2, 3), (3, 3)]:
        log.append_as_leader(batch_of(n), epoch)
    log.truncate_to(6)
    assert log.epoch_cache.entries == [(0, 0), (1, 3)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(2) == (-1, -1)
    assert (log.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 3\n"
    log.append_as_leader(batch_of(1), 4)
    assert log.epoch_cache.entries == [(0, 0), (1, 3), (4, 6)]


def test_epochs_truncated_from_start(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for epoch in range(3):
        log.append_as_leader(batch_of(10), epoch)
    log.update_high_watermark(30)
    log.maybe_increment_log_start_offset(15)
    assert log.epoch_cache.entries == [(1, 15), (2, 20)]
    assert (log.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 15\n2 20\n"


# ============================================================================ truncation


def test_truncate_to_mid_log_in_active_segment(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for _ in range(10):
        log.append_as_leader(batch_of(2), 0)
    log.update_high_watermark(20)
    assert log.truncate_to(12)
    assert log.log_end_offset == 12 and log.high_watermark == 12
    assert [b.base_offset for b in log.batches()] == list(range(0, 12, 2))
    assert not log.truncate_to(12)
    assert log.append_as_leader(batch_of(1), 1).first_offset == 12
    log.active_segment.sanity_check()
    assert_every_offset_readable(log)


def test_truncate_to_mid_batch_removes_that_whole_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch_of(4), 0)
    log.truncate_to(9)  # inside batch 8..11
    assert log.log_end_offset == 8
    assert log.batches()[-1].last_offset == 7


def test_truncate_across_segments(tmp_path: Path) -> None:
    one = batch_of(2)
    log = make_log(tmp_path, segment_bytes=len(one) * 3, index_interval_bytes=0)
    for i in range(15):
        log.append_as_leader(batch_of(2, NOW + i), i // 5)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24]
    old_files = {p.name for p in log.dir.iterdir()}
    log.truncate_to(8)
    assert log.log_end_offset == 8
    assert [s.base_offset for s in log.segments] == [0, 6]
    names = {p.name for p in log.dir.iterdir()}
    for base in (12, 18, 24):
        assert f"{base:020d}.log" not in names and f"{base:020d}.index" not in names
    assert f"{12:020d}.log" in old_files
    assert log.epoch_cache.entries == [(0, 0)]
    log.active_segment.sanity_check()
    # appends continue in the truncated segment, with index entries that stay consistent
    for i in range(6):
        log.append_as_leader(batch_of(2, NOW + 100 + i), 5)
    assert log.epoch_cache.entries == [(0, 0), (5, 8)]
    for s in log.segments:
        s.sanity_check()
    assert_every_offset_readable(log)
    assert log.offset_for_timestamp(NOW + 100).offset == 8
    # truncating exactly at a segment base removes that segment's content
    base = log.segments[-1].base_offset
    log.truncate_to(base)
    assert log.log_end_offset == base
    assert_every_offset_readable(log)


def test_truncate_persists_after_reopen(tmp_path: Path) -> None:
    one = batch_of(2)
    log = make_log(tmp_path, segment_bytes=len(one) * 3)
    for i in range(12):
        log.append_as_leader(batch_of(2), i // 4)
    log.truncate_to(9)
    leo = log.log_end_offset
    log.close()
    again = Log(log.dir, log.config, had_clean_shutdown=True, recovery_point=leo, clock_ms=FakeClock())
    assert again.log_end_offset == leo
    assert again.epoch_cache.entries == log.epoch_cache.entries
    assert_every_offset_readable(again)


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    one = batch_of(2)
    log = make_log(tmp_path, segment_bytes=len(one) * 3)
    for i in range(10):
        log.append_as_leader(batch_of(2), i)
    log.update_high_watermark(20)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.epoch_cache.entries == []
    names = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".log"))
    assert names == [f"{500:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(500, 100).records == b""
    assert log.append_as_leader(batch_of(3), 11).first_offset == 500
    assert log.epoch_cache.entries == [(11, 500)]
    assert_every_offset_readable(log)


def test_truncate_to_negative_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(-1)


# ============================================================================ retention


def build_aged_log(tmp_path: Path, clock: FakeClock, **cfg: object) -> Log:
    """Five segments of 3 batches x 2 records; segment k's batches are (5 - k) * 10 s old."""
    one = batch_of(2)
    log = make_log(tmp_path, clock, segment_bytes=len(one) * 3, **cfg)
    for k in range(5):
        for _ in range(3):
            log.append_as_leader(batch_of(2, clock.now - (5 - k) * 10_000), 0)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24]
    return log


def test_retention_ms(tmp_path: Path) -> None:
    clock = FakeClock()
    log = build_aged_log(tmp_path, clock, retention_ms=35_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2  # 50 s and 40 s old
    assert log.log_start_offset == 12
    assert [s.base_offset for s in log.segments] == [12, 18, 24]
    assert not (log.dir / f"{0:020d}.log").exists()
    assert not (log.dir / f"{6:020d}.index").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    assert log.delete_old_segments() == 0
    clock.now += 10_000  # now 30 s + 10 s
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 18


def test_retention_never_deletes_at_or_above_high_watermark(tmp_path: Path) -> None:
    clock = FakeClock()
    log = build_aged_log(tmp_path, clock, retention_ms=1)
    log.update_high_watermark(5)  # inside the first segment
    assert log.delete_old_segments() == 0
    log.update_high_watermark(6)  # the first segment is now wholly below the HW
    assert log.delete_old_segments() == 1
    log.update_high_watermark(20)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 18 and log.log_end_offset == 30
    assert_every_offset_readable(log)


def test_retention_rolls_expired_active_segment(tmp_path: Path) -> None:
    clock = FakeClock()
    log = build_aged_log(tmp_path, clock, retention_ms=1000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 5
    assert log.log_start_offset == 30 and log.log_end_offset == 30
    assert [s.base_offset for s in log.segments] == [30]
    assert log.active_segment.size == 0
    assert log.append_as_leader(batch_of(1), 0).first_offset == 30
    # the empty active segment itself is never deleted
    clock.now += 10**7
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.log_end_offset == 31


def test_retention_bytes(tmp_path: Path) -> None:
    clock = FakeClock()
    seg_size = len(batch_of(2)) * 3
    log = build_aged_log(tmp_path, clock, retention_bytes=seg_size * 2 + 10)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2  # 5 segments -> 3 (the 3rd would go below the limit)
    assert [s.base_offset for s in log.segments] == [12, 18, 24]
    assert log.size_bytes == seg_size * 3
    assert log.delete_old_segments() == 0


def test_retention_bytes_respects_high_watermark(tmp_path: Path) -> None:
    clock = FakeClock()
    log = build_aged_log(tmp_path, clock, retention_bytes=0)
    log.update_high_watermark(12)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 12


def test_delete_records_by_log_start_offset(tmp_path: Path) -> None:
    clock = FakeClock()
    log = build_aged_log(tmp_path, clock, cleanup_policy=frozenset({"compact"}))
    log.update_high_watermark(20)
    before = state(log)
    with pytest.raises(OffsetOutOfRangeError) as err:
        log.maybe_increment_log_start_offset(21)  # past the high watermark
    assert err.value.error_name == "OFFSET_OUT_OF_RANGE"
    assert state(log) == before
    assert log.maybe_increment_log_start_offset(13)
    assert not log.maybe_increment_log_start_offset(13)
    assert not log.maybe_increment_log_start_offset(5)  # never backwards
    assert log.log_start_offset == 13
    with pytest.raises(OffsetOutOfRangeError):
        log.read(12, 100)
    assert log.read(13, 100).first_batch_offset == 12
    # retention by start offset applies even without cleanup.policy=delete
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [12, 18, 24]
    assert log.log_start_offset == 13
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 13
    assert all(r.offset >= 12 for r in all_records(log))
    assert log.maybe_increment_log_start_offset(20)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 20


# ============================================================================ flushing


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    log = make_log(tmp_path, flush_messages=5)
    for _i in range(4):
        log.append_as_leader(batch_of(1), 0)
        assert log.recovery_point == 0
    log.append_as_leader(batch_of(1), 0)
    assert log.recovery_point == 5
    log.append_as_leader(batch_of(3), 0)
    assert log.recovery_point == 5
    log.append_as_leader(batch_of(2), 0)
    assert log.recovery_point == 10


def test_flush_ms_with_fake_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock, flush_ms=1000)
    log.append_as_leader(batch_of(3), 0)
    clock.now += 999
    assert not log.maybe_flush()
    assert log.recovery_point == 0
    clock.now += 1
    assert log.maybe_flush()
    assert log.recovery_point == 3
    assert not log.maybe_flush()  # nothing new
    log.append_as_leader(batch_of(2), 0)
    assert not log.maybe_flush()  # the interval restarts at the last flush
    clock.now += 1000
    assert log.maybe_flush()
    assert log.recovery_point == 5


def test_explicit_flush_and_close(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch_of(3), 0)
    log.flush()
    assert log.recovery_point == 3
    log.append_as_leader(batch_of(3), 0)
    log.close()
    assert log.recovery_point == 6
    with pytest.raises(storage.KafkaStorageError):
        log.append_as_leader(batch_of(1), 0)


def test_recovery_point_moves_after_roll(tmp_path: Path) -> None:
    one = batch_of(2)
    log = make_log(tmp_path, segment_bytes=len(one) * 2)
    for _ in range(5):
        log.append_as_leader(batch_of(2), 0)
    # segments [0, 4), [4, 8), [8, 10): the background flusher makes the rolled ones durable
    wait_until(lambda: log.recovery_point >= 8)
    assert log.recovery_point <= log.log_end_offset


# ============================================================================ read against a model


def _model_read(seg_batches: list[list[RecordBatch]], start: int, max_bytes: int, max_offset, min_one: bool):
    """What a fetch must return: whole batches of one segment, from the first batch ending at or
    after ``start``, within ``max_bytes`` (at least one with ``min_one``), none ending at or past
    ``max_offset``. Returns (list of batch bytes, first base offset or -1)."""
    if max_offset is not None and start >= max_offset:
        return [], -1
    bases = [bs[0].base_offset if bs else None for bs in seg_batches]
    i = 0
    for k, b in enumerate(bases):
        if b is not None and b <= start:
            i = k
    for bs in seg_batches[i:]:
        cands = [b for b in bs if b.last_offset >= start]
        if not cands:
            continue
        first = cands[0]
        if max_offset is not None and first.last_offset >= max_offset:
            return [], -1
        if first.size_bytes > max_bytes:
            return ([first.to_bytes()], first.base_offset) if min_one else ([], -1)
        out, used = [], 0
        for b in cands:
            if used + b.size_bytes > max_bytes:
                break
            if max_offset is not None and b.last_offset >= max_offset:
                break
            out.append(b.to_bytes())
            used += b.size_bytes
        return out, first.base_offset
    return [], -1


@pytest.mark.parametrize("interval", [0, 150, 4096])
def test_read_matches_model(tmp_path: Path, interval: int) -> None:
    rng = random.Random(interval + 1)
    log = make_log(tmp_path, segment_bytes=2500, index_interval_bytes=interval)
    for i in range(90):
        log.append_as_leader(batch_of(rng.randrange(1, 5), NOW + i, value_size=rng.randrange(1, 80)), 0)
    leo = log.log_end_offset
    seg_batches = [[b for _p, b in iter_batches(s.read_at(0, s.size))] for s in log.segments]
    assert len(seg_batches) >= 4
    for _ in range(400):
        start = rng.randrange(0, leo + 1)
        max_bytes = rng.choice([1, 60, 200, 500, 1000, 3000, 10**6, rng.randrange(1, 3000)])
        max_offset = rng.choice([None, None, rng.randrange(0, leo + 1)])
        min_one = rng.random() < 0.8
        info = log.read(start, max_bytes, max_offset=max_offset, min_one_message=min_one)
        want, first = _model_read(seg_batches, start, max_bytes, max_offset, min_one)
        assert info.records == b"".join(want), (start, max_bytes, max_offset, min_one)
        assert info.first_batch_offset == first
        if want:
            assert info.next_offset == RecordBatch(want[-1]).next_offset


# ============================================================================ large appends


def _big_batch(n: int, value_size: int, ts: int = NOW, tag: int = 0) -> bytes:
    rng = random.Random(tag)
    return build_batch([(f"big{tag}-{i}".encode(), rng.randbytes(value_size)) for i in range(n)], timestamp_ms=ts)


@pytest.mark.parametrize("shape", ["one_300k_batch", "three_120k_batches", "1100_small_batches"])
def test_large_append_stored_exactly(tmp_path: Path, shape: str) -> None:
    # appends of 256 KiB and more take the vectored-write path
    if shape == "one_300k_batch":
        batches = [_big_batch(3, 100_000)]
    elif shape == "three_120k_batches":
        batches = [_big_batch(2, 60_000, tag=t) for t in range(3)]
    else:
        batches = [_big_batch(1, 250, tag=t) for t in range(1100)]
    payload = b"".join(batches)
    assert len(payload) >= 256 * 1024
    for mode in ("leader_then_big", "big_first"):
        log = make_log(tmp_path, name=f"{shape[:3]}{mode[:3]}-0")
        if mode == "leader_then_big":
            log.append_as_leader(batch_of(2), 0)
        first = log.log_end_offset
        info = log.append_as_leader(payload, 7)
        assert info.first_offset == first
        assert info.valid_bytes == len(payload)
        stored = log.batches(first)
        assert len(stored) == len(batches)
        off = first
        for sb, pb in zip(stored, batches, strict=False):
            raw = sb.to_bytes()
            assert raw[8:12] == pb[8:12] and raw[16:] == pb[16:]
            assert (sb.base_offset, sb.partition_leader_epoch) == (off, 7)
            assert sb.is_valid()
            off = sb.next_offset
        assert off == log.log_end_offset
        log.active_segment.sanity_check()
        # the caller's buffer is not modified
        assert payload == b"".join(batches)
        everything = [b.to_bytes() for b in log.batches()]
        log.close()
        # a crash right after: recovery scans the large batches and keeps them all
        again = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=FakeClock())
        assert again.log_end_offset == off
        assert [b.to_bytes() for b in again.batches()] == everything
        again.close()


def test_large_append_with_log_append_time(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock, message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    payload = _big_batch(3, 100_000, ts=NOW - 10_000)
    log.append_as_leader(payload, 1)
    [b] = log.batches()
    assert b.is_valid() and b.max_timestamp == clock.now
    assert payload == _big_batch(3, 100_000, ts=NOW - 10_000)


# ============================================================================ concurrency


def test_concurrent_appends_reads_and_flushes(tmp_path: Path) -> None:
    import threading

    log = make_log(tmp_path, segment_bytes=8000, index_interval_bytes=300)
    errors: list[BaseException] = []
    acked: list[list[tuple[int, int]]] = [[] for _ in range(4)]
    done = threading.Event()

    def writer(k: int) -> None:
        try:
            for i in range(150):
                info = log.append_as_leader(batch_of(1 + i % 3, NOW + i, prefix=f"w{k}-{i}-"), 0)
                acked[k].append((info.first_offset, info.last_offset))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    def reader() -> None:
        try:
            while not done.is_set():
                leo = log.log_end_offset
                if leo:
                    off = random.randrange(leo)
                    info = log.read(off, 500)
                    first = next(b for _p, b in iter_batches(info.records))
                    assert first.base_offset <= off <= first.last_offset
                log.maybe_flush()
                log.flush()
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    writers = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=30)
    done.set()
    for t in readers:
        t.join(timeout=30)
    assert not errors, errors
    ranges = sorted(r for rs in acked for r in rs)
    assert ranges[0][0] == 0
    for (_a, b), (c, _d) in zip(ranges, ranges[1:], strict=False):
        assert c == b + 1, "acknowledged offset ranges are dense and disjoint"
    assert ranges[-1][1] + 1 == log.log_end_offset
    # each writer's records are in its own order, with the offsets it was told
    by_offset = {r.offset: r.key for r in all_records(log)}
    for k in range(4):
        for i, (first, _last) in enumerate(acked[k]):
            assert by_offset[first] == f"w{k}-{i}-0".encode()
    for s in log.segments:
        s.sanity_check()
    assert_every_offset_readable(log)
