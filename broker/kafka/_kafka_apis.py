"""The Kafka-protocol listener's request handlers: each API translated onto what the gRPC services
already do (the replica manager, the group and transaction services, the active controller).

A handler takes the decoded request (kio's entity of the version the client sent) and returns a
version-independent description of the answer (see `_kafka_wire.build`), or None for a request
that has no answer (Produce with acks=0). `KafkaApis.supported` is what ApiVersions advertises:
only APIs with a handler, at the versions the handler was written and tested for.

The handlers are methods of handler objects split by area (`_kafka_data.DataApis`,
`_kafka_groups.GroupApis`, ...), each holding what it needs; this module builds them and
dispatches from one table. Every request runs inside a `RequestContext`, and one that reached no
authorization decision is never answered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import structlog
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from kraftlog.broker.kafka._kafka_admin import AdminApis, ControllerForwarder
from kraftlog.broker.kafka._kafka_data import DataApis
from kraftlog.broker.kafka._kafka_groups import GroupApis
from kraftlog.broker.kafka._kafka_metadata import MetadataApis
from kraftlog.broker.kafka._kafka_quorum import QuorumApis
from kraftlog.broker.kafka._kafka_quotas import QuotaApis
from kraftlog.broker.kafka._kafka_sasl import SASL_APIS, SaslApis
from kraftlog.broker.kafka._kafka_security import SecurityApis
from kraftlog.broker.kafka._kafka_server import CLOSE_CONNECTION, ConnectionInfo
from kraftlog.broker.kafka._kafka_share_fetch import ShareFetchApis
from kraftlog.broker.kafka._kafka_share_state import ShareStateApis
from kraftlog.broker.kafka._kafka_throttle import KafkaThrottle
from kraftlog.broker.kafka._kafka_txn import TxnApis
from kraftlog.broker.kafka._kafka_wire import (
    ParsedRequest,
    UnsupportedRequest,
    build,
    encode_response,
    error_only_frame,
    response_type,
)
from kraftlog.common import errors as kerr
from kraftlog.common.security import RequestContext, request_scope

if TYPE_CHECKING:
    from kraftlog.broker.groups import GroupService
    from kraftlog.broker.quota import QuotaManagers
    from kraftlog.broker.share import ShareFetchService, ShareStateService
    from kraftlog.broker.txn import TxnService, TxnVerifyClient
    from kraftlog.common.config import NodeConfig
    from kraftlog.metadata_log import AclGate
    from kraftlog.proto import broker_pb2


class KafkaBroker(Protocol):
    """What the Kafka handlers take from the broker that serves them (`broker.BrokerServer` is it).

    A protocol rather than the server's class, so that the listener and the server do not import
    each other: the server builds `KafkaApis` and hands itself over as this face. Read-only: the
    replica manager exists only once the broker started and the follower's image changes, so the
    handlers read both through it at each request.
    """

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def acl_gate(self) -> AclGate: ...

    @property
    def follower(self) -> Any: ...

    @property
    def replicas(self) -> Any: ...

    @property
    def channel(self) -> Any: ...

    @property
    def group_service(self) -> GroupService: ...

    @property
    def quotas(self) -> QuotaManagers: ...

    @property
    def txn_service(self) -> TxnService: ...

    @property
    def txn_verify_client(self) -> TxnVerifyClient: ...

    @property
    def share_state_service(self) -> ShareStateService: ...

    @property
    def share_fetch_service(self) -> ShareFetchService: ...

    async def init_producer_id(self, request: Any) -> broker_pb2.InitProducerIdResponse: ...

    async def metadata(
        self, req: broker_pb2.MetadataRequest, *, listener: str = ...
    ) -> broker_pb2.MetadataResponse: ...


__all__ = ["KafkaApis", "KafkaBroker"]

Handler = Callable[[ParsedRequest, ConnectionInfo], Awaitable[Any]]


class _Route(NamedTuple):
    """One served API: its name, the versions served, and the handler."""

    name: str
    min_version: int
    max_version: int
    handler: Handler


class KafkaApis:
    """Dispatches decoded requests to their handler; one per broker, shared by its listeners.

    Built once the broker has its group and transaction services: the handlers share those
    objects with the gRPC servicers. What exists only once the broker started (the replica
    manager) and what changes (the metadata image) the handlers read through the broker."""

    def __init__(self, broker: KafkaBroker) -> None:
        self._log = structlog.get_logger(__name__).bind(node_id=broker.broker_id)
        self._acl_gate = broker.acl_gate

        def image() -> Any:
            return broker.follower.image

        def replicas() -> Any:
            return broker.replicas

        forward = ControllerForwarder(broker.channel)
        self._throttle = throttle = KafkaThrottle(broker.quotas)
        data = DataApis(
            replicas,
            image,
            broker.config["max.incremental.fetch.session.cache.slots"],
            throttle.fetch_max_bytes,
            lambda: throttle.enabled,
        )
        groups = GroupApis(broker.group_service)
        txn = TxnApis(
            broker.txn_service,
            broker.group_service,
            broker.init_producer_id,
            replicas,
            broker.txn_verify_client,
            lambda: bool(broker.config["transaction.partition.verification.enable"]),
        )
        admin = AdminApis(
            forward,
            node_id=broker.broker_id,
            cluster_id=broker.cluster_id,
            image=image,
            log_dirs=broker.config.log_dirs,
            replicas=replicas,
            config=broker.config,
        )
        security = SecurityApis(forward)
        share_state = ShareStateApis(broker.share_state_service)
        share_fetch = ShareFetchApis(broker.share_fetch_service)
        quotas = QuotaApis(forward, image)
        quorum = QuorumApis(forward, cluster_id=broker.cluster_id)
        self._sasl = sasl = SaslApis(broker.broker_id, lambda m, user: broker.follower.image.scram.credential(m, user))
        meta = MetadataApis(
            node_id=broker.broker_id,
            cluster_id=broker.cluster_id,
            image=image,
            metadata=lambda req, listener: broker.metadata(req, listener=listener),
            supported=self.supported,
        )
        # api key -> (name, min version, max version, handler)
        self._routes: dict[int, _Route] = {
            0: _Route("Produce", 3, 13, data.produce),
            1: _Route("Fetch", 4, 17, data.fetch),
            2: _Route("ListOffsets", 1, 8, data.list_offsets),
            3: _Route("Metadata", 0, 12, meta.metadata),
            8: _Route("OffsetCommit", 2, 8, groups.offset_commit),
            9: _Route("OffsetFetch", 1, 8, groups.offset_fetch),
            10: _Route("FindCoordinator", 0, 4, groups.find_coordinator),
            11: _Route("JoinGroup", 2, 9, groups.join_group),
            12: _Route("Heartbeat", 0, 4, groups.heartbeat),
            13: _Route("LeaveGroup", 0, 5, groups.leave_group),
            14: _Route("SyncGroup", 0, 5, groups.sync_group),
            15: _Route("DescribeGroups", 0, 5, groups.describe_groups),
            16: _Route("ListGroups", 0, 5, groups.list_groups),
            18: _Route("ApiVersions", 0, 4, meta.api_versions),
            21: _Route("DeleteRecords", 0, 2, data.delete_records),
            22: _Route("InitProducerId", 0, 5, txn.init_producer_id),
            23: _Route("OffsetForLeaderEpoch", 2, 4, data.offset_for_leader_epoch),
            24: _Route("AddPartitionsToTxn", 0, 5, txn.add_partitions_to_txn),
            25: _Route("AddOffsetsToTxn", 0, 4, txn.add_offsets_to_txn),
            26: _Route("EndTxn", 0, 5, txn.end_txn),
            28: _Route("TxnOffsetCommit", 0, 5, txn.txn_offset_commit),
            19: _Route("CreateTopics", 2, 7, admin.create_topics),
            20: _Route("DeleteTopics", 1, 6, admin.delete_topics),
            32: _Route("DescribeConfigs", 1, 4, admin.describe_configs),
            33: _Route("AlterConfigs", 0, 2, admin.alter_configs),
            35: _Route("DescribeLogDirs", 1, 4, admin.describe_log_dirs),
            37: _Route("CreatePartitions", 0, 3, admin.create_partitions),
            42: _Route("DeleteGroups", 0, 2, groups.delete_groups),
            43: _Route("ElectLeaders", 0, 2, admin.elect_leaders),
            44: _Route("IncrementalAlterConfigs", 0, 1, admin.incremental_alter_configs),
            45: _Route("AlterPartitionReassignments", 0, 0, admin.alter_partition_reassignments),
            46: _Route("ListPartitionReassignments", 0, 0, admin.list_partition_reassignments),
            47: _Route("OffsetDelete", 0, 0, groups.offset_delete),
            57: _Route("UpdateFeatures", 0, 2, admin.update_features),
            60: _Route("DescribeCluster", 0, 1, admin.describe_cluster),
            61: _Route("DescribeProducers", 0, 0, txn.describe_producers),
            65: _Route("DescribeTransactions", 0, 0, txn.describe_transactions),
            66: _Route("ListTransactions", 0, 0, txn.list_transactions),
            68: _Route("ConsumerGroupHeartbeat", 0, 1, groups.consumer_group_heartbeat),
            69: _Route("ConsumerGroupDescribe", 0, 1, groups.consumer_group_describe),
            76: _Route("ShareGroupHeartbeat", 1, 1, groups.share_group_heartbeat),
            77: _Route("ShareGroupDescribe", 1, 1, groups.share_group_describe),
            90: _Route("DescribeShareGroupOffsets", 0, 1, groups.describe_share_group_offsets),
            91: _Route("AlterShareGroupOffsets", 0, 0, groups.alter_share_group_offsets),
            92: _Route("DeleteShareGroupOffsets", 0, 0, groups.delete_share_group_offsets),
            78: _Route("ShareFetch", 1, 2, share_fetch.share_fetch),
            79: _Route("ShareAcknowledge", 1, 2, share_fetch.share_acknowledge),
            83: _Route("InitializeShareGroupState", 0, 0, share_state.initialize_share_group_state),
            84: _Route("ReadShareGroupState", 0, 0, share_state.read_share_group_state),
            85: _Route("WriteShareGroupState", 0, 1, share_state.write_share_group_state),
            86: _Route("DeleteShareGroupState", 0, 0, share_state.delete_share_group_state),
            87: _Route("ReadShareGroupStateSummary", 0, 1, share_state.read_share_group_state_summary),
            75: _Route("DescribeTopicPartitions", 0, 0, meta.describe_topic_partitions),
            29: _Route("DescribeAcls", 1, 3, security.describe_acls),
            30: _Route("CreateAcls", 1, 3, security.create_acls),
            31: _Route("DeleteAcls", 1, 3, security.delete_acls),
            48: _Route("DescribeClientQuotas", 0, 1, quotas.describe_client_quotas),
            49: _Route("AlterClientQuotas", 0, 1, quotas.alter_client_quotas),
            50: _Route("DescribeUserScramCredentials", 0, 0, security.describe_user_scram_credentials),
            51: _Route("AlterUserScramCredentials", 0, 0, security.alter_user_scram_credentials),
            55: _Route("DescribeQuorum", 0, 2, quorum.describe_quorum),
            80: _Route("AddRaftVoter", 0, 1, quorum.add_raft_voter),
            81: _Route("RemoveRaftVoter", 0, 0, quorum.remove_raft_voter),
            17: _Route("SaslHandshake", 0, 1, sasl.sasl_handshake),
            36: _Route("SaslAuthenticate", 0, 2, sasl.sasl_authenticate),
        }
        self._supported = {key: (r.min_version, r.max_version) for key, r in self._routes.items()}

    def sasl_token(self, conn: ConnectionInfo, token: bytes) -> bytes:
        """One step of a connection's SASL exchange (see `SaslApis.sasl_token`): the listener
        calls it for the raw tokens that follow a SaslHandshake v0."""
        return self._sasl.sasl_token(conn, token)

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
        name, _lo, _hi, handler = self._routes[request.api_key]
        if not conn.authenticated and request.api_key not in SASL_APIS:
            self._log.info("kafka_request_before_authentication", api=name, peer=conn.peer)
            return CLOSE_CONNECTION  # Kafka's ILLEGAL_SASL_STATE: nothing else before the exchange
        answer_type = response_type(request.api_key, request.api_version)
        ctx = RequestContext(
            conn.session,
            api=name,
            authorize_fn=self._acl_gate,
            client_id=request.client_id or "",
            strict_quota=KafkaThrottle.strict_quota(request),
        )
        # the request's clocks are read only while a quota may want its time (two system calls)
        measured = self._throttle.enabled
        started_ns, started_cpu_ns = (time.perf_counter_ns(), time.thread_time_ns()) if measured else (0, 0)
        try:
            with request_scope(ctx):
                answer = await handler(request, conn)
            if not ctx.decided:  # a handler nobody authorized is a bug: never answer it
                self._log.error("kafka_request_without_authorization_decision", api=name, principal=ctx.principal)
                return CLOSE_CONNECTION
            if answer is CLOSE_CONNECTION:
                return answer
            # the request's time for request_percentage: the event loop thread's CPU time meanwhile,
            # at most the wall time (Kafka counts handler thread time, not time parked in purgatory:
            # a long-polled Fetch or an acks=all Produce waiting for followers costs little)
            busy_ns = 0
            if measured:
                busy_ns = min(time.perf_counter_ns() - started_ns, time.thread_time_ns() - started_cpu_ns)
                busy_ns += ctx.offloaded_cpu_ns  # produce validation on the worker threads
            self._throttle.after(request, conn, answer, busy_ns)
            if answer is None:
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
