"""``kraftlog storage format --add-scram`` (KIP-900, issue 25): a cluster whose Kafka listener asks for
SCRAM and nothing else has its first user from the bootstrap metadata, with no other door to create
one. On main the option does not exist (format fails), and without it no client can ever log in."""

from __future__ import annotations

import time
import uuid

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until

_PASSWORD = "alice-secret"


class _ScramOnlyCluster(LocalCluster):
    """A controller and a broker whose Kafka listener is SASL_PLAINTEXT with SCRAM only; the nodes
    are formatted with ``--add-scram`` for ``alice`` (both mechanisms)."""

    @property
    def kafka_listener_name(self) -> str:
        return "SASL_PLAINTEXT"


@pytest.fixture(scope="module")
def scram_only(tmp_path_factory: pytest.TempPathFactory):
    cluster = _ScramOnlyCluster(
        tmp_path_factory.mktemp("addscram"),
        controllers=1,
        brokers=1,
        overrides={"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"},
        format_args=(
            "--add-scram",
            f"SCRAM-SHA-256=[name=alice,password={_PASSWORD}]",
            "--add-scram",
            f'SCRAM-SHA-512=[name=alice,iterations=8192,password="{_PASSWORD}"]',
        ),
    )
    cluster.start(timeout_s=90)
    try:
        cluster.wait_unfenced_brokers(1, timeout_s=60)
        yield cluster
    finally:
        cluster.stop()


def _conf(cluster: LocalCluster, mechanism: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": password,
    }


def test_bootstrapped_scram_user_produces_and_consumes(scram_only: LocalCluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "boot-scram"
    admin = AdminClient(_conf(scram_only, "SCRAM-SHA-512", _PASSWORD))
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        producer = Producer(_conf(scram_only, mechanism, _PASSWORD))
        errors: list[object] = []
        producer.produce(topic, f"via {mechanism}".encode(), on_delivery=lambda err, _m: errors.append(err))
        assert producer.flush(30) == 0
        assert errors == [None]
    consumer = Consumer(
        {
            **_conf(scram_only, "SCRAM-SHA-256", _PASSWORD),
            "group.id": "g-" + uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert seen == [b"via SCRAM-SHA-256", b"via SCRAM-SHA-512"]

    # a wrong password is refused: the producer reports an authentication error and delivers nothing
    auth_errors: list[object] = []
    bad = Producer({**_conf(scram_only, "SCRAM-SHA-256", "not-the-secret"), "error_cb": auth_errors.append})
    delivered: list[object] = []
    bad.produce(topic, b"never", on_delivery=lambda err, _m: delivered.append(err))
    wait_until(lambda: bad.poll(0.2) >= 0 and bool(auth_errors), 30, what="the authentication failure")
    assert any("Authentication" in str(e) or "SASL" in str(e) for e in auth_errors), auth_errors
    assert delivered == []
    bad.purge()
    bad.flush(5)
    with pytest.raises(KafkaException):
        AdminClient(_conf(scram_only, "SCRAM-SHA-512", "wrong")).list_topics(timeout=5)
