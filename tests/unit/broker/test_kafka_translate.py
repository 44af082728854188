"""kio <-> gRPC translation of the Kafka listener (issue 16): fields by name, durations to and from
``*_ms``, Kafka's renamed fields through aliases, errors as error_code/error_message."""

from __future__ import annotations

import datetime

from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from kraftlog.broker.kafka._kafka_translate import from_pb, to_pb
from kraftlog.proto import errors_pb2, group_pb2


def test_a_kio_request_fills_the_grpc_one_by_field_name() -> None:
    req = JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(milliseconds=45_000),
        rebalance_timeout=datetime.timedelta(milliseconds=300_000),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x01"),),
        reason=None,
    )
    pb = to_pb(req, group_pb2.JoinGroupRequest, client_id="c1")
    assert (pb.group_id, pb.session_timeout_ms, pb.rebalance_timeout_ms, pb.client_id) == ("g", 45_000, 300_000, "c1")
    assert not pb.HasField("group_instance_id")
    assert [(p.name, p.metadata) for p in pb.protocols] == [("range", b"\x01")]


def test_aliases_map_kafkas_renamed_fields() -> None:
    req = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=4,
        member_id="m",
        group_instance_id=None,
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=1, committed_offset=9, committed_leader_epoch=2, committed_metadata=None
                    ),
                ),
            ),
        ),
    )
    pb = to_pb(req, group_pb2.OffsetCommitRequest, {"generation_id": "generation_id_or_member_epoch"})
    assert pb.generation_id == 4
    assert (pb.topics[0].partitions[0].committed_offset, pb.topics[0].partitions[0].committed_leader_epoch) == (9, 2)


def test_an_answer_turns_errors_into_codes_and_keeps_defaults() -> None:
    resp = group_pb2.JoinGroupResponse(
        error=errors_pb2.Error(code=79, name="MEMBER_ID_REQUIRED", message="rejoin with your id"),
        member_id="m-1",
        members=[group_pb2.JoinGroupResponse.Member(member_id="m-1", metadata=b"x")],
    )
    out = from_pb(resp)
    assert (out["error_code"], out["error_message"], out["member_id"], out["generation_id"]) == (
        79,
        "rejoin with your id",
        "m-1",
        0,
    )
    assert out["members"] == [{"member_id": "m-1", "group_instance_id": None, "metadata": b"x"}]
    ok = from_pb(group_pb2.HeartbeatResponse(error=errors_pb2.Error(code=0)))
    assert ok == {"error_code": 0, "error_message": None}
