"""Topics: create, delete, add partitions, describe (Kafka's ReplicationControlManager, topic half)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common import topic_name_problem
from kraftlog.common.config import ConfigError, validate_topic_configs
from kraftlog.metadata_log import (
    NO_LEADER,
    ConfigRecord,
    ConfigResourceType,
    MetadataProvenance,
    PartitionRecord,
    PlacementError,
    RemoveTopicRecord,
    TopicRecord,
    assign_replicas,
    expand_assignment,
    placement_brokers,
)
from kraftlog.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from kraftlog.proto import admin_pb2
from kraftlog.quorum.controller._controller_base import (
    ControllerContext,
    Records,
    _apply,
    _err_from,
    _usable,
    error_pb,
    new_topic_id,
)


def validate_topic_name(name: str) -> str | None:
    """Kafka's topic-name rules; returns why ``name`` is illegal, or None."""
    return topic_name_problem(name)


def _validate_topic_configs(configs: Mapping[str, str]) -> None:
    """`validate_topic_configs`, plus: a LIST key may not be empty. The schema's validator accepts
    ``cleanup.policy=""``, but the partition log refuses a topic with no cleanup policy, so a
    committed empty value would leave every replica unable to apply the topic's config."""
    from kraftlog.common.config import TOPIC_CONFIG_DEFS, ConfigType

    parsed = validate_topic_configs(configs)
    for key, value in parsed.items():
        if TOPIC_CONFIG_DEFS[key].type is ConfigType.LIST and not value:
            raise ConfigError(f"invalid value {configs[key]!r} for {key!r}: the list must not be empty", key=key)


def _collides(image: MetadataImage, name: str) -> str | None:
    """Kafka refuses topics whose names differ only by '.' versus '_' (metric names collide)."""
    if "." not in name and "_" not in name:
        return None
    unified = name.replace(".", "_")
    for other in image.topics.by_name:
        if other != name and other.replace(".", "_") == unified:
            return other
    return None


def _check_assignment(
    image: MetadataImage,
    assignment: Mapping[int, Sequence[int]],
    *,
    first_partition: int,
    count: int,
    replication_factor: int | None = None,
) -> str | None:
    """Why an explicit assignment is invalid (Kafka's validateManualPartitionAssignment), or None.
    ``replication_factor``, when given, is the one every partition must have (an existing topic's)."""
    if sorted(assignment) != list(range(first_partition, first_partition + count)):
        return (
            f"partitions {sorted(assignment)} are not the consecutive ids "
            f"{first_partition}..{first_partition + count - 1}"
        )
    rf = None
    for pid, replicas in sorted(assignment.items()):
        if not replicas:
            return f"partition {pid} has an empty replica list"
        if len(set(replicas)) != len(replicas):
            return f"partition {pid} lists a broker twice: {list(replicas)}"
        unknown = [b for b in replicas if image.cluster.broker(b) is None]
        if unknown:
            return f"partition {pid} names unregistered brokers {unknown}"
        if replication_factor is not None and len(replicas) != replication_factor:
            return (
                f"partition {pid} has {len(replicas)} replica(s), but the topic's partitions have {replication_factor}"
            )
        if rf is not None and len(replicas) != rf:
            return "all partitions must have the same number of replicas"
        rf = len(replicas)
        if not any(_usable(image, b) for b in replicas):
            return f"every broker in the assignment of partition {pid} is fenced or shutting down"
    return None


def _new_partition(image: MetadataImage, topic_id: str, pid: int, replicas: Sequence[int]) -> PartitionRecord:
    isr = tuple(b for b in replicas if _usable(image, b))
    leader = isr[0] if isr else NO_LEADER
    return PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=tuple(replicas),
        isr=isr or tuple(replicas[:1]),
        leader=leader,
        leader_epoch=0,
        partition_epoch=0,
    )


def create_topics(
    image: MetadataImage, req: admin_pb2.CreateTopicsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.CreateTopicsResponse]:
    """CreateTopics with Kafka's validation; ``validate_only`` answers without records."""
    Result = admin_pb2.CreateTopicsResponse.Result
    results: list[Any] = []
    records: Records = []
    names = [t.name for t in req.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    created_names: set[str] = set()
    working = image
    for t in req.topics:

        def fail(err: type[kerr.KafkaError], msg: str, t: Any = t) -> None:
            results.append(Result(name=t.name, error=error_pb(err, msg)))

        if t.name in duplicates:
            fail(kerr.InvalidRequestError, f"topic {t.name!r} appears more than once in the request")
            continue
        problem = validate_topic_name(t.name)
        if problem:
            fail(kerr.InvalidTopicError, problem)
            continue
        if working.topics.get_by_name(t.name) is not None:
            fail(kerr.TopicAlreadyExistsError, f"topic {t.name!r} already exists")
            continue
        other = _collides(working, t.name)
        if other is not None:
            fail(
                kerr.InvalidTopicError,
                f"topic {t.name!r} collides with existing topic {other!r} ('.' and '_' are interchangeable)",
            )
            continue
        try:
            configs = dict(t.configs)
            _validate_topic_configs(configs)
        except ConfigError as err:
            fail(kerr.InvalidConfigError, str(err))
            continue
        if t.assignments:
            if t.num_partitions not in (-1, 0) or t.replication_factor not in (-1, 0):
                fail(
                    kerr.InvalidRequestError,
                    "both partition count and replication factor must be -1 when an assignment is given",
                )
                continue
            indexes = [a.partition_index for a in t.assignments]
            repeated = sorted({i for i in indexes if indexes.count(i) > 1})
            if repeated:
                fail(
                    kerr.InvalidReplicaAssignmentError,
                    f"found multiple manual partition assignments for partition(s) {repeated}",
                )
                continue
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            problem = _check_assignment(working, assignment, first_partition=0, count=len(assignment))
            if problem:
                fail(kerr.InvalidReplicaAssignmentError, problem)
                continue
        else:
            num_partitions = ctx.cfg("num.partitions") if t.num_partitions == -1 else t.num_partitions
            rf = ctx.cfg("default.replication.factor") if t.replication_factor == -1 else t.replication_factor
            if num_partitions <= 0:
                fail(kerr.InvalidPartitionsError, f"number of partitions must be larger than 0, got {num_partitions}")
                continue
            if rf <= 0:
                fail(kerr.InvalidReplicationFactorError, f"replication factor must be larger than 0, got {rf}")
                continue
            usable = placement_brokers(working.cluster)
            if rf > len(usable):
                fail(
                    kerr.InvalidReplicationFactorError,
                    f"unable to replicate the partition {rf} time(s): the target replication factor of "
                    f"{rf} cannot be reached because only {len(usable)} broker(s) are registered and unfenced",
                )
                continue
            try:
                assignment = assign_replicas(usable, num_partitions, rf, ctx.rng)
            except PlacementError as err:
                results.append(Result(name=t.name, error=_err_from(err)))
                continue
        refusal = ctx.quota_refusal(len(assignment))
        if refusal is not None:
            results.append(Result(name=t.name, error=refusal))
            continue
        topic_id = new_topic_id(ctx.rng)
        rf_out = len(next(iter(assignment.values())))
        results.append(
            Result(
                name=t.name,
                topic_id=topic_id,
                error=error_pb(),
                num_partitions=len(assignment),
                replication_factor=rf_out,
            )
        )
        topic_records: Records = [TopicRecord(name=t.name, topic_id=topic_id)]
        topic_records += [_new_partition(working, topic_id, pid, reps) for pid, reps in sorted(assignment.items())]
        topic_records += [
            ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=t.name, name=k, value=v)
            for k, v in sorted(configs.items())
        ]
        # validate_only still "creates" in the working image, so the rest of the request is
        # judged exactly as a real create would judge it (e.g. a '.'/'_' collision with it).
        working = _apply(working, topic_records)
        if not req.validate_only:
            records += topic_records
            created_names.add(t.name)
    return records, admin_pb2.CreateTopicsResponse(topics=results)


def delete_topics(
    image: MetadataImage, req: admin_pb2.DeleteTopicsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.DeleteTopicsResponse]:
    """DeleteTopics by name or id: one RemoveTopicRecord per topic (brokers delete files after)."""
    Result = admin_pb2.DeleteTopicsResponse.Result
    results: list[Any] = []
    records: Records = []
    removed: set[str] = set()
    enabled = bool(ctx.cfg("delete.topic.enable"))
    targets: list[tuple[str, str, TopicImage | None, type[kerr.KafkaError]]] = []
    targets += [(n, "", image.topics.get_by_name(n), kerr.UnknownTopicOrPartitionError) for n in req.names]
    targets += [("", i, image.topics.get_by_id(i), kerr.UnknownTopicIdError) for i in req.topic_ids]
    names, ids = list(req.names), list(req.topic_ids)
    for name, topic_id, topic, missing in targets:
        if (name and names.count(name) > 1) or (topic_id and ids.count(topic_id) > 1):
            # Kafka answers every copy of a repeated name or id with INVALID_REQUEST.
            results.append(
                Result(
                    name=name,
                    topic_id=topic_id,
                    error=error_pb(
                        kerr.InvalidRequestError, f"topic {name or topic_id} appears more than once in the request"
                    ),
                )
            )
            continue
        if not enabled:
            results.append(
                Result(
                    name=name,
                    topic_id=topic_id,
                    error=error_pb(kerr.TopicDeletionDisabledError, "delete.topic.enable is false"),
                )
            )
            continue
        if topic is None:
            results.append(
                Result(
                    name=name, topic_id=topic_id, error=error_pb(missing, f"topic {name or topic_id} does not exist")
                )
            )
            continue
        if topic.topic_id not in removed and (refusal := ctx.quota_refusal(len(topic.partitions))) is not None:
            results.append(Result(name=topic.name, topic_id=topic.topic_id, error=refusal))
            continue
        results.append(Result(name=topic.name, topic_id=topic.topic_id, error=error_pb()))
        if topic.topic_id not in removed:
            removed.add(topic.topic_id)
            records.append(RemoveTopicRecord(topic_id=topic.topic_id))
    return records, admin_pb2.DeleteTopicsResponse(topics=results)


def _target_replicas(part: PartitionRegistration) -> list[int]:
    """The replicas a partition has once any reassignment in progress is done."""
    return [r for r in part.replicas if r not in part.removing_replicas]


def create_partitions(
    image: MetadataImage, req: admin_pb2.CreatePartitionsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.CreatePartitionsResponse]:
    """CreatePartitions: grow a topic, continuing its replica assignment (or an explicit one)."""
    Result = admin_pb2.CreatePartitionsResponse.Result
    results: list[Any] = []
    records: Records = []
    seen: set[str] = set()
    for t in req.topics:
        if t.name in seen:
            results.append(Result(name=t.name, error=error_pb(kerr.InvalidRequestError, "duplicate topic")))
            continue
        seen.add(t.name)
        topic = image.topics.get_by_name(t.name)
        if topic is None:
            results.append(
                Result(
                    name=t.name, error=error_pb(kerr.UnknownTopicOrPartitionError, f"topic {t.name!r} does not exist")
                )
            )
            continue
        current = len(topic.partitions)
        if t.count < current:
            results.append(
                Result(
                    name=t.name,
                    error=error_pb(
                        kerr.InvalidPartitionsError,
                        f"topic currently has {current} partitions, which is higher than the requested {t.count}",
                    ),
                )
            )
            continue
        if t.count == current:
            results.append(
                Result(
                    name=t.name, error=error_pb(kerr.InvalidPartitionsError, f"topic already has {current} partitions")
                )
            )
            continue
        new_count = t.count - current
        if t.assignments:
            assignment = {current + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
            if len(t.assignments) != new_count:
                results.append(
                    Result(
                        name=t.name,
                        error=error_pb(
                            kerr.InvalidReplicaAssignmentError,
                            f"{len(t.assignments)} assignments for {new_count} new partitions",
                        ),
                    )
                )
                continue
            rf = len(_target_replicas(topic.partitions[0]))
            problem = _check_assignment(
                image, assignment, first_partition=current, count=new_count, replication_factor=rf
            )
            if problem:
                results.append(Result(name=t.name, error=error_pb(kerr.InvalidReplicaAssignmentError, problem)))
                continue
        else:
            existing = {pid: _target_replicas(p) for pid, p in topic.partitions.items()}
            try:
                assignment = expand_assignment(existing, t.count, placement_brokers(image.cluster), ctx.rng)
            except PlacementError as err:
                results.append(Result(name=t.name, error=_err_from(err)))
                continue
        refusal = ctx.quota_refusal(new_count)
        if refusal is not None:
            results.append(Result(name=t.name, error=refusal))
            continue
        results.append(Result(name=t.name, error=error_pb()))
        if not req.validate_only:
            records += [_new_partition(image, topic.topic_id, pid, reps) for pid, reps in sorted(assignment.items())]
    return records, admin_pb2.CreatePartitionsResponse(results=results)


def describe_topics(
    image: MetadataImage, req: admin_pb2.DescribeTopicsRequest, provenance: MetadataProvenance | None = None
) -> admin_pb2.DescribeTopicsResponse:
    """Topics as the image has them; with ``provenance``, each partition's ``controller_epoch``."""
    R = admin_pb2.DescribeTopicsResponse
    partition_epochs = provenance.partition_epochs if provenance is not None else {}
    out = []
    names = list(req.names) or sorted(image.topics.by_name)
    for name in names:
        topic = image.topics.get_by_name(name)
        if topic is None:
            out.append(
                R.Topic(name=name, error=error_pb(kerr.UnknownTopicOrPartitionError, f"topic {name!r} does not exist"))
            )
            continue
        parts = []
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            offline = [r for r in p.replicas if not image.cluster.is_unfenced(r)]
            parts.append(
                R.Partition(
                    partition_index=pid,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    replicas=list(p.replicas),
                    isr=list(p.isr),
                    offline_replicas=offline,
                    adding_replicas=list(p.adding_replicas),
                    removing_replicas=list(p.removing_replicas),
                    eligible_leader_replicas=list(p.elr),
                    last_known_elr=list(p.last_known_elr),
                    controller_epoch=partition_epochs.get((topic.topic_id, pid)),
                )
            )
        out.append(
            R.Topic(
                name=name,
                topic_id=topic.topic_id,
                error=error_pb(),
                partitions=parts,
                configs=dict(image.configs.topic_config(name)),
            )
        )
    return R(topics=out)
