"""The controller quorum's Kafka-protocol APIs on a broker's listener (issue 26, KIP-853), forwarded
to the active controller as Kafka 4.x's ``KafkaApis`` forwards them (``forwardToController``):
DescribeQuorum (55, v0-2), AddRaftVoter (80, v0-1) and RemoveRaftVoter (81, v0). UpdateRaftVoter
(82) is not here: Kafka serves it on the controller listener only (its schema's ``listeners`` is
``["controller"]``), and so does kraftlog (the controllers' gRPC AdminService).

The controller authorizes the forwarded request as the client's principal (CLUSTER DESCRIBE or
ALTER, as Kafka). Translation only: the voter's directory id travels as Kafka's UUID on this wire
and as its 22-character text on gRPC; a voter's endpoint is the listener named ``CONTROLLER``.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from kraftlog.broker.kafka._kafka_admin import ControllerForwarder
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, ms
from kraftlog.common import errors as kerr
from kraftlog.common import kafka_uuid, parse_uuid
from kraftlog.common.security import current_request
from kraftlog.proto import admin_pb2

__all__ = ["METADATA_TOPIC", "QuorumApis", "directory_uuid", "directory_text"]

#: the metadata log as Kafka names it (DescribeQuorum's only topic partition)
METADATA_TOPIC: Final = "__cluster_metadata"
#: the listener whose endpoint is a voter's (kraftlog's controllers have this one)
CONTROLLER_LISTENER: Final = "CONTROLLER"
_ZERO_UUID: Final = uuid.UUID(int=0)
_UNKNOWN_TOPIC_OR_PARTITION: Final = kerr.UnknownTopicOrPartitionError.error_code


def directory_uuid(text: str) -> uuid.UUID:
    """A replica's directory id (Kafka's 22-character text, empty when unknown) as Kafka's UUID."""
    return parse_uuid(text) if text else _ZERO_UUID


def directory_text(value: uuid.UUID | None) -> str:
    """Kafka's UUID of a directory id as its 22-character text; empty for none (the zero UUID)."""
    return kafka_uuid(value) if value is not None and value.int != 0 else ""


def _replica(r: admin_pb2.DescribeQuorumResponse.Replica) -> dict[str, Any]:
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": directory_uuid(r.replica_directory_id),
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp_ms,
        "last_caught_up_timestamp": r.last_caught_up_timestamp_ms,
    }


def _node(r: admin_pb2.DescribeQuorumResponse.Replica) -> dict[str, Any] | None:
    host, sep, port = r.endpoint.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return {"node_id": r.replica_id, "listeners": [{"name": CONTROLLER_LISTENER, "host": host, "port": int(port)}]}


def describe_quorum_body(resp: admin_pb2.DescribeQuorumResponse) -> dict[str, Any]:
    """DescribeQuorum's answer (every version's fields; `build` keeps those of the version asked)."""
    if resp.error.code:
        return {"error_code": resp.error.code, "error_message": resp.error.message or None, "topics": [], "nodes": []}
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "error_message": None,
        "leader_id": resp.leader_id,
        "leader_epoch": resp.leader_epoch,
        "high_watermark": resp.high_watermark,
        "current_voters": [_replica(v) for v in resp.voters],
        "observers": [_replica(o) for o in resp.observers],
    }
    nodes = [n for n in (_node(v) for v in resp.voters) if n is not None]
    return {
        "error_code": 0,
        "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes,
    }


def _asks_for_the_metadata_partition(body: Any) -> bool:
    topics = list(body.topics or ())
    return (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and [p.partition_index for p in topics[0].partitions] == [0]
    )


def _voter_endpoint(listeners: Any) -> tuple[str, int]:
    for listener in listeners or ():
        if listener.name == CONTROLLER_LISTENER:
            return listener.host, int(listener.port)
    raise kerr.InvalidRequestError(f"the voter names no {CONTROLLER_LISTENER} listener")


def _answer(err: kerr.KafkaError | None = None, pb: Any = None) -> dict[str, Any]:
    if err is not None:
        return {"throttle_time": 0, "error_code": err.error_code, "error_message": str(err)}
    code = pb.error.code if pb is not None else 0
    return {"throttle_time": 0, "error_code": code, "error_message": (pb.error.message or None) if code else None}


class QuorumApis:
    """The quorum requests of `KafkaApis`, forwarded (``forward``) to the active controller."""

    def __init__(self, forward: ControllerForwarder, *, cluster_id: str) -> None:
        self._forward = forward
        self._cluster_id = cluster_id

    def _check_cluster(self, cluster_id: str | None) -> None:
        if cluster_id is not None and cluster_id != self._cluster_id:
            raise kerr.InconsistentClusterIdError(f"the request names cluster {cluster_id}, this is {self._cluster_id}")

    async def describe_quorum(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DescribeQuorum (55): the active controller's view of voters and observers."""
        if not _asks_for_the_metadata_partition(request.body):
            current_request().refused_early(f"DescribeQuorum names only {METADATA_TOPIC} partition 0")
            partition: dict[str, Any] = {"partition_index": 0, "error_code": _UNKNOWN_TOPIC_OR_PARTITION}
            partition |= {"error_message": None, "leader_id": -1, "leader_epoch": -1, "high_watermark": -1}
            partition |= {"current_voters": [], "observers": []}
            topics = [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]
            return {"error_code": 0, "error_message": None, "topics": topics, "nodes": []}
        try:
            resp = await self._forward("DescribeQuorum", admin_pb2.DescribeQuorumRequest())
        except kerr.KafkaError as err:
            return {"error_code": err.error_code, "error_message": str(err), "topics": [], "nodes": []}
        return describe_quorum_body(resp)

    async def add_raft_voter(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """AddRaftVoter (80): the observer ``(voter_id, voter_directory_id)`` becomes a voter."""
        body = request.body
        try:
            self._check_cluster(body.cluster_id)
            host, port = _voter_endpoint(body.listeners)
        except kerr.KafkaError as err:
            current_request().refused_early(str(err))
            return _answer(err)
        pb = admin_pb2.AddRaftVoterRequest(
            voter_id=body.voter_id,
            voter_directory_id=directory_text(body.voter_directory_id),
            host=host,
            port=port,
            timeout_ms=ms(body.timeout),
        )
        return await self._forwarded("AddRaftVoter", pb)

    async def remove_raft_voter(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """RemoveRaftVoter (81): voter ``(voter_id, voter_directory_id)`` leaves the voter set."""
        body = request.body
        try:
            self._check_cluster(body.cluster_id)
        except kerr.KafkaError as err:
            current_request().refused_early(str(err))
            return _answer(err)
        pb = admin_pb2.RemoveRaftVoterRequest(
            voter_id=body.voter_id, voter_directory_id=directory_text(body.voter_directory_id)
        )
        return await self._forwarded("RemoveRaftVoter", pb)

    async def _forwarded(self, name: str, pb: Any) -> dict[str, Any]:
        try:
            resp = await self._forward(name, pb)
        except kerr.KafkaError as err:
            return _answer(err)
        return _answer(pb=resp)
