"""Decoding one partition's Fetch answer into the records a consumer hands out.

The broker returns whole batches, starting with the one that holds the fetch offset, so records
before the fetch offset are skipped; control batches are never returned; with ``read_committed``
(kept for the transactions issue: the setting itself is refused until then) the batches of aborted
transactions are dropped, using the answer's aborted-transaction list. Each decoded fetch also
remembers the leader epoch of its last batch: the consumer's position after it carries that epoch,
which KIP-320 validation checks after a leader change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kraftlog.client._metadata import TopicPartition
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatch, iter_batches

__all__ = ["CompletedFetch", "ConsumerRecord", "decode_partition"]

_ABORT = 0
Deserializer = Callable[[bytes | None], Any] | None


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime
    leader_epoch: int = -1


@dataclass
class CompletedFetch:
    """Records of one partition from one fetch, handed out over one or more polls."""

    tp: TopicPartition
    records: list[ConsumerRecord]
    next_fetch_offset: int  # where to fetch next once every record here is returned
    last_epoch: int | None = None  # leader epoch of the last batch read (the position's epoch after it)
    index: int = 0


def decode_partition(
    tp: TopicPartition,
    fetch_offset: int,
    data: Any,
    *,
    check_crcs: bool,
    read_committed: bool,
    max_partition_fetch_bytes: int,
    key_deserializer: Deserializer = None,
    value_deserializer: Deserializer = None,
) -> CompletedFetch | None:
    """Decode a partition's record data into records at or after ``fetch_offset`` (None when the
    answer moves nothing). A non-empty answer without one whole batch means a batch larger than
    the fetch size: MESSAGE_TOO_LARGE, as Kafka's consumer reports it."""
    records: list[ConsumerRecord] = []
    next_offset = fetch_offset
    last_epoch: int | None = None
    aborted = sorted((a.first_offset, a.producer_id) for a in data.aborted_transactions) if read_committed else []
    aborted_pids: set[int] = set()
    any_batch = False
    for _pos, batch in iter_batches(data.records, strict=True):
        any_batch = True
        if batch.last_offset < fetch_offset:
            continue
        if check_crcs:
            batch.ensure_valid()
        next_offset = max(next_offset, batch.next_offset)
        if batch.partition_leader_epoch >= 0:
            last_epoch = batch.partition_leader_epoch
        if read_committed and batch.producer_id >= 0:
            while aborted and aborted[0][0] <= batch.last_offset:
                aborted_pids.add(aborted.pop(0)[1])
            if batch.is_control:
                if batch.control_type() == _ABORT:
                    aborted_pids.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborted_pids:
                continue
        if batch.is_control:
            continue
        records.extend(_records_of(tp, batch, fetch_offset, key_deserializer, value_deserializer))
    if not any_batch:
        raise kerr.MessageTooLargeError(
            f"There are some messages at [Partition=Offset]: {{{tp}={fetch_offset}}} whose size is "
            f"larger than the fetch size {max_partition_fetch_bytes} and hence cannot be returned."
        )
    if not records and next_offset == fetch_offset:
        return None
    return CompletedFetch(tp, records, next_offset, last_epoch)


def _records_of(
    tp: TopicPartition, batch: RecordBatch, fetch_offset: int, kd: Deserializer, vd: Deserializer
) -> list[ConsumerRecord]:
    ts_type = int(batch.timestamp_type)
    epoch = batch.partition_leader_epoch
    topic, partition = tp
    return [
        ConsumerRecord(
            topic,
            partition,
            r.offset,
            r.timestamp_ms,
            kd(r.key) if kd else r.key,
            vd(r.value) if vd else r.value,
            list(r.headers),
            ts_type,
            epoch,
        )
        for r in batch.records()
        if r.offset >= fetch_offset
    ]
