"""What the coordinators share about the internal topic partitions they keep their state in
(``__consumer_offsets``, ``__transaction_state``): waiting until the local replica leads at the
epoch the metadata named, reading a partition's records from its start to its end (a load), and
appending records to it with acks=all through the replica manager."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import structlog

from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatchBuilder, iter_batches
from kraftlog.proto import broker_pb2

__all__ = ["leader_replica", "read_records", "append_records"]

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


async def read_records(p: Any, chunk_bytes: int) -> AsyncIterator[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of the non-control batches of the replica's log, from its start to the
    end it had when the read began, yielding to the event loop between chunks."""
    offset, end = p.log_start_offset, p.log_end_offset
    while offset < end:
        info = p.log.read(offset, chunk_bytes, max_offset=end)
        if not info.records:
            break
        for _pos, batch in iter_batches(bytes(info.records)):
            if not batch.is_control:
                for record in batch.records():
                    yield record.key, record.value
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
) -> type[kerr.KafkaError] | None:
    """Append the encoded records in one batch with acks=all; None when written and replicated,
    else the error (the storage's, or the partition's produce error)."""
    try:
        builder = RecordBatchBuilder()
        for key, value in records:
            builder.append(now_ms, key, value)
        payload = builder.build()
    except (ValueError, kerr.KafkaError) as err:
        _log.warning("internal_records_not_encodable", topic=topic, partition=partition, error=str(err))
        return kerr.InvalidRequestError
    request = broker_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=timeout_ms,
        topics=[
            broker_pb2.ProduceRequest.TopicData(
                name=topic, partitions=[broker_pb2.ProduceRequest.PartitionData(index=partition, records=payload)]
            )
        ],
    )
    try:
        response = await replicas.produce(request)
    except kerr.KafkaError as err:
        return type(err)
    except Exception as err:  # noqa: BLE001 - a storage failure: the write fails, the coordinator goes on
        _log.error("internal_append_failed", topic=topic, partition=partition, error=repr(err))
        return kerr.UnknownServerError
    code = response.topics[0].partitions[0].error.code
    return None if code == 0 else kerr.error_for_code(code)
