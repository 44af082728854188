"""What a share partition learns of a log read: the batches' offsets and transactional flags,
and, for read_committed, which of them belong to aborted transactions.

A partition leader's read returns record batches and, for read_committed, the aborted
transactions overlapping them as (producer id, first offset) pairs (`PartitionRead.aborted`, as
Kafka's FetchResponse carries them). The share partition archives an aborted transaction's
records instead of delivering them, as Kafka's ``SharePartition`` does
(``filterAbortedTransactionalAcquiredRecords``): walking the batches in offset order, an aborted
transaction becomes current once a batch reaches its first offset; its producer's data batches
are aborted until that producer's control batch (the abort marker) ends it. Control batches
themselves are delivered like any record (the consumer acknowledges them as GAP).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kraftlog.common.records import iter_batches

__all__ = ["FetchedBatch", "aborted_ranges", "fetched_batches"]


class FetchedBatch(NamedTuple):
    """The header facts of one record batch a read returned (``last_offset`` inclusive;
    ``producer_id`` -1 when the batch has none)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


def fetched_batches(records: bytes | bytearray | memoryview) -> list[FetchedBatch]:
    """The headers of the whole batches of a read's bytes (a partial batch at the end, as a
    size-limited read returns, is left out: its records are not handed out)."""
    return [
        FetchedBatch(b.base_offset, b.last_offset, b.producer_id, b.is_transactional, b.is_control)
        for _pos, b in iter_batches(records)
    ]


def aborted_ranges(batches: Sequence[FetchedBatch], aborted: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (first, last) offset ranges of ``batches`` that belong to aborted transactions, given the
    read's aborted transactions (producer id, first offset). ``batches`` are in offset order."""
    pending = [(first, pid) for pid, first in aborted]
    heapq.heapify(pending)
    ongoing: set[int] = set()
    out: list[tuple[int, int]] = []
    for batch in batches:
        while pending and pending[0][0] <= batch.last_offset:
            ongoing.add(heapq.heappop(pending)[1])
        if batch.producer_id < 0 or batch.producer_id not in ongoing:
            continue
        if batch.is_control:
            ongoing.discard(batch.producer_id)  # the abort marker ends the producer's transaction
        elif batch.is_transactional:
            out.append((batch.base_offset, batch.last_offset))
    return out
