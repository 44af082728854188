"""`ReplicaManager`: the partitions this broker hosts, and the data path of its gRPC service.

Modelled on Kafka's ``ReplicaManager``. It owns the `storage.LogManager` and one `Partition` per
local replica, turns metadata deltas into become-leader / become-follower / stop / delete, and
serves Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords. Requests that must
wait (acks=all, long polls, DeleteRecords) park in purgatories keyed by ``(topic, partition)`` and
are completed by partition events (append, high-watermark advance, follower fetch, leadership
change) or by their own timer — never by polling.

Ordering rules:

- Persist before acknowledge: a produce is answered only after its records are in the leader's log
  (acks=1), or after the high watermark passed them (acks=all: every ISR member has them). Nothing
  acknowledged depends on the HW checkpoint, which is only a lower bound for restart.
- Metadata first: `apply_delta` applies a whole delta synchronously (no request interleaves), and a
  leader that loses leadership fails its pending acks=all at once, before the fetcher starts.
- Files of a deleted topic are removed only after its ``RemoveTopicRecord`` was applied (the delta
  says so); a directory of another incarnation of a topic (different topic id) is deleted before the
  new one is created.
- One bad partition never fails the others: every partition is answered with its own error.

What the server wires: ``alter_partition`` (an `AlterPartitionManager` whose ``send`` reaches the
active controller), ``fetcher_manager`` (a `ReplicaFetcherManager`; optional, `apply_delta` feeds
it), ``startup()`` before the first delta, ``apply_delta(delta, image)`` for every published delta
(pass the image object the next delta is built on), the gRPC handlers (``await produce``,
``await fetch``, ``list_offsets``, ``offset_for_leader_epoch``, ``await delete_records``),
``run_periodic()`` or the ``run_scheduler()`` task (ISR shrink checks, HW checkpoints, retention,
flush, compaction), and ``await shutdown()`` at exit (then shut the AlterPartitionManager down).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraftlog import storage
from kraftlog.broker.replica._metrics import BrokerTopicMetrics
from kraftlog.broker.replica._partition import AlterPartitionSender, Partition, TopicPartition
from kraftlog.broker.replica._produce_pool import ByteBudget, ProducePreparation
from kraftlog.broker.replica._replica_changes import FollowTarget, ReplicaChanges
from kraftlog.broker.replica._replica_metadata import MetadataApplier
from kraftlog.broker.replica._replica_registry import PartitionRegistry, ReplicaPurgatories
from kraftlog.broker.replica._replica_requests import MarkerListener, ReplicaRequests
from kraftlog.broker.replica._replica_types import (
    _LONG_MAX,
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    FetchResult,
    _log,
    _wall_clock_ms,
)
from kraftlog.broker.replica._txn_verification import TxnVerify
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    MetadataDelta,
    MetadataImage,
)
from kraftlog.proto import broker_pb2, errors_pb2

__all__ = ["FollowTarget", "ReplicaChanges", "ReplicaManager", "DelayedProduce", "DelayedFetch", "DelayedDeleteRecords"]


class ReplicaManager:
    """The partitions of this broker and the Produce/Fetch/ListOffsets/... data path.

    ``config`` is the node's `NodeConfig` (``replica.*``, ``min.insync.replicas``,
    ``message.max.bytes`` and the ``log.*`` defaults come from it; topic overrides from the image).
    ``alter_partition`` receives ISR proposals. ``clock_ms`` drives lag and the periodic duties;
    request timeouts use the event loop's timers. ``metrics`` counts bytes and messages in and out
    and ISR changes (a private set when None).

    It holds collaborators that own their state: the `PartitionRegistry` (hosted partitions,
    follow targets, the image), the `ReplicaPurgatories` (parked requests and the partition events
    that complete them), the `MetadataApplier` (the registry's one writer) and the
    `ReplicaRequests` (the data path). What stays here is the lifecycle and the periodic duties.
    """

    def __init__(
        self,
        node_id: int,
        config: NodeConfig,
        log_manager: storage.LogManager,
        alter_partition: AlterPartitionSender,
        *,
        clock_ms: Callable[[], int] | None = None,
        replication_listener: str | None = None,
        client_listener: str | None = None,
        metrics: BrokerTopicMetrics | None = None,
    ) -> None:
        self.node_id = node_id
        self.metrics = metrics if metrics is not None else BrokerTopicMetrics()
        self.config = config
        self.log_manager = log_manager
        self.alter_partition = alter_partition
        self.clock_ms = clock_ms or _wall_clock_ms
        self.fetcher_manager: Any = None  # a ReplicaFetcherManager, set by the server (optional)
        self.replica_lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        # told (topic, partition, producer id, commit) of every transaction marker written and replicated
        self.marker_listeners: list[MarkerListener] = []
        self._last_run: dict[str, int] = {}
        self._log = _log.bind(node_id=node_id)
        listener = config["inter.broker.listener.name"]
        self._registry = PartitionRegistry(node_id, client_listener, self._log)
        self._purgatories = ReplicaPurgatories(self.metrics)
        self._applier = MetadataApplier(
            self._registry,
            self._purgatories,
            log_manager,
            config,
            metrics=self.metrics,
            alter_partition=alter_partition,
            clock_ms=self.clock_ms,
            replication_listener=replication_listener or (listener if isinstance(listener, str) else None),
            log=self._log,
        )
        self.produce_preparation = ProducePreparation(
            int(config["num.io.threads"]),
            int(config["produce.validation.max.bytes"]),
            int(config["produce.validation.max.bytes.per.connection"]),
        )
        self._requests = ReplicaRequests(
            self._registry,
            self._purgatories,
            self.metrics,
            config,
            self.clock_ms,
            self.marker_listeners,
            self.produce_preparation,
        )
        self.produce_purgatory = self._purgatories.produce
        self.fetch_purgatory = self._purgatories.fetch
        self.delete_records_purgatory = self._purgatories.delete_records
        #: told (no arguments) once replicas went offline with their log dir: the lifecycle
        #: heartbeats at once, reporting them (`offline_partitions`)
        self.offline_listeners: list[Callable[[], None]] = []
        #: called with the exit status when every log dir failed (Kafka's Exit.halt)
        self.halt: Callable[[int], None] = os._exit
        self._loop: asyncio.AbstractEventLoop | None = None
        log_manager.dir_failures.subscribe(self._on_log_dir_failure)

    @classmethod
    def create(
        cls,
        node_id: int,
        config: NodeConfig,
        alter_partition: AlterPartitionSender,
        *,
        clock_ms: Callable[[], int] | None = None,
        metrics: BrokerTopicMetrics | None = None,
    ) -> ReplicaManager:
        """A replica manager with a `LogManager` over ``config.log_dirs`` and the topic defaults."""
        default = storage.LogConfig.from_properties(config.topic_defaults())
        lm = storage.LogManager(
            config.log_dirs,
            default,
            clock_ms=clock_ms,
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
        )
        return cls(node_id, config, lm, alter_partition, clock_ms=clock_ms, metrics=metrics)

    # ============================================================== lifecycle

    def startup(self) -> None:
        """Load (and recover) the logs on disk and start the cleaner threads (``log.cleaner.*``).
        Call once, before the first `apply_delta`."""
        self.log_manager.startup()
        if self.config["log.cleaner.enable"]:
            self.log_manager.start_cleaner(
                threads=int(self.config["log.cleaner.threads"]),
                backoff_ms=int(self.config["log.cleaner.backoff.ms"]),
                io_max_bytes_per_second=float(self.config["log.cleaner.io.max.bytes.per.second"]),
            )

    async def shutdown(self, broker_epoch: int = -1) -> None:
        """Stop fetchers, answer every parked request, checkpoint and close the logs (the
        clean-shutdown marker names ``broker_epoch``)."""
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        for _tp, part in list(self._registry.partitions.items()):
            part.stop()
        self._purgatories.shutdown()
        self.produce_preparation.shutdown()
        try:
            self.log_manager.checkpoint_high_watermarks()
        finally:
            self.log_manager.shutdown(broker_epoch)
        self._registry.partitions.clear()
        self._log.info("replica_manager_shut_down")

    # ============================================================== access

    @property
    def image(self) -> MetadataImage:
        return self._registry.image

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._registry.get((topic, partition))

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._registry.partitions)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._registry.partitions.values() if p.is_leader]

    def follow_targets(self) -> dict[TopicPartition, FollowTarget]:
        return dict(self._registry.follow_targets)

    def leader_hint(self, topic: str, pid: int) -> tuple[int, int] | None:
        """``(leader, leader epoch)`` of a partition in the current image (None: no such one)."""
        return self._registry.leader_hint(topic, pid)

    def error_of(self, exc: BaseException | type[kerr.KafkaError], what: str) -> errors_pb2.Error:
        """A partition's error for an answer (an exception that is no Kafka error is logged)."""
        return self._registry.error(exc, what)

    # ============================================================== partition events (`ReplicaPurgatories`)

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        self._purgatories.on_high_watermark_advanced(tp)

    def on_records_appended(self, tp: TopicPartition) -> None:
        self._purgatories.on_records_appended(tp)

    def on_replica_state_changed(self, tp: TopicPartition) -> None:
        self._purgatories.on_replica_state_changed(tp)

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        self._purgatories.on_isr_committed(tp, old_isr, new_isr)

    # ============================================================== metadata (`MetadataApplier`)

    def apply_delta(self, delta: MetadataDelta, image: MetadataImage) -> ReplicaChanges:
        """Apply a published metadata delta (``image`` is ``delta.apply()``; see
        `MetadataApplier.apply`). The fetcher manager, when set, gets the changes before this
        returns."""
        changes = self._applier.apply(delta, image)
        if self.fetcher_manager is not None:
            self.fetcher_manager.apply_changes(changes)
        return changes

    # ============================================================== requests (`ReplicaRequests`)

    async def produce(
        self, req: broker_pb2.ProduceRequest, connection: ByteBudget | None = None
    ) -> broker_pb2.ProduceResponse:
        """See `ReplicaRequests.produce`; ``connection``: the produce budget of the caller's
        connection (`ProducePreparation.connection_budget`)."""
        return await self._requests.produce(req, connection)

    async def fetch(self, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        """See `ReplicaRequests.fetch`."""
        return await self._requests.fetch(req)

    async def fetch_results(self, req: broker_pb2.FetchRequest, *, zero_copy: bool = False) -> list[FetchResult]:
        """See `ReplicaRequests.fetch_results`."""
        return await self._requests.fetch_results(req, zero_copy=zero_copy)

    def list_offsets(self, req: broker_pb2.ListOffsetsRequest) -> broker_pb2.ListOffsetsResponse:
        """See `ReplicaRequests.list_offsets`."""
        return self._requests.list_offsets(req)

    def offset_for_leader_epoch(
        self, req: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        """See `ReplicaRequests.offset_for_leader_epoch`."""
        return self._requests.offset_for_leader_epoch(req)

    async def append_internal(
        self, topic: str, partition: int, records: bytes, timeout_ms: int
    ) -> type[kerr.KafkaError] | None:
        """See `ReplicaRequests.append_internal`."""
        return await self._requests.append_internal(topic, partition, records, timeout_ms)

    def set_txn_verify(self, verify: TxnVerify | None) -> None:
        """How produce asks a transaction coordinator (KIP-890, see `_txn_verification`)."""
        self._requests.txn_verify = verify

    async def write_txn_markers(self, req: broker_pb2.WriteTxnMarkersRequest) -> broker_pb2.WriteTxnMarkersResponse:
        """See `ReplicaRequests.write_txn_markers`."""
        return await self._requests.write_txn_markers(req)

    def describe_producers(self, req: broker_pb2.DescribeProducersRequest) -> broker_pb2.DescribeProducersResponse:
        """See `ReplicaRequests.describe_producers`."""
        return self._requests.describe_producers(req)

    async def delete_records(self, req: broker_pb2.DeleteRecordsRequest) -> broker_pb2.DeleteRecordsResponse:
        """See `ReplicaRequests.delete_records`."""
        return await self._requests.delete_records(req)

    # ============================================================== failed log dirs

    def offline_partitions(self) -> dict[str, list[int]]:
        """The replicas whose log dir went offline, by topic id (for the broker heartbeat)."""
        out: dict[str, list[int]] = {}
        for (_topic, pid), topic_id in sorted(self._registry.offline.items()):
            out.setdefault(topic_id, []).append(pid)
        return out

    def bind_event_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop a failed log dir is handled on (the server's; `run_scheduler` binds its own)."""
        self._loop = loop

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        """The channel's callback, on whichever thread failed the write: the work runs on the
        event loop (the registry's one writer) when the scheduler runs, else here."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.handle_log_dir_failure, log_dir)
        else:
            self.handle_log_dir_failure(log_dir)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: stop serving (and fetching) every replica
        of ``log_dir``, close their logs, and tell the controller through the next heartbeat,
        which moves their leaderships and takes this broker out of their ISRs. The broker keeps
        serving its other dirs. With no live dir left it halts, as Kafka does ("all log dirs
        have failed"); a dir comes back only with a restart."""
        changes = ReplicaChanges()
        for tp in [tp for tp in self._registry.partitions if self.log_manager.dir_of(*tp) == log_dir]:
            self._applier.take_offline(tp, changes)
        self.log_manager.take_dir_offline(log_dir)
        if self.fetcher_manager is not None:
            self.fetcher_manager.apply_changes(changes)
        self._log.error("log_dir_failure_handled", log_dir=str(log_dir), offline_replicas=len(changes.stopped))
        if not self.log_manager.live_dirs():
            self._log.critical("halting_all_log_dirs_failed", log_dirs=[str(d) for d in self.log_manager.log_dirs])
            self.halt(1)
            return
        for listener in list(self.offline_listeners):
            listener()

    # ============================================================== periodic duties

    def maybe_shrink_isr(self, now_ms: int | None = None) -> int:
        """Propose ISR shrinks for every led partition with lagging followers; returns how many."""
        now = self.clock_ms() if now_ms is None else now_ms
        return sum(1 for p in list(self._registry.partitions.values()) if p.is_leader and p.maybe_shrink_isr(now))

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` in every log dir."""
        self.log_manager.checkpoint_high_watermarks()

    def _due(self, name: str, interval_ms: int | None, now: int) -> bool:
        if interval_ms is None or interval_ms <= 0 or interval_ms >= _LONG_MAX:
            return False
        last = self._last_run.get(name)
        if last is None:
            self._last_run[name] = now
            return False
        if now - last >= interval_ms:
            self._last_run[name] = now
            return True
        return False

    def _cfg_int(self, key: str) -> int | None:
        value = self.config[key]
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def run_periodic(self, now_ms: int | None = None) -> dict[str, int]:
        """Run the duties that are due at ``now_ms`` (default: the clock); returns what ran.

        - ISR shrink checks every ``replica.lag.time.max.ms / 2``;
        - HW checkpoint every ``replica.high.watermark.checkpoint.interval.ms``;
        - recovery-point / log-start checkpoints every ``log.flush.offset.checkpoint.interval.ms``;
        - retention every ``log.retention.check.interval.ms``, handed to the log manager's
          retention thread (this method does not wait for it; 1 when a run was started);
        - ``flush.ms`` checks every ``log.flush.scheduler.interval.ms`` (when set);
        - idle producers forgotten every ``producer.id.expiration.check.interval.ms``.

        Compaction is not here: the cleaner threads started by `startup` run it on their own
        (``log.cleaner.backoff.ms`` between idle rounds), never on the event loop. The first call
        only starts the intervals.
        """
        now = self.clock_ms() if now_ms is None else now_ms
        ran: dict[str, int] = {}
        if self._due("isr_shrink", max(1, self.replica_lag_time_max_ms // 2), now):
            ran["isr_shrink"] = self.maybe_shrink_isr(now)
        if self._due("hw_checkpoint", self._cfg_int("replica.high.watermark.checkpoint.interval.ms"), now):
            self.checkpoint_high_watermarks()
            ran["hw_checkpoint"] = 1
        if self._due("offset_checkpoint", self._cfg_int("log.flush.offset.checkpoint.interval.ms"), now):
            self.log_manager.checkpoint()
            ran["offset_checkpoint"] = 1
        if self._due("retention", self._cfg_int("log.retention.check.interval.ms"), now):
            ran["retention"] = int(self.log_manager.submit_retention())
        if self._due("flush", self._cfg_int("log.flush.scheduler.interval.ms"), now):
            ran["flush"] = self.log_manager.flush_dirty_logs()
        if self._due("producer_expiration", self._cfg_int("producer.id.expiration.check.interval.ms"), now):
            ran["producer_expiration"] = self.log_manager.remove_expired_producers()
        return ran

    async def run_scheduler(self, tick_ms: int = 100) -> None:
        """Call `run_periodic` every ``tick_ms`` until cancelled (the server runs it as a task)."""
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                self.run_periodic()
            except Exception as err:  # a failing duty must not stop the others
                self._log.error("periodic_duty_failed", error=repr(err), exc_info=err)
            await asyncio.sleep(tick_ms / 1000)
