"""The replica manager when a log dir fails (issue 28, ``disk_full``; Kafka's
ReplicaManager.handleLogDirFailure): the dir's replicas are no longer served (KAFKA_STORAGE_ERROR),
reported for the heartbeat, left alone by later metadata; the other dir's are served; with no
dir left the broker halts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraftlog.broker.replica._replica_manager import ReplicaManager
from kraftlog.metadata_log import PartitionChangeRecord, PartitionRecord, TopicRecord
from kraftlog.storage import NO_SPACE_FILE, _fault_hooks
from tests.unit.broker.test_replica_manager import (
    TOPIC_ID,
    FakeSender,
    Meta,
    batch,
    broker,
    node_config,
    presp,
    produce_req,
)


def _rm(tmp_path: Path, dirs: list[Path]) -> tuple[ReplicaManager, Meta, list[int]]:
    cfg = node_config(1, dirs[0], **{"log.dirs": ",".join(map(str, dirs))})
    rm = ReplicaManager.create(1, cfg, FakeSender())
    halts: list[int] = []
    rm.halt = halts.append
    rm.startup()
    meta = Meta()
    meta.rms.append(rm)
    recs: list[object] = [broker(b) for b in (1, 2, 3)]
    recs.append(TopicRecord(name="t", topic_id=TOPIC_ID))
    for pid in range(2):
        recs.append(
            PartitionRecord(
                partition_id=pid,
                topic_id=TOPIC_ID,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    meta.commit(*recs)
    return rm, meta, halts


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "faults"
    d.mkdir()
    monkeypatch.setattr(_fault_hooks, "_REREAD_S", 0.0)
    monkeypatch.setattr(_fault_hooks, "_no_space", _fault_hooks._NoSpace(d))
    return d


def test_a_failed_dir_stops_its_replicas_and_the_other_dir_serves(tmp_path: Path, control: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    rm, meta, halts = _rm(tmp_path, [a, b])
    told: list[int] = []
    rm.offline_listeners.append(lambda: told.append(1))
    assert (rm.log_manager.dir_of("t", 0), rm.log_manager.dir_of("t", 1)) == (a, b)
    (control / NO_SPACE_FILE).write_text(f"{a}\n", encoding="utf-8")

    async def go() -> None:
        resp = await rm.produce(produce_req({0: batch(2), 1: batch(2)}, acks=1))
        assert presp(resp, 0).error.name == "KAFKA_STORAGE_ERROR"
        assert presp(resp, 1).error.name == "NONE"
        again = await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert presp(again, 0).error.name == "KAFKA_STORAGE_ERROR"  # offline: not served at all

    asyncio.run(go())
    assert rm.get_partition("t", 0) is None and rm.get_partition("t", 1) is not None
    assert rm.offline_partitions() == {TOPIC_ID: [0]} and told == [1] and halts == []
    # the controller moves the leadership away and back: the offline replica is left alone
    meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2, isr=(2,)))
    meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1, isr=(1, 2)))
    assert rm.get_partition("t", 0) is None and rm.log_manager.get_log("t", 0) is None
    assert not (b / "t-0").exists()  # never re-created in the live dir
    asyncio.run(rm.shutdown())


def test_with_no_dir_left_the_broker_halts(tmp_path: Path, control: Path) -> None:
    a = tmp_path / "a"
    rm, _meta, halts = _rm(tmp_path, [a])
    (control / NO_SPACE_FILE).write_text(f"{a}\n", encoding="utf-8")

    async def go() -> None:
        resp = await rm.produce(produce_req({0: batch(2)}, acks=1))
        assert presp(resp, 0).error.name == "KAFKA_STORAGE_ERROR"

    asyncio.run(go())
    assert halts == [1]
