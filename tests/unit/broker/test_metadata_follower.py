"""The broker's metadata follower: which controller it follows and when it moves (issue 11, defect 4).

No sockets: fake FetchMetadata streams and an injected clock. A fake stream advances the fake clock
by one keep-alive interval (F/4) per read, so hours of keep-alives cost microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

import kraftlog.broker.replica._metadata_follower as mf
from kraftlog.broker._lifecycle import BrokerLifecycle
from kraftlog.metadata_log import (
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    encode_entry,
    encode_record,
)
from kraftlog.proto import controller_pb2

F = 2.0  # controller.quorum.fetch.timeout.ms, in seconds
KEEPALIVE = F / 4


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def entries(*names: str, start: int = 0, epoch: int = 3) -> list[bytes]:
    """A NoOp at ``start``, then one TopicRecord per name."""
    out = [encode_entry(LogEntry(start, epoch, 0, NoOpRecord()))]
    for i, name in enumerate(names, start + 1):
        out.append(encode_entry(LogEntry(i, epoch, 0, TopicRecord(name=name, topic_id=f"id-{name}"))))
    return out


def batch(*, leader: int, epoch: int, hw: int, raw: list[bytes] = ()) -> controller_pb2.MetadataBatch:
    return controller_pb2.MetadataBatch(
        entries=list(raw),
        snapshot_offset=-1,
        high_watermark=hw,
        leader_id=leader,
        leader_epoch=epoch,
        keep_alive=not raw,
    )


# ---------------------------------------------------------------- SourceMonitor: the rules alone


def test_a_healthy_source_is_kept() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    for hw in range(20):  # a keep-alive or a batch every F/4, the heartbeat's offset reached at once
        m.on_quorum_high_watermark(hw)
        clock.now += 0.1
        assert m.on_batch(leader_id=1, leader_epoch=3, high_watermark=hw) is None
        clock.now += KEEPALIVE - 0.1
        assert m.reason_to_leave() is None
    assert m.seconds_to_next_check() == pytest.approx(F - KEEPALIVE + 0.1)


def test_a_silent_source_is_left_after_one_fetch_timeout() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    assert m.seconds_to_next_check() == F
    clock.now += F - 0.01
    assert m.reason_to_leave() is None
    clock.now += 0.01
    assert "no message" in m.reason_to_leave()


def test_a_source_that_knows_no_leader_is_left_after_a_quarter_fetch_timeout() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    assert m.on_batch(leader_id=-1, leader_epoch=7, high_watermark=5) is None
    assert m.seconds_to_next_check() == pytest.approx(KEEPALIVE)
    clock.now += KEEPALIVE / 2
    assert m.on_batch(leader_id=-1, leader_epoch=8, high_watermark=5) is None
    assert m.reason_to_leave() is None
    clock.now += KEEPALIVE / 2
    assert "no leader" in m.reason_to_leave()


def test_an_election_that_ends_within_the_grace_keeps_the_source() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    m.on_batch(leader_id=-1, leader_epoch=4, high_watermark=5)
    clock.now += KEEPALIVE - 0.01
    m.on_batch(leader_id=2, leader_epoch=4, high_watermark=6)
    clock.now += 1.0
    assert m.reason_to_leave() is None


def test_a_source_behind_the_quorum_is_left_after_a_quarter_fetch_timeout() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=5)
    m.on_quorum_high_watermark(9)  # a heartbeat answer: the quorum committed up to 9
    assert m.seconds_to_next_check() == pytest.approx(KEEPALIVE)
    clock.now += KEEPALIVE / 2
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=7)  # progress, still behind
    assert m.reason_to_leave() is None
    clock.now += KEEPALIVE / 2
    assert "behind the quorum's 9" in m.reason_to_leave()


def test_catching_up_with_the_quorum_clears_the_lag() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=5)
    m.on_quorum_high_watermark(9)
    clock.now += KEEPALIVE - 0.01
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=9)
    clock.now += 1.0
    assert m.reason_to_leave() is None


def test_a_new_source_is_judged_afresh_but_the_quorum_is_remembered() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=9)
    m.begin()
    clock.now += KEEPALIVE  # before its first batch the new source is only judged by silence
    assert m.reason_to_leave() is None
    m.on_batch(leader_id=1, leader_epoch=3, high_watermark=4)  # it lags what the last one served
    clock.now += KEEPALIVE
    assert "behind the quorum's 9" in m.reason_to_leave()


def test_a_leader_of_an_older_epoch_is_refused_but_a_leaderless_term_never_raises_the_bar() -> None:
    clock = Clock()
    m = mf.SourceMonitor(F, clock)
    m.begin()
    for term in range(4, 40):  # a cut-off standby campaigning: its term grows, no leader
        assert m.on_batch(leader_id=-1, leader_epoch=term, high_watermark=5) is None
    assert m.leader_epoch == -1
    assert m.on_batch(leader_id=1, leader_epoch=3, high_watermark=9) is None
    assert m.leader_epoch == 3
    refused = m.on_batch(leader_id=2, leader_epoch=2, high_watermark=9)
    assert refused is not None and "epoch 2, older than leader epoch 3" in refused


# ---------------------------------------------------------------- the follower on fake streams


def test_a_leaderless_standby_with_an_inflated_term_does_not_make_the_real_leader_refused() -> None:
    """The defect as it was: a cut-off standby's campaign terms raised the epoch the follower
    demanded, so the real leader's stream (a lower epoch) was refused as stale."""
    follower = mf.MetadataFollower(["standby", "leader"], broker_id=101, listener=lambda *a: None)
    follower._apply(batch(leader=1, epoch=3, hw=1, raw=entries("a")))
    for term in (4, 5, 6):
        follower._apply(batch(leader=-1, epoch=term, hw=1))
    follower._apply(batch(leader=1, epoch=3, hw=2, raw=entries("a", "b")))
    assert set(follower.image.topics.by_name) == {"a", "b"}
    assert follower.image.offset == 2


class FakeController:
    """A FetchMetadata stream: scripted batches (or callables run at that point), then endless
    keep-alives from ``keepalive()``; every read advances the clock by one keep-alive interval."""

    def __init__(
        self,
        clock: Clock,
        script: list[Any],
        keepalive: Callable[[], controller_pb2.MetadataBatch],
        limit: int = 10_000,
    ) -> None:
        self.clock = clock
        self.script = list(script)
        self.keepalive = keepalive
        self.reads = 0
        self.limit = limit
        self.requests: list[controller_pb2.FetchMetadataRequest] = []

    async def read(self) -> Any:
        await asyncio.sleep(0)
        self.reads += 1
        if self.reads > self.limit:
            return grpc.aio.EOF
        while self.script and callable(self.script[0]):
            self.script.pop(0)()
        self.clock.now += KEEPALIVE
        return self.script.pop(0) if self.script else self.keepalive()


class NoShuffle(random.Random):
    def shuffle(self, x: Any) -> None:
        pass


def run_follower(
    controllers: dict[str, FakeController],
    clock: Clock,
    until: Callable[[mf.MetadataFollower], bool],
    before: Callable[[mf.MetadataFollower], None] = lambda f: None,
) -> mf.MetadataFollower:
    @contextlib.asynccontextmanager
    async def open_stream(address: str, request: controller_pb2.FetchMetadataRequest) -> AsyncIterator[Any]:
        controllers[address].requests.append(request)
        yield controllers[address]

    async def main() -> mf.MetadataFollower:
        done = asyncio.Event()

        def listener(*_: Any) -> None:
            if until(follower):
                done.set()

        follower = mf.MetadataFollower(
            list(controllers),
            broker_id=101,
            listener=listener,
            fetch_timeout_ms=int(F * 1000),
            open_stream=open_stream,
            clock=clock,
            rng=NoShuffle(),
        )
        before(follower)
        follower.start()
        try:
            await asyncio.wait_for(done.wait(), 10)  # a real-time bound only: nothing here sleeps
        finally:
            await follower.stop()
        return follower

    return asyncio.run(main())


def test_follower_leaves_a_cut_off_standby_that_still_names_the_leader() -> None:
    """Rule 3: the standby keeps naming the leader of epoch 3, but the heartbeat answer says the
    quorum committed up to offset 2; the standby stays at 1."""
    clock = Clock()
    follower_box: list[mf.MetadataFollower] = []
    standby = FakeController(
        clock,
        [batch(leader=1, epoch=3, hw=1, raw=entries("a")), lambda: follower_box[0].note_quorum_high_watermark(2)],
        keepalive=lambda: batch(leader=1, epoch=3, hw=1),
    )
    leader = FakeController(
        clock, [batch(leader=1, epoch=3, hw=2, raw=entries("a", "b"))], keepalive=lambda: batch(leader=1, epoch=3, hw=2)
    )
    follower = run_follower(
        {"standby": standby, "leader": leader},
        clock,
        until=lambda f: "b" in f.image.topics.by_name,
        before=follower_box.append,
    )
    assert follower.image.offset == 2
    assert leader.requests[0].from_offset == 2  # resumed after what the standby had served
    # left after a quarter fetch timeout of lag (plus the read that noticed it), long before 2 x F
    assert standby.reads * KEEPALIVE <= 2 * F
    assert standby.reads <= 4


def test_follower_leaves_a_campaigning_standby_and_accepts_the_lower_epoch_leader() -> None:
    """Rule 2 with the inflated term: no heartbeat news at all, the standby only says it lost the
    leader (and its term climbs); the follower moves on and takes the real leader's epoch 3."""
    clock = Clock()
    terms = iter(range(4, 1000))
    standby = FakeController(
        clock,
        [batch(leader=1, epoch=3, hw=1, raw=entries("a"))],
        keepalive=lambda: batch(leader=-1, epoch=next(terms), hw=1),
    )
    leader = FakeController(
        clock, [batch(leader=1, epoch=3, hw=2, raw=entries("a", "b"))], keepalive=lambda: batch(leader=1, epoch=3, hw=2)
    )
    follower = run_follower(
        {"standby": standby, "leader": leader}, clock, until=lambda f: "b" in f.image.topics.by_name
    )
    assert follower.image.offset == 2 and follower.highest_epoch_seen == 3
    assert standby.reads <= 4


def test_follower_stays_on_a_healthy_standby() -> None:
    clock = Clock()
    follower_box: list[mf.MetadataFollower] = []
    hw = [1]

    def commit_more() -> controller_pb2.MetadataBatch:
        # the quorum commits one more topic every few keep-alives; the standby serves it at once
        hw[0] += 1
        follower_box[0].note_quorum_high_watermark(hw[0])
        return batch(leader=1, epoch=3, hw=hw[0], raw=[entries(*(f"t{i}" for i in range(1, hw[0] + 1)))[hw[0]]])

    standby = FakeController(clock, [batch(leader=1, epoch=3, hw=1, raw=entries("t1"))], keepalive=commit_more)
    leader = FakeController(clock, [], keepalive=lambda: batch(leader=1, epoch=3, hw=hw[0]))
    follower = run_follower(
        {"standby": standby, "leader": leader}, clock, until=lambda f: f.image.offset >= 30, before=follower_box.append
    )
    assert leader.requests == []
    assert follower.source == "standby"


# ---------------------------------------------------------------- the initial catch-up (issue 23)

TID = "id-t"


def history(start: int, *records: MetadataRecord, epoch: int = 3) -> list[bytes]:
    return [encode_entry(LogEntry(start + i, epoch, 0, r)) for i, r in enumerate(records)]


# A restarted broker 101 replays this log: it led partition 0 in epoch 0, then lost it to 102
# (epoch 1), got it back (epoch 2) and lost it again (epoch 3).
CREATED = (
    NoOpRecord(),
    TopicRecord(name="t", topic_id=TID),
    PartitionRecord(partition_id=0, topic_id=TID, replicas=(101, 102), isr=(101, 102), leader=101),
)
MOVES = (
    PartitionChangeRecord(partition_id=0, topic_id=TID, leader=102),
    PartitionChangeRecord(partition_id=0, topic_id=TID, leader=101),
    PartitionChangeRecord(partition_id=0, topic_id=TID, leader=102),
)

Published = list[tuple[MetadataDelta | None, MetadataImage, MetadataImage]]


def recording_follower(
    *, catch_up_to_active_controller: bool = False, on_caught_up: Callable[[], None] = lambda: None
) -> tuple[mf.MetadataFollower, Published]:
    published: Published = []
    follower = mf.MetadataFollower(
        ["c"],
        broker_id=101,
        listener=lambda delta, image, old: published.append((delta, image, old)),
        catch_up_to_active_controller=catch_up_to_active_controller,
        on_caught_up=on_caught_up,
    )
    return follower, published


def leader_of(image: MetadataImage) -> tuple[int, int]:
    topic = image.topics.get_by_name("t")
    assert topic is not None
    reg = topic.partitions[0]
    return reg.leader, reg.leader_epoch


def test_a_restarted_broker_publishes_nothing_before_it_has_caught_up() -> None:
    """The defect: every batch was published as it arrived, so the replica manager of a restarted
    broker was told it leads partition 0 in epoch 0 (the log's first PartitionRecord), and then in
    epoch 2, long after both stopped being true. Kafka's broker publishes after the catch-up."""
    follower, published = recording_follower()
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(0, *CREATED)))
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(3, *MOVES[:2])))
    assert published == []
    assert follower.offset == -1  # the heartbeat's offset: the controller does not unfence it yet
    assert follower.image is MetadataImage.EMPTY

    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(5, MOVES[2])))
    assert len(published) == 1
    delta, image, old = published[0]
    assert old is MetadataImage.EMPTY and image.offset == 5 and follower.offset == 5
    assert leader_of(image) == (102, 3)  # only the final state: never leader in epoch 0 or 2
    assert delta is not None and delta.image is old and delta.changed_partitions == {TID: {0}}
    assert follower.image is image


def test_after_the_catch_up_each_batch_is_published_on_its_own() -> None:
    """Leadership changes after the catch-up still reach the replica manager one at a time."""
    follower, published = recording_follower()
    follower._apply(batch(leader=1, epoch=3, hw=3, raw=history(0, *CREATED, MOVES[0])))
    assert [leader_of(image) for _, image, _ in published] == [(102, 1)]
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(4, MOVES[1])))
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(5, MOVES[2])))
    assert [leader_of(image) for _, image, _ in published] == [(102, 1), (101, 2), (102, 3)]
    for (_, previous, _), (delta, _, old) in zip(published, published[1:], strict=False):
        assert old is previous and delta is not None and delta.image is previous


def test_the_catch_up_waits_for_the_quorum_offset_a_heartbeat_taught() -> None:
    """A standby that lags serves a high watermark below the quorum's: reaching the source's
    committed offset is not enough when a heartbeat said the quorum committed more."""
    follower, published = recording_follower()
    follower.note_quorum_high_watermark(5)
    follower._apply(batch(leader=1, epoch=3, hw=3, raw=history(0, *CREATED, MOVES[0])))
    assert published == []
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(4, *MOVES[1:])))
    assert [leader_of(image) for _, image, _ in published] == [(102, 3)]


def test_a_snapshot_loaded_during_the_catch_up_is_published_with_what_follows_it() -> None:
    """The same hazard from the controller's snapshot: it names 101 leader in epoch 2, entries
    after it move the partition on. One publish, as a snapshot (no delta), of the final state."""
    follower, published = recording_follower()
    snapshot = [
        TopicRecord(name="t", topic_id=TID),
        PartitionRecord(partition_id=0, topic_id=TID, replicas=(101, 102), isr=(101, 102), leader=101, leader_epoch=2),
    ]
    follower._apply(
        controller_pb2.MetadataBatch(
            snapshot_records=[encode_record(r) for r in snapshot],
            snapshot_offset=4,
            snapshot_epoch=3,
            high_watermark=5,
            leader_id=1,
            leader_epoch=3,
        )
    )
    assert published == []
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(5, MOVES[2])))
    assert len(published) == 1
    delta, image, old = published[0]
    assert delta is None and old is MetadataImage.EMPTY and image.offset == 5
    assert leader_of(image) == (102, 3)


def test_the_stream_resumes_after_what_was_loaded_not_what_was_published() -> None:
    """A source left mid-catch-up: the next one is asked for the entries after those loaded."""
    clock = Clock()
    first = FakeController(
        clock,
        [batch(leader=1, epoch=3, hw=5, raw=history(0, *CREATED))],
        keepalive=lambda: batch(leader=-1, epoch=4, hw=2),
    )
    second = FakeController(
        clock,
        [batch(leader=1, epoch=3, hw=5, raw=history(3, *MOVES))],
        keepalive=lambda: batch(leader=1, epoch=3, hw=5),
    )
    follower = run_follower({"first": first, "second": second}, clock, until=lambda f: f.offset == 5)
    assert second.requests[0].from_offset == 3
    assert leader_of(follower.image) == (102, 3)


def test_the_broker_waits_for_the_active_controllers_offset_before_it_ends_the_catch_up() -> None:
    """A standby that restarted from its local snapshot serves what it replayed so far, with that
    as its committed offset: a broker that only trusted it would publish an old state (leader in
    epoch 2 here). The broker's follower also waits for the active controller's offset."""
    caught_up: list[int] = []
    follower, published = recording_follower(
        catch_up_to_active_controller=True, on_caught_up=lambda: caught_up.append(follower.offset)
    )
    follower._apply(batch(leader=1, epoch=3, hw=4, raw=history(0, *CREATED, *MOVES[:2])))
    assert published == [] and follower.offset == -1 and caught_up == []
    follower.note_quorum_high_watermark(5)  # the first heartbeat answer
    follower._apply(batch(leader=1, epoch=3, hw=5, raw=history(5, MOVES[2])))
    assert [leader_of(image) for _, image, _ in published] == [(102, 3)]
    follower._apply(batch(leader=1, epoch=3, hw=6, raw=history(6, PartitionChangeRecord(0, TID, isr=(102,)))))
    assert len(published) == 2
    assert caught_up == [5]  # once, with the offset published: the broker heartbeats it at once


def test_the_active_controllers_offset_ends_a_catch_up_already_loaded() -> None:
    """Everything loaded before the first heartbeat answer: the catch-up ends when it comes."""
    clock = Clock()
    box: list[mf.MetadataFollower] = []
    heard: list[int] = []

    def heartbeat_answer() -> None:
        heard.append(5)
        box[0].note_quorum_high_watermark(5)

    def set_up(f: mf.MetadataFollower) -> None:
        box.append(f)
        f._catch_up_needs_active = True  # what the broker's `catch_up_to_active_controller=True` sets

    source = FakeController(
        clock,
        [batch(leader=1, epoch=3, hw=5, raw=history(0, *CREATED, *MOVES)), heartbeat_answer],
        keepalive=lambda: batch(leader=1, epoch=3, hw=5),
    )
    offsets: list[tuple[int, bool]] = []

    def until(f: mf.MetadataFollower) -> bool:
        offsets.append((f.offset, bool(heard)))
        return True

    follower = run_follower({"c": source}, clock, until=until, before=set_up)
    assert offsets == [(5, True)]
    assert leader_of(follower.image) == (102, 3)


# ---------------------------------------------------------------- the lifecycle hands the offset on


class FakeChannel:
    def __init__(self, response: controller_pb2.BrokerHeartbeatResponse) -> None:
        self.response = response

    async def call(self, service: str, method: str, request: Any, *, timeout_s: float) -> Any:
        return self.response


@pytest.mark.parametrize("error_code, expected", [(0, [42]), (41, [])])
def test_heartbeat_answers_feed_the_quorum_high_watermark(error_code: int, expected: list[int]) -> None:
    seen: list[int] = []
    resp = controller_pb2.BrokerHeartbeatResponse(metadata_high_watermark=42, is_fenced=False)
    resp.error.code = error_code
    lifecycle = BrokerLifecycle(
        FakeChannel(resp),
        broker_id=101,
        cluster_id="c",
        listeners=[],
        rack=None,
        log_dirs=[],
        heartbeat_interval_ms=2000,
        metadata_offset=lambda: 0,
        on_quorum_high_watermark=seen.append,
    )
    lifecycle.broker_epoch = 7
    asyncio.run(lifecycle._heartbeat())
    assert seen == expected


def test_heartbeat_now_during_a_heartbeat_sends_the_next_one_at_once() -> None:
    """The catch-up ends while a heartbeat is in flight (it reported the old offset): the next one
    goes at once, not a heartbeat interval (a minute here) later, so unfencing is not delayed."""

    async def main() -> list[int]:
        offsets: list[int] = []
        lifecycle: BrokerLifecycle

        class Channel:
            async def call(self, service: str, method: str, request: Any, *, timeout_s: float) -> Any:
                offsets.append(request.current_metadata_offset)
                await asyncio.sleep(0)
                if len(offsets) == 1:
                    published[0] = 9
                    lifecycle.heartbeat_now()  # what the follower's on_caught_up does
                return controller_pb2.BrokerHeartbeatResponse(metadata_high_watermark=9, is_fenced=True)

        published = [-1]
        lifecycle = BrokerLifecycle(
            Channel(),  # type: ignore[arg-type]
            broker_id=101,
            cluster_id="c",
            listeners=[],
            rack=None,
            log_dirs=[],
            heartbeat_interval_ms=60_000,
            metadata_offset=lambda: published[0],
        )
        lifecycle.broker_epoch = 7
        lifecycle.start()
        try:
            for _ in range(500):  # bounded poll: a few event-loop turns are enough
                if len(offsets) >= 2:
                    break
                await asyncio.sleep(0.01)
        finally:
            await lifecycle.stop()
        return offsets

    assert asyncio.run(main())[:2] == [-1, 9]
