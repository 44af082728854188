"""The share partition shell on a leader (issue 27): a share partition is loaded from the share
coordinator (its unknown start resolved to the high watermark and written), records are acquired
from the log, acknowledgements are persisted before they are answered, lock expiry releases and
persists, a closing member's records are released, and a failed write drops the partition so the
next use loads it again; a long poll acquires nothing until min_bytes are there; members gone from
the group give their records back at once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kraftlog.broker.replica._partition_types import PartitionRead
from kraftlog.broker.share import AcknowledgementBatch, AcquireMode, SharePartitionManager
from kraftlog.broker.share._share_shard_types import ReadStateRequest, ShareStateResult, WriteStateRequest
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatchBuilder

TID = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
CONFIG = {
    "group.share.record.lock.duration.ms": 1000,
    "group.share.delivery.count.limit": 5,
    "group.share.partition.max.record.locks": 200,
}


class Log:
    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []
        self.end = 0

    def append(self, n: int) -> None:
        b = RecordBatchBuilder(base_offset=self.end)
        for i in range(n):
            b.append(0, None, f"v{self.end + i}".encode())
        self.batches.append((self.end, n, b.build()))
        self.end += n


class Replica:
    def __init__(self, log: Log) -> None:
        self.log_data = log
        self.is_leader = True
        self.leader_epoch = 3
        self.log_start_offset = 0
        self.log = SimpleNamespace(last_stable_offset=0, read=self.read)

    @property
    def high_watermark(self) -> int:
        return self.log_data.end

    def read(self, offset: int, max_bytes: int, *, max_offset: int, verify: bool = True) -> Any:
        """The log's read as the long poll counts it: whole batches from ``offset``, the first always."""
        out = b""
        for base, n, data in self.log_data.batches:
            if base + n > offset and base < max_offset and (not out or len(out) + len(data) <= max_bytes):
                out += data
        return SimpleNamespace(records=out)

    def fetch_records(self, *, fetch_offset: int, max_bytes: int, isolation_level: int = 0) -> PartitionRead:
        data = b"".join(b for base, n, b in self.log_data.batches if base + n > fetch_offset)
        return PartitionRead(data, self.high_watermark, 0, self.log_data.end)


class Persister:
    def __init__(self) -> None:
        self.writes: list[WriteStateRequest] = []
        self.reads: list[ReadStateRequest] = []
        self.fail_writes = False
        self.start = -1

    async def call(self, req: Any) -> ShareStateResult:
        if isinstance(req, ReadStateRequest):
            self.reads.append(req)
            last = self.writes[-1] if self.writes else None
            start = last.start_offset if last else self.start
            batches = last.state_batches if last else ()
            return ShareStateResult(
                req.topic_id, req.partition, state_epoch=1, start_offset=start, state_batches=batches
            )
        if self.fail_writes:
            return ShareStateResult(req.topic_id, req.partition, kerr.NotCoordinatorError, "moved")
        self.writes.append(req)
        return ShareStateResult(req.topic_id, req.partition)


def make(start: int = -1) -> tuple[SharePartitionManager, Log, Persister, list[int]]:
    log = Log()
    replica = Replica(log)
    replicas = SimpleNamespace(get_partition=lambda topic, p: replica if (topic, p) == ("t", 0) else None)
    persister = Persister()
    persister.start = start
    now = [1000]
    manager = SharePartitionManager(
        1,
        CONFIG,
        replicas=lambda: replicas,
        persister=persister,
        clock_ms=lambda: now[0],  # type: ignore[arg-type]
    )
    return manager, log, persister, now


def fetch(manager: SharePartitionManager, member: str, max_records: int = 100) -> Any:
    got = asyncio.run(
        manager.fetch(
            "g",
            member,
            [(TID, "t", 0)],
            max_wait_ms=0,
            max_bytes=1 << 20,
            max_records=max_records,
            mode=AcquireMode.RECORD_LIMIT,
        )
    )
    return got.get((TID, 0))


def test_the_unknown_start_is_the_high_watermark_and_is_written_at_once() -> None:
    manager, log, persister, _now = make()
    log.append(5)
    assert fetch(manager, "a") is None  # nothing past the high watermark yet
    assert persister.reads[0].leader_epoch == 3
    assert [(w.start_offset, w.leader_epoch, w.state_epoch) for w in persister.writes] == [(5, 3, 1)]


def test_acquire_acknowledge_and_expiry_are_persisted() -> None:
    async def scenario() -> None:
        manager, log, persister, now = make(start=0)
        log.append(4)
        got = await manager.fetch(
            "g",
            "a",
            [(TID, "t", 0)],
            max_wait_ms=0,
            max_bytes=1 << 20,
            max_records=10,
            mode=AcquireMode.BATCH_OPTIMIZED,
        )
        assert [tuple(r) for r in got[(TID, 0)].acquired] == [(0, 3, 1)]
        other = await manager.fetch(
            "g",
            "b",
            [(TID, "t", 0)],
            max_wait_ms=0,
            max_bytes=1 << 20,
            max_records=10,
            mode=AcquireMode.BATCH_OPTIMIZED,
        )
        assert (TID, 0) not in other  # no record is held by two members
        await manager.acknowledge(
            "g", "a", TID, "t", 0, [AcknowledgementBatch(0, 1, (1,)), AcknowledgementBatch(2, 2, (2,))]
        )
        assert persister.writes[-1].start_offset == 2
        assert [tuple(b) for b in persister.writes[-1].state_batches] == [(2, 3, 0, 1)]
        with pytest.raises(kerr.InvalidRecordStateError):
            await manager.acknowledge("g", "b", TID, "t", 0, [AcknowledgementBatch(3, 3, (1,))])
        now[0] += 1000  # offset 3's lock ends
        writes = len(persister.writes)
        await manager.expire_due(now[0])
        assert len(persister.writes) == writes + 1
        again = await manager.fetch(
            "g", "b", [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
        )
        assert [tuple(r) for r in again[(TID, 0)].acquired] == [(2, 3, 2)]
        await manager.release("g", "b", [(TID, "t", 0)])
        final = await manager.fetch(
            "g", "c", [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
        )
        assert [tuple(r) for r in final[(TID, 0)].acquired] == [(2, 3, 3)]

    asyncio.run(scenario())


def test_a_failed_write_drops_the_partition_and_the_next_use_reloads_it() -> None:
    async def scenario() -> None:
        manager, log, persister, _now = make(start=0)
        log.append(2)
        await manager.fetch(
            "g", "a", [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
        )
        persister.fail_writes = True
        with pytest.raises(kerr.NotCoordinatorError):
            await manager.acknowledge("g", "a", TID, "t", 0, [AcknowledgementBatch(0, 1, (1,))])
        persister.fail_writes = False
        got = await manager.fetch(
            "g", "b", [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
        )
        assert len(persister.reads) == 2  # loaded again: the unwritten acknowledgement is not kept
        assert [tuple(r) for r in got[(TID, 0)].acquired] == [(0, 1, 1)]

    asyncio.run(scenario())


def test_a_long_poll_wakes_when_a_lock_expires() -> None:
    async def scenario() -> None:
        manager, log, _persister, now = make(start=0)
        log.append(1)
        purgatory_ops: list[Any] = []
        manager._replicas().fetch_purgatory = SimpleNamespace(  # type: ignore[attr-defined]
            try_complete_else_watch=lambda op, keys: purgatory_ops.append(op) or op.maybe_try_complete()
        )
        await manager.fetch(
            "g", "a", [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
        )
        waiting = asyncio.ensure_future(
            manager.fetch(
                "g",
                "b",
                [(TID, "t", 0)],
                max_wait_ms=5000,
                max_bytes=1 << 20,
                max_records=10,
                mode=AcquireMode.RECORD_LIMIT,
            )
        )
        while not purgatory_ops:
            await asyncio.sleep(0)
        assert not waiting.done()
        now[0] += 1000
        await manager.expire_due(now[0])
        got = await asyncio.wait_for(waiting, 2)
        assert [tuple(r) for r in got[(TID, 0)].acquired] == [(0, 0, 2)]

    asyncio.run(scenario())


def test_a_share_groups_own_configs_replace_the_brokers() -> None:
    from kraftlog.broker.share import SharePartitionConfig, group_partition_config
    from kraftlog.broker.share._share_types import AutoOffsetReset
    from kraftlog.common.config import NodeConfig
    from tests.unit.common.test_config_share import BASE

    broker = NodeConfig(BASE).__getitem__
    base = SharePartitionConfig()
    assert group_partition_config({}, base, broker) is base
    own = {
        "share.auto.offset.reset": "by_duration:PT1M",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "20000",
    }
    got = group_partition_config(own, base, broker)
    assert (got.auto_offset_reset, got.read_committed, got.record_lock_duration_ms) == (
        AutoOffsetReset("by_duration", 60_000),
        True,
        20_000,
    )
    # a stored value the broker's bounds no longer admit leaves the broker's settings
    assert group_partition_config({"share.record.lock.duration.ms": "5000"}, base, broker) is base


def test_a_long_poll_acquires_nothing_until_min_bytes_are_there() -> None:
    async def scenario() -> None:
        manager, log, _persister, _now = make(start=0)
        purgatory_ops: list[Any] = []
        manager._replicas().fetch_purgatory = SimpleNamespace(  # type: ignore[attr-defined]
            try_complete_else_watch=lambda op, keys: purgatory_ops.append(op) or op.maybe_try_complete()
        )
        log.append(1)
        one_batch = len(log.batches[0][2])
        waiting = asyncio.ensure_future(
            manager.fetch(
                "g",
                "a",
                [(TID, "t", 0)],
                max_wait_ms=60_000,
                max_bytes=1 << 20,
                max_records=100,
                mode=AcquireMode.BATCH_OPTIMIZED,
                min_bytes=3 * one_batch,
            )
        )
        while not purgatory_ops:
            await asyncio.sleep(0)
        held = manager._held[("g", TID, 0)].core
        assert not waiting.done() and held.end_offset == 0  # nothing acquired while it waits
        log.append(1)
        assert not purgatory_ops[-1].maybe_try_complete()  # two batches: still short of min_bytes
        log.append(1)
        assert purgatory_ops[-1].maybe_try_complete()
        got = await asyncio.wait_for(waiting, 2)
        assert [tuple(r) for r in got[(TID, 0)].acquired] == [(0, 2, 1)]
        # min_bytes of 1 (the default) is met by any acquirable record
        log.append(1)
        assert manager._ready("g", [(TID, "t", 0)]) and not manager._ready("g", [(TID, "t", 0)], 2 * one_batch)

    asyncio.run(scenario())


def test_a_long_poll_past_its_wait_acquires_what_there_is() -> None:
    async def scenario() -> None:
        manager, log, _persister, _now = make(start=0)
        manager._replicas().fetch_purgatory = SimpleNamespace(  # type: ignore[attr-defined]
            try_complete_else_watch=lambda op, keys: op.maybe_try_complete()
        )
        log.append(2)
        got = await manager.fetch(
            "g",
            "a",
            [(TID, "t", 0)],
            max_wait_ms=0,
            max_bytes=1 << 20,
            max_records=10,
            mode=AcquireMode.BATCH_OPTIMIZED,
            min_bytes=1 << 20,
        )
        assert [tuple(r) for r in got[(TID, 0)].acquired] == [(0, 1, 1)]

    asyncio.run(scenario())


def test_members_gone_from_the_group_give_their_records_back_at_once() -> None:
    async def scenario() -> None:
        manager, log, persister, _now = make(start=0)
        log.append(3)
        kw: Any = {"max_wait_ms": 0, "max_bytes": 1 << 20, "max_records": 2, "mode": AcquireMode.RECORD_LIMIT}
        await manager.fetch("g", "a", [(TID, "t", 0)], **kw)
        await manager.fetch("g", "b", [(TID, "t", 0)], **kw)
        writes = len(persister.writes)
        await manager.release_members("g", ["a", "nobody"])
        assert len(persister.writes) == writes + 1  # given back and written at once
        await manager.release_members("other-group", ["b"])  # another group's member: nothing
        held = manager._held[("g", TID, 0)].core
        assert [held.record(o)[0].name for o in range(3)] == ["AVAILABLE", "AVAILABLE", "ACQUIRED"]
        again = await manager.fetch("g", "c", [(TID, "t", 0)], **kw)
        assert [tuple(r) for r in again[(TID, 0)].acquired] == [(0, 1, 2)]  # delivery counts kept

    asyncio.run(scenario())
