"""A committed metadata record that cannot be replayed: the controller stops with one clear line,
``kraftlog quorum check`` names the record, ``kraftlog quorum repair`` rebuilds the state before it,
and the controller comes back with everything that preceded the record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.metadata_log import LogEntry, MetadataLogWriter, read_log_dir
from kraftlog.metadata_log._records import TopicRecord
from kraftlog.quorum._server import METADATA_PARTITION_DIR

pytestmark = pytest.mark.integration


def _kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(240)
def test_unreplayable_record_stops_the_node_and_check_and_repair_bring_it_back(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, brokers=1)
    try:
        cluster.start(timeout_s=90)
        with cluster.admin(request_timeout_ms=10_000) as admin:
            wait_until(
                lambda: any(not b.fenced for b in admin.describe_cluster().brokers),
                60,
                interval_s=0.2,
                what="the broker to be unfenced",
            )
            resp = admin.create_topics([NewTopic("kept", 1, 1)], timeout_ms=10_000)
            assert resp.topics[0].error.name == "NONE"
        cluster.stop()

        spec = cluster.nodes[1]
        mdir = Path(spec.dir) / "metadata" / METADATA_PARTITION_DIR
        entries = list(read_log_dir(mdir))
        original = next(e for e in entries if isinstance(e.record, TopicRecord) and e.record.name == "kept")
        bad_offset = entries[-1].offset + 1
        # what an older, buggy controller could have written: a second TopicRecord for one name
        with MetadataLogWriter(mdir, segment_bytes=1 << 20, fsync=True) as writer:
            writer.append(
                [
                    LogEntry(
                        bad_offset,
                        entries[-1].epoch,
                        entries[-1].timestamp_ms,
                        TopicRecord(name="kept", topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
                    )
                ]
            )

        cluster.start_node(1)
        wait_until(lambda: not cluster.is_running(1), 60, what="the controller to stop on the bad record")
        log = spec.log_path.read_text(encoding="utf-8")
        fatal = [line for line in log.splitlines() if "critical" in line]
        assert len(fatal) == 1, log[-3000:]
        assert str(bad_offset) in fatal[0] and "TopicRecord" in fatal[0]

        checked = _kraftlog("quorum", "check", "-c", str(spec.config_path), "--output", "json")
        assert checked.returncode == 1, checked
        report = json.loads(checked.stdout)
        assert report["failure"]["offset"] == bad_offset
        assert report["failure"]["record_type"] == "TopicRecord"

        repaired = _kraftlog(
            "quorum", "repair", "-c", str(spec.config_path), "--before", str(bad_offset), "--output", "json"
        )
        assert repaired.returncode == 0, repaired
        assert json.loads(repaired.stdout)["dropped_entries"] == 1
        assert _kraftlog("quorum", "check", "-c", str(spec.config_path)).returncode == 0

        cluster.start(timeout_s=90)
        with cluster.admin(request_timeout_ms=10_000) as admin:
            topics = admin.describe_topics(["kept"])
            assert topics.topics[0].error.name == "NONE"
            assert topics.topics[0].topic_id == original.record.topic_id
    finally:
        cluster.stop()
