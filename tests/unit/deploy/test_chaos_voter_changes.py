"""The quorum profile's voter changes (issue 26): ``replace_voter`` picks a standby, removes it,
wipes and re-formats its disk, then adds it back; every committed change is counted, retriable
refusals are retried within a bound, and a static quorum skips the kind. No processes: the cluster
and its admin client are stand-ins."""

from __future__ import annotations

import random
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kraftlog.deploy.chaos import REPLACE_VOTER, QuorumTimeouts, VoterChanges, choose_quorum_fault
from kraftlog.deploy.chaos._quorum_faults import heal_quorum, inject_quorum
from kraftlog.proto import errors_pb2


def _answer(name: str = "NONE", code: int = 0) -> Any:
    return SimpleNamespace(error=errors_pb2.Error(code=code, name=name, message=name))


class _Admin:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def remove_raft_voter(self, *args: Any) -> Any:
        self.calls.append(("remove", args))
        return self.answers.pop(0)

    def add_raft_voter(self, *args: Any, **kw: Any) -> Any:
        self.calls.append(("add", args))
        return self.answers.pop(0)


class _Cluster:
    def __init__(self, tmp: Path, admin: _Admin) -> None:
        self.admin_client = admin
        self.cluster_id = "c"
        self.events: list[str] = []
        self.running = {3}
        meta = tmp / "n3" / "metadata"
        meta.mkdir(parents=True)
        (meta / "meta.properties").write_text(
            "version=1\ncluster.id=c\nnode.id=3\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAw\n", encoding="utf-8"
        )
        self.nodes = {3: SimpleNamespace(dir=str(tmp / "n3"), host="h3", controller_port=9097, config_path="x")}

    @contextmanager
    def admin(self, **kw: Any) -> Any:
        yield self.admin_client

    def is_running(self, node: int) -> bool:
        return node in self.running

    def start_node(self, node: int) -> None:
        self.events.append(f"start {node}")
        self.running.add(node)


def test_replace_voter_picks_a_standby_and_never_the_active_controller() -> None:
    timeouts = QuorumTimeouts()
    picks = {choose_quorum_fault(random.Random(i), [1, 2, 3], 2, timeouts, [REPLACE_VOTER]).nodes for i in range(40)}
    assert picks == {(1,), (3,)}


def test_a_replacement_is_two_committed_changes_retried_while_retriable(tmp_path: Path) -> None:
    admin = _Admin([_answer("NOT_CONTROLLER", 41), _answer(), _answer("REQUEST_TIMED_OUT", 7), _answer()])
    cluster = _Cluster(tmp_path, admin)
    changes = VoterChanges(cluster, step_timeout_s=5)
    wiped: list[int] = []
    changes.wipe = wiped.append  # type: ignore[method-assign]  # no format subprocess here
    fault = choose_quorum_fault(random.Random(1), [1, 2, 3], 1, QuorumTimeouts(), [REPLACE_VOTER])
    fault = type(fault)(fault.kind, (3,), fault.hold_s)
    target = SimpleNamespace(voter_changes=changes)
    inject_quorum(target, fault)
    cluster.running.discard(3)
    heal_quorum(target, fault)
    assert [c[0] for c in admin.calls] == ["remove", "remove", "add", "add"]
    assert admin.calls[0][1] == (3, "AAAAAAAAAAAAAAAAAAAAAw") and admin.calls[2][1][2:] == ("h3", 9097)
    assert wiped == [3] and cluster.events == ["start 3"] and changes.count == 2


def test_a_refusal_that_is_not_retriable_fails_the_step(tmp_path: Path) -> None:
    admin = _Admin([_answer("VOTER_NOT_FOUND", 127)])
    changes = VoterChanges(_Cluster(tmp_path, admin), step_timeout_s=5)
    with pytest.raises(RuntimeError, match="VOTER_NOT_FOUND"):
        changes.remove(3)
    assert changes.count == 0 and len(admin.calls) == 1
