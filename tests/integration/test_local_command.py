"""``kraftlog local start|status|stop`` as a user runs it (subprocesses, JSON output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=180)


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
        produced = subprocess.run(
            [
                sys.executable,
                "-m",
                "kraftlog.cli",
                "produce",
                "--bootstrap-server",
                info["bootstrap_servers"],
                "--topic",
                "auto-created",
            ],
            input="a\nb\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert produced.returncode == 0, produced.stderr
        # admin calls sent to brokers are forwarded to the active controller
        listed = kraftlog("topics", "list", "--bootstrap-server", info["bootstrap_servers"])
        assert listed.returncode == 0 and "auto-created" in listed.stdout.split(), listed.stderr
        # one node at a time, in a running cluster
        one = kraftlog("local", "stop", "--dir", d, "--node", "2", "--output", "json")
        assert one.returncode == 0, one.stderr
        assert json.loads(one.stdout)["stopped"] == [2]
        status = json.loads(kraftlog("local", "status", "--dir", d, "--output", "json").stdout)
        # exited, or a zombie where nothing reaps orphans (PID 1 of many containers): never "running"
        assert status["state"]["1"] == status["state"]["3"] == "running"
        assert status["state"]["2"] in ("exited", "zombie") and not status["running"]["2"]
        back = kraftlog("local", "start", "--dir", d, "--node", "2", "--output", "json")
        assert back.returncode == 0, back.stderr  # returns once broker 2 is unfenced again
        assert json.loads(back.stdout)["state"]["2"] == "running"
        pid_before = json.loads(back.stdout)["pids"]["3"]
        restarted = kraftlog("local", "restart", "--dir", d, "--node", "3", "--output", "json")
        assert restarted.returncode == 0, restarted.stderr
        after = json.loads(restarted.stdout)
        assert after["pids"]["3"] != pid_before and all(s == "running" for s in after["state"].values())
        unknown = kraftlog("local", "stop", "--dir", d, "--node", "7")
        assert unknown.returncode == 2 and "--node 7" in unknown.stderr
    finally:
        stopped = kraftlog("local", "stop", "--dir", d, "--output", "json")
    assert stopped.returncode == 0, stopped.stderr
    report = json.loads(stopped.stdout)
    assert report["stopped"] and report["running"] == []
    status = json.loads(kraftlog("local", "status", "--dir", d, "--output", "json").stdout)
    assert not any(status["running"].values())
    # the last node stopped (3) saw no majority of the quorum left: it did not wait out a session
    # timeout for a controlled shutdown no controller could grant
    last_log = (Path(d) / "node3" / "node.log").read_text()
    assert "controlled_shutdown_skipped" in last_log and "controlled_shutdown_timed_out" not in last_log


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}


def test_local_cluster_in_network_namespaces_is_reachable_from_its_hub_and_removed_on_stop(tmp_path: Path) -> None:
    from kraftlog.deploy._netns import unavailable_reason

    why = unavailable_reason()
    if why is not None:
        pytest.skip(why)
    d = str(tmp_path / "cluster")
    started = kraftlog(
        "local", "start", "--dir", d, "--separate", "--brokers", "1", "--network", "netns", "--output", "json"
    )
    assert started.returncode == 0, started.stderr
    try:
        info = json.loads(started.stdout)
        hub = info["netns_hub"]
        prefix = hub.removesuffix("-hub")
        assert {hub, f"{prefix}-n1", f"{prefix}-n101"} <= _namespaces()
        assert info["bootstrap_servers"].startswith("10.213.0.")
        # from the machine's own namespace the nodes' addresses do not exist; from the hub they answer
        outside = kraftlog("topics", "list", "--bootstrap-server", info["controllers"], "--request-timeout-ms", "1500")
        assert outside.returncode != 0
        inside = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                hub,
                sys.executable,
                "-m",
                "kraftlog.cli",
                "quorum",
                "status",
                "--bootstrap-server",
                info["controllers"],
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert inside.returncode == 0, inside.stderr
        assert json.loads(inside.stdout)["leader_id"] in (1, 2, 3)
    finally:
        stopped = kraftlog("local", "stop", "--dir", d)
    assert stopped.returncode == 0, stopped.stderr
    assert not {n for n in _namespaces() if n.startswith(prefix)}
