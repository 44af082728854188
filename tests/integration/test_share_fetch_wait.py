"""A share fetch's long poll and a member's departure (KIP-932, issue 27) on a real ``kraftlog``
node, as Kafka's broker behaves:

- ShareFetch's ``min_bytes`` is honoured: the long poll acquires nothing until its partitions hold
  ``min_bytes`` of acquirable records or ``max_wait_ms`` passed (Kafka's DelayedShareFetch). On
  main a long poll answered as soon as one record could be acquired (a 1-record answer in ~10 ms
  for a 4000-byte, 1500 ms poll).
- A member that leaves (a ShareGroupHeartbeat with epoch -1) or whose consumer closes gives its
  acquired records back at once, with their delivery counts (Kafka's ShareGroupListener
  ``onMemberLeave``): another member gets them with delivery count 2 well before their
  acquisition lock (30 s here) ends. On main they stayed acquired until the lock ended.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from ._security_helpers import kafka_call
from .test_share_fetch import consumer, produce, start_offsets, topic_id

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
grpc = pytest.importorskip("grpc")

LONG_LOCK_MS = 30_000
OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": LONG_LOCK_MS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharewait") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics(
                [NewTopic(n, num_partitions=2, replication_factor=1) for n in ("minbytes", "leaving", "closing")]
            )
        yield c
    finally:
        c.stop()


def join(cluster: LocalCluster, group: str, member: str, topic: str) -> int:
    """A member joined by hand-made ShareGroupHeartbeats, once assigned ``topic``: its epoch."""

    def coordinator_found() -> bool:  # FindCoordinator creates __consumer_offsets, as a client's first step
        answer: Any = kafka_call(cluster, None, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
        return bool(answer.coordinators[0].error_code == 0)

    wait_until(coordinator_found, 20, what="the group coordinator")
    hb = {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None}
    joined: Any = kafka_call(cluster, None, 76, 1, {**hb, "subscribed_topic_names": [topic]})
    epoch = [joined.member_epoch]

    def assigned() -> bool:
        answer: Any = kafka_call(cluster, None, 76, 1, {**hb, "member_epoch": epoch[0], "subscribed_topic_names": None})
        epoch[0] = answer.member_epoch
        return bool(answer.error_code == 0 and answer.assignment and answer.assignment.topic_partitions)

    wait_until(assigned, 15, what=f"{member} assigned {topic}")
    return epoch[0]


class GrpcMember:
    """A share member fetching over gRPC (ShareService), with its session's epoch."""

    def __init__(self, cluster: LocalCluster, group: str, member: str, topic: str) -> None:
        from kraftlog.proto import share_pb2, share_pb2_grpc

        self.pb = share_pb2
        (node,) = cluster.nodes.values()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{node.broker_port}")
        self.stub = share_pb2_grpc.ShareServiceStub(self.channel)
        self.tid = str(topic_id(cluster, topic))
        self.base = {"group_id": group, "member_id": member, "max_records": 500, "max_bytes": 1 << 20}
        topics = [share_pb2.ShareFetchTopic(topic_id=self.tid, partitions=[{"partition": 0}, {"partition": 1}])]
        opened = self.stub.ShareFetch(share_pb2.ShareFetchRequest(**self.base, share_session_epoch=0, topics=topics))
        assert opened.error.code == 0
        self.epoch = 1

    def fetch(self, timeout_s: float = 10, **kw: Any) -> tuple[list[tuple[int, int, int, int]], int]:
        """(acquired runs (partition, first, last, delivery count), record bytes) of one ShareFetch."""
        request = self.pb.ShareFetchRequest(**self.base, share_session_epoch=self.epoch, **kw)
        got = self.stub.ShareFetch(request, timeout=timeout_s)
        self.epoch += 1
        assert got.error.code == 0, got.error
        runs = [
            (p.partition, a.first_offset, a.last_offset, a.delivery_count)
            for t in got.topics
            for p in t.partitions
            for a in p.acquired_records
        ]
        return runs, sum(len(p.records) for t in got.topics for p in t.partitions)

    def close(self) -> None:
        self.channel.close()


def test_a_share_fetch_long_poll_waits_for_min_bytes(cluster: LocalCluster) -> None:
    join(cluster, "g-minbytes", "mb", "minbytes")
    m = GrpcMember(cluster, "g-minbytes", "mb", "minbytes")
    try:
        wait_until(lambda: min(start_offsets(cluster, "g-minbytes", "minbytes")) >= 0, 20, what="start offsets")
        produce(cluster, "minbytes", 1)
        began = time.monotonic()
        runs, _size = m.fetch(max_wait_ms=1500, min_bytes=4000, timeout_s=20)
        waited_s = time.monotonic() - began
        print(f"a 4000-byte, 1500 ms long poll with one record to acquire answered after {waited_s * 1000:.0f} ms")
        assert runs == [(0, 0, 0, 1)]  # on its deadline, what there is
        assert waited_s >= 1.2, "the long poll answered before min_bytes or max_wait_ms"
        # a long poll that min_bytes completes: answered once ~4000 bytes arrived, well before max_wait_ms
        answer: list[Any] = []
        poll = threading.Thread(target=lambda: answer.append(m.fetch(max_wait_ms=20_000, min_bytes=4000, timeout_s=30)))
        began = time.monotonic()
        poll.start()
        p = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
        produced = 0
        while poll.is_alive() and produced < 40:
            p.produce("minbytes", b"x" * 400, partition=produced % 2)
            p.flush(10)
            produced += 1
            poll.join(0.05)
        poll.join(25)
        waited_s = time.monotonic() - began
        (runs, size), *_ = answer
        print(
            f"long poll for 4000 bytes answered after {produced} records of 400 bytes, {waited_s:.2f} s: {size} bytes"
        )
        assert size >= 4000 and sum(last - first + 1 for _p, first, last, _c in runs) >= 8
        assert waited_s < 15
    finally:
        m.close()


def test_a_member_that_leaves_gives_its_records_back_at_once(cluster: LocalCluster) -> None:
    """A hand-made member acquires records over gRPC, then leaves with a ShareGroupHeartbeat of
    epoch -1: the records come back to a ShareConsumer with delivery count 2, long before the
    30 s acquisition lock ends."""
    join(cluster, "g-leaving", "leaver", "leaving")
    m = GrpcMember(cluster, "g-leaving", "leaver", "leaving")
    survivor: Any = None
    try:
        wait_until(lambda: min(start_offsets(cluster, "g-leaving", "leaving")) >= 0, 20, what="start offsets")
        values = produce(cluster, "leaving", 10)
        held: list[Any] = []
        wait_until(lambda: held.extend(m.fetch(max_wait_ms=300)[0]) or sum(r[2] - r[1] + 1 for r in held) >= 10, 15)
        hb = {"group_id": "g-leaving", "member_id": "leaver", "member_epoch": -1, "rack_id": None}
        left: Any = kafka_call(cluster, None, 76, 1, {**hb, "subscribed_topic_names": None})
        assert left.error_code == 0 and left.member_epoch == -1
        left_at = time.monotonic()
        survivor = consumer(cluster, "g-leaving", "survivor", **{"share.acknowledgement.mode": "explicit"})
        survivor.subscribe(["leaving"])
        seen: dict[tuple[int, int], int] = {}

        def all_back() -> bool:
            for msg in survivor.poll(0.2):
                if msg.error() is None:
                    seen[(msg.partition(), msg.offset())] = msg.delivery_count()
                    survivor.acknowledge(msg, confluent_kafka.AcknowledgeType.ACCEPT)
            return len(seen) == len(values)

        wait_until(all_back, 20, what="the leaver's records back")
        back_s = time.monotonic() - left_at
        print(f"10 records of a member that left back after {back_s:.2f} s (lock {LONG_LOCK_MS} ms)")
        assert set(seen.values()) == {2}
        assert back_s < LONG_LOCK_MS / 1000 / 2
    finally:
        m.close()
        if survivor is not None:
            survivor.close()


def test_a_closed_share_consumer_gives_its_records_back_at_once(cluster: LocalCluster) -> None:
    """confluent-kafka's ShareConsumer holds records unacknowledged (explicit mode), then closes:
    another member gets them with delivery count 2 long before the 30 s lock ends."""
    holder = consumer(cluster, "g-closing", "holder", **{"share.acknowledgement.mode": "explicit"})
    survivor: Any = None
    try:
        holder.subscribe(["closing"])

        def settled() -> bool:
            assert not [msg for msg in holder.poll(0.2) if msg.error() is None]
            return min(start_offsets(cluster, "g-closing", "closing")) >= 0

        wait_until(settled, 30, what="the holder fetching")
        values = produce(cluster, "closing", 10)
        # the first poll that returns records: in explicit mode librdkafka refuses another poll before
        # they are acknowledged, and the 10 may come in more than one fetch on a busy machine
        held: list[Any] = []
        wait_until(lambda: held.extend(x for x in holder.poll(0.2) if x.error() is None) or held, 20)
        holder.close()
        closed_at = time.monotonic()
        holder = None
        survivor = consumer(cluster, "g-closing", "survivor", **{"share.acknowledgement.mode": "explicit"})
        survivor.subscribe(["closing"])
        seen: dict[tuple[int, int], int] = {}

        def all_back() -> bool:
            for msg in survivor.poll(0.2):
                if msg.error() is None:
                    seen[(msg.partition(), msg.offset())] = msg.delivery_count()
                    survivor.acknowledge(msg, confluent_kafka.AcknowledgeType.ACCEPT)
            return len(seen) == len(values)

        wait_until(all_back, 20, what="the closed consumer's records back")
        back_s = time.monotonic() - closed_at
        print(f"10 records of a closed ShareConsumer back after {back_s:.2f} s (lock {LONG_LOCK_MS} ms)")
        # what the holder was given came back (librdkafka may also have acquired, and so given back,
        # records it had not handed over yet: those come back with count 2 too)
        assert [seen[(msg.partition(), msg.offset())] for msg in held] == [2] * len(held)
        assert set(seen.values()) <= {1, 2}
        assert back_s < LONG_LOCK_MS / 1000 / 2
    finally:
        if holder is not None:
            holder.close()
        if survivor is not None:
            survivor.close()


def describe_offsets(cluster: LocalCluster, group: str, topics: list[dict[str, Any]] | None) -> Any:
    """DescribeShareGroupOffsets (90) v1 for one group: its answer."""
    answer: Any = kafka_call(cluster, None, 90, 1, {"groups": ({"group_id": group, "topics": topics},)})
    (g,) = answer.groups
    return g


def test_describe_share_group_offsets_answers_each_partitions_start_offset(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """DescribeShareGroupOffsets (API 90): the start offsets the share coordinator holds, for named
    partitions or (topics null) every partition the group initialized; Kafka's errors otherwise.
    ``kraftlog share-groups`` (kafka-share-groups) shows them, the members and the state."""
    import json

    from kraftlog.cli.__main__ import main

    c = consumer(cluster, "g-offsets", "o0")
    try:
        c.subscribe(["minbytes"])

        def started() -> bool:
            assert not [m for m in c.poll(0.2) if m.error() is None]
            return min(start_offsets(cluster, "g-offsets", "minbytes")) >= 0

        wait_until(started, 30, what="start offsets")
        before = start_offsets(cluster, "g-offsets", "minbytes")
        produce(cluster, "minbytes", 6)
        got: list[Any] = []
        wait_until(lambda: got.extend(m for m in c.poll(0.2) if m.error() is None) or len(got) >= 6, 20)
        c.commit_sync(10)  # implicit mode: the records of the last poll accepted
        expected = [o + 3 for o in before]

        def offsets(topics: list[dict[str, Any]] | None) -> dict[int, tuple[int, int]]:
            g = describe_offsets(cluster, "g-offsets", topics)
            assert g.error_code == 0, g
            return {p.partition_index: (p.start_offset, p.error_code) for t in g.topics for p in t.partitions}

        named = [{"topic_name": "minbytes", "partitions": (0, 1)}]
        wait_until(lambda: offsets(named) == {0: (expected[0], 0), 1: (expected[1], 0)}, 15, what="start offsets")
        assert offsets(None) == {0: (expected[0], 0), 1: (expected[1], 0)}  # every initialized partition
        assert offsets([{"topic_name": "nosuchtopic", "partitions": (0,)}]) == {
            0: (-1, 3)
        }  # UNKNOWN_TOPIC_OR_PARTITION
        assert describe_offsets(cluster, "no-such-share-group", None).error_code == 69  # GROUP_ID_NOT_FOUND
        boot = ["--bootstrap-server", cluster.bootstrap_servers, "--output", "json"]
        capsys.readouterr()
        assert main(["share-groups", "--describe", "--group", "g-offsets", *boot]) == 0
        described = json.loads(capsys.readouterr().out)
        assert [(r["partition"], r["start_offset"]) for r in described["offsets"]] == list(enumerate(expected))
        assert main(["share-groups", "--describe", "--group", "g-offsets", "--members", *boot]) == 0
        (member,) = json.loads(capsys.readouterr().out)["members"]
        assert member["client_id"] == "o0" and member["assignment"] == ["minbytes:0", "minbytes:1"]
        assert main(["share-groups", "--describe", "--group", "g-offsets", "--state", *boot]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "Stable"
        assert main(["share-groups", "--list", *boot]) == 0
        assert "g-offsets" in {g["group"] for g in json.loads(capsys.readouterr().out)["groups"]}
        assert main(["share-groups", "--describe", "--group", "no-such-share-group", *boot]) == 1
    finally:
        c.close()
