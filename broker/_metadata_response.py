"""Kafka's MetadataResponse from a broker's image (both listeners' Metadata)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from kraftlog.broker._listeners import BROKER_LISTENER
from kraftlog.broker.replica import error_pb
from kraftlog.common import errors as kerr
from kraftlog.common import is_internal_topic, topic_name_problem
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import broker_pb2

__all__ = ["metadata_response"]


def metadata_response(
    image: MetadataImage,
    req: broker_pb2.MetadataRequest,
    *,
    cluster_id: str,
    controller_id: int,
    listener: str = BROKER_LISTENER,
    auto_created: AbstractSet[str] = frozenset(),
    describable: AbstractSet[str] | None = None,
    create_denied: AbstractSet[str] = frozenset(),
) -> broker_pb2.MetadataResponse:
    """Kafka's MetadataResponse from the broker's image: unfenced brokers' endpoints, and for each
    topic its partitions with leader, epochs, replicas, ISR and offline replicas.

    ``describable`` (None: all) are the topics the caller may describe: the others are left out of
    an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named, whether they exist or
    not, so their existence does not show. ``create_denied``: missing topics the caller asked to
    auto-create without the right to (TOPIC_AUTHORIZATION_FAILED, as Kafka answers). A missing
    topic of an illegal name is INVALID_TOPIC_EXCEPTION, as Kafka answers it."""
    R = broker_pb2.MetadataResponse
    brokers = []
    for bid in image.cluster.broker_ids():
        reg = image.cluster.broker(bid)
        if reg is None or reg.fenced:
            continue
        ep = reg.endpoint(listener)
        if ep is None and listener == BROKER_LISTENER and reg.endpoints:  # a gRPC listener of another name
            ep = reg.endpoints[0]
        if ep is not None:
            brokers.append(broker_pb2.NodeEndpoint(node_id=bid, host=ep.host, port=ep.port, rack=reg.rack or ""))
    every_topic = req.all_topics or not req.topics
    names = sorted(image.topics.by_name) if every_topic else list(req.topics)
    if every_topic and describable is not None:
        names = [name for name in names if name in describable]
    topics = []
    for name in names:
        if (describable is not None and name not in describable) or name in create_denied:
            denied = error_pb(kerr.TopicAuthorizationFailedError, f"not authorized for topic {name!r}")
            topics.append(R.Topic(error=denied, name=name))
            continue
        topic = image.topics.get_by_name(name)
        if topic is None:
            problem = topic_name_problem(name)
            if problem is not None:  # Kafka: INVALID_TOPIC_EXCEPTION, auto-creation on or off
                err = error_pb(kerr.InvalidTopicError, problem)
            elif name in auto_created:
                err = error_pb(kerr.LeaderNotAvailableError, "topic is being created")
            else:
                err = error_pb(kerr.UnknownTopicOrPartitionError, f"topic {name!r} does not exist")
            topics.append(R.Topic(error=err, name=name))
            continue
        parts = []
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            offline = [r for r in p.replicas if not image.cluster.is_unfenced(r)]
            perr = error_pb() if p.leader >= 0 else error_pb(kerr.LeaderNotAvailableError, "no leader")
            parts.append(
                R.Partition(
                    error=perr,
                    partition_index=pid,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas),
                    isr_nodes=list(p.isr),
                    offline_replicas=offline,
                )
            )
        topics.append(
            R.Topic(
                error=error_pb(),
                name=name,
                topic_id=topic.topic_id,
                is_internal=is_internal_topic(name),
                partitions=parts,
            )
        )
    return R(brokers=brokers, cluster_id=cluster_id, controller_id=controller_id, topics=topics)
