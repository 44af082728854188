"""The group service's conversions between the gRPC messages and the coordinator's types: an
assignment in and out (topic ids, with names when an image is given), and Kafka's form of a
client's host from gRPC's peer string."""

from __future__ import annotations

from typing import Any

from kraftlog.broker.groups._group_records_consumer import Assignment
from kraftlog.broker.replica import error_pb
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import group_pb2

__all__ = ["assignment_in", "assignment_out", "client_host_of", "heartbeat_answer"]


def assignment_in(message: Any) -> Assignment:
    merged: dict[str, set[int]] = {}
    for t in message.topics:
        merged.setdefault(t.topic_id, set()).update(t.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(merged.items()))


def assignment_out(assignment: Assignment, image: MetadataImage | None = None) -> Any:
    """An assignment as the proto carries it; with ``image``, each topic's name too."""
    topics = []
    for topic_id, partitions in assignment:
        topic = image.topics.get_by_id(topic_id) if image is not None else None
        name = topic.name if topic is not None else ""
        topics.append(group_pb2.GroupTopicPartitions(topic_id=topic_id, partitions=partitions, topic_name=name))
    return group_pb2.TopicAssignment(topics=topics)


def client_host_of(peer: str) -> str:
    """Kafka's client host, e.g. ``/127.0.0.1``, from gRPC's peer string ``ipv4:127.0.0.1:5678``."""
    kind, _, rest = peer.partition(":")
    host = rest.rsplit(":", 1)[0] if kind in ("ipv4", "ipv6") else rest
    return "/" + host.strip("[]")


def heartbeat_answer(response_type: Any, response: Any) -> Any:
    """A KIP-848 or KIP-932 heartbeat's answer (``response_type``: ConsumerGroupHeartbeatResponse or
    ShareGroupHeartbeatResponse) from the shard's: error, member id and epoch, heartbeat interval,
    and the assignment when the shard sends one."""
    out = response_type(
        error=error_pb(response.error, response.message),
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
    )
    if response.assignment is not None:
        out.assignment.CopyFrom(assignment_out(response.assignment))
    return out
