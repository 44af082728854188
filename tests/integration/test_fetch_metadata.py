"""FetchMetadata from real controllers: committed entries in order from any controller, a snapshot
first when the requested offset is older than the oldest segment, keep-alives when caught up."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.metadata_log import MetadataDelta, MetadataImage, decode_entry, decode_record, list_segments
from kraftlog.proto import controller_pb2, controller_pb2_grpc
from kraftlog.quorum import METADATA_PARTITION_DIR

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration

# tiny segments and frequent snapshots, so old segments are deleted and a snapshot must be served
OVERRIDES = {
    "metadata.log.segment.bytes": 2048,
    "metadata.log.max.record.bytes.between.snapshots": 4096,
    "metadata.max.retention.bytes": 0,
}


def _stream(address: str, from_offset: int, until: float):
    channel = grpc.insecure_channel(address)
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    call = stub.FetchMetadata(controller_pb2.FetchMetadataRequest(from_offset=from_offset, broker_id=-1), timeout=until)
    return channel, call


def test_fetch_metadata_serves_snapshot_entries_and_keepalives(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "c", controllers=3, overrides=OVERRIDES) as cluster:
        cluster.start(timeout_s=60)
        brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1, 2, 3]).start()
        try:
            with cluster.admin(request_timeout_ms=15_000) as admin:
                brokers.wait_unfenced(admin)
                for i in range(40):
                    resp = admin.create_topics([NewTopic(f"topic-{i}", 2, 3, configs={"retention.ms": str(1000 + i)})])
                    assert resp.topics[0].error.code == 0, resp
                leader = cluster.active_controller()
            standby = next(n for n in cluster.nodes if n != leader)
            meta_dir = Path(cluster.nodes[standby].dir) / "metadata" / METADATA_PARTITION_DIR
            wait_until(
                lambda: list_segments(meta_dir) and list_segments(meta_dir)[0].base_offset > 0,
                30,
                what="old metadata segments to be deleted behind a snapshot",
            )
            address = f"127.0.0.1:{cluster.nodes[standby].controller_port}"
            channel, call = _stream(address, 0, 30)
            image = MetadataImage.EMPTY
            delta = None
            got_snapshot = got_keepalive = False
            expected_topics = {f"topic-{i}" for i in range(40)}
            try:
                for batch in call:
                    assert batch.error.code == 0
                    assert batch.leader_epoch >= 1
                    if batch.snapshot_offset >= 0:
                        assert not got_snapshot and delta is None, "snapshot must come first, once"
                        got_snapshot = True
                        image = MetadataImage.from_records(
                            [decode_record(r) for r in batch.snapshot_records],
                            batch.snapshot_offset,
                            batch.snapshot_epoch,
                            batch.snapshot_timestamp_ms,
                        )
                    for raw in batch.entries:
                        entry = decode_entry(raw)
                        delta = delta or MetadataDelta(image)
                        assert entry.offset == (delta.offset if delta.offset >= 0 else image.offset) + 1
                        delta.replay(entry)
                    if batch.keep_alive:
                        got_keepalive = True
                        current = delta.apply() if delta else image
                        if expected_topics <= set(current.topics.by_name):
                            break
            finally:
                call.cancel()
                channel.close()
            assert got_snapshot, "an offset older than the oldest segment must be served a snapshot first"
            assert got_keepalive
            final = delta.apply() if delta else image
            assert expected_topics <= set(final.topics.by_name)
            assert final.configs.topic_config("topic-39")["retention.ms"] == "1039"
        finally:
            brokers.stop()
