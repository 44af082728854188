"""Tests of ``kraftlog dump-log`` (`cli._dump_log`) on real logs written by `storage.Log`.

Expected values come from what the test wrote (offsets, codecs, keys, and batch sizes reported by
the append), not from decoding the files again, so the dump is checked against the writer.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

import kraftlog.cli._dump_log_scan as dump_log_scan
from kraftlog.cli.__main__ import main
from kraftlog.storage import (
    AppendOrigin,
    CompressionType,
    ControlRecordType,
    Header,
    Log,
    LogConfig,
    build_batch,
    build_control_batch,
)

TS = 1_700_000_000_000
PRODUCER_ID = 77
SEGMENT = "00000000000000000000"


@dataclass(frozen=True)
class Written:
    """One appended batch as the test wrote it."""

    first: int
    last: int
    position: int
    size: int
    codec: str
    max_timestamp: int


@dataclass(frozen=True)
class BuiltLog:
    dir: Path
    batches: list[Written]

    @property
    def log(self) -> Path:
        return self.dir / f"{SEGMENT}.log"

    @property
    def index(self) -> Path:
        return self.dir / f"{SEGMENT}.index"

    @property
    def timeindex(self) -> Path:
        return self.dir / f"{SEGMENT}.timeindex"

    @property
    def log_size(self) -> int:
        return self.batches[-1].position + self.batches[-1].size


def _data_batches() -> list[tuple[bytes, str, int, AppendOrigin]]:
    """(batch bytes, codec name, max timestamp, origin) in append order."""
    out: list[tuple[bytes, str, int, AppendOrigin]] = []
    a = build_batch(
        [(b"k0", b"v0", [Header("h1", b"x"), Header("h2", None)]), (b"k1", b"v1"), (b"k2", b"v2")], timestamp_ms=TS
    )
    out.append((a, "none", TS, AppendOrigin.CLIENT))
    b = build_batch([(None, b"no-key"), (b"k4", b"v4")], timestamp_ms=TS + 1, compression=CompressionType.GZIP)
    out.append((b, "gzip", TS + 1, AppendOrigin.CLIENT))
    c = build_batch([(b"k5", None), (b"k6", b"v6")], timestamp_ms=TS + 2, compression=CompressionType.SNAPPY)
    out.append((c, "snappy", TS + 2, AppendOrigin.CLIENT))
    d = build_batch([(b"k7", b"v7"), (b"k8", b"v8")], timestamp_ms=TS + 3, compression=CompressionType.LZ4)
    out.append((d, "lz4", TS + 3, AppendOrigin.CLIENT))
    e = build_batch([(b"k9", b"\xff\xfe"), (b"k10", b"v10")], timestamp_ms=TS + 4, compression=CompressionType.ZSTD)
    out.append((e, "zstd", TS + 4, AppendOrigin.CLIENT))
    f = build_batch(
        [(b"t1", b"txn-a"), (b"t2", b"txn-b")],
        timestamp_ms=TS + 5,
        producer_id=PRODUCER_ID,
        producer_epoch=1,
        base_sequence=5,
        is_transactional=True,
    )
    out.append((f, "none", TS + 5, AppendOrigin.CLIENT))
    g = build_control_batch(
        ControlRecordType.COMMIT, producer_id=PRODUCER_ID, producer_epoch=1, coordinator_epoch=7, timestamp_ms=TS + 6
    )
    out.append((g, "none", TS + 6, AppendOrigin.COORDINATOR))
    h = build_batch(
        [(b"t3", b"txn-c")],
        timestamp_ms=TS + 7,
        producer_id=PRODUCER_ID,
        producer_epoch=1,
        base_sequence=7,
        is_transactional=True,
    )
    out.append((h, "none", TS + 7, AppendOrigin.CLIENT))
    i = build_control_batch(
        ControlRecordType.ABORT, producer_id=PRODUCER_ID, producer_epoch=1, coordinator_epoch=8, timestamp_ms=TS + 8
    )
    out.append((i, "none", TS + 8, AppendOrigin.COORDINATOR))
    return out


def _build_log(directory: Path) -> BuiltLog:
    # index.interval.bytes 0: every batch after the first gets index entries.
    log = Log(directory, LogConfig(index_interval_bytes=0))
    written: list[Written] = []
    position = 0
    try:
        for data, codec, max_ts, origin in _data_batches():
            info = log.append_as_leader(data, 0, origin=origin)
            written.append(Written(info.first_offset, info.last_offset, position, info.valid_bytes, codec, max_ts))
            position += info.valid_bytes
    finally:
        log.close()
    return BuiltLog(directory, written)


@pytest.fixture
def built(tmp_path: Path) -> BuiltLog:
    return _build_log(tmp_path / "topic-0")


def _dump(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str], str]:
    code = main(["dump-log", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _batch_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("baseOffset:")]


def _record_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("| offset:")]


def _field(line: str, name: str) -> str:
    match = re.search(rf"(?:^|\s|\|){re.escape(name)}: (\S+)", line)
    assert match, f"{name} not in {line!r}"
    return match.group(1)


# ------------------------------------------------------------------------------------ .log


def test_shallow_dump_prints_every_batch_with_kafka_fields(built: BuiltLog, capsys) -> None:
    code, lines, err = _dump(capsys, built.log)
    assert code == 0, err
    assert lines[0] == f"Dumping {built.log}"
    assert lines[1] == "Log starting offset: 0"
    batches = _batch_lines(lines)
    assert len(batches) == len(built.batches) == len(lines) - 2
    assert not _record_lines(lines)
    for line, w in zip(batches, built.batches, strict=False):
        assert _field(line, "baseOffset") == str(w.first)
        assert _field(line, "lastOffset") == str(w.last)
        assert _field(line, "count") == str(w.last - w.first + 1)
        assert _field(line, "position") == str(w.position)
        assert _field(line, "size") == str(w.size)
        assert _field(line, "compresscodec") == w.codec
        assert _field(line, "CreateTime") == str(w.max_timestamp)
        assert _field(line, "magic") == "2"
        assert _field(line, "isvalid") == "true"
        assert _field(line, "partitionLeaderEpoch") == "0"
        assert _field(line, "deleteHorizonMs") == "-1"
        assert int(_field(line, "crc")) >= 0
    # the field order is Kafka's
    names = re.findall(r"(\w+): ", batches[0])
    assert names == [
        "baseOffset",
        "lastOffset",
        "count",
        "baseSequence",
        "lastSequence",
        "producerId",
        "producerEpoch",
        "partitionLeaderEpoch",
        "isTransactional",
        "isControl",
        "deleteHorizonMs",
        "position",
        "CreateTime",
        "size",
        "magic",
        "compresscodec",
        "crc",
        "isvalid",
    ]
    plain, txn, commit = batches[0], batches[5], batches[6]
    assert "producerId: -1 producerEpoch: -1" in plain
    assert "isTransactional: false isControl: false" in plain
    assert "baseSequence: 5 lastSequence: 6 producerId: 77 producerEpoch: 1" in txn
    assert "isTransactional: true isControl: false" in txn
    assert "isTransactional: true isControl: true" in commit


def test_deep_iteration_prints_records_without_data(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, "--deep-iteration", built.log)
    assert code == 0
    records = _record_lines(lines)
    assert len(records) == built.batches[-1].last + 1
    assert records[0] == (f"| offset: 0 CreateTime: {TS} keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2]")
    assert records[3] == (f"| offset: 3 CreateTime: {TS + 1} keySize: -1 valueSize: 6 sequence: -1 headerKeys: []")
    assert "keySize: 2 valueSize: -1" in records[5]  # the tombstone
    assert [_field(r, "sequence") for r in records[11:13]] == ["5", "6"]
    assert not any("payload:" in r for r in records)
    # control records always show their marker
    assert records[13].endswith("endTxnMarker: COMMIT coordinatorEpoch: 7")
    assert records[15].endswith("endTxnMarker: ABORT coordinatorEpoch: 8")
    # each batch line is followed by exactly its records
    i = 0
    for w in built.batches:
        while not lines[i].startswith("baseOffset:"):
            i += 1
        following = lines[i + 1 : i + 1 + (w.last - w.first + 1)]
        assert [int(_field(r, "offset")) for r in following] == list(range(w.first, w.last + 1))
        i += 1


def test_print_data_log_prints_keys_and_payloads(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, "--print-data-log", built.log)
    assert code == 0
    records = _record_lines(lines)
    assert len(records) == built.batches[-1].last + 1  # implies deep iteration
    assert records[0].endswith("headerKeys: [h1,h2] key: k0 payload: v0")
    assert records[3].endswith("headerKeys: [] payload: no-key")  # no key, no "key:"
    assert "key: k5" in records[5] and "payload:" not in records[5]  # tombstone
    assert records[9].endswith("key: k9 payload: \ufffd\ufffd")  # invalid UTF-8 replaced
    assert records[12].endswith("key: t2 payload: txn-b")
    assert records[13].endswith("endTxnMarker: COMMIT coordinatorEpoch: 7")


def test_dump_of_a_later_segment_starts_at_its_base_offset(tmp_path: Path, capsys) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    try:
        log.append_as_leader(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=TS), 3)
        log.roll()
        log.append_as_leader(build_batch([(b"c", b"3")], timestamp_ms=TS + 1, compression=CompressionType.GZIP), 4)
        second = log.segments[1].log_path
    finally:
        log.close()
    assert second.name == "00000000000000000002.log"
    code, lines, _err = _dump(capsys, "--print-data-log", second)
    assert code == 0
    assert lines[1] == "Log starting offset: 2"
    (batch,) = _batch_lines(lines)
    assert "baseOffset: 2 lastOffset: 2" in batch and "partitionLeaderEpoch: 4" in batch
    assert _record_lines(lines)[0].endswith("key: c payload: 3")


def test_torn_tail_is_reported_not_raised(built: BuiltLog, capsys) -> None:
    extra = build_batch([(b"late", b"x" * 50)], timestamp_ms=TS + 9)
    torn = extra[: len(extra) // 2]
    with open(built.log, "ab") as fh:
        fh.write(torn)
    code, lines, err = _dump(capsys, "--deep-iteration", built.log)
    assert code == 0, err
    assert len(_batch_lines(lines)) == len(built.batches)
    assert lines[-1].startswith(
        f"Found {len(torn)} invalid bytes at the end of {SEGMENT}.log (valid data ends at position {built.log_size}"
    )


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00" * 30,  # zero-filled space, as a crash on some file systems leaves
        b"\x00\x01\x02",  # too short for a batch header
        b"\x00" * 8 + struct.pack(">i", 5) + b"z" * 60,  # a length below the header size
    ],
    ids=["zeros", "short", "bad-length"],
)
def test_garbage_tail_is_reported(built: BuiltLog, capsys, tail: bytes) -> None:
    with open(built.log, "ab") as fh:
        fh.write(tail)
    code, lines, _err = _dump(capsys, built.log)
    assert code == 0
    assert len(_batch_lines(lines)) == len(built.batches)
    assert lines[-1].startswith(f"Found {len(tail)} invalid bytes at the end of {SEGMENT}.log")


def test_bad_crc_marks_the_batch_invalid_and_goes_on(built: BuiltLog, capsys) -> None:
    data = bytearray(built.log.read_bytes())
    w = built.batches[0]
    data[w.position + w.size - 1] ^= 0xFF  # last byte of the first batch's (uncompressed) records
    built.log.write_bytes(bytes(data))
    code, lines, _err = _dump(capsys, "--deep-iteration", built.log)
    assert code == 0
    batches = _batch_lines(lines)
    assert len(batches) == len(built.batches)
    assert _field(batches[0], "isvalid") == "false"
    assert all(_field(b, "isvalid") == "true" for b in batches[1:])
    assert not any(line.startswith("Found") for line in lines)


def test_max_bytes_limits_the_read(built: BuiltLog, capsys) -> None:
    limit = built.batches[2].position + built.batches[2].size + 10  # 3 batches and a bit
    code, lines, _err = _dump(capsys, "--max-bytes", str(limit), built.log)
    assert code == 0
    assert [int(_field(b, "baseOffset")) for b in _batch_lines(lines)] == [0, 3, 5]
    assert not any(line.startswith("Found") for line in lines)  # not corruption
    code, lines, _err = _dump(capsys, "--max-bytes", "0", built.log)
    assert code == 0 and not _batch_lines(lines)


@pytest.mark.parametrize("chunk", [61, 150, 400])
@pytest.mark.parametrize("flags", [[], ["--print-data-log"]], ids=["shallow", "deep"])
def test_small_read_chunks_give_the_same_output(
    built: BuiltLog, capsys, monkeypatch, chunk: int, flags: list[str]
) -> None:
    with open(built.log, "ab") as fh:
        fh.write(b"\x00\x00\x00")  # a torn tail too, to cross the end in every chunking
    _code, expected, _err = _dump(capsys, *flags, built.log)
    monkeypatch.setattr(dump_log_scan, "_CHUNK_BYTES", chunk)
    code, lines, _err = _dump(capsys, *flags, built.log)
    assert code == 0
    assert lines == expected


def test_several_files_in_one_call(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, built.log, built.index, built.timeindex)
    assert code == 0
    assert [line for line in lines if line.startswith("Dumping")] == [
        f"Dumping {built.log}",
        f"Dumping {built.index}",
        f"Dumping {built.timeindex}",
    ]


# ----------------------------------------------------------------------------------- indexes


def test_offset_index_dump(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, built.index)
    assert code == 0
    assert lines[0] == f"Dumping {built.index}"
    # interval 0: an entry for every batch but the first, naming its last offset and position
    assert lines[1:] == [f"offset: {w.last} position: {w.position}" for w in built.batches[1:]]


def test_time_index_dump(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, built.timeindex)
    assert code == 0
    assert lines[0] == f"Dumping {built.timeindex}"
    assert lines[1:] == [f"timestamp: {w.max_timestamp} offset: {w.last}" for w in built.batches[1:]]


def test_verify_good_indexes(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, "--verify-index-only", built.index, built.timeindex)
    assert code == 0
    n = len(built.batches) - 1
    assert lines == [
        f"Dumping {built.index}",
        f"Index {built.index} is consistent with {built.log} ({n} entries checked)",
        f"Dumping {built.timeindex}",
        f"Index {built.timeindex} is consistent with {built.log} ({n} entries checked)",
    ]


def _rewrite_index_entry(path: Path, entry: int, fmt: str, **changes: int) -> None:
    data = bytearray(path.read_bytes())
    size = struct.calcsize(fmt)
    first, second = struct.unpack_from(fmt, data, entry * size)
    first = changes.get("first", first)
    second = changes.get("second", second)
    struct.pack_into(fmt, data, entry * size, first, second)
    path.write_bytes(bytes(data))


def test_verify_tampered_offset_index(built: BuiltLog, capsys) -> None:
    # entry 0 names batch 1 (last offset 4); point it at batch 0 instead (last offset 2)
    _rewrite_index_entry(built.index, 0, ">ii", second=built.batches[0].position)
    # entry 2 names batch 3; point it into the middle of batch 3
    _rewrite_index_entry(built.index, 2, ">ii", second=built.batches[3].position + 5)
    code, lines, _err = _dump(capsys, "--verify-index-only", built.index)
    assert code == 1
    assert lines[0] == f"Dumping {built.index}"
    assert f"Mismatches in :{built.index}" in lines
    assert f"  Index offset: {built.batches[1].last}, log offset: {built.batches[0].last}" in lines
    assert (
        f"  Index offset: {built.batches[3].last}, log offset: -1 (position "
        f"{built.batches[3].position + 5}: position is not the start of a batch)"
    ) in lines
    assert not any("consistent" in line for line in lines)


def test_verify_offset_index_out_of_order(built: BuiltLog, capsys) -> None:
    _rewrite_index_entry(built.index, 3, ">ii", first=0)  # relative offset 0 after larger ones
    code, lines, _err = _dump(capsys, "--verify-index-only", built.index)
    assert code == 1
    assert f"Found out of order offset in :{built.index}" in lines
    assert f"  Index offset: 0, Previously indexed offset: {built.batches[3].last}" in lines


def test_verify_tampered_time_index(built: BuiltLog, capsys) -> None:
    w = built.batches[2]  # entry 1 of the time index
    _rewrite_index_entry(built.timeindex, 1, ">qi", first=w.max_timestamp + 1000)
    code, lines, _err = _dump(capsys, "--verify-index-only", built.timeindex)
    assert code == 1
    assert f"Found timestamp mismatch in :{built.timeindex}" in lines
    assert f"  Index timestamp: {w.max_timestamp + 1000}, log timestamp: {w.max_timestamp}" in lines
    # the next entry's timestamp is now lower than this one
    assert f"Found out of order timestamp in :{built.timeindex}" in lines


def test_verify_time_index_offset_not_at_batch_end(built: BuiltLog, capsys) -> None:
    w = built.batches[1]  # entry 0: its offset moved to the batch's first offset
    _rewrite_index_entry(built.timeindex, 0, ">qi", second=w.first)
    code, lines, _err = _dump(capsys, "--verify-index-only", built.timeindex)
    assert code == 1
    assert f"Indexed offset: {w.first}, found log offset: {w.last}" in lines


def test_verify_without_log_fails(built: BuiltLog, capsys) -> None:
    built.log.unlink()
    code, _lines, err = _dump(capsys, "--verify-index-only", built.index)
    assert code == 1
    assert "not found" in err and "Traceback" not in err


def test_torn_index_is_an_error_line(built: BuiltLog, capsys) -> None:
    with open(built.index, "ab") as fh:
        fh.write(b"\x01\x02\x03")
    code, _lines, err = _dump(capsys, built.index)
    assert code == 1
    assert err.strip().count("\n") == 0 and str(built.index) in err


# -------------------------------------------------------------------------------------- JSON


def test_json_output_parses(built: BuiltLog, capsys) -> None:
    with open(built.log, "ab") as fh:
        fh.write(b"\x00" * 7)
    code, lines, _err = _dump(capsys, "--output", "json", "--print-data-log", built.log, built.index, built.timeindex)
    assert code == 0
    assert len(lines) == 3  # one object per file, one per line
    log_obj, index_obj, time_obj = (json.loads(line) for line in lines)

    assert log_obj["file"] == str(built.log) and log_obj["log_starting_offset"] == 0
    assert len(log_obj["batches"]) == len(built.batches)
    first = log_obj["batches"][0]
    assert first["base_offset"] == 0 and first["last_offset"] == 2 and first["count"] == 3
    assert first["compresscodec"] == "none" and first["is_valid"] is True
    assert first["timestamp_type"] == "CreateTime" and first["max_timestamp"] == TS
    assert [b["compresscodec"] for b in log_obj["batches"]] == [w.codec for w in built.batches]
    assert [b["position"] for b in log_obj["batches"]] == [w.position for w in built.batches]
    rec = first["records"][0]
    assert rec == {
        "offset": 0,
        "timestamp_type": "CreateTime",
        "timestamp": TS,
        "key_size": 2,
        "value_size": 2,
        "sequence": -1,
        "header_keys": ["h1", "h2"],
        "key": "k0",
        "payload": "v0",
    }
    assert log_obj["batches"][2]["records"][0]["payload"] is None  # tombstone
    assert log_obj["batches"][6]["records"][0]["end_txn_marker"] == "COMMIT"
    assert log_obj["batches"][6]["records"][0]["coordinator_epoch"] == 7
    assert log_obj["invalid_bytes"] == 7 and log_obj["valid_bytes"] == built.log_size

    assert index_obj["type"] == "offset_index"
    assert index_obj["entries"] == [{"offset": w.last, "position": w.position} for w in built.batches[1:]]
    assert time_obj["type"] == "time_index"
    assert time_obj["entries"] == [{"timestamp": w.max_timestamp, "offset": w.last} for w in built.batches[1:]]


def test_json_verify(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, "--output", "json", "--verify-index-only", built.index)
    assert code == 0
    obj = json.loads(lines[0])
    assert obj["consistent"] is True and obj["mismatches"] == []
    _rewrite_index_entry(built.index, 0, ">ii", second=0)
    code, lines, _err = _dump(capsys, "--output", "json", "--verify-index-only", built.index)
    assert code == 1
    obj = json.loads(lines[0])
    assert obj["consistent"] is False
    assert obj["mismatches"][0]["kind"] == "offset_mismatch"
    assert obj["mismatches"][0]["index_offset"] == built.batches[1].last
    assert obj["mismatches"][0]["log_offset"] == built.batches[0].last


def test_json_of_an_empty_log(tmp_path: Path, capsys) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    path.write_bytes(b"")
    code, lines, _err = _dump(capsys, "--output", "json", path)
    assert code == 0
    obj = json.loads(lines[0])
    assert obj["batches"] == [] and obj["invalid_bytes"] == 0


# ------------------------------------------------------------------------------ user errors


@pytest.mark.parametrize("name", ["missing.log", "notes.txt"])
def test_bad_file_arguments_exit_2_with_one_line(tmp_path: Path, capsys, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".txt"):
        path.write_text("hello")
    code, lines, err = _dump(capsys, path)
    assert code == 2
    assert lines == []
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err


def test_bad_file_stops_before_any_output(built: BuiltLog, capsys) -> None:
    code, lines, _err = _dump(capsys, built.log, built.dir / "missing.index")
    assert code == 2 and lines == []


def test_index_with_unparseable_name_is_a_user_error(built: BuiltLog, capsys) -> None:
    odd = built.dir / "copy.index"
    odd.write_bytes(built.index.read_bytes())
    code, _lines, err = _dump(capsys, odd)
    assert code == 2 and "base offset" in err


def test_log_with_unparseable_name_uses_its_first_batch(tmp_path: Path, built: BuiltLog, capsys) -> None:
    copy = tmp_path / "copy.log"
    copy.write_bytes(built.log.read_bytes())
    code, lines, _err = _dump(capsys, copy)
    assert code == 0 and lines[1] == "Log starting offset: 0"
    assert len(_batch_lines(lines)) == len(built.batches)


def test_negative_max_bytes_is_a_usage_error(built: BuiltLog, capsys) -> None:
    code, _lines, err = _dump(capsys, "--max-bytes", "-1", built.log)
    assert code == 2 and "--max-bytes" in err and err.count("\n") == 1


def test_a_producer_snapshot_dumps_each_producer_as_kafka_does(tmp_path: Path, capsys) -> None:
    from kraftlog.storage import Log, LogConfig, build_batch

    log = Log(tmp_path / "t-0", LogConfig())
    for seq in (0, 2):
        log.append_as_leader(
            build_batch(
                [(b"k", b"a"), (b"k", b"b")], timestamp_ms=1, producer_id=42, producer_epoch=3, base_sequence=seq
            ),
            0,
        )
    log.close()
    (snap,) = (tmp_path / "t-0").glob("*.snapshot")
    assert main(["dump-log", str(snap)]) == 0
    out = capsys.readouterr().out
    assert "producerId: 42 producerEpoch: 3 coordinatorEpoch: -1 currentTxnFirstOffset: None" in out
    assert "firstSequence: 2 lastSequence: 3 lastOffset: 3 offsetDelta: 1" in out
    assert main(["dump-log", str(snap), "--output", "json"]) == 0
    (producer,) = json.loads(capsys.readouterr().out)["producers"]
    assert producer["producer_id"] == 42 and producer["last_sequence"] == 3
    snap.write_bytes(snap.read_bytes()[:-2])
    assert main(["dump-log", str(snap)]) == 1  # a corrupt snapshot is reported, not raised
