"""The queue workload's chaos run (issue 28): ``kraftlog chaos run --workload queue`` as a real process
with its own 6-node cluster, a seeded fault every 3-5 s for 10 s, while four workers (transactional
and idempotent producers; subscribed consumers of a classic and of a KIP-848 group, assigned ones)
send, poll and run transactions mixing both, writing the history as they go. Then the run's own
final reads, and the checker on the history file alone: no anomaly of any class that fails a run.
``kraftlog chaos check --history`` on the saved file gives the same verdict.
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
SEED = 20262801
FAILING = (
    "lost_write",
    "duplicate",
    "inconsistent_offsets",
    "poll_skip",
    "int_poll_skip",
    "nonmonotonic_poll",
    "int_nonmonotonic_poll",
    "int_nonmonotonic_send",
    "unseen",
    "aborted_read",
    "g1a",
    "g1c",
)


def _kraftlog(*argv: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


@pytest.mark.timeout(300)
def test_queue_chaos_run_finds_no_anomaly(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    proc = _kraftlog(
        "chaos",
        "run",
        "--workload",
        "queue",
        "--duration",
        "10s",
        "--seed",
        str(SEED),
        "--interval",
        "3-5",
        "--work-dir",
        str(tmp_path),
        "--history",
        str(history),
        timeout_s=280,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {proc.stderr[-3000:]}"
    print(proc.stdout)
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["seed"] == SEED and result["workload"] == "queue"
    assert {name: result[name] for name in FAILING} == dict.fromkeys(FAILING, 0), result.get("queue_examples")
    assert result["queue_anomalies"] == [] and result["queue_final_reads"]
    assert result["operations"] > 200 and result["transactions"] > 10
    ops = result["queue_ops"]
    assert ops.get("send_ok", 0) > 50 and ops.get("poll_ok", 0) > 50 and ops.get("txn_ok", 0) > 5
    assert result["lost"] == 0 and result["converged"] and result["faults"] >= 2
    assert result["ok"] and proc.returncode == 0
    assert result["history"] == str(history) and result["history_bytes"] == history.stat().st_size
    again = _kraftlog("chaos", "check", "--history", str(history), "--output", "json", timeout_s=120)
    rechecked = json.loads(again.stdout.strip().splitlines()[-1])
    assert again.returncode == 0 and rechecked["anomalies"] == [] and rechecked["seed"] == SEED
    assert rechecked["operations"] == result["operations"] and rechecked["g0"] == result["g0"]
