"""``kraftlog quorum recover``: a quorum that lost every controller's state restarts from a snapshot
that Spark rebuilt from archived segments."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from _reference import replay_image, replay_snapshot

from kraftlog.cli.__main__ import main
from kraftlog.metadata_log import (
    MetadataLogWriter,
    NoOpRecord,
    latest_snapshot,
    list_segments,
    read_log_dir,
    read_snapshot,
)
from kraftlog.node import new_cluster_id
from kraftlog.quorum.raft import DUMP_FILE, JOURNAL_FILE
from kraftlog.quorum.raft._serializer import read_dump
from kraftlog.spark import rebuild_snapshot

ROOT = Path(__file__).resolve().parents[2]


def _node_config(tmp_path: Path, node_id: int = 1) -> Path:
    from kraftlog.deploy._cluster import free_port_pair

    taken: set[int] = set()
    ports = [free_port_pair(taken) for _ in range(3)]
    d = tmp_path / f"node{node_id}"
    d.mkdir(parents=True)
    cfg = d / "node.toml"
    cfg.write_text(
        "\n".join(
            [
                f'"node.id" = {node_id}',
                '"process.roles" = ["controller"]',
                f'"controller.quorum.voters" = "{",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))}"',
                f'"listeners" = "CONTROLLER://127.0.0.1:{ports[node_id - 1]}"',
                '"controller.quorum.raft.password" = "secret"',
                f'"log.dirs" = "{d / "data"}"',
                f'"metadata.log.dir" = "{d / "metadata"}"',
            ]
        )
        + "\n"
    )
    return cfg


def test_recover_installs_the_snapshot_and_seeds_raft(small_log, tmp_path: Path, capsys) -> None:
    snap_path = replay_snapshot(small_log.directory, tmp_path / "snap")
    snap = read_snapshot(snap_path)
    cfg = _node_config(tmp_path)
    assert main(["quorum", "recover", "--snapshot", str(snap_path), "-c", str(cfg)]) == 2
    assert "is not formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", new_cluster_id(), "-c", str(cfg)]) == 0
    mdir = cfg.parent / "metadata" / "__cluster_metadata-0"
    raft = cfg.parent / "metadata" / "raft"
    capsys.readouterr()
    assert main(["quorum", "recover", "--snapshot", str(snap_path), "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f"continues at offset {snap.offset + 1}" in out and "every controller" in out
    installed = latest_snapshot(mdir)
    assert installed is not None and installed.path.read_bytes() == snap_path.read_bytes()
    assert [s.base_offset for s in list_segments(mdir)] == [snap.offset + 1]
    with MetadataLogWriter(mdir, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == snap.offset + 1
    dump = read_dump(raft / DUMP_FILE)
    assert dump.state["next_offset"] == snap.offset + 1 and dump.raft_last[1:] == (2, snap.epoch)
    assert (raft / JOURNAL_FILE).is_file()
    # state exists now: only --force replaces it
    assert main(["quorum", "recover", "--snapshot", str(snap_path), "-c", str(cfg)]) == 2
    assert "--force" in capsys.readouterr().err
    with MetadataLogWriter(mdir, segment_bytes=1 << 20, fsync=False) as w:  # the node ran a bit
        pass
    (raft / "junk").write_text("x")
    assert main(["quorum", "recover", "--snapshot", str(snap_path), "-c", str(cfg), "--force", "--output", "json"]) == 0
    assert not (raft / "junk").exists() and [s.base_offset for s in list_segments(mdir)] == [snap.offset + 1]


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_quorum_that_lost_every_controller_restarts_from_a_spark_snapshot(spark, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from _fake_brokers import FakeBrokers

    from kraftlog.client import NewTopic
    from kraftlog.deploy._cluster import LocalCluster, wait_until

    overrides = {"controller.quorum.election.timeout.ms": 1000, "broker.session.timeout.ms": 9000}
    cluster = LocalCluster(tmp_path / "cluster", controllers=3, overrides=overrides)
    brokers = None
    try:
        cluster.start(timeout_s=60)
        brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001, 1002, 1003]).start()
        with cluster.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
            for i in range(6):
                resp = admin.create_topics([NewTopic(f"before-{i}", 3, 2)], timeout_ms=10_000)
                assert [t.error.code for t in resp.topics] == [0]
            resp = admin.delete_topics(["before-5"], timeout_ms=10_000)
            assert [t.error.code for t in resp.topics] == [0]
            resp = admin.incremental_alter_configs({(2, "before-0"): [("retention.ms", 0, "12345")]})
        brokers.stop()
        brokers = None
        cluster.stop()
        cluster.start(timeout_s=60)  # a restart: later entries are in a newer controller epoch
        brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001, 1002, 1003]).start()
        with cluster.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
            resp = admin.create_topics([NewTopic("before-restart", 1, 3)], timeout_ms=10_000)
            assert [t.error.code for t in resp.topics] == [0]
        brokers.stop()
        brokers = None
        cluster.stop()

        # The operator archived node 1's segments; then every controller lost its metadata state.
        node_meta = {n: Path(cluster.nodes[n].dir) / "metadata" for n in cluster.nodes}
        archive = tmp_path / "archive"
        shutil.copytree(node_meta[1] / "__cluster_metadata-0", archive)
        for meta in node_meta.values():
            shutil.rmtree(meta / "__cluster_metadata-0")
            shutil.rmtree(meta / "raft")

        rebuilt = rebuild_snapshot(spark, str(archive), tmp_path / "rebuilt.checkpoint")
        assert rebuilt.path.read_bytes() == replay_snapshot(archive, tmp_path / "ref").read_bytes()
        before = replay_image(archive)
        assert "before-5" not in before.topics.by_name and len(before.topics.by_name) == 6
        assert rebuilt.epoch >= 2
        assert dict(before.configs.topic_config("before-0")) == {"retention.ms": "12345"}
        for _n, spec in sorted(cluster.nodes.items()):
            assert main(["quorum", "recover", "--snapshot", str(rebuilt.path), "-c", str(spec.config_path)]) == 0

        cluster.start(timeout_s=60)
        brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001, 1002, 1003]).start()
        with cluster.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
            described = admin.describe_topics([])
            names = {t.name for t in described.topics}
            assert set(before.topics.by_name) <= names
            resp = admin.create_topics([NewTopic("after-recovery", 2, 3)], timeout_ms=10_000)
            assert [t.error.code for t in resp.topics] == [0]
            ids = {t.name: t.topic_id for t in admin.describe_topics([]).topics}
            assert all(ids[n] == before.topics.by_name[n].topic_id for n in before.topics.by_name)
        brokers.stop()
        brokers = None

        def logs_agree() -> bool:
            logs = [
                list(read_log_dir(node_meta[n] / "__cluster_metadata-0", from_offset=rebuilt.offset + 1))
                for n in sorted(node_meta)
            ]
            return bool(logs[0]) and all(x == logs[0] for x in logs)

        wait_until(logs_agree, 30, what="the three controllers' logs to agree")
        cluster.stop()
        entries = list(read_log_dir(node_meta[2] / "__cluster_metadata-0", from_offset=rebuilt.offset + 1))
        assert entries[0].offset == rebuilt.offset + 1  # the log continues the snapshot
        assert entries[0].epoch > rebuilt.epoch  # in a newer controller epoch
        assert isinstance(entries[0].record, NoOpRecord)  # written by the new active controller
        after = replay_image(
            node_meta[3] / "__cluster_metadata-0",
            base_snapshot=latest_snapshot(node_meta[3] / "__cluster_metadata-0").path,
        )
        assert "after-recovery" in after.topics.by_name
        assert dict(after.configs.topic_config("before-0")) == {"retention.ms": "12345"}
    finally:
        if brokers is not None:
            brokers.stop()
        cluster.stop()
