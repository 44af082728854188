"""``kraftlog metadata tree`` against a live cluster equals the offline tree of the same metadata log
(issue 25): one combined node with SCRAM on every listener and ACLs on, a topic, an ACL and SCRAM
users, the tree read through the broker (forwarded to the controller) and from the node's files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kraftlog.client import GroupAdmin, NewTopic
from kraftlog.common.security import AclOperation, AclPermissionType, PatternType, ResourceType
from kraftlog.deploy._cluster import LocalCluster
from kraftlog.proto import security_pb2

pytestmark = pytest.mark.integration

_BOB_PASSWORD = "bob-secret"
_SETTLE_S = 20.0  # bound on waiting for the files to reach the online tree's offset


def kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=120)


def _tree(*args: str) -> dict[str, Any]:
    proc = kraftlog("metadata", "tree", *args, "--output", "json")
    assert proc.returncode == 0, f"kraftlog metadata tree {' '.join(args)} -> {proc.returncode}\n{proc.stderr}"
    tree: dict[str, Any] = json.loads(proc.stdout)
    return tree


def _acl(rtype: ResourceType, name: str, pattern: PatternType, op: AclOperation) -> security_pb2.AclBinding:
    return security_pb2.AclBinding(
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        principal="User:bob",
        host="*",
        operation=op,
        permission_type=AclPermissionType.ALLOW,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("zktree"), controllers=1, combined=True, security="scram")
    c.start(timeout_s=90)  # creates the admin SCRAM user
    try:
        c.wait_unfenced_brokers(1, timeout_s=60)
        with c.admin() as admin:
            created = admin.create_topics(
                [NewTopic("zk-open", 2, 1, configs={"retention.ms": "60000"}), NewTopic("zk-hidden", 1, 1)]
            )
            assert [t.error.code for t in created.topics] == [0, 0]
            answer = admin.alter_user_scram_credentials(
                [("bob", 1, _BOB_PASSWORD, 4096), ("bob", 2, _BOB_PASSWORD, 8192)]
            )
            assert [r.error.code for r in answer.results] == [0]
            acls = admin.create_acls(
                [
                    _acl(ResourceType.TOPIC, "zk-open", PatternType.LITERAL, AclOperation.DESCRIBE),
                    _acl(ResourceType.GROUP, "app-", PatternType.PREFIXED, AclOperation.READ),
                ]
            )
            assert [r.error.code for r in acls.results] == [0, 0]
        yield c
    finally:
        c.stop()


def _online_and_offline(cluster: LocalCluster, *online_args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tree read online and from node 1's files once both stand at the same log offset (the
    files may trail the committed image by a moment; bounded)."""
    meta_dir = Path(cluster.nodes[1].dir) / "metadata"
    deadline = time.monotonic() + _SETTLE_S
    while True:
        online = _tree("--bootstrap-server", cluster.bootstrap_servers, *online_args)
        offline = _tree("--log-dir", str(meta_dir))
        if online["offset"] == offline["offset"] or time.monotonic() > deadline:
            return online, offline


def test_online_and_offline_trees_of_one_log_are_equal(cluster: LocalCluster) -> None:
    online, offline = _online_and_offline(cluster, "--command-config", str(cluster.command_config))
    paths = set(online["nodes"]) | set(offline["nodes"])
    differing = sorted(p for p in paths if online["nodes"].get(p) != offline["nodes"].get(p))
    print(f"nodes: {len(paths)}, differing online vs offline: {len(differing)} {differing}")
    assert differing == []
    assert online["offset"] == offline["offset"] and online["epoch"] == offline["epoch"]
    assert list(online["nodes"]) == list(offline["nodes"])  # the same order too
    nodes = online["nodes"]
    # the broker: its Kafka listener by name, with its protocol; not the gRPC listener
    kafka_address = cluster.kafka_bootstrap_servers.split(",")[0]
    broker = nodes["/brokers/ids/1"]
    assert broker["version"] == 5 and broker["jmx_port"] == -1 and int(broker["timestamp"]) > 0
    assert broker["endpoints"] == [f"SASL_SSL://{kafka_address}"]
    assert broker["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL"}
    assert broker["host"] is None and broker["port"] == -1  # no PLAINTEXT listener, as Kafka wrote it
    # the finalized features above level 0: a fresh cluster is formatted with share.version 1
    assert broker["features"] == {"share.version": {"min_version": 1, "max_version": 1}}
    # the controller, from the NoOpRecord that began its epoch
    controller = nodes["/controller"]
    assert controller["version"] == 2 and controller["brokerid"] == 1
    assert controller["kraftControllerEpoch"] == online["epoch"] == nodes["/controller_epoch"]
    assert 0 < int(controller["timestamp"]) <= int(broker["timestamp"])  # it was active before the broker registered
    # ACLs and SCRAM users, online too; salts and keys never
    assert nodes["/kafka-acl/Topic/zk-open"] == {
        "version": 1,
        "acls": [{"host": "*", "permissionType": "Allow", "operation": "Describe", "principal": "User:bob"}],
    }
    assert nodes["/kafka-acl-extended/prefixed/Group/app-"]["acls"][0]["operation"] == "Read"
    assert nodes["/config/users/bob"] == {
        "version": 1,
        "config": {"SCRAM-SHA-256": "iterations=4096", "SCRAM-SHA-512": "iterations=8192"},
    }
    assert "/config/users/admin" in nodes
    assert nodes["/config/topics/zk-open"] == {"version": 1, "config": {"retention.ms": "60000"}}
    assert nodes["/brokers/topics/zk-open"]["partitions"] == {"0": [1], "1": [1]}


def test_a_principal_sees_what_its_acls_allow(cluster: LocalCluster, tmp_path: Path) -> None:
    """Bob may describe one topic and nothing on the cluster: the tree drawn for him is the full
    tree minus what he may not see, and stderr says what was left out."""
    admin_config = cluster.command_config.read_text()
    bob_config = tmp_path / "bob.properties"
    bob_config.write_text(
        re.sub(r'username="[^"]*" password="[^"]*"', f'username="bob" password="{_BOB_PASSWORD}"', admin_config)
    )
    full, _offline = _online_and_offline(cluster, "--command-config", str(cluster.command_config))
    proc = kraftlog(
        "metadata",
        "tree",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--command-config",
        str(bob_config),
        "--output",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)["nodes"]
    assert "/brokers/topics/zk-open" in seen and "/brokers/topics/zk-open/partitions/1/state" in seen
    assert not any("zk-hidden" in p for p in seen)
    assert "/config/topics/zk-open" not in seen  # no DescribeConfigs on it
    assert not any(p.startswith(("/kafka-acl", "/config/users")) for p in seen)
    assert {"/brokers/ids/1", "/cluster/id", "/controller"} <= set(seen)  # as DescribeCluster shows anyone
    assert {p: d for p, d in full["nodes"].items() if p in seen} == seen
    assert "not authorized, left out" in proc.stderr and "Describe on the cluster" in proc.stderr


def test_a_regex_subscription_is_assigned_only_topics_its_principal_may_describe(cluster: LocalCluster) -> None:
    """KAFKA-18813 (issue 25), with librdkafka's KIP-848 consumer: bob may Describe zk-open but not
    zk-hidden; his SubscribedTopicRegex ``^zk-.*`` matches both, and the coordinator assigns him
    zk-open's partitions only (it assigned zk-hidden's too before: existence, id and partitions of
    a topic bob may not see). Runs last in the module: it creates __consumer_offsets."""
    from confluent_kafka import Consumer

    security = cluster.kafka_client_security()
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": security["ssl_cafile"],
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bob",
            "sasl.password": _BOB_PASSWORD,
            "group.id": "app-regex",
            "group.protocol": "consumer",
        }
    )
    try:
        consumer.subscribe(["^zk-.*"])
        deadline = time.monotonic() + 60
        assigned: set[tuple[str, int]] = set()
        while time.monotonic() < deadline and len(assigned) < 2:
            consumer.poll(0.2)
            assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert assigned == {("zk-open", 0), ("zk-open", 1)}
        for _ in range(10):  # a few more heartbeats
            consumer.poll(0.2)
        # what the coordinator assigned, not what librdkafka could resolve: zk-hidden is not there
        with GroupAdmin(cluster.bootstrap_servers, **cluster.client_security()) as groups:
            (member,) = groups.describe_group("app-regex").members
        assert {tp.topic for tp in member.assignment} == {"zk-open"}
        assert {tp.topic for tp in member.target_assignment} == {"zk-open"}
    finally:
        consumer.close()
