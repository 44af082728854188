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
from collections.abc import Callable, Iterable
from typing import Any

from kraftlog import storage
from kraftlog.broker._replica_metadata import _ReplicaMetadata
from kraftlog.broker._replica_requests import _ReplicaRequests
from kraftlog.broker._replica_types import (
    _LONG_MAX,
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    FollowTarget,
    ReplicaChanges,
    _log,
    _wall_clock_ms,
)
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    MetadataImage,
)
from kraftlog.proto import broker_pb2, errors_pb2

from ._metrics import BrokerTopicMetrics
from ._partition import (
    AlterPartitionSender,
    Partition,
    TopicPartition,
    error_pb,
    error_pb_from_exception,
)
from ._purgatory import DelayedOperations

__all__ = ["FollowTarget", "ReplicaChanges", "ReplicaManager", "DelayedProduce", "DelayedFetch", "DelayedDeleteRecords"]


# ------------------------------------------------------------------------------------ results of a delta


# ------------------------------------------------------------------------------------ delayed operations


# ------------------------------------------------------------------------------------ ReplicaManager


class ReplicaManager(_ReplicaMetadata, _ReplicaRequests):
    """The partitions of this broker and the Produce/Fetch/ListOffsets/... data path.

    ``config`` is the node's `NodeConfig` (``replica.*``, ``min.insync.replicas``,
    ``message.max.bytes`` and the ``log.*`` defaults come from it; topic overrides from the image).
    ``alter_partition`` receives ISR proposals. ``clock_ms`` drives lag and the periodic duties;
    request timeouts use the event loop's timers. ``metrics`` counts bytes and messages in and out
    and ISR changes (a private set when None).
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
        listener = config["inter.broker.listener.name"]
        self._replication_listener = replication_listener or (listener if isinstance(listener, str) else None)
        self._client_listener = client_listener
        self._topic_defaults: dict[str, object] = dict(config.topic_defaults())
        self.replica_lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        self._image = MetadataImage.EMPTY
        self._synced = False
        self._partitions: dict[TopicPartition, Partition] = {}
        self._follow_targets: dict[TopicPartition, FollowTarget] = {}
        self.produce_purgatory = DelayedOperations("produce")
        self.marker_listeners = []
        self.fetch_purgatory = DelayedOperations("fetch")
        self.delete_records_purgatory = DelayedOperations("delete_records")
        self._last_run: dict[str, int] = {}
        self._log = _log.bind(node_id=node_id)

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

    async def shutdown(self) -> None:
        """Stop fetchers, answer every parked request, checkpoint and close the logs."""
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        for _tp, part in list(self._partitions.items()):
            part.stop()
        for purgatory in (self.produce_purgatory, self.delete_records_purgatory):
            for key in list(purgatory._watchers):
                purgatory.check_and_complete(key)
            purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        try:
            self.log_manager.checkpoint_high_watermarks()
        finally:
            self.log_manager.shutdown()
        self._partitions.clear()
        self._log.info("replica_manager_shut_down")

    # ============================================================== access

    @property
    def image(self) -> MetadataImage:
        return self._image

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    def follow_targets(self) -> dict[TopicPartition, FollowTarget]:
        return dict(self._follow_targets)

    # ============================================================== partition events

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def on_records_appended(self, tp: TopicPartition) -> None:
        self.fetch_purgatory.check_and_complete(tp)

    def on_replica_state_changed(self, tp: TopicPartition) -> None:
        self.delete_records_purgatory.check_and_complete(tp)

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        self.metrics.record_isr_change(old_isr, new_isr)

    def _check_all_purgatories(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # ============================================================== metadata

    # ============================================================== leader hints

    def _leader_hint(self, topic: str, pid: int) -> tuple[int, int] | None:
        t = self._image.topics.get_by_name(topic)
        reg = None if t is None else t.partition(pid)
        if reg is None:
            return None
        return reg.leader, reg.leader_epoch

    def _node_endpoints(self, broker_ids: Iterable[int]) -> list[broker_pb2.NodeEndpoint]:
        out = []
        for b in sorted(set(broker_ids)):
            reg = self._image.cluster.broker(b)
            if reg is None or not reg.endpoints:
                continue
            ep = (reg.endpoint(self._client_listener) if self._client_listener else None) or reg.endpoints[0]
            out.append(broker_pb2.NodeEndpoint(node_id=b, host=ep.host, port=ep.port, rack=reg.rack or ""))
        return out

    def _error(self, exc: BaseException | type[kerr.KafkaError], what: str) -> errors_pb2.Error:
        if isinstance(exc, type):
            return error_pb(exc, exc.__doc__.strip().splitlines()[0] if exc.__doc__ else "")
        if getattr(exc, "error_code", None) is None:
            self._log.error("unexpected_error", what=what, error=repr(exc), exc_info=exc)
        return error_pb_from_exception(exc)

    def _lookup_error(self, topic: str, pid: int) -> kerr.KafkaError:
        hint = self._leader_hint(topic, pid)
        if hint is None:
            return kerr.UnknownTopicOrPartitionError(f"this server does not host {topic}-{pid}")
        return kerr.NotLeaderOrFollowerError(
            f"broker {self.node_id} is not the leader of {topic}-{pid}", leader_id=hint[0], leader_epoch=hint[1]
        )

    def _leader_partition(self, topic: str, pid: int) -> Partition:
        part = self._partitions.get((topic, pid))
        if part is not None and part.is_leader:
            return part
        raise self._lookup_error(topic, pid)

    def _hosted_partition(self, topic: str, pid: int) -> Partition:
        part = self._partitions.get((topic, pid))
        if part is None:
            raise self._lookup_error(topic, pid)
        return part

    # ============================================================== produce

    # ============================================================== fetch

    # ============================================================== offsets

    # ============================================================== delete records

    # ============================================================== periodic duties

    def maybe_shrink_isr(self, now_ms: int | None = None) -> int:
        """Propose ISR shrinks for every led partition with lagging followers; returns how many."""
        now = self.clock_ms() if now_ms is None else now_ms
        return sum(1 for p in list(self._partitions.values()) if p.is_leader and p.maybe_shrink_isr(now))

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
        while True:
            try:
                self.run_periodic()
            except Exception as err:  # a failing duty must not stop the others
                self._log.error("periodic_duty_failed", error=repr(err), exc_info=err)
            await asyncio.sleep(tick_ms / 1000)
