"""``kraftlog delete-records`` (issue 25): kafka-delete-records' offset file and the per-partition
report, with the records admin client replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kraftlog.cli import _delete_records
from kraftlog.cli.__main__ import main
from kraftlog.cli._common import UserError
from kraftlog.client import DeletedRecords
from kraftlog.common import errors as kerr


def test_the_offset_file_is_kafkas_format() -> None:
    parsed = _delete_records.parse_offset_json(
        {
            "version": 1,
            "partitions": [{"topic": "a", "partition": 0, "offset": 5}, {"topic": "a", "partition": 1, "offset": -1}],
        }
    )
    assert parsed == {("a", 0): 5, ("a", 1): -1}
    assert _delete_records.parse_offset_json({"partitions": [{"topic": "b", "partition": 2, "offset": 0}]}) == {
        ("b", 2): 0
    }


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ({"partitions": [{"topic": "a", "partition": 0, "offset": -2}]}, "at least -1"),
        ({"partitions": [{"topic": "a", "partition": 0}]}, "'offset'"),
        ({"partitions": [{"topic": "", "partition": 0, "offset": 1}]}, "'topic'"),
        ({"partitions": [{"topic": "a", "partition": True, "offset": 1}]}, "'partition'"),
        ({"partitions": [{"topic": "a", "partition": 0, "offset": 1}] * 2}, "duplicate partitions: a-0"),
        ({"partitions": []}, "empty"),
        ({"version": 2, "partitions": [{"topic": "a", "partition": 0, "offset": 1}]}, "version 2"),
        ([], "'partitions' list"),
    ],
)
def test_a_bad_offset_file_is_refused_naming_the_problem(content: Any, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        _delete_records.parse_offset_json(content)


class _FakeRecordsAdmin:
    def __init__(self, answer: dict[tuple[str, int], DeletedRecords]) -> None:
        self.answer = answer
        self.asked: list[tuple[dict[tuple[str, int], int], int]] = []

    def delete_records(self, offsets: dict[tuple[str, int], int], *, timeout_ms: int) -> Any:
        self.asked.append((dict(offsets), timeout_ms))
        return self.answer

    def close(self) -> None:
        pass


def _run(monkeypatch, tmp_path: Path, answer: Any, *extra: str) -> tuple[int, _FakeRecordsAdmin]:
    admin = _FakeRecordsAdmin(answer)
    monkeypatch.setattr(_delete_records, "make_records_admin", lambda servers, **kw: admin)
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 7}]}))
    code = main(["delete-records", "--bootstrap-server", "h:1", "--offset-json-file", str(path), *extra])
    return code, admin


def test_the_report_is_kafkas_and_json_on_request(monkeypatch, tmp_path: Path, capsys) -> None:
    code, admin = _run(monkeypatch, tmp_path, {("t", 0): DeletedRecords(7)})
    assert code == 0 and admin.asked == [({("t", 0): 7}, 30_000)]
    out = capsys.readouterr().out
    assert "Records delete operation completed:" in out and "partition: t-0\tlow_watermark: 7" in out
    code, _ = _run(monkeypatch, tmp_path, {("t", 0): DeletedRecords(7)}, "--output", "json")
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "partitions": [{"topic": "t", "partition": 0, "low_watermark": 7, "error": None}]
    }


def test_a_failed_partition_is_reported_and_exits_1(monkeypatch, tmp_path: Path, capsys) -> None:
    failed = DeletedRecords(-1, kerr.OffsetOutOfRangeError("past the high watermark 3"))
    code, _ = _run(monkeypatch, tmp_path, {("t", 0): failed}, "--output", "json")
    assert code == 1
    captured = capsys.readouterr()
    entry = json.loads(captured.out)["partitions"][0]
    assert entry["low_watermark"] is None and entry["error"]["name"] == "OFFSET_OUT_OF_RANGE"
    assert "t-0" in captured.err and "OFFSET_OUT_OF_RANGE" in captured.err
