"""A KIP-848 consumer group (``group.protocol=consumer``): Kafka 4's group protocol, where the
coordinator assigns and every member converges on its own, with no group-wide barrier.

State changes only through `ConsumerGroup.replay` of the group's records (the same path that loads
the group from ``__consumer_offsets``). Handlers (`heartbeat`, `leave`, `expire`) read the state and
return ``(records, answer)``; the shard replays the records at once (so the next request sees them)
and answers once they are committed. Ordering inside one heartbeat, as in Kafka:

1. the member's subscription is updated; a changed subscription, or a change in the partition
   counts of the subscribed topics, bumps the group epoch;
2. when the group epoch is past the target assignment's, the assignor computes a new target;
3. the member reconciles towards its target (`reconcile`): it revokes first, then gets partitions
   as other members release them, and only then takes the target epoch.

Timers (session, rebalance) are deadlines kept beside the state, not in it: a loaded group starts
them afresh, as Kafka's does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

from kraftlog.broker.groups._group_consumer_assignors import MemberSpec, PartitionAssignorError, assign
from kraftlog.broker.groups._group_consumer_regex import GroupRegexes
from kraftlog.broker.groups._group_consumer_types import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupConfig,
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberState,
    check_epoch,
    reconcile,
    subscription_metadata,
)
from kraftlog.broker.groups._group_records_consumer import (
    Assignment,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerKey,
    ConsumerValue,
    TopicMetadata,
    assignment_of,
)
from kraftlog.common import errors as kerr

__all__ = ["ConsumerGroup", "TopicLookup", "TopicNames", "Record", "no_topic_names"]

Record = tuple[ConsumerKey, ConsumerValue | None]
TopicLookup = Callable[[str], "tuple[str, int] | None"]  # topic name -> (topic id, partition count)
TopicNames = Callable[[], Iterable[str]]  # every topic's name, for subscriptions by regex


def no_topic_names() -> Iterable[str]:
    return ()


class ConsumerGroup:
    """One consumer group's state (see the module docstring)."""

    protocol_type = "consumer"

    def __init__(self, group_id: str, config: ConsumerGroupConfig, rng: random.Random) -> None:
        self.group_id = group_id
        self.config = config
        self._rng = rng
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}  # by topic name
        self.partition_epochs: dict[tuple[str, int], int] = {}  # owned partitions -> owner's epoch
        self.dead = False
        self.state_timestamp_ms = -1
        # timers, beside the state: member id -> deadline; member id -> (deadline, member epoch)
        self.session_deadlines: dict[str, int] = {}
        self.rebalance_deadlines: dict[str, tuple[int, int]] = {}
        # also beside the state: the members' regexes as last resolved, and the refresh scheduled
        # (Kafka keeps the resolutions in records; a loaded group resolves them at its first heartbeat)
        self.regexes = GroupRegexes(config.regex_refresh_min_interval_ms, config.regex_refresh_interval_ms)

    # ===================================================================== reading

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def preferred_assignor(self, members: dict[str, ConsumerMember]) -> str:
        """The assignor most members ask for (ties: the earlier in ``group.consumer.assignors``),
        else the first configured."""
        counts: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        order = {name: i for i, name in enumerate(self.config.assignors)}
        return min(counts, key=lambda name: (-counts[name], order.get(name, len(order)), name))

    def topics_of(self, m: ConsumerMember) -> set[str]:
        """The topics ``m`` subscribes to: its names and what its regex resolved to (nothing
        while it is not resolved yet)."""
        out = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            out |= self.regexes.topics(m.subscribed_topic_regex)
        return out

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in self.topics_of(m)}

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in self.topics_of(m) for m in self.members.values())

    # ====================================================================== replay

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """One record of this group, in log order; raises on a record type it does not know."""
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                self.dead = True
            else:
                assert isinstance(value, ConsumerGroupMetadataValue)
                self.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            topics = value.topics if isinstance(value, ConsumerGroupPartitionMetadataValue) else ()
            self.subscription_metadata = {t.name: t for t in topics}
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                self.target[key.member_id] = value.partitions
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            self._replay_member_metadata(key.member_id, value)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            self._replay_current_assignment(key.member_id, value)
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"not a consumer group record: {key!r}")

    def _replay_member_metadata(self, member_id: str, value: ConsumerValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_owned(old, None)
                del self.members[member_id]
                if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                    del self.static_members[old.instance_id]
            self.session_deadlines.pop(member_id, None)
            self.rebalance_deadlines.pop(member_id, None)
            return
        assert isinstance(value, ConsumerGroupMemberMetadataValue)
        member = replace(
            old or ConsumerMember(member_id),
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )
        self.members[member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def _replay_current_assignment(self, member_id: str, value: ConsumerValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_owned(old, None)
                self.members[member_id] = replace(
                    old, member_epoch=-1, previous_member_epoch=-1, assigned=(), pending_revocation=()
                )
            return
        assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
        member = replace(
            old or ConsumerMember(member_id),
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState(value.state) if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN,
            assigned=value.assigned,
            pending_revocation=value.pending_revocation,
        )
        if old is not None:
            self._set_owned(old, None)
        self._set_owned(member, member)
        self.members[member_id] = member

    def _set_owned(self, member: ConsumerMember, now: ConsumerMember | None) -> None:
        """Drop (``now`` None) or record the partitions ``member`` owns, at its epoch."""
        for t, ps in (*member.assigned, *member.pending_revocation):
            for p in ps:
                if now is None:
                    if self.partition_epochs.get((t, p)) == member.member_epoch:
                        del self.partition_epochs[(t, p)]
                else:
                    self.partition_epochs[(t, p)] = member.member_epoch

    # ================================================================ the handlers

    def heartbeat(
        self, req: HeartbeatRequest, now_ms: int, lookup: TopicLookup, topic_names: TopicNames = no_topic_names
    ) -> tuple[list[Record], HeartbeatResponse]:
        """ConsumerGroupHeartbeat of a member that is in (or joins) this group; raises the Kafka
        error to answer with. The request was validated already (`validate_heartbeat`).

        Members' regexes are resolved against ``topic_names`` by a refresh the heartbeat may
        schedule (`GroupRegexes`: a regex new to the group is not resolved in the heartbeat that
        brings it, as in Kafka); `refresh_regexes` carries it out and bumps the group epoch when
        their topics changed. A deleted topic leaves the subscription metadata at once."""
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        records: list[Record] = []
        joining = req.member_epoch == 0
        member_id = req.member_id or str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        member, replaced = self._member_for(req, member_id, joining, records)
        previous = self.members.get(member_id) or (self.members.get(replaced) if replaced else None)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            # an empty regex clears it
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None)
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=req.client_id,
            client_host=req.client_host,
        )
        bump = self.group_epoch == 0  # a new group moves off epoch 0 (a regex-only member's, too)
        if updated != member or member_id not in self.members:
            records.append((ConsumerGroupMemberMetadataKey(self.group_id, member_id), _metadata_value(updated)))
            bump = (
                bump
                or updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.server_assignor != member.server_assignor
            )
        members = {k: v for k, v in self.members.items() if k != replaced}
        members[member_id] = updated
        current = dict(self.target)
        if replaced is not None:
            current[member_id] = current.pop(replaced, ())
        if self.regexes.from_log:
            self.regexes.from_log = False
            loaded = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
            self.regexes.resolve_now(loaded, topic_names, req.describable, now_ms)
        regexes = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        # a refresh resolves to the topics the member that asked for it may see (KAFKA-18813)
        bump |= self.regexes.update(
            member.subscribed_topic_regex,
            updated.subscribed_topic_regex,
            regexes,
            now_ms,
            topic_names,
            req.describable,
            lookup,
        )
        metadata = subscription_metadata({t for m in members.values() for t in self.topics_of(m)}, lookup)
        if metadata != self.subscription_metadata:
            records.append(
                (
                    ConsumerGroupPartitionMetadataKey(self.group_id),
                    ConsumerGroupPartitionMetadataValue(tuple(metadata.values())),
                )
            )
            bump = True
        group_epoch = self.group_epoch
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(group_epoch)))
        target_epoch, targets = self.assignment_epoch, current
        if group_epoch > self.assignment_epoch:
            targets = self._new_targets(members, metadata, current, records)
            target_epoch = group_epoch
            records.append(
                (
                    ConsumerGroupTargetAssignmentMetadataKey(self.group_id),
                    ConsumerGroupTargetAssignmentMetadataValue(group_epoch),
                )
            )
        target = targets.get(member_id, ())
        if updated.member_epoch != target_epoch or updated.state is not MemberState.STABLE:
            # partitions this member itself owns are not "owned by another member"
            mine = {
                (t, p)
                for m in (updated, previous)
                if m is not None
                for t, ps in (*m.assigned, *m.pending_revocation)
                for p in ps
            }

            def partition_epoch(t: str, p: int) -> int:
                return -1 if (t, p) in mine else self.partition_epoch(t, p)

            reconciled = reconcile(updated, target_epoch, target, partition_epoch, req.owned)
            if reconciled != updated or member_id not in self.members:
                records.append(
                    (ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id), _current_value(reconciled))
                )
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                if reconciled != updated:
                    timeout = max(reconciled.rebalance_timeout_ms, 0)
                    self.rebalance_deadlines[member_id] = (now_ms + timeout, reconciled.member_epoch)
            else:
                self.rebalance_deadlines.pop(member_id, None)
            updated = reconciled
        elif member_id not in self.members:
            records.append((ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id), _current_value(updated)))
        self.session_deadlines[member_id] = now_ms + self.config.session_timeout_ms
        subscription = req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
        full = joining or (req.rebalance_timeout_ms != -1 and subscription and req.owned is not None)
        changed = (updated.assigned, updated.pending_revocation) != (member.assigned, member.pending_revocation)
        response = HeartbeatResponse(
            None,
            "",
            member_id,
            updated.member_epoch,
            self.config.heartbeat_interval_ms,
            updated.assigned if full or changed else None,
        )
        return records, response

    def _member_for(
        self, req: HeartbeatRequest, member_id: str, joining: bool, records: list[Record]
    ) -> tuple[ConsumerMember, str | None]:
        """The member the request is about (Kafka's getOrMaybeSubscribe*Member): a new one on a
        join, a static member's replacement (and the id it replaces), or the existing one at a
        valid epoch."""
        if joining and member_id not in self.members and len(self.members) >= self.config.max_size:
            if req.instance_id is None or req.instance_id not in self.static_members:
                raise kerr.GroupMaxSizeReachedError(f"group {self.group_id} has reached its maximum size")
        if req.instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                if not joining:
                    raise kerr.UnknownMemberIdError(f"member {member_id} is not a member of group {self.group_id}")
                return ConsumerMember(member_id), None
            if joining:  # the member gave up what it owned and rejoins under its id
                rejoined = ConsumerMember(
                    member_id,
                    subscribed_topic_names=member.subscribed_topic_names,
                    subscribed_topic_regex=member.subscribed_topic_regex,
                )
                return rejoined, None
            check_epoch(member, req.member_epoch, req.owned)
            return member, None
        existing_id = self.static_members.get(req.instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                return ConsumerMember(member_id, instance_id=req.instance_id), None
            if existing.member_id == member_id:
                return (
                    ConsumerMember(
                        member_id,
                        instance_id=req.instance_id,
                        subscribed_topic_names=existing.subscribed_topic_names,
                        subscribed_topic_regex=existing.subscribed_topic_regex,
                    ),
                    None,
                )
            if existing.member_epoch != STATIC_LEAVE_EPOCH:
                raise kerr.UnreleasedInstanceIdError(
                    f"static member {req.instance_id} of group {self.group_id} has not left yet "
                    f"(member {existing.member_id})"
                )
            # the static member comes back under a new id: it takes over the old one's assignment
            records.extend(self._remove_records(existing.member_id))
            target = self.target.get(existing.member_id, ())
            records.append(
                (
                    ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id),
                    ConsumerGroupTargetAssignmentMemberValue(target),
                )
            )
            return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0), existing.member_id
        if existing is None:
            raise kerr.UnknownMemberIdError(f"instance id {req.instance_id} is unknown in group {self.group_id}")
        if existing.member_id != member_id:
            raise kerr.FencedInstanceIdError(
                f"instance id {req.instance_id} belongs to member {existing.member_id}, not {member_id}"
            )
        check_epoch(existing, req.member_epoch, req.owned)
        return existing, None

    def _new_targets(
        self,
        members: dict[str, ConsumerMember],
        metadata: dict[str, TopicMetadata],
        current: dict[str, Assignment],
        records: list[Record],
    ) -> dict[str, Assignment]:
        """The assignor's new target for every member; records for the members whose target changed."""
        specs = {
            m.member_id: MemberSpec(
                m.member_id,
                m.instance_id,
                frozenset(metadata[t].topic_id for t in self.topics_of(m) if t in metadata),
                {t: frozenset(ps) for t, ps in current.get(m.member_id, ())},
            )
            for m in members.values()
        }
        partitions = {t.topic_id: t.num_partitions for t in metadata.values()}
        try:
            result = assign(self.preferred_assignor(members), specs, partitions)
        except PartitionAssignorError as err:
            raise kerr.UnknownServerError(f"the assignment of group {self.group_id} failed: {err}") from err
        targets: dict[str, Assignment] = {}
        for member_id in members:
            new = assignment_of(result.get(member_id, {}))
            targets[member_id] = new
            if current.get(member_id) != new:
                records.append(
                    (
                        ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id),
                        ConsumerGroupTargetAssignmentMemberValue(new),
                    )
                )
        return targets

    def _leave(self, req: HeartbeatRequest) -> tuple[list[Record], HeartbeatResponse]:
        if req.instance_id is None:
            member = self.members.get(req.member_id)
            if member is None:
                raise kerr.UnknownMemberIdError(f"member {req.member_id} is not a member of group {self.group_id}")
            return self.fence(req.member_id), HeartbeatResponse(None, "", req.member_id, req.member_epoch)
        existing_id = self.static_members.get(req.instance_id)
        if existing_id is None:
            raise kerr.UnknownMemberIdError(f"instance id {req.instance_id} is unknown in group {self.group_id}")
        if existing_id != req.member_id:
            raise kerr.FencedInstanceIdError(f"instance id {req.instance_id} belongs to member {existing_id}")
        if req.member_epoch == LEAVE_EPOCH:
            return self.fence(existing_id), HeartbeatResponse(None, "", req.member_id, req.member_epoch)
        # a static member leaves for a while: it keeps its partitions until it is back or its session ends
        member = replace(self.members[existing_id], member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=())
        record: Record = (ConsumerGroupCurrentMemberAssignmentKey(self.group_id, existing_id), _current_value(member))
        return [record], HeartbeatResponse(None, "", req.member_id, STATIC_LEAVE_EPOCH)

    def _remove_records(self, member_id: str) -> list[Record]:
        return [
            (ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id), None),
            (ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id), None),
            (ConsumerGroupMemberMetadataKey(self.group_id, member_id), None),
        ]

    def fence(self, member_id: str) -> list[Record]:
        """The records that remove a member (it left, its session ended, or it did not revoke in
        time) and bump the group epoch, so the others are given its partitions."""
        records = self._remove_records(member_id)
        others = {k: v for k, v in self.members.items() if k != member_id}
        self.regexes.forget_others({m.subscribed_topic_regex for m in others.values() if m.subscribed_topic_regex})
        topics = {t for m in others.values() for t in self.topics_of(m)}
        metadata = {name: t for name, t in self.subscription_metadata.items() if name in topics}
        if metadata != self.subscription_metadata:
            value = ConsumerGroupPartitionMetadataValue(tuple(metadata.values()))
            records.append((ConsumerGroupPartitionMetadataKey(self.group_id), value))
        records.append((ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(self.group_epoch + 1)))
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        return records

    def expired_members(self, now_ms: int) -> list[str]:
        """Members whose session ended, or who did not revoke within their rebalance timeout; the
        shard fences them one at a time (each fence replayed before the next is computed)."""
        out = [m for m, deadline in sorted(self.session_deadlines.items()) if deadline <= now_ms and m in self.members]
        for member_id, (deadline, epoch) in sorted(self.rebalance_deadlines.items()):
            if deadline > now_ms:
                continue
            del self.rebalance_deadlines[member_id]
            member = self.members.get(member_id)
            if member is not None and member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch:
                if member_id not in out:
                    out.append(member_id)
        return out

    def next_deadline(self) -> int | None:
        deadlines = [*self.session_deadlines.values(), *(d for d, _e in self.rebalance_deadlines.values())]
        if self.regexes.pending is not None:
            deadlines.append(self.regexes.pending.due_ms)
        return min(deadlines, default=None)

    def refresh_regexes(self, now_ms: int) -> list[Record]:
        """The regex refresh a heartbeat scheduled, when due (Kafka's handleRegularExpressionsResult):
        when a regex's topics changed, the subscription metadata and a bumped group epoch, so the
        members' next heartbeats compute the new target."""
        if not self.regexes.due(now_ms):
            return []
        regexes = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        changed, lookup = self.regexes.run(now_ms, regexes)
        if not changed:
            return []
        records: list[Record] = []
        metadata = subscription_metadata(self.subscribed_topics(), lookup)
        if metadata != self.subscription_metadata:
            value = ConsumerGroupPartitionMetadataValue(tuple(metadata.values()))
            records.append((ConsumerGroupPartitionMetadataKey(self.group_id), value))
        records.append((ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(self.group_epoch + 1)))
        return records

    def start_sessions(self, now_ms: int) -> None:
        """After loading: every member gets a full session, and a member still revoking its full
        rebalance timeout."""
        for member_id, m in self.members.items():
            self.session_deadlines[member_id] = now_ms + self.config.session_timeout_ms
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self.rebalance_deadlines[member_id] = (now_ms + max(m.rebalance_timeout_ms, 0), m.member_epoch)

    def delete_records(self) -> list[Record]:
        """DeleteGroups of an empty group: tombstones for what the group wrote."""
        return [
            (ConsumerGroupTargetAssignmentMetadataKey(self.group_id), None),
            (ConsumerGroupPartitionMetadataKey(self.group_id), None),
            (ConsumerGroupMetadataKey(self.group_id), None),
        ]

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> kerr.KafkaError | None:
        """Kafka's rules for OffsetCommit to a consumer group: a member at its current epoch, or
        anyone (epoch < 0) while the group is empty."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return kerr.UnknownMemberIdError(f"member {member_id} is not a member of group {self.group_id}")
        if member.member_epoch != member_epoch:
            return kerr.StaleMemberEpochError(
                f"the member epoch {member_epoch} is not the expected member epoch {member.member_epoch}"
            )
        return None


def _metadata_value(m: ConsumerMember) -> ConsumerGroupMemberMetadataValue:
    return ConsumerGroupMemberMetadataValue(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
    )


def _current_value(m: ConsumerMember) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        m.member_epoch, m.previous_member_epoch, int(m.state), m.assigned, m.pending_revocation
    )
