"""BrokerHeartbeat naming replicas of a failed log dir (issue 28, ``disk_full``; Kafka's
handleDirectoriesOffline): those partitions' leaderships move and the broker leaves their ISRs;
its other partitions and its registration are untouched; the heartbeat repeats it harmlessly."""

from __future__ import annotations

from kraftlog.proto import controller_pb2
from kraftlog.quorum import controller as ctl
from tests.unit.quorum.test_controller import cluster


def test_offline_replicas_lose_leadership_and_isr_and_the_rest_stays() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3], [1, 3, 2], [2, 1, 3], [1, 2, 3]])
    before = h.topic("t").partitions
    topic_id = h.topic("t").topic_id

    def heartbeat() -> tuple[list[object], controller_pb2.BrokerHeartbeatResponse]:
        req = controller_pb2.BrokerHeartbeatRequest(
            broker_id=1,
            broker_epoch=h.epochs[1],
            current_metadata_offset=h.image.offset,
            offline_partitions=[
                controller_pb2.BrokerHeartbeatRequest.OfflineTopic(topic_id=topic_id, partitions=[0, 2])
            ],
        )
        records, resp = h.run(ctl.broker_heartbeat, req, h.heartbeats)
        return records, resp

    _records, resp = heartbeat()
    assert resp.error.name == "NONE" and not resp.is_fenced
    p = h.topic("t").partitions
    assert (p[0].leader, p[0].isr, p[0].leader_epoch) == (2, (2, 3), before[0].leader_epoch + 1)
    assert (p[2].leader, p[2].isr) == (2, (2, 3))  # a follower's replica leaves the ISR only
    assert p[1] == before[1] and p[3] == before[3]  # its other dir's replicas: untouched
    assert not h.broker(1).fenced
    # the next heartbeat repeats the report: nothing more to do
    records, _resp = heartbeat()
    assert records == []


def test_unfencing_never_elects_the_broker_where_its_log_dir_failed() -> None:
    h = cluster(2)
    h.create("t", assignments=[[1, 2], [1, 2]])
    h.alter_isr("t", 0, [1])  # the broker alone in partition 0's ISR
    h.alter_isr("t", 1, [1])
    topic_id = h.topic("t").topic_id
    h.heartbeat(1, want_fence=True)  # fenced: both partitions lose their leader
    assert h.part("t", 0).leader == -1 and h.part("t", 1).leader == -1
    req = controller_pb2.BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=h.epochs[1],
        current_metadata_offset=h.image.offset,
        offline_partitions=[controller_pb2.BrokerHeartbeatRequest.OfflineTopic(topic_id=topic_id, partitions=[0])],
    )
    _records, resp = h.run(ctl.broker_heartbeat, req, h.heartbeats)
    assert not resp.is_fenced
    assert h.part("t", 1).leader == 1  # its live dir's partition: elected again
    assert h.part("t", 0).leader == -1  # its failed dir's: not
