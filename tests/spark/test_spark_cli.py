"""``kraftlog snapshot rebuild|diff`` and the tree view of an ``--as-of-time`` snapshot.

The CLI runs in this process, so it finds the tests' SparkSession and leaves it running.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgpack
import pytest
from _loggen import START_MS
from _reference import replay_image, replay_snapshot

from kraftlog.cli.__main__ import main
from kraftlog.metadata_log import (
    ConfigRecord,
    MetadataImage,
    TopicRecord,
    list_segments,
    read_log_dir,
    read_snapshot,
    write_snapshot,
)
from kraftlog.spark import format_time_ms, parse_time_ms
from kraftlog.spark._decode import _SPECS, _fast_entry, _fields


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_rebuild_as_of_time_and_look_at_it_with_metadata_tree(spark, small_log, tmp_path: Path, capsys) -> None:
    at = START_MS + (small_log.last_timestamp_ms - START_MS) // 3
    iso = format_time_ms(at).replace("+00:00", "Z")  # e.g. 2024-05-01T00:03:00.123Z
    out = tmp_path / "incident.checkpoint"
    code, stdout, stderr = _run(
        capsys,
        "snapshot",
        "rebuild",
        "--log",
        str(small_log.directory),
        "--out",
        str(out),
        "--as-of-time",
        iso,
        "--master",
        "local[2]",
        "--output",
        "json",
    )
    assert code == 0, stderr
    report = json.loads(stdout)
    ref = replay_snapshot(small_log.directory, tmp_path / "ref", as_of_time_ms=at)
    assert out.read_bytes() == ref.read_bytes()
    assert report["offset"] == read_snapshot(ref).offset and report["timestamp_ms"] <= at
    assert report["cut"].startswith("last entry at or before 20")

    code, stdout, _ = _run(capsys, "metadata", "tree", "--snapshot", str(out))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0] == f"# metadata image from snapshot {out} at offset {report['offset']} (epoch {report['epoch']})"
    image = replay_image(small_log.directory, as_of_time_ms=at)
    name = sorted(image.topics.by_name)[0]
    topic = image.topics.by_name[name]
    state = json.loads(
        next(line for line in lines if line.startswith(f"/brokers/topics/{name}/partitions/0/state: ")).split(": ", 1)[
            1
        ]
    )
    assert state["leader"] == topic.partitions[0].leader and state["isr"] == list(topic.partitions[0].isr)
    assert sum(1 for line in lines if line.startswith("/brokers/ids/")) == len(image.cluster.brokers)


def test_rebuild_table_output_and_gap_error(spark, log_copy: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "s.checkpoint"
    code, stdout, _ = _run(
        capsys, "snapshot", "rebuild", "--log", str(log_copy), "--out", str(out), "--as-of-offset", "1234"
    )
    assert code == 0
    assert stdout.startswith(f"Wrote {out}\n  offset 1234  epoch ")
    assert f"kraftlog metadata tree --snapshot {out}" in stdout
    segs = list_segments(log_copy)
    last = segs[-1].path
    with open(last, "ab") as fh:
        fh.write(b"\0\0\0")  # a torn frame header at the tail
    code, stdout, stderr = _run(
        capsys, "snapshot", "rebuild", "--log", str(log_copy), "--out", str(out), "--output", "json"
    )
    assert code == 0
    torn = json.loads(stdout)["torn_tails"]
    assert len(torn) == 1 and torn[0]["file"].endswith(last.name)
    assert torn[0]["position"] == last.stat().st_size - 3
    assert f"warning: torn tail in {torn[0]['file']} at position {torn[0]['position']}" in stderr
    segs[2].path.unlink()
    code, stdout, stderr = _run(
        capsys, "snapshot", "rebuild", "--log", str(log_copy), "--out", str(tmp_path / "gap.checkpoint")
    )
    assert code == 1 and not (tmp_path / "gap.checkpoint").exists()
    assert "refusing to write a snapshot past a gap in offsets" in stderr
    assert f"offsets {segs[2].base_offset} to {segs[3].base_offset - 1} are missing" in stderr
    code, stdout, _ = _run(capsys, "snapshot", "rebuild", "--log", str(log_copy), "--out", str(out), "--output", "json")
    error = json.loads(stdout)["error"]
    assert code == 1 and (error["name"], error["code"]) == ("CORRUPT_MESSAGE", 2) and "gap" in error["message"]
    code, _, stderr = _run(capsys, "snapshot", "rebuild", "--log", str(tmp_path / "nowhere"), "--out", str(out))
    assert code == 2 and "no such file or directory" in stderr
    code, _, stderr = _run(
        capsys, "snapshot", "rebuild", "--log", str(log_copy), "--out", str(out), "--as-of-time", "yesterday"
    )
    assert code == 2 and "--as-of-time" in stderr


def test_diff_of_identical_and_differing_snapshots(small_log, tmp_path: Path, capsys) -> None:
    early = replay_snapshot(small_log.directory, tmp_path / "early", as_of_offset=5_000)
    late = replay_snapshot(small_log.directory, tmp_path / "late")
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(late), str(late))
    assert code == 0 and "The snapshots agree." in stdout
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(early), str(late))
    assert code == 1
    assert "provenance" in stdout
    assert "partition" in stdout and "The snapshots differ:" in stdout
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(early), str(late), "--output", "json")
    report = json.loads(stdout)
    assert code == 1 and not report["identical"]
    kinds = {d["kind"] for d in report["differences"]}
    assert {"header", "partition", "broker"} <= kinds
    # same image at another offset: only the header differs
    image = replay_image(small_log.directory)
    moved = write_snapshot(tmp_path / "moved", image.offset + 10, image.epoch, image.timestamp_ms, image.to_records())
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(late), str(moved), "--output", "json")
    assert code == 1 and [d["kind"] for d in json.loads(stdout)["differences"]] == ["header"]
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(late), str(moved), "--ignore-provenance")
    assert code == 0 and "agree (images only)" in stdout


def test_diff_names_every_kind_of_change(tmp_path: Path, capsys) -> None:
    a = MetadataImage.from_records(
        [
            TopicRecord(name="orders", topic_id="id-1"),
            ConfigRecord(2, "orders", "retention.ms", "100"),
            ConfigRecord(4, "", "log.retention.hours", "24"),
        ],
        10,
        2,
        START_MS,
    )
    b = MetadataImage.from_records(
        [
            TopicRecord(name="orders", topic_id="id-2"),  # deleted and re-created
            TopicRecord(name="audit", topic_id="id-3"),
            ConfigRecord(2, "orders", "retention.ms", "200"),
        ],
        10,
        2,
        START_MS,
    )
    fa = write_snapshot(tmp_path / "a", a.offset, a.epoch, a.timestamp_ms, a.to_records())
    fb = write_snapshot(tmp_path / "b", b.offset, b.epoch, b.timestamp_ms, b.to_records())
    code, stdout, _ = _run(capsys, "snapshot", "diff", str(fa), str(fb), "--output", "json")
    assert code == 1
    got = [(d["change"], d["kind"], d["entity"], d["fields"]) for d in json.loads(stdout)["differences"]]
    assert got == [
        ("added", "topic", "audit", {"topic_id": {"a": None, "b": "id-3"}, "partitions": {"a": None, "b": 0}}),
        ("changed", "topic", "orders", {"topic_id": {"a": "id-1", "b": "id-2"}}),
        ("changed", "config", "topic:orders retention.ms", {"value": {"a": "100", "b": "200"}}),
        ("removed", "config", "broker:<default> log.retention.hours", {"value": {"a": "24", "b": None}}),
    ]
    code, _, stderr = _run(capsys, "snapshot", "diff", str(fa), str(tmp_path / "missing"))
    assert code == 2 and "no such file" in stderr


def test_fast_decoding_equals_the_record_classes(small_log) -> None:
    """The decode path of the Spark job builds no dataclasses; it must read exactly what they hold."""
    seen = set()
    for seg in list_segments(small_log.directory):
        data = seg.path.read_bytes()
        from kraftlog.metadata_log.log_files import iter_frames

        entries = iter(read_log_dir(small_log.directory, from_offset=seg.base_offset))
        for _pos, payload in iter_frames(data):
            e = next(entries)
            rec = e.record
            fast = _fast_entry(msgpack.unpackb(payload, raw=False, strict_map_key=False))
            assert fast == (e.offset, e.epoch, e.timestamp_ms, rec.TYPE_ID, _fields(rec.TYPE_ID, rec))
            seen.add(rec.TYPE_ID)
    assert seen == set(_SPECS)
    entry = {"offset": 1, "epoch": 1, "timestamp_ms": 1, "record": {"type": 9, "version": 0, "broker_id": 1}}
    assert _fast_entry(entry) is None  # missing field: decode_entry raises
    entry["record"].update(broker_epoch=3, version=7)
    assert _fast_entry(entry) is None  # newer version: decode_entry raises
    entry["record"]["version"] = 0
    assert _fast_entry(entry) == (1, 1, 1, 9, (1, 3))
    assert _fast_entry({"offset": "x"}) is None and _fast_entry([1]) is None


def test_time_parsing() -> None:
    assert parse_time_ms("2024-05-01T00:00:00Z") == START_MS
    assert parse_time_ms("2024-05-01T02:00:00+02:00") == START_MS
    assert parse_time_ms("2024-05-01 00:00:01") == START_MS + 1000  # no offset: UTC
    assert parse_time_ms(str(START_MS)) == START_MS
    with pytest.raises(ValueError):
        parse_time_ms("03:00 yesterday")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rebuild_shows_spark_stages_on_a_terminal(spark, small_log, tmp_path: Path, monkeypatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    out = tmp_path / "s.checkpoint"
    assert main(["snapshot", "rebuild", "--log", str(small_log.directory), "--out", str(out), "--output", "json"]) == 0
    assert "stage" in terminal.getvalue()  # drawn on stderr (a terminal), erased at the end
