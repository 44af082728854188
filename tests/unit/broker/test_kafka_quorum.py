"""The quorum APIs of the Kafka listener (issue 26): DescribeQuorum, AddRaftVoter and RemoveRaftVoter
translated to the controllers' gRPC requests and back, each refusal decided before forwarding, and
every answer built for each version the route serves."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.add_raft_voter.v0.response import AddRaftVoterResponse as AddV0
from kio.schema.describe_quorum.v0.response import DescribeQuorumResponse as DescribeV0
from kio.schema.describe_quorum.v2.response import DescribeQuorumResponse as DescribeV2
from kio.schema.remove_raft_voter.v0.response import RemoveRaftVoterResponse as RemoveV0

from kraftlog.broker.kafka._kafka_quorum import QuorumApis, describe_quorum_body, directory_text, directory_uuid
from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.common import errors as kerr
from kraftlog.common.security._request_context import ANONYMOUS, RequestContext, Session, request_scope
from kraftlog.proto import admin_pb2, errors_pb2

DIR = "AAAAAAAAAAAAAAAAAAAAAg"
R = admin_pb2.DescribeQuorumResponse


class _Forward:
    def __init__(self, answer: Any = None, error: kerr.KafkaError | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.answer, self.error = answer, error

    async def __call__(self, name: str, request: Any) -> Any:
        self.calls.append((name, request))
        if self.error is not None:
            raise self.error
        return self.answer


def _run(apis: QuorumApis, handler: str, body: Any) -> tuple[dict[str, Any], RequestContext]:
    ctx = RequestContext(Session(ANONYMOUS, "127.0.0.1"), api=handler)

    async def go() -> dict[str, Any]:
        with request_scope(ctx):
            result: dict[str, Any] = await getattr(apis, handler)(SimpleNamespace(body=body, api_version=0), None)
            return result

    return asyncio.run(go()), ctx


def test_directory_ids_cross_between_kafkas_uuid_and_the_22_character_text() -> None:
    assert directory_text(directory_uuid(DIR)) == DIR
    assert (
        directory_uuid("") == uuid.UUID(int=0) and directory_text(uuid.UUID(int=0)) == "" and directory_text(None) == ""
    )


def test_describe_quorum_answers_every_version_the_route_serves() -> None:
    resp = R(
        error=errors_pb2.Error(code=0),
        leader_id=1,
        leader_epoch=4,
        high_watermark=17,
        voters=[R.Replica(replica_id=1, log_end_offset=17, replica_directory_id=DIR, endpoint="h1:9093")],
        observers=[R.Replica(replica_id=2, log_end_offset=9, replica_directory_id=DIR, last_fetch_timestamp_ms=5)],
    )
    body = describe_quorum_body(resp)
    v2 = build(DescribeV2, body)
    partition = v2.topics[0].partitions[0]
    assert (v2.topics[0].topic_name, partition.leader_id, partition.leader_epoch, partition.high_watermark) == (
        "__cluster_metadata",
        1,
        4,
        17,
    )
    assert [
        (o.replica_id, directory_text(o.replica_directory_id), o.last_fetch_timestamp) for o in partition.observers
    ] == [(2, DIR, 5)]
    assert [(n.node_id, n.listeners[0].host, n.listeners[0].port) for n in v2.nodes] == [(1, "h1", 9093)]
    v0 = build(DescribeV0, body)
    assert [v.replica_id for v in v0.topics[0].partitions[0].current_voters] == [1]
    refused = describe_quorum_body(R(error=errors_pb2.Error(code=29, name="CLUSTER_AUTHORIZATION_FAILED")))
    assert build(DescribeV2, refused).error_code == 29 and refused["topics"] == []


def test_add_raft_voter_is_forwarded_with_the_controller_listener_and_text_directory_id() -> None:
    forward = _Forward(admin_pb2.AddRaftVoterResponse(error=errors_pb2.Error(code=0)))
    apis = QuorumApis(forward, cluster_id="c")  # type: ignore[arg-type]
    listener = SimpleNamespace(name="CONTROLLER", host="h2", port=9095)
    body = SimpleNamespace(
        cluster_id="c", voter_id=2, voter_directory_id=directory_uuid(DIR), listeners=(listener,), timeout=None
    )
    answer, _ctx = _run(apis, "add_raft_voter", body)
    assert answer["error_code"] == 0 and build(AddV0, answer).error_code == 0
    name, pb = forward.calls[0]
    assert (name, pb.voter_id, pb.voter_directory_id, pb.host, pb.port) == ("AddRaftVoter", 2, DIR, "h2", 9095)


@pytest.mark.parametrize(
    ("cluster_id", "listener", "code"),
    [("other", "CONTROLLER", 104), ("c", "BROKER", 42)],  # INCONSISTENT_CLUSTER_ID, INVALID_REQUEST
)
def test_add_raft_voter_refusals_are_decided_before_forwarding(cluster_id: str, listener: str, code: int) -> None:
    forward = _Forward()
    apis = QuorumApis(forward, cluster_id="c")  # type: ignore[arg-type]
    body = SimpleNamespace(
        cluster_id=cluster_id,
        voter_id=2,
        voter_directory_id=None,
        listeners=(SimpleNamespace(name=listener, host="h", port=1),),
        timeout=None,
    )
    answer, ctx = _run(apis, "add_raft_voter", body)
    assert answer["error_code"] == code and forward.calls == [] and ctx.decided


def test_remove_raft_voter_carries_the_controllers_error() -> None:
    refused = admin_pb2.RemoveRaftVoterResponse(
        error=errors_pb2.Error(code=127, name="VOTER_NOT_FOUND", message="not a voter")
    )
    forward = _Forward(refused)
    apis = QuorumApis(forward, cluster_id="c")  # type: ignore[arg-type]
    answer, _ctx = _run(
        apis, "remove_raft_voter", SimpleNamespace(cluster_id=None, voter_id=3, voter_directory_id=None)
    )
    assert (answer["error_code"], answer["error_message"]) == (127, "not a voter")
    assert forward.calls[0][1].voter_directory_id == "" and build(RemoveV0, answer).error_code == 127
    unreachable = QuorumApis(_Forward(error=kerr.CoordinatorNotAvailableError("no controller")), cluster_id="c")  # type: ignore[arg-type]
    answer, _ctx = _run(
        unreachable, "remove_raft_voter", SimpleNamespace(cluster_id=None, voter_id=3, voter_directory_id=None)
    )
    assert answer["error_code"] == kerr.CoordinatorNotAvailableError.error_code
