"""The storage faults' chaos run (issue 28): ``kraftlog chaos run --faults`` naming the four
storage kinds and slow fsync, as a real process with its own 6-node cluster, under the acks=all
data workload. Each storage fault kills one broker with SIGKILL, damages its partition files
while it is down (a bit flipped in the newest segment or in an offset index, the newest segment
cut, the writes not fsynced lost) and starts it again, on a converged cluster only (so the damage
is a minority's); slow fsync delays every fsync of a partition leader's broker for a while, and is
not held back for convergence (it loses nothing, so it may meet a broker still recovering).

The hard verdicts are the run's own: nothing acknowledged lost, no acknowledged offset rewritten,
no duplicate, the cluster converged; the seeded schedule's kinds each damaged files.
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
SEED = 20260014  # its schedule: slow_fsync, bitflip_segment, truncate_segment, bitflip_index, ...
KINDS = ("bitflip_segment", "bitflip_index", "truncate_segment", "lose_unsynced", "slow_fsync")


@pytest.mark.timeout(300)
def test_storage_faults_on_a_minority_lose_nothing_and_converge(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "kraftlog.cli",
        "chaos",
        "run",
        "--faults",
        ",".join(KINDS),
        "--duration",
        "30s",
        "--seed",
        str(SEED),
        "--interval",
        "3-5",
        "--work-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=280, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    lines = proc.stdout.strip().splitlines()
    print(proc.stdout)
    assert lines and lines[-1].startswith("{"), f"no summary (exit {proc.returncode}); stderr: {proc.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert result["seed"] == SEED and set(result["fault_counts"]) == set(KINDS)
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["duplicates"] == 0 and result["offset_mismatches"] == 0 and result["reordered"] == 0
    assert result["converged"]
    assert not [f for f in result["fault_log"] if f["error"]]
    damaged = {f["kind"] for f in result["fault_log"] if f.get("damaged_files", 0) > 0}
    assert len(damaged) >= 2, result["fault_log"]
    assert result["fault_counts"]["slow_fsync"] >= 1
    # a minority's damage each time: the runner holds a damaging fault until the cluster converged.
    # Slow fsync damages nothing and is not held (it may land while a damaged broker still recovers).
    damaging = [f for f in result["fault_log"] if f["kind"] != "slow_fsync"]
    assert damaging and all(f["injected_before_recovery"] is None for f in damaging), damaging
    assert result["ok"] and proc.returncode == 0
