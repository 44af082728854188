"""``kraftlog quorum describe --status|--replication`` of a dynamic quorum (KIP-853, issue 26): voters
with their directory ids and endpoints, as Kafka 4.x; a static quorum's output is unchanged."""

from __future__ import annotations

from kraftlog.cli import _quorum
from kraftlog.proto import admin_pb2

R = admin_pb2.DescribeQuorumResponse
D1, D2 = "K90IZ-0DRNazJ49kCZ1EMQ", "aUARLskQTCW4qCZDtS_cwA"


def _quorum_response(kraft_version: int) -> admin_pb2.DescribeQuorumResponse:
    dirs = (D1, D2) if kraft_version else ("", "")
    return R(
        leader_id=1,
        leader_epoch=3,
        high_watermark=10,
        kraft_version=kraft_version,
        voters=[
            R.Replica(replica_id=2, log_end_offset=8, replica_directory_id=dirs[1], endpoint="h:9095"),
            R.Replica(replica_id=1, log_end_offset=10, replica_directory_id=dirs[0], endpoint="h:9093"),
        ],
    )


def test_dynamic_status_lists_voters_with_directory_ids() -> None:
    status = _quorum.quorum_status(_quorum_response(1), "CID")
    assert status["current_voters"] == [1, 2] and status["kraft_version"] == 1
    assert status["voters"] == [
        {"id": 1, "directory_id": D1, "endpoints": ["CONTROLLER://h:9093"]},
        {"id": 2, "directory_id": D2, "endpoints": ["CONTROLLER://h:9095"]},
    ]
    assert _quorum._kafka_replicas(status["voters"]) == (
        f'[{{"id": 1, "directoryId": "{D1}", "endpoints": ["CONTROLLER://h:9093"]}}, '
        f'{{"id": 2, "directoryId": "{D2}", "endpoints": ["CONTROLLER://h:9095"]}}]'
    )
    rows = _quorum.quorum_replication(_quorum_response(1))
    assert [(r["node_id"], r["directory_id"], r["lag"]) for r in rows] == [(1, D1, 0), (2, D2, 2)]


def test_static_status_is_unchanged() -> None:
    status = _quorum.quorum_status(_quorum_response(0), "CID")
    assert "kraft_version" not in status and "voters" not in status
    assert all("directory_id" not in r for r in _quorum.quorum_replication(_quorum_response(0)))
