"""Transactions' data path on a real broker (issue 15): transactional batches hold the last stable
offset back until the coordinator's markers (WriteTxnMarkers) close them; a read_committed consumer
reads only up to it and never sees an aborted record; the broker lists the aborts it read (from
the segments' .txnindex) and still does after a restart."""

from __future__ import annotations

import time

import grpc
import pytest

from kraftlog.client import Consumer, NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc
from kraftlog.storage import RecordBatchBuilder, build_batch

pytestmark = pytest.mark.integration

TOPIC = "payments"
TP = (TOPIC, 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("txn") / "c",
        controllers=1,
        combined=True,
        # these tests write transactional batches and their markers themselves, with no
        # coordinator: the leader's check with the coordinator (KIP-890, issue 28) is off
        overrides={"broker.heartbeat.interval.ms": 500, "transaction.partition.verification.enable": False},
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
        yield c
    finally:
        c.stop()


def stub(cluster: LocalCluster) -> broker_pb2_grpc.BrokerServiceStub:
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(f"127.0.0.1:{cluster.nodes[1].broker_port}"))


def produce(cluster: LocalCluster, records: bytes) -> int:
    """acks=all, retried while the partition has no leader (after a restart), as a client does."""
    R = broker_pb2.ProduceRequest
    request = R(
        acks=-1,
        timeout_ms=10_000,
        # transactional batches name a transactional id (Kafka's rule); these tests write their
        # markers themselves, so no coordinator ever hears of it
        transactional_id="read-committed-test",
        topics=[R.TopicData(name=TOPIC, partitions=[R.PartitionData(index=0, records=records)])],
    )

    def once() -> tuple[int] | None:  # a tuple: offset 0 is an answer too
        p = stub(cluster).Produce(request, timeout=15).topics[0].partitions[0]
        if p.error.name in ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"):
            return None
        assert p.error.code == 0, p.error
        return (int(p.base_offset),)

    answer: tuple[int] = wait_until(once, 30, what="the produce to be acknowledged")
    return answer[0]


def txn(pid: int, seq: int, tag: str, n: int = 2) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append(int(time.time() * 1000), None, f"{tag}{i}".encode())
    return b.build()


def markers(cluster: LocalCluster, *results: tuple[int, bool]) -> None:
    R = broker_pb2.WriteTxnMarkersRequest
    request = R(
        timeout_ms=10_000,
        markers=[
            R.Marker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=commit,
                coordinator_epoch=0,
                topics=[R.Topic(name=TOPIC, partition_indexes=[0])],
            )
            for pid, commit in results
        ],
    )
    r = stub(cluster).WriteTxnMarkers(request, timeout=15)
    for m in r.markers:
        assert m.topics[0].partitions[0].error.code == 0, m


def read(cluster: LocalCluster, level: str) -> list[bytes]:
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", isolation_level=level) as c:
        c.assign([TP])
        end = c.end_offsets([TP])[TP]
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while c.position(TP) < end and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(100))
        return out


def pid_of(cluster: LocalCluster) -> int:
    def once() -> tuple[int] | None:  # a tuple: producer id 0 is an answer too
        r = stub(cluster).InitProducerId(broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
        return (int(r.producer_id),) if r.error.code == 0 else None

    got: tuple[int] = wait_until(once, 30, what="a producer id")
    return got[0]


def test_read_committed_sees_only_committed_records_up_to_the_lso(cluster: LocalCluster) -> None:
    aborted, committed = pid_of(cluster), pid_of(cluster)
    produce(cluster, build_batch([(None, b"plain-0")], timestamp_ms=int(time.time() * 1000)))
    produce(cluster, txn(aborted, 0, "abort-"))
    first_open = produce(cluster, txn(committed, 0, "commit-"))
    produce(cluster, build_batch([(None, b"plain-1")], timestamp_ms=int(time.time() * 1000)))
    with Consumer(cluster.bootstrap_servers, isolation_level="read_committed") as c:
        lso = c.end_offsets([TP])[TP]
    assert lso == first_open - 2  # the aborted producer's transaction opened first, and is still open
    assert read(cluster, "read_committed") == [b"plain-0"]
    markers(cluster, (aborted, False), (committed, True))
    assert read(cluster, "read_committed") == [b"plain-0", b"commit-0", b"commit-1", b"plain-1"]
    assert read(cluster, "read_uncommitted") == [
        b"plain-0", b"abort-0", b"abort-1", b"commit-0", b"commit-1", b"plain-1"
    ]  # fmt: skip
    fetch = stub(cluster).Fetch(
        broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=1,
            topics=[
                broker_pb2.FetchRequest.FetchTopic(
                    topic=TOPIC,
                    partitions=[
                        broker_pb2.FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1
                        )
                    ],
                )
            ],
        ),
        timeout=10,
    )
    p = fetch.responses[0].partitions[0]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(aborted, 1)]
    assert p.last_stable_offset == p.high_watermark

    cluster.restart_node(1, clean=False)  # kill -9: the .txnindex and the open/closed state come back
    cluster.wait_unfenced_brokers()
    assert read(cluster, "read_committed") == [b"plain-0", b"commit-0", b"commit-1", b"plain-1"]


def test_a_marker_of_a_fenced_epoch_is_refused(cluster: LocalCluster) -> None:
    pid = pid_of(cluster)
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=3, base_sequence=0, is_transactional=True)
    b.append(int(time.time() * 1000), None, b"x")
    produce(cluster, b.build())
    R = broker_pb2.WriteTxnMarkersRequest
    r = stub(cluster).WriteTxnMarkers(
        R(
            timeout_ms=5000,
            markers=[
                R.Marker(
                    producer_id=pid,
                    producer_epoch=2,
                    transaction_result=False,
                    coordinator_epoch=0,
                    topics=[R.Topic(name=TOPIC, partition_indexes=[0])],
                )
            ],
        ),
        timeout=10,
    )
    assert r.markers[0].topics[0].partitions[0].error.name == "PRODUCER_FENCED"
    markers_ok = R(
        timeout_ms=5000,
        markers=[
            R.Marker(
                producer_id=pid,
                producer_epoch=3,
                transaction_result=True,
                coordinator_epoch=0,
                topics=[R.Topic(name=TOPIC, partition_indexes=[0])],
            )
        ],
    )
    assert stub(cluster).WriteTxnMarkers(markers_ok, timeout=10).markers[0].topics[0].partitions[0].error.code == 0
