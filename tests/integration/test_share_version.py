"""The ``share.version`` feature on a real node (issue 27, KIP-932): a cluster formatted with
``--feature share.version=0`` refuses share groups as Kafka does (ShareGroupHeartbeat answers
UNSUPPORTED_VERSION, kraftlog's `ShareConsumer` fails with `UnsupportedVersionError`,
``kraftlog share-groups --describe`` exits 1 naming the feature); ``kraftlog features upgrade
--feature share.version=1`` turns them on without a restart, and then the same group's consumers
(kraftlog's and confluent-kafka's) receive every record. A cluster formatted by default has
share.version 1 (Kafka 4.2's default), which every other share test relies on.

On main no cluster can be formatted with ``--feature`` and nothing gates share groups: the
heartbeat of a share.version-0 cluster is answered (error code 0 instead of 35).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from kraftlog.client import NewTopic, Producer, ShareConsumer
from kraftlog.common import errors as kerr
from kraftlog.deploy._cluster import LocalCluster, wait_until

from ._security_helpers import kafka_call

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}
UNSUPPORTED_VERSION = kerr.UnsupportedVersionError.error_code  # 35


def kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("sharever") / "c",
        controllers=1,
        combined=True,
        overrides=OVERRIDES,
        format_args=("--feature", "share.version=0"),
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic("queue", num_partitions=2, replication_factor=1)])
        yield c
    finally:
        c.stop()


def share_version(cluster: LocalCluster) -> int:
    proc = kraftlog("features", "describe", "--bootstrap-server", cluster.bootstrap_servers, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    return {f["feature"]: f["finalized_version_level"] for f in json.loads(proc.stdout)["features"]}["share.version"]


def heartbeat_error(cluster: LocalCluster, group: str) -> int:
    values = {"group_id": group, "member_id": "m" * 22, "member_epoch": 0, "rack_id": None}
    answer: Any = kafka_call(cluster, None, 76, 1, {**values, "subscribed_topic_names": ["queue"]})
    return int(answer.error_code)


def earliest(cluster: LocalCluster, group: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_share_groups_are_refused_at_share_version_0_and_served_once_upgraded(cluster: LocalCluster) -> None:
    assert heartbeat_error(cluster, "g") == UNSUPPORTED_VERSION
    with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
        values = [f"r{i}".encode() for i in range(20)]
        for i, v in enumerate(values):
            p.send("queue", v, partition=i % 2)
        p.flush()
    earliest(cluster, "g")  # a group config: IncrementalAlterConfigs is not gated

    refused = ShareConsumer(cluster.bootstrap_servers, group_id="g", fetch_max_wait_ms=200)
    try:
        refused.subscribe(["queue"])
        started = time.monotonic()
        with pytest.raises(kerr.UnsupportedVersionError, match="share.version"):
            deadline = started + 20
            while time.monotonic() < deadline:
                assert refused.poll(200) == []
        print(f"refused after {time.monotonic() - started:.2f} s")
    finally:
        refused.close()
    described = kraftlog("share-groups", "--bootstrap-server", cluster.bootstrap_servers, "--describe", "--group", "g")
    assert described.returncode == 1, described
    assert "UNSUPPORTED_VERSION" in described.stderr and "share.version" in described.stderr, described.stderr

    upgraded = kraftlog(
        "features", "upgrade", "--bootstrap-server", cluster.bootstrap_servers, "--feature", "share.version=1"
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert share_version(cluster) == 1
    # every broker applies the FeatureLevelRecord from the metadata log: no restart
    wait_until(lambda: heartbeat_error(cluster, "probe") == 0, 20, what="the heartbeat served")

    ours = ShareConsumer(cluster.bootstrap_servers, group_id="g", fetch_max_wait_ms=200)
    theirs = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "g", "client.id": "rdk", "log_level": 3}
    )
    seen: list[bytes] = []
    try:
        ours.subscribe(["queue"])
        theirs.subscribe(["queue"])
        started = time.monotonic()
        while len(seen) < len(values) and time.monotonic() - started < 60:
            seen += [r.value for r in ours.poll(200)]
            seen += [m.value() for m in theirs.poll(0.2) if m.error() is None]
        print(f"every record received {time.monotonic() - started:.2f} s after the upgrade")
    finally:
        ours.close()
        theirs.close()
    assert sorted(seen) == sorted(values)
    described = kraftlog("share-groups", "--bootstrap-server", cluster.bootstrap_servers, "--describe", "--group", "g")
    assert described.returncode == 0, described.stderr

    # and off again while the group exists (Kafka refuses no such downgrade): refused at once, and
    # the broker dropped its share sessions and partitions without stopping
    downgraded = kraftlog(
        "features", "downgrade", "--bootstrap-server", cluster.bootstrap_servers, "--feature", "share.version=0"
    )
    assert downgraded.returncode == 0, downgraded.stderr
    wait_until(lambda: heartbeat_error(cluster, "g") == UNSUPPORTED_VERSION, 20, what="share groups off again")
    cluster.wait_unfenced_brokers()  # the broker still runs and heartbeats
