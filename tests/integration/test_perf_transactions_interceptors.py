"""Issue 25 on a real cluster (one combined node): ``kraftlog perf produce --transactional-id``
(kafka-producer-perf-test's transactions) and the client's producer and consumer interceptors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from kraftlog.client import NewTopic
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
                [NewTopic(t, num_partitions=2, replication_factor=1) for t in ("perf-txn", "icpt", "icpt-small")]
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
