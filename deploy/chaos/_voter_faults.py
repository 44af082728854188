"""The quorum profile's voter changes (issue 26, KIP-853): on a dynamic quorum, ``replace_voter``
removes a voter that is not the active controller, stops it, wipes its metadata dir (a new disk: a
new directory id), formats it ``--no-initial-controllers``, starts it as an observer and adds it
back -- the operator's "replace a dead controller host" under the admin workload.

Ordering: remove, then stop and wipe, then (the heal) start and add: the set shrinks to n-1 voters
of which a majority is running, then grows back. Each change that committed counts once in
``voter_changes``; a step that did not succeed within its bound is the fault's error (the run goes
on; the convergence check then reports what is missing).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import structlog

__all__ = ["VOTER_CHANGE_KINDS", "VoterChanges"]

_log = structlog.get_logger("deploy.chaos")

VOTER_CHANGE_KINDS: Final[tuple[str, ...]] = ("replace_voter",)
#: retriable answers while a change waits: NOT_CONTROLLER (7... the leader moved) and REQUEST_TIMED_OUT
_RETRIABLE: Final = frozenset({"NOT_CONTROLLER", "REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE"})


class VoterChanges:
    """The voter changes of one run against a `LocalCluster` with a dynamic quorum."""

    def __init__(self, cluster: Any, *, step_timeout_s: float = 45.0) -> None:
        self.cluster = cluster
        self.step_timeout_s = step_timeout_s
        #: voter changes that committed (a replacement is two: the removal and the addition)
        self.count = 0

    def _directory_id(self, node: int) -> str:
        from kraftlog.storage import read_meta_properties

        meta = read_meta_properties(Path(self.cluster.nodes[node].dir) / "metadata")
        if meta is None or not meta.directory_id:
            raise RuntimeError(f"controller {node}'s metadata dir is not formatted")
        return str(meta.directory_id)

    def _until_done(self, what: str, call: Any) -> None:
        deadline = time.monotonic() + self.step_timeout_s
        last = ""
        while time.monotonic() < deadline:
            try:
                resp = call()
            except Exception as err:  # no controller answered this attempt
                last = repr(err)
            else:
                if resp.error.code == 0:
                    self.count += 1
                    return
                last = f"{resp.error.name}: {resp.error.message}"
                if resp.error.name not in _RETRIABLE:
                    break
            time.sleep(0.2)
        raise RuntimeError(f"{what} did not commit: {last}")

    def remove(self, node: int) -> None:
        """RemoveRaftVoter of ``node`` with its current directory id, retried while retriable."""
        directory = self._directory_id(node)
        with self.cluster.admin(request_timeout_ms=10_000) as admin:
            self._until_done(f"removal of voter {node}", lambda: admin.remove_raft_voter(node, directory))

    def wipe(self, node: int) -> None:
        """Stop ``node`` and give it a new disk: its metadata and data dirs formatted anew as an observer."""
        self.cluster.stop_node(node)
        spec = self.cluster.nodes[node]
        for sub in ("metadata", "data"):
            shutil.rmtree(Path(spec.dir) / sub, ignore_errors=True)
        argv = [sys.executable, "-m", "kraftlog.cli", "storage", "format", "-t", str(self.cluster.cluster_id)]
        argv += ["-c", str(spec.config_path), "--no-initial-controllers"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"storage format of controller {node} failed: {proc.stderr.strip()}")

    def add(self, node: int) -> None:
        """Start ``node`` (an observer) and AddRaftVoter it once it caught up (retried until then)."""
        if not self.cluster.is_running(node):
            self.cluster.start_node(node)
        spec = self.cluster.nodes[node]
        directory = self._directory_id(node)
        with self.cluster.admin(request_timeout_ms=10_000) as admin:
            self._until_done(
                f"addition of voter {node}",
                lambda: admin.add_raft_voter(node, directory, spec.host, spec.controller_port, timeout_ms=5_000),
            )
        _log.info("chaos_voter_replaced", node_id=node, directory_id=directory)
