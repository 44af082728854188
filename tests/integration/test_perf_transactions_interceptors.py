"""Issue 25 on a real cluster (one combined node): ``kraftlog perf produce --transactional-id``
(kafka-producer-perf-test's transactions) and the client's producer and consumer interceptors."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kraftlog.client import Consumer, NewTopic, OffsetAndMetadata, Producer, ProducerRecord, TopicPartition
from kraftlog.common import errors as kerr
from kraftlog.deploy._cluster import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("i25") / "c", controllers=1, combined=True)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics(
                [
                    NewTopic("perf-txn", num_partitions=2, replication_factor=1),
                    NewTopic("icpt", num_partitions=2, replication_factor=1),
                    NewTopic("icpt-small", 1, 1, configs={"max.message.bytes": "1000"}),
                ]
            )
        yield c
    finally:
        c.stop()


def _read_committed_values(cluster: LocalCluster, topic: str, expected: int, timeout_s: float = 30.0) -> list[bytes]:
    """Every record a read_committed librdkafka consumer sees, polling until ``expected`` arrived and
    then a little longer (so one record too many would show) -- bounded either way."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "rc-" + uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
            if len(seen) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 1.0
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
    finally:
        consumer.close()
    return seen


def test_perf_produce_sends_inside_transactions(cluster: LocalCluster) -> None:
    """300 records at 200/s with a 300 ms transaction duration: about 1.5 s, so several commits;
    a read_committed consumer sees exactly the records the report counts."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraftlog.cli",
            "perf",
            "produce",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--topic",
            "perf-txn",
            "--num-records",
            "300",
            "--record-size",
            "20",
            "--throughput",
            "200",
            "--transactional-id",
            "perf-tx-1",
            "--transaction-duration-ms",
            "300",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["records"] == 300 and report["failed"] == 0
    assert report["transactions"] > 1, report
    values = _read_committed_values(cluster, "perf-txn", report["records"])
    assert len(values) == report["records"]
    assert all(len(v) == 20 for v in values)


class _Counting:
    """Counts every acknowledgement, with the thread it ran on."""

    def __init__(self) -> None:
        self.acks: list[tuple[Any, BaseException | None, str]] = []
        self.sent = 0

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent += 1
        return record

    def on_acknowledgement(self, metadata: Any, exception: BaseException | None) -> None:
        self.acks.append((metadata, exception, threading.current_thread().name))

    def close(self) -> None:
        pass


class _Rewriting:
    """Rewrites every value the application will see; records the commits."""

    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []

    def on_consume(self, records: list[Any]) -> list[Any]:
        return [r._replace(value=b"seen:" + r.value) for r in records]

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.commits.append(dict(offsets))

    def close(self) -> None:
        pass


def test_interceptors_see_every_ack_and_rewrite_what_the_application_reads(cluster: LocalCluster) -> None:
    counting = _Counting()
    with Producer(cluster.bootstrap_servers, linger_ms=0, interceptors=[counting]) as producer:
        futures = [producer.send("icpt", f"v{i}".encode(), key=f"k{i}".encode()) for i in range(6)]
        too_large = producer.send("icpt-small", b"x" * 5000)  # the broker's max.message.bytes refuses it
        producer.flush(30)
    for f in futures:
        f.result(1)
    with pytest.raises(kerr.MessageTooLargeError):
        too_large.result(1)
    assert counting.sent == 7 and len(counting.acks) == 7
    assert {thread for _m, _e, thread in counting.acks} == {"kraftlog-producer-sender"}
    [(metadata, error, _thread)] = [a for a in counting.acks if a[1] is not None]
    assert isinstance(error, kerr.MessageTooLargeError)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("icpt-small", 0, -1)

    rewriting = _Rewriting()
    consumer = Consumer(
        cluster.bootstrap_servers,
        group_id="icpt-" + uuid.uuid4().hex,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        interceptors=[rewriting],
    )
    try:
        consumer.subscribe(["icpt"])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=500))
        assert sorted(r.value for r in got) == sorted(f"seen:v{i}".encode() for i in range(6))
        consumer.commit()
        [committed] = rewriting.commits
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        assert {tp: o.offset for tp, o in committed.items()} == positions
        assert sum(positions.values()) == 6
        stored = consumer.committed(list(committed))
        assert {tp: o.offset for tp, o in stored.items()} == positions
    finally:
        consumer.close()
