"""`LogCleaner`: the cleaner threads that compact logs off the broker's event loop (Kafka's
``LogCleaner`` with ``log.cleaner.threads`` ``CleanerThread``s).

Each thread loops: take the dirtiest compacted log that no other thread is cleaning (dirty ratio
at least ``min.cleanable.dirty.ratio``, or a record overdue by ``max.compaction.lag.ms``), run one
`clean_log` pass on it, and when no log needs cleaning wait ``log.cleaner.backoff.ms``. A pass holds
the log's lock only to plan and to swap segments (see `_cleaner`), so produce, fetch and the
broker's heartbeats go on while it reads and rewrites gigabytes.

Ordering rules:

- At most one pass per log at a time (the in-progress set), whichever thread or caller runs it.
- `abort` (a log being deleted) makes the pass in progress stop at its next batch; a pass whose
  log was truncated, shrunk by retention or closed meanwhile installs nothing (the swap refuses).
- An unexpected error marks the log uncleanable (as Kafka does) so one bad log cannot make a
  thread fail in a loop; the other logs go on being cleaned.
- `shutdown` asks every pass to stop and joins the threads before the logs are closed.

``log.cleaner.io.max.bytes.per.second`` throttles the bytes a thread reads and writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from kraftlog.common import SYSTEM_CLOCK
from kraftlog.storage._cleaner import CleanerStats, CleaningAbortedError, clean_log, dirty_ratio
from kraftlog.storage._log import Log

__all__ = ["LogCleaner", "Throttler"]

_log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]


class Throttler:
    """Keeps a thread's I/O under ``bytes_per_second`` by sleeping once it is ahead (Kafka's
    ``Throttler``); unlimited when the rate is infinite or not positive."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        sleep: Callable[[float], None] = SYSTEM_CLOCK.sleep,
        monotonic: Callable[[], float] = SYSTEM_CLOCK.monotonic_s,
        check_interval_s: float = 0.3,
    ) -> None:
        self.rate = bytes_per_second
        self._sleep = sleep
        self._monotonic = monotonic
        self._interval = check_interval_s
        self._start = monotonic()
        self._bytes = 0

    @property
    def unlimited(self) -> bool:
        return not (0 < self.rate < float("inf")) or self.rate >= 1.7e308

    def __call__(self, num_bytes: int) -> None:
        if self.unlimited:
            return
        self._bytes += num_bytes
        elapsed = self._monotonic() - self._start
        if elapsed < self._interval:
            return
        ahead = self._bytes / self.rate - elapsed
        if ahead > 0:
            self._sleep(ahead)
        self._start = self._monotonic()
        self._bytes = 0


class LogCleaner:
    """Compacts the logs ``logs()`` returns, on ``threads`` daemon threads (see module docs).

    ``clean_once`` and ``clean_all`` run a pass in the calling thread, under the same one-pass-
    per-log rule (tests, tools, and `LogManager.clean_compacted_logs`).
    """

    def __init__(
        self,
        logs: Callable[[], dict[TopicPartition, Log]],
        *,
        threads: int = 1,
        backoff_ms: int = 15_000,
        clock_ms: Callable[[], int] | None = None,
        io_max_bytes_per_second: float = float("inf"),
    ) -> None:
        self._logs = logs
        self.num_threads = max(0, threads)
        self.backoff_s = max(0, backoff_ms) / 1000.0
        self._clock_ms = clock_ms or SYSTEM_CLOCK.wall_ms
        self.io_max_bytes_per_second = io_max_bytes_per_second
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.passes = 0  # completed passes, for metrics and tests

    # ------------------------------------------------------------------ threads

    def start(self) -> None:
        """Start the cleaner threads (none when ``threads`` is 0)."""
        if self._threads:
            return
        self._stop.clear()
        for i in range(self.num_threads):
            t = threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        _log.info("log_cleaner_started", threads=self.num_threads, backoff_ms=int(self.backoff_s * 1000))

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask every pass to stop and join the threads (before the logs are closed)."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                _log.warning("log_cleaner_thread_did_not_stop", thread=t.name)
        self._threads = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def _run(self) -> None:
        throttle = Throttler(self.io_max_bytes_per_second)
        while not self._stop.is_set():
            try:
                stats = self.clean_once(throttle=throttle)
            except Exception as err:  # clean_once handles per-log errors; this is a bug: back off
                _log.error("log_cleaner_thread_error", error=repr(err), exc_info=err)
                stats = None
            if stats is None:
                self._stop.wait(self.backoff_s)

    # ------------------------------------------------------------------ passes

    def abort(self, tp: TopicPartition) -> None:
        """The log is going away (deleted): a pass in progress on it stops at its next batch, and
        the partition is no longer remembered as uncleanable (a new log of that name starts clean)."""
        with self._lock:
            self._uncleanable.discard(tp)
            if tp in self._in_progress:
                self._aborted.add(tp)

    def is_cleaning(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._in_progress

    @property
    def uncleanable(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)

    def _grab_filthiest(self, now_ms: int, force: bool) -> tuple[TopicPartition, Log] | None:
        best: tuple[float, TopicPartition, Log] | None = None
        for tp, log in self._logs().items():
            with self._lock:
                if tp in self._in_progress or tp in self._uncleanable:
                    continue
            if not log.config.compact:
                continue
            try:
                ratio = 1.0 if force else dirty_ratio(log, now_ms)
            except Exception:  # a closed or broken log: nothing to clean now
                continue
            if ratio is not None and (best is None or ratio > best[0]):
                best = (ratio, tp, log)
        if best is None:
            return None
        _ratio, tp, log = best
        with self._lock:
            if tp in self._in_progress:
                return None  # another thread took it meanwhile; the next round picks again
            self._in_progress.add(tp)
        return tp, log

    def clean_once(self, *, force: bool = False, throttle: Callable[[int], None] | None = None) -> CleanerStats | None:
        """One pass on the dirtiest log that needs one; None when none did (or it was aborted)."""
        grabbed = self._grab_filthiest(self._clock_ms(), force)
        if grabbed is None:
            return None
        tp, log = grabbed
        return self._clean(tp, log, force=force, throttle=throttle)

    def clean_all(self, *, force: bool = False) -> list[CleanerStats]:
        """A pass on every compacted log that needs one (skipping logs being cleaned elsewhere)."""
        out = []
        for tp, log in self._logs().items():
            if not log.config.compact:
                continue
            with self._lock:
                if tp in self._in_progress or tp in self._uncleanable:
                    continue
                self._in_progress.add(tp)
            stats = self._clean(tp, log, force=force, throttle=None)
            if stats is not None:
                out.append(stats)
        return out

    def _clean(
        self, tp: TopicPartition, log: Log, *, force: bool, throttle: Callable[[int], None] | None
    ) -> CleanerStats | None:
        """Run a pass on ``tp`` (already marked in progress), then release it."""
        try:
            stats = clean_log(
                log,
                self._clock_ms(),
                force=force,
                throttle=throttle,
                abort=lambda: self._stop.is_set() or tp in self._aborted,
            )
            if stats is not None:
                with self._lock:
                    self.passes += 1
            return stats
        except CleaningAbortedError as err:
            _log.info("log_cleaning_aborted", topic=tp[0], partition=tp[1], reason=str(err))
            return None
        except Exception as err:
            if tp in self._aborted or self._stop.is_set() or self._logs().get(tp) is not log:
                _log.info("log_cleaning_aborted", topic=tp[0], partition=tp[1], reason=repr(err))
                return None
            with self._lock:
                self._uncleanable.add(tp)
            _log.error("log_cleaning_failed", topic=tp[0], partition=tp[1], error=repr(err), exc_info=err)
            return None
        finally:
            with self._lock:
                self._in_progress.discard(tp)
                self._aborted.discard(tp)
