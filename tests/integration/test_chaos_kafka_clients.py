"""The chaos workload's kafka-python producer stops cleanly when its broker is gone.

kafka-python's ``close(timeout)`` raises when sends are still in flight at the timeout (Java's
producer force-closes instead). A chaos run stops its workload while a fault may still hold a
broker down, and that raise ended ``kraftlog chaos run`` without its summary (seen in a loaded
run of test_chaos_short): the producer must close, the unfinished sends counted as unacknowledged.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from kraftlog.deploy._cluster import LocalCluster
from kraftlog.deploy.chaos._kafka_clients import KafkaPythonProducer


def test_close_returns_while_a_send_is_stuck_on_a_dead_broker(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, brokers=1).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20_000)
        admin.create_topics([NewTopic("stuck", num_partitions=1, replication_factor=1)])
        admin.close()
        producer = KafkaPythonProducer(
            cluster.kafka_bootstrap_servers, request_timeout_ms=2_000, delivery_timeout_ms=60_000
        )
        deadline = time.monotonic() + 30
        while True:  # the topic's leader may take a moment to be known
            try:
                producer.send_sync("stuck", b"first", partition=0, timeout=5)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        broker_id = max(cluster.nodes)
        cluster.kill(broker_id)
        with pytest.raises(Exception, match="Timeout"):
            producer.send_sync("stuck", b"never acknowledged", partition=0, timeout=1)
        started = time.monotonic()
        producer.close(timeout=1)  # on main: KafkaTimeoutError('Timeout waiting for future')
        assert time.monotonic() - started < 15
    finally:
        cluster.stop()
