"""Feature versions and eligible leader replicas (issue 26, KIP-584 / KIP-966) with real processes.

One controller and three broker-only processes on 127.0.0.1, shared by the two tests in order
(the features test leaves the cluster at the levels the ELR test needs; that one kills brokers).
The features are finalized through the real tools: ``kraftlog features`` (subprocess) and
kafka-python's ``KafkaAdminClient`` (UpdateFeatures API 57, ApiVersions v3 features) on the
Kafka listener. Then the KIP-966 story:
min.insync.replicas=2, RF 3, ELR on; the ISR is brought down to one member (103 killed -9, 102
stopped cleanly with SIGTERM: Kafka keeps in the ELR only replicas whose last stop was clean, since
an unclean one may have lost what it acknowledged), then that one is killed -9 too; the restarted
ELR member 102 leads without an unclean election (unclean.leader.election.enable stays false) and
every record acknowledged with acks=all is read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_broker_replication import Client

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
}
B1, B2, B3 = 101, 102, 103


def kraftlog(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("elr") / "c", controllers=1, brokers=3, overrides=OVERRIDES)
    c.start(timeout_s=60)
    try:
        c.wait_unfenced_brokers(3, timeout_s=60)
        yield c
    finally:
        c.stop()


def _partition(cluster: LocalCluster, topic: str) -> Any:
    with cluster.admin(request_timeout_ms=10_000) as admin:
        return admin.describe_topics([topic]).topics[0].partitions[0]


def _wait_partition(
    cluster: LocalCluster, topic: str, ok: Callable[[Any], bool], what: str, timeout_s: float = 20
) -> Any:
    """The partition's description once ``ok`` holds for it (polled, bounded)."""

    def check() -> Any:
        p = _partition(cluster, topic)
        return p if ok(p) else None

    return wait_until(check, timeout_s, what=what)


def _describe_topic_partitions(cluster: LocalCluster, node_id: int, topic: str) -> Any:
    """Partition 0 as DescribeTopicPartitions (Kafka API 75) answers on ``node_id``'s Kafka listener."""
    import io
    import socket
    import struct

    from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
    from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader, entity_writer

    from kraftlog.broker.kafka._kafka_wire import build

    from .test_kafka_clients import _answer

    buf = io.BytesIO()
    header = {"request_api_key": 75, "request_api_version": 0, "correlation_id": 7, "client_id": "elr-test"}
    entity_writer(RequestHeader)(buf, build(RequestHeader, header))
    body = {"topics": [{"name": topic}], "response_partition_limit": 10, "cursor": None}
    entity_writer(DescribeTopicPartitionsRequest)(buf, build(DescribeTopicPartitionsRequest, body))
    spec = cluster.nodes[node_id]
    with socket.create_connection((spec.host, spec.kafka_port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        answer = _answer(sock)
    return entity_reader(DescribeTopicPartitionsResponse)(answer, 5)[0].topics[0].partitions[0]


def test_features_through_the_cli_and_kafka_python(cluster: LocalCluster) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    boot = cluster.bootstrap_servers
    # kraft.version 1 is refused with the reason, and nothing is written (all or nothing)
    refused = kraftlog(
        "features", "upgrade", "--bootstrap-server", boot, "--feature", "metadata.version=25",
        "--feature", "kraft.version=1", check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "dynamic controller quorum" in refused.stderr, refused.stderr
    dry = kraftlog("features", "upgrade", "--bootstrap-server", boot, "--feature", "metadata.version=25", "--dry-run")
    assert "dry run" in dry.stdout
    described = json.loads(kraftlog("features", "describe", "--bootstrap-server", boot, "--output", "json").stdout)
    levels = {f["feature"]: f["finalized_version_level"] for f in described["features"]}
    assert levels["metadata.version"] == 0 and levels["eligible.leader.replicas.version"] == 0

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20_000)
    try:
        assert admin.update_features({"metadata.version": 25, "eligible.leader.replicas.version": 1}) == {
            "metadata.version": "OK",
            "eligible.leader.replicas.version": "OK",
        }
        features = wait_until(
            lambda: (f := admin.describe_features()).get("eligible.leader.replicas.version", {}).get("finalized") and f,
            20,
            what="the finalized levels in ApiVersions",
        )
        assert features["metadata.version"]["finalized"] == (25, 25)
        assert features["eligible.leader.replicas.version"]["supported"] == (0, 1)
        with pytest.raises(KafkaError, match="INVALID_UPDATE_VERSION|InvalidUpdateVersion|might delete metadata"):
            admin.update_features({"metadata.version": ("SAFE_DOWNGRADE", 24)})
    finally:
        admin.close()
    described = json.loads(kraftlog("features", "describe", "--bootstrap-server", boot, "--output", "json").stdout)
    levels = {f["feature"]: f["finalized_version_level"] for f in described["features"]}
    assert levels["metadata.version"] == 25 and levels["eligible.leader.replicas.version"] == 1


def test_a_restarted_elr_member_leads_cleanly_and_loses_nothing(cluster: LocalCluster) -> None:
    boot = cluster.bootstrap_servers
    kraftlog(
        "features", "upgrade", "--bootstrap-server", boot, "--feature", "metadata.version=25",
        "--feature", "eligible.leader.replicas.version=1",
    )  # fmt: skip
    with cluster.admin(request_timeout_ms=20_000) as admin:
        resp = admin.create_topics(
            [NewTopic("elr", assignments={0: [B1, B2, B3]}, configs={"min.insync.replicas": "2"})]
        )
        assert resp.topics[0].error.code == 0, resp
    wait_until(lambda: len(_partition(cluster, "elr").isr) == 3, 20, what="a full ISR")
    client = Client(cluster)
    try:
        acked: list[bytes] = []

        def produce(tag: str, n: int) -> None:
            for i in range(n):
                client.produce("elr", 0, f"{tag}-{i}".encode())
                acked.append(f"{tag}-{i}".encode())

        produce("three", 50)
        cluster.kill(B3)
        wait_until(lambda: list(_partition(cluster, "elr").isr) == [B1, B2], 20, what="ISR [101, 102]")
        assert list(_partition(cluster, "elr").eligible_leader_replicas) == []  # still at min.insync.replicas
        produce("two", 50)  # acks=all with the ISR at min.insync.replicas: on 101 and 102
        cluster.stop_node(B2)  # SIGTERM: a clean stop, so 102 stays eligible when it returns
        p = _wait_partition(cluster, "elr", lambda q: list(q.isr) == [B1], "ISR [101]")
        assert list(p.eligible_leader_replicas) == [B2]
        cluster.kill(B1)
        p = _wait_partition(cluster, "elr", lambda q: q.leader_id == -1 and not q.isr, "the ISR emptied into the ELR")
        assert sorted(p.eligible_leader_replicas) == [B1, B2]
        controllers = ",".join(cluster.controller_addresses)  # every broker is down
        table = kraftlog("topics", "describe", "--bootstrap-server", controllers, "--topic", "elr").stdout
        assert "Elr: 101,102" in table, table

        restarted = time.monotonic()
        cluster.start_node(B2)
        p = _wait_partition(cluster, "elr", lambda q: q.leader_id == B2, "the ELR member 102 to lead", 30)
        elected_after_s = time.monotonic() - restarted
        assert list(p.isr) == [B2] and list(p.eligible_leader_replicas) == [B1]
        kafka_view = _describe_topic_partitions(cluster, B2, "elr")
        assert (list(kafka_view.eligible_leader_replicas), kafka_view.leader_id) == ([B1], B2)
        read = [v for _o, v in client.read_all("elr", 0)]
        missing = [v for v in acked if v not in set(read)]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        print(f"ELR member led {elected_after_s:.1f}s after its restart; {len(acked)} acknowledged records all read")
    finally:
        client.close()


def test_a_node_refuses_to_start_on_a_finalized_level_it_does_not_support(tmp_path: Path) -> None:
    """A metadata log that finalizes metadata.version 99 (here through the bootstrap file the first
    active controller commits): the controller stops with status 1 and its log names the feature."""
    from kraftlog.metadata_log import SUPPORTED_FEATURES, FeatureLevelRecord
    from kraftlog.quorum import write_bootstrap_records

    c = LocalCluster(tmp_path / "c", controllers=1)
    try:
        c.plan()
        spec = c.nodes[1]
        write_bootstrap_records(Path(spec.dir) / "metadata", [FeatureLevelRecord("metadata.version", 99)])
        c.start_node(1)
        wait_until(lambda: not c.is_running(1), 60, what="the controller to stop")
        text = Path(spec.log_path).read_text()
        supported = SUPPORTED_FEATURES["metadata.version"]
        span = f"supports {supported.min_version}-{supported.max_version}"
        assert "metadata.version at level 99" in text and span in text, text[-2000:]
    finally:
        c.stop()
