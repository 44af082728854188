"""The transactional workload's chaos run (issue 15): ``kraftlog chaos run --workload eos`` as a real
process with its own 6-node cluster, a seeded fault every 4-7 s for 30 s under the acks=all
producers of topic A while two transactional processors copy A to B (read_committed consumers of
one group, read-process-write with the offsets committed in each transaction, about one
transaction in ten aborted on purpose, seeded crashes with a transaction open).

The hard verdicts are the run's own: every record of A in B's committed data exactly once
(eos_violations), no output of an aborted transaction visible to read_committed (aborted_visible),
no committed transaction only partly visible (partial_txns), nothing acknowledged lost or written
twice, the cluster converged.
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
SEED = 20261507


@pytest.mark.timeout(300)
def test_eos_chaos_run_is_exactly_once(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "kraftlog.cli",
        "chaos",
        "run",
        "--workload",
        "eos",
        "--duration",
        "30s",
        "--seed",
        str(SEED),
        "--interval",
        "4-7",
        "--work-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=280, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {proc.stderr[-3000:]}"
    print(proc.stdout)
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["seed"] == SEED and result["workload"] == "eos"
    assert result["lost"] == 0, result.get("lost_examples")
    assert result["duplicates"] == 0 and result["offset_mismatches"] == 0
    assert result["eos_violations"] == 0, result.get("eos_examples")
    assert result["aborted_visible"] == 0, result.get("eos_examples")
    assert result["partial_txns"] == 0, result.get("eos_examples")
    assert result["converged"] and result["eos_drained"]
    assert result["eos_final_committed"] == result["eos_end_offsets"]
    assert result["acknowledged"] > 1000 and result["eos_inputs"] >= result["acknowledged"]
    assert result["eos_outputs_committed"] == result["eos_inputs"]
    assert result["txns_committed"] > 50
    assert result["txns_aborted_deliberately"] >= 3 and result["aborted_in_log"] > 0  # aborted data was there to hide
    assert result["eos_processors"] == 2 and result["processor_crashes"] >= 1
    assert result["processor_restarts"] >= result["processor_crashes"]
    assert result["faults"] >= 4
    assert not [f for f in result["fault_log"] if f["error"]]
    assert result["ok"] and proc.returncode == 0
