"""A static controller quorum (``controller.quorum.voters``, kraft.version 0) upgraded to
kraft.version 1 while it runs, then grown by a controller added as observer -> voter (issue 26,
KIP-853 / KIP-1170), with real processes on 127.0.0.1 and the operator's commands.

On main ``kraftlog features upgrade --feature kraft.version=1`` was refused (the supported range
stopped at 0) and ``quorum add-controller`` answered UNSUPPORTED_VERSION on a static quorum.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.storage import read_meta_properties

pytestmark = pytest.mark.integration

OVERRIDES = {"controller.quorum.election.timeout.ms": 1000}


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def _kraft_level(servers: str) -> int:
    proc = _cli("features", "describe", "--bootstrap-server", servers, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    levels = {f["feature"]: f["finalized_version_level"] for f in json.loads(proc.stdout)["features"]}
    return int(levels["kraft.version"])


def _voters(admin) -> dict[int, str]:
    quorum = admin.describe_quorum()
    return {v.replica_id: v.replica_directory_id for v in quorum.voters} if quorum.error.code == 0 else {}


def test_a_static_quorum_upgraded_to_kraft_version_1_grows_by_an_observer_turned_voter(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=4, overrides=OVERRIDES, quorum="static", initial_controllers=3)
    cluster.plan()
    static = ",".join(f"{cluster.nodes[n].host}:{cluster.nodes[n].controller_port}" for n in (1, 2, 3))
    dirs = {n: read_meta_properties(Path(cluster.nodes[n].dir) / "metadata").directory_id for n in (1, 2, 3, 4)}
    try:
        for nid in (1, 2, 3):
            cluster.start_node(nid)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id in (1, 2, 3), 30, what="a leader")
            before = admin.describe_quorum()
            assert before.kraft_version == 0 and {v.replica_directory_id for v in before.voters} == {""}
            assert _kraft_level(static) == 0
            # UpdateRaftVoter (82) on the controllers' gRPC: a static voter reports its directory id
            spec1 = cluster.nodes[1]
            wait_until(
                lambda: admin.update_raft_voter(1, dirs[1], spec1.host, spec1.controller_port).error.code == 0,
                30,
                what="UpdateRaftVoter of voter 1 accepted",
            )
            assert admin.update_raft_voter(9, dirs[1], spec1.host, 1).error.name == "VOTER_NOT_FOUND"

            # the upgrade: retried while a voter's directory id has not reached the leader yet
            last: list[str] = []

            def upgraded() -> bool:
                proc = _cli("features", "upgrade", "--bootstrap-server", static, "--feature", "kraft.version=1")
                last[:] = [proc.stdout.strip() + proc.stderr.strip()]
                return proc.returncode == 0

            wait_until(upgraded, 30, what=f"kraft.version upgraded (last: {last})")
            quorum = admin.describe_quorum()
            assert quorum.kraft_version == 1
            # the static voters, each now (id, the directory id its metadata dir carries)
            assert _voters(admin) == {n: dirs[n] for n in (1, 2, 3)}
            assert _kraft_level(static) == 1
            # an endpoint change is a voter change now (issue 26: INVALID_REQUEST before); voter 1
            # still listens where it did, so it reports that endpoint back itself (UpdateRaftVoter)
            moved = admin.update_raft_voter(1, dirs[1], spec1.host, spec1.controller_port + 100)
            assert moved.error.name == "NONE", moved.error.message

            def endpoint_of_1() -> str:
                return next((v.endpoint for v in admin.describe_quorum().voters if v.replica_id == 1), "")

            wait_until(
                lambda: endpoint_of_1() == f"{spec1.host}:{spec1.controller_port}",
                30,
                what="voter 1 to report its own endpoint back",
            )

            # a fourth controller (formatted --no-initial-controllers) joins as an observer, then a voter
            cluster.start_node(4)

            def added() -> bool:
                proc = _cli(
                    "quorum", "add-controller", "-c", str(cluster.nodes[4].config_path), "--bootstrap-server", static
                )
                last[:] = [proc.stderr.strip()]
                return proc.returncode == 0

            wait_until(added, 60, what=f"controller 4 added as a voter (last: {last})")
            wait_until(lambda: _voters(admin) == dirs, 30, what="four voters")

            # a static voter restarts with its config still naming three voters: its Raft dir kept the
            # dynamic set, so it stays at kraft.version 1 with four voters
            follower = next(n for n in (1, 2, 3) if n != admin.describe_quorum().leader_id)
            cluster.stop_node(follower)
            cluster.start_node(follower)
            # the leader dies: three of four voters must elect a new one, node 4 among them
            old = admin.describe_quorum()
            cluster.kill(old.leader_id)

            def new_leader() -> bool:
                q = admin.describe_quorum()
                return (
                    q.error.code == 0 and q.leader_id not in (-1, old.leader_id) and q.leader_epoch > old.leader_epoch
                )

            wait_until(new_leader, 30, what="a new leader elected by three of the four voters")
            after = admin.describe_quorum()
            assert after.kraft_version == 1 and {v.replica_id for v in after.voters} == {1, 2, 3, 4}
    finally:
        cluster.stop()
