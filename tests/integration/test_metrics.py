"""The Prometheus endpoint on real nodes: three combined controller+broker processes, each serving
broker and controller metrics from one ``metrics.port``; records produced with the client library
show up exactly in the broker counters, the quorum reports one active controller, and a kill -9
makes the surviving leaders report under-replicated partitions. Plus the endpoint on its own, and a
node whose metrics port is taken refusing to start."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from kraftlog.client import GroupAdmin, NewTopic, Producer
from kraftlog.deploy._cluster import LocalCluster, free_port_pair, wait_until
from kraftlog.node import NodeStartupError
from kraftlog.node._metrics_endpoint import MetricsEndpoint

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
    "offsets.topic.num.partitions": 1,  # __consumer_offsets, created for the lag check
}
TOPIC = "metered"
PARTITIONS = 3
RECORDS = 90

Samples = dict[str, list[tuple[dict[str, str], float]]]


def plan_with_metrics(cluster: LocalCluster) -> dict[int, int]:
    """Plan the cluster, then give every node its own ``metrics.port`` (``overrides`` are the same
    for every node, so the port is appended to each node's config file once it is written)."""
    cluster.plan()
    taken = {
        p
        for n in cluster.nodes.values()
        for base in (n.controller_port, n.broker_port)
        if base
        for p in (base, base + 1)
    }
    ports = {}
    for nid, spec in cluster.nodes.items():
        ports[nid] = free_port_pair(taken)
        with spec.config_path.open("a", encoding="utf-8") as f:
            f.write(f'"metrics.port" = {ports[nid]}\n')
    return ports


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name].append((s.labels, s.value))
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == x for k, x in labels.items()))


def scrape_all(cluster: LocalCluster, ports: dict[int, int]) -> dict[int, Samples]:
    return {nid: scrape(port) for nid, port in ports.items() if cluster.is_running(nid)}


@pytest.fixture
def metered(tmp_path: Path):
    cluster = LocalCluster(tmp_path / "c", controllers=3, combined=True, overrides=OVERRIDES)
    ports = plan_with_metrics(cluster)
    cluster.start(timeout_s=60)
    try:
        yield cluster, ports
    finally:
        cluster.stop()


def test_metrics_of_a_live_cluster(metered: tuple[LocalCluster, dict[int, int]]) -> None:
    cluster, ports = metered
    with cluster.admin(request_timeout_ms=20_000) as admin:
        wait_until(
            lambda: sum(not b.fenced for b in admin.describe_cluster().brokers) == 3, 30, what="three unfenced brokers"
        )
        resp = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})])
        assert resp.topics[0].error.code == 0, resp

        def fully_replicated() -> bool:
            parts = admin.describe_topics([TOPIC]).topics[0].partitions
            return len(parts) == PARTITIONS and all(p.leader_id >= 0 and len(p.isr) == 3 for p in parts)

        wait_until(fully_replicated, 30, what="every partition led with a full ISR")

    payload = 0
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        futures = []
        for i in range(RECORDS):
            value = f"record-{i:04d}".encode() * 8
            payload += len(value)
            futures.append(producer.send(TOPIC, value, partition=i % PARTITIONS))
        producer.flush(30)
        assert all(f.result(30).offset >= 0 for f in futures)

    # every record was appended once, by the leader of its partition: the brokers' bytes in add up
    # to exactly the partition logs, which hold nothing else
    with cluster.admin(request_timeout_ms=20_000) as admin:
        leaders = {p.partition_index: p.leader_id for p in admin.describe_topics([TOPIC]).topics[0].partitions}
    log_bytes = sum(
        f.stat().st_size
        for p, leader in leaders.items()
        for f in (Path(cluster.nodes[leader].dir) / "data" / f"{TOPIC}-{p}").glob("*.log")
    )
    # consumer lag, on the group's coordinator: 30 records per partition, offset 10 committed
    with GroupAdmin(cluster.bootstrap_servers) as groups:
        groups.alter_offsets("metered-group", {(TOPIC, 0): 10})

    def lag_exported() -> bool:
        now = scrape_all(cluster, ports)
        lags = [
            total(s, "kraftlog_consumer_group_lag", group="metered-group", topic=TOPIC, partition="0")
            for s in now.values()
        ]
        committed = [
            total(s, "kraftlog_consumer_group_committed_offset", group="metered-group", topic=TOPIC, partition="0")
            for s in now.values()
        ]
        return sorted(lags) == [0, 0, 20] and sorted(committed) == [0, 0, 10]

    wait_until(lag_exported, 30, interval_s=0.5, what="the group's lag on its coordinator")

    nodes = scrape_all(cluster, ports)
    assert len(nodes) == 3
    messages_in = sum(total(s, "kraftlog_broker_topic_messages_in_total", topic=TOPIC) for s in nodes.values())
    bytes_in = sum(total(s, "kraftlog_broker_topic_bytes_in_total", topic=TOPIC) for s in nodes.values())
    assert messages_in == RECORDS
    assert bytes_in == log_bytes > payload
    assert sum(total(s, "kraftlog_broker_request_duration_seconds_count", method="Produce") for s in nodes.values()) > 0
    assert sum(total(s, "kraftlog_broker_replication_bytes_out_total") for s in nodes.values()) >= 2 * log_bytes
    for s in nodes.values():  # a combined node serves both roles' metrics, and the process collector's
        assert total(s, "kraftlog_raft_current_epoch") >= 1
        assert "kraftlog_controller_global_partitions" in s and "process_cpu_seconds_total" in s

    def quorum_settled() -> bool:
        now = scrape_all(cluster, ports)
        return sum(total(s, "kraftlog_controller_active_controllers") for s in now.values()) == 1

    wait_until(quorum_settled, 15, what="exactly one active controller across the quorum")

    def isr_full() -> bool:
        now = scrape_all(cluster, ports)
        led = sum(total(s, "kraftlog_broker_leader_partitions") for s in now.values())
        return led == PARTITIONS + 1 and all(  # and the one partition of __consumer_offsets
            total(s, "kraftlog_broker_under_replicated_partitions") == 0 for s in now.values()
        )

    wait_until(isr_full, 15, what="no under-replicated partition once the ISR is full")

    # kill -9 a node that is not the active controller: once the controller fences it (or a leader
    # drops it from the ISR), some surviving leader reports under-replicated partitions
    active = cluster.active_controller()
    victim = next(nid for nid in sorted(cluster.nodes) if nid != active)
    cluster.kill(victim)

    def under_replicated() -> bool:
        now = scrape_all(cluster, ports)
        return sum(total(s, "kraftlog_broker_under_replicated_partitions") for s in now.values()) > 0

    wait_until(under_replicated, 20, interval_s=0.2, what="a surviving leader reporting under-replicated partitions")
    survivors = scrape_all(cluster, ports)
    assert victim not in survivors
    assert max(total(s, "kraftlog_controller_fenced_brokers") for s in survivors.values()) == 1
    assert all(total(s, "kraftlog_broker_offline_partitions") == 0 for s in survivors.values())


def test_endpoint_serves_its_registry_and_stops() -> None:
    registry = CollectorRegistry()
    Counter("kraftlog_test_things", "Things.", registry=registry).inc(3)
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    endpoint.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            assert "kraftlog_test_things_total 3.0" in resp.read().decode()
    finally:
        endpoint.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=2)


def test_a_taken_metrics_port_stops_the_node_naming_the_key(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NodeStartupError, match=r"metrics\.port"):
            MetricsEndpoint(CollectorRegistry(), "127.0.0.1", port).start()

        cluster = LocalCluster(tmp_path / "c", controllers=1)
        cluster.plan()
        config = cluster.nodes[1].config_path
        with config.open("a", encoding="utf-8") as f:
            f.write(f'"metrics.port" = {port}\n')
        proc = subprocess.run(
            [sys.executable, "-m", "kraftlog.cli", "serve", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "metrics.port" in last and f"127.0.0.1:{port}" in last, proc.stderr
