"""A log dir whose writes fail (issue 28, ``disk_full``): the failure takes the whole dir offline
(Kafka's LogDirFailureChannel), once; its logs are closed and forgotten; new logs and the
checkpoints go to the live dirs only; with none left no log can be created."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kraftlog.storage import (
    CLEAN_SHUTDOWN_FILE,
    NO_SPACE_FILE,
    KafkaStorageError,
    LogConfig,
    LogDirFailureChannel,
    LogManager,
    _fault_hooks,
    build_batch,
)

NOW = 1_700_000_000_000


def _batch() -> bytes:
    return build_batch([(b"k", b"value")], timestamp_ms=NOW)


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "faults"
    d.mkdir()
    monkeypatch.setattr(_fault_hooks, "_REREAD_S", 0.0)
    monkeypatch.setattr(_fault_hooks, "_no_space", _fault_hooks._NoSpace(d))
    return d


def test_check_space_fails_only_under_the_listed_dirs(tmp_path: Path, control: Path) -> None:
    full = tmp_path / "a"
    _fault_hooks.check_space(full / "t-0" / "x.log")  # no file: nothing fails
    (control / NO_SPACE_FILE).write_text(f"{full}\n", encoding="utf-8")
    with pytest.raises(OSError) as err:
        _fault_hooks.check_space(full / "t-0" / "x.log")
    assert err.value.errno == errno.ENOSPC
    _fault_hooks.check_space(tmp_path / "ab" / "t-0" / "x.log")  # a sibling whose name starts alike
    (control / NO_SPACE_FILE).unlink()
    _fault_hooks.check_space(full / "t-0" / "x.log")


def test_the_channel_tells_each_subscriber_once_per_dir() -> None:
    channel = LogDirFailureChannel()
    told: list[Path] = []
    channel.subscribe(told.append)
    assert channel.add_offline(Path("/d1"), "ENOSPC")
    assert not channel.add_offline(Path("/d1"), "again")
    assert channel.add_offline(Path("/d2"), "EIO")
    assert told == [Path("/d1"), Path("/d2")]
    assert channel.is_offline(Path("/d1")) and channel.offline_dirs()[Path("/d1")] == "ENOSPC"


def test_a_failed_append_takes_its_dir_offline_and_the_other_dir_serves(tmp_path: Path, control: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = LogManager([a, b], LogConfig(), clock_ms=lambda: NOW)
    lm.startup()
    told: list[Path] = []
    lm.dir_failures.subscribe(told.append)
    in_a = lm.get_or_create_log("t", 0)
    in_b = lm.get_or_create_log("t", 1)
    assert (lm.dir_of("t", 0), lm.dir_of("t", 1)) == (a, b)
    in_a.append_as_leader(_batch(), 0)
    (control / NO_SPACE_FILE).write_text(f"{a}\n", encoding="utf-8")
    with pytest.raises(KafkaStorageError, match="No space left"):
        in_a.append_as_leader(_batch(), 0)
    assert told == [a] and lm.live_dirs() == [b]
    in_b.append_as_leader(_batch(), 0)  # the other dir still takes writes
    assert lm.take_dir_offline(a) == [("t", 0)]
    assert lm.get_log("t", 0) is None and lm.dir_of("t", 0) is None
    assert lm.get_or_create_log("t", 2) is not None and lm.dir_of("t", 2) == b  # new logs: live dirs only
    lm.checkpoint()  # skips the offline dir instead of failing
    lm.shutdown()
    assert (b / CLEAN_SHUTDOWN_FILE).exists() and not (a / CLEAN_SHUTDOWN_FILE).exists()
    # space returns and the node restarts: the dir loads again, its log as it was (recovered)
    (control / NO_SPACE_FILE).unlink()
    again = LogManager([a, b], LogConfig(), clock_ms=lambda: NOW)
    again.startup()
    log = again.get_log("t", 0)
    assert log is not None and log.log_end_offset == 1 and not again.had_clean_shutdown[a]
    again.shutdown()


def test_a_failed_checkpoint_takes_its_dir_offline_and_with_none_left_no_log_is_made(
    tmp_path: Path, control: Path
) -> None:
    a = tmp_path / "a"
    lm = LogManager([a], LogConfig(), clock_ms=lambda: NOW)
    lm.startup()
    (control / NO_SPACE_FILE).write_text(f"{a}\n", encoding="utf-8")
    lm.checkpoint()  # does not raise: the dir goes offline
    assert lm.dir_failures.is_offline(a) and lm.live_dirs() == []
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        lm.get_or_create_log("t", 0)
