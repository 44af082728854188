"""The group workload's chaos run (issue 14, about 1.5 minutes): ``kraftlog chaos run --workload
group`` as a real process with its own 6-node cluster, a seeded fault every 4-7 s under the acks=all
producers while three consumers of one group read the topic, commit, and restart at seeded times.

The hard verdicts are the run's own: every acknowledged record consumed by the group, no committed
offset moving backwards (also the group's final committed offsets), no partition owned by two
members in one generation, nothing acknowledged lost, the cluster converged.
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
SEED = 20261123


@pytest.mark.timeout(400)
def test_group_chaos_run_consumes_everything_and_keeps_commits(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "kraftlog.cli",
        "chaos",
        "run",
        "--workload",
        "group",
        "--duration",
        "70s",
        "--seed",
        str(SEED),
        "--interval",
        "4-7",
        "--work-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=360, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {proc.stderr[-3000:]}"
    print(proc.stdout)
    result = json.loads(lines[-1])
    assert result["seed"] == SEED and result["workload"] == "group"
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["offset_mismatches"] == 0
    assert result["consumed_missing"] == 0, result.get("consumed_missing_examples")
    assert result["commit_regressions"] == 0, result.get("commit_regression_examples")
    assert result["double_owners"] == 0, result.get("double_owner_examples")
    assert result["converged"] and result["group_drained"]
    assert result["acknowledged"] > 1000 and result["consumed"] >= result["acknowledged"]
    assert result["commits"] > 100
    assert result["group_members"] == 3 and result["member_restarts"] >= 3
    assert result["group_rebalances"] >= 3  # the members' restarts, at least
    assert result["group_final_committed"] == result["group_end_offsets"]
    assert result["faults"] >= 8
    assert not [f for f in result["fault_log"] if f["error"]]
    assert result["ok"] and proc.returncode == 0
