"""Leader-side validation of produced batches (issue 12 §1), at the `Log` level.

Each defect of the issue is reproduced with a batch whose CRC is valid but whose content is not:
the leader must refuse it with Kafka's error (and the records it names), write nothing, and keep
serving. Followers check CRC and framing of what they fetch; a read that meets a corrupt batch
written by an earlier process stops before it or raises CORRUPT_MESSAGE naming its offset.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest

from kraftlog.common.records import HEADER_SIZE, crc32c, write_varint
from kraftlog.common.records.compression import compress, decompress
from kraftlog.storage import (
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    LogConfig,
    RecordBatch,
    TimestampType,
    build_batch,
)

NOW = 1_700_000_000_000
HOUR = 3_600_000
_HEADER = struct.Struct(">qiibIhiqqqhii")


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_log(tmp_path: Path, **cfg: object) -> Log:
    return Log(tmp_path / "topic-0", LogConfig(**cfg), clock_ms=FakeClock())


def record(offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"value", *, ts_delta: int = 0) -> bytes:
    """One v2 record, encoded here independently of the builder so tests can break its fields."""
    body = bytearray(b"\x00")
    write_varint(body, ts_delta)
    write_varint(body, offset_delta)
    for field in (key, value):
        if field is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(field))
            body += field
    write_varint(body, 0)  # headers
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def raw_batch(
    section: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_ts: int = NOW,
    max_ts: int = NOW,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
) -> bytes:
    """A batch around ``section`` with any header values, and a correct length and CRC."""
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    header = bytearray(
        _HEADER.pack(
            base_offset,
            HEADER_SIZE - 12 + len(section),
            -1,
            2,
            0,
            attributes,
            lod,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + section))
    return bytes(header) + section


def state(log: Log) -> tuple:
    return (log.log_end_offset, [p.read_bytes() for p in sorted(log.dir.glob("*.log"))])


def refuse(log: Log, payload: bytes, err: type[Exception]) -> Exception:
    """Append must fail with ``err``, leave the log unchanged, and the log must keep serving."""
    before = state(log)
    with pytest.raises(err) as info:
        log.append_as_leader(payload, 0)
    assert state(log) == before
    end = log.log_end_offset
    assert log.append_as_leader(build_batch([(b"k", b"ok")], timestamp_ms=NOW), 0).first_offset == end
    return info.value


# ============================================================================ the three defects


def test_record_count_larger_than_the_records_present_is_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    section = record(0) + record(1) + record(2)
    err = refuse(log, raw_batch(section, count=4), InvalidRecordError)
    assert err.error_name == "INVALID_RECORD"
    assert [e.batch_index for e in err.record_errors] == [3]
    assert "declares 4 records but holds 3" in err.record_errors[0].message


def test_gzip_body_that_does_not_inflate_is_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    good = gzip.compress(record(0) + record(1))
    broken = good[:10] + bytes(b ^ 0x5A for b in good[10:-8]) + good[-8:]
    err = refuse(log, raw_batch(broken, count=2, attributes=int(CompressionType.GZIP)), CorruptRecordError)
    assert err.error_name == "CORRUPT_MESSAGE"
    truncated = good[: len(good) // 2]
    refuse(log, raw_batch(truncated, count=2, attributes=int(CompressionType.GZIP)), CorruptRecordError)


def test_offset_deltas_out_of_order_are_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    err = refuse(log, raw_batch(record(0) + record(2) + record(1), count=3), InvalidRecordError)
    assert [e.batch_index for e in err.record_errors] == [1]
    assert "offset delta 2 where 1 was expected" in err.record_errors[0].message
    # the same inside a compressed batch, decompressed once
    section = compress(CompressionType.LZ4, record(0) + record(1) + record(1))
    err = refuse(log, raw_batch(section, count=3, attributes=int(CompressionType.LZ4)), InvalidRecordError)
    assert [e.batch_index for e in err.record_errors] == [2]


# ============================================================================ framing


def patched(rec: bytes, at: int, value: bytes) -> bytes:
    """``rec`` with byte ``at`` replaced by ``value`` (layout: length, attributes, timestamp delta,
    offset delta, key length at 4, ...)."""
    return rec[:at] + value + rec[at + 1 :]


def framed(body: bytes) -> bytes:
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out) + body


@pytest.mark.parametrize(
    "section,index,what",
    [
        (record(0) + record(1) + b"\x00\x01", 1, "bytes follow the last"),
        (record(0) + record(1)[:-3], 1, "runs 3 bytes past the end"),
        (record(0) + framed(b"\x00\x00\x82\x80\x80\x80\x80\x00\x01\x01\x00"), 1, "varint longer than 5 bytes"),
        (patched(record(0, key=b"abc"), 4, b"\x7e") + record(1), 0, "invalid key length 63"),
        (record(0) + patched(record(1, key=None, value=None), 5, b"\x03"), 1, "invalid value length -2"),
        (record(0) + framed(record(1)[1:] + b"\x00"), 1, "record of declared length 13 spans 12 bytes"),
    ],
)
def test_records_that_do_not_decode_are_refused(tmp_path: Path, section: bytes, index: int, what: str) -> None:
    log = make_log(tmp_path)
    err = refuse(log, raw_batch(section, count=2), InvalidRecordError)
    assert [e.batch_index for e in err.record_errors] == [index]
    assert what in err.record_errors[0].message, err.record_errors


def test_record_errors_count_across_the_batches_of_a_payload(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    first = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=NOW)
    second = raw_batch(record(0) + record(0), count=2)
    err = refuse(log, first + second, InvalidRecordError)
    assert [e.batch_index for e in err.record_errors] == [3]


def test_decompression_is_bounded() -> None:
    payload = b"\x00" * 5000
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        packed = compress(codec, payload)
        assert decompress(codec, packed, max_bytes=5000) == payload
        with pytest.raises(CorruptRecordError, match="inflate past 4999"):
            decompress(codec, packed, max_bytes=4999)


def test_a_decompression_bomb_is_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    bomb = compress(CompressionType.ZSTD, record(0, value=b"\x00" * (65 * 1024 * 1024)))
    assert len(bomb) < 64 * 1024
    err = refuse(log, raw_batch(bomb, count=1, attributes=int(CompressionType.ZSTD)), CorruptRecordError)
    assert "inflate past" in str(err)


# ============================================================================ keys and timestamps


def test_compacted_topic_names_every_keyless_record(tmp_path: Path) -> None:
    log = make_log(tmp_path, cleanup_policy=frozenset({"compact"}))
    batch = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")], timestamp_ms=NOW)
    err = refuse(log, batch, InvalidRecordError)
    assert [e.batch_index for e in err.record_errors] == [1, 3]
    assert "without a key" in str(err)


def test_timestamps_are_checked_per_record_not_from_the_header(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    # the header claims NOW, the second record says two hours ahead
    section = record(0) + record(1, ts_delta=2 * HOUR)
    err = refuse(log, raw_batch(section, count=2, max_ts=NOW), InvalidTimestampError)
    assert err.error_name == "INVALID_TIMESTAMP"
    assert [e.batch_index for e in err.record_errors] == [1]


def test_before_max_ms_names_the_late_records_and_ignores_no_timestamp(tmp_path: Path) -> None:
    log = make_log(tmp_path, message_timestamp_before_max_ms=1000)
    section = record(0) + record(1, ts_delta=-5000) + record(2, ts_delta=-10)
    err = refuse(log, raw_batch(section, count=3), InvalidTimestampError)
    assert [e.batch_index for e in err.record_errors] == [1]
    # -1 means "no timestamp": never out of range (Kafka's validateTimestamp)
    no_ts = raw_batch(record(0) + record(1), count=2, base_ts=-1, max_ts=-1)
    assert log.append_as_leader(no_ts, 0).num_records == 2


def test_max_timestamp_is_taken_from_the_records(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    section = record(0, ts_delta=0) + record(1, ts_delta=700) + record(2, ts_delta=300)
    info = log.append_as_leader(raw_batch(section, count=3, max_ts=NOW - 99), 0)
    assert info.max_timestamp == NOW + 700
    [stored] = log.batches()
    assert stored.max_timestamp == NOW + 700 and stored.is_valid()
    assert [r.timestamp_ms for r in stored.records()] == [NOW, NOW + 700, NOW + 300]


def test_a_producer_may_not_set_log_append_time(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    err = refuse(log, raw_batch(record(0) + record(1), count=2, attributes=0x08), InvalidTimestampError)
    assert [e.batch_index for e in err.record_errors] == [0, 1]


def test_log_append_time_topic_stamps_but_does_not_check(tmp_path: Path) -> None:
    log = make_log(tmp_path, message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    info = log.append_as_leader(raw_batch(record(0, ts_delta=-50 * HOUR), count=1), 0)
    assert info.max_timestamp == NOW and log.batches()[0].max_timestamp == NOW


@pytest.mark.parametrize("pid,epoch,seq", [(5, 0, -1), (5, -1, 0), (-1, 0, -1), (-1, -1, 3), (-2, -1, -1)])
def test_inconsistent_producer_fields_are_refused(tmp_path: Path, pid: int, epoch: int, seq: int) -> None:
    log = make_log(tmp_path)
    batch = raw_batch(record(0), count=1, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    refuse(log, batch, InvalidRecordError)


def test_idempotent_batch_is_accepted(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    batch = raw_batch(record(0), count=1, producer_id=5, producer_epoch=0, base_sequence=0)
    assert log.append_as_leader(batch, 0).num_records == 1


# ============================================================================ followers and reads


def test_follower_refuses_a_batch_that_does_not_decode(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    good = build_batch([(b"a", b"1")], timestamp_ms=NOW)
    bad = raw_batch(record(0) + record(1), count=3, base_offset=1)
    before = state(log)
    with pytest.raises(CorruptRecordError, match="batch at offset 1 is corrupt"):
        log.append_as_follower(good + bad)
    assert state(log) == before


def test_follower_accepts_a_compacted_batch_with_offset_gaps(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    compacted = raw_batch(record(0) + record(3) + record(7), count=3, last_offset_delta=9)
    info = log.append_as_follower(compacted)
    assert info is not None and log.log_end_offset == 10
    assert [r.offset for r in log.batches()[0].records()] == [0, 3, 7]


def _log_with_corrupt_batch_on_disk(tmp_path: Path) -> Log:
    """Offsets 0..1 good, 2..4 a batch an older version accepted (CRC fine, 2 of 3 records
    present), 5 good: written through the segment file, then the log is loaded again."""
    log = make_log(tmp_path)
    log.append_as_leader(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=NOW), 0)
    log.close()
    bad = raw_batch(record(0) + record(1), count=3, base_offset=2)
    tail = build_batch([(b"z", b"9")], timestamp_ms=NOW, base_offset=5)
    [segment] = sorted(log.dir.glob("*.log"))
    with open(segment, "ab") as fh:
        fh.write(bad + tail)
    return Log(log.dir, LogConfig(), clock_ms=FakeClock(), high_watermark=6, had_clean_shutdown=False)


def test_read_stops_before_a_corrupt_batch_on_disk_and_names_its_offset(tmp_path: Path) -> None:
    log = _log_with_corrupt_batch_on_disk(tmp_path)
    assert log.log_end_offset == 6  # recovery checks the CRC only, as Kafka's does
    info = log.read(0, 1 << 20)
    assert [b.base_offset for _p, b in _batches(info.records)] == [0]
    assert info.next_offset == 2
    with pytest.raises(CorruptRecordError, match="batch at offset 2 is corrupt") as err:
        log.read(2, 1 << 20)
    assert err.value.error_name == "CORRUPT_MESSAGE"
    assert [b.base_offset for _p, b in _batches(log.read(5, 1 << 20).records)] == [5]
    # the log keeps serving: new appends and reads of them work
    assert log.append_as_leader(build_batch([(b"n", b"new")], timestamp_ms=NOW), 0).first_offset == 6
    assert [b.base_offset for _p, b in _batches(log.read(6, 1 << 20).records)] == [6]


def test_batches_written_by_this_process_are_not_rescanned(tmp_path: Path, monkeypatch) -> None:
    import kraftlog.storage._log_read as log_module

    calls: list[int] = []
    real = log_module.check_stored_batch

    def counting(b: RecordBatch) -> None:
        calls.append(b.base_offset)
        real(b)

    monkeypatch.setattr(log_module, "check_stored_batch", counting)
    log = _log_with_corrupt_batch_on_disk(tmp_path)
    log.read(0, 1 << 20)
    log.read(0, 1 << 20)
    log.read(1, 1 << 20)
    assert calls == [0, 2, 2, 2]  # batch 0 once (then remembered), the corrupt one each time
    log.append_as_leader(build_batch([(b"n", b"new")], timestamp_ms=NOW), 0)
    log.read(6, 1 << 20)
    assert calls == [0, 2, 2, 2]  # appended after load: validated on the way in


def _batches(data: bytes) -> list:
    from kraftlog.storage import iter_batches

    return list(iter_batches(data))
