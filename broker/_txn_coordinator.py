"""The transaction coordinator of a broker: the I/O shell around `TxnShard`s (issue 15).

Every partition of ``__transaction_state`` this broker leads has a shard, loaded from the
partition's log when the broker becomes its leader and dropped when it stops leading it (as the
group coordinator does, `_group_coordinator`). The shell appends the shards' records with acks=all
(``transaction.state.log.*``; the topic is created at the first FindCoordinator of a
transactional id), fires their timers, and carries out their marker jobs: a job's COMMIT or ABORT
markers go to every partition's current leader (WriteTxnMarkers, with this coordinator's epoch, the
partition's leader epoch), again and again until each leader took them, and only then is the
transaction completed.

Ordering: a shard call and the queuing of its records happen in one event-loop step; one appender
per shard writes them in that order; marker jobs start only after the record that prepared them
is committed (the shard hands them out from its continuation).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common._request_context import spawn
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import broker_pb2

from ._group_coordinator import ShardUnavailable
from ._internal_topic import append_records, leader_replica, read_records
from ._producer_ids import ProducerIdManager
from ._txn_records import decode_txn, encode_txn_key, encode_txn_value
from ._txn_shard import MarkerJob, TxnOutcome, TxnShard, TxnShardConfig

__all__ = ["TxnCoordinator", "TXN_TOPIC"]

TXN_TOPIC = "__transaction_state"
_log = structlog.get_logger(__name__)
_MARKER_RETRY_S = 0.2
_APPEND_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default, which its coordinator writes with


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
        self._replicas = replicas
        self._image = image
        self._create_topic = create_topic
        self.producer_ids = producer_ids
        self._send_markers = send_markers
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._shard_config = TxnShardConfig(
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
        )
        self._epochs: dict[int, int] = {}
        self._shards: dict[int, TxnShard] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._queues: dict[TxnShard, list[TxnOutcome]] = {}
        self._appenders: dict[TxnShard, asyncio.Task[None]] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._creating = False
        self._stopped = False
        self._log = _log.bind(node_id=broker_id)

    # ================================================================ leadership

    def start(self) -> None:
        self._ticker = spawn(self._tick(), name="txn-coordinator")

    async def stop(self) -> None:
        self._stopped = True
        for task in [*self._loading.values(), *self._appenders.values(), *self._jobs]:
            task.cancel()
        if self._ticker is not None:
            self._ticker.cancel()
        for partition in list(self._epochs):
            self._drop(partition)

    def on_metadata(self, image: MetadataImage) -> None:
        """Load the ``__transaction_state`` partitions this broker now leads, drop the others."""
        if self._stopped:
            return
        topic = image.topics.get_by_name(TXN_TOPIC)
        led = {
            pid: p.leader_epoch for pid, p in (topic.partitions.items() if topic else ()) if p.leader == self.broker_id
        }
        for pid in [p for p in self._epochs if led.get(p) != self._epochs[p]]:
            self._drop(pid)
        for pid, epoch in led.items():
            if pid not in self._epochs:
                self._epochs[pid] = epoch
                self._loading[pid] = spawn(self._load(pid, epoch))

    def _drop(self, partition: int) -> None:
        self._epochs.pop(partition, None)
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        if self._shards.pop(partition, None) is not None:
            self._log.info("txn_partition_unloaded", partition=partition)

    async def _load(self, partition: int, epoch: int) -> None:
        while not self._stopped and self._epochs.get(partition) == epoch:
            try:
                p = await leader_replica(self._replicas, TXN_TOPIC, partition, epoch)
                shard = TxnShard(partition, self._shard_config)
                count = 0
                async for key, value in read_records(p, 5 * 1024 * 1024):
                    if key is None:
                        continue
                    try:
                        k, v = decode_txn(key, value)
                    except kerr.CorruptMessageError as err:
                        self._log.warning("txn_record_skipped", partition=partition, error=str(err))
                        continue
                    shard.replay(k, v)
                    count += 1
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - an unreadable log: retried, not hung
                self._log.error("txn_partition_load_failed", partition=partition, error=repr(err))
                await asyncio.sleep(1.0)
                continue
            if self._epochs.get(partition) != epoch:
                return
            self._shards[partition] = shard
            self._loading.pop(partition, None)
            self._log.info("txn_partition_loaded", partition=partition, epoch=epoch, records=count, ids=len(shard.txns))
            self._execute(shard, shard.loaded())
            self._wake.set()
            return

    # ================================================================== requests

    def partition_count(self, image: MetadataImage) -> int:
        topic = image.topics.get_by_name(TXN_TOPIC)
        n: int = len(topic.partitions) if topic is not None else self.config["transaction.state.log.num.partitions"]
        return n

    def shard_for(self, txn_id: str) -> TxnShard:
        partition = coordinator_partition(txn_id, self.partition_count(self._image()))
        shard = self._shards.get(partition)
        if shard is not None:
            return shard
        if partition in self._loading:
            raise ShardUnavailable(kerr.CoordinatorLoadInProgressError)
        raise ShardUnavailable(kerr.NotCoordinatorError)

    def shards(self) -> list[TxnShard]:
        return list(self._shards.values())

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` (once) when it does not exist yet."""
        if self._image().topics.get_by_name(TXN_TOPIC) is not None or self._creating:
            return
        self._creating = True
        try:
            await self._create_topic(
                self.config["transaction.state.log.num.partitions"],
                self.config["transaction.state.log.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                    "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                    "compression.type": "uncompressed",
                },
            )
        finally:
            self._creating = False

    async def call(self, txn_id: str, invoke: Callable[[TxnShard, object, int], TxnOutcome]) -> Any:
        """Run ``invoke(shard, token, now)`` on the id's shard and wait for its answer."""
        shard = self.shard_for(txn_id)
        token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.run(shard, lambda: invoke(shard, token, self._clock_ms()))
        return await token

    async def init_producer_id(self, txn_id: str, timeout_ms: int) -> tuple[Any, int, int]:
        """InitProducerId with a transactional id: a producer id is fetched first if needed."""
        shard = self.shard_for(txn_id)
        new_pid = await self.producer_ids.generate() if shard.needs_producer_id(txn_id) else -1
        result: tuple[Any, int, int] = await self.call(
            txn_id, lambda s, token, now: s.init_producer_id(txn_id, timeout_ms, token, now, new_pid)
        )
        return result

    def run(self, shard: TxnShard, call: Callable[[], TxnOutcome]) -> None:
        if self._shards.get(shard.partition) is not shard:
            raise ShardUnavailable(kerr.NotCoordinatorError)
        try:
            out = call()
        except kerr.KafkaError:
            raise
        except Exception as err:
            self._log.error("txn_call_failed", partition=shard.partition, error=repr(err))
            raise ShardUnavailable(kerr.UnknownServerError) from err
        self._execute(shard, out)

    def _execute(self, shard: TxnShard, out: TxnOutcome) -> None:
        for token, response in out.responses:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(response)
        if out.records:
            self._queues.setdefault(shard, []).append(out)
            appender = self._appenders.get(shard)
            if appender is None or appender.done():
                self._appenders[shard] = spawn(self._append_loop(shard))
        for job in out.markers:
            task = spawn(self._write_markers(shard, job))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)
        self._wake.set()

    async def _append_loop(self, shard: TxnShard) -> None:
        partition = shard.partition
        while self._queues.get(shard):
            batch, self._queues[shard] = self._queues[shard], []
            error: type[kerr.KafkaError] | None = kerr.NotCoordinatorError
            if self._shards.get(partition) is shard:
                encoded = [
                    (encode_txn_key(k), None if v is None else encode_txn_value(v)) for o in batch for k, v in o.records
                ]
                error = await append_records(
                    self._replicas(),
                    TXN_TOPIC,
                    partition,
                    encoded,
                    timeout_ms=_APPEND_TIMEOUT_MS,
                    now_ms=self._clock_ms(),
                )
                if self._shards.get(partition) is not shard:
                    error = kerr.NotCoordinatorError
            for out in batch:
                assert out.append_id is not None
                try:
                    follow = shard.on_append(out.append_id, error, self._clock_ms())
                except Exception as err:  # noqa: BLE001 - a core bug: logged, the rest carry on
                    self._log.error("txn_continuation_failed", partition=partition, error=repr(err))
                    continue
                self._execute(shard, follow)
        self._queues.pop(shard, None)
        if self._appenders.get(shard) is asyncio.current_task():
            del self._appenders[shard]

    # =================================================================== markers

    async def _write_markers(self, shard: TxnShard, job: MarkerJob) -> None:
        """Write the job's markers into every partition until each leader took them, then let the
        shard complete the transaction. Stops when this broker no longer coordinates the id (the
        next coordinator resumes the job from the prepared state it loads)."""
        delay_ms = shard.retry_delay_ms(job.transactional_id, self._clock_ms())
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000.0)  # the end was just written and failed: back off
        left = set(job.partitions)
        while left and self._shards.get(shard.partition) is shard and not self._stopped:
            image = self._image()
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
                request = _markers_request(job, parts, self._epochs.get(shard.partition, 0))
                try:
                    response = await self._send_markers(leader, request)
                except Exception as err:  # noqa: BLE001 - an unreachable leader: asked again
                    self._log.info("txn_markers_retry", leader=leader, error=repr(err))
                    continue
                for m in response.markers:
                    for answered in m.topics:
                        for p in answered.partitions:
                            if p.error.code == 0:  # a deleted topic is dropped above, from the image
                                left.discard((answered.name, p.partition_index))
            if left:
                await asyncio.sleep(_MARKER_RETRY_S)
        if not left and self._shards.get(shard.partition) is shard:
            self.run(shard, lambda: shard.markers_written(job, self._clock_ms()))

    # ===================================================================== timers

    async def _tick(self) -> None:
        while True:
            self._wake.clear()
            deadlines = [d for s in self._shards.values() if (d := s.next_deadline()) is not None]
            timeout = None if not deadlines else max(0.0, (min(deadlines) - self._clock_ms()) / 1000.0)
            try:
                await asyncio.wait_for(self._wake.wait(), min(timeout, 10.0) if timeout is not None else 10.0)
            except TimeoutError:
                pass
            now = self._clock_ms()
            for shard in list(self._shards.values()):
                try:
                    self._execute(shard, shard.poll(now))
                except Exception as err:  # noqa: BLE001 - one shard's bug must not stop the others
                    self._log.error("txn_timers_failed", partition=shard.partition, error=repr(err))


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
                topics=[R.Topic(name=t, partition_indexes=ps) for t, ps in sorted(by_topic.items())],
            )
        ],
    )
