"""A dynamic controller quorum (KIP-853, kraft.version 1) with real processes on 127.0.0.1 (issue 26).

The nodes' configs name only ``controller.quorum.bootstrap.servers``; the controllers are formatted
with ``--standalone`` (one) or ``--initial-controllers`` (three) and run with the voter set their
metadata log dir holds; brokers find the controllers through the bootstrap servers. Every wait is a
bounded poll.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.quorum import read_bootstrap_voters
from kraftlog.storage import read_meta_properties

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration

OVERRIDES = {"controller.quorum.election.timeout.ms": 1000, "broker.session.timeout.ms": 9000}


def _created(admin, name: str) -> bool:
    resp = admin.create_topics([NewTopic(name, 1, 1)], timeout_ms=3000)
    return len(resp.topics) == 1 and all(t.error.code in (0, 36) for t in resp.topics)


def test_standalone_controller_with_a_broker_found_through_bootstrap_servers(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, combined=True, overrides=OVERRIDES, quorum="dynamic")
    cluster.plan()
    spec = cluster.nodes[1]
    config = tomllib.loads(Path(spec.config_path).read_text())
    assert "controller.quorum.voters" not in config and config["controller.quorum.bootstrap.servers"]
    formatted = read_bootstrap_voters(Path(spec.dir) / "metadata")
    meta = read_meta_properties(Path(spec.dir) / "metadata")
    assert formatted is not None and meta is not None
    assert formatted.endpoints() == {1: (spec.host, spec.controller_port)}
    assert formatted.voters[1].directory_id == meta.directory_id
    with cluster.start(timeout_s=60):
        cluster.wait_unfenced_brokers(1, timeout_s=60)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            quorum = admin.describe_quorum()
            assert quorum.leader_id == 1 and [v.replica_id for v in quorum.voters] == [1]
            wait_until(lambda: _created(admin, "standalone-topic"), 30, what="a topic created")
            # kraft.version is the quorum's: 1 on a --standalone quorum (0 before issue 26's upgrade work)
            levels = json.loads(
                _cli(
                    "features", "describe", "--bootstrap-server", cluster.controller_addresses[0], "--output", "json"
                ).stdout
            )
            assert {f["feature"]: f["finalized_version_level"] for f in levels["features"]}["kraft.version"] == 1


def test_initial_controllers_elect_commit_and_fail_over(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=3, overrides=OVERRIDES, quorum="dynamic")
    cluster.start(timeout_s=60)
    brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001, 1002, 1003]).start()
    try:
        dirs = set()
        for nid in (1, 2, 3):
            meta = read_meta_properties(Path(cluster.nodes[nid].dir) / "metadata")
            assert meta is not None and meta.directory_id
            dirs.add(meta.directory_id)
        assert len(dirs) == 3
        with cluster.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
            quorum = admin.describe_quorum()
            assert sorted(v.replica_id for v in quorum.voters) == [1, 2, 3] and quorum.kraft_version == 1
            # the operator's view: every voter with the directory id its metadata dir carries
            proc = subprocess.run(
                [sys.executable, "-m", "kraftlog.cli", "quorum", "describe", "--status", "--output", "json"]
                + ["--bootstrap-server", ",".join(cluster.controller_addresses)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stderr
            status = json.loads(proc.stdout)
            assert status["kraft_version"] == 1
            assert {v["id"]: v["directory_id"] for v in status["voters"]} == {
                nid: read_meta_properties(Path(cluster.nodes[nid].dir) / "metadata").directory_id for nid in (1, 2, 3)
            }
            wait_until(lambda: _created(admin, "before"), 30, what="a topic created")
            before = admin.describe_quorum()
            old_leader, old_epoch = before.leader_id, before.leader_epoch
            cluster.kill(old_leader)

            def new_leader() -> bool:
                q = admin.describe_quorum()
                return q.error.code == 0 and q.leader_id not in (-1, old_leader) and q.leader_epoch > old_epoch

            wait_until(new_leader, 30, what="a new leader after the old one was killed")
            wait_until(lambda: _created(admin, "after"), 30, what="a topic created after the failover")
            after = admin.describe_quorum()
            assert after.high_watermark > before.high_watermark
    finally:
        brokers.stop()
        cluster.stop()


def _metadata_bytes(cluster: LocalCluster, node_id: int) -> int:
    part = Path(cluster.nodes[node_id].dir) / "metadata" / "__cluster_metadata-0"
    return sum(p.stat().st_size for p in part.glob("*.log")) if part.exists() else 0


def test_a_controller_formatted_without_initial_controllers_observes_without_voting(tmp_path: Path) -> None:
    """Issue 26: ``--no-initial-controllers`` on a controller. It finds the standalone voter through
    controller.quorum.bootstrap.servers, replicates the metadata log as an observer (the voter's
    Raft layer admits it with the key its handshake proved), and changes no epoch: it never votes."""
    cluster = LocalCluster(tmp_path / "c", controllers=2, overrides=OVERRIDES, quorum="dynamic", initial_controllers=1)
    cluster.plan()
    assert read_bootstrap_voters(Path(cluster.nodes[2].dir) / "metadata") is None
    meta = read_meta_properties(Path(cluster.nodes[2].dir) / "metadata")
    assert meta is not None and meta.directory_id
    try:
        cluster.start_node(1)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id == 1, 30, what="the standalone leader")
            before = admin.describe_quorum()
            cluster.start_node(2)
            wait_until(lambda: _metadata_bytes(cluster, 2) > 0, 30, what="the observer to replicate the metadata log")
            wait_until(
                lambda: "raft_observer_authenticated" in Path(cluster.nodes[1].log_path).read_text(),
                10,
                what="voter 1 to log the observer",
            )
            after = admin.describe_quorum()
            assert after.leader_id == 1 and after.leader_epoch == before.leader_epoch, "the observer never campaigns"
            assert [v.replica_id for v in after.voters] == [1]
            assert cluster.is_running(2)

            # DescribeQuorum lists it as Kafka's leader does: an observer's ReplicaState (directory
            # id, log end offset, last fetch and caught-up times), no endpoint
            started_ms = int(time.time() * 1000) - 60_000

            def observed() -> bool:
                q = admin.describe_quorum()
                obs = [o for o in q.observers if o.replica_id == 2]
                return bool(obs) and obs[0].log_end_offset == q.voters[0].log_end_offset > 0

            wait_until(observed, 30, what="the leader to list observer 2 caught up")
            q = admin.describe_quorum()
            (obs,) = q.observers
            assert obs.replica_directory_id == meta.directory_id and not obs.endpoint
            assert obs.last_fetch_timestamp_ms > started_ms and obs.last_caught_up_timestamp_ms > started_ms
            proc = _cli(
                "quorum", "describe", "--replication", "--output", "json",
                "--bootstrap-server", ",".join(cluster.controller_addresses),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            rows = {r["node_id"]: r for r in json.loads(proc.stdout)["replicas"]}
            assert rows[2]["status"] == "Observer" and rows[2]["directory_id"] == meta.directory_id
            assert rows[2]["lag"] >= 0 and rows[1]["status"] == "Leader"
    finally:
        cluster.stop()


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def _add_controller(cluster: LocalCluster, node_id: int) -> None:
    """``quorum add-controller`` until the observer has caught up (REQUEST_TIMED_OUT until then);
    on a secured cluster with its client properties (``--command-config``)."""
    servers = ",".join(cluster.controller_addresses)
    secured = ["--command-config", str(cluster.command_config)] if cluster.security != "plaintext" else []
    last: list[str] = []

    def added() -> bool:
        proc = _cli(
            "quorum", "add-controller", "-c", str(cluster.nodes[node_id].config_path), "--bootstrap-server", servers,
            *secured,
        )  # fmt: skip
        last[:] = [proc.stderr.strip()]
        return proc.returncode == 0

    wait_until(added, 60, what=f"controller {node_id} added as a voter (last: {last})")


def _voters(admin) -> dict[int, str]:
    quorum = admin.describe_quorum()
    return {v.replica_id: v.replica_directory_id for v in quorum.voters} if quorum.error.code == 0 else {}


def test_grow_one_to_three_lose_the_leader_remove_it_and_replace_it_with_a_wiped_directory(tmp_path: Path) -> None:
    """Issue 26 end to end with real processes and the operator's commands: standalone 1 -> add 2 ->
    add 3 -> kill the leader -> remove it -> format its host anew (a new directory id) and add it back."""
    cluster = LocalCluster(tmp_path / "c", controllers=3, overrides=OVERRIDES, quorum="dynamic", initial_controllers=1)
    cluster.plan()
    servers = ",".join(cluster.controller_addresses)
    try:
        cluster.start_node(1)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id == 1, 30, what="the standalone leader")
            for nid in (2, 3):
                cluster.start_node(nid)
                _add_controller(cluster, nid)
            wait_until(lambda: set(_voters(admin)) == {1, 2, 3}, 30, what="three voters")
            dirs = _voters(admin)
            before = admin.describe_quorum()
            cluster.kill(before.leader_id)
            dead = before.leader_id

            def new_leader() -> bool:
                q = admin.describe_quorum()
                return q.error.code == 0 and q.leader_id not in (-1, dead) and q.leader_epoch > before.leader_epoch

            wait_until(new_leader, 30, what="a new leader among the two voters left")
            remove = ["quorum", "remove-controller", "--controller-id", str(dead)]
            remove += ["--controller-directory-id", dirs[dead], "--bootstrap-server", servers]
            removed: list[str] = []

            def remove_it() -> bool:
                proc = _cli(*remove)
                removed[:] = [proc.stderr.strip()]
                return proc.returncode == 0

            wait_until(remove_it, 30, what=f"voter {dead} removed (last: {removed})")
            wait_until(lambda: set(_voters(admin)) == {1, 2, 3} - {dead}, 30, what="two voters")

            # the dead host comes back wiped: a new metadata dir (a new directory id), as an observer
            spec = cluster.nodes[dead]
            for sub in ("metadata", "data"):
                shutil.rmtree(Path(spec.dir) / sub, ignore_errors=True)
            fmt = _cli("storage", "format", "-t", str(cluster.cluster_id), "-c", str(spec.config_path))
            assert fmt.returncode == 2, "a controller of a dynamic quorum must say how it joins"
            fmt = _cli(
                "storage",
                "format",
                "-t",
                str(cluster.cluster_id),
                "-c",
                str(spec.config_path),
                "--no-initial-controllers",
            )
            assert fmt.returncode == 0, fmt.stderr
            meta = read_meta_properties(Path(spec.dir) / "metadata")
            assert meta is not None and meta.directory_id != dirs[dead]
            cluster.start_node(dead)
            _add_controller(cluster, dead)
            wait_until(lambda: _voters(admin).get(dead) == meta.directory_id, 30, what="the replacement voter")
            assert set(_voters(admin)) == {1, 2, 3}
            # every voter was added at run time: they restart together from what their Raft dirs kept
            for nid in (1, 2, 3):
                cluster.stop_node(nid)
            for nid in (1, 2, 3):
                cluster.start_node(nid)
            wait_until(lambda: set(_voters(admin)) == {1, 2, 3}, 60, what="the quorum back after a full restart")
            assert _voters(admin)[dead] == meta.directory_id
    finally:
        cluster.stop()


def _restart_with_only_its_own_key(cluster: LocalCluster, node_id: int) -> None:
    """Stop controller ``node_id`` and start it again with ``controller.quorum.raft.voter.keys``
    listing its own key only (the others' keys are nowhere in its configuration)."""
    cluster.stop_node(node_id)
    path = Path(cluster.nodes[node_id].config_path)
    config = tomllib.loads(path.read_text())
    config["controller.quorum.raft.voter.keys"] = [
        e for e in config["controller.quorum.raft.voter.keys"] if e.startswith(f"{node_id}@")
    ]
    path.write_text(tomli_w.dumps(config))  # keeps the file's 0600
    cluster.start_node(node_id)


def test_an_added_voter_restarts_knowing_the_others_keys_from_its_voter_file(tmp_path: Path) -> None:
    """Issue 26: a controller added at run time keeps the committed voter set, public keys included,
    in raft/voters.msgpack; restarted with only its own key configured it still authenticates the
    other voters (and they it). Two voters: no leader can be elected without it."""
    cluster = LocalCluster(tmp_path / "c", controllers=2, overrides=OVERRIDES, quorum="dynamic", initial_controllers=1)
    cluster.plan()
    try:
        cluster.start_node(1)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id == 1, 30, what="the standalone leader")
            cluster.start_node(2)
            _add_controller(cluster, 2)
            wait_until(lambda: set(_voters(admin)) == {1, 2}, 30, what="two voters")
            before = admin.describe_quorum()
            restarted_ms = int(time.time() * 1000)
            for nid in (2, 1):
                _restart_with_only_its_own_key(cluster, nid)

            def rejoined() -> bool:
                q = admin.describe_quorum()
                return (
                    q.error.code == 0
                    and q.leader_id in (1, 2)
                    and q.leader_epoch > before.leader_epoch
                    and {v.replica_id for v in q.voters} == {1, 2}
                )

            log = Path(cluster.nodes[2].log_path)
            wait_until(rejoined, 60, what=f"a leader elected by both voters (node 2's log: {log})")
            assert cluster.is_running(1) and cluster.is_running(2)

            def follower_caught_up() -> bool:
                q = admin.describe_quorum()
                lead = [v for v in q.voters if v.replica_id == q.leader_id]
                other = [v for v in q.voters if v.replica_id != q.leader_id]
                return (
                    len(lead) == len(other) == 1
                    and other[0].log_end_offset == lead[0].log_end_offset
                    and other[0].last_fetch_timestamp_ms >= restarted_ms
                )

            wait_until(follower_caught_up, 30, what="the follower to fetch from the new leader")
    finally:
        cluster.stop()


def test_move_every_controller_to_new_hosts(tmp_path: Path) -> None:
    """Issue 26's third walkthrough (docs/running.md), on two voters: add a new controller, remove an
    old voter, twice; the old hosts stop and the quorum runs on the new ones alone."""
    cluster = LocalCluster(tmp_path / "c", controllers=4, overrides=OVERRIDES, quorum="dynamic", initial_controllers=2)
    cluster.plan()
    servers = ",".join(cluster.controller_addresses)
    try:
        cluster.start_node(1)
        cluster.start_node(2)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: set(_voters(admin)) == {1, 2} and admin.describe_quorum().leader_id in (1, 2), 30)
            dirs = _voters(admin)
            for new, old in ((3, 1), (4, 2)):
                cluster.start_node(new)
                _add_controller(cluster, new)
                wait_until(lambda: new in _voters(admin), 30, what=f"voter {new} added")
                remove = ["quorum", "remove-controller", "--controller-id", str(old)]
                remove += ["--controller-directory-id", dirs[old], "--bootstrap-server", servers]
                last: list[str] = []

                def removed(cmd: list[str] = remove) -> bool:
                    proc = _cli(*cmd)  # NOT_CONTROLLER while the leader hands itself over: again
                    last[:] = [proc.stderr.strip()]
                    return proc.returncode == 0

                wait_until(removed, 30, what=f"voter {old} removed (last: {last})")
                wait_until(lambda: old not in _voters(admin), 30, what=f"voter {old} gone")
                cluster.stop_node(old)
            before = admin.describe_quorum()
            assert set(_voters(admin)) == {3, 4} and before.leader_id in (3, 4)
            # the new hosts alone elect and commit: the leader steps down, the other takes over
            cluster.stop_node(before.leader_id)
            cluster.start_node(before.leader_id)

            def moved_on() -> bool:
                q = admin.describe_quorum()
                return q.error.code == 0 and q.leader_id in (3, 4) and q.leader_epoch > before.leader_epoch

            wait_until(moved_on, 60, what="a leader elected by the new hosts alone")
            assert not cluster.is_running(1) and not cluster.is_running(2)
    finally:
        cluster.stop()
