"""What the coordinators share about the internal topic partitions they keep their state in
(``__consumer_offsets``, ``__transaction_state``): waiting until the local replica leads at the
epoch the metadata named, reading a partition's records from its start to its end (a load), and
appending records to it with acks=all through the replica manager (`ReplicaPartitionWriter`, the
coordinator runtime's partition writer)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import structlog

from kraftlog.common import OFFSETS_TOPIC, TXN_TOPIC
from kraftlog.common import errors as kerr
from kraftlog.common.records import ControlRecordType, RecordBatchBuilder, iter_batches

__all__ = [
    "OFFSETS_TOPIC",
    "TXN_TOPIC",
    "leader_replica",
    "read_log",
    "append_records",
    "LogEntry",
    "ReplicaPartitionWriter",
    "TopicCreator",
]

_log = structlog.get_logger(__name__)


async def leader_replica(replicas: Callable[[], Any], topic: str, partition: int, epoch: int) -> Any:
    """The local replica of ``topic``-``partition`` once the replica manager made it the leader
    at ``epoch`` or later (it applies the metadata a moment after the coordinator heard of it)."""
    while True:
        manager = replicas()
        p = manager.get_partition(topic, partition) if manager is not None else None
        if p is not None and p.is_leader and p.leader_epoch >= epoch:
            return p
        await asyncio.sleep(0.05)


class LogEntry(NamedTuple):
    """A record of an internal partition, or a transaction marker (``marker`` not None)."""

    key: bytes | None
    value: bytes | None
    txn_producer_id: int = -1  # the producer whose transaction wrote it; -1: not transactional
    marker: bool | None = None  # a marker of producer ``txn_producer_id``: True COMMIT, False ABORT


async def read_log(p: Any, chunk_bytes: int) -> AsyncIterator[LogEntry]:
    """Every record and transaction marker of the replica's log, from its start to its end,
    yielding to the event loop between chunks.

    Ordering: the end is looked at again before each chunk, and the iteration stops at the first
    look that finds nothing new, with no await after it; so what was appended while the load read
    (a WriteTxnMarkers marker of ``__consumer_offsets``, which finds no shard to tell while one
    loads) is replayed, and anything appended later finds the shard loaded. Only a partition's
    leader appends to it, and its coordinator writes nothing before the load ends: the tail a load
    chases is a few markers."""
    offset = p.log_start_offset
    while offset < (end := p.log_end_offset):
        info = p.log.read(offset, chunk_bytes, max_offset=end)
        if not info.records:
            break
        for _pos, batch in iter_batches(bytes(info.records)):
            if batch.is_control:
                kind = batch.control_type()
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    yield LogEntry(None, None, batch.producer_id, kind is ControlRecordType.COMMIT)
            else:
                pid = batch.producer_id if batch.is_transactional else -1
                for record in batch.records():
                    yield LogEntry(record.key, record.value, pid)
            offset = max(offset, batch.last_offset + 1)
        await asyncio.sleep(0)


async def append_records(
    replicas: Any,
    topic: str,
    partition: int,
    records: Sequence[tuple[bytes, bytes | None]],
    *,
    timeout_ms: int,
    now_ms: int,
    producer: tuple[int, int] | None = None,
) -> type[kerr.KafkaError] | None:
    """Append the encoded records in one batch with acks=all (as the coordinator: no producer
    sequence checks); None when written and replicated, else the error. With ``producer`` (id,
    epoch) the batch is transactional: it counts once that producer's COMMIT marker follows."""
    try:
        if producer is None:
            builder = RecordBatchBuilder()
        else:
            builder = RecordBatchBuilder(producer_id=producer[0], producer_epoch=producer[1], is_transactional=True)
        for key, value in records:
            builder.append(now_ms, key, value)
        payload = builder.build()
    except (ValueError, kerr.KafkaError) as err:
        _log.warning("internal_records_not_encodable", topic=topic, partition=partition, error=str(err))
        return kerr.InvalidRequestError
    try:
        error: type[kerr.KafkaError] | None = await replicas.append_internal(topic, partition, payload, timeout_ms)
    except Exception as err:  # noqa: BLE001 - a storage failure: the write fails, the coordinator goes on
        _log.error("internal_append_failed", topic=topic, partition=partition, error=repr(err))
        return kerr.UnknownServerError
    return error


class ReplicaPartitionWriter:
    """The partitions of one internal topic on this broker's replica manager: read from the local
    leader replica, appended with acks=all within ``timeout_ms``."""

    def __init__(
        self,
        replicas: Callable[[], Any],
        topic: str,
        *,
        timeout_ms: Callable[[], int],
        read_chunk_bytes: Callable[[], int],
        clock_ms: Callable[[], int],
    ) -> None:
        self._replicas = replicas
        self.topic = topic
        self._timeout_ms = timeout_ms
        self._chunk_bytes = read_chunk_bytes
        self._clock_ms = clock_ms

    async def read(self, partition: int, epoch: int) -> AsyncIterator[LogEntry]:
        p = await leader_replica(self._replicas, self.topic, partition, epoch)
        async for entry in read_log(p, self._chunk_bytes()):
            yield entry

    async def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]], producer: tuple[int, int] | None
    ) -> type[kerr.KafkaError] | None:
        return await append_records(
            self._replicas(),
            self.topic,
            partition,
            records,
            timeout_ms=self._timeout_ms(),
            now_ms=self._clock_ms(),
            producer=producer,
        )


class TopicCreator:
    """Creates an internal topic the first time a client looks for its coordinator, as Kafka does;
    one creation at a time (a second ask while one is under way returns at once)."""

    def __init__(self, topic: str, create: Callable[[int, int, dict[str, str]], Awaitable[None]]) -> None:
        self.topic = topic
        self._create = create
        self._creating = False

    async def ensure(self, image: Any, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        """Create the topic (``partitions``, ``replication_factor``, ``configs``) unless ``image``
        has it already."""
        if image.topics.get_by_name(self.topic) is not None or self._creating:
            return
        self._creating = True
        try:
            await self._create(partitions, replication_factor, configs)
        finally:
            self._creating = False
