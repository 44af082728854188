"""The voter set of a dynamic quorum (KIP-853) in metadata snapshots, with real processes on 127.0.0.1
(issue 26).

Kafka writes the current ``KRaftVersionRecord`` and ``VotersRecord`` into every snapshot's header
control records, so a node restored from a snapshot whose log prefix is gone still knows who votes.
Here: a standalone controller grows to two voters, the metadata log moves on until the segment that
held the voter change is deleted behind a snapshot, and then (a) ``kraftlog metadata dump`` of the
snapshot shows the voter set and (b) both controllers restored from that snapshot alone
(``kraftlog quorum recover``: their Raft dirs and segments wiped) come back as the same two voters.
Every wait is a bounded poll.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftlog.client import NewTopic
from kraftlog.common import METADATA_PARTITION_DIR
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.metadata_log import (
    MetadataLogGapError,
    VotersRecord,
    latest_snapshot,
    oldest_available_offset,
    read_log_dir,
    read_snapshot,
)
from kraftlog.storage import read_meta_properties

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration

# tiny segments, a snapshot every 4 KiB of records and no retention beyond it: the segment holding
# the voter change is deleted soon after it commits
OVERRIDES = {
    "controller.quorum.election.timeout.ms": 1000,
    "metadata.log.segment.bytes": 2048,
    "metadata.log.max.record.bytes.between.snapshots": 4096,
    "metadata.max.retention.bytes": 0,
}


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def _add_controller(cluster: LocalCluster, node_id: int) -> None:
    servers = ",".join(cluster.controller_addresses)
    last: list[str] = []

    def added() -> bool:
        proc = _cli(
            "quorum", "add-controller", "-c", str(cluster.nodes[node_id].config_path), "--bootstrap-server", servers
        )
        last[:] = [proc.stderr.strip()]
        return proc.returncode == 0

    wait_until(added, 60, what=f"controller {node_id} added as a voter (last: {last})")


def _voters(admin) -> dict[int, str]:
    quorum = admin.describe_quorum()
    return {v.replica_id: v.replica_directory_id for v in quorum.voters} if quorum.error.code == 0 else {}


def _mdir(cluster: LocalCluster, node_id: int) -> Path:
    return Path(cluster.nodes[node_id].dir) / "metadata" / METADATA_PARTITION_DIR


def _voter_change_compacted(mdir: Path) -> bool:
    """A snapshot exists and no segment left holds a VotersRecord (the change's prefix is gone)."""
    try:
        return latest_snapshot(mdir) is not None and not any(
            isinstance(e.record, VotersRecord) for e in read_log_dir(mdir, from_offset=oldest_available_offset(mdir))
        )
    except MetadataLogGapError:  # retention deleted a segment while it was read: look again
        return False


def _describe(mdir: Path) -> str:
    snap = latest_snapshot(mdir)
    return (
        f"{mdir.parent.parent.name}: oldest {oldest_available_offset(mdir)}, snapshot {snap.offset if snap else None}"
    )


def test_snapshots_carry_the_voter_set_and_a_restore_from_one_knows_the_voters(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=2, overrides=OVERRIDES, quorum="dynamic", initial_controllers=1)
    cluster.plan()
    dirs = {nid: read_meta_properties(Path(cluster.nodes[nid].dir) / "metadata").directory_id for nid in (1, 2)}
    try:
        cluster.start_node(1)
        with cluster.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id == 1, 30, what="the standalone leader")
            cluster.start_node(2)
            _add_controller(cluster, 2)
            wait_until(lambda: set(_voters(admin)) == {1, 2}, 30, what="two voters")
            brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001]).start()
            try:
                brokers.wait_unfenced(admin)
                i = 0

                state: list[str] = []

                def moved_on() -> bool:
                    nonlocal i
                    for _ in range(5):
                        admin.create_topics([NewTopic(f"t-{i}", 1, 1)], timeout_ms=5000)
                        i += 1
                    done = [_voter_change_compacted(_mdir(cluster, nid)) for nid in (1, 2)]
                    state[:] = [_describe(_mdir(cluster, 1)), _describe(_mdir(cluster, 2)), f"{i} topics", str(done)]
                    return all(done)

                wait_until(moved_on, 60, what="the segment holding the voter change deleted behind a snapshot")
            finally:
                brokers.stop()
        for nid in (1, 2):
            cluster.stop_node(nid)

        # (a) the snapshot starts with the voter set: dump-log shows it
        snap = latest_snapshot(_mdir(cluster, 1))
        assert snap is not None
        records = read_snapshot(snap.path).records
        voters = [r for r in records if isinstance(r, VotersRecord)]
        assert len(voters) == 1, f"snapshot {snap.path.name} holds {len(voters)} VotersRecords"
        assert {v.voter_id: v.voter_directory_id for v in voters[0].voters} == dirs
        dump = _cli("metadata", "dump", str(snap.path), "--output", "json")
        assert dump.returncode == 0, dump.stderr
        assert "VotersRecord" in dump.stdout and "KRaftVersionRecord" in dump.stdout

        # (b) both controllers restored from that snapshot alone know the two voters
        saved = tmp_path / snap.path.name
        shutil.copyfile(snap.path, saved)
        for nid in (1, 2):
            cfg = str(cluster.nodes[nid].config_path)
            proc = _cli("quorum", "recover", "--snapshot", str(saved), "-c", cfg, "--force", "--output", "json")
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout)["voters"] == [1, 2]
        started = time.monotonic()
        for nid in (1, 2):
            cluster.start_node(nid)
        with cluster.admin(request_timeout_ms=15_000) as admin:

            def back() -> bool:
                q = admin.describe_quorum()
                return q.error.code == 0 and q.leader_id in (1, 2) and _voters(admin) == dirs

            wait_until(back, 60, what="the two voters back after the restore")
            elapsed_s = time.monotonic() - started
            brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001]).start()
            try:  # the restored quorum commits: a broker registers again and a topic is created
                brokers.wait_unfenced(admin)
                resp = admin.create_topics([NewTopic("after-restore", 1, 1)], timeout_ms=10_000)
                assert resp.topics[0].error.code == 0, resp
            finally:
                brokers.stop()
        print(json.dumps({"voters_after_restore": sorted(dirs), "restore_to_quorum_s": round(elapsed_s, 2)}))
    finally:
        cluster.stop()
