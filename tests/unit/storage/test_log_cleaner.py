"""Cleaning off the log's lock: a pass in progress while other threads append, read, roll and
truncate; the cleaner threads (`storage.LogCleaner`) and the retention thread of `LogManager`.
Real logs in tmp_path, real threads, bounded waits (no fixed sleeps); the throttle with a fake
clock. The log model and checks are `test_cleaner`'s."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from test_cleaner import FakeClock, Model, _one, build_random, check_consistent, latest_per_key, records

import kraftlog.storage._cleaner as cleaner_module
from kraftlog.storage import Log, LogConfig, LogManager, RecordBatchBuilder, clean_log
from kraftlog.storage._log_cleaner import Throttler

COMPACT = frozenset({"compact"})


def wait_for(predicate, timeout_s: float = 10.0, what: str = "condition"):
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
        # this manager's threads (other tests of the same process may have left their own)
        threads = [t for t in threading.enumerate() if t in cleaner._threads]
        assert sorted(t.name for t in threads) == ["kafka-log-cleaner-thread-0", "kafka-log-cleaner-thread-1"]
        logs = [lm.get_log(t, 0) for t in ("a", "b", "c")]
        # a pass moves its log's checkpoint before it returns and is counted: wait for both
        wait_for(
            lambda: (
                all(log.cleaner_checkpoint == log.active_segment.base_offset for log in logs) and cleaner.passes >= 3
            ),
            10,
            "every log cleaned",
        )
        for log in logs:
            kept = [r.key for b in log.batches() for r in b.records() if r.offset < log.cleaner_checkpoint]
            assert sorted(kept) == [b"k0", b"k1", b"k2"]
        assert not cleaner.uncleanable
    finally:
        lm.shutdown()
    assert not any(t.is_alive() for t in threads)


def test_deleting_a_log_aborts_the_pass_on_it(tmp_path: Path, monkeypatch) -> None:
    lm = new_manager(tmp_path)
    paused, resume = threading.Event(), threading.Event()
    original = cleaner_module._filter_batch

    def filter_and_pause(*args, **kwargs):
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

    def broken_for_bad(log, *args, **kwargs):
        if log.topic == "bad":
            raise OSError("disk says no")
        return original(log, *args, **kwargs)

    monkeypatch.setattr("kraftlog.storage._log_cleaner.clean_log", broken_for_bad)
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
        # the files go after the lock is released: wait for them, bounded
        wait_for(
            lambda: not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")],
            10,
            "the deleted segments' files to be removed",
        )
        assert sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".log")) == [f"{30:020d}.log"]
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


# ============================================================================ a pass off the lock


class _PausedPass:
    """Runs `clean_log` in a thread that stops at its first batch rewrite until released, so a
    test can act while a pass is in progress (bounded waits only)."""

    def __init__(self, monkeypatch, log: Log, now: int) -> None:
        import threading

        import kraftlog.storage._cleaner as cleaner

        self.paused, self.resume = threading.Event(), threading.Event()
        original = cleaner._filter_batch

        def filter_and_pause(*args, **kwargs):
            if not self.paused.is_set():
                self.paused.set()
                assert self.resume.wait(20), "the test never released the pass"
            return original(*args, **kwargs)

        monkeypatch.setattr(cleaner, "_filter_batch", filter_and_pause)
        self.result: list[object] = []
        self.thread = threading.Thread(target=self._run, args=(log, now), name="test-cleaner")
        self.thread.start()
        assert self.paused.wait(20), "the pass never reached its rewrite"

    def _run(self, log: Log, now: int) -> None:
        try:
            self.result.append(clean_log(log, now, force=True))
        except BaseException as err:  # noqa: BLE001 - handed to the test
            self.result.append(err)

    def finish(self) -> object:
        self.resume.set()
        self.thread.join(20)
        assert not self.thread.is_alive()
        return self.result[0]


def _in_thread_within(fn, timeout_s: float) -> object:
    """Run ``fn`` in a thread; its result, or AssertionError if it did not finish in time."""
    import threading

    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()), name="test-client")
    t.daemon = True
    t.start()
    t.join(timeout_s)
    assert out, f"blocked for more than {timeout_s} s while a cleaning pass ran"
    return out[0]


def test_appends_reads_and_rolls_go_on_during_a_pass_and_are_not_lost(tmp_path: Path, monkeypatch) -> None:
    """Issue 12: a cleaning pass holds the log's lock only to plan and to swap; produce and fetch
    of the same partition go on meanwhile, and what they append survives the swap."""
    clock = FakeClock()
    m = build_random(tmp_path, clock, segments=6)
    log = m.log
    end = log.active_segment.base_offset
    run = _PausedPass(monkeypatch, log, clock.now)
    appended = []
    for i in range(3):
        info = _in_thread_within(lambda i=i: log.append_as_leader(_one(b"during", b"v%d" % i), 0), 2.0)
        appended.append(info.first_offset)
        m.written[info.first_offset] = (b"during", b"v%d" % i)
    _in_thread_within(log.roll, 2.0)
    first = _in_thread_within(lambda: log.read(0, 1 << 20).records, 2.0)
    assert first
    stats = run.finish()
    assert not isinstance(stats, BaseException), stats
    assert stats is not None and stats.end_offset == end
    after = records(log)
    assert {o for o in after if o < end} == latest_per_key(m.written, end)
    for off in appended:
        assert after[off] == m.written[off], "an append made during the pass was lost"
    assert {o for o in after if o >= end} == {o for o in m.written if o >= end}
    check_consistent(log)


def test_truncation_during_a_pass_makes_it_install_nothing(tmp_path: Path, monkeypatch) -> None:
    clock = FakeClock()
    m = build_random(tmp_path, clock, segments=6)
    log = m.log
    checkpoint = log.cleaner_checkpoint
    cut = log.segments[2].base_offset + 1
    run = _PausedPass(monkeypatch, log, clock.now)
    _in_thread_within(lambda: log.truncate_to(cut), 2.0)
    outcome = run.finish()
    assert isinstance(outcome, Exception) and "changed" in str(outcome), outcome
    assert log.cleaner_checkpoint == checkpoint
    assert max(records(log)) < cut and records(log) == {o: v for o, v in m.written.items() if o < log.log_end_offset}
    assert not any(p.name.endswith((".cleaned", ".swap", ".deleted")) for p in log.dir.iterdir())
    check_consistent(log)


def test_readers_never_see_a_half_swapped_log(tmp_path: Path) -> None:
    """Passes run while another thread appends and a third reads the whole log over and over:
    every read has increasing offsets and holds, for every key, its latest record below the
    read's end (the cleaner only drops superseded records, so a read that misses one saw the log
    between taking the old segments out and putting the cleaned one in)."""
    import threading

    clock = FakeClock(int(time.time() * 1000) + 3_600_000)  # past the mtime of empty cleaned segments
    m = Model(tmp_path / "h-0", clock, segment_bytes=600)
    keys = [f"k{i}".encode() for i in range(5)]
    for i in range(60):
        m.append([(keys[i % 5], b"%d" % i)])
    log = m.log
    log.update_high_watermark(log.log_end_offset)
    written_lock = threading.Lock()
    last_of: dict[bytes, list[int]] = {k: [o for o, (kk, _v) in m.written.items() if kk == k] for k in keys}
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def writer() -> None:
        i = 60
        while not stop.is_set():
            key = keys[i % 5]
            info = log.append_as_leader(_one(key, b"%d" % i, clock.now), 0)
            log.update_high_watermark(info.last_offset + 1)
            with written_lock:
                last_of[key].append(info.first_offset)
            i += 1
            stop.wait(0.001)

    def reader() -> None:
        while not stop.is_set():
            with written_lock:  # offsets known written before this read started
                known = {k: list(v) for k, v in last_of.items()}
            got = [(r.offset, r.key) for b in log.batches() for r in b.records()]
            offsets = [o for o, _k in got]
            if offsets != sorted(set(offsets)):
                problems.append(f"offsets out of order or repeated: {offsets[:20]}")
            end = offsets[-1] + 1 if offsets else 0
            newest = {}
            for o, k in got:
                newest[k] = o
            for k, written in known.items():
                below = [o for o in written if o < end]
                if below and newest.get(k, -1) < max(below):
                    problems.append(f"key {k!r}: latest record {max(below)} missing from a read ending at {end}")
            reads[0] += 1

    threads = [threading.Thread(target=writer, name="w"), threading.Thread(target=reader, name="r")]
    for t in threads:
        t.start()
    try:
        passes = 0
        deadline = time.monotonic() + 20
        while passes < 15 and time.monotonic() < deadline:
            if clean_log(log, clock.now, force=True) is not None:
                passes += 1
            log.roll()
        assert passes >= 5
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert reads[0] > 5
    assert not problems, problems[:3]
    check_consistent(log)
