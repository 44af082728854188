"""The transaction coordinator of a broker: `TxnShard`s on the coordinator runtime (issue 15, 23).

Every partition of ``__transaction_state`` this broker leads has a shard; the runtime
(`kraftlog.broker.coordinator._coordinator_runtime`) loads and drops them as leadership moves, appends their
records with acks=all (``transaction.state.log.*``; the topic is created at the first
FindCoordinator of a transactional id) and fires their timers. What stays here is the marker
writing: a shard's result hands out marker jobs (``jobs``) once the record that prepared them is
committed (or when a loaded shard finds transactions being ended), and each job's COMMIT or ABORT
markers go to every partition's current leader (WriteTxnMarkers, with this coordinator's epoch,
the partition's leader epoch), again and again until each leader took them; only then is the
transaction completed, through the runtime again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kraftlog.broker.coordinator import (
    TXN_TOPIC,
    CoordinatorResult,
    CoordinatorRuntime,
    LogEntry,
    ReplicaPartitionWriter,
    TopicCreator,
)
from kraftlog.broker.txn._producer_ids import ProducerIdManager
from kraftlog.broker.txn._txn_records import decode_txn, encode_txn_key, encode_txn_value
from kraftlog.broker.txn._txn_shard import MarkerJob, TxnOutcome, TxnShard, TxnShardConfig
from kraftlog.common import SYSTEM_CLOCK, coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import broker_pb2

__all__ = ["TxnCoordinator", "TxnShards", "TXN_TOPIC"]

_log = structlog.get_logger(__name__)
_MARKER_RETRY_MS = 200
_APPEND_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default, which its coordinator writes with
_LOAD_CHUNK_BYTES = 5 * 1024 * 1024
TRANSACTION_VERSION = "transaction.version"  # the feature (KIP-890's level 2)


class TxnShards:
    """What the runtime needs to know about transaction shards (its `ShardHandler`)."""

    def __init__(self, config: TxnShardConfig, log: Any, transaction_version: Callable[[], int] = lambda: 0) -> None:
        self._config = config
        self._log = log
        self._transaction_version = transaction_version

    def new_shard(self, partition: int, now_ms: int) -> TxnShard:
        shard = TxnShard(partition, self._config)
        shard.transaction_version = self._transaction_version  # the finalized level, for its own aborts
        return shard

    def encode(self, record: tuple[Any, Any]) -> tuple[bytes, bytes | None]:
        return encode_txn_key(record[0]), None if record[1] is None else encode_txn_value(record[1])

    def replay(self, shard: TxnShard, entry: LogEntry, now_ms: int) -> None:
        if entry.marker is not None or entry.key is None:
            return
        try:
            key, value = decode_txn(entry.key, entry.value)
        except kerr.CorruptMessageError as err:
            self._log.warning("txn_record_skipped", partition=shard.partition, error=str(err))
            return
        shard.replay(key, value)

    def loaded(self, shard: TxnShard, now_ms: int) -> CoordinatorResult:
        """Transactions that were being ended get their markers written again."""
        self._log.info("txn_partition_loaded", partition=shard.partition, ids=len(shard.txns))
        return shard.loaded()

    def unloaded(self, shard: TxnShard, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()  # its callers wait through `CoordinatorRuntime.call`


class TxnCoordinator:
    """Shards of the ``__transaction_state`` partitions this broker leads."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        *,
        replicas: Callable[[], Any],
        image: Callable[[], MetadataImage],
        create_topic: Callable[[int, int, dict[str, str]], Awaitable[None]],
        producer_ids: ProducerIdManager,
        send_markers: Callable[[int, broker_pb2.WriteTxnMarkersRequest], Awaitable[broker_pb2.WriteTxnMarkersResponse]],
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.image = image
        self._topic = TopicCreator(TXN_TOPIC, create_topic)
        self.producer_ids = producer_ids
        self._send_markers = send_markers
        self._clock_ms = clock_ms or SYSTEM_CLOCK.wall_ms
        shard_config = TxnShardConfig(
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
        )
        self._jobs: set[asyncio.Task[None]] = set()
        self._log = _log.bind(node_id=broker_id)
        writer = ReplicaPartitionWriter(
            replicas,
            TXN_TOPIC,
            timeout_ms=lambda: _APPEND_TIMEOUT_MS,
            read_chunk_bytes=lambda: _LOAD_CHUNK_BYTES,
            clock_ms=self._clock_ms,
        )
        self.runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            "txn-coordinator",
            TXN_TOPIC,
            broker_id,
            writer,
            TxnShards(shard_config, self._log, lambda: self.image().features.level(TRANSACTION_VERSION)),
            clock_ms=self._clock_ms,
            on_jobs=self._start_jobs,
        )

    # ================================================================ leadership

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        for task in list(self._jobs):
            task.cancel()
        await self.runtime.stop()

    def on_metadata(self, image: MetadataImage) -> None:
        """Load the ``__transaction_state`` partitions this broker now leads, drop the others."""
        self.runtime.on_metadata(image)

    # ================================================================== requests

    def partition_count(self, image: MetadataImage) -> int:
        topic = image.topics.get_by_name(TXN_TOPIC)
        n: int = len(topic.partitions) if topic is not None else self.config["transaction.state.log.num.partitions"]
        return n

    def _partition(self, txn_id: str) -> int:
        return coordinator_partition(txn_id, self.partition_count(self.image()))

    def shard_for(self, txn_id: str) -> TxnShard:
        return self.runtime.shard(self._partition(txn_id))

    def shards(self) -> list[TxnShard]:
        return self.runtime.shards()

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` (once) when it does not exist yet."""
        await self._topic.ensure(
            self.image(),
            self.config["transaction.state.log.num.partitions"],
            self.config["transaction.state.log.replication.factor"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                "compression.type": "uncompressed",
            },
        )

    async def call(self, txn_id: str, invoke: Callable[[TxnShard, object, int], TxnOutcome]) -> Any:
        """Run ``invoke(shard, token, now)`` on the id's shard and wait for its answer."""
        return await self.runtime.call(self._partition(txn_id), invoke)

    async def init_producer_id(self, txn_id: str, timeout_ms: int) -> tuple[Any, int, int]:
        """InitProducerId with a transactional id: a producer id is fetched first if needed."""
        shard = self.shard_for(txn_id)
        new_pid = await self.producer_ids.generate() if shard.needs_producer_id(txn_id) else -1
        result: tuple[Any, int, int] = await self.call(
            txn_id, lambda s, token, now: s.init_producer_id(txn_id, timeout_ms, token, now, new_pid)
        )
        return result

    def run(self, shard: TxnShard, call: Callable[[], TxnOutcome]) -> None:
        self.runtime.run(shard, call)

    # =================================================================== markers

    def _start_jobs(self, shard: TxnShard, jobs: list[Any]) -> None:
        """Marker jobs the shard handed out: a job whose end was just written and failed waits
        the shard's back-off first."""
        now = self._clock_ms()
        for job in jobs:
            delay_ms = shard.retry_delay_ms(job.transactional_id, now)
            self._next_round(shard, job, set(job.partitions), now + delay_ms)

    def _next_round(self, shard: TxnShard, job: MarkerJob, left: set[tuple[str, int]], at_ms: int) -> None:
        """Send the job's markers to what is ``left`` at ``at_ms`` (a runtime timer), or now."""

        def start() -> None:
            if self.runtime.is_current(shard):
                task = spawn(self._markers_round(shard, job, left), name=f"txn-markers-{shard.partition}")
                self._jobs.add(task)
                task.add_done_callback(self._jobs.discard)

        if at_ms <= self._clock_ms():
            start()
        else:
            self.runtime.call_at(at_ms, start)

    async def _markers_round(self, shard: TxnShard, job: MarkerJob, left: set[tuple[str, int]]) -> None:
        """One round of a job: its markers to the current leader of every partition ``left``.
        Partitions whose leader took them are done; the others are tried again after
        ``_MARKER_RETRY_MS``; when none is left the shard completes the transaction. Nothing more
        happens once this broker no longer coordinates the id (the next coordinator resumes the
        job from the prepared state it loads)."""
        image = self.image()
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for topic, index in sorted(left):
            t = image.topics.get_by_name(topic)
            if t is None or index not in t.partitions:
                left.discard((topic, index))  # deleted meanwhile: nothing to mark
                continue
            leader = t.partitions[index].leader
            if leader >= 0:
                by_leader.setdefault(leader, []).append((topic, index))
        for leader, parts in by_leader.items():
            if not self.runtime.is_current(shard):
                return
            request = _markers_request(job, parts, self.runtime.epoch(shard.partition) or 0)
            try:
                response = await self._send_markers(leader, request)
            except Exception as err:  # noqa: BLE001 - an unreachable leader: asked again
                self._log.info("txn_markers_retry", leader=leader, error=repr(err))
                continue
            for m in response.markers:
                for answered in m.topics:
                    for p in answered.partitions:
                        # a deleted topic is dropped above, from the image; a partition whose
                        # producer epoch is already the marker's (or newer) took this marker
                        # before (an answer lost on the way) or was fenced since: done, as Kafka's
                        # coordinator drops markers refused with INVALID_PRODUCER_EPOCH
                        if p.error.code == 0 or p.error.code == kerr.InvalidProducerEpochError.error_code:
                            left.discard((answered.name, p.partition_index))
        if not self.runtime.is_current(shard):
            return
        if left:
            self._next_round(shard, job, left, self._clock_ms() + _MARKER_RETRY_MS)
        else:
            self.runtime.run(shard, lambda: shard.markers_written(job, self._clock_ms()))


def _markers_request(
    job: MarkerJob, parts: list[tuple[str, int]], coordinator_epoch: int
) -> broker_pb2.WriteTxnMarkersRequest:
    R = broker_pb2.WriteTxnMarkersRequest
    by_topic: dict[str, list[int]] = {}
    for topic, index in parts:
        by_topic.setdefault(topic, []).append(index)
    return R(
        timeout_ms=30_000,
        markers=[
            R.Marker(
                producer_id=job.producer_id,
                producer_epoch=job.producer_epoch,
                transaction_result=job.commit,
                coordinator_epoch=coordinator_epoch,
                transaction_version=job.transaction_version,
                topics=[R.Topic(name=t, partition_indexes=ps) for t, ps in sorted(by_topic.items())],
            )
        ],
    )
