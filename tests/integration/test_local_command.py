"""``kraftlog local start|status|stop`` as a user runs it (subprocesses, JSON output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=180)


def test_local_start_status_stop(tmp_path: Path) -> None:
    d = str(tmp_path / "cluster")
    started = kraftlog("local", "start", "--dir", d, "--output", "json")
    assert started.returncode == 0, started.stderr
    try:
        info = json.loads(started.stdout)
        assert len(info["bootstrap_servers"].split(",")) == 3
        assert len(info["controllers"].split(",")) == 3
        assert set(info["pids"]) == {"1", "2", "3"}
        again = kraftlog("local", "start", "--dir", d)
        assert again.returncode == 2 and "already running" in again.stderr
        status = json.loads(kraftlog("local", "status", "--dir", d, "--output", "json").stdout)
        assert all(status["running"].values())
        produced = subprocess.run([sys.executable, "-m", "cli", "produce", "--bootstrap-server",
                                   info["bootstrap_servers"], "--topic", "auto-created"],
                                  input="a\nb\n", capture_output=True, text=True, timeout=60)
        assert produced.returncode == 0, produced.stderr
        # admin calls sent to brokers are forwarded to the active controller
        listed = kraftlog("topics", "list", "--bootstrap-server", info["bootstrap_servers"])
        assert listed.returncode == 0 and "auto-created" in listed.stdout.split(), listed.stderr
    finally:
        stopped = kraftlog("local", "stop", "--dir", d)
    assert stopped.returncode == 0
    status = json.loads(kraftlog("local", "status", "--dir", d, "--output", "json").stdout)
    assert not any(status["running"].values())
