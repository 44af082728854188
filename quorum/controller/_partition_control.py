"""Partition state: ISR changes from leaders (AlterPartition), leader elections, reassignments and
producer id blocks (Kafka's ReplicationControlManager, partition half, and ProducerIdControlManager).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import NO_LEADER, NO_LEADER_CHANGE, ProducerIdsRecord
from kraftlog.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from kraftlog.proto import admin_pb2, controller_pb2
from kraftlog.quorum.controller._controller_base import (
    PRODUCER_ID_BLOCK_SIZE,
    ControllerContext,
    Records,
    _apply,
    _change,
    _elr_change,
    _unclean_enabled,
    _usable,
    elect_leader,
    elr_enabled,
    error_pb,
)


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
            if elr_enabled(working) and topic is not None:
                rec = _elr_change(working, ctx, topic, p.partition_index, part, target_isr=new_isr, reelect=False)
            else:
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
    out: list[tuple[str, int, TopicImage | None]] = []
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
                if elr_enabled(image) and not part.isr:  # ISR empty: an ELR member leads cleanly first
                    clean = _elr_change(image, ctx, topic, pid, part, target_isr=part.isr, reelect=True)
                    if clean is not None and clean.leader not in (NO_LEADER, NO_LEADER_CHANGE):
                        leader = clean.leader
                        isr = clean.isr if clean.isr is not None else part.isr
                if leader == NO_LEADER:
                    err = (kerr.EligibleLeadersNotAvailableError, "no live replica")
                else:
                    unclean_pick = leader not in part.isr and leader not in part.elr
                    rec = _change(
                        topic.topic_id,
                        pid,
                        part,
                        leader=leader,
                        isr=isr,
                        elr=() if unclean_pick else None,
                        last_known_elr=() if unclean_pick else None,
                    )
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
                step: Records = [rec] if rec else []
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
