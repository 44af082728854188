"""Kafka-protocol cluster metadata requests: ApiVersions, Metadata and DescribeTopicPartitions,
answered from the broker's metadata image (Metadata through `BrokerServer.metadata`, the call the
gRPC listener serves too, which authorizes and auto-creates topics).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import NOT_REQUESTED_OPERATIONS, ParsedRequest
from kraftlog.common import errors as kerr
from kraftlog.common import is_internal_topic
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.metadata_log import SUPPORTED_FEATURES
from kraftlog.proto import broker_pb2

if TYPE_CHECKING:
    from kraftlog.metadata_log import MetadataImage

__all__ = ["MetadataApis"]

#: the broker's Metadata: (request, listener name) -> answer
MetadataFn = Callable[[broker_pb2.MetadataRequest, str], Awaitable[broker_pb2.MetadataResponse]]


class MetadataApis:
    """ApiVersions, Metadata and DescribeTopicPartitions for `KafkaApis`. ``supported`` is what
    ApiVersions advertises (`KafkaApis.supported`)."""

    def __init__(
        self,
        *,
        node_id: int,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        metadata: MetadataFn,
        supported: Callable[[], dict[int, tuple[int, int]]],
    ) -> None:
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._image = image
        self._metadata = metadata
        self._supported = supported

    async def api_versions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        current_request().public("ApiVersions is how a client learns what it may send, before any SASL exchange")
        body = request.body
        if request.api_version >= 3:
            conn.client_software = (body.client_software_name, body.client_software_version)
        out: dict[str, Any] = {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, (lo, hi) in sorted(self._supported().items())
            ],
            "throttle_time": 0,
        }
        if request.api_version >= 3:  # KIP-584's tagged fields: what this broker supports, what is finalized
            image = self._image()
            out["supported_features"] = [
                {"name": n, "min_version": r.min_version, "max_version": r.max_version}
                for n, r in sorted(SUPPORTED_FEATURES.items())
            ]
            out["finalized_features_epoch"] = image.offset
            out["finalized_features"] = [
                {"name": n, "max_version_level": lvl, "min_version_level": lvl}
                for n, lvl in sorted(image.features.levels.items())
            ]
        return out

    async def metadata(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """Metadata: the brokers' endpoints on *this* listener (as Kafka answers: a client only
        learns addresses it can use with the listener it came in on), and the topics asked for
        (null: all; v1+ an empty list: none), by name or, v10+, by topic id."""
        body = request.body
        image = self._image()
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
        pb = await self._metadata(
            broker_pb2.MetadataRequest(topics=names, all_topics=all_topics, allow_auto_topic_creation=auto),
            conn.listener_name,
        )
        topics: list[dict[str, Any]] = []
        ctx = current_request()
        topic_ops = bool(getattr(body, "include_topic_authorized_operations", False))
        if all_topics or names:
            for t in pb.topics:
                hidden = t.name in by_id and t.error.code == kerr.TopicAuthorizationFailedError.error_code
                denied = t.error.code == kerr.TopicAuthorizationFailedError.error_code
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
                        "topic_authorized_operations": ctx.authorized_operations(ResourceType.TOPIC, t.name)
                        if topic_ops and not denied
                        else NOT_REQUESTED_OPERATIONS,
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
            "cluster_id": self._cluster_id,
            # KRaft: clients cannot reach the controllers; admin requests go to any broker, which
            # forwards them, so the "controller" a client is told of is this broker
            "controller_id": self._node_id,
            "topics": topics,
            # v8-10 only: later versions ask DescribeCluster
            "cluster_authorized_operations": ctx.authorized_operations(
                ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, needs_describe=True
            )
            if getattr(body, "include_cluster_authorized_operations", False)
            else NOT_REQUESTED_OPERATIONS,
        }

    async def describe_topic_partitions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DescribeTopicPartitions (KIP-966): topics by name (none named: all) in name order, at
        most ``response_partition_limit`` partitions per answer, paged with a cursor, with each
        partition's eligible leader replicas and last known ELR (KIP-966; empty lists when none)."""
        body = request.body
        image = self._image()
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
                        "eligible_leader_replicas": list(reg.elr),
                        "last_known_elr": list(reg.last_known_elr),
                        "offline_replicas": list(reg.offline_replicas(image.cluster)),
                    }
                )
                budget -= 1
            topics.append(
                {
                    "error_code": 0,
                    "name": name,
                    "topic_id": topic.topic_id,
                    "is_internal": is_internal_topic(name),
                    "partitions": partitions,
                    "topic_authorized_operations": current_request().authorized_operations(ResourceType.TOPIC, name),
                }
            )
            if next_cursor is not None:
                break
        return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
