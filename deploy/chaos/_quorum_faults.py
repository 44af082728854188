"""The quorum profile's faults, its config phases and the clean restart it checks.

Unlike the data profile, two of these faults take a majority of the controllers away on purpose
(``pause_standbys``, ``kill_majority``): no quorum can have an active controller meanwhile, so the
run excuses those windows from ``max_no_active_controller_s`` and measures from the heal.
`choose_quorum_fault` is pure (seeded ``rng`` and the cluster's current view in, a `Fault` out);
`inject_quorum` and `heal_quorum` are the only places that touch the target.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from kraftlog.deploy.chaos._faults import Fault

__all__ = [
    "QUORUM_FAULT_KINDS",
    "REPLACE_VOTER",
    "MAJORITY_KINDS",
    "NETWORK_QUORUM_KINDS",
    "QuorumTimeouts",
    "choose_quorum_fault",
    "inject_quorum",
    "heal_quorum",
    "read_config_values",
    "write_config_values",
    "stop_clean",
]

QUORUM_FAULT_KINDS: tuple[str, ...] = (
    "pause_standbys",  # SIGSTOP of both standbys past the propose timeout, then SIGCONT
    "pause_active_controller",  # SIGSTOP of the active controller past the election timeout
    "kill_active_controller",  # kill -9 of the active controller, started again after the hold
    "kill_majority",  # kill -9 of the active controller and a standby, both started again
    "partition_active_controller",  # every link of the active controller cut past the election timeout
)
#: on a dynamic quorum only (`deploy.chaos._voter_faults`): remove a standby voter, wipe and
#: re-format its disk, start it as an observer and add it back
REPLACE_VOTER = "replace_voter"
MAJORITY_KINDS = frozenset({"pause_standbys", "kill_majority"})
NETWORK_QUORUM_KINDS = frozenset({"partition_active_controller"})

ELECTION_KEY = "controller.quorum.election.timeout.ms"
REQUEST_KEY = "controller.quorum.request.timeout.ms"


@dataclass(frozen=True)
class QuorumTimeouts:
    """The controllers' timeouts in force (they change between the run's phases)."""

    election_ms: int = 1000
    request_ms: int = 2000  # also the propose timeout of the active controller

    @property
    def failover_s(self) -> float:
        """The longest a follower waits before it campaigns: pysyncobj's 1.5x election timeout."""
        return 1.5 * self.election_ms / 1000.0


def choose_quorum_fault(
    rng: random.Random, controllers: Sequence[int], active: int | None, timeouts: QuorumTimeouts, kinds: Sequence[str]
) -> Fault:
    """Pick the next fault among ``kinds``, seeded by ``rng``; without a known active controller
    a seeded controller stands in for it."""
    kind = rng.choice(list(kinds))
    nodes = sorted(controllers)
    fallback = rng.choice(nodes)
    leader = active if active in nodes else fallback
    standbys = [n for n in nodes if n != leader]
    if kind == "pause_standbys":
        # past the propose timeout, and (when the election timeout allows) short of it, so the
        # active controller stays active while its timed-out proposals are still in its log
        room = (timeouts.election_ms - timeouts.request_ms) / 1000.0 - 0.3
        extra = rng.uniform(0.5, max(1.0, min(3.0, room)))
        return Fault(kind, tuple(standbys), round(timeouts.request_ms / 1000.0 + extra, 2))
    if kind == "pause_active_controller":
        return Fault(kind, (leader,), round(timeouts.failover_s + rng.uniform(1.0, 2.0), 2))
    if kind == "kill_active_controller":
        return Fault(kind, (leader,), round(rng.uniform(1.0, 4.0), 2))
    if kind == "kill_majority":
        return Fault(kind, (leader, rng.choice(standbys)), round(rng.uniform(1.0, 4.0), 2))
    if kind == "partition_active_controller":
        return Fault(kind, (leader,), round(timeouts.failover_s + rng.uniform(1.0, 3.0), 2))
    if kind == REPLACE_VOTER:  # a standby: removing the leader would only hand leadership over first
        return Fault(kind, (rng.choice(standbys),), round(rng.uniform(0.2, 1.0), 2))
    raise ValueError(f"unknown quorum fault kind {kind!r}")


def inject_quorum(target: Any, fault: Fault) -> None:
    for node in fault.nodes:
        if fault.kind in ("pause_standbys", "pause_active_controller"):
            target.pause(node)
        elif fault.kind in ("kill_active_controller", "kill_majority"):
            target.kill(node)
        elif fault.kind in NETWORK_QUORUM_KINDS:
            target.cut(node)
        elif fault.kind == REPLACE_VOTER:
            target.voter_changes.remove(node)
            target.voter_changes.wipe(node)
        else:
            raise ValueError(f"unknown quorum fault kind {fault.kind!r}")


def heal_quorum(target: Any, fault: Fault) -> None:
    """Undo ``fault`` on every node it hit (each node healed even when another's heal fails)."""
    errors = []
    for node in fault.nodes:
        try:
            if fault.kind in ("pause_standbys", "pause_active_controller"):
                target.resume(node)
            elif fault.kind in ("kill_active_controller", "kill_majority"):
                target.start(node)
            elif fault.kind in NETWORK_QUORUM_KINDS:
                target.heal(node)
            elif fault.kind == REPLACE_VOTER:
                target.voter_changes.add(node)
        except Exception as err:  # the other nodes still get healed
            errors.append(f"{node}: {err!r}")
    if errors:
        raise RuntimeError(f"heal of {fault.describe()} failed: {'; '.join(errors)}")


# ------------------------------------------------------------------------------ config phases

_KEY_LINE = re.compile(r'^\s*("?)([A-Za-z0-9_.\-]+)\1\s*=')


def _line_key(line: str) -> str | None:
    m = _KEY_LINE.match(line)
    return m.group(2) if m else None


def read_config_values(path: Path, keys: Sequence[str]) -> dict[str, Any]:
    """``keys`` as a node's TOML config sets them (None: not set, the default applies)."""
    import tomllib

    conf = tomllib.loads(path.read_text(encoding="utf-8"))
    return {k: conf.get(k) for k in keys}


def write_config_values(path: Path, values: Mapping[str, Any]) -> None:
    """Set (or, for None, remove) top-level keys of a node's TOML config, keeping every other line.

    New keys go before the first table header (``[...]``), so they stay top-level keys. Written to
    a temporary file and renamed, so a node starting meanwhile never reads half a file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if _line_key(line) not in values]
    first_table = next((i for i, line in enumerate(kept) if line.lstrip().startswith("[")), len(kept))
    new = [tomli_w.dumps({k: v}).strip() for k, v in values.items() if v is not None]
    out = kept[:first_table] + new + kept[first_table:]
    tmp = path.with_suffix(path.suffix + ".chaos-tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    tmp.replace(path)


def stop_clean(cluster: Any, node_id: int, timeout_s: float) -> bool:
    """SIGTERM the node and wait up to ``timeout_s`` for it to exit; False (and kill -9) when it
    hangs, so the caller can count the hang while the run goes on."""
    if not cluster.is_running(node_id):
        return True
    cluster.signal(node_id, signal.SIGCONT)
    cluster.signal(node_id, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not cluster.is_running(node_id):
            return True
        time.sleep(0.05)
    cluster.kill(node_id)
    return False
