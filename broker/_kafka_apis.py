"""The Kafka-protocol listener's request handlers: each API translated onto what the gRPC services
already do (the replica manager, the group and transaction coordinators, the active controller).

A handler takes the decoded request (kio's entity of the version the client sent) and returns a
version-independent description of the answer (see `_kafka_wire.build`), or None for a request
that has no answer (Produce with acks=0). `KafkaApis.supported` is what ApiVersions advertises:
only APIs with a handler, at the versions the handler was written and tested for.

The handlers live in mixins split by area (`_kafka_data`, `_kafka_groups`, ...); this module holds
the dispatch, ApiVersions and Metadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from kraftlog.common import errors as kerr
from kraftlog.common._acl import AclOperation, ResourceType
from kraftlog.common._request_context import RequestContext, current_request, request_scope
from kraftlog.proto import broker_pb2

from ._kafka_admin import _AdminApis
from ._kafka_data import _DataApis
from ._kafka_groups import _GroupApis
from ._kafka_sasl import SASL_APIS, _SaslApis
from ._kafka_security import _SecurityApis
from ._kafka_server import CLOSE_CONNECTION, ConnectionInfo
from ._kafka_txn import _TxnApis
from ._kafka_wire import ParsedRequest, UnsupportedRequest, build, encode_response, error_only_frame, response_type

if TYPE_CHECKING:
    from ._server import BrokerServer

__all__ = ["KafkaApis"]

Handler = Callable[[Any, ParsedRequest, ConnectionInfo], Awaitable[Any]]

# api key -> (name, min version, max version, handler method name)
_APIS: dict[int, tuple[str, int, int, str]] = {
    0: ("Produce", 3, 11, "produce"),
    1: ("Fetch", 4, 12, "fetch"),
    2: ("ListOffsets", 1, 8, "list_offsets"),
    3: ("Metadata", 0, 12, "metadata"),
    8: ("OffsetCommit", 2, 8, "offset_commit"),
    9: ("OffsetFetch", 1, 8, "offset_fetch"),
    10: ("FindCoordinator", 0, 4, "find_coordinator"),
    11: ("JoinGroup", 2, 9, "join_group"),
    12: ("Heartbeat", 0, 4, "heartbeat"),
    13: ("LeaveGroup", 0, 5, "leave_group"),
    14: ("SyncGroup", 0, 5, "sync_group"),
    15: ("DescribeGroups", 0, 5, "describe_groups"),
    16: ("ListGroups", 0, 5, "list_groups"),
    18: ("ApiVersions", 0, 3, "api_versions"),
    22: ("InitProducerId", 0, 5, "init_producer_id"),
    23: ("OffsetForLeaderEpoch", 2, 4, "offset_for_leader_epoch"),
    24: ("AddPartitionsToTxn", 0, 3, "add_partitions_to_txn"),
    25: ("AddOffsetsToTxn", 0, 3, "add_offsets_to_txn"),
    26: ("EndTxn", 0, 3, "end_txn"),
    28: ("TxnOffsetCommit", 0, 3, "txn_offset_commit"),
    19: ("CreateTopics", 2, 7, "create_topics"),
    20: ("DeleteTopics", 1, 6, "delete_topics"),
    32: ("DescribeConfigs", 1, 4, "describe_configs"),
    33: ("AlterConfigs", 0, 2, "alter_configs"),
    35: ("DescribeLogDirs", 1, 4, "describe_log_dirs"),
    37: ("CreatePartitions", 0, 3, "create_partitions"),
    42: ("DeleteGroups", 0, 2, "delete_groups"),
    43: ("ElectLeaders", 0, 2, "elect_leaders"),
    44: ("IncrementalAlterConfigs", 0, 1, "incremental_alter_configs"),
    45: ("AlterPartitionReassignments", 0, 0, "alter_partition_reassignments"),
    46: ("ListPartitionReassignments", 0, 0, "list_partition_reassignments"),
    47: ("OffsetDelete", 0, 0, "offset_delete"),
    60: ("DescribeCluster", 0, 1, "describe_cluster"),
    61: ("DescribeProducers", 0, 0, "describe_producers"),
    65: ("DescribeTransactions", 0, 0, "describe_transactions"),
    66: ("ListTransactions", 0, 0, "list_transactions"),
    68: ("ConsumerGroupHeartbeat", 0, 1, "consumer_group_heartbeat"),
    69: ("ConsumerGroupDescribe", 0, 1, "consumer_group_describe"),
    75: ("DescribeTopicPartitions", 0, 0, "describe_topic_partitions"),
    29: ("DescribeAcls", 1, 3, "describe_acls"),
    30: ("CreateAcls", 1, 3, "create_acls"),
    31: ("DeleteAcls", 1, 3, "delete_acls"),
    50: ("DescribeUserScramCredentials", 0, 0, "describe_user_scram_credentials"),
    51: ("AlterUserScramCredentials", 0, 0, "alter_user_scram_credentials"),
    17: ("SaslHandshake", 0, 1, "sasl_handshake"),
    36: ("SaslAuthenticate", 0, 2, "sasl_authenticate"),
}


class KafkaApis(_DataApis, _GroupApis, _TxnApis, _SaslApis, _SecurityApis, _AdminApis):
    """Dispatches decoded requests to their handler; one per broker, shared by its listeners."""

    def __init__(self, broker: BrokerServer) -> None:
        super().__init__(broker)
        self._log = structlog.get_logger(__name__).bind(node_id=broker.broker_id)
        self._supported = {key: (lo, hi) for key, (_name, lo, hi, _method) in _APIS.items()}

    def supported(self) -> dict[int, tuple[int, int]]:
        return self._supported

    async def dispatch(self, request: ParsedRequest, conn: ConnectionInfo) -> Any:
        """The kio response entity for ``request``, None when it has no answer (Produce with
        acks=0), or `CLOSE_CONNECTION`.

        A request whose handler fails (a bug, or a request that is valid on the wire but not in
        its content) is answered with UNKNOWN_SERVER_ERROR / the error where the answer has a
        top-level error code; any other answer would read as a success with nothing in it (an
        OffsetCommit the client would take as done), so the connection is closed instead, which
        every client retries. acks=0 Produce closes the connection on any error, as Kafka does:
        that is how such a producer learns to refresh its metadata."""
        name, _lo, _hi, method = _APIS[request.api_key]
        if not conn.authenticated and request.api_key not in SASL_APIS:
            self._log.info("kafka_request_before_authentication", api=name, peer=conn.peer)
            return CLOSE_CONNECTION  # Kafka's ILLEGAL_SASL_STATE: nothing else before the exchange
        handler = getattr(self, method)
        answer_type = response_type(request.api_key, request.api_version)
        ctx = RequestContext(conn.session, api=name, authorize_fn=self.broker.acl_gate)
        try:
            with request_scope(ctx):
                answer = await handler(request, conn)
            if not ctx.decided:  # a handler nobody authorized is a bug: never answer it
                self._log.error("kafka_request_without_authorization_decision", api=name, principal=ctx.principal)
                return CLOSE_CONNECTION
            if answer is None or answer is CLOSE_CONNECTION:
                return answer
            return build(answer_type, answer)
        except Exception as err:  # the broker keeps serving; this request gets what it can
            if isinstance(err, kerr.InvalidRequestError):
                self._log.info("kafka_request_refused", api=name, version=request.api_version, reason=str(err))
            else:
                self._log.exception("kafka_handler_failed", api=name, version=request.api_version)
            if request.api_key == 0 and request.body.acks == 0:
                return CLOSE_CONNECTION
            if "error_code" not in {f.name for f in fields(answer_type)}:
                return CLOSE_CONNECTION
            code = err.error_code if isinstance(err, kerr.KafkaError) else kerr.UnknownServerError.error_code
            return build(answer_type, {"error_code": code, "throttle_time": 0})

    def unsupported(self, err: UnsupportedRequest) -> bytes:
        """The frame answering an API or version that is not served. ApiVersions gets its v0
        answer with UNSUPPORTED_VERSION and the versions served, so the client can retry with one
        (KIP-511); any other API gets UNSUPPORTED_VERSION where its answer begins."""
        if err.api_key == 18:
            response = ApiVersionsResponseV0(
                error_code=ErrorCode.unsupported_version,
                api_keys=tuple(
                    ApiVersionV0(api_key=k, min_version=lo, max_version=hi)  # type: ignore[arg-type]
                    for k, (lo, hi) in sorted(self._supported.items())
                ),
            )
            chunks, _size = encode_response(err.correlation_id, response)
            return b"".join(c for c in chunks if isinstance(c, bytes))
        return error_only_frame(err.correlation_id, kerr.UnsupportedVersionError.error_code)

    # ------------------------------------------------------------------ ApiVersions, Metadata

    async def api_versions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        current_request().public("ApiVersions is how a client learns what it may send, before any SASL exchange")
        body = request.body
        if request.api_version >= 3:
            conn.client_software = (body.client_software_name, body.client_software_version)
        return {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, (lo, hi) in sorted(self._supported.items())
            ],
            "throttle_time": 0,
        }

    async def metadata(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """Metadata: the brokers' endpoints on *this* listener (as Kafka answers: a client only
        learns addresses it can use with the listener it came in on), and the topics asked for
        (null: all; v1+ an empty list: none), by name or, v10+, by topic id."""
        body = request.body
        image = self.broker.follower.image
        wanted = body.topics
        names: list[str] = []
        by_id: set[str] = set()  # names a topic id was resolved to: hidden again if not describable
        unknown_ids: list[uuid.UUID] = []
        if wanted is not None:
            for t in wanted:
                name = getattr(t, "name", None)
                if name is None and request.api_version < 12:
                    raise kerr.InvalidRequestError("topic ids in a Metadata request need version 12 or later")
                if name is None:
                    topic = image.topics.get_by_id(str(t.topic_id)) if t.topic_id is not None else None
                    if topic is None:
                        unknown_ids.append(t.topic_id)
                        continue
                    name = topic.name
                    by_id.add(name)
                names.append(name)
        all_topics = wanted is None or (request.api_version == 0 and not wanted)
        auto = bool(getattr(body, "allow_auto_topic_creation", True))
        pb = await self.broker.metadata(
            broker_pb2.MetadataRequest(topics=names, all_topics=all_topics, allow_auto_topic_creation=auto),
            listener=conn.listener_name,
        )
        topics: list[dict[str, Any]] = []
        if all_topics or names:
            for t in pb.topics:
                hidden = t.name in by_id and t.error.code == kerr.TopicAuthorizationFailedError.error_code
                topics.append(
                    {
                        "error_code": t.error.code,
                        "name": None if hidden else t.name,
                        "topic_id": t.topic_id or None,
                        "is_internal": t.is_internal,
                        "partitions": [
                            {
                                "error_code": p.error.code,
                                "partition_index": p.partition_index,
                                "leader_id": p.leader_id,
                                "leader_epoch": p.leader_epoch,
                                "replica_nodes": list(p.replica_nodes),
                                "isr_nodes": list(p.isr_nodes),
                                "offline_replicas": list(p.offline_replicas),
                            }
                            for p in t.partitions
                        ],
                        "topic_authorized_operations": -2147483648,
                    }
                )
        for topic_id in unknown_ids:
            topics.append(
                {
                    "error_code": kerr.UnknownTopicIdError.error_code,
                    "name": None,
                    "topic_id": topic_id,
                    "partitions": [],
                }
            )
        return {
            "throttle_time": 0,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack or None} for b in pb.brokers
            ],
            "cluster_id": self.broker.cluster_id,
            # KRaft: clients cannot reach the controllers; admin requests go to any broker, which
            # forwards them, so the "controller" a client is told of is this broker
            "controller_id": self.broker.broker_id,
            "topics": topics,
            "cluster_authorized_operations": -2147483648,
        }

    async def describe_topic_partitions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DescribeTopicPartitions (KIP-966): topics by name (none named: all) in name order, at
        most ``response_partition_limit`` partitions per answer, paged with a cursor. kraftlog has
        no eligible leader replicas (ELR): those fields are null."""
        body = request.body
        image = self.broker.follower.image
        names = sorted({t.name for t in body.topics} if body.topics else image.topics.by_name)
        describable = current_request().authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if not body.topics:
            names = [n for n in names if n in describable]
        limit = max(1, body.response_partition_limit)
        cursor = body.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        topics: list[dict[str, Any]] = []
        next_cursor = None
        budget = limit
        for name in names:
            topic = image.topics.get_by_name(name) if name in describable else None
            if topic is None:
                code = kerr.UnknownTopicOrPartitionError if name in describable else kerr.TopicAuthorizationFailedError
                topics.append({"error_code": code.error_code, "name": name, "partitions": []})
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            if budget == 0:  # the page is full: the next one starts with this topic
                next_cursor = {"topic_name": name, "partition_index": first}
                break
            partitions = []
            for pid in sorted(p for p in topic.partitions if p >= first):
                if budget == 0:
                    next_cursor = {"topic_name": name, "partition_index": pid}
                    break
                reg = topic.partitions[pid]
                partitions.append(
                    {
                        "error_code": 0 if reg.leader >= 0 else kerr.LeaderNotAvailableError.error_code,
                        "partition_index": pid,
                        "leader_id": reg.leader,
                        "leader_epoch": reg.leader_epoch,
                        "replica_nodes": list(reg.replicas),
                        "isr_nodes": list(reg.isr),
                        "eligible_leader_replicas": None,
                        "last_known_elr": None,
                        "offline_replicas": list(reg.offline_replicas(image.cluster)),
                    }
                )
                budget -= 1
            topics.append(
                {
                    "error_code": 0,
                    "name": name,
                    "topic_id": topic.topic_id,
                    "is_internal": name.startswith("__"),
                    "partitions": partitions,
                    "topic_authorized_operations": -2147483648,
                }
            )
            if next_cursor is not None:
                break
        return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
