"""The cleaner threads (`storage.LogCleaner`) and the retention thread of `LogManager`: real logs
in tmp_path, real threads, bounded polls (no fixed sleeps); the throttle with a fake clock."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import storage._cleaner as cleaner_module
from storage import LogConfig, LogManager, RecordBatchBuilder
from storage._log_cleaner import Throttler

COMPACT = frozenset({"compact"})


def wait_for(predicate, timeout_s: float = 10.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def keyed(key: bytes, value: bytes, ts: int | None = None) -> bytes:
    b = RecordBatchBuilder()
    b.append(int(time.time() * 1000) if ts is None else ts, key, value)
    return b.build()


def fill(manager: LogManager, topic: str, records: int = 60, keys: int = 3) -> None:
    """A compacted log of several rolled segments, all below the high watermark."""
    log = manager.get_or_create_log(topic, 0)
    for i in range(records):
        log.append_as_leader(keyed(b"k%d" % (i % keys), b"v%d" % i), 0)
        if i % 10 == 9:
            log.roll()
    log.update_high_watermark(log.log_end_offset)


def new_manager(tmp_path: Path, **cfg: object) -> LogManager:
    cfg.setdefault("cleanup_policy", COMPACT)
    lm = LogManager([tmp_path / "data"], LogConfig(**cfg))
    lm.startup()
    return lm


def test_cleaner_threads_compact_every_dirty_log_in_the_background(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    try:
        for topic in ("a", "b", "c"):
            fill(lm, topic)
        cleaner = lm.start_cleaner(threads=2, backoff_ms=20)
        assert {t.name for t in threading.enumerate()} >= {"kafka-log-cleaner-thread-0", "kafka-log-cleaner-thread-1"}
        logs = [lm.get_log(t, 0) for t in ("a", "b", "c")]
        wait_for(lambda: all(log.cleaner_checkpoint == log.active_segment.base_offset for log in logs), 10,
                 "every log cleaned")
        for log in logs:
            kept = [r.key for b in log.batches() for r in b.records() if r.offset < log.cleaner_checkpoint]
            assert sorted(kept) == [b"k0", b"k1", b"k2"]
        assert cleaner.passes >= 3 and not cleaner.uncleanable
    finally:
        lm.shutdown()
    assert not any(t.name.startswith("kafka-log-cleaner") for t in threading.enumerate())


def test_deleting_a_log_aborts_the_pass_on_it(tmp_path: Path, monkeypatch) -> None:
    lm = new_manager(tmp_path)
    paused, resume = threading.Event(), threading.Event()
    original = cleaner_module._filter_batch

    def filter_and_pause(*args, **kwargs):  # type: ignore[no-untyped-def]
        paused.set()
        resume.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(cleaner_module, "_filter_batch", filter_and_pause)
    try:
        fill(lm, "gone")
        cleaner = lm.start_cleaner(threads=1, backoff_ms=20)
        wait_for(paused.is_set, 10, "the pass to start")
        assert cleaner.is_cleaning(("gone", 0))
        assert lm.delete_log("gone", 0)
        resume.set()
        wait_for(lambda: not cleaner.is_cleaning(("gone", 0)), 10, "the pass to stop")
        assert not cleaner.uncleanable, "an aborted pass is not a failure"
        assert not (tmp_path / "data" / "gone-0").exists()
    finally:
        resume.set()
        lm.shutdown()


def test_a_failing_log_is_marked_uncleanable_and_the_others_go_on(tmp_path: Path, monkeypatch) -> None:
    lm = new_manager(tmp_path)
    original = cleaner_module.clean_log

    def broken_for_bad(log, *args, **kwargs):  # type: ignore[no-untyped-def]
        if log.topic == "bad":
            raise OSError("disk says no")
        return original(log, *args, **kwargs)

    monkeypatch.setattr("storage._log_cleaner.clean_log", broken_for_bad)
    try:
        fill(lm, "bad")
        fill(lm, "good")
        cleaner = lm.start_cleaner(threads=1, backoff_ms=20)
        good = lm.get_log("good", 0)
        wait_for(lambda: good.cleaner_checkpoint == good.active_segment.base_offset, 10, "the good log cleaned")
        wait_for(lambda: cleaner.uncleanable == {("bad", 0)}, 10, "the bad log marked uncleanable")
    finally:
        lm.shutdown()


def test_retention_runs_on_its_own_thread_and_never_overlaps(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 3_600_000
    lm = new_manager(tmp_path, cleanup_policy=frozenset({"delete"}), retention_ms=60_000)
    try:
        log = lm.get_or_create_log("r", 0)
        for i in range(30):
            log.append_as_leader(keyed(b"k", b"v%d" % i, ts=old), 0)
            if i % 10 == 9:
                log.roll()
        log.update_high_watermark(log.log_end_offset)
        assert lm.submit_retention()
        wait_for(lambda: log.log_start_offset == 30, 10, "retention to delete the old segments")
        assert [p.name for p in log.dir.iterdir() if p.name.endswith(".deleted")] == []
        wait_for(lambda: lm.submit_retention(), 10, "the previous run to finish")
    finally:
        lm.shutdown()


def test_throttler_sleeps_when_ahead_of_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    t = Throttler(1000.0, sleep=sleep, monotonic=lambda: now[0], check_interval_s=0.1)
    t(50)
    now[0] += 0.1
    t(450)  # 500 bytes in 0.1 s at 1000 B/s: 0.4 s ahead
    assert slept == [pytest.approx(0.4)]
    unlimited = Throttler(float("inf"), sleep=sleep, monotonic=lambda: now[0])
    unlimited(10**9)
    assert len(slept) == 1 and unlimited.unlimited
