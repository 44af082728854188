"""`LogManager`: every partition log in a node's log dirs, and the per-directory files.

Per log dir it owns ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` (high watermarks), ``cleaner-offset-checkpoint`` and the
clean-shutdown marker ``.kafka_cleanshutdown``. The marker is written last on a clean shutdown and
removed once the logs are loaded, so its absence at start means "recover from the recovery points".
It holds the broker epoch of the registration that shut down (``{"version": 0, "BrokerEpoch": N}``,
Kafka 3.7+'s content; empty when unknown), which the next registration reports as its previous
broker epoch: the controller keeps a replica in a partition's ELR (KIP-966) only across a clean stop.

Storage runs no timers of its own: the broker calls `flush_dirty_logs`, `cleanup_logs` (or
`submit_retention`, which runs it on the ``kafka-log-retention`` thread), `clean_compacted_logs`
and `checkpoint` on its schedule, with an injectable clock. Compaction runs on the cleaner threads
that `start_cleaner` starts (`LogCleaner`), never on the caller's thread, and `shutdown` stops
them and waits for a retention run before closing the logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import structlog

from kraftlog.common import META_PROPERTIES_FILE, SYSTEM_CLOCK, fsync_directory, private_directory
from kraftlog.storage._checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kraftlog.storage._cleaner import CleanerStats
from kraftlog.storage._config import LogConfig
from kraftlog.storage._errors import InconsistentTopicIdError, KafkaStorageError
from kraftlog.storage._log import Log, parse_topic_partition, partition_dir_name
from kraftlog.storage._log_cleaner import LogCleaner
from kraftlog.storage._log_dir_failure import LogDirFailureChannel

__all__ = [
    "LogManager",
    "MetaProperties",
    "read_meta_properties",
    "write_meta_properties",
    "CLEAN_SHUTDOWN_FILE",
    "META_PROPERTIES_FILE",
]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_DELETE_DIR_SUFFIX = "-delete"
_log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """``meta.properties`` of a KRaft log dir, written by ``kraftlog storage format``."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    path = Path(log_dir) / META_PROPERTIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise KafkaStorageError(f"cannot read {path}: {err}") from err
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    try:
        return MetaProperties(
            cluster_id=props["cluster.id"],
            node_id=int(props["node.id"]),
            directory_id=props.get("directory.id"),
            version=int(props.get("version", "1")),
        )
    except (KeyError, ValueError) as err:
        raise KafkaStorageError(f"malformed {path}: {err}") from err


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    log_dir = Path(log_dir)
    if not log_dir.exists():  # a dir kraftlog creates for the cluster: only its owner enters it (issue 24)
        private_directory(log_dir)
    lines = [f"version={meta.version}", f"cluster.id={meta.cluster_id}", f"node.id={meta.node_id}"]
    if meta.directory_id:
        lines.append(f"directory.id={meta.directory_id}")
    path = log_dir / META_PROPERTIES_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("#\n#" + time.strftime("%a %b %d %H:%M:%S %Z %Y") + "\n" + "\n".join(lines) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_directory(log_dir)


class LogManager:
    """Opens, creates, checkpoints and deletes the partition logs of a node."""

    def __init__(
        self,
        log_dirs: Iterable[str | os.PathLike[str]],
        default_config: LogConfig | None = None,
        *,
        clock_ms: Callable[[], int] | None = None,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.producer_id_expiration_ms = producer_id_expiration_ms
        if not self.log_dirs:
            raise KafkaStorageError("no log dirs configured")
        self.default_config = default_config or LogConfig()
        self._clock_ms = clock_ms or SYSTEM_CLOCK.wall_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._lock = threading.RLock()
        self._started = False
        self.had_clean_shutdown: dict[Path, bool] = {}
        #: the broker epoch the clean-shutdown markers of every log dir agree on; -1 when a dir had
        #: none (an unclean stop) or they name none or differ (read by `startup`)
        self.previous_broker_epoch = -1
        self.cleaner = LogCleaner(self.all_logs, threads=0, clock_ms=self._clock_ms)
        self._retention_pool: ThreadPoolExecutor | None = None
        self._retention_run: Future[int] | None = None
        #: the log dirs that failed a write (Kafka's LogDirFailureChannel); see `take_dir_offline`
        self.dir_failures = LogDirFailureChannel()

    # ------------------------------------------------------------------ startup / shutdown

    def startup(self, configs: Callable[[str], LogConfig] | None = None) -> None:
        """Load every partition directory; recover those of a dir without the clean-shutdown marker.

        ``configs(topic)`` gives each topic's config (default: the manager's default config).
        """
        with self._lock:
            marker_epochs: set[int] = set()
            for d in self.log_dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                except OSError as err:
                    raise KafkaStorageError(f"cannot create log dir {d}: {err}") from err
                marker = d / CLEAN_SHUTDOWN_FILE
                clean = marker.exists()
                self.had_clean_shutdown[d] = clean
                marker_epochs.add(_marker_broker_epoch(marker) if clean else -1)
                recovery = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read()
                starts = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
                hws = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).read()
                cleaner = OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).read()
                for child in sorted(d.iterdir()):
                    if not child.is_dir():
                        continue
                    if child.name.endswith(_DELETE_DIR_SUFFIX):
                        shutil.rmtree(child, ignore_errors=True)  # deletion interrupted by a crash
                        continue
                    try:
                        tp = parse_topic_partition(child.name)
                    except KafkaStorageError:
                        continue
                    cfg = configs(tp[0]) if configs else self.default_config
                    log = Log(
                        child,
                        cfg,
                        log_start_offset=starts.get(tp, 0),
                        recovery_point=recovery.get(tp, 0),
                        high_watermark=hws.get(tp, 0),
                        had_clean_shutdown=clean,
                        clock_ms=self._clock_ms,
                        producer_id_expiration_ms=self.producer_id_expiration_ms,
                    )
                    log.cleaner_checkpoint = max(cleaner.get(tp, 0), log.log_start_offset)
                    log.on_io_error = self._io_error_handler(d)
                    if tp in self._logs:
                        raise KafkaStorageError(f"duplicate log dirs for {tp[0]}-{tp[1]}: {self._dir_of[tp]} and {d}")
                    self._logs[tp] = log
                    self._dir_of[tp] = d
                marker.unlink(missing_ok=True)
                _log.info(
                    "log_dir_loaded",
                    log_dir=str(d),
                    clean_shutdown=clean,
                    partitions=sum(1 for v in self._dir_of.values() if v == d),
                )
            self.previous_broker_epoch = marker_epochs.pop() if len(marker_epochs) == 1 else -1
            self._started = True
            self.checkpoint()

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Stop the cleaner threads and wait for a retention run, then flush and close every log,
        write the checkpoints, then the clean-shutdown marker (naming ``broker_epoch`` when known)."""
        self.cleaner.shutdown()
        if self._retention_pool is not None:
            self._retention_pool.shutdown(wait=True)
            self._retention_pool = None
        with self._lock:
            for log in self._logs.values():
                log.close()
            self.checkpoint()
            for d in self.live_dirs():  # an offline dir gets no marker: it recovers at the next start
                marker = d / CLEAN_SHUTDOWN_FILE
                with open(marker, "w", encoding="utf-8") as fh:
                    if broker_epoch >= 0:
                        fh.write(json.dumps({"version": 0, "BrokerEpoch": broker_epoch}))
                    fh.flush()
                    os.fsync(fh.fileno())
                fsync_directory(d, missing_ok=True)
            self._logs.clear()
            self._dir_of.clear()
            self._started = False

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, topic_id: str | None = None
    ) -> Log:
        """The partition's log, created in the dir holding the fewest partitions if new.

        A directory left by another incarnation of the topic (different topic id) raises
        `InconsistentTopicIdError`: the broker deletes it before re-creating.
        """
        tp = (topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is None:
                live = self.live_dirs()
                if not live:
                    raise KafkaStorageError(f"every log dir is offline: {', '.join(map(str, self.log_dirs))}")
                counts = {d: 0 for d in live}
                for d in self._dir_of.values():
                    counts[d] = counts.get(d, 0) + 1
                target = min(live, key=lambda d: (counts[d], self.log_dirs.index(d)))
                log = Log(
                    target / partition_dir_name(topic, partition),
                    config or self.default_config,
                    had_clean_shutdown=True,
                    clock_ms=self._clock_ms,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                )
                log.on_io_error = self._io_error_handler(target)
                self._logs[tp] = log
                self._dir_of[tp] = target
                fsync_directory(target, missing_ok=True)
            elif config is not None:
                log.update_config(config)
            if topic_id is not None:
                existing = log.read_partition_metadata()
                if existing is None:
                    log.write_partition_metadata(topic_id)
                elif existing != topic_id:
                    raise InconsistentTopicIdError(
                        f"{topic}-{partition} on disk belongs to topic id {existing}, not {topic_id}"
                    )
            return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's files: rename the dir to ``...-delete`` (atomic), then remove it."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            if log is None or d is None:
                return False
            self.cleaner.abort(tp)  # a pass on it stops at its next batch; its swap would refuse anyway
            log.close_without_flush()
            doomed = d / f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{_DELETE_DIR_SUFFIX}"
            try:
                os.replace(log.dir, doomed)
                fsync_directory(d)
            except OSError as err:
                raise KafkaStorageError(f"cannot delete {log.dir}: {err}") from err
            shutil.rmtree(doomed, ignore_errors=True)
            _log.info("log_deleted", topic=topic, partition=partition)
            return True

    # ------------------------------------------------------------------ periodic work

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start, high-watermark and cleaner checkpoints per live
        dir; a dir whose write fails goes offline (the others are still written)."""
        with self._lock:
            for d in self.live_dirs():
                mine = {tp: log for tp, log in self._logs.items() if self._dir_of.get(tp) == d}
                with self._offline_on_io_error(d):
                    OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(
                        {tp: log.recovery_point for tp, log in mine.items()}
                    )
                    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(
                        {tp: log.log_start_offset for tp, log in mine.items() if log.log_start_offset > 0}
                    )
                    OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
                        {tp: log.high_watermark for tp, log in mine.items()}
                    )
                    OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write(
                        {tp: log.cleaner_checkpoint for tp, log in mine.items() if log.config.compact}
                    )

    def checkpoint_high_watermarks(self) -> None:
        with self._lock:
            for d in self.live_dirs():
                with self._offline_on_io_error(d):
                    OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
                        {tp: log.high_watermark for tp, log in self._logs.items() if self._dir_of.get(tp) == d}
                    )

    # ------------------------------------------------------------------ failed log dirs

    def live_dirs(self) -> list[Path]:
        """The log dirs not offline, in configuration order."""
        return [d for d in self.log_dirs if not self.dir_failures.is_offline(d)]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's log (None: no log here)."""
        return self._dir_of.get((topic, partition))

    def take_dir_offline(self, log_dir: Path) -> list[TopicPartition]:
        """Close (without flushing: the disk refuses writes) and forget every log of an offline
        ``log_dir``; returns their partitions. Its files stay as they are for the next start."""
        with self._lock:
            gone = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
            for tp in gone:
                self.cleaner.abort(tp)
                log = self._logs.pop(tp)
                del self._dir_of[tp]
                try:
                    log.close_without_flush()
                except OSError as err:
                    _log.warning("offline_log_close_failed", topic=tp[0], partition=tp[1], error=repr(err))
        _log.warning("log_dir_taken_offline", log_dir=str(log_dir), partitions=len(gone))
        return gone

    def _io_error_handler(self, log_dir: Path) -> Callable[[BaseException], None]:
        def handler(err: BaseException) -> None:
            self.dir_failures.add_offline(log_dir, str(err))

        return handler

    @contextlib.contextmanager
    def _offline_on_io_error(self, log_dir: Path) -> Iterator[None]:
        """A `KafkaStorageError` caused by an `OSError` inside takes ``log_dir`` offline and is
        not raised further (the caller goes on with the other dirs)."""
        try:
            yield
        except KafkaStorageError as err:
            if not isinstance(err.__cause__, OSError):
                raise
            self.dir_failures.add_offline(log_dir, str(err))

    def remove_expired_producers(self) -> int:
        """``producer.id.expiration.ms``: forget idle producers in every log; how many went."""
        now = self._clock_ms()
        return sum(log.remove_expired_producers(now) for log in self.all_logs().values())

    def flush_dirty_logs(self) -> int:
        """Flush logs whose ``flush.ms`` has elapsed; returns how many were flushed."""
        return sum(1 for log in self.all_logs().values() if log.maybe_flush())

    def cleanup_logs(self) -> int:
        """Retention for every log; returns the number of segments deleted. A log closed meanwhile
        (deleted, or the broker stopping) is skipped."""
        deleted = 0
        for log in self.all_logs().values():
            try:
                deleted += log.delete_old_segments()
            except KafkaStorageError as err:
                _log.debug("retention_skipped", topic=log.topic, partition=log.partition, reason=str(err))
        return deleted

    def submit_retention(self) -> bool:
        """Run `cleanup_logs` on the ``kafka-log-retention`` thread (Kafka's scheduler task), so
        the caller's thread (the broker's event loop) never waits for it; False when the previous
        run has not finished (runs never overlap)."""
        with self._lock:
            if self._retention_run is not None and not self._retention_run.done():
                return False
            if self._retention_pool is None:
                self._retention_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-log-retention")
            self._retention_run = self._retention_pool.submit(self._retention_task)
            return True

    def _retention_task(self) -> int:
        try:
            return self.cleanup_logs()
        except Exception as err:  # a background task: report, never lose the error silently
            _log.error("retention_failed", error=repr(err), exc_info=err)
            return 0

    def start_cleaner(
        self, *, threads: int = 1, backoff_ms: int = 15_000, io_max_bytes_per_second: float = float("inf")
    ) -> LogCleaner:
        """Start ``log.cleaner.threads`` cleaner threads compacting the logs of this manager."""
        self.cleaner.shutdown()
        self.cleaner = LogCleaner(
            self.all_logs,
            threads=threads,
            backoff_ms=backoff_ms,
            clock_ms=self._clock_ms,
            io_max_bytes_per_second=io_max_bytes_per_second,
        )
        self.cleaner.start()
        return self.cleaner

    def clean_compacted_logs(self) -> list[CleanerStats]:
        """Compact, in the calling thread, every log with ``cleanup.policy`` containing ``compact``
        that is dirty enough and not being cleaned by a cleaner thread right now."""
        return self.cleaner.clean_all()


def _marker_broker_epoch(marker: Path) -> int:
    """The broker epoch a clean-shutdown marker names; -1 for an empty or unreadable one."""
    try:
        value = json.loads(marker.read_text(encoding="utf-8") or "{}").get("BrokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
