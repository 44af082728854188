"""The kraftlog CLI against three real controllers (and registered brokers): the commands an
operator runs, as subprocesses, with their JSON output checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.deploy._cluster import LocalCluster

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration


def kraftlog(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"kraftlog {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("cli") / "cluster", controllers=3)
    c.start(timeout_s=60)
    brokers = FakeBrokers(c.controller_addresses, str(c.cluster_id), [1, 2, 3, 4]).start()
    try:
        with c.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
        yield c
    finally:
        brokers.stop()
        c.stop()


def test_topics_lifecycle(cluster: LocalCluster) -> None:
    bs = ["--bootstrap-server", ",".join(cluster.controller_addresses)]
    kraftlog(
        "topics",
        "create",
        *bs,
        "--topic",
        "orders",
        "--partitions",
        "4",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=60000",
    )
    dup = kraftlog("topics", "create", *bs, "--topic", "orders", "--partitions", "1", check=False)
    assert dup.returncode == 1 and "TOPIC_ALREADY_EXISTS" in dup.stderr
    bad = kraftlog("topics", "create", *bs, "--topic", "bad name", check=False)
    assert bad.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in bad.stderr
    described = json.loads(kraftlog("topics", "describe", *bs, "--topic", "orders", "--output", "json").stdout)
    text = json.dumps(described)
    assert "orders" in text and "60000" in text
    kraftlog("topics", "alter", *bs, "--topic", "orders", "--partitions", "6")
    listed = kraftlog("topics", "list", *bs).stdout.split()
    assert "orders" in listed
    kraftlog("topics", "delete", *bs, "--topic", "orders")
    assert "orders" not in kraftlog("topics", "list", *bs).stdout.split()


def test_quorum_status_and_metadata_tree(cluster: LocalCluster, tmp_path: Path) -> None:
    bs = ["--bootstrap-server", ",".join(cluster.controller_addresses)]
    kraftlog("topics", "create", *bs, "--topic", "tree-topic", "--partitions", "2", "--replication-factor", "2")
    status = json.loads(kraftlog("quorum", "status", *bs, "--output", "json").stdout)
    assert str(status).count("LeaderId") or status
    flat = json.dumps(status)
    assert str(cluster.cluster_id) in flat
    replication = kraftlog("quorum", "replication", *bs).stdout
    assert "Leader" in replication and "Follower" in replication
    meta_dir = Path(cluster.nodes[1].dir) / "metadata"
    tree = kraftlog("metadata", "tree", "--log-dir", str(meta_dir)).stdout
    assert "/brokers/topics/tree-topic" in tree and "/brokers/ids/1" in tree
    # online (the active controller's provenance) and offline (node 1's files) agree on the fields
    # the ZooKeeper nodes had: the controller epoch of a partition's state, a broker's registration time
    state = "/brokers/topics/tree-topic/partitions/0/state"
    online = json.loads(kraftlog("metadata", "tree", *bs, "--output", "json").stdout)["nodes"]
    assert online[state]["version"] == 1 and online[state]["controller_epoch"] >= 1
    assert online["/brokers/ids/1"]["version"] == 5 and int(online["/brokers/ids/1"]["timestamp"]) > 0
    assert online["/brokers/ids/1"]["host"] == "127.0.0.1" and online["/brokers/ids/1"]["port"] > 0
    offline = json.loads(kraftlog("metadata", "tree", "--log-dir", str(meta_dir), "--output", "json").stdout)["nodes"]
    assert offline[state]["controller_epoch"] == online[state]["controller_epoch"]
    assert offline["/brokers/ids/1"]["timestamp"] == online["/brokers/ids/1"]["timestamp"]
    assert offline["/config/topics/tree-topic"] == {"version": 1, "config": {}}
    dump = kraftlog("metadata", "dump", str(meta_dir / "__cluster_metadata-0")).stdout
    assert "TopicRecord" in dump and "RegisterBrokerRecord" in dump


def test_reassign_and_elect_leaders(cluster: LocalCluster, tmp_path: Path) -> None:
    bs = ["--bootstrap-server", ",".join(cluster.controller_addresses)]
    kraftlog("topics", "create", *bs, "--topic", "moving", "--replica-assignment", "1:2:3")
    plan = tmp_path / "plan.json"
    # shrinking to a subset completes at once (no new replica has to catch up)
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}))
    kraftlog("reassign", "execute", *bs, "--reassignment-json-file", str(plan))
    verify = kraftlog("reassign", "verify", *bs, "--reassignment-json-file", str(plan)).stdout
    assert "complete" in verify.lower()
    described = kraftlog("topics", "describe", *bs, "--topic", "moving").stdout
    assert "Replicas: 2,3" in described
    elect = kraftlog(
        "elect-leaders", *bs, "--election-type", "PREFERRED", "--topic", "moving", "--partition", "0", check=False
    )
    assert elect.returncode in (0, 1)
    assert "moving-0" in elect.stdout + elect.stderr


def test_metadata_snapshot_on_demand(cluster: LocalCluster) -> None:
    bs = ",".join(cluster.controller_addresses)
    out = json.loads(kraftlog("metadata", "snapshot", "--bootstrap-server", bs, "--output", "json").stdout)
    snaps = out["snapshots"]
    assert len(snaps) == 3 and all(s["snapshot_offset"] >= 0 and Path(s["path"]).exists() for s in snaps)
    tree = kraftlog("metadata", "tree", "--snapshot", snaps[0]["path"]).stdout
    assert "/brokers/ids/1" in tree
