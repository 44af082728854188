"""The coordinator runtime driven with an in-memory partition writer and a test clock: a failed
write fails its operation and reloads the shard, leadership lost mid-operation answers
NOT_COORDINATOR, a timer that comes due during a load fires once the shard is loaded, writes reach
the log in the order the shard changed, the timer wait is capped, and Kafka's append-error table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from kraftlog.broker.coordinator._coordinator_result import CoordinatorResult, Error, coordinator_error, merge
from kraftlog.broker.coordinator._coordinator_runtime import CoordinatorRuntime, ShardUnavailable
from kraftlog.broker.coordinator._internal_topic import LogEntry
from kraftlog.common import errors as kerr

BOUND_S = 5.0


class Clock:
    """Milliseconds that move only when told."""

    def __init__(self, now_ms: int = 1_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class Shard:
    """A key-value shard: `put` changes the state at once (ahead of its write) and asks for a
    reload should the write fail; `park` waits for the next put; a timer record sets a deadline
    that `poll` answers with a record of its own."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state: dict[str, str] = {}
        self.parked: list[object] = []
        self.deadline: int | None = None
        self.fired: list[int] = []

    def replay(self, key: str, value: str) -> None:
        if key == "timer":
            self.deadline = int(value)
        else:
            self.state[key] = value

    def put(self, key: str, value: str, token: object) -> CoordinatorResult:
        self.state[key] = value
        parked, self.parked = self.parked, []

        def then(error: Error, _now_ms: int) -> CoordinatorResult:
            if error is not None:
                failed = coordinator_error(error)
                return CoordinatorResult([(t, failed) for t in [token, *parked]], reload=True)
            return CoordinatorResult([(t, "ok") for t in [token, *parked]])

        return CoordinatorResult(records=[(key, value)], then=then)

    def park(self, token: object) -> CoordinatorResult:
        self.parked.append(token)
        return CoordinatorResult()

    def next_deadline(self) -> int | None:
        return self.deadline

    def poll(self, now_ms: int) -> CoordinatorResult:
        if self.deadline is None or now_ms < self.deadline:
            return CoordinatorResult()
        self.deadline = None
        self.fired.append(now_ms)
        return CoordinatorResult(records=[("fired", str(now_ms))])


class Handler:
    def __init__(self) -> None:
        self.loads = 0

    def new_shard(self, partition: int, now_ms: int) -> Shard:
        self.loads += 1
        return Shard(partition)

    def replay(self, shard: Shard, entry: LogEntry, now_ms: int) -> None:
        assert entry.key is not None and entry.value is not None
        shard.replay(entry.key.decode(), entry.value.decode())

    def loaded(self, shard: Shard, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def unloaded(self, shard: Shard, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult([(t, None) for t in shard.parked])

    def encode(self, record: tuple[Any, Any]) -> tuple[bytes, bytes | None]:
        return record[0].encode(), record[1].encode()


class MemoryWriter:
    """Partitions in memory; appends and loads can be held at a gate, and the next append failed."""

    def __init__(self) -> None:
        self.logs: dict[int, list[LogEntry]] = {}
        self.appends: list[list[tuple[bytes, bytes | None]]] = []
        self.fail_next: Error = None
        self.append_gate = asyncio.Event()
        self.append_gate.set()
        self.load_gate = asyncio.Event()
        self.load_gate.set()
        self.in_flight = 0

    async def read(self, partition: int, epoch: int) -> AsyncIterator[LogEntry]:
        await self.load_gate.wait()
        for entry in list(self.logs.get(partition, [])):
            yield entry

    async def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]], producer: tuple[int, int] | None
    ) -> Error:
        self.in_flight += 1
        try:
            await self.append_gate.wait()
        finally:
            self.in_flight -= 1
        error, self.fail_next = self.fail_next, None
        if error is None:
            self.appends.append(list(records))
            self.logs.setdefault(partition, []).extend(LogEntry(k, v) for k, v in records)
        return error


def make(clock: Clock | None = None) -> tuple[CoordinatorRuntime[Shard], MemoryWriter, Handler, Clock]:
    clock = clock or Clock()
    writer, handler = MemoryWriter(), Handler()
    runtime: CoordinatorRuntime[Shard] = CoordinatorRuntime(
        "test", "__test", 1, writer, handler, clock_ms=clock, max_wait_ms=500
    )
    return runtime, writer, handler, clock


async def until(check: Callable[[], bool]) -> None:
    """Wait (bounded) until ``check()`` holds."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), BOUND_S)


def loaded(runtime: CoordinatorRuntime[Shard], partition: int = 0) -> Callable[[], bool]:
    def check() -> bool:
        try:
            runtime.shard(partition)
        except ShardUnavailable:
            return False
        return True

    return check


def put(key: str, value: str) -> Callable[[Shard, object, int], CoordinatorResult]:
    return lambda shard, token, _now: shard.put(key, value, token)


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


def test_an_operation_is_answered_once_its_records_are_committed() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        writer.append_gate.clear()
        call = asyncio.create_task(runtime.call(0, put("a", "1")))
        await until(lambda: writer.in_flight == 1)
        assert not call.done()  # written, not yet committed: not answered
        writer.append_gate.set()
        assert await asyncio.wait_for(call, BOUND_S) == "ok"
        assert writer.logs[0] == [LogEntry(b"a", b"1")]

    run(main)


def test_a_failed_write_fails_the_operation_and_reloads_the_shard() -> None:
    async def main() -> None:
        runtime, writer, handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        first = runtime.shard(0)
        writer.fail_next = kerr.NotEnoughReplicasError
        assert await asyncio.wait_for(runtime.call(0, put("a", "1")), BOUND_S) is kerr.CoordinatorNotAvailableError
        await until(lambda: loaded(runtime)() and runtime.shard(0) is not first)
        assert handler.loads == 2
        assert runtime.shard(0).state == {}  # the state that ran ahead of the failed write is gone
        with pytest.raises(ShardUnavailable):
            runtime.run(first, lambda: first.put("b", "2", None))  # the old shard serves no more

    run(main)


def test_requests_during_a_load_are_told_load_in_progress() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        writer.load_gate.clear()
        runtime.follow({0: 5})
        with pytest.raises(ShardUnavailable) as loading:
            runtime.shard(0)
        assert loading.value.error is kerr.CoordinatorLoadInProgressError
        with pytest.raises(ShardUnavailable) as elsewhere:
            runtime.shard(1)
        assert elsewhere.value.error is kerr.NotCoordinatorError
        writer.load_gate.set()
        await until(loaded(runtime))

    run(main)


def test_leadership_lost_mid_operation_answers_not_coordinator() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        shard = runtime.shard(0)
        parked = asyncio.get_running_loop().create_future()
        runtime.run(shard, lambda: shard.park(parked))
        writer.append_gate.clear()
        call = asyncio.create_task(runtime.call(0, put("a", "1")))
        await until(lambda: writer.in_flight == 1)
        parked2 = asyncio.get_running_loop().create_future()
        runtime.run(shard, lambda: shard.park(parked2))  # parked behind the write in flight
        runtime.follow({})  # another broker leads the partition now
        with pytest.raises(ShardUnavailable) as lost:
            await asyncio.wait_for(call, BOUND_S)
        assert lost.value.error is kerr.NotCoordinatorError
        with pytest.raises(ShardUnavailable) as lost_parked:
            await asyncio.wait_for(parked2, BOUND_S)
        assert lost_parked.value.error is kerr.NotCoordinatorError
        writer.append_gate.set()
        await until(lambda: writer.in_flight == 0)
        with pytest.raises(ShardUnavailable) as gone:
            runtime.shard(0)
        assert gone.value.error is kerr.NotCoordinatorError

    run(main)


def test_a_new_leader_epoch_reloads_and_queued_writes_of_the_old_shard_are_not_written() -> None:
    async def main() -> None:
        runtime, writer, handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        writer.append_gate.clear()
        first = asyncio.create_task(runtime.call(0, put("a", "1")))
        await until(lambda: writer.in_flight == 1)
        second = asyncio.create_task(runtime.call(0, put("b", "2")))  # queued behind the first
        await asyncio.sleep(0)
        runtime.follow({0: 6})  # led again, at a new epoch: a new shard from the log
        writer.append_gate.set()
        for call in (first, second):
            with pytest.raises(ShardUnavailable):
                await asyncio.wait_for(call, BOUND_S)
        await until(loaded(runtime))
        assert handler.loads == 2
        assert [k for k, _v in (r for batch in writer.appends for r in batch)] == [b"a"]  # b was never written

    run(main)


def test_a_timer_that_comes_due_during_a_load_fires_once_loaded() -> None:
    async def main() -> None:
        runtime, writer, _handler, clock = make()
        writer.logs[0] = [LogEntry(b"timer", b"1500")]
        writer.load_gate.clear()
        runtime.start()
        try:
            runtime.follow({0: 5})
            clock.now_ms = 2_000  # the deadline passes while the partition loads
            runtime.fire_due(clock.now_ms)  # nothing loaded: nothing to fire
            writer.load_gate.set()
            await until(loaded(runtime))
            shard = runtime.shard(0)
            await until(lambda: shard.fired == [2_000])
            await until(lambda: writer.logs[0][-1] == LogEntry(b"fired", b"2000"))
        finally:
            await runtime.stop()

    run(main)


def test_a_timer_fires_at_its_deadline_not_before() -> None:
    async def main() -> None:
        runtime, writer, _handler, clock = make()
        writer.logs[0] = [LogEntry(b"timer", b"3000")]
        runtime.follow({0: 5})
        await until(loaded(runtime))
        shard = runtime.shard(0)
        runtime.fire_due(2_999)
        assert shard.fired == []
        clock.now_ms = 3_000
        runtime.fire_due(3_000)
        assert shard.fired == [3_000]

    run(main)


def test_writes_reach_the_log_in_the_order_the_shard_changed() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        writer.append_gate.clear()
        answered: list[str] = []

        async def call(key: str) -> None:
            assert await runtime.call(0, put(key, key)) == "ok"
            answered.append(key)

        calls = [asyncio.create_task(call("a"))]
        await until(lambda: writer.in_flight == 1)  # a is being written
        calls += [asyncio.create_task(call(k)) for k in "bcde"]
        await until(lambda: len(runtime.shard(0).state) == 5)
        writer.append_gate.set()
        await asyncio.wait_for(asyncio.gather(*calls), BOUND_S)
        assert [e.key for e in writer.logs[0]] == [b"a", b"b", b"c", b"d", b"e"]
        assert answered == list("abcde")
        assert len(writer.appends) == 2  # a alone; b..e queued meanwhile went in one append

    run(main)


def test_merged_results_are_one_append_and_continue_in_order() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        shard = runtime.shard(0)
        a, b = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
        runtime.run(shard, lambda: merge(shard.put("a", "1", a), shard.put("b", "2", b)))
        assert await asyncio.wait_for(a, BOUND_S) == "ok" and await asyncio.wait_for(b, BOUND_S) == "ok"
        assert writer.appends == [[(b"a", b"1"), (b"b", b"2")]]

    run(main)


def test_the_timer_wait_is_capped() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        assert runtime.wait_ms(1_000) == 500  # nothing due: the cap
        writer.logs[0] = [LogEntry(b"timer", b"3600000")]
        writer.logs[1] = [LogEntry(b"timer", b"1200")]
        runtime.follow({0: 5, 1: 5})
        await until(lambda: loaded(runtime, 0)() and loaded(runtime, 1)())
        assert runtime.wait_ms(1_000) == 200  # the earliest deadline
        assert runtime.wait_ms(5_000) == 0  # past due
        runtime.fire_due(5_000)
        assert runtime.wait_ms(5_000) == 500  # an hour away: capped

    run(main)


@pytest.mark.parametrize(
    ("written", "told"),
    [
        (kerr.UnknownTopicOrPartitionError, kerr.CoordinatorNotAvailableError),
        (kerr.NotEnoughReplicasError, kerr.CoordinatorNotAvailableError),
        (kerr.NotEnoughReplicasAfterAppendError, kerr.CoordinatorNotAvailableError),
        (kerr.RequestTimedOutError, kerr.CoordinatorNotAvailableError),
        (kerr.NotLeaderOrFollowerError, kerr.NotCoordinatorError),
        (kerr.KafkaStorageError, kerr.NotCoordinatorError),
        (kerr.MessageTooLargeError, kerr.UnknownServerError),
        (kerr.RecordListTooLargeError, kerr.UnknownServerError),
        (kerr.InvalidFetchSizeError, kerr.UnknownServerError),
        (kerr.InvalidRequestError, kerr.InvalidRequestError),
        (kerr.CoordinatorNotAvailableError, kerr.CoordinatorNotAvailableError),
        (kerr.NotCoordinatorError, kerr.NotCoordinatorError),
    ],
)
def test_kafkas_append_error_mapping(written: type[kerr.KafkaError], told: type[kerr.KafkaError]) -> None:
    assert coordinator_error(written) is told
    assert coordinator_error(coordinator_error(written)) is told  # mapping twice changes nothing


def test_call_at_shares_the_deadline_queue() -> None:
    runtime, _writer, _handler, _clock = make()
    ran: list[str] = []
    runtime.call_at(1_300, lambda: ran.append("retry"))
    assert runtime.wait_ms(1_000) == 300
    runtime.fire_due(1_299)
    assert ran == []
    runtime.fire_due(1_300)
    assert ran == ["retry"]
    assert runtime.wait_ms(1_300) == 500  # nothing left: the cap


def test_a_continuation_that_raises_does_not_stop_the_ones_after_it() -> None:
    async def main() -> None:
        runtime, writer, _handler, _clock = make()
        runtime.follow({0: 5})
        await until(loaded(runtime))
        shard = runtime.shard(0)

        def broken(_error: Error, _now_ms: int) -> CoordinatorResult:
            raise RuntimeError("a bug in the core")

        writer.append_gate.clear()
        runtime.run(shard, lambda: CoordinatorResult(records=[("x", "1")], then=broken))
        after = asyncio.get_running_loop().create_future()
        runtime.run(shard, lambda: shard.put("y", "2", after))
        writer.append_gate.set()
        assert await asyncio.wait_for(after, BOUND_S) == "ok"
        assert [e.key for e in writer.logs[0]] == [b"x", b"y"]

    run(main)


def test_results_of_group_timers_fired_inside_a_transactional_commit_are_not_left_waiting() -> None:
    """A classic group runs its due timers inside any call that checks membership, and keeps what
    they set off (answers, records) for its next `poll`. A TxnOffsetCommit is such a call but its
    result is the producer's transactional write, so the group's output cannot ride along: the
    runtime must poll the shard at once, not at the group's next timer (the review of issue 23
    found a rebalance completed inside a commit whose parked JoinGroup waited 10 minutes)."""
    import random

    import structlog

    from kraftlog.broker.groups._group_classic_types import JoinRequest, Protocol, SyncRequest
    from kraftlog.broker.groups._group_coordinator import GroupShards
    from kraftlog.broker.groups._group_shard import GroupShardConfig
    from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest

    async def main() -> None:
        clock = Clock(0)
        handler = GroupShards(GroupShardConfig(), random.Random(3), structlog.get_logger())
        runtime: CoordinatorRuntime[Any] = CoordinatorRuntime(
            "groups", "__consumer_offsets", 1, MemoryWriter(), handler, clock_ms=clock, max_wait_ms=600_000
        )
        runtime.start()
        try:
            runtime.follow({0: 1})
            await until(loaded(runtime))  # type: ignore[arg-type]
            shard = runtime.shard(0)
            loop = asyncio.get_running_loop()

            def parked(call: Callable[[object], Any]) -> asyncio.Future[Any]:
                token: asyncio.Future[Any] = loop.create_future()
                runtime.run(shard, lambda: call(token))
                return token

            def join(member_id: str) -> JoinRequest:
                return JoinRequest("g", member_id, "consumer", (Protocol("range", b"m"),), 10_000, 30_000)

            a = (await parked(lambda t: shard.join(join(""), t, clock()))).member_id  # MEMBER_ID_REQUIRED
            b = (await parked(lambda t: shard.join(join(""), t, clock()))).member_id
            joined_a = parked(lambda t: shard.join(join(a), t, clock()))
            joined_b = parked(lambda t: shard.join(join(b), t, clock()))
            clock.now_ms += 6_001  # past the initial rebalance delay
            runtime.wake()
            first = await asyncio.wait_for(joined_a, BOUND_S)
            second = await asyncio.wait_for(joined_b, BOUND_S)
            leader = first if first.members else second
            assignments = tuple((m.member_id, b"A") for m in leader.members)
            sync = SyncRequest("g", leader.member_id, leader.generation_id, assignments=assignments)
            await asyncio.wait_for(parked(lambda t: shard.sync(sync, t, clock())), BOUND_S)

            rejoin = parked(lambda t: shard.join(join(a), t, clock()))  # a rebalance starts, a waits
            clock.now_ms += 31_000  # past b's session and the rebalance timeout, before any timer ran
            commit = TxnOffsetCommitRequest(
                "g", 77, 0, (("t", 0, 1, -1, ""),), member_id=b, generation_id=first.generation_id
            )
            await asyncio.wait_for(parked(lambda t: shard.txn_commit_offsets(commit, t, clock())), BOUND_S)
            answer = await asyncio.wait_for(rejoin, BOUND_S)  # the clock does not move again
            assert answer.error is None and answer.generation_id > first.generation_id
        finally:
            await runtime.stop()

    run(main)
