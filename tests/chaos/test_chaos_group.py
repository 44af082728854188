"""The group workload's chaos runs (issue 14): ``kraftlog chaos run --workload group`` as a real
process with its own 6-node cluster, a seeded fault every 4-7 s under the acks=all producers while
three consumers of one group read the topic, commit, and restart at seeded times: about 1.5 minutes
with the classic protocol, and a shorter run (about 60 s) with ``--group-protocol consumer``
(KIP-848, the coordinator assigning).

The hard verdicts are the run's own: every acknowledged record consumed by the group, no committed
offset moving backwards (also the group's final committed offsets), no partition owned by two
members in one generation (classic), no two members holding one partition over overlapping times
(both; overlaps with a member told its partitions were lost are Kafka's allowed window and only
counted), nothing acknowledged lost, the cluster converged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261123
CONSUMER_PROTOCOL_SEED = 20261124


def _run(tmp_path: Path, seed: int, duration: str, *extra: str) -> tuple[dict[str, Any], int]:
    cmd = [
        sys.executable,
        "-m",
        "kraftlog.cli",
        "chaos",
        "run",
        "--workload",
        "group",
        *extra,
        "--duration",
        duration,
        "--seed",
        str(seed),
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
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["seed"] == seed and result["workload"] == "group"
    return result, proc.returncode


@pytest.mark.timeout(400)
def test_group_chaos_run_consumes_everything_and_keeps_commits(tmp_path: Path) -> None:
    result, returncode = _run(tmp_path, SEED, "55s")
    assert result["group_protocol"] == "classic"
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["offset_mismatches"] == 0
    assert result["consumed_missing"] == 0, result.get("consumed_missing_examples")
    assert result["commit_regressions"] == 0, result.get("commit_regression_examples")
    assert result["double_owners"] == 0, result.get("double_owner_examples")
    assert result["overlapping_owners"] == 0, result.get("overlapping_owner_examples")
    assert result["converged"] and result["group_drained"]
    assert result["acknowledged"] > 1000 and result["consumed"] >= result["acknowledged"]
    assert result["commits"] > 100
    assert result["group_members"] == 3 and result["member_restarts"] >= 3
    assert result["group_rebalances"] >= 3  # the members' restarts, at least
    assert result["group_final_committed"] == result["group_end_offsets"]
    assert result["faults"] >= 8
    assert not [f for f in result["fault_log"] if f["error"]]
    assert result["ok"] and returncode == 0


@pytest.mark.timeout(300)
def test_consumer_protocol_group_chaos_run(tmp_path: Path) -> None:
    """The same under KIP-848 members (``--group-protocol consumer``), 40 s of faults."""
    result, returncode = _run(tmp_path, CONSUMER_PROTOCOL_SEED, "40s", "--group-protocol", "consumer")
    assert result["group_protocol"] == "consumer"
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["offset_mismatches"] == 0
    assert result["consumed_missing"] == 0, result.get("consumed_missing_examples")
    assert result["commit_regressions"] == 0, result.get("commit_regression_examples")
    assert result["overlapping_owners"] == 0, result.get("overlapping_owner_examples")
    assert result["double_owners"] == result["overlapping_owners"]
    assert result["converged"] and result["group_drained"]
    assert result["acknowledged"] > 500 and result["consumed"] >= result["acknowledged"]
    assert result["commits"] > 50
    assert result["group_members"] == 3 and result["member_restarts"] >= 3
    assert result["group_assignments"] >= 6  # the members' restarts move partitions, at least
    assert result["group_final_committed"] == result["group_end_offsets"]
    assert result["faults"] >= 6
    assert not [f for f in result["fault_log"] if f["error"]]
    assert result["ok"] and returncode == 0
