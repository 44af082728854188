"""Fetch 13+ and Produce 13 with topic ids on the Kafka listener (issue 28, KIP-516): clients that
speak them no longer negotiate down; a topic id the cluster does not know is UNKNOWN_TOPIC_ID.
confluent-kafka (librdkafka 2.16) fetches by topic id; kafka-python 3.0 caps Fetch at 12 and
Produce at 9 itself and keeps working by name; the raw requests cover Produce v13 and Fetch v17,
and a fetch session by topic id over a topic deleted and recreated under its name."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from tests.integration.test_txn_v2 import kafka_call

pytestmark = pytest.mark.integration

TOPIC = "by-id"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("ids") / "c", controllers=1, combined=True)
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(1)
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
        yield c
    finally:
        c.stop()


def topic_id(cluster: LocalCluster, name: str = TOPIC) -> uuid.UUID | None:
    r = kafka_call(cluster, 3, 12, {"topics": [{"name": name, "topic_id": None}]})
    return uuid.UUID(str(r.topics[0].topic_id)) if r.topics[0].error_code == 0 else None


def fetch_call(
    cluster: LocalCluster,
    version: int,
    topics: dict[uuid.UUID, int],
    *,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: tuple[uuid.UUID, ...] = (),
) -> Any:
    """A Fetch by topic id of partition 0 of each topic (at the offsets given)."""
    body = {
        "replica_id": -1,
        "max_wait": 100,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
            for tid, offset in topics.items()
        ],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": [0]} for tid in forgotten],
        "rack_id": "",
    }
    return kafka_call(cluster, 1, version, body)


def fetch(cluster: LocalCluster, version: int, tid: uuid.UUID, offset: int = 0) -> Any:
    return fetch_call(cluster, version, {tid: offset}).responses[0]


def produce_by_id(cluster: LocalCluster, tid: uuid.UUID, value: bytes, count: int = 1) -> int:
    from kraftlog.storage import RecordBatchBuilder

    b = RecordBatchBuilder()
    for i in range(count):
        b.append(0, None, value + b"-%d" % i if count > 1 else value)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"topic_id": tid, "partition_data": [{"index": 0, "records": b.build()}]}],
    }
    r = kafka_call(cluster, 0, 13, body)
    return int(r.responses[0].partition_responses[0].error_code)


def test_produce_13_and_fetch_13_to_17_by_topic_id(cluster: LocalCluster) -> None:
    tid = topic_id(cluster)
    assert tid is not None
    assert produce_by_id(cluster, tid, b"by-id") == 0
    assert produce_by_id(cluster, uuid.uuid4(), b"nowhere") == 100  # UNKNOWN_TOPIC_ID
    for version in (13, 15, 17):
        answer = fetch(cluster, version, tid)
        assert uuid.UUID(str(answer.topic_id)) == tid
        part = answer.partitions[0]
        assert part.error_code == 0 and part.high_watermark >= 1 and b"by-id" in bytes(part.records or b"")
    stranger = uuid.uuid4()
    answer = fetch(cluster, 13, stranger)
    assert uuid.UUID(str(answer.topic_id)) == stranger and answer.partitions[0].error_code == 100


def test_confluent_kafka_fetches_by_topic_id_and_kafka_python_by_name(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from kafka import KafkaConsumer, KafkaProducer

    p = CKProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "linger.ms": 1})
    for i in range(5):
        p.produce(TOPIC, value=b"ck-%d" % i, partition=0)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers)
    for i in range(5):
        kp.send(TOPIC, value=b"kp-%d" % i, partition=0)
    kp.flush(30)
    kp.close()

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("ck-topic-ids")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    consumer = CKConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "ck-ids",
            "auto.offset.reset": "earliest",
            "debug": "protocol",
        },
        logger=logger,
    )
    consumer.subscribe([TOPIC])
    got: list[bytes] = []

    def poll() -> bool | None:
        for m in consumer.consume(50, 0.5):
            if m.error() is None:
                got.append(m.value())
        return len([v for v in got if v.startswith((b"ck-", b"kp-"))]) >= 10 or None

    try:
        wait_until(poll, 60, what="confluent-kafka's records")
    finally:
        consumer.close()
    versions = {int(v) for v in re.findall(r"Sent FetchRequest \(v(\d+)", "\n".join(lines))}
    assert versions and min(versions) >= 13, sorted(versions)  # by topic id, not negotiated down

    kc = KafkaConsumer(
        TOPIC, bootstrap_servers=cluster.kafka_bootstrap_servers, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    try:
        values = [m.value for m in kc]
    finally:
        kc.close()
    assert all(b"ck-%d" % i in values and b"kp-%d" % i in values for i in range(5))


def test_a_fetch_session_by_id_answers_a_recreated_topic_inconsistent_topic_id(cluster: LocalCluster) -> None:
    """A Fetch v15 session holds a topic by id; the topic is deleted and recreated under its name
    (5 records before, 8 after). The session's next incremental fetch is INCONSISTENT_TOPIC_ID for
    the old id, as Kafka answers (main read the new topic at the old position, offset 5, and
    answered its records under the new id); the client, as Kafka's FetchSessionHandler, forgets the
    old id and adds the new one in the same session and reads the new topic from its start."""
    name = "recreated-by-id"
    with cluster.admin(request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
        old = wait_until(lambda: topic_id(cluster, name), 30, what="the topic's id")
        assert produce_by_id(cluster, old, b"old", count=5) == 0
        full = fetch_call(cluster, 15, {old: 5}, epoch=0)
        sid = full.session_id
        assert sid > 0 and full.responses[0].partitions[0].error_code == 0
        admin.delete_topics([name])
        wait_until(lambda: topic_id(cluster, name) is None or None, 30, what="the topic gone")
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    new = wait_until(lambda: topic_id(cluster, name), 30, what="the new topic's id")
    assert new != old
    wait_until(lambda: produce_by_id(cluster, new, b"new", count=8) == 0 or None, 30, what="the new topic's leader")

    epoch = 1
    seen: list[tuple[str, int, int]] = []  # (topic id, error code, record bytes) of each answered partition

    def incremental() -> bool | None:
        nonlocal epoch
        r = fetch_call(cluster, 15, {}, session_id=sid, epoch=epoch)
        epoch += 1
        seen.append(("session", r.error_code, r.session_id))
        for t in r.responses:
            for p in t.partitions:
                seen.append((str(t.topic_id), p.error_code, len(bytes(p.records or b""))))
        # an answer of INCONSISTENT_TOPIC_ID (103), or one with records or another id (main's)
        return any(code == 103 or n > 0 or t not in (str(old), "session") for t, code, n in seen) or None

    wait_until(incremental, 30, what=f"an answer of the old id's partition, seen {seen}")
    assert all(code == 0 and n == sid for t, code, n in seen if t == "session"), seen
    answered = [(t, code, n) for t, code, n in seen if t != "session"]
    assert answered[-1] == (str(old), 103, 0), seen  # INCONSISTENT_TOPIC_ID
    assert all(t == str(old) and n == 0 for t, _code, n in answered), seen  # nothing of the new topic

    r = fetch_call(cluster, 15, {new: 0}, session_id=sid, epoch=epoch, forgotten=(old,))
    assert r.error_code == 0 and r.session_id == sid
    assert [uuid.UUID(str(t.topic_id)) for t in r.responses] == [new]
    part = r.responses[0].partitions[0]
    records = bytes(part.records or b"")
    assert part.error_code == 0 and part.high_watermark == 8 and b"new-0" in records and b"old" not in records
