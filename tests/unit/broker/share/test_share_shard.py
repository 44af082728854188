"""The share coordinator's shard: Initialize/Read/Write/Delete/ReadSummary ShareGroupState as
Kafka's ShareCoordinatorShard answers them (uninitialized keys, leader and state epoch fencing,
unknown topics), the snapshot-every-N-updates rule, tombstones, a failed write, and the shard on
the coordinator runtime: a share partition's state written through it survives a reload from the
log and rebuilds an equal share partition."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from test_coordinator_runtime import BOUND_S, Clock, MemoryWriter, loaded, until

from kraftlog.broker.coordinator import CoordinatorResult, CoordinatorRuntime
from kraftlog.broker.share import (
    AcknowledgementBatch,
    DeleteStateRequest,
    FetchedBatch,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    SharePartition,
    SharePartitionConfig,
    ShareShard,
    ShareShardConfig,
    ShareShards,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateResult,
    ShareUpdateKey,
    StateBatch,
    WriteStateRequest,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.common import errors as kerr

TOPIC = "6f1c1f3e-1b8a-4c53-9a4e-2f7f3a9d0b11"
OTHER = "00000000-0000-0000-0000-0000000000aa"


def topics(topic_id: str) -> int | None:
    return 4 if topic_id == TOPIC else None


def answer(out: CoordinatorResult, error: type[kerr.KafkaError] | None = None) -> ShareStateResult:
    """The shard's answer once its records (if any) are written with ``error``."""
    if out.records:
        assert out.then is not None
        out = out.then(error, 0)
    assert len(out.responses) == 1
    result = out.responses[0][1]
    assert isinstance(result, ShareStateResult)
    return result


def init(shard: ShareShard, partition: int = 0, state_epoch: int = 0, start: int = 0) -> ShareStateResult:
    return answer(
        shard.initialize_state(InitializeStateRequest("g", TOPIC, partition, state_epoch, start), "t", 5, topics)
    )


def write(
    shard: ShareShard, *batches: StateBatch, start: int = 0, leader: int = 1, state: int = 0
) -> CoordinatorResult:
    return shard.write_state(WriteStateRequest("g", TOPIC, 0, state, leader, start, tuple(batches)), "t", 9, topics)


def read(shard: ShareShard, leader: int = 1) -> ShareStateResult:
    return answer(shard.read_state(ReadStateRequest("g", TOPIC, 0, leader), "t", 9, topics))


# ========================================================================== handlers


def test_read_and_write_of_an_uninitialized_key_are_invalid_request() -> None:
    shard = ShareShard(0, ShareShardConfig())
    assert read(shard).error is kerr.InvalidRequestError
    out = write(shard, StateBatch(0, 1, 0, 1))
    assert answer(out).error is kerr.InvalidRequestError and not out.records
    assert shard.states == {}


def test_initialize_then_read_then_write() -> None:
    shard = ShareShard(0, ShareShardConfig())
    assert init(shard, start=7).error is None
    got = read(shard, leader=3)
    assert (got.error, got.start_offset, got.state_epoch, got.state_batches) == (None, 7, 0, ())
    assert shard.leader_epochs[("g", TOPIC, 0)] == 3  # the new leader is recorded
    out = write(shard, StateBatch(7, 9, 2, 1), start=7, leader=3)
    assert [type(k) for k, _v in out.records] == [ShareUpdateKey]
    assert answer(out).error is None
    assert read(shard, leader=3).state_batches == (StateBatch(7, 9, 2, 1),)


def test_a_write_never_raises_the_leader_epoch_a_read_does() -> None:
    shard = ShareShard(0, ShareShardConfig())
    init(shard)
    read(shard, leader=2)
    out = write(shard, StateBatch(0, 0, 2, 1), leader=3)
    assert out.records[0][1].leader_epoch == 2
    answer(out)
    assert shard.leader_epochs[("g", TOPIC, 0)] == 2


def test_a_read_at_the_known_leader_epoch_writes_nothing() -> None:
    shard = ShareShard(0, ShareShardConfig())
    init(shard)
    read(shard, leader=2)
    assert not shard.read_state(ReadStateRequest("g", TOPIC, 0, 2), "t", 9, topics).records
    assert not shard.read_state(ReadStateRequest("g", TOPIC, 0, -1), "t", 9, topics).records


def test_leader_epoch_fencing() -> None:
    shard = ShareShard(0, ShareShardConfig())
    init(shard)
    read(shard, leader=5)
    assert read(shard, leader=4).error is kerr.FencedLeaderEpochError
    out = write(shard, StateBatch(0, 0, 2, 1), leader=4)
    assert answer(out).error is kerr.FencedLeaderEpochError and not out.records
    assert answer(write(shard, StateBatch(0, 0, 2, 1), leader=5)).error is None


def test_state_epoch_fencing_of_writes_and_initialize() -> None:
    shard = ShareShard(0, ShareShardConfig())
    init(shard, state_epoch=5)
    assert answer(write(shard, StateBatch(0, 0, 2, 1), state=4)).error is kerr.FencedStateEpochError
    assert init(shard, state_epoch=4).error is kerr.FencedStateEpochError
    assert init(shard, state_epoch=6, start=100).error is None  # a reset (AlterShareGroupOffsets)
    assert read(shard).start_offset == 100


def test_unknown_topic_or_partition_and_negative_partition() -> None:
    shard = ShareShard(0, ShareShardConfig())
    bad = shard.initialize_state(InitializeStateRequest("g", OTHER, 0, 0), "t", 0, topics)
    assert answer(bad).error is kerr.UnknownTopicOrPartitionError
    bad = shard.initialize_state(InitializeStateRequest("g", TOPIC, 4, 0), "t", 0, topics)
    assert answer(bad).error is kerr.UnknownTopicOrPartitionError
    bad = shard.initialize_state(InitializeStateRequest("g", TOPIC, -1, 0), "t", 0, topics)
    assert answer(bad).error is kerr.InvalidRequestError
    assert shard.states == {}


def test_every_nth_write_is_a_snapshot_of_the_merged_state() -> None:
    shard = ShareShard(0, ShareShardConfig(snapshot_update_records_per_snapshot=3))
    init(shard)
    kinds = []
    for i in range(9):
        out = write(shard, StateBatch(i, i, 2, 1), start=0)
        kinds.append(type(out.records[0][0]).__name__)
        answer(out)
    # Kafka's count: N + 1 updates before the first snapshot, N before each later one
    assert kinds == ["ShareUpdateKey"] * 4 + ["ShareSnapshotKey"] + ["ShareUpdateKey"] * 3 + ["ShareSnapshotKey"]
    state = shard.states[("g", TOPIC, 0)]
    assert state.state_batches == (StateBatch(0, 8, 2, 1),)
    assert state.snapshot_epoch == 2  # initialize 0, then two snapshots


def test_delete_writes_a_tombstone_and_forgets_the_epochs() -> None:
    shard = ShareShard(0, ShareShardConfig())
    assert not shard.delete_state(DeleteStateRequest("g", TOPIC, 0), "t", 0, topics).records  # nothing stored
    init(shard, state_epoch=3)
    out = shard.delete_state(DeleteStateRequest("g", TOPIC, 0), "t", 0, topics)
    assert out.records == [(ShareSnapshotKey("g", TOPIC, 0), None)]
    assert answer(out).error is None
    assert shard.states == {} and shard.state_epochs == {} and shard.leader_epochs == {}


def test_summary() -> None:
    shard = ShareShard(0, ShareShardConfig())
    none = shard.read_state_summary(ReadStateSummaryRequest("g", TOPIC, 0), topics)
    assert (none.error, none.start_offset) == (None, -1)
    init(shard, state_epoch=2, start=10)
    read(shard, leader=4)
    got = shard.read_state_summary(ReadStateSummaryRequest("g", TOPIC, 0, 4), topics)
    assert (got.error, got.state_epoch, got.leader_epoch, got.start_offset) == (None, 2, 4, 10)
    older = shard.read_state_summary(ReadStateSummaryRequest("g", TOPIC, 0, 3), topics)
    assert older.error is None  # a summary fences nothing
    gone = shard.read_state_summary(ReadStateSummaryRequest("g", OTHER, 0), topics)
    assert gone.error is kerr.UnknownTopicOrPartitionError


def test_a_failed_write_answers_the_mapped_error_and_reloads() -> None:
    shard = ShareShard(0, ShareShardConfig())
    init(shard)
    out = write(shard, StateBatch(0, 0, 2, 1))
    assert out.then is not None
    failed = out.then(kerr.NotLeaderOrFollowerError, 0)
    assert failed.reload
    assert failed.responses[0][1].error is kerr.NotCoordinatorError


# ==================================================================== replay and runtime


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 20), st.integers(0, 4), st.sampled_from([0, 2, 4]), st.integers(1, 5), st.integers(-1, 15)
        ),
        max_size=25,
    ),
    st.integers(1, 4),
)
def test_replaying_the_written_records_rebuilds_the_same_state(
    writes: list[tuple[int, int, int, int, int]], per_snapshot: int
) -> None:
    """A new coordinator that replays the log (the records encoded and decoded) holds the same
    state as the one that wrote it, whichever writes were updates and which snapshots."""
    config = ShareShardConfig(snapshot_update_records_per_snapshot=per_snapshot)
    shard = ShareShard(0, config)
    logged: list[tuple[bytes, bytes | None]] = []
    handler = ShareShards(config, structlog.get_logger())
    out = shard.initialize_state(InitializeStateRequest("g", TOPIC, 0, 0, 0), "t", 1, topics)
    logged += [handler.encode(r) for r in out.records]
    for first, length, state, count, start in writes:
        req = WriteStateRequest("g", TOPIC, 0, 0, 1, start, (StateBatch(first, first + length, state, count),))
        out = shard.write_state(req, "t", 2, topics)
        logged += [handler.encode(r) for r in out.records]
    again = ShareShard(0, config)
    for key, value in logged:
        k = decode_key(key)
        again.replay(k, decode_value(k, value))
    assert again.states == shard.states
    assert again.leader_epochs == shard.leader_epochs and again.state_epochs == shard.state_epochs
    assert again.updates_since_snapshot == shard.updates_since_snapshot  # the next snapshot comes as due


def test_a_share_partition_survives_a_coordinator_reload_on_the_runtime() -> None:
    """The leader's state goes through the runtime (encoded, appended, committed); a new shard
    loaded from that log answers a new leader's read with a state that rebuilds the partition."""

    async def main() -> None:
        writer = MemoryWriter()
        config = ShareShardConfig(snapshot_update_records_per_snapshot=2)
        runtime: CoordinatorRuntime[ShareShard] = CoordinatorRuntime(
            "share",
            "__share_group_state",
            1,
            writer,
            ShareShards(config, structlog.get_logger()),
            clock_ms=Clock(),
            max_wait_ms=500,
        )

        async def call(op: Any) -> ShareStateResult:
            result = await asyncio.wait_for(runtime.call(0, op), BOUND_S)
            assert isinstance(result, ShareStateResult) and result.error is None, result
            return result

        runtime.follow({0: 1})
        await until(loaded(runtime))
        await call(lambda s, t, now: s.initialize_state(InitializeStateRequest("g", TOPIC, 0, 0, 0), t, now, topics))
        state = await call(lambda s, t, now: s.read_state(ReadStateRequest("g", TOPIC, 0, 1), t, now, topics))
        cfg = SharePartitionConfig(delivery_count_limit=3)
        leader = SharePartition.from_state(cfg, state.start_offset, state.state_batches)
        for round_ in range(4):
            got = leader.acquire("m", [FetchedBatch(o, o) for o in range(leader.next_fetch_offset(), 12)], 0, 3)
            first = got.acquired[0].first_offset
            leader.acknowledge("m", [AcknowledgementBatch(first, first, (1 if round_ % 2 else 2,))], 0)
            req = WriteStateRequest("g", TOPIC, 0, 0, 1, leader.start_offset, tuple(leader.state_batches()))
            await call(lambda s, t, now, req=req: s.write_state(req, t, now, topics))
        runtime.follow({})
        runtime.follow({0: 2})  # the coordinator moved: a new shard loads the log
        await until(loaded(runtime))
        state = await call(lambda s, t, now: s.read_state(ReadStateRequest("g", TOPIC, 0, 2), t, now, topics))
        rebuilt = SharePartition.from_state(cfg, state.start_offset, state.state_batches)
        assert rebuilt.state_batches() == leader.state_batches()
        assert rebuilt.start_offset == leader.start_offset
        kinds = {type(decode_key(k)).__name__ for entries in writer.logs.values() for e in entries if (k := e.key)}
        assert kinds == {"ShareSnapshotKey", "ShareUpdateKey"}
        # the old leader is fenced from here on
        req = WriteStateRequest("g", TOPIC, 0, 0, 1, 0, ())
        result = await asyncio.wait_for(runtime.call(0, lambda s, t, now: s.write_state(req, t, now, topics)), BOUND_S)
        assert result.error is kerr.FencedLeaderEpochError
        await runtime.stop()

    asyncio.run(main())


def test_snapshot_value_of_the_initialize_record() -> None:
    shard = ShareShard(0, ShareShardConfig())
    out = shard.initialize_state(InitializeStateRequest("g", TOPIC, 1, 2, 30), "t", 77, topics)
    key, value = out.records[0]
    assert key == ShareSnapshotKey("g", TOPIC, 1)
    assert value == ShareSnapshotValue(0, 2, 0, 30, 77, 77, (), delivery_complete_count=0)
    unknown_start = shard.initialize_state(InitializeStateRequest("g", TOPIC, 2, 0, -1), "t", 77, topics)
    assert unknown_start.records[0][1].delivery_complete_count == -1
    assert decode_value(key, encode_value(value)) == value and decode_key(encode_key(key)) == key


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(0, 4), st.booleans()), max_size=30),
    st.integers(1, 3),
)
def test_a_leaders_writes_read_back_rebuild_an_equal_partition(
    rounds: list[tuple[int, int, int, bool]], per_snapshot: int
) -> None:
    """After any run of acquisitions, acknowledgements and lock expiries, each followed by a write
    of the partition's state through the shard (updates merged, snapshots every few), a new
    leader's read rebuilds a partition with the same start offset and state batches."""
    shard = ShareShard(0, ShareShardConfig(snapshot_update_records_per_snapshot=per_snapshot))
    answer(shard.initialize_state(InitializeStateRequest("g", TOPIC, 0, 0, 0), "t", 0, topics))
    cfg = SharePartitionConfig(record_lock_duration_ms=100, delivery_count_limit=3, max_record_locks=8)
    leader = SharePartition(cfg, 0)
    now = 0
    for ack_type, n, k, tick in rounds:
        start = leader.next_fetch_offset()
        leader.acquire("m", [FetchedBatch(o, o) for o in range(start, 30)], now, n)
        mine = leader.acquired_by("m")[:k]
        if mine:
            leader.acknowledge("m", [AcknowledgementBatch(o, o, (ack_type + 1,)) for o in mine], now)
        if tick:
            now += 100
            leader.expire_locks(now)
        req = WriteStateRequest("g", TOPIC, 0, 0, 1, leader.start_offset, tuple(leader.state_batches()))
        assert answer(shard.write_state(req, "t", now, topics)).error is None
        state = read(shard, leader=1)
        rebuilt = SharePartition.from_state(cfg, state.start_offset, state.state_batches)
        assert rebuilt.start_offset == leader.start_offset
        assert rebuilt.state_batches() == leader.state_batches()
