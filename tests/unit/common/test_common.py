"""The ground floor (`kraftlog.common`): one of each shared helper, and no import of ours."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

import kraftlog.common as common
from kraftlog.common import backoff_ms, fsync_directory, parse_bootstrap_servers

COMMON_DIR = Path(common.__file__).parent


def test_common_imports_no_other_kraftlog_package() -> None:
    for path in sorted(COMMON_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                name = node.module
            elif isinstance(node, ast.Import):
                name = node.names[0].name
            else:
                continue
            if name.startswith("kraftlog"):
                assert name.startswith("kraftlog.common"), f"{path.name} imports {name}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a:1, b:2,", ["a:1", "b:2"]),
        (["a:1,b:2", "c:3"], ["a:1", "b:2", "c:3"]),
        ("[::1]:9092", ["[::1]:9092"]),
        ("host:65535", ["host:65535"]),
    ],
)
def test_bootstrap_servers_accepted(value: str | list[str], expected: list[str]) -> None:
    assert parse_bootstrap_servers(value) == expected


@pytest.mark.parametrize("value", ["", " , ", "host", "host:", ":9092", "host:0", "host:65536", "host:x", "::1:9092"])
def test_bootstrap_servers_refused_with_the_entry_named(value: str) -> None:
    with pytest.raises(ValueError, match="bootstrap server|no bootstrap"):
        parse_bootstrap_servers(value)


def test_backoff_grows_exponentially_is_capped_and_jittered() -> None:
    assert [backoff_ms(a, base_ms=100, max_ms=1000, jitter=0) for a in range(6)] == [100, 200, 400, 800, 1000, 1000]
    rng = random.Random(7)
    waits = [backoff_ms(2, base_ms=100, max_ms=1000, rng=rng) for _ in range(200)]
    assert min(waits) >= 320 and max(waits) <= 480 and len(set(waits)) > 100
    with pytest.raises(ValueError):
        backoff_ms(-1, base_ms=100, max_ms=1000)


def test_fsync_directory_missing(tmp_path: Path) -> None:
    fsync_directory(tmp_path)
    fsync_directory(tmp_path / "gone", missing_ok=True)
    with pytest.raises(FileNotFoundError):
        fsync_directory(tmp_path / "gone")


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    common.atomic_write(target, b"new content", fsync=True)
    assert target.read_bytes() == b"new content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_kafka_uuid_text_round_trips_and_names_bad_input() -> None:
    import uuid

    from kraftlog.common import kafka_uuid, parse_uuid

    u = uuid.UUID("6f1c0b8e-3c1a-4a53-9d2e-0b6c1e2f3a4b")
    assert kafka_uuid(u) == kafka_uuid(str(u)) == "bxwLjjwaSlOdLgtsHi86Sw"
    assert parse_uuid("bxwLjjwaSlOdLgtsHi86Sw") == parse_uuid(str(u)) == u
    assert kafka_uuid("bxwLjjwaSlOdLgtsHi86Sw") == "bxwLjjwaSlOdLgtsHi86Sw"
    for bad in ("", "bxwLjjwaSlOdLgtsHi86S", "bxwLjjwaSlOdLgtsHi86S!", "not-a-uuid"):
        with pytest.raises(ValueError, match="is not a UUID"):
            parse_uuid(bad)
