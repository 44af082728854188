"""A coordinator's load of its internal partition (`read_log`) replays what is appended while it
reads. The transaction coordinator writes a marker into a ``__consumer_offsets`` partition with
WriteTxnMarkers, outside the group coordinator runtime; a marker written while the partition
loads reached no shard (`GroupCoordinator.on_txn_marker` finds none loaded) and, past the end the
load had looked at when it began, was not replayed either: the producer's transactional offsets
stayed pending for good and every OffsetFetch with require_stable answered UNSTABLE_OFFSET_COMMIT
(the eos chaos run of CI stop 37: its processors never committed again)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kraftlog.broker.coordinator._internal_topic import LogEntry, read_log
from kraftlog.common.records import (
    ControlRecordType,
    build_batch,
    build_control_batch,
    iter_batches,
    rewrite_offset_and_epoch,
)

PRODUCER_ID = 4_000


@dataclass
class _Read:
    records: bytes


class _Log:
    """Whole batches from an offset, below ``max_offset`` (what `read_log` asks of a replica's log)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []

    @property
    def end_offset(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    def append(self, payload: bytes) -> None:
        _pos, batch = next(iter_batches(payload))
        count = batch.last_offset - batch.base_offset + 1
        base = self.end_offset
        rebased = payload if base == 0 else _rebase(payload, base)
        self.batches.append((base, base + count - 1, rebased))

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> _Read:
        end = self.end_offset if max_offset is None else max_offset
        out = bytearray()
        for base, last, payload in self.batches:
            if last < offset or base >= end:
                continue
            if out and len(out) + len(payload) > max_bytes:
                break
            out += payload
        return _Read(bytes(out))


def _rebase(payload: bytes, base_offset: int) -> bytes:
    buf = bytearray(payload)
    rewrite_offset_and_epoch(buf, 0, base_offset, 0)
    return bytes(buf)


class _Replica:
    def __init__(self) -> None:
        self.log = _Log()
        self.log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset


def _offsets_batch(n: int) -> bytes:
    """A transactional batch of ``n`` records (a TxnOffsetCommit's offsets)."""
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]
    return build_batch(
        records, timestamp_ms=1, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=0, is_transactional=True
    )


def _marker() -> bytes:
    return build_control_batch(
        ControlRecordType.COMMIT, producer_id=PRODUCER_ID, producer_epoch=0, coordinator_epoch=3, timestamp_ms=2
    )


def test_a_marker_appended_while_the_partition_loads_is_replayed() -> None:
    async def scenario() -> list[LogEntry]:
        replica = _Replica()
        for _ in range(3):
            replica.log.append(_offsets_batch(2))
        seen: list[LogEntry] = []
        # one batch per chunk: the load yields to the event loop between them, where the marker lands
        async for entry in read_log(replica, chunk_bytes=1):
            seen.append(entry)
            if len(seen) == 2:
                replica.log.append(_marker())
        return seen

    seen = asyncio.run(scenario())
    assert [e.key for e in seen if e.marker is None] == [f"k{i}".encode() for i in (0, 1)] * 3
    assert seen[-1] == LogEntry(None, None, PRODUCER_ID, True)


def test_the_load_ends_once_it_caught_up_with_the_log_end() -> None:
    async def scenario() -> int:
        replica = _Replica()
        replica.log.append(_offsets_batch(1))
        return len([e async for e in read_log(replica, chunk_bytes=1 << 20)])

    assert asyncio.run(scenario()) == 1
