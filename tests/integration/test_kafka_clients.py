"""Kafka clients nobody here wrote, against the brokers' Kafka-protocol listeners (issue 16).

One real cluster (one combined node and two brokers, every broker with a PLAINTEXT listener):
kcat, kafka-python, confluent-kafka (librdkafka) and aiokafka produce with every acks setting and
compression codec they offer and read back the identical records; a consumer group of two members
rebalances; the idempotent producer and confluent-kafka's transactions with a read_committed
consumer; records cross between the gRPC client and the Kafka listener both ways; and the listener
itself keeps a connection usable after an unsupported request and drops only the connection of a
malformed or oversized frame.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import subprocess
import time

import pytest

from kraftlog.client import Admin, Consumer, NewTopic, Producer
from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("kafka") / "c",
        controllers=1,
        brokers=2,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500, "group.initial.rebalance.delay.ms": 0},
    )
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(count=3, timeout_s=90)
        yield c
    finally:
        c.stop()


def create_topic(cluster: LocalCluster, name: str, partitions: int = 1, rf: int = 3) -> str:
    with Admin(cluster.bootstrap_servers, request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)])
    wait_until(lambda: _leaders_known(cluster, name, partitions), 30, what=f"leaders of {name}")
    return name


def _leaders_known(cluster: LocalCluster, name: str, partitions: int) -> bool:
    """Every broker's Kafka listener names a leader for every partition (what a client asks first)."""
    for address in cluster.kafka_bootstrap_servers.split(","):
        out = subprocess.run(
            ["kcat", "-b", address, "-L", "-J", "-t", name, "-m", "5"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        topics = json.loads(out.stdout)["topics"]
        parts = topics[0]["partitions"] if topics and "error" not in topics[0] else []
        if len(parts) != partitions or any(p["leader"] < 0 for p in parts):
            return False
    return True


def records(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-k{i}".encode(), f"{tag}-value-{i}-".encode() * (1 + i % 7)) for i in range(n)]


def kafka_python_read(cluster: LocalCluster, topic: str, count: int, **kwargs) -> list[tuple[bytes, bytes]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
        **kwargs,
    )
    out = []
    try:
        for message in consumer:
            out.append((message.key, message.value))
            if len(out) >= count:
                break
    finally:
        consumer.close()
    return out


# ---------------------------------------------------------------------------- kcat


def test_kcat_lists_the_brokers_kafka_listeners(cluster: LocalCluster) -> None:
    out = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap_servers.split(",")[0], "-L", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    meta = json.loads(out.stdout)
    expected = {(n.node_id, f"{n.host}:{n.kafka_port}") for n in cluster.nodes.values() if n.kafka_port}
    assert {(b["id"], b["name"]) for b in meta["brokers"]} == expected


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trips_with_every_codec(cluster: LocalCluster, codec: str) -> None:
    topic = create_topic(cluster, f"kcat-{codec}")
    lines = [f"kcat-{codec}-{i}-" + "x" * (i % 50) for i in range(200)]
    bs = cluster.kafka_bootstrap_servers
    subprocess.run(
        ["kcat", "-b", bs, "-t", topic, "-P", "-z", codec, "-X", "acks=all"],
        input="\n".join(lines) + "\n",
        text=True,
        timeout=60,
        check=True,
    )
    out = subprocess.run(
        ["kcat", "-b", bs, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%o %s\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got = [line.split(" ", 1) for line in out.stdout.splitlines()]
    assert [int(o) for o, _ in got] == list(range(len(lines)))
    assert [v for _, v in got] == lines


# ---------------------------------------------------------------------------- kafka-python


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produces_with_every_acks_and_codec(cluster: LocalCluster, acks, codec: str) -> None:
    from kafka import KafkaProducer

    topic = create_topic(cluster, f"kp-{acks}-{codec}")
    sent = records(300, f"{acks}-{codec}")
    producer = KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap_servers,
        acks=acks,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=acks == "all",
        linger_ms=5,
    )
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in sent]
        producer.flush(30)
        if acks != 0:
            assert [f.get(10).offset for f in futures] == list(range(len(sent)))
    finally:
        producer.close(10)
    assert kafka_python_read(cluster, topic, len(sent)) == sent


class _PollingMember:
    """A kafka-python group member polled by its own thread, as an application polls: kafka-python
    finishes a rebalance only inside poll() (a join that completes between two short polls of a
    consumer polled in turns with another is thrown away and sent again, a rebalance storm), so
    each member keeps polling and the test reads what it owns and saw."""

    def __init__(self, cluster: LocalCluster, topic: str, group: str) -> None:
        import threading

        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )
        # the topic's partitions are known before the first JoinGroup (the first poll), as Java's consumer
        # makes sure: else kafka-python 3.0 may join first, assign nothing and rejoin when the metadata
        # arrives, and a poll that times out while that rejoin's SyncGroup is in flight loses the
        # assignment for good (need_rejoin() is already False then); CI hit it on a loaded machine
        wait_until(lambda: self.consumer.partitions_for_topic(topic), 30, what=f"kafka-python knowing {topic}")
        self.seen: set[bytes] = set()
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for batch in self.consumer.poll(timeout_ms=200).values():
                    self.seen.update(m.value for m in batch)
            except Exception:  # an application polls again after an error; the log shows it
                logging.getLogger(__name__).warning("kafka-python's poll raised", exc_info=True)
            self.owned = {tp.partition for tp in self.consumer.assignment()}

    def stop_polling(self) -> None:
        """Stop the polling thread (the member stays in the group: kafka-python heartbeats from its
        own thread), so that the test may use the consumer from its thread."""
        self._stop.set()
        self._thread.join(30)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()


def test_a_group_of_two_kafka_python_consumers_rebalances(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    topic = create_topic(cluster, "kp-group", partitions=4)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all")
    for i in range(40):
        producer.send(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
    producer.flush(30)
    producer.close()

    first = _PollingMember(cluster, topic, "kp-group")
    second = None
    try:
        wait_until(lambda: first.owned == {0, 1, 2, 3}, 60, what="the first member owning all 4 partitions")
        second = _PollingMember(cluster, topic, "kp-group")

        def split() -> bool:
            a, b = first.owned, second.owned
            return len(a) == 2 and len(b) == 2 and not (a & b)

        wait_until(split, 60, what="the two members splitting the partitions")
        wait_until(lambda: split() and len(first.seen | second.seen) == 40, 30, what="every record consumed")
        second.close()
        second = None
        wait_until(lambda: first.owned == {0, 1, 2, 3}, 60, what="the partitions back after a member left")
    finally:
        first.close()
        if second is not None:
            second.close()


# ---------------------------------------------------------------------------- confluent-kafka


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_idempotent_producer_round_trips(cluster: LocalCluster, codec: str) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer

    topic = create_topic(cluster, f"ck-{codec}", partitions=2)
    sent = records(500, f"ck-{codec}")
    producer = CKProducer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    delivered: list[tuple[int, int]] = []
    for k, v in sent:
        producer.produce(
            topic, key=k, value=v, partition=0, on_delivery=lambda e, m: delivered.append((m.partition(), m.offset()))
        )
    assert producer.flush(30) == 0
    assert delivered == [(0, i) for i in range(len(sent))]
    consumer = CKConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": f"ck-{codec}-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes]] = []
    try:
        wait_until(lambda: _poll_into(consumer, got) and len(got) >= len(sent), 60, what="the records back")
    finally:
        consumer.close()
    assert got == sent


def _poll_into(consumer, out: list) -> bool:
    for message in consumer.consume(num_messages=1000, timeout=0.5):
        if message.error() is None:
            out.append((message.key(), message.value()))
    return True


def test_confluent_kafka_transactions_and_read_committed(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer

    topic = create_topic(cluster, "ck-txn", partitions=2)
    producer = CKProducer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "transactional.id": "ck-txn-1", "linger.ms": 1}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"c%d" % i, value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"a%d" % i, value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"last", value=b"committed-last", partition=0)
    producer.commit_transaction(30)

    def read(isolation: str) -> list[bytes]:
        consumer = CKConsumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap_servers,
                "group.id": f"ck-txn-{isolation}",
                "auto.offset.reset": "earliest",
                "isolation.level": isolation,
            }
        )
        consumer.subscribe([topic])
        got: list = []
        try:
            want = 11 if isolation == "read_committed" else 21
            wait_until(lambda: _poll_into(consumer, got) and len(got) >= want, 60, what=f"{isolation} records")
            for _ in range(4):  # nothing more arrives
                _poll_into(consumer, got)
        finally:
            consumer.close()
        return sorted(v for _k, v in got)

    committed = read("read_committed")
    assert committed == sorted([b"committed-%d" % i for i in range(10)] + [b"committed-last"])
    assert len(read("read_uncommitted")) == 21


# ---------------------------------------------------------------------------- aiokafka


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_aiokafka_round_trips(cluster: LocalCluster, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = create_topic(cluster, f"aio-{codec}")
    sent = records(200, f"aio-{codec}")

    async def run() -> list[tuple[bytes, bytes]]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            acks="all",
            compression_type=None if codec == "none" else codec,
            enable_idempotence=True,
        )
        await producer.start()
        try:
            for k, v in sent:
                await producer.send(topic, key=k, value=v)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            group_id=f"aio-{codec}",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        got: list[tuple[bytes, bytes]] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    got.append((message.key, message.value))
                    if len(got) >= len(sent):
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == sent


# ---------------------------------------------------------------------------- gRPC <-> Kafka


def test_records_cross_between_the_grpc_client_and_kafka_clients(cluster: LocalCluster) -> None:
    from confluent_kafka import Producer as CKProducer

    topic = create_topic(cluster, "crossing")
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        for i in range(50):
            producer.send(topic, key=b"g%d" % i, value=b"from-grpc-%d" % i, partition=0)
        producer.flush()
    assert kafka_python_read(cluster, topic, 50) == [(b"g%d" % i, b"from-grpc-%d" % i) for i in range(50)]

    ck = CKProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "compression.type": "zstd"})
    for i in range(50):
        ck.produce(topic, key=b"k%d" % i, value=b"from-kafka-%d" % i, partition=0)
    assert ck.flush(30) == 0
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest")
    consumer.assign([(topic, 0)])
    got: list = []
    try:
        wait_until(lambda: got.extend(consumer.poll(timeout_ms=500)) or len(got) >= 100, 60, what="100 records")
    finally:
        consumer.close()
    assert [(r.key, r.value) for r in got[50:100]] == [(b"k%d" % i, b"from-kafka-%d" % i) for i in range(50)]


# ---------------------------------------------------------------------------- the listener itself


def _frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)  # v1 header, null client id
    return struct.pack(">i", len(header) + len(body)) + header + body


def _answer(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return _recv(sock, size)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _connect(cluster: LocalCluster) -> socket.socket:
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def test_an_unsupported_request_is_answered_and_the_connection_stays(cluster: LocalCluster) -> None:
    with _connect(cluster) as sock:
        sock.sendall(_frame(9999, 0, 41))  # no such API
        assert struct.unpack(">ih", _answer(sock)) == (41, 35)  # UNSUPPORTED_VERSION
        sock.sendall(_frame(0, 99, 42))  # Produce v99
        assert struct.unpack(">ih", _answer(sock)) == (42, 35)
        sock.sendall(_frame(18, 9, 43))  # ApiVersions v9: the v0 answer lists what is served
        answer = _answer(sock)
        correlation_id, error_code, count = struct.unpack_from(">ihi", answer)
        assert (correlation_id, error_code) == (43, 35) and count > 10
        sock.sendall(_frame(18, 0, 44))  # and the connection still serves
        correlation_id, error_code, _count = struct.unpack_from(">ihi", _answer(sock))
        assert (correlation_id, error_code) == (44, 0)


def test_a_malformed_or_oversized_frame_closes_only_its_connection(cluster: LocalCluster) -> None:
    with _connect(cluster) as bad, _connect(cluster) as good:
        bad.sendall(_frame(3, 12, 1, b"\xff\xff\xff"))  # Metadata v12 whose body does not decode
        with pytest.raises((ConnectionError, OSError)):
            _answer(bad)
        good.sendall(_frame(18, 0, 2))
        assert struct.unpack_from(">ih", _answer(good)) == (2, 0)
    with _connect(cluster) as big:
        big.sendall(struct.pack(">i", 200 * 1024 * 1024))  # over socket.request.max.bytes
        with pytest.raises((ConnectionError, OSError)):
            _answer(big)


# ---------------------------------------------------------------------------- admin clients


def test_confluent_admin_client_manages_topics_and_configs(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    created = admin.create_topics(
        [NewTopic("ck-admin", num_partitions=2, replication_factor=3, config={"retention.ms": "123456"})]
    )
    created["ck-admin"].result(30)
    assert created and admin.create_topics([NewTopic("ck-admin", 1, 1)])["ck-admin"].exception(30).args[0].code() == 36
    wait_until(lambda: _leaders_known(cluster, "ck-admin", 2), 30, what="leaders")

    resource = ConfigResource(ResourceType.TOPIC, "ck-admin")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].is_default

    change = ConfigResource(
        ResourceType.TOPIC,
        "ck-admin",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact" and configs["retention.ms"].is_default

    bad = ConfigResource(
        ResourceType.TOPIC,
        "ck-admin",
        incremental_configs=[ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)],
    )
    assert admin.incremental_alter_configs([bad])[bad].exception(30).args[0].code() == 40  # INVALID_CONFIG

    admin.create_partitions([NewPartitions("ck-admin", 4)])["ck-admin"].result(30)
    wait_until(lambda: _leaders_known(cluster, "ck-admin", 4), 30, what="4 partitions")

    described = admin.describe_cluster().result(30)
    assert {f"{n.host}:{n.port}" for n in described.nodes} == set(cluster.kafka_bootstrap_servers.split(","))

    admin.delete_topics(["ck-admin"])["ck-admin"].result(30)
    wait_until(lambda: "ck-admin" not in admin.list_topics(timeout=10).topics, 30, what="the topic gone")
    assert admin.delete_topics(["ck-admin"])["ck-admin"].exception(30).args[0].code() == 3  # UNKNOWN_TOPIC


def test_kafka_python_admin_client_reads_the_cluster(cluster: LocalCluster) -> None:
    from kafka import KafkaAdminClient, OffsetAndMetadata, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType

    topic = create_topic(cluster, "kp-admin", partitions=2)
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        for i in range(20):
            producer.send(topic, b"x" * 100, partition=i % 2)
        producer.flush()
    # polled from its own thread until it joined: kafka-python drops a JoinGroup answer that arrives
    # between two short polls and joins again, which on a loaded machine never ends (see _PollingMember)
    member = _PollingMember(cluster, topic, "kp-admin-g")
    consumer = member.consumer
    wait_until(lambda: member.owned == {0, 1}, 60, what="join")
    member.stop_polling()
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)})
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups["kp-admin-g"]["group_state"] == "Stable"
        described = admin.describe_groups(["kp-admin-g"])["kp-admin-g"]
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
        offsets = admin.list_group_offsets({"kp-admin-g": None})["kp-admin-g"]
        assert offsets[TopicPartition(topic, 0)].offset == 7

        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "1000000"})
        admin.alter_configs([resource])  # AlterConfigs: the whole dynamic config
        shown = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        assert shown["topic"][topic]["retention.bytes"]["value"] == "1000000"

        sizes = {
            (t["name"], p["partition_index"]): p["partition_size"]
            for broker in admin.describe_log_dirs()
            for d in broker["log_dirs"]
            for t in d["topics"]
            for p in t["partitions"]
            if t["name"] == topic
        }
        assert set(sizes) == {(topic, 0), (topic, 1)} and all(size > 1000 for size in sizes.values())
        assert admin.list_partition_reassignments() == {}
        assert admin.describe_cluster()["brokers"]
        producers = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        assert [p.last_sequence for p in producers.active_producers] == [9]  # the gRPC client is idempotent
    finally:
        consumer.close()
        admin.close()


def test_confluent_kafka_consumers_of_the_kip848_protocol_share_partitions(cluster: LocalCluster) -> None:
    """group.protocol=consumer: ConsumerGroupHeartbeat, assignments computed by the coordinator."""
    from confluent_kafka import Consumer as CKConsumer

    topic = create_topic(cluster, "ck-848", partitions=4)

    def consumer() -> CKConsumer:
        c = CKConsumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap_servers,
                "group.id": "ck-848",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        c.subscribe([topic])
        return c

    def owned(c: CKConsumer) -> set[int]:
        c.consume(100, 0.2)
        return {tp.partition for tp in c.assignment()}

    first = consumer()
    second = None
    try:
        wait_until(lambda: owned(first) == {0, 1, 2, 3}, 60, what="one member owning every partition")
        second = consumer()

        def split() -> bool:
            a, b = owned(first), owned(second)
            return len(a) == 2 and len(b) == 2 and not (a & b)

        wait_until(split, 60, what="two members with two partitions each")
        second.close()
        second = None
        wait_until(lambda: owned(first) == {0, 1, 2, 3}, 60, what="the partitions back after a member left")
    finally:
        first.close()
        if second is not None:
            second.close()


def test_describe_topic_partitions_pages_with_a_cursor(cluster: LocalCluster) -> None:
    """DescribeTopicPartitions (KIP-966) over a raw connection: a page limit and its cursor."""
    import io

    from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
    from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader, entity_writer

    from kraftlog.broker.kafka._kafka_wire import build

    create_topic(cluster, "dtp-a", partitions=3)
    create_topic(cluster, "dtp-b", partitions=2)

    def ask(cursor: dict | None) -> DescribeTopicPartitionsResponse:
        buf = io.BytesIO()
        header = {"request_api_key": 75, "request_api_version": 0, "correlation_id": 5, "client_id": "t"}
        entity_writer(RequestHeader)(buf, build(RequestHeader, header))
        body = {"topics": [{"name": "dtp-b"}, {"name": "dtp-a"}], "response_partition_limit": 4, "cursor": cursor}
        entity_writer(DescribeTopicPartitionsRequest)(buf, build(DescribeTopicPartitionsRequest, body))
        with _connect(cluster) as sock:
            sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
            answer = _answer(sock)
        return entity_reader(DescribeTopicPartitionsResponse)(answer, 5)[0]

    first = ask(None)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [
        ("dtp-a", [0, 1, 2]),
        ("dtp-b", [0]),
    ]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("dtp-b", 1)
    rest = ask({"topic_name": "dtp-b", "partition_index": 1})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [("dtp-b", [1])]
    assert rest.next_cursor is None
    assert all(p.leader_id >= 0 and len(p.isr_nodes) == 3 for p in first.topics[0].partitions)


def test_a_failed_acks_0_produce_closes_the_connection(cluster: LocalCluster) -> None:
    """acks=0 has no answer: a partition that refused the records closes the connection instead
    (Kafka's way to make such a producer refresh its metadata); a good one keeps it open."""
    import io

    from kio.schema.produce.v9.request import ProduceRequest
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer

    from kraftlog.broker.kafka._kafka_wire import build
    from kraftlog.storage import build_batch

    topic = create_topic(cluster, "acks0", partitions=1)
    leader = _leader_kafka_address(cluster, topic)

    records = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))

    def frame(partition: int, correlation_id: int) -> bytes:
        buf = io.BytesIO()
        header = {"request_api_key": 0, "request_api_version": 9, "correlation_id": correlation_id, "client_id": "t"}
        entity_writer(RequestHeader)(buf, build(RequestHeader, header))
        body = {
            "acks": 0,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": records}],
                }
            ],
        }
        entity_writer(ProduceRequest)(buf, build(ProduceRequest, body))
        return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()

    host, port = leader.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame(0, 1))  # accepted: no answer, the connection stays
        sock.sendall(_frame(18, 0, 2))
        assert struct.unpack_from(">ih", _answer(sock)) == (2, 0)
        sock.sendall(frame(7, 3))  # no partition 7
        with pytest.raises((ConnectionError, OSError)):
            _answer(sock)


def _leader_kafka_address(cluster: LocalCluster, topic: str) -> str:
    out = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap_servers, "-L", "-J", "-t", topic],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    meta = json.loads(out.stdout)
    leader = meta["topics"][0]["partitions"][0]["leader"]
    return next(b["name"] for b in meta["brokers"] if b["id"] == leader)
