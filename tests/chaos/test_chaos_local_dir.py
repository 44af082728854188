"""``kraftlog chaos run --dir D`` against the cluster ``kraftlog local start --dir D`` started, the way
an operator runs the long soak: two separate commands, the run attaching to running processes it did
not start, killing and restarting them through the cluster's state file.

The cluster is the default local layout (3 combined controller+broker nodes on loopback) with the
chaos timeouts set through ``--override``, and ``--security mtls`` (issue 17): every listener on TLS,
client certificates required, the StandardAuthorizer on. The run takes the security from the
cluster's state and makes every connection (admin, health checks, producers, consumer, checker) with
the cluster's admin certificate; a plaintext connection would get no answer, so a lossless,
converged run is the suite's proof that chaos works under mTLS. On loopback the run cannot cut
links: it must say so, skip only the two network faults, and still lose nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

ROOT = Path(__file__).resolve().parents[2]
SEED = 7
OVERRIDES = (
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=2000",
    "controller.quorum.election.timeout.ms=1000",
)


def kraftlog(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


@pytest.mark.timeout(400)
def test_chaos_run_against_a_cluster_started_by_local_start(tmp_path: Path) -> None:
    d = str(tmp_path / "cluster")
    overrides = [arg for o in OVERRIDES for arg in ("--override", o)]
    started = kraftlog("local", "start", "--dir", d, "--security", "mtls", *overrides, "--output", "json")
    assert started.returncode == 0, started.stderr
    pids_before = json.loads(started.stdout)["pids"]
    try:
        proc = kraftlog(
            "chaos", "run", "--dir", d, "--duration", "30s", "--seed", str(SEED), "--interval", "4-6", timeout_s=300
        )
        print(proc.stdout)
        lines = proc.stdout.strip().splitlines()
        assert lines, f"no output; stderr: {proc.stderr[-3000:]}"
        result = json.loads(lines[-1])
        assert result["seed"] == SEED
        assert result["security"] == "mtls"
        assert result["lost"] == 0, result.get("lost_examples")
        assert result["offset_mismatches"] == 0 and result["reordered"] == 0
        assert result["converged"], result
        assert set(result["skipped_faults"]) == {"partition_active_controller", "partition_leader"}
        assert "network" in proc.stdout.lower() and "skip" in proc.stdout.lower()
        assert result["faults"] >= 4 and not [f for f in result["fault_log"] if f["error"]]
        assert result["acknowledged"] > 300
        assert result["ok"] and proc.returncode == 0
        # the run healed everything: every node is up again, and the killed ones are new processes
        status = json.loads(kraftlog("local", "status", "--dir", d, "--output", "json").stdout)
        assert all(status["running"].values()), status
        killed = {str(n) for f in result["fault_log"] if f["kind"] != "pause" for n in f["nodes"]}
        assert killed and all(status["pids"][n] != pids_before[n] for n in killed)
    finally:
        stopped = kraftlog("local", "stop", "--dir", d)
    assert stopped.returncode == 0, stopped.stderr


def test_chaos_run_refuses_a_cluster_that_is_not_running(tmp_path: Path) -> None:
    missing = kraftlog("chaos", "run", "--dir", str(tmp_path / "nothing"), "--duration", "5s")
    assert missing.returncode == 2 and "no cluster in" in missing.stderr


def test_local_start_names_a_bad_override_and_lays_out_nothing(tmp_path: Path) -> None:
    d = tmp_path / "cluster"
    bad = kraftlog("local", "start", "--dir", str(d), "--override", "broker.session.timeout.msec=2000")
    assert bad.returncode == 2
    assert "broker.session.timeout.msec" in bad.stderr and "broker.session.timeout.ms" in bad.stderr
    assert not d.exists()
