"""The active controller's decisions, as pure functions of the metadata image.

Every handler here takes the current `MetadataImage`, a request (the protobuf message of the RPC) and
a `ControllerContext` (config, clock reading, seeded rng, the next metadata offset) and returns
``(records, response)``. Handlers never mutate state: the records are proposed to the quorum, and
the leader and the standbys change state only by replaying them once committed. The one piece of
mutable state, broker liveness (`BrokerHeartbeats`), is in-memory on the active controller, exactly
as KRaft keeps it: it is not metadata, and a new active controller starts it afresh.

Rules kept here (Kafka's, KRaft mode):

- Leader election picks the first replica in assignment order that is in the ISR, unfenced and not
  shutting down (the seeds' rule). With ``unclean.leader.election.enable`` any live replica may be
  chosen, and the ISR shrinks to it. With no candidate the partition goes offline (leader -1) and
  keeps its last ISR member so a clean election can follow when that broker returns.
- Removing a broker from ISRs (fencing, controlled shutdown) never empties an ISR.
- Every decision about a broker names the broker epoch it was made for, so a decision about an old
  incarnation cannot touch a new one; every AlterPartition names leader and partition epochs, so a
  deposed or stale leader changes nothing (FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION).
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError, validate_topic_configs
from kraftlog.metadata_log import _placement as placement
from kraftlog.metadata_log._image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from kraftlog.metadata_log._records import (
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kraftlog.proto import admin_pb2, controller_pb2, errors_pb2

__all__ = [
    "ControllerContext",
    "BrokerHeartbeats",
    "validate_topic_name",
    "elect_leader",
    "register_broker",
    "broker_heartbeat",
    "fence_expired_brokers",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "alter_partition",
    "elect_leaders",
    "preferred_leader_rebalance",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "complete_reassignments",
    "allocate_producer_ids",
    "describe_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_topics",
    "new_topic_id",
    "error_pb",
    "apply_records",
    "PRODUCER_ID_BLOCK_SIZE",
]

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

Records = list[MetadataRecord]


def error_pb(err: type[kerr.KafkaError] | kerr.KafkaError | None = None, message: str = "") -> errors_pb2.Error:
    """A response error: code 0 / NONE when ``err`` is None."""
    if err is None:
        return errors_pb2.Error(code=0, name="NONE", message="")
    if isinstance(err, kerr.KafkaError):
        return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message or str(err))
    return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)


def _err_from(exc: Exception) -> errors_pb2.Error:
    """An error carrying Kafka's code from any of our typed exceptions (duck-typed across layers)."""
    code = getattr(exc, "error_code", -1)
    name = getattr(exc, "error_name", "UNKNOWN_SERVER_ERROR")
    return errors_pb2.Error(code=code, name=name, message=str(exc))


def new_topic_id(rng: random.Random) -> str:
    """A topic id: a random UUID (version 4 bits set) drawn from the injected rng, as a string."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass
class ControllerContext:
    """What a handler may know beyond the image: config, time and randomness are parameters."""

    cluster_id: str
    config: Any  # kraftlog.common.config.NodeConfig
    now_ms: int
    rng: random.Random
    next_offset: int = 0  # the offset the first proposed record will get (KRaft's broker epoch)

    def cfg(self, key: str) -> Any:
        return self.config[key]


# ================================================================================ broker liveness


@dataclass
class BrokerHeartbeats:
    """When each broker last heartbeated, on the active controller only (KRaft keeps this in memory).

    A controller that becomes active calls `reset` so every broker gets a full session timeout from
    that moment: silence during the failover is not the broker's fault.
    """

    last_seen_ms: dict[int, int] = field(default_factory=dict)

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_seen_ms[broker_id] = now_ms

    def reset(self, broker_ids: Iterable[int], now_ms: int) -> None:
        self.last_seen_ms = {b: now_ms for b in broker_ids}

    def forget(self, broker_id: int) -> None:
        self.last_seen_ms.pop(broker_id, None)

    def is_alive(self, broker_id: int, now_ms: int, session_timeout_ms: int) -> bool:
        seen = self.last_seen_ms.get(broker_id)
        return seen is not None and now_ms - seen <= session_timeout_ms

    def expired(self, broker_ids: Iterable[int], now_ms: int, session_timeout_ms: int) -> list[int]:
        return sorted(b for b in broker_ids if now_ms - self.last_seen_ms.get(b, now_ms) > session_timeout_ms)


# ================================================================================ elections


def _usable(image: MetadataImage, broker_id: int, excluded: frozenset[int] = frozenset()) -> bool:
    reg = image.cluster.broker(broker_id)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown and broker_id not in excluded


def elect_leader(
    image: MetadataImage,
    part: PartitionRegistration,
    *,
    unclean: bool,
    excluded: frozenset[int] = frozenset(),
    isr: Sequence[int] | None = None,
) -> tuple[int, tuple[int, ...]]:
    """``(leader, isr)`` after an election: the first replica in assignment order that is in the ISR
    and usable; else, when ``unclean``, the first usable replica with the ISR reduced to it; else
    ``(NO_LEADER, isr)``."""
    isr = tuple(part.isr if isr is None else isr)
    for r in part.replicas:
        if r in isr and _usable(image, r, excluded):
            return r, isr
    if unclean:
        for r in part.replicas:
            if _usable(image, r, excluded):
                return r, (r,)
    return NO_LEADER, isr


def _unclean_enabled(image: MetadataImage, ctx: ControllerContext, topic_name: str) -> bool:
    value = image.configs.topic_config(topic_name).get("unclean.leader.election.enable")
    if value is not None:
        return value.strip().lower() == "true"
    return bool(ctx.cfg("unclean.leader.election.enable"))


def _change(
    topic_id: str,
    pid: int,
    part: PartitionRegistration,
    *,
    leader: int,
    isr: Sequence[int],
    replicas: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
) -> PartitionChangeRecord | None:
    """A PartitionChangeRecord with only the fields that differ, or None when nothing does."""
    new_isr = tuple(isr)
    kwargs: dict[str, Any] = {}
    if new_isr != part.isr:
        kwargs["isr"] = new_isr
    if leader != part.leader:
        kwargs["leader"] = leader
    if replicas is not None and tuple(replicas) != part.replicas:
        kwargs["replicas"] = tuple(replicas)
    if adding is not None and tuple(adding) != part.adding_replicas:
        kwargs["adding_replicas"] = tuple(adding)
    if removing is not None and tuple(removing) != part.removing_replicas:
        kwargs["removing_replicas"] = tuple(removing)
    if not kwargs:
        return None
    return PartitionChangeRecord(partition_id=pid, topic_id=topic_id, **kwargs)


def _remove_from_isrs(image: MetadataImage, ctx: ControllerContext, broker_ids: set[int]) -> Records:
    """Take brokers out of every ISR and move their leaderships (fencing, controlled shutdown).

    An ISR never becomes empty: its last member stays, and the partition goes offline when that
    member cannot lead (KRaft keeps it so a clean election can follow when the broker returns).
    """
    excluded = frozenset(broker_ids)
    records: Records = []
    for topic in image.topics.by_id.values():
        unclean = None
        for pid, part in topic.partitions.items():
            if not (excluded & set(part.isr)) and part.leader not in excluded:
                continue
            new_isr = tuple(r for r in part.isr if r not in excluded) or part.isr[-1:]
            if part.leader in excluded or part.leader == NO_LEADER:
                if unclean is None:
                    unclean = _unclean_enabled(image, ctx, topic.name)
                leader, new_isr = elect_leader(image, part, unclean=unclean, excluded=excluded, isr=new_isr)
            else:
                leader = part.leader
            rec = _change(topic.topic_id, pid, part, leader=leader, isr=new_isr)
            if rec is not None:
                records.append(rec)
    return records


def _elect_offline_partitions(image: MetadataImage, ctx: ControllerContext, candidates: set[int]) -> Records:
    """Elect leaders for leaderless partitions that one of ``candidates`` (just unfenced) can lead."""
    records: Records = []
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if part.leader != NO_LEADER or not candidates & set(part.replicas):
                continue
            leader, isr = elect_leader(image, part, unclean=_unclean_enabled(image, ctx, topic.name))
            if leader != NO_LEADER:
                rec = _change(topic.topic_id, pid, part, leader=leader, isr=isr)
                if rec is not None:
                    records.append(rec)
    return records


def apply_records(image: MetadataImage, records: Records) -> MetadataImage:
    """The image ``records`` would produce (see `_apply`); used to chain requests in one group."""
    return _apply(image, records)


def _apply(image: MetadataImage, records: Records) -> MetadataImage:
    """The image the records would produce: lets one handler chain decisions (e.g. unfence, then
    elect) without touching state. Replay is the same code the quorum runs after commit."""
    from kraftlog.metadata_log._image import MetadataDelta

    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()


# ================================================================================ brokers


def register_broker(
    image: MetadataImage,
    req: controller_pb2.RegisterBrokerRequest,
    ctx: ControllerContext,
    heartbeats: BrokerHeartbeats,
) -> tuple[Records, controller_pb2.RegisterBrokerResponse]:
    """RegisterBroker: a new registration (fenced, with a new epoch) or an idempotent repeat.

    The same incarnation registering again gets its existing epoch back; another incarnation while
    the old session lives gets DUPLICATE_BROKER_REGISTRATION.
    """
    resp = controller_pb2.RegisterBrokerResponse
    if req.cluster_id != ctx.cluster_id:
        return [], resp(
            error=error_pb(
                kerr.InconsistentClusterIdError, f"broker cluster id {req.cluster_id!r} is not {ctx.cluster_id!r}"
            )
        )
    if req.broker_id < 0:
        return [], resp(error=error_pb(kerr.InvalidRequestError, "negative broker id"))
    existing = image.cluster.broker(req.broker_id)
    session_ms = ctx.cfg("broker.session.timeout.ms")
    if existing is not None:
        if existing.incarnation_id == req.incarnation_id:
            heartbeats.touch(req.broker_id, ctx.now_ms)
            return [], resp(error=error_pb(), broker_epoch=existing.broker_epoch)
        if not existing.fenced and heartbeats.is_alive(req.broker_id, ctx.now_ms, session_ms):
            return [], resp(
                error=error_pb(
                    kerr.DuplicateBrokerRegistrationError,
                    f"broker {req.broker_id} is registered by another incarnation whose session is alive",
                )
            )
    epoch = ctx.next_offset
    record = RegisterBrokerRecord(
        broker_id=req.broker_id,
        incarnation_id=req.incarnation_id,
        broker_epoch=epoch,
        endpoints=tuple(
            BrokerEndpoint(e.name, e.host, e.port, e.security_protocol or "PLAINTEXT") for e in req.listeners
        ),
        rack=req.rack or None,
        fenced=True,
        in_controlled_shutdown=False,
        log_dirs=tuple(req.log_dirs),
    )
    records: Records = [record]
    if existing is not None:
        # A new incarnation replaces the old registration (its session expired or it was fenced):
        # the old process is gone, so it must not keep leading or counting in ISRs while the new
        # one is fenced and catching up (what fencing it would have done; Kafka's
        # handleBrokerUncleanShutdown). The new epoch is still the RegisterBrokerRecord's offset.
        records += _remove_from_isrs(_apply(image, records), ctx, {req.broker_id})
    heartbeats.touch(req.broker_id, ctx.now_ms)
    return records, resp(error=error_pb(), broker_epoch=epoch)


def broker_heartbeat(
    image: MetadataImage,
    req: controller_pb2.BrokerHeartbeatRequest,
    ctx: ControllerContext,
    heartbeats: BrokerHeartbeats,
) -> tuple[Records, controller_pb2.BrokerHeartbeatResponse]:
    """BrokerHeartbeat: keep the session alive; unfence a caught-up broker; run controlled shutdown.

    A broker is caught up once it has applied the metadata log up to its own registration (its
    broker epoch is that record's offset). ``want_shutdown`` marks the broker in controlled shutdown,
    moves every leadership away and takes it out of ISRs (never emptying one). ``should_shutdown``
    is granted only once the image the heartbeat is evaluated against (the committed one) shows the
    broker leading nothing, so never in the response that proposes the moves: the new leaders get
    at least a heartbeat interval to learn of them (Kafka's CONTROLLED_SHUTDOWN, then SHUTDOWN_NOW).
    Granting it also fences the broker, as Kafka's SHUTDOWN_NOW does, so the next incarnation can
    register at once instead of waiting out the old session.
    """
    resp = controller_pb2.BrokerHeartbeatResponse
    reg = image.cluster.broker(req.broker_id)
    if reg is None:
        return [], resp(error=error_pb(kerr.BrokerIdNotRegisteredError, f"broker {req.broker_id} is not registered"))
    if reg.broker_epoch != req.broker_epoch:
        return [], resp(
            error=error_pb(kerr.StaleBrokerEpochError, f"broker epoch {req.broker_epoch} is not {reg.broker_epoch}")
        )
    heartbeats.touch(req.broker_id, ctx.now_ms)
    caught_up = req.current_metadata_offset >= reg.broker_epoch
    records: Records = []
    should_shutdown = False
    if req.want_shutdown:
        leads = bool(image.topics.partitions_led_by(req.broker_id))
        if not reg.fenced:
            if not reg.in_controlled_shutdown:
                records.append(
                    BrokerRegistrationChangeRecord(
                        broker_id=reg.broker_id, broker_epoch=reg.broker_epoch, in_controlled_shutdown=1
                    )
                )
            # Also on later heartbeats: a no-op once the moves are committed, a retry otherwise.
            records += _remove_from_isrs(_apply(image, records) if records else image, ctx, {reg.broker_id})
            if not leads:
                records.append(FenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
                records += _remove_from_isrs(_apply(image, records), ctx, {reg.broker_id})
        should_shutdown = not leads
    elif req.want_fence:
        if not reg.fenced:
            records.append(FenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
            records += _remove_from_isrs(_apply(image, records), ctx, {reg.broker_id})
    elif reg.fenced and caught_up and not reg.in_controlled_shutdown:
        # A registration in controlled shutdown never comes back (Kafka keeps it in
        # CONTROLLED_SHUTDOWN); the broker re-registers with a new incarnation instead.
        records.append(UnfenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
        records += _elect_offline_partitions(_apply(image, records), ctx, {reg.broker_id})
    after = _apply(image, records) if records else image
    now = after.cluster.broker(req.broker_id)
    assert now is not None
    # image.offset is committed (bare records do not advance it): a lower bound of the quorum's
    # committed offset when the answer is sent, which is all the broker's follower needs
    return records, resp(
        error=error_pb(),
        is_caught_up=caught_up,
        is_fenced=now.fenced,
        should_shutdown=should_shutdown,
        metadata_high_watermark=image.offset,
    )


def fence_expired_brokers(image: MetadataImage, ctx: ControllerContext, heartbeats: BrokerHeartbeats) -> Records:
    """Fence every unfenced broker silent for longer than ``broker.session.timeout.ms``: it leaves
    every ISR and loses its leaderships."""
    session_ms = ctx.cfg("broker.session.timeout.ms")
    live = [b for b, reg in image.cluster.brokers.items() if not reg.fenced]
    expired = heartbeats.expired(live, ctx.now_ms, session_ms)
    if not expired:
        return []
    records: Records = []
    for b in expired:
        reg = image.cluster.broker(b)
        assert reg is not None
        records.append(FenceBrokerRecord(broker_id=b, broker_epoch=reg.broker_epoch))
    records += _remove_from_isrs(_apply(image, records), ctx, set(expired))
    return records


# ================================================================================ topics


def validate_topic_name(name: str) -> str | None:
    """Kafka's topic-name rules; returns why ``name`` is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.fullmatch(name):  # not match(): "$" would accept a trailing newline
        return f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


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
            usable = placement.placement_brokers(working.cluster)
            if rf > len(usable):
                fail(
                    kerr.InvalidReplicationFactorError,
                    f"unable to replicate the partition {rf} time(s): the target replication factor of "
                    f"{rf} cannot be reached because only {len(usable)} broker(s) are registered and unfenced",
                )
                continue
            try:
                assignment = placement.assign_replicas(usable, num_partitions, rf, ctx.rng)
            except placement.PlacementError as err:
                results.append(Result(name=t.name, error=_err_from(err)))
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
                assignment = placement.expand_assignment(
                    existing, t.count, placement.placement_brokers(image.cluster), ctx.rng
                )
            except placement.PlacementError as err:
                results.append(Result(name=t.name, error=_err_from(err)))
                continue
        results.append(Result(name=t.name, error=error_pb()))
        if not req.validate_only:
            records += [_new_partition(image, topic.topic_id, pid, reps) for pid, reps in sorted(assignment.items())]
    return records, admin_pb2.CreatePartitionsResponse(results=results)


# ================================================================================ partitions


def alter_partition(
    image: MetadataImage, req: controller_pb2.AlterPartitionRequest, ctx: ControllerContext
) -> tuple[Records, controller_pb2.AlterPartitionResponse]:
    """AlterPartition (KIP-497): a partition leader proposes a new ISR.

    Refused, changing nothing, when the requester's broker epoch is stale (STALE_BROKER_EPOCH), the
    topic id is unknown (UNKNOWN_TOPIC_ID), the request carries epochs newer than this controller
    knows (NOT_CONTROLLER: this controller is likely deposed), its leader epoch is stale
    (FENCED_LEADER_EPOCH: a deposed leader), it is not the leader (NOT_LEADER_OR_FOLLOWER), its
    partition epoch is stale (INVALID_UPDATE_VERSION), the new ISR is not a duplicate-free set of
    replicas holding the leader (INVALID_REQUEST), or it names a broker that is unregistered, fenced
    or shutting down (INELIGIBLE_REPLICA). Checks run in Kafka's order, so a deposed leader learns
    that its epoch is stale. An accepted change completes a reassignment whose new replicas have
    all joined the ISR; when that moves leadership away from the requester, the records are still
    written and the requester gets NEW_LEADER_ELECTED (as Kafka answers).
    """
    R = controller_pb2.AlterPartitionResponse
    reg = image.cluster.broker(req.broker_id)
    if reg is None or reg.broker_epoch != req.broker_epoch:
        return [], R(
            error=error_pb(
                kerr.StaleBrokerEpochError, f"broker {req.broker_id} epoch {req.broker_epoch} is not current"
            )
        )
    records: Records = []
    topics_out = []
    working = image
    for t in req.topics:
        topic = working.topics.get_by_id(t.topic_id)
        parts_out = []
        for p in t.partitions:

            def result(
                err: type[kerr.KafkaError] | None = None,
                msg: str = "",
                part: PartitionRegistration | None = None,
                p: Any = p,
            ) -> Any:
                out = R.PartitionData(partition_index=p.partition_index, error=error_pb(err, msg))
                if part is not None:
                    out.leader_id = part.leader
                    out.leader_epoch = part.leader_epoch
                    out.isr.extend(part.isr)
                    out.partition_epoch = part.partition_epoch
                    out.leader_recovery_state = part.leader_recovery_state
                return out

            if topic is None:
                parts_out.append(result(kerr.UnknownTopicIdError, f"unknown topic id {t.topic_id}"))
                continue
            part = topic.partitions.get(p.partition_index)
            if part is None:
                parts_out.append(
                    result(
                        kerr.UnknownTopicOrPartitionError, f"topic {topic.name!r} has no partition {p.partition_index}"
                    )
                )
                continue
            if p.leader_epoch > part.leader_epoch or p.partition_epoch > part.partition_epoch:
                parts_out.append(
                    result(
                        kerr.NotControllerError,
                        f"epochs ({p.leader_epoch}, {p.partition_epoch}) are newer than this "
                        f"controller's ({part.leader_epoch}, {part.partition_epoch})",
                    )
                )
                continue
            if p.leader_epoch < part.leader_epoch:
                parts_out.append(
                    result(kerr.FencedLeaderEpochError, f"leader epoch {p.leader_epoch} is not {part.leader_epoch}")
                )
                continue
            if part.leader != req.broker_id:
                parts_out.append(
                    result(kerr.NotLeaderOrFollowerError, f"broker {req.broker_id} is not the leader ({part.leader})")
                )
                continue
            if p.partition_epoch < part.partition_epoch:
                parts_out.append(
                    result(
                        kerr.InvalidUpdateVersionError,
                        f"partition epoch {p.partition_epoch} is not {part.partition_epoch}",
                    )
                )
                continue
            new_isr = tuple(p.new_isr)
            bad = [b for b in new_isr if b not in part.replicas]
            if bad or len(set(new_isr)) != len(new_isr) or req.broker_id not in new_isr:
                parts_out.append(
                    result(kerr.InvalidRequestError, f"ISR {list(new_isr)} is not a set of replicas holding the leader")
                )
                continue
            ineligible = [b for b in new_isr if not _usable(working, b)]
            if ineligible:
                parts_out.append(
                    result(
                        kerr.IneligibleReplicaError, f"replicas {ineligible} are unregistered, fenced or shutting down"
                    )
                )
                continue
            rec = _change(t.topic_id, p.partition_index, part, leader=part.leader, isr=new_isr)
            if rec is not None:
                step: Records = [rec]
                after = _apply(working, step)
                done = complete_reassignments(after, ctx, only=[(t.topic_id, p.partition_index)])
                step += done
                working = _apply(after, done) if done else after
                records += step
            now = working.topics.partition(t.topic_id, p.partition_index)
            if now is not None and now.leader != req.broker_id:
                parts_out.append(
                    result(
                        kerr.NewLeaderElectedError,
                        f"completing the reassignment moved leadership to {now.leader}",
                        part=now,
                    )
                )
                continue
            parts_out.append(result(part=now))
        topics_out.append(R.TopicData(topic_id=t.topic_id, partitions=parts_out))
    return records, R(error=error_pb(), topics=topics_out)


def _targets(
    image: MetadataImage, topic_partitions: Sequence[admin_pb2.TopicPartitions]
) -> list[tuple[str, int, TopicImage | None]]:
    if not topic_partitions:
        return [
            (t.name, pid, t)
            for t in sorted(image.topics.by_id.values(), key=lambda t: t.name)
            for pid in sorted(t.partitions)
        ]
    out = []
    for tp in topic_partitions:
        topic = image.topics.get_by_name(tp.topic)
        if topic is None and not tp.partitions:
            out.append((tp.topic, -1, None))  # still answered: the whole topic is unknown
            continue
        pids = (list(tp.partitions) or sorted(topic.partitions)) if topic else list(tp.partitions)
        out += [(tp.topic, pid, topic) for pid in pids]
    return out


def elect_leaders(
    image: MetadataImage, req: admin_pb2.ElectLeadersRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.ElectLeadersResponse]:
    """ElectLeaders: preferred (type 0) or unclean (type 1) elections.

    With no partitions named, every partition is tried and, as in Kafka, only those where an
    election was needed are reported. A partition named twice is elected and reported once.
    """
    R = admin_pb2.ElectLeadersResponse
    if req.election_type not in (0, 1):
        return [], R(error=error_pb(kerr.InvalidRequestError, f"unknown election type {req.election_type}"))
    records: Records = []
    results = []
    every = not req.topic_partitions
    seen: set[tuple[str, int]] = set()
    for name, pid, topic in _targets(image, req.topic_partitions):
        if (name, pid) in seen:
            continue
        seen.add((name, pid))
        part = topic.partitions.get(pid) if topic else None
        if topic is None or part is None:
            results.append(
                R.PartitionResult(
                    topic=name,
                    partition=pid,
                    error=error_pb(kerr.UnknownTopicOrPartitionError, "unknown topic or partition"),
                )
            )
            continue
        if req.election_type == 0:
            preferred = part.replicas[0]
            if part.leader == preferred:
                err: tuple[type[kerr.KafkaError], str] | None = (
                    kerr.ElectionNotNeededError,
                    "the preferred replica already leads",
                )
            elif preferred in part.isr and _usable(image, preferred):
                rec = _change(topic.topic_id, pid, part, leader=preferred, isr=part.isr)
                if rec:
                    records.append(rec)
                err = None
            else:
                err = (
                    kerr.PreferredLeaderNotAvailableError,
                    f"preferred replica {preferred} is not in the ISR or not live",
                )
        else:
            if part.leader != NO_LEADER and _usable(image, part.leader):
                err = (kerr.ElectionNotNeededError, "the partition has a live leader")
            else:
                leader, isr = elect_leader(image, part, unclean=True)
                if leader == NO_LEADER:
                    err = (kerr.EligibleLeadersNotAvailableError, "no live replica")
                else:
                    rec = _change(topic.topic_id, pid, part, leader=leader, isr=isr)
                    if rec:
                        records.append(rec)
                    err = None
        if every and err is not None and err[0] is kerr.ElectionNotNeededError:
            continue
        results.append(R.PartitionResult(topic=name, partition=pid, error=error_pb(*err) if err else error_pb()))
    return records, R(error=error_pb(), results=results)


def preferred_leader_rebalance(image: MetadataImage, ctx: ControllerContext) -> Records:
    """``auto.leader.rebalance.enable``: move leadership back to preferred replicas on brokers whose
    share of non-preferred leaders exceeds ``leader.imbalance.per.broker.percentage``."""
    threshold = ctx.cfg("leader.imbalance.per.broker.percentage") / 100.0
    preferred_count: dict[int, int] = {}
    not_led: dict[int, list[tuple[TopicImage, int, PartitionRegistration]]] = {}
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            pref = part.replicas[0]
            preferred_count[pref] = preferred_count.get(pref, 0) + 1
            if part.leader != pref:
                not_led.setdefault(pref, []).append((topic, pid, part))
    records: Records = []
    for broker, parts in sorted(not_led.items()):
        if not _usable(image, broker) or len(parts) / preferred_count[broker] <= threshold:
            continue
        for topic, pid, part in parts:
            if broker in part.isr and not part.is_reassigning:
                rec = _change(topic.topic_id, pid, part, leader=broker, isr=part.isr)
                if rec:
                    records.append(rec)
    return records


# ================================================================================ reassignment


def alter_partition_reassignments(
    image: MetadataImage, req: admin_pb2.AlterPartitionReassignmentsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.AlterPartitionReassignmentsResponse]:
    """Start or cancel reassignments (KIP-455): add the target replicas, wait for them to join the
    ISR (`complete_reassignments`), then drop the others, moving leadership if needed."""
    R = admin_pb2.AlterPartitionReassignmentsResponse
    records: Records = []
    results = []
    working = image
    for t in req.topics:
        topic = working.topics.get_by_name(t.name)
        for p in t.partitions:

            def res(err: type[kerr.KafkaError] | None = None, msg: str = "", t: Any = t, p: Any = p) -> None:
                results.append(R.PartitionResult(topic=t.name, partition=p.partition_index, error=error_pb(err, msg)))

            part = topic.partitions.get(p.partition_index) if topic else None
            if topic is None or part is None:
                res(kerr.UnknownTopicOrPartitionError, "unknown topic or partition")
                continue
            if p.cancel:
                if not part.is_reassigning:
                    res(kerr.NoReassignmentInProgressError, "no reassignment in progress")
                    continue
                # Kafka's PartitionReassignmentRevert: drop the adding replicas, keep the rest.
                original = [r for r in part.replicas if r not in part.adding_replicas]
                isr = tuple(r for r in part.isr if r in original)
                unclean = _unclean_enabled(working, ctx, topic.name)
                if not isr and not unclean:
                    res(
                        kerr.InvalidReplicaAssignmentError,
                        "reverting the reassignment would require an unclean leader election: "
                        "no original replica is in the ISR",
                    )
                    continue
                if part.leader in isr:
                    leader = part.leader
                else:
                    reverted = PartitionRegistration(replicas=tuple(original), isr=isr, leader=NO_LEADER)
                    leader, isr = elect_leader(working, reverted, unclean=unclean)
                    if not isr:
                        res(
                            kerr.InvalidReplicaAssignmentError,
                            "reverting the reassignment would leave no live original replica",
                        )
                        continue
                rec = _change(
                    topic.topic_id,
                    p.partition_index,
                    part,
                    leader=leader,
                    isr=isr,
                    replicas=original,
                    adding=(),
                    removing=(),
                )
                step = [rec] if rec else []
            else:
                target = list(p.replicas)
                problem = None
                if not target:
                    problem = "empty target replica list"
                elif len(set(target)) != len(target):
                    problem = f"target {target} lists a broker twice"
                elif any(working.cluster.broker(b) is None for b in target):
                    problem = f"target {target} names unregistered brokers"
                if problem:
                    res(kerr.InvalidReplicaAssignmentError, problem)
                    continue
                # As Kafka: the current replicas, including those of a reassignment in progress,
                # are the starting point, so every replica in the ISR stays a replica until the
                # new reassignment completes. Replicas a previous reassignment was still adding
                # stay "adding" if the new target keeps them: they must join the ISR first.
                current = list(part.replicas)
                adding = [b for b in target if b not in current or b in part.adding_replicas]
                removing = [b for b in current if b not in target]
                merged = target + removing
                rec = _change(
                    topic.topic_id,
                    p.partition_index,
                    part,
                    leader=part.leader,
                    isr=part.isr,
                    replicas=merged,
                    adding=adding,
                    removing=removing,
                )
                step = [rec] if rec else []
                after = _apply(working, step) if step else working
                step += complete_reassignments(after, ctx, only=[(topic.topic_id, p.partition_index)])
            if step:
                records += step
                working = _apply(working, step)
            res()
    return records, R(error=error_pb(), results=results)


def complete_reassignments(
    image: MetadataImage, ctx: ControllerContext, only: Iterable[tuple[str, int]] | None = None
) -> Records:
    """Finish reassignments whose adding replicas are all in the ISR (and that keep at least one
    ISR member): the replica set becomes the target, removed replicas leave the ISR, and
    leadership moves if the leader was removed."""
    records: Records = []
    if only is None:
        keys = [(t.topic_id, pid) for t in image.topics.by_id.values() for pid in t.partitions]
    else:
        keys = list(only)
    for topic_id, pid in keys:
        part = image.topics.partition(topic_id, pid)
        if part is None or not part.is_reassigning:
            continue
        if not all(r in part.isr for r in part.adding_replicas):
            continue
        target = [r for r in part.replicas if r not in part.removing_replicas]
        isr = tuple(r for r in part.isr if r in target)
        if not isr:
            # Kafka waits until some replica that stays is in sync: completing now would leave
            # the partition with an ISR of replicas that never caught up.
            continue
        leader = part.leader
        if leader not in target:
            topic = image.topics.get_by_id(topic_id)
            assert topic is not None
            shrunk = PartitionRegistration(replicas=tuple(target), isr=isr, leader=NO_LEADER)
            leader, isr = elect_leader(image, shrunk, unclean=_unclean_enabled(image, ctx, topic.name))
        rec = _change(topic_id, pid, part, leader=leader, isr=isr, replicas=target, adding=(), removing=())
        if rec:
            records.append(rec)
    return records


def list_partition_reassignments(
    image: MetadataImage, req: admin_pb2.ListPartitionReassignmentsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.ListPartitionReassignmentsResponse]:
    R = admin_pb2.ListPartitionReassignmentsResponse
    out = []
    for name, pid, topic in _targets(image, req.topics):
        part = topic.partitions.get(pid) if topic else None
        if part is not None and part.is_reassigning:
            out.append(
                R.Ongoing(
                    topic=name,
                    partition=pid,
                    replicas=list(part.replicas),
                    adding_replicas=list(part.adding_replicas),
                    removing_replicas=list(part.removing_replicas),
                )
            )
    return [], R(error=error_pb(), reassignments=out)


# ================================================================================ producer ids


def allocate_producer_ids(
    image: MetadataImage, req: controller_pb2.AllocateProducerIdsRequest, ctx: ControllerContext
) -> tuple[Records, controller_pb2.AllocateProducerIdsResponse]:
    R = controller_pb2.AllocateProducerIdsResponse
    reg = image.cluster.broker(req.broker_id)
    if reg is None or reg.broker_epoch != req.broker_epoch:
        return [], R(error=error_pb(kerr.StaleBrokerEpochError, f"broker {req.broker_id} epoch is not current"))
    start = image.producer_ids.next_producer_id
    rec = ProducerIdsRecord(
        broker_id=req.broker_id, broker_epoch=req.broker_epoch, next_producer_id=start + PRODUCER_ID_BLOCK_SIZE
    )
    return [rec], R(error=error_pb(), producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE)


# ================================================================================ configs


def _resource_error(image: MetadataImage, rtype: int, name: str) -> errors_pb2.Error | None:
    if rtype == ConfigResourceType.TOPIC:
        if image.topics.get_by_name(name) is None:
            return error_pb(kerr.UnknownTopicOrPartitionError, f"topic {name!r} does not exist")
        return None
    if rtype == ConfigResourceType.BROKER:
        if name and (not name.isdigit() or image.cluster.broker(int(name)) is None):
            return error_pb(kerr.InvalidRequestError, f"broker {name!r} is not registered")
        return None
    return error_pb(kerr.InvalidRequestError, f"unsupported config resource type {rtype}")


def describe_configs(
    image: MetadataImage, req: admin_pb2.DescribeConfigsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.DescribeConfigsResponse]:
    """DescribeConfigs: a topic's effective configs with their source (dynamic topic config, dynamic
    cluster default, static broker config, or Kafka's default)."""
    from kraftlog.common.config import NODE_CONFIG_DEFS, TOPIC_CONFIG_DEFS, TOPIC_SYNONYMS

    R = admin_pb2.DescribeConfigsResponse
    results = []
    for res in req.resources:
        rtype, name = res.resource.resource_type, res.resource.resource_name
        err = _resource_error(image, rtype, name)
        if err is not None:
            results.append(R.Result(resource=res.resource, error=err))
            continue
        wanted = set(res.config_names)
        entries = []
        if rtype == ConfigResourceType.TOPIC:
            dynamic = image.configs.topic_config(name)
            cluster_dynamic = image.configs.broker_config("")
            defaults = ctx.config.topic_defaults()
            for key in sorted(TOPIC_CONFIG_DEFS):
                if wanted and key not in wanted:
                    continue
                if key in dynamic:
                    value, source, is_default = dynamic[key], "DYNAMIC_TOPIC_CONFIG", False
                else:
                    synonym = next((s for s in TOPIC_SYNONYMS.get(key, ()) if s in cluster_dynamic), None)
                    if synonym is not None:
                        value = _topic_value(synonym, cluster_dynamic[synonym])
                        source, is_default = "DYNAMIC_DEFAULT_BROKER_CONFIG", False
                    elif any(s in ctx.config.originals for s in TOPIC_SYNONYMS.get(key, ())):
                        value, source, is_default = _fmt(defaults.get(key)), "STATIC_BROKER_CONFIG", False
                    else:
                        value, source, is_default = _fmt(defaults.get(key)), "DEFAULT_CONFIG", True
                entries.append(
                    R.Entry(
                        name=key,
                        value=value or "",
                        has_value=value is not None,
                        read_only=False,
                        is_default=is_default,
                        source=source,
                    )
                )
        else:
            dynamic = image.configs.config(rtype, name)
            for key in sorted(set(dynamic) | ({k for k in NODE_CONFIG_DEFS} if not name else set())):
                if wanted and key not in wanted:
                    continue
                sensitive = "password" in key
                if key in dynamic:
                    value, source, is_default = (
                        dynamic[key],
                        ("DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                        False,
                    )
                else:
                    value = _fmt(ctx.config.get(key))
                    is_default = key not in ctx.config.originals
                    source = "DEFAULT_CONFIG" if is_default else "STATIC_BROKER_CONFIG"
                entries.append(
                    R.Entry(
                        name=key,
                        value="" if sensitive or value is None else value,
                        has_value=not sensitive and value is not None,
                        read_only=key not in dynamic,
                        is_default=is_default,
                        source=source,
                        is_sensitive=sensitive,
                    )
                )
        results.append(R.Result(resource=res.resource, error=error_pb(), configs=entries))
    return [], R(results=results)


def _topic_value(broker_key: str, raw: str) -> str:
    """A broker-level synonym's value in its topic key's unit (``log.retention.hours`` 1 ->
    ``retention.ms`` 3600000), as `NodeConfig.topic_defaults` converts static values."""
    from kraftlog.common.config import LONG_MAX, NODE_CONFIG_DEFS

    spec = NODE_CONFIG_DEFS[broker_key]
    try:
        value = spec.parse(raw)
    except (ConfigError, ValueError):
        return raw
    if spec.topic_unit_ms != 1 and isinstance(value, int) and not isinstance(value, bool):
        value = -1 if value < 0 else min(value * spec.topic_unit_ms, LONG_MAX)
    return _fmt(value) or ""


def _fmt(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


def incremental_alter_configs(
    image: MetadataImage, req: admin_pb2.IncrementalAlterConfigsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.IncrementalAlterConfigsResponse]:
    """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT per key, validated before any
    record is written; one ConfigRecord per changed key.

    As Kafka: APPEND / SUBTRACT apply only to LIST keys and start from the key's default when it
    is not set (APPEND compact to an unset cleanup.policy gives "delete,compact"); a key named
    twice in one resource, or a resource named twice, is INVALID_REQUEST. A SUBTRACT that would
    leave a list empty is INVALID_CONFIG (an empty cleanup.policy is no policy the log accepts).
    """
    from kraftlog.common.config import NODE_CONFIG_DEFS, TOPIC_CONFIG_DEFS, TOPIC_SYNONYMS, ConfigType

    R = admin_pb2.IncrementalAlterConfigsResponse
    dynamic_broker_keys = {s for syns in TOPIC_SYNONYMS.values() for s in syns}
    records: Records = []
    results = []
    resources = [(r.resource.resource_type, r.resource.resource_name) for r in req.resources]
    for res in req.resources:
        rtype, name = res.resource.resource_type, res.resource.resource_name
        if resources.count((rtype, name)) > 1:
            results.append(
                R.Result(
                    resource=res.resource,
                    error=error_pb(
                        kerr.InvalidRequestError, f"resource {name!r} appears more than once in the request"
                    ),
                )
            )
            continue
        err = _resource_error(image, rtype, name)
        if err is not None:
            results.append(R.Result(resource=res.resource, error=err))
            continue
        keys = [op.name for op in res.configs]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            results.append(
                R.Result(
                    resource=res.resource,
                    error=error_pb(kerr.InvalidRequestError, f"config(s) {repeated} appear more than once"),
                )
            )
            continue
        defs = TOPIC_CONFIG_DEFS if rtype == ConfigResourceType.TOPIC else NODE_CONFIG_DEFS
        current = dict(image.configs.config(rtype, name))
        updated = dict(current)
        problem = None
        for op in res.configs:
            if rtype == ConfigResourceType.BROKER and op.name not in dynamic_broker_keys:
                problem = (
                    f"config {op.name!r} cannot be updated dynamically"
                    if op.name in NODE_CONFIG_DEFS
                    else f"unknown broker config {op.name!r}"
                )
                break
            if op.op == 0:
                updated[op.name] = op.value
            elif op.op == 1:
                updated.pop(op.name, None)
            elif op.op in (2, 3):
                spec = defs.get(op.name)
                if spec is None:
                    problem = f"unknown config {op.name!r}"
                    break
                if spec.type is not ConfigType.LIST:
                    verb = "APPEND to" if op.op == 2 else "SUBTRACT from"
                    problem = f"cannot {verb} {op.name!r}: its type is not LIST"
                    break
                base = updated.get(op.name)
                if base is None:
                    base = _fmt(spec.default) or ""
                items = [i.strip() for i in base.split(",") if i.strip()]
                values = [v.strip() for v in op.value.split(",") if v.strip()]
                if op.op == 2:
                    items += [v for v in values if v not in items]
                else:
                    items = [i for i in items if i not in values]
                if not items:
                    problem = f"{op.name!r} cannot become an empty list"
                    break
                updated[op.name] = ",".join(items)
            else:
                problem = f"unknown config operation {op.op}"
                break
        if problem is None and rtype == ConfigResourceType.TOPIC:
            try:
                _validate_topic_configs(updated)
            except ConfigError as exc:
                problem = str(exc)
        elif problem is None:
            for k, v in updated.items():
                try:
                    NODE_CONFIG_DEFS[k].parse(v)
                except (ConfigError, ValueError) as exc:
                    problem = f"invalid value {v!r} for {k!r}: {exc}"
                    break
        if problem is not None:
            results.append(R.Result(resource=res.resource, error=error_pb(kerr.InvalidConfigError, problem)))
            continue
        results.append(R.Result(resource=res.resource, error=error_pb()))
        if req.validate_only:
            continue
        for key in sorted(set(current) | set(updated)):
            if current.get(key) != updated.get(key):
                records.append(ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=updated.get(key)))
    return records, R(results=results)


# ================================================================================ describe


def describe_cluster(
    image: MetadataImage, ctx: ControllerContext, controller_id: int, listener: str | None = None
) -> admin_pb2.DescribeClusterResponse:
    R = admin_pb2.DescribeClusterResponse
    brokers = []
    for bid in image.cluster.broker_ids():
        reg = image.cluster.broker(bid)
        assert reg is not None
        ep = _endpoint(reg, listener)
        brokers.append(
            R.Broker(
                broker_id=bid,
                host=ep.host if ep else "",
                port=ep.port if ep else 0,
                rack=reg.rack or "",
                fenced=reg.fenced,
                in_controlled_shutdown=reg.in_controlled_shutdown,
                broker_epoch=reg.broker_epoch,
            )
        )
    return R(error=error_pb(), cluster_id=ctx.cluster_id, controller_id=controller_id, brokers=brokers)


def _endpoint(reg: BrokerRegistration, listener: str | None) -> BrokerEndpoint | None:
    if listener:
        for ep in reg.endpoints:
            if ep.name == listener:
                return ep
    return reg.endpoints[0] if reg.endpoints else None


def describe_topics(image: MetadataImage, req: admin_pb2.DescribeTopicsRequest) -> admin_pb2.DescribeTopicsResponse:
    R = admin_pb2.DescribeTopicsResponse
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
