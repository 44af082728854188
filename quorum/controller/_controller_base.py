"""What every controller handler shares: the context (clock, randomness, config), error helpers, leader
election, partition changes and replay-validation of proposed records (`apply_records`).

Handlers are pure: `(image, request, context) -> (records, response)`; see `quorum.controller`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import ELR_FEATURE, NO_LEADER, MetadataRecord, PartitionChangeRecord
from kraftlog.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from kraftlog.proto import errors_pb2
from kraftlog.quorum.controller._elr import decide

PRODUCER_ID_BLOCK_SIZE = 1000
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


class PartitionChangeQuota(Protocol):
    """The controller mutation quota (KIP-599) of the client whose request a handler decides:
    `apply` takes the partitions a topic creation, deletion or growth changes, once the change
    is valid (Kafka's ``ControllerRequestContext.applyPartitionChangeQuota``), and raises
    `ThrottlingQuotaExceededError` instead when the client's bucket is already below zero and the
    request is strict; `throttle_time_ms` is what the answer tells the client afterwards."""

    def apply(self, partitions: int) -> None: ...

    def throttle_time_ms(self) -> int: ...


class MutationQuotas(Protocol):
    """Where the active controller gets each request's `PartitionChangeQuota` (the node wires in the
    broker package's quota manager, over the controller's image): ``strict`` is False for a
    forwarded request of a version KIP-599 only throttles."""

    def for_request(self, principal: str, client_id: str, *, strict: bool) -> PartitionChangeQuota: ...


class _NoQuota:
    def apply(self, partitions: int) -> None:
        return None

    def throttle_time_ms(self) -> int:
        return 0


#: the quota of requests nobody limits (the node's own decisions, handlers in unit tests)
NO_PARTITION_CHANGE_QUOTA: PartitionChangeQuota = _NoQuota()


@dataclass
class ControllerContext:
    """What a handler may know beyond the image: config, time and randomness are parameters, and
    the quota of the request's client (the one side effect a handler has, as in Kafka)."""

    cluster_id: str
    config: Any  # kraftlog.common.config.NodeConfig
    now_ms: int
    rng: random.Random
    next_offset: int = 0  # the offset the first proposed record will get (KRaft's broker epoch)
    partition_change_quota: PartitionChangeQuota = NO_PARTITION_CHANGE_QUOTA
    #: the quorum's kraft.version (0 static, 1 dynamic): the Raft layer's, not the image's (issue 26)
    kraft_version: int = 0
    #: why the quorum cannot move to kraft.version 1 now (a voter has not reported its directory
    #: id, ...), None when it can; the default is a context without a Raft quorum behind it
    kraft_upgrade_problem: str | None = "this controller has no Raft quorum to upgrade"

    def cfg(self, key: str) -> Any:
        return self.config[key]

    def quota_refusal(self, partitions: int) -> errors_pb2.Error | None:
        """Apply the request's quota to a valid change of ``partitions``; the THROTTLING_QUOTA_EXCEEDED
        error to answer for it instead, or None when it may go ahead."""
        try:
            self.partition_change_quota.apply(partitions)
        except kerr.ThrottlingQuotaExceededError as err:
            return error_pb(err)
        return None


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


def elr_enabled(image: MetadataImage) -> bool:
    """``eligible.leader.replicas.version`` >= 1: the controller keeps ELRs (KIP-966)."""
    return image.features.level(ELR_FEATURE) >= 1


def _min_isr(image: MetadataImage, ctx: ControllerContext, topic_name: str) -> int:
    value = image.configs.topic_config(topic_name).get("min.insync.replicas")
    return int(value) if value is not None else int(ctx.cfg("min.insync.replicas"))


def _elr_change(
    image: MetadataImage,
    ctx: ControllerContext,
    topic: TopicImage,
    pid: int,
    part: PartitionRegistration,
    *,
    target_isr: Sequence[int],
    reelect: bool,
    excluded: frozenset[int] = frozenset(),
    unclean_shutdown: frozenset[int] = frozenset(),
) -> PartitionChangeRecord | None:
    """The change of one partition to ``target_isr`` with ELR on (`kraftlog.quorum.controller._elr`)."""
    d = decide(
        part,
        target_isr=target_isr,
        min_isr=_min_isr(image, ctx, topic.name),
        usable=lambda r: _usable(image, r, excluded),
        unclean_allowed=reelect and _unclean_enabled(image, ctx, topic.name),
        reelect=reelect,
        unclean_shutdown=unclean_shutdown,
    )
    return _change(topic.topic_id, pid, part, leader=d.leader, isr=d.isr, elr=d.elr, last_known_elr=d.last_known_elr)


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
    elr: Sequence[int] | None = None,
    last_known_elr: Sequence[int] | None = None,
) -> PartitionChangeRecord | None:
    """A PartitionChangeRecord with only the fields that differ, or None when nothing does.

    Any change that leaves an ELR member in the ISR takes it out of the ELR (the two are disjoint),
    so callers that know nothing of ELR stay correct, and a new replica set drops the replicas it
    no longer has from both lists; an unclean election's caller passes ``elr=()``."""
    new_isr = tuple(isr)
    if elr is None and part.elr and set(part.elr) & set(new_isr):
        elr = tuple(r for r in part.elr if r not in new_isr)
    if replicas is not None:  # a replica that leaves the partition leaves its ELR and last known ELR
        kept = set(replicas)
        base_elr = part.elr if elr is None else tuple(elr)
        base_known = part.last_known_elr if last_known_elr is None else tuple(last_known_elr)
        if not set(base_elr) <= kept:
            elr = tuple(r for r in base_elr if r in kept)
        if not set(base_known) <= kept:
            last_known_elr = tuple(r for r in base_known if r in kept)
    kwargs: dict[str, Any] = {}
    if elr is not None and tuple(elr) != part.elr:
        kwargs["eligible_leader_replicas"] = tuple(elr)
    if last_known_elr is not None and tuple(last_known_elr) != part.last_known_elr:
        kwargs["last_known_elr"] = tuple(last_known_elr)
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


def _remove_from_isrs(
    image: MetadataImage,
    ctx: ControllerContext,
    broker_ids: set[int],
    *,
    unclean_shutdown: bool = False,
    only: frozenset[tuple[str, int]] | None = None,
) -> Records:
    """Take brokers out of every ISR and move their leaderships (fencing, controlled shutdown).

    Without ELR an ISR never becomes empty: its last member stays, and the partition goes offline
    when that member cannot lead (KRaft keeps it so a clean election can follow when the broker
    returns). With ELR on (KIP-966) the ISR may empty, its members waiting in the ELR;
    ``unclean_shutdown`` (the brokers re-register after an unclean stop) also takes them out of
    every ELR (Kafka's handleBrokerUncleanShutdown). ``only``: just these ``(topic id,
    partition)`` (the replicas of a failed log dir), else every partition.
    """
    excluded = frozenset(broker_ids)
    dropped = excluded if unclean_shutdown else frozenset()
    records: Records = []
    with_elr = elr_enabled(image)
    for topic in image.topics.by_id.values():
        unclean = None
        for pid, part in topic.partitions.items():
            if only is not None and (topic.topic_id, pid) not in only:
                continue
            in_elr = with_elr and bool(dropped & set(part.elr))
            if not (excluded & set(part.isr)) and part.leader not in excluded and not in_elr:
                continue
            if with_elr:  # the ISR may empty: its members wait in the ELR (KIP-966)
                target = tuple(r for r in part.isr if r not in excluded)
                reelect = part.leader in excluded or part.leader == NO_LEADER
                rec = _elr_change(
                    image,
                    ctx,
                    topic,
                    pid,
                    part,
                    target_isr=target,
                    reelect=reelect,
                    excluded=excluded,
                    unclean_shutdown=dropped,
                )
                if rec is not None:
                    records.append(rec)
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
    with_elr = elr_enabled(image)
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if part.leader != NO_LEADER or not candidates & set(part.replicas):
                continue
            if with_elr:
                rec = _elr_change(image, ctx, topic, pid, part, target_isr=part.isr, reelect=True)
                if rec is not None and rec.leader != NO_LEADER:
                    records.append(rec)
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
    from kraftlog.metadata_log.image import MetadataDelta

    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()
