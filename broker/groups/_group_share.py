"""A share group (KIP-932, Kafka 4.2): members that share partitions, assigned by the coordinator's
``simple`` assignor; a partition is assignable once its share-group state is initialized.

State changes only through `ShareGroup.replay` of the group's records (the path that loads the
group from ``__consumer_offsets``). Handlers (`heartbeat`, `fence`) read the state and return
records; the shard replays them at once and answers once they are committed. Ordering inside one
heartbeat, as Kafka's ``shareGroupHeartbeat``:

1. the member's subscription is updated; a changed subscription, initialized partitions the target
   does not cover yet, or a changed metadata hash of the subscribed topics bumps the group epoch;
2. when the group epoch is past the target assignment's, the assignor computes a new target;
3. the member takes its target at once (a share member never revokes: others may hold the same
   partitions), with the target's epoch;
4. subscribed partitions whose state is neither initialized nor being initialized (or whose
   initialization is older than ``initialize_retry_interval_ms``) are marked initializing; the
   caller hands them out (`ShareInitJob`) once the records are written.

Session deadlines and the times initializations began are kept beside the state, not in it: a
loaded group starts its sessions afresh, and a loaded "initializing" partition counts as stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kraftlog.broker.groups._group_records_consumer import Assignment, assignment_of
from kraftlog.broker.groups._group_records_share import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareKey,
    ShareTopicPartitions,
    ShareValue,
)
from kraftlog.broker.groups._group_share_assignor import ShareMemberSpec, simple_assign
from kraftlog.broker.groups._group_share_types import (
    LEAVE_EPOCH,
    SHARE_PROTOCOL_TYPE,
    ShareGroupConfig,
    ShareGroupState,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareMember,
    metadata_hash,
)
from kraftlog.common import errors as kerr

__all__ = ["ShareGroup", "ShareRecord", "TopicLookup"]

ShareRecord = tuple[ShareKey, ShareValue | None]
TopicLookup = Callable[[str], "tuple[str, int] | None"]  # topic name -> (topic id, partition count)
# topic id -> (topic name, partitions)
InitMap = dict[str, tuple[str, set[int]]]


class ShareGroup:
    """One share group's state (see the module docstring)."""

    protocol_type = SHARE_PROTOCOL_TYPE

    def __init__(self, group_id: str, config: ShareGroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Assignment] = {}
        self.initializing: InitMap = {}
        self.initialized: InitMap = {}
        self.deleting: dict[str, str] = {}  # topic id -> name
        self.dead = False
        # beside the state: member id -> session deadline; topic id -> when its initialization began
        self.session_deadlines: dict[str, int] = {}
        self.init_started_ms: dict[str, int] = {}

    # ===================================================================== reading

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self, members: dict[str, ShareMember] | None = None) -> set[str]:
        return {t for m in (self.members if members is None else members).values() for t in m.subscribed_topic_names}

    # ====================================================================== replay

    def replay(self, key: ShareKey, value: ShareValue | None) -> None:
        """One record of this group, in log order."""
        if isinstance(key, ShareGroupMetadataKey):
            if value is None:
                self.dead = True
            else:
                assert isinstance(value, ShareGroupMetadataValue)
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
                self.target[key.member_id] = value.partitions
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
                self.session_deadlines.pop(key.member_id, None)
            else:
                assert isinstance(value, ShareGroupMemberMetadataValue)
                old = self.members.get(key.member_id) or ShareMember(key.member_id)
                self.members[key.member_id] = replace(
                    old,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=value.subscribed_topic_names,
                )
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            known = self.members.get(key.member_id)
            if value is None:
                if known is not None:
                    self.members[key.member_id] = replace(known, member_epoch=-1, previous_member_epoch=-1, assigned=())
            else:
                assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
                self.members[key.member_id] = replace(
                    known or ShareMember(key.member_id),
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=value.state,
                    assigned=value.assigned,
                )
        elif isinstance(key, ShareGroupStatePartitionMetadataKey):
            if value is None:
                self.initializing, self.initialized, self.deleting = {}, {}, {}
            else:
                assert isinstance(value, ShareGroupStatePartitionMetadataValue)
                self.initializing = {t.topic_id: (t.topic_name, set(t.partitions)) for t in value.initializing}
                self.initialized = {t.topic_id: (t.topic_name, set(t.partitions)) for t in value.initialized}
                self.deleting = dict(value.deleting)
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"not a share group record: {key!r}")

    # ================================================================ the handlers

    def heartbeat(
        self, req: ShareHeartbeatRequest, now_ms: int, lookup: TopicLookup
    ) -> tuple[list[ShareRecord], ShareHeartbeatResponse, InitMap]:
        """ShareGroupHeartbeat of a member in (or joining) this group; raises the Kafka error to
        answer with. Returns the records, the answer, and the partitions now marked initializing.
        The request was validated already (`validate_share_heartbeat`)."""
        if req.member_epoch == LEAVE_EPOCH:
            if req.member_id not in self.members:
                raise kerr.UnknownMemberIdError(f"Member {req.member_id} is not a member of group {self.group_id}.")
            return self.fence(req.member_id, lookup), ShareHeartbeatResponse(None, "", req.member_id, LEAVE_EPOCH), {}
        joining = req.member_epoch == 0
        member = self.members.get(req.member_id)
        if len(self.members) >= self.config.max_size and member is None:
            raise kerr.GroupMaxSizeReachedError(
                f"The share group has reached its maximum capacity of {self.config.max_size} members."
            )
        if member is None:
            if not joining:
                raise kerr.UnknownMemberIdError(f"Member {req.member_id} is not a member of group {self.group_id}.")
            member = ShareMember(req.member_id)
        elif req.member_epoch > member.member_epoch:
            raise kerr.FencedMemberEpochError(
                f"The share group member has a greater member epoch ({req.member_epoch}) than the one known by "
                f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
            )
        elif req.member_epoch < member.member_epoch and req.member_epoch != member.previous_member_epoch:
            raise kerr.FencedMemberEpochError(
                f"The share group member has a smaller member epoch ({req.member_epoch}) than the one known by "
                f"the group coordinator ({member.member_epoch}), and it does not match the previous member epoch "
                f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin."
            )
        known = req.member_id in self.members
        records: list[ShareRecord] = []
        updated = replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            client_id=req.client_id,
            client_host=req.client_host,
        )
        subscription_changed = False
        if updated != member or not known:
            records.append((ShareGroupMemberMetadataKey(self.group_id, req.member_id), _metadata_value(updated)))
            subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        bump = subscription_changed or self._initialized_assignment_pending(lookup)
        members = {**self.members, req.member_id: updated}
        subscribed = self.subscribed_topics(members)
        new_hash = metadata_hash(subscribed, lookup)
        group_epoch = self.group_epoch
        if bump or new_hash != self.metadata_hash or self.group_epoch == 0:
            group_epoch += 1
            records.append((ShareGroupMetadataKey(self.group_id), ShareGroupMetadataValue(group_epoch, new_hash)))
        target_epoch, target = self.assignment_epoch, self.target.get(req.member_id, ())
        if group_epoch > self.assignment_epoch:
            target = self._new_targets(members, lookup, records).get(req.member_id, ())
            target_epoch = group_epoch
            records.append(
                (
                    ShareGroupTargetAssignmentMetadataKey(self.group_id),
                    ShareGroupTargetAssignmentMetadataValue(group_epoch),
                )
            )
        reconciled = updated
        if target_epoch != updated.member_epoch or subscription_changed:
            assigned = _only_subscribed(target, updated.subscribed_topic_names, lookup)
            reconciled = replace(updated, state=0, assigned=assigned)
            if target_epoch != updated.member_epoch:
                reconciled = replace(reconciled, member_epoch=target_epoch, previous_member_epoch=updated.member_epoch)
        if reconciled != updated or not known:
            records.append((ShareGroupCurrentMemberAssignmentKey(self.group_id, req.member_id), _current(reconciled)))
        self.session_deadlines[req.member_id] = now_ms + self.config.session_timeout_ms
        to_init = self._to_initialize(subscribed, now_ms, lookup)
        if to_init:
            records.append(self._state_record(self._combine(self.initializing, to_init), self.initialized, to_init))
            for topic_id in to_init:
                self.init_started_ms[topic_id] = now_ms
        full = joining or req.subscribed_topic_names is not None
        response = ShareHeartbeatResponse(
            None,
            "",
            req.member_id,
            reconciled.member_epoch,
            self.config.heartbeat_interval_ms,
            reconciled.assigned if full or reconciled.assigned != member.assigned else None,
        )
        return records, response, to_init

    def _initialized_assignment_pending(self, lookup: TopicLookup) -> bool:
        """Kafka's initializedAssignmentPending: a subscribed topic's initialized partitions are not
        what the target assignment covers of it (a topic recreated under the name is another)."""
        if not self.members or not self.initialized:
            return False
        subscribed = self.subscribed_topics()
        covered: dict[str, set[int]] = {}
        for assignment in self.target.values():
            for topic_id, partitions in assignment:
                covered.setdefault(topic_id, set()).update(partitions)
        return any(
            name in subscribed and covered.get(topic_id) != partitions and (lookup(name) or ("",))[0] == topic_id
            for topic_id, (name, partitions) in self.initialized.items()
        )

    def _to_initialize(self, subscribed: set[str], now_ms: int, lookup: TopicLookup) -> InitMap:
        """Kafka's subscribedTopicsChangeMap: the subscribed partitions neither initialized nor
        being initialized since less than the retry interval."""
        fresh = {
            t: v
            for t, v in self.initializing.items()
            if now_ms - self.init_started_ms.get(t, -(2**62)) < self.config.initialize_retry_interval_ms
        }
        already = self._combine(self.initialized, fresh)
        out: InitMap = {}
        for name in sorted(subscribed):
            topic = lookup(name)
            if topic is None:
                continue
            topic_id, count = topic
            have = already.get(topic_id, ("", set()))[1]
            missing = set(range(count)) - have
            if missing:
                out[topic_id] = (name, missing)
        return out

    @staticmethod
    def _combine(a: InitMap, b: InitMap) -> InitMap:
        out: InitMap = {t: (name, set(ps)) for t, (name, ps) in a.items()}
        for t, (name, ps) in b.items():
            out[t] = (name, out.get(t, (name, set()))[1] | ps)
        return out

    def _state_record(
        self, initializing: InitMap, initialized: InitMap, undelete: InitMap | None = None
    ) -> ShareRecord:
        deleting = {t: n for t, n in self.deleting.items() if undelete is None or t not in undelete}
        value = ShareGroupStatePartitionMetadataValue(
            _topics(initializing), _topics(initialized), tuple(sorted(deleting.items()))
        )
        return ShareGroupStatePartitionMetadataKey(self.group_id), value

    def initialized_records(self, topics: dict[str, set[int]], lookup_name: Callable[[str], str]) -> list[ShareRecord]:
        """Kafka's initializeShareGroupState: the share coordinator initialized these partitions'
        state; they leave "initializing" and become assignable (the next heartbeat assigns them)."""
        if not topics:
            return []
        done: InitMap = {t: (lookup_name(t), set(ps)) for t, ps in topics.items()}
        initializing: InitMap = {}
        for t, (name, ps) in self.initializing.items():
            left = ps - topics.get(t, set())
            if left:
                initializing[t] = (name, left)
        return [self._state_record(initializing, self._combine(self.initialized, done))]

    def uninitialized_records(self, topics: dict[str, set[int]]) -> list[ShareRecord]:
        """Kafka's uninitializeShareGroupState: the initialization failed; the partitions leave
        "initializing" so that a later heartbeat asks again."""
        if not self.initializing or not topics:
            return []
        initializing: InitMap = {}
        for t, (name, ps) in self.initializing.items():
            left = ps - topics.get(t, set())
            if left:
                initializing[t] = (name, left)
        return [self._state_record(initializing, self.initialized)]

    def offsets_records(self, initialized: InitMap, forgotten: set[str]) -> list[ShareRecord]:
        """AlterShareGroupOffsets / DeleteShareGroupOffsets of the (empty) group: the partitions in
        ``initialized`` now have state; the topics in ``forgotten`` have none any more (neither
        initialized nor initializing)."""
        if not initialized and not forgotten:
            return []
        kept = {t: v for t, v in self._combine(self.initialized, initialized).items() if t not in forgotten}
        initializing = {t: v for t, v in self.initializing.items() if t not in forgotten}
        return [self._state_record(initializing, kept)]

    def _new_targets(
        self, members: dict[str, ShareMember], lookup: TopicLookup, records: list[ShareRecord]
    ) -> dict[str, Assignment]:
        """The assignor's new target for every member over the initialized partitions; records for
        the members whose target changed."""
        ids: dict[str, str] = {}
        for name in self.subscribed_topics(members):
            topic = lookup(name)
            if topic is not None:
                ids[name] = topic[0]
        specs = {
            m.member_id: ShareMemberSpec(
                m.member_id,
                frozenset(ids[t] for t in m.subscribed_topic_names if t in ids),
                {t: frozenset(ps) for t, ps in self.target.get(m.member_id, ())},
            )
            for m in members.values()
        }
        assignable = {t: frozenset(ps) for t, (_n, ps) in self.initialized.items() if t in ids.values()}
        result = simple_assign(specs, assignable)
        targets: dict[str, Assignment] = {}
        for member_id in sorted(members):
            new = assignment_of(result.get(member_id, {}))
            targets[member_id] = new
            if self.target.get(member_id) != new or member_id not in self.target:
                records.append(
                    (
                        ShareGroupTargetAssignmentMemberKey(self.group_id, member_id),
                        ShareGroupTargetAssignmentMemberValue(new),
                    )
                )
        return targets

    def fence(self, member_id: str, lookup: TopicLookup) -> list[ShareRecord]:
        """The records that remove a member (it left or its session ended) and bump the group
        epoch with the metadata hash of what the others subscribe to."""
        others = {k: v for k, v in self.members.items() if k != member_id}
        new_hash = metadata_hash(self.subscribed_topics(others), lookup)
        self.session_deadlines.pop(member_id, None)
        return [
            (ShareGroupCurrentMemberAssignmentKey(self.group_id, member_id), None),
            (ShareGroupTargetAssignmentMemberKey(self.group_id, member_id), None),
            (ShareGroupMemberMetadataKey(self.group_id, member_id), None),
            (ShareGroupMetadataKey(self.group_id), ShareGroupMetadataValue(self.group_epoch + 1, new_hash)),
        ]

    def expired_members(self, now_ms: int) -> list[str]:
        return [m for m, deadline in sorted(self.session_deadlines.items()) if deadline <= now_ms and m in self.members]

    def next_deadline(self) -> int | None:
        return min(self.session_deadlines.values(), default=None)

    def start_sessions(self, now_ms: int) -> None:
        """After loading: every member gets a full session."""
        for member_id in self.members:
            self.session_deadlines[member_id] = now_ms + self.config.session_timeout_ms

    def delete_records(self) -> list[ShareRecord]:
        """DeleteGroups of an empty group: tombstones for what the group wrote (Kafka's
        createGroupTombstoneRecords)."""
        return [
            (ShareGroupTargetAssignmentMetadataKey(self.group_id), None),
            (ShareGroupStatePartitionMetadataKey(self.group_id), None),
            (ShareGroupMetadataKey(self.group_id), None),
        ]


def _metadata_value(m: ShareMember) -> ShareGroupMemberMetadataValue:
    return ShareGroupMemberMetadataValue(m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)


def _current(m: ShareMember) -> ShareGroupCurrentMemberAssignmentValue:
    return ShareGroupCurrentMemberAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state, m.assigned)


def _topics(init: InitMap) -> tuple[ShareTopicPartitions, ...]:
    return tuple(ShareTopicPartitions(t, name, tuple(sorted(ps))) for t, (name, ps) in sorted(init.items()) if ps)


def _only_subscribed(target: Assignment, topics: tuple[str, ...], lookup: TopicLookup) -> Assignment:
    """The target without topics the member is no longer subscribed to (Kafka's
    ShareGroupAssignmentBuilder filters them)."""
    ids = {found[0] for name in topics if (found := lookup(name)) is not None}
    return tuple((t, ps) for t, ps in target if t in ids)
