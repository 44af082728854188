"""Answers librdkafka's own test suite found missing (issue 25), driven by confluent-kafka.

One cluster (one combined node and two brokers, so every partition has two followers):
DeleteRecords (API 21) through confluent-kafka's AdminClient moves the log start offset on the
leader and on both followers, ListOffsets EARLIEST and Fetch answer from the new start, an offset
past the high watermark is OFFSET_OUT_OF_RANGE, and ``kraftlog delete-records`` takes
kafka-delete-records' offset file; Metadata for an illegal topic name answers
INVALID_TOPIC_EXCEPTION, so librdkafka's producer fails the record instead of waiting for a topic
that can never exist (0057); DescribeCluster and Metadata carry KIP-430's authorized operations
(without an authorizer: every operation Kafka lists for the resource type).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from kraftlog.client import Admin, NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("rdk") / "c",
        controllers=1,
        brokers=2,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500, "log.flush.offset.checkpoint.interval.ms": 1000},
    )
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(count=3, timeout_s=90)
        yield c
    finally:
        c.stop()


def _topic(cluster: LocalCluster, name: str, records: int) -> str:
    with Admin(cluster.bootstrap_servers, request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])
    producer = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    deadline = time.monotonic() + 30
    errors: list[object] = []
    for i in range(records):
        producer.produce(name, value=f"v{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
    while producer.flush(1.0) and time.monotonic() < deadline:
        pass
    assert not errors and len(producer) == 0
    return name


def _earliest_on(cluster: LocalCluster, node_id: int, topic: str) -> int:
    """The log start offset of ``topic``-0 on one replica (ListOffsets with Kafka's debug replica id -2,
    which any replica answers, not only the leader)."""
    spec = cluster.nodes[node_id]
    with grpc.insecure_channel(f"{spec.host}:{spec.broker_port}") as channel:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        req = broker_pb2.ListOffsetsRequest(replica_id=-2)
        req.topics.add(name=topic).partitions.add(partition_index=0, current_leader_epoch=-1, timestamp=-2)
        resp = stub.ListOffsets(req, timeout=10)
    p = resp.topics[0].partitions[0]
    assert p.error.code == 0, p.error
    return p.offset


def test_delete_records_moves_the_start_on_every_replica(cluster: LocalCluster) -> None:
    topic = _topic(cluster, "dr-all", 10)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    tp = ck.TopicPartition(topic, 0, 4)
    started = time.monotonic()
    result = admin.delete_records([tp], request_timeout=30, operation_timeout=30)[tp].result(timeout=40)
    elapsed_s = time.monotonic() - started
    assert result.low_watermark == 4, result
    print(f"delete_records answered low_watermark={result.low_watermark} in {elapsed_s:.2f}s")
    # every replica moved its own start (the followers learn it from their fetches)
    for node_id in sorted(cluster.nodes):
        wait_until(lambda n=node_id: _earliest_on(cluster, n, topic) == 4, 20, what=f"log start on node {node_id}")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "dr-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (4, 10)
        consumer.assign([ck.TopicPartition(topic, 0, 2)])  # below the new start
        deadline = time.monotonic() + 20
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error()
            elif msg is not None:
                pytest.fail(f"read offset {msg.offset()} below the log start offset")
        assert error is not None and error.code() == ck.KafkaError._AUTO_OFFSET_RESET, error
        consumer.assign([ck.TopicPartition(topic, 0, 4)])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.offset())
        assert got == [4, 5, 6, 7, 8, 9]
    finally:
        consumer.close()
    # every replica checkpoints its new start (log-start-offset-checkpoint, read at restart)
    for spec in cluster.nodes.values():
        checkpoint = Path(spec.dir) / "data" / "log-start-offset-checkpoint"
        wait_until(
            lambda c=checkpoint: c.exists() and f"{topic} 0 4" in c.read_text().splitlines(),
            20,
            what=f"{checkpoint} naming {topic} 0 4",
        )


def test_delete_records_past_the_high_watermark_and_to_it(cluster: LocalCluster) -> None:
    topic = _topic(cluster, "dr-bounds", 5)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    past = ck.TopicPartition(topic, 0, 6)
    with pytest.raises(ck.KafkaException) as info:
        admin.delete_records([past], request_timeout=30)[past].result(timeout=40)
    assert info.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    to_hw = ck.TopicPartition(topic, 0, ck.OFFSET_END)  # -1: the high watermark
    assert admin.delete_records([to_hw], request_timeout=30)[to_hw].result(timeout=40).low_watermark == 5


def test_kraftlog_delete_records_takes_kafkas_offset_file(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = _topic(cluster, "dr-cli", 6)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": 0, "offset": 3},
                    {"topic": "nope", "partition": 0, "offset": 1},
                ],
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", "delete-records", "--bootstrap-server", cluster.bootstrap_servers]
        + ["--offset-json-file", str(offsets), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # one partition failed
    out = {(p["topic"], p["partition"]): p for p in json.loads(proc.stdout)["partitions"]}
    assert out[(topic, 0)]["low_watermark"] == 3 and out[(topic, 0)]["error"] is None
    assert out[("nope", 0)]["error"]["name"] == "UNKNOWN_TOPIC_OR_PARTITION"
    wait_until(lambda: _earliest_on(cluster, min(cluster.nodes), topic) == 3, 20, what="log start 3")


def test_a_producer_to_an_illegal_topic_name_fails_its_record(cluster: LocalCluster) -> None:
    """librdkafka 0057: with auto-creation on, Kafka answers INVALID_TOPIC_EXCEPTION and the
    producer fails the record; on an UNKNOWN_TOPIC_OR_PARTITION it waits for message.timeout.ms."""
    producer = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "message.timeout.ms": 60_000})
    outcome: list[object] = []
    started = time.monotonic()
    producer.produce("rdk-invalid_topic$#!", value=b"x", on_delivery=lambda err, _m: outcome.append(err))
    deadline = started + 20
    while not outcome and time.monotonic() < deadline:
        producer.poll(0.2)
    elapsed_s = time.monotonic() - started
    print(f"the record to an illegal topic failed after {elapsed_s:.2f}s: {outcome}")
    assert outcome, "the record was not failed within 20 s (it waits for message.timeout.ms)"
    assert outcome[0] is not None and outcome[0].code() == ck.KafkaError.TOPIC_EXCEPTION


CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
TOPIC_OPS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def test_authorized_operations_without_an_authorizer_are_every_supported_one(cluster: LocalCluster) -> None:
    topic = _topic(cluster, "ops-topic", 0)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    described = admin.describe_cluster(include_authorized_operations=True, request_timeout=20).result(timeout=30)
    assert {op.name for op in described.authorized_operations or ()} == CLUSTER_OPS
    topics = admin.describe_topics(ck.TopicCollection([topic]), include_authorized_operations=True, request_timeout=20)
    desc = topics[topic].result(timeout=30)
    assert {op.name for op in desc.authorized_operations or ()} == TOPIC_OPS
    # not asked: not computed (Kafka's Integer.MIN_VALUE, which the client shows as none)
    plain = admin.describe_cluster(request_timeout=20).result(timeout=30)
    assert not plain.authorized_operations


def test_broker_alter_configs_takes_the_sasl_keys_kafka_reconfigures(cluster: LocalCluster) -> None:
    """librdkafka's 0081 AlterConfigs sets ``sasl.kerberos.min.time.before.relogin`` on a broker and
    expects success: Kafka 4.0 reconfigures the listener SASL keys (DynamicListenerConfig) at run time.
    A key Kafka does not reconfigure (``log.dirs``) is still refused."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    first, second = (str(node_id) for node_id in sorted(cluster.nodes)[:2])
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    legacy = ConfigResource(ResourceType.BROKER, first, set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    admin.alter_configs([legacy], request_timeout=20)[legacy].result(timeout=30)
    incremental = ConfigResource(
        ResourceType.BROKER,
        second,
        incremental_configs=[
            ConfigEntry("sasl.kerberos.ticket.renew.jitter", "0.1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([incremental], request_timeout=20)[incremental].result(timeout=30)
    static = ConfigResource(ResourceType.BROKER, first, set_config={"log.dirs": "/elsewhere"})
    with pytest.raises(ck.KafkaException, match="cannot be updated dynamically"):
        admin.alter_configs([static], request_timeout=20)[static].result(timeout=30)
