"""The standard gRPC health service on real nodes: a broker says SERVING only while it knows itself
unfenced (not before it could register, and not after a session without an answered heartbeat until
a fresh one unfences it); a controller says SERVING once it serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.deploy.chaos import HealthProbe

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
}
BROKER = 101


def _fenced(cluster: LocalCluster, broker: int) -> bool:
    with cluster.admin(request_timeout_ms=5_000) as admin:
        return any(b.broker_id == broker and b.fenced for b in admin.describe_cluster().brokers)


@pytest.mark.timeout(180)
def test_broker_health_follows_its_fencing(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=3, brokers=1, overrides=OVERRIDES)
    cluster.plan()
    spec = cluster.nodes[BROKER]
    broker = HealthProbe({BROKER: [f"{spec.host}:{spec.broker_port}"]}, timeout_s=1.0)
    controllers = HealthProbe(
        {n: [f"{s.host}:{s.controller_port}"] for n, s in cluster.nodes.items() if s.controller_port}, timeout_s=1.0
    )
    try:
        # the broker alone: it listens, but without a controller it cannot register
        cluster.start_node(BROKER)
        wait_until(
            lambda: "broker_started" in spec.log_path.read_text(encoding="utf-8"), 30, what="the broker to listen"
        )
        assert broker.not_serving() == [BROKER]
        for nid in (1, 2, 3):
            cluster.start_node(nid)
        cluster.wait_ready(60)
        wait_until(lambda: controllers.not_serving() == [], 30, what="controllers serving")
        wait_until(lambda: broker.not_serving() == [], 60, what="the broker serving once unfenced")

        # paused past its session: fenced by the controller. Running again, it knows no heartbeat of
        # the last session was answered (an answer sent before the pause no longer holds), so it
        # stops saying SERVING until a fresh heartbeat unfences it
        cluster.pause(BROKER)
        try:
            wait_until(lambda: _fenced(cluster, BROKER), 30, interval_s=0.2, what="the paused broker fenced")
        finally:
            cluster.resume(BROKER)
        wait_until(
            lambda: "broker_not_serving" in spec.log_path.read_text(encoding="utf-8"),
            30,
            what="the broker to stop serving after its fencing",
        )
        wait_until(
            lambda: broker.not_serving() == [] and not _fenced(cluster, BROKER),
            60,
            what="the broker serving again once unfenced",
        )
    finally:
        broker.close()
        controllers.close()
        cluster.stop()
