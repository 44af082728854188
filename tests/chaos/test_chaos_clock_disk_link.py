"""The clock, disk-full and link nemeses in chaos runs (issue 28), each ``kraftlog chaos run`` as a
real process with its own 6-node cluster, short (20 s of faults):

- the queue workload under ``clock_skew`` and ``clock_jump`` (a node's wall clock seconds off or
  hours away through the house clock's test hook): timestamps, retention, sessions, locks and
  transaction timeouts on the shifted node must cost retries, never records: no anomaly class
  that fails a run, nothing lost, the cluster converged;
- the data workload under ``disk_full`` (a broker's first log dir ENOSPC: it goes offline, its
  partitions move, the restart brings it back) and ``delay_link`` (two brokers' messages delayed,
  netem or HTB): nothing acknowledged lost, rewritten or duplicated, converged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kraftlog.deploy._netns import unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

ROOT = Path(__file__).resolve().parents[2]
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


def _run(tmp_path: Path, *argv: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", "chaos", "run", "--work-dir", str(tmp_path), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    lines = proc.stdout.strip().splitlines()
    print(proc.stdout)
    assert lines and lines[-1].startswith("{"), f"no summary (exit {proc.returncode}); stderr: {proc.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["_exit"] = proc.returncode
    return result


@pytest.mark.timeout(300)
def test_clock_skews_and_jumps_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    seed = 20262811  # clock_skew +12 s on a broker, then jumps of -1 h and -10 min on two controllers
    result = _run(
        tmp_path,
        *("--workload", "queue", "--faults", "clock_skew,clock_jump", "--duration", "20s"),
        *("--seed", str(seed), "--interval", "3-5", "--history", str(tmp_path / "history.jsonl")),
    )
    assert result["seed"] == seed and result["fault_counts"]["clock_skew"] >= 1
    assert result["fault_counts"]["clock_jump"] >= 1
    assert all(f["offset_ms"] != 0 and f["error"] is None for f in result["fault_log"]), result["fault_log"]
    assert {name: result[name] for name in FAILING} == dict.fromkeys(FAILING, 0), result.get("queue_examples")
    assert result["lost"] == 0 and result["duplicates"] == 0 and result["converged"]
    assert result["operations"] > 100 and result["transactions"] > 5
    assert result["ok"] and result["_exit"] == 0


@pytest.mark.timeout(300)
def test_a_full_log_dir_and_delayed_links_lose_nothing(tmp_path: Path) -> None:
    seed = 20262816  # delay_link first, then disk_full (held until the cluster converged: ~15-20 s here)
    result = _run(
        tmp_path, "--faults", "disk_full,delay_link", "--duration", "20s", "--seed", str(seed), "--interval", "4-6"
    )
    assert result["fault_counts"]["disk_full"] >= 1
    assert not [f for f in result["fault_log"] if f["error"]], result["fault_log"]
    delays = [f for f in result["fault_log"] if f["kind"] == "delay_link"]
    if unavailable_reason() is None:
        assert delays and all("netem" in f["how"] or "htb" in f["how"] for f in delays), delays
    else:
        assert "delay_link" in result["skipped_faults"]
    # a full dir is held until the cluster converged, as a damaging fault is: a minority's each time
    assert all(f["injected_before_recovery"] is None for f in result["fault_log"] if f["kind"] == "disk_full")
    assert result["lost"] == 0 and result["duplicates"] == 0 and result["offset_mismatches"] == 0
    assert result["reordered"] == 0 and result["converged"]
    assert result["ok"] and result["_exit"] == 0
