"""examples/client_quickstart.py works against a real cluster, as a new user would run it (issue 13 §5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "client_quickstart.py"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("example") / "c",
        controllers=1,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500},
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        yield c
    finally:
        c.stop()


def test_quickstart_produces_consumes_describes_and_deletes(cluster: LocalCluster) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--bootstrap-controller",
            ",".join(cluster.controller_addresses),
            "--records",
            "12",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "topic quickstart ready" in out
    assert out.count("produced to partition") == 12
    assert "consumed 12 of 12 records" in out
    # the same key always lands in the same partition, in order
    by_key: dict[str, set[str]] = {}
    for line in out.splitlines():
        if line.startswith("consumed user-"):
            key = line.split()[1]
            by_key.setdefault(key, set()).add(line.split("(partition ")[1].split(",")[0])
    assert len(by_key) == 3 and all(len(parts) == 1 for parts in by_key.values())
    assert out.count("leader 1, replicas [1], isr [1]") == 3
    assert "topic quickstart deleted: True" in out
    with cluster.admin(request_timeout_ms=20_000) as admin:
        wait_until(lambda: "quickstart" not in admin.list_topics(), 30, what="the topic gone")
