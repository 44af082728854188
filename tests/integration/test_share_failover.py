"""Share groups survive a kill mid-stream (KIP-932, issue 27): on a three-node cluster two
confluent-kafka ShareConsumers (explicit acknowledgement, each ACCEPT confirmed by commit_sync)
consume a replicated topic while the share coordinator (the leader of ``__share_group_state``) or
the data partition's leader is SIGKILLed. Nothing is lost (every record is ACCEPTED and the
acceptance confirmed), and only what was in flight is delivered again: no record comes back
after its acceptance was confirmed, and a record delivered again carries a delivery count above 1.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_share_fetch_cluster import leaders, start_offset

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 15_000,
}
TOPICS = ("fo0", "fo1", "fo2")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharefo") / "c", controllers=3, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(3)
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=3) for t in TOPICS])
        wait_until(lambda: all(led[1][0] >= 0 for led in leaders(c, *TOPICS).values()), 30, what="leaders")
        yield c
    finally:
        c.stop()


class Stream:
    """Two explicit-mode ShareConsumers of one group on one topic, with what each record went through:
    its receipts (delivery counts) and the time its acceptance was confirmed."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str) -> None:
        self.cluster, self.topic = cluster, topic
        conf = {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 2,
        }
        self.consumers = [confluent_kafka.ShareConsumer({**conf, "client.id": f"{group}-{i}"}) for i in range(2)]
        for c in self.consumers:
            c.subscribe([topic])
        self.received: dict[bytes, list[int]] = {}
        self.confirmed: dict[bytes, float] = {}
        #: handed to the application again after its acceptance was confirmed: a record the client
        #: still had buffered from an acquisition it lost (the broker refuses its ACCEPT)
        self.after_confirmed: list[bytes] = []
        #: accepted twice: the broker handed out again a record it had accepted
        self.accepted_twice: list[bytes] = []
        self.producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", "linger.ms": 5}
        )

    def produce(self, values: list[bytes]) -> None:
        for v in values:
            self.producer.produce(self.topic, v, partition=0)
        assert self.producer.flush(30) == 0

    def poll(self, consumer: Any, *, accept: bool = True) -> list[Any]:
        got = [m for m in consumer.poll(0.2) if m.error() is None]
        for m in got:
            v = m.value()
            if v in self.confirmed:
                self.after_confirmed.append(v)
            self.received.setdefault(v, []).append(m.delivery_count())
        if accept and got:
            self.accept(consumer, got)
        return got

    def accept(self, consumer: Any, messages: list[Any]) -> None:
        for m in messages:
            try:
                consumer.acknowledge(m, confluent_kafka.AcknowledgeType.ACCEPT)
            except confluent_kafka.KafkaException:
                return  # no longer in flight (its session went with a broker): it comes back
        try:
            results = consumer.commit_sync(10)
        except confluent_kafka.KafkaException:
            return
        if results and all(err is None for err in results.values()):
            now = time.monotonic()
            for m in messages:
                if m.value() in self.confirmed:
                    self.accepted_twice.append(m.value())
                self.confirmed.setdefault(m.value(), now)

    def close(self) -> None:
        for c in self.consumers:
            c.close()


def run_with_kill(cluster: LocalCluster, group: str, topic: str, victim: int) -> Stream:
    """100 records accepted, 20 more of which a consumer holds some unacknowledged, ``victim``
    killed, 80 more produced, then everything consumed; the victim is started again."""
    (tid, _led) = leaders(cluster, topic)[topic]
    s = Stream(cluster, group, topic)
    try:

        def started() -> bool:
            for c in s.consumers:
                assert not s.poll(c)
            return start_offset(cluster, group, str(tid), 0) >= 0

        wait_until(started, 40, what="the share partition started")
        values = [f"{topic}-{i}".encode() for i in range(200)]
        s.produce(values[:100])
        a, b = s.consumers

        def first_accepted() -> bool:
            for c in s.consumers:
                s.poll(c)
            return len(s.confirmed) == 100

        wait_until(first_accepted, 30, what="the first 100 records accepted")
        s.produce(values[100:120])
        held: list[Any] = []
        wait_until(lambda: held.extend(s.poll(b, accept=False)) or held, 20, what="records held by one consumer")
        in_flight = {m.value() for m in held}
        done_before = set(s.confirmed)
        cluster.kill(victim)
        killed_at = time.monotonic()
        s.accept(b, held)  # their session may be gone with the broker: then they come back
        s.produce(values[120:])

        def all_accepted() -> bool:
            for c in s.consumers:
                s.poll(c)
            return len(s.confirmed) == len(values)

        wait_until(all_accepted, 90, what="every record accepted after the kill")
        again = {v: counts for v, counts in s.received.items() if len(counts) > 1}
        print(
            f"{topic}: node {victim} killed with {len(in_flight)} records held; all {len(values)} accepted"
            f" {time.monotonic() - killed_at:.1f} s after the kill; {len(again)} delivered again"
            f" (held at the kill: {len(set(again) & in_flight)}; their delivery counts"
            f" {sorted({tuple(c) for c in again.values()})}); {len(s.after_confirmed)} stale client-side"
        )
        assert set(s.confirmed) == set(values)  # nothing lost
        assert s.accepted_twice == []  # nothing accepted (and confirmed) is handed out again
        assert not set(again) & done_before  # only what was in flight is delivered again
        return s
    finally:
        s.close()
        if not cluster.is_running(victim):
            cluster.start_node(victim)
            cluster.wait_unfenced_brokers(3)


def _state_leader(cluster: LocalCluster) -> int:
    (_id, led) = leaders(cluster, "__share_group_state")["__share_group_state"]
    return led[0]


def test_a_share_coordinator_kill_mid_stream_loses_nothing(cluster: LocalCluster) -> None:
    """The share coordinator dies, the data partition's leader stays: its next state write fails
    over to the new coordinator, which has every acknowledgement written before the kill."""
    warm = Stream(cluster, "g-warm", TOPICS[0])  # creates __share_group_state
    try:
        wait_until(lambda: [warm.poll(c) for c in warm.consumers] and _state_leader(cluster) >= 0, 40)
    finally:
        warm.close()
    state_leader = _state_leader(cluster)
    led = {t: p[1][0] for t, p in leaders(cluster, *TOPICS).items()}
    topic = next((t for t, leader in led.items() if leader != state_leader), None)
    if topic is None:
        pytest.skip(f"every topic is led by the share coordinator's node {state_leader}")
    run_with_kill(cluster, "g-coordinator-kill", topic, state_leader)


def test_a_share_partition_leader_kill_mid_stream_loses_nothing(cluster: LocalCluster) -> None:
    """The data partition's leader dies: the new leader loads the share partition from the
    share coordinator; what was acquired there comes back available, nothing accepted does."""
    topic = TOPICS[1]
    leader = leaders(cluster, topic)[topic][1][0]
    run_with_kill(cluster, "g-leader-kill", topic, leader)
