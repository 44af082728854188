"""Three real controller processes on 127.0.0.1: failover under writes, identical logs, restarts.

Every wait is a bounded poll. The kill loop is seeded, so a failure can be replayed.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.metadata_log import MetadataImage, latest_snapshot, read_log_dir, read_snapshot
from kraftlog.metadata_log.image import MetadataDelta
from kraftlog.quorum._server import METADATA_PARTITION_DIR

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration

OVERRIDES = {"controller.quorum.election.timeout.ms": 1000, "broker.session.timeout.ms": 9000}


@pytest.fixture
def cluster(tmp_path: Path):
    c = LocalCluster(tmp_path / "cluster", controllers=3, overrides=OVERRIDES)
    c.start(timeout_s=60)
    brokers = FakeBrokers(c.controller_addresses, str(c.cluster_id), [1001, 1002, 1003]).start()
    try:
        with c.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
        yield c
    finally:
        brokers.stop()
        c.stop()


def _entries(cluster: LocalCluster, node_id: int) -> list:
    d = Path(cluster.nodes[node_id].dir) / "metadata" / METADATA_PARTITION_DIR
    return list(read_log_dir(d))


def _image(cluster: LocalCluster, node_id: int) -> MetadataImage:
    d = Path(cluster.nodes[node_id].dir) / "metadata" / METADATA_PARTITION_DIR
    snap = latest_snapshot(d)
    image = MetadataImage.EMPTY
    start = 0
    if snap is not None:
        s = read_snapshot(snap.path)
        image = MetadataImage.from_records(s.records, s.offset, s.epoch, s.timestamp_ms)
        start = s.offset + 1
    delta = MetadataDelta(image)
    for e in read_log_dir(d, from_offset=start):
        delta.replay(e)
    return delta.apply()


def _create(admin, name: str) -> bool:
    resp = admin.create_topics([NewTopic(name, 1, 1)], timeout_ms=3000)
    return all(t.error.code in (0, 36) for t in resp.topics) and len(resp.topics) == 1


def _converged(cluster: LocalCluster) -> bool:
    logs = [_entries(cluster, n) for n in cluster.nodes]
    return all(len(x) == len(logs[0]) and x[-1:] == logs[0][-1:] for x in logs)


def test_failover_under_writes_keeps_every_acknowledged_write(cluster: LocalCluster) -> None:
    acked: list[str] = []
    with cluster.admin(request_timeout_ms=10_000) as admin:
        for i in range(20):
            assert _create(admin, f"before-{i}")
            acked.append(f"before-{i}")
        leader = cluster.active_controller()
        assert leader is not None
        killed_at = time.monotonic()
        cluster.kill(leader)
        # the first write after the kill: a new leader must commit within 3 s
        first_commit = None
        i = 0
        while time.monotonic() - killed_at < 15:
            name = f"after-{i}"
            i += 1
            if _create(admin, name):
                acked.append(name)
                if first_commit is None:
                    first_commit = time.monotonic() - killed_at
                if i > 20:
                    break
        assert first_commit is not None and first_commit < 3.0, f"first commit after {first_commit}s"
        cluster.start_node(leader)
        wait_until(lambda: _converged(cluster), 30, what="metadata logs to converge")
        names = set(admin.list_topics())
    assert set(acked) <= names
    logs = [_entries(cluster, n) for n in sorted(cluster.nodes)]
    assert logs[0] == logs[1] == logs[2]  # record for record


def test_restart_all_three_gives_the_same_image(cluster: LocalCluster) -> None:
    with cluster.admin(request_timeout_ms=10_000) as admin:
        for i in range(10):
            assert _create(admin, f"t{i}")
    wait_until(lambda: _converged(cluster), 30, what="logs to converge")
    before = _image(cluster, 1)
    cluster.stop()
    for nid in sorted(cluster.nodes):
        cluster.start_node(nid)
    cluster.wait_ready(60)
    with cluster.admin(request_timeout_ms=10_000) as admin:
        topics = {t.name for t in admin.describe_topics().topics}
    assert {f"t{i}" for i in range(10)} <= topics
    for nid in cluster.nodes:
        assert _image(cluster, nid).topics == before.topics


def test_one_controller_alone_commits_nothing(cluster: LocalCluster) -> None:
    leader = cluster.active_controller()
    assert leader is not None
    others = [n for n in cluster.nodes if n != leader]
    for n in others:
        cluster.kill(n)
    with cluster.admin(request_timeout_ms=4000) as admin:
        start = time.monotonic()
        resp = admin.create_topics([NewTopic("lonely", 1, 1)], timeout_ms=4000)
        elapsed = time.monotonic() - start
    err = resp.topics[0].error
    assert err.code != 0, "a lone controller committed a write"
    assert err.name in ("NOT_CONTROLLER", "REQUEST_TIMED_OUT")
    assert elapsed < 10
    for n in others:
        cluster.start_node(n)
    cluster.wait_ready(60)
    with cluster.admin(request_timeout_ms=10_000) as admin:
        assert "lonely" not in admin.list_topics()


def test_seeded_kill_loop(cluster: LocalCluster) -> None:
    rng = random.Random(20261122)
    acked: list[str] = []
    with cluster.admin(request_timeout_ms=10_000) as admin:
        for round_ in range(20):
            for i in range(rng.randint(1, 4)):
                name = f"r{round_}-{i}"
                if _create(admin, name):
                    acked.append(name)
            leader = cluster.active_controller()
            victim = leader if leader is not None and rng.random() < 0.8 else rng.choice(list(cluster.nodes))
            cluster.kill(victim)
            wait_until(
                lambda: cluster.active_controller() not in (None, victim),
                15,
                what=f"a new active controller after killing {victim} (round {round_})",
            )
            cluster.start_node(victim)
        wait_until(lambda: all(cluster.is_running(n) for n in cluster.nodes), 10, what="all nodes running")
        wait_until(lambda: _converged(cluster), 60, what="logs to converge after the kill loop")
        names = set(admin.list_topics())
    assert set(acked) <= names
    logs = [_entries(cluster, n) for n in sorted(cluster.nodes)]
    assert logs[0] == logs[1] == logs[2]
