"""The group coordinator of a broker: the I/O shell around `GroupShard`s (issue 14).

Every partition of ``__consumer_offsets`` this broker leads has a shard. The shell

- follows leadership from the metadata image: a partition it now leads is *loaded* (its log read
  from the start to the log end and every record replayed; requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS), one it no longer leads is dropped (its parked requests answered
  NOT_COORDINATOR, later ones told NOT_COORDINATOR too);
- appends each call's records to the partition through the replica manager with acks=all and
  ``offsets.commit.timeout.ms``, and only then lets the shard finish what waited on them, so an
  answered commit or assignment is on a majority of the partition's replicas;
- fires the shards' timers (sessions, rebalance and sync timeouts, offsets retention) at their
  deadlines from one task;
- creates ``__consumer_offsets`` on the first FindCoordinator (compacted, ``offsets.topic.*``), as
  Kafka does.

All of it runs on the broker's event loop: a shard is only touched between awaits, so it needs no
lock. A parked request's token is its ``asyncio.Future``.

Ordering: a shard call and the queuing of its records happen in the same loop step (`run` is not a
coroutine), and one appender task per shard writes what is queued, in that order, batched into one
produce, then runs the continuations in order. So the log holds the records in the order the shard
changed, and a record is never written for a shard that was dropped (checked before every write).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common._request_context import spawn
from kraftlog.metadata_log import MetadataImage

from ._group_classic_types import ClassicGroupConfig
from ._group_consumer_types import ConsumerGroupConfig
from ._group_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownGroupRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from ._group_shard import GroupShard, GroupShardConfig, ShardOutcome
from ._internal_topic import append_records, leader_replica, read_log

__all__ = ["GroupCoordinator", "OFFSETS_TOPIC", "ShardUnavailable"]

OFFSETS_TOPIC = "__consumer_offsets"

_log = structlog.get_logger(__name__)


class ShardUnavailable(Exception):
    """This broker cannot serve the group now: ``error`` says why (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS)."""

    def __init__(self, error: type[kerr.KafkaError]) -> None:
        super().__init__(error.error_name)
        self.error = error


def shard_config(config: Any) -> GroupShardConfig:
    """The shard settings from the broker config (Kafka's key names)."""
    return GroupShardConfig(
        classic=ClassicGroupConfig(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
        ),
        consumer=ConsumerGroupConfig(
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            max_size=config["group.consumer.max.size"],
            assignors=tuple(config["group.consumer.assignors"]) or ("uniform",),
        ),
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
    )


class GroupCoordinator:
    """Shards of the ``__consumer_offsets`` partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        *,
        replicas: Callable[[], Any],
        create_offsets_topic: Callable[[int, int, dict[str, str]], Awaitable[None]],
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        rng: random.Random | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._replicas = replicas
        self._create_topic = create_offsets_topic
        self._clock_ms = clock_ms
        self._rng = rng or random.Random()
        self._shard_config = shard_config(config)
        self._shards: dict[int, GroupShard] = {}
        self._epochs: dict[int, int] = {}  # partition -> leader epoch the shard was loaded for
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._creating = False
        self._stopped = False
        # by shard, not partition: a reloaded partition is a new shard with its own queue
        self._queues: dict[GroupShard, list[ShardOutcome]] = {}  # outcomes waiting to be written
        self._appenders: dict[GroupShard, asyncio.Task[None]] = {}
        self._log = _log.bind(node_id=broker_id)

    # ================================================================ leadership

    def start(self) -> None:
        self._ticker = spawn(self._tick(), name="group-coordinator")

    async def stop(self) -> None:
        self._stopped = True
        for task in [*self._loading.values(), *self._appenders.values()]:
            task.cancel()
        if self._ticker is not None:
            self._ticker.cancel()
        for partition in list(self._epochs):
            self._drop(partition)

    def on_metadata(self, image: MetadataImage) -> None:
        """Load the partitions of ``__consumer_offsets`` this broker now leads, drop the others."""
        if self._stopped:
            return
        topic = image.topics.get_by_name(OFFSETS_TOPIC)
        led: dict[int, int] = {}
        if topic is not None:
            for pid, p in topic.partitions.items():
                if p.leader == self.broker_id:
                    led[pid] = p.leader_epoch
        for pid in [p for p in self._epochs if led.get(p) != self._epochs[p]]:
            self._drop(pid)
        for pid, epoch in led.items():
            if pid not in self._epochs:
                self._epochs[pid] = epoch
                self._loading[pid] = spawn(self._load(pid, epoch), name=f"group-load-{pid}")

    def _drop(self, partition: int) -> None:
        self._epochs.pop(partition, None)
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        shard = self._shards.pop(partition, None)
        if shard is not None:
            now = self._clock_ms()
            for group in list(shard.groups.values()):
                for token, _response in group.mark_dead(now).responses:
                    self._fail(token, kerr.NotCoordinatorError)
            self._log.info("group_partition_unloaded", partition=partition)
        # what was queued for it is never written; its appender finds the shard gone and fails it

    def _reload(self, shard: GroupShard) -> None:
        """The shard's state ran ahead of a write that failed: serve the partition again from
        what its log holds (as Kafka reverts to the last committed state)."""
        partition = shard.partition
        epoch = self._epochs.get(partition)
        if self._shards.get(partition) is not shard or epoch is None or self._stopped:
            return
        self._log.warning("group_partition_reload", partition=partition, epoch=epoch)
        self._drop(partition)
        self._epochs[partition] = epoch
        self._loading[partition] = spawn(self._load(partition, epoch), name=f"group-load-{partition}")

    async def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition from its log start to its log end, then serve it; a load that fails
        is logged and tried again after a second while this broker still leads the partition."""
        while not self._stopped and self._epochs.get(partition) == epoch:
            try:
                shard, records, started = await self._read_partition(partition, epoch)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - a corrupt or unreadable log: retried, not hung
                self._log.error("group_partition_load_failed", partition=partition, epoch=epoch, error=repr(err))
                await asyncio.sleep(1.0)
                continue
            if self._epochs.get(partition) != epoch:
                return
            self._shards[partition] = shard
            self._loading.pop(partition, None)
            self._wake.set()
            self._log.info(
                "group_partition_loaded",
                partition=partition,
                epoch=epoch,
                records=records,
                groups=len(shard.groups),
                ms=self._clock_ms() - started,
            )
            return

    async def _read_partition(self, partition: int, epoch: int) -> tuple[GroupShard, int, int]:
        started = self._clock_ms()
        shard = GroupShard(partition, self._shard_config, self._rng, started)
        records = 0
        p = await leader_replica(self._replicas, OFFSETS_TOPIC, partition, epoch)
        now = self._clock_ms()
        async for entry in read_log(p, self.config["offsets.load.buffer.size"]):
            if entry.marker is not None:
                shard.complete_txn(entry.txn_producer_id, entry.marker)
                continue
            records += 1
            if entry.txn_producer_id >= 0:
                self._replay_txn(shard, entry.txn_producer_id, entry.key, entry.value)
            else:
                self._replay(shard, entry.key, entry.value, now)
        shard.loaded(self._clock_ms())
        return shard, records, started

    def _replay_txn(self, shard: GroupShard, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        """An offset of a transactional batch (TxnOffsetCommit): pending until its marker."""
        if key is None:
            return
        try:
            k = decode_key(key)
            v = decode_value(k, value)
        except kerr.CorruptMessageError as err:
            self._log.warning("group_record_skipped", partition=shard.partition, error=str(err))
            return
        if isinstance(k, OffsetCommitKey) and (v is None or isinstance(v, OffsetCommitValue)):
            shard.replay_txn_offset(producer_id, k, v)

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written (and replicated) into a partition: the offsets that
        producer committed in it there become committed, or are dropped."""
        shard = self._shards.get(partition) if topic == OFFSETS_TOPIC else None
        if shard is not None:
            shard.complete_txn(producer_id, commit)

    def _replay(self, shard: GroupShard, key: bytes | None, value: bytes | None, now_ms: int) -> None:
        if key is None:
            return
        try:
            k = decode_key(key)
            shard.replay(k, decode_value(k, value), now_ms)
        except UnknownGroupRecordError:
            pass  # a record type of a newer version (KIP-848): skipped, as Kafka's loader does
        except kerr.CorruptMessageError as err:
            self._log.warning("group_record_skipped", partition=shard.partition, error=str(err))

    # ================================================================== requests

    def shards(self) -> list[GroupShard]:
        """The loaded shards (ListGroups asks each)."""
        return list(self._shards.values())

    def partition_count(self, image: MetadataImage) -> int:
        topic = image.topics.get_by_name(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        n: int = self.config["offsets.topic.num.partitions"]
        return n

    @staticmethod
    def topic_lookup(image: MetadataImage) -> Callable[[str], tuple[str, int] | None]:
        """Topic name -> (topic id, partition count) in ``image``, for consumer-group assignors."""

        def lookup(name: str) -> tuple[str, int] | None:
            topic = image.topics.get_by_name(name)
            return None if topic is None else (topic.topic_id, len(topic.partitions))

        return lookup

    def shard_for(self, group_id: str, image: MetadataImage) -> GroupShard:
        """The shard of ``group_id`` on this broker, or `ShardUnavailable`."""
        partition = coordinator_partition(group_id, self.partition_count(image))
        shard = self._shards.get(partition)
        if shard is not None:
            return shard
        if partition in self._loading:
            raise ShardUnavailable(kerr.CoordinatorLoadInProgressError)
        raise ShardUnavailable(kerr.NotCoordinatorError)

    async def ensure_offsets_topic(self, image: MetadataImage) -> None:
        """Create ``__consumer_offsets`` (once) when it does not exist yet."""
        if image.topics.get_by_name(OFFSETS_TOPIC) is not None or self._creating:
            return
        self._creating = True
        try:
            await self._create_topic(
                self.config["offsets.topic.num.partitions"],
                self.config["offsets.topic.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
                    "compression.type": "producer",
                },
            )
        finally:
            self._creating = False

    def run(self, shard: GroupShard, call: Callable[[], ShardOutcome]) -> None:
        """Run one shard call and carry out its outcome: answers now, records queued for the
        shard's appender in this same step. A shard that was dropped gets no call (the caller's
        token, if any, is answered NOT_COORDINATOR by the caller); a call that raises is a bug in
        the core, logged, and what it parked answers UNKNOWN_SERVER_ERROR."""
        if self._shards.get(shard.partition) is not shard:
            raise ShardUnavailable(kerr.NotCoordinatorError)
        try:
            out = call()
        except (ShardUnavailable, kerr.KafkaError):
            raise
        except Exception as err:
            self._log.error("group_call_failed", partition=shard.partition, error=repr(err))
            raise ShardUnavailable(kerr.UnknownServerError) from err
        self._execute(shard, out)

    def _execute(self, shard: GroupShard, out: ShardOutcome) -> None:
        for token, response in out.responses:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(response)
        if out.reload:
            self._reload(shard)
            return
        if out.records:
            assert out.append_id is not None
            self._queues.setdefault(shard, []).append(out)
            appender = self._appenders.get(shard)
            if appender is None or appender.done():
                self._appenders[shard] = spawn(self._append_loop(shard), name=f"group-append-{shard.partition}")
        self._wake.set()

    async def _append_loop(self, shard: GroupShard) -> None:
        """Write what is queued for ``shard``, oldest first, one produce per round, then let the
        shard finish each outcome in order (which may queue more)."""
        partition = shard.partition
        while self._queues.get(shard):
            queued = self._queues[shard]
            # one append per round, of the outcomes at the head written the same way (plain, or
            # in one producer's transaction)
            n = next((i for i, o in enumerate(queued) if o.producer != queued[0].producer), len(queued))
            batch, self._queues[shard] = queued[:n], queued[n:]
            if self._shards.get(partition) is not shard:
                error: type[kerr.KafkaError] | None = kerr.NotCoordinatorError
            else:
                records = [r for out in batch for r in out.records]
                error = await self._append(partition, records, batch[0].producer)
                if self._shards.get(partition) is not shard:
                    error = kerr.NotCoordinatorError
            now = self._clock_ms()
            for out in batch:
                assert out.append_id is not None
                try:
                    follow = shard.on_append(out.append_id, error, now)
                except Exception as err:  # noqa: BLE001 - a core bug: logged, the rest carry on
                    self._log.error("group_append_continuation_failed", partition=partition, error=repr(err))
                    continue
                self._execute(shard, follow)
        self._queues.pop(shard, None)
        if self._appenders.get(shard) is asyncio.current_task():
            del self._appenders[shard]

    async def _append(
        self, partition: int, records: list[Any], producer: tuple[int, int] | None = None
    ) -> type[kerr.KafkaError] | None:
        encoded = [(encode_key(k), None if v is None else encode_value(v)) for k, v in records]
        return await append_records(
            self._replicas(),
            OFFSETS_TOPIC,
            partition,
            encoded,
            timeout_ms=self.config["offsets.commit.timeout.ms"],
            now_ms=self._clock_ms(),
            producer=producer,
        )

    def _fail(self, token: object, error: type[kerr.KafkaError]) -> None:
        if isinstance(token, asyncio.Future) and not token.done():
            token.set_exception(ShardUnavailable(error))

    # ===================================================================== timers

    def _next_deadline(self) -> int | None:
        deadlines = [d for s in self._shards.values() if (d := s.next_deadline()) is not None]
        return min(deadlines, default=None)

    async def _tick(self) -> None:
        while True:
            self._wake.clear()
            deadline = self._next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - self._clock_ms()) / 1000.0)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            now = self._clock_ms()
            for shard in list(self._shards.values()):
                try:
                    self._execute(shard, shard.poll(now))
                except Exception as err:  # noqa: BLE001 - one shard's bug must not stop every timer
                    self._log.error("group_timers_failed", partition=shard.partition, error=repr(err))
