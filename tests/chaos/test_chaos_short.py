"""The short chaos run (about two minutes) of `make test`: ``kraftlog chaos run`` as a real process
with its own 6-node cluster (each node in its own network namespace when the machine allows), a
seeded fault every 4-7 s under an acks=all workload, then the checker. Its workload runs through a
real Kafka client, kafka-python over the brokers' Kafka listeners (issue 16); the group and eos
chaos runs drive the same workload with kraftlog's own client.

The hard verdicts are the run's own: nothing acknowledged lost, no acknowledged offset rewritten, the
cluster converged. The schedule is seeded, so the fault kinds it must have exercised are known.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.deploy._netns import unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261122


@pytest.mark.timeout(600)
def test_short_chaos_run_loses_nothing_and_converges(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "kraftlog.cli",
        "chaos",
        "run",
        "--duration",
        "100s",
        "--seed",
        str(SEED),
        "--interval",
        "4-7",
        "--work-dir",
        str(tmp_path),
        "--client",
        "kafka-python",
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=540, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    lines = proc.stdout.strip().splitlines()
    print(proc.stdout)
    assert lines and lines[-1].startswith("{"), f"no summary (exit {proc.returncode}); stderr: {proc.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert result["seed"] == SEED and result["client"] == "kafka-python"
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["duplicates"] == 0  # the idempotent producer (issue 15)
    assert result["offset_mismatches"] == 0
    assert result["reordered"] == 0
    assert result["converged"] and result["converge_s"] < 30
    assert result["acknowledged"] > 1000 and result["read"] >= result["acknowledged"]
    assert result["faults"] >= 12
    network = {"partition_active_controller", "partition_leader"}
    exercised = {kind for kind, n in result["fault_counts"].items() if n > 0}
    expected = {"kill_broker", "kill_active_controller", "pause", "restart", "kill_minority"}
    if unavailable_reason() is None:
        expected |= network
        assert not result["skipped_faults"]
        assert expected <= exercised, exercised
    else:  # fewer kinds to choose from: another sequence, still seeded
        assert set(result["skipped_faults"]) == network
        assert len(exercised) >= 3, exercised
    assert not [f for f in result["fault_log"] if f["error"]]
    assert result["ok"] and proc.returncode == 0
