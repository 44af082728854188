"""Partition (leader/follower state, HW, ISR through AlterPartition with KIP-497) and the
AlterPartitionManager. No sockets; an injected clock; storage logs in tmp_path."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.broker.replica._alter_partition import AlterPartitionManager, AlterPartitionResult
from kraftlog.broker.replica._partition import Partition
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import PartitionRegistration
from kraftlog.proto import controller_pb2, errors_pb2


class Clock:
    """A manual clock, starting at the wall clock (storage checks batch timestamps against it)."""

    def __init__(self, now: int | None = None) -> None:
        self.now = int(time.time() * 1000) if now is None else now

    def __call__(self) -> int:
        return self.now


class FakeSender:
    """An AlterPartitionSender whose futures the test resolves."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int, tuple[int, ...], asyncio.Future[AlterPartitionResult]]] = []

    def submit(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
    ) -> asyncio.Future[AlterPartitionResult]:
        fut: asyncio.Future[AlterPartitionResult] = asyncio.get_running_loop().create_future()
        self.calls.append((topic_id, partition, leader_epoch, partition_epoch, tuple(new_isr), fut))
        return fut

    def last(self) -> tuple[str, int, int, int, tuple[int, ...], asyncio.Future[AlterPartitionResult]]:
        return self.calls[-1]

    def commit_last(self, leader_epoch: int, partition_epoch: int) -> None:
        _tid, _p, _le, _pe, isr, fut = self.calls[-1]
        fut.set_result(AlterPartitionResult(None, "", 1, leader_epoch, isr, partition_epoch))

    def fail_last(self, err: type[kerr.KafkaError]) -> None:
        self.calls[-1][5].set_result(AlterPartitionResult(err, "no"))


def batch(n: int, tag: str = "v") -> bytes:
    now = int(time.time() * 1000)
    return storage.build_batch([(None, f"{tag}{i}".encode()) for i in range(n)], timestamp_ms=now)


def reg(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, le: int, pe: int) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader, leader_epoch=le, partition_epoch=pe)


def new_partition(
    tmp_path: Path,
    clock: Clock,
    sender: FakeSender,
    *,
    min_isr: int = 1,
    lag_ms: int = 1000,
    eligible: dict[int, bool] | None = None,
    local: int = 1,
) -> Partition:
    log = storage.Log(tmp_path / f"t-{local}" / "t-0", storage.LogConfig())
    elig = eligible if eligible is not None else {}
    return Partition(
        "t",
        0,
        "tid-1",
        local_broker_id=local,
        log=log,
        alter_partition=sender,
        clock_ms=clock,
        replica_lag_time_max_ms=lag_ms,
        min_insync_replicas=min_isr,
        is_replica_eligible=lambda b, _e: elig.get(b, True),
        alter_partition_retry_ms=10,
    )


def follower_fetch(p: Partition, replica: int, offset: int, *, epoch: int = -1) -> None:
    p.fetch_records(
        fetch_offset=offset,
        max_bytes=1 << 20,
        replica_id=replica,
        last_fetched_epoch=epoch,
        current_leader_epoch=p.leader_epoch,
    )


def run(coro_fn) -> None:
    asyncio.run(coro_fn())


# ------------------------------------------------------------------------------ high watermark


def test_high_watermark_is_min_leo_over_isr(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        p = new_partition(tmp_path, clock, sender)
        assert p.make_leader(reg((1, 2, 3), (1, 2, 3), 1, 1, 1))
        p.append_records_to_leader(batch(3), 1)
        p.append_records_to_leader(batch(2), 1)
        assert p.log_end_offset == 5
        assert p.high_watermark == 0  # followers' LEOs unknown after the election
        follower_fetch(p, 2, 5)
        assert p.high_watermark == 0
        follower_fetch(p, 3, 3)
        assert p.high_watermark == 3
        follower_fetch(p, 3, 5)
        assert p.high_watermark == 5
        # never backwards, even if a follower reports less (e.g. it truncated)
        follower_fetch(p, 3, 3)
        assert p.high_watermark == 5
        assert not sender.calls

    run(main)


def test_acks_all_done_only_when_hw_passes_the_batch(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender(), min_isr=2)
        p.make_leader(reg((1, 2), (1, 2), 1, 1, 1))
        info = p.append_records_to_leader(batch(4), -1)
        required = info.last_offset + 1
        assert p.check_enough_replicas_reach_offset(required, p.leader_epoch) == (False, None)
        follower_fetch(p, 2, 2)
        assert p.check_enough_replicas_reach_offset(required, p.leader_epoch) == (False, None)
        follower_fetch(p, 2, 4)
        assert p.check_enough_replicas_reach_offset(required, p.leader_epoch) == (True, None)

    run(main)


def test_min_insync_checked_before_append(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender(), min_isr=2)
        p.make_leader(reg((1, 2), (1,), 1, 1, 1))
        with pytest.raises(kerr.NotEnoughReplicasError):
            p.append_records_to_leader(batch(1), -1)
        assert p.log_end_offset == 0  # nothing written
        p.append_records_to_leader(batch(1), 1)  # acks=1 does not check
        p.append_records_to_leader(batch(1), 0)
        assert p.log_end_offset == 2

    run(main)


def test_not_enough_replicas_after_append_when_isr_shrinks_while_waiting(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        p = new_partition(tmp_path, clock, sender, min_isr=2, lag_ms=1000)
        p.make_leader(reg((1, 2), (1, 2), 1, 1, 1))
        follower_fetch(p, 2, 0)
        info = p.append_records_to_leader(batch(2), -1)
        clock.now += 1500
        assert p.maybe_shrink_isr()
        # pending shrink: the maximal ISR still holds 2, so nothing is acknowledged yet
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1, 1) == (False, None)
        sender.commit_last(1, 2)
        await asyncio.sleep(0)
        assert p.isr == (1,)
        assert p.high_watermark == 2
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1, 1) == (
            True,
            kerr.NotEnoughReplicasAfterAppendError,
        )

    run(main)


def test_after_append_check_counts_the_maximal_isr(tmp_path: Path) -> None:
    """Kafka judges NOT_ENOUGH_REPLICAS_AFTER_APPEND against the maximal ISR: a replica whose
    expansion is in flight already holds the records (it counts for the HW), so the write is as
    safe as min.insync.replicas asks."""

    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        p = new_partition(tmp_path, clock, sender, min_isr=3)
        p.make_leader(reg((1, 2, 3), (1, 2, 3), 1, 1, 1))
        follower_fetch(p, 2, 0)
        follower_fetch(p, 3, 0)
        info = p.append_records_to_leader(batch(2), -1)
        required = info.last_offset + 1
        # the controller drops 3 (e.g. it lagged), then 3 fetches again and is proposed back
        assert p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 2))
        follower_fetch(p, 3, 0)
        assert p.isr == (1, 2) and p.maximal_isr == (1, 2, 3) and p.isr_state.inflight
        follower_fetch(p, 2, 2)
        assert p.check_enough_replicas_reach_offset(required, 1) == (False, None)
        follower_fetch(p, 3, 2)
        assert p.high_watermark == 2
        assert p.check_enough_replicas_reach_offset(required, 1) == (True, None)
        # the proposal is refused: the ISR is back to two, below min.insync.replicas
        sender.fail_last(kerr.IneligibleReplicaError)
        await asyncio.sleep(0)
        assert p.maximal_isr == (1, 2)
        assert p.check_enough_replicas_reach_offset(required, 1) == (True, kerr.NotEnoughReplicasAfterAppendError)

    run(main)


# ------------------------------------------------------------------------------ ISR changes


def test_isr_shrink_after_lag_time_with_kip497_pending_state(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        p = new_partition(tmp_path, clock, sender, lag_ms=1000)
        p.make_leader(reg((1, 2, 3), (1, 2, 3), 1, 1, 1))
        follower_fetch(p, 2, 0)
        follower_fetch(p, 3, 0)
        p.append_records_to_leader(batch(5), 1)
        clock.now += 600
        follower_fetch(p, 2, 5)  # 2 keeps up, 3 stops fetching
        assert p.high_watermark == 0
        assert not p.maybe_shrink_isr()  # 3 was caught up 600 ms ago
        clock.now += 500
        assert p.out_of_sync_replicas() == [3]
        assert p.maybe_shrink_isr()
        tid, pid, le, pe, new_isr, _fut = sender.last()
        assert (tid, pid, le, pe, new_isr) == ("tid-1", 0, 1, 1, (1, 2))
        # KIP-497: until the controller commits, the HW still waits for 3
        assert p.isr == (1, 2, 3) and p.maximal_isr == (1, 2, 3) and p.isr_state.inflight
        follower_fetch(p, 2, 5)
        assert p.high_watermark == 0
        assert not p.maybe_shrink_isr()  # one proposal at a time
        assert len(sender.calls) == 1
        sender.commit_last(1, 2)
        await asyncio.sleep(0)
        assert p.isr == (1, 2) and not p.isr_state.inflight and p.partition_epoch == 2
        assert p.high_watermark == 5

    run(main)


def test_isr_expansion_after_catch_up_with_kip497_maximal_isr(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        p = new_partition(tmp_path, clock, sender)
        p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 1))
        p.append_records_to_leader(batch(4), 1)
        follower_fetch(p, 2, 4)
        assert p.high_watermark == 4  # 3 is not in the ISR: it does not hold the HW
        follower_fetch(p, 3, 2)
        assert not sender.calls  # 3 is behind the HW
        follower_fetch(p, 3, 4)
        assert sender.last()[4] == (1, 2, 3)
        assert p.isr == (1, 2) and p.maximal_isr == (1, 2, 3)
        # while the expansion is pending, 3 already counts for the HW (maximal ISR)
        p.append_records_to_leader(batch(2), 1)
        follower_fetch(p, 2, 6)
        assert p.high_watermark == 4
        follower_fetch(p, 3, 6)
        assert p.high_watermark == 6
        sender.commit_last(1, 2)
        await asyncio.sleep(0)
        assert p.isr == (1, 2, 3) and not p.isr_state.inflight

    run(main)


def test_expansion_is_not_proposed_for_a_fenced_broker(tmp_path: Path) -> None:
    async def main() -> None:
        sender = FakeSender()
        eligible = {3: False}
        p = new_partition(tmp_path, Clock(), sender, eligible=eligible)
        p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 1))
        follower_fetch(p, 3, 0)
        assert not sender.calls
        eligible[3] = True
        follower_fetch(p, 3, 0)
        assert sender.last()[4] == (1, 2, 3)

    run(main)


def test_state_of_a_restarted_replica_holds_the_high_watermark(tmp_path: Path) -> None:
    """KIP-903: what the leader learnt from a replica's previous incarnation (its LEO) no longer
    counts for the HW once the metadata registers the replica again with a newer broker epoch:
    it may have lost unflushed records when it restarted."""

    async def main() -> None:
        epochs = {2: 12, 3: 13}
        log = storage.Log(tmp_path / "t-0", storage.LogConfig())
        p = Partition(
            "t",
            0,
            "tid-1",
            local_broker_id=1,
            log=log,
            alter_partition=FakeSender(),
            clock_ms=Clock(),
            registered_broker_epoch=lambda b: epochs.get(b, -1),
        )
        p.make_leader(reg((1, 2, 3), (1, 2, 3), 1, 1, 1))
        p.append_records_to_leader(batch(4), 1)
        p.fetch_records(fetch_offset=4, max_bytes=1 << 20, replica_id=2, replica_epoch=12)
        p.fetch_records(fetch_offset=2, max_bytes=1 << 20, replica_id=3, replica_epoch=13)
        assert p.high_watermark == 2
        epochs[2] = 20  # broker 2 restarted and registered again
        p.fetch_records(fetch_offset=4, max_bytes=1 << 20, replica_id=3, replica_epoch=13)
        assert p.high_watermark == 2  # 2's LEO of 4 was its old incarnation's
        with pytest.raises(kerr.NotLeaderOrFollowerError):
            p.fetch_records(fetch_offset=4, max_bytes=1 << 20, replica_id=2, replica_epoch=12)
        assert p.high_watermark == 2
        p.fetch_records(fetch_offset=3, max_bytes=1 << 20, replica_id=2, replica_epoch=20)
        assert p.high_watermark == 3

    run(main)


def test_alter_partition_errors(tmp_path: Path) -> None:
    async def main() -> None:
        sender = FakeSender()
        p = new_partition(tmp_path, Clock(), sender)
        p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 1))
        p.append_records_to_leader(batch(3), 1)
        follower_fetch(p, 2, 3)
        follower_fetch(p, 3, 3)
        state = p.isr_state
        assert state.inflight
        # INELIGIBLE_REPLICA: not applied, epoch current -> back to the committed ISR
        sender.fail_last(kerr.IneligibleReplicaError)
        await asyncio.sleep(0)
        assert p.isr == (1, 2) and not p.isr_state.inflight
        # INVALID_UPDATE_VERSION: our view is stale -> stay pending until the metadata says
        follower_fetch(p, 3, 3)
        sender.fail_last(kerr.InvalidUpdateVersionError)
        await asyncio.sleep(0)
        assert p.isr_state.inflight
        follower_fetch(p, 3, 3)
        assert len(sender.calls) == 2  # no new proposal while one is pending
        # the metadata log brings the committed state: same leader epoch, newer partition epoch
        assert p.make_leader(reg((1, 2, 3), (1, 2, 3), 1, 1, 3))
        assert p.isr == (1, 2, 3) and not p.isr_state.inflight and p.partition_epoch == 3
        # a retriable error is retried after the back-off
        clock_state = p.isr_state
        p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 4))
        follower_fetch(p, 3, 3)
        assert p.isr_state is not clock_state and p.isr_state.inflight
        sender.fail_last(kerr.NotControllerError)
        await asyncio.sleep(0.05)
        assert len(sender.calls) == 4 and sender.last()[4] == (1, 2, 3)
        # an answer for a superseded proposal is ignored
        p.make_leader(reg((1, 2, 3), (1, 2), 1, 1, 5))
        sender.commit_last(1, 6)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert p.isr == (1, 2) and p.partition_epoch == 5

    run(main)


# ------------------------------------------------------------------------------ leadership


def test_stale_registrations_are_ignored(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender())
        assert p.make_leader(reg((1, 2), (1, 2), 1, 3, 7))
        assert not p.make_leader(reg((1, 2), (1,), 1, 2, 9))  # older leader epoch
        assert not p.make_leader(reg((1, 2), (1,), 1, 3, 7))  # same partition epoch
        assert not p.make_follower(reg((1, 2), (2,), 2, 2, 9))
        assert p.is_leader and p.isr == (1, 2)
        assert p.make_follower(reg((1, 2), (2,), 2, 4, 8))
        assert not p.is_leader and p.leader_id == 2

    run(main)


def test_losing_leadership_fails_pending_acks_and_does_not_truncate(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender(), min_isr=1)
        p.make_leader(reg((1, 2), (1, 2), 1, 1, 1))
        info = p.append_records_to_leader(batch(3), -1)
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1, 1) == (False, None)
        assert p.make_follower(reg((1, 2), (2,), 2, 2, 2))
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1, 1) == (True, kerr.NotLeaderOrFollowerError)
        assert p.log_end_offset == 3  # becoming follower never truncates blindly
        with pytest.raises(kerr.NotLeaderOrFollowerError) as exc:
            p.append_records_to_leader(batch(1), 1)
        assert exc.value.leader_id == 2 and exc.value.leader_epoch == 2
        # re-elected in a later epoch: appends made in epoch 1 are still not acknowledged
        p.make_leader(reg((1, 2), (1, 2), 1, 3, 3))
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1, 1) == (True, kerr.NotLeaderOrFollowerError)

    run(main)


def test_fetch_epoch_checks_and_reads(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender())
        p.make_leader(reg((1, 2), (1, 2), 1, 3, 1))
        p.append_records_to_leader(batch(3), 1)
        with pytest.raises(kerr.FencedLeaderEpochError):
            p.fetch_records(fetch_offset=0, max_bytes=1000, current_leader_epoch=2)
        with pytest.raises(kerr.UnknownLeaderEpochError):
            p.fetch_records(fetch_offset=0, max_bytes=1000, current_leader_epoch=4)
        # consumer: up to the HW (0 so far); replica: up to the LEO
        r = p.fetch_records(fetch_offset=0, max_bytes=1 << 20, current_leader_epoch=3)
        assert r.records == b"" and r.high_watermark == 0 and r.log_end_offset == 3
        r = p.fetch_records(fetch_offset=0, max_bytes=1 << 20, replica_id=2)
        assert len(list(storage.iter_batches(r.records))) == 1
        with pytest.raises(kerr.NotLeaderOrFollowerError):
            p.fetch_records(fetch_offset=0, max_bytes=1000, replica_id=7)  # not a replica
        with pytest.raises(storage.OffsetOutOfRangeError):
            p.fetch_records(fetch_offset=9, max_bytes=1000, replica_id=2)

    run(main)


def test_leader_answers_diverging_epoch(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path, Clock(), FakeSender())
        p.make_leader(reg((1, 2), (1, 2), 1, 1, 1))
        p.append_records_to_leader(batch(3), 1)  # epoch 1: offsets 0..2
        p.make_leader(reg((1, 2), (1, 2), 1, 3, 2))
        p.append_records_to_leader(batch(2), 1)  # epoch 3: offsets 3..4
        assert p.log.epoch_cache.entries == [(1, 0), (3, 3)]
        # a follower that wrote offsets 3.. in epoch 2 (never the leader's) diverges at 3
        r = p.fetch_records(fetch_offset=6, max_bytes=1 << 20, replica_id=2, last_fetched_epoch=2)
        assert r.diverging_epoch == (1, 3) and r.records == b""
        assert p.replica_state(2).log_end_offset == -1  # no state update on divergence
        # a follower whose epoch-1 suffix went past the leader's epoch-1 end also diverges
        r = p.fetch_records(fetch_offset=4, max_bytes=1 << 20, replica_id=2, last_fetched_epoch=1)
        assert r.diverging_epoch == (1, 3)
        # consistent: epoch 1 up to 3, then read on
        r = p.fetch_records(fetch_offset=3, max_bytes=1 << 20, replica_id=2, last_fetched_epoch=1)
        assert r.diverging_epoch is None and r.records
        assert p.replica_state(2).log_end_offset == 3

    run(main)


def test_follower_high_watermark_and_log_start(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, Clock(), FakeSender(), local=1)
        leader.make_leader(reg((1, 2), (1, 2), 1, 1, 1))
        leader.append_records_to_leader(batch(3), 1)
        follower = new_partition(tmp_path, Clock(), FakeSender(), local=2)
        follower.make_follower(reg((1, 2), (1, 2), 1, 1, 1))
        r = leader.fetch_records(fetch_offset=0, max_bytes=1 << 20, replica_id=2)
        follower.append_records_to_follower(r.records)
        follower.update_follower_high_watermark(10, 0)
        assert follower.log_end_offset == 3 and follower.high_watermark == 3  # min(leader HW, LEO)
        assert follower.log.read(0, 1 << 20).records == leader.log.read(0, 1 << 20).records
        follower.update_follower_high_watermark(2, 1)
        assert follower.high_watermark == 2 and follower.log_start_offset == 1

    run(main)


# ------------------------------------------------------------------------------ AlterPartitionManager


def _ok_response(
    req: controller_pb2.AlterPartitionRequest, epoch_bump: int = 1
) -> controller_pb2.AlterPartitionResponse:
    R = controller_pb2.AlterPartitionResponse
    return R(
        error=errors_pb2.Error(code=0, name="NONE"),
        topics=[
            R.TopicData(
                topic_id=t.topic_id,
                partitions=[
                    R.PartitionData(
                        partition_index=p.partition_index,
                        error=errors_pb2.Error(code=0, name="NONE"),
                        leader_id=req.broker_id,
                        leader_epoch=p.leader_epoch,
                        isr=list(p.new_isr),
                        partition_epoch=p.partition_epoch + epoch_bump,
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def test_alter_partition_manager_batches_and_answers() -> None:
    async def main() -> None:
        requests: list[controller_pb2.AlterPartitionRequest] = []

        async def send(req: controller_pb2.AlterPartitionRequest) -> controller_pb2.AlterPartitionResponse:
            requests.append(req)
            return _ok_response(req)

        m = AlterPartitionManager(1, lambda: 42, send)
        f1 = m.submit("a", 0, 5, 7, (1, 2))
        f2 = m.submit("a", 1, 5, 3, (1,))
        f3 = m.submit("b", 0, 2, 2, (1, 3))
        results = await asyncio.gather(f1, f2, f3)
        assert len(requests) == 1  # one batch
        assert requests[0].broker_id == 1 and requests[0].broker_epoch == 42
        assert results[0] == AlterPartitionResult(None, "", 1, 5, (1, 2), 8)
        assert results[2].isr == (1, 3)
        await m.shutdown()

    run(main)


def test_alter_partition_manager_retries_and_one_in_flight_per_partition() -> None:
    async def main() -> None:
        requests: list[controller_pb2.AlterPartitionRequest] = []
        gate = asyncio.Event()
        mode = {"n": 0}

        async def send(req: controller_pb2.AlterPartitionRequest) -> controller_pb2.AlterPartitionResponse:
            requests.append(req)
            mode["n"] += 1
            if mode["n"] == 1:
                raise ConnectionError("controller down")
            if mode["n"] == 2:
                return controller_pb2.AlterPartitionResponse(error=errors_pb2.Error(code=41, name="NOT_CONTROLLER"))
            if mode["n"] == 3:
                await gate.wait()
            return _ok_response(req)

        m = AlterPartitionManager(1, lambda: 1, send, retry_backoff_ms=5)
        f1 = m.submit("a", 0, 1, 1, (1, 2))
        while len(requests) < 3:
            await asyncio.sleep(0.005)
        # request 3 is in flight: a new proposal for the same partition waits for its answer
        f2 = m.submit("a", 0, 1, 2, (1,))
        await asyncio.sleep(0.02)
        assert len(requests) == 3
        gate.set()
        r1, r2 = await asyncio.gather(f1, f2)
        assert r1.isr == (1, 2) and r2.isr == (1,)
        assert len(requests) == 4 and list(requests[3].topics[0].partitions[0].new_isr) == [1]
        # a queued proposal replaced before it was sent fails with OPERATION_NOT_ATTEMPTED
        gate.clear()
        mode["n"] = 2  # next: blocks on the gate
        f3 = m.submit("b", 0, 1, 1, (1,))
        await asyncio.sleep(0.01)
        f4 = m.submit("b", 0, 1, 1, (1, 2))
        f5 = m.submit("b", 0, 1, 1, (1, 3))
        with pytest.raises(kerr.OperationNotAttemptedError):
            await f4
        gate.set()
        assert (await f3).isr == (1,) and (await f5).isr == (1, 3)
        await m.shutdown()

    run(main)


def test_partition_level_errors_are_returned() -> None:
    async def main() -> None:
        async def send(req: controller_pb2.AlterPartitionRequest) -> controller_pb2.AlterPartitionResponse:
            R = controller_pb2.AlterPartitionResponse
            return R(
                error=errors_pb2.Error(code=0, name="NONE"),
                topics=[
                    R.TopicData(
                        topic_id="a",
                        partitions=[
                            R.PartitionData(
                                partition_index=0,
                                error=errors_pb2.Error(code=95, name="INVALID_UPDATE_VERSION", message="stale"),
                            )
                        ],
                    )
                ],
            )

        m = AlterPartitionManager(1, lambda: 1, send)
        r = await m.submit("a", 0, 1, 1, (1,))
        assert r.error is kerr.InvalidUpdateVersionError and r.message == "stale"
        await m.shutdown()

    run(main)
