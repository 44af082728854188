"""One consumer group of the classic protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup): the
pure core of the group coordinator, with Kafka 4.x's semantics.

No sockets, no clock, no randomness of its own: every call takes ``now_ms``, member ids come from
the ``rng`` given, timers are deadlines that `ClassicGroup.poll` fires. A request that must wait (a
JoinGroup until the rebalance completes, a SyncGroup until the leader's assignment is stored) is
parked under the caller's token; whichever later call completes it returns ``(token, response)``
in its `Outcome`. A token is answered at most once in effect: a later answer for a token already
answered is to be dropped (as Kafka's ``CompletableFuture.complete`` ignores it).

Records: when the group's stored state must change (a new group, a completed generation's
assignment) a call returns the ``__consumer_offsets`` records to append and, as the outcome's
``then``, what runs once they are written; the coordinator runtime appends them with acks=all and
then runs it with the error, if any, and only then are the waiting SyncGroups answered (Kafka
answers after the write is committed).

The rebalance, as Kafka runs it: a change (member added, protocols changed, member gone) moves the
group to PreparingRebalance; members rejoin (JoinGroup parks) until every member has rejoined or the
rebalance timeout (the largest of the members') expires, when dynamic members that did not rejoin
are removed; the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` more
each time a member arrives, up to the rebalance timeout. Then the generation advances, the protocol
is chosen by vote, every parked JoinGroup is answered (the leader with every member's metadata) and
the group waits in CompletingRebalance for the leader's SyncGroup, whose assignment is stored before
every member gets its part (Stable). Members that do not send SyncGroup within the rebalance timeout
are removed. A member without a heartbeat for its session timeout is removed (unless it waits in the
rebalance). Static members (``group.instance.id``, KIP-345) keep their place across restarts: a
rejoin under a known instance id replaces the old member id (which is fenced with
FENCED_INSTANCE_ID) without a rebalance when nothing changed.

Where Kafka's outcome depends on its ``HashMap`` iteration order (the order of the member list the
leader gets, the next leader when the leader leaves, a tie between protocol votes), `JavaHashTable`
reproduces it.
"""

from __future__ import annotations

import random
import uuid

from kraftlog.broker.coordinator import coordinator_error
from kraftlog.broker.groups._group_classic_base import ClassicGroupBase, Outcome, Record
from kraftlog.broker.groups._group_classic_types import (
    UNKNOWN_MEMBER_ID,
    ClassicGroupConfig,
    ClassicMember,
    GroupState,
    JoinRequest,
    JoinResponse,
    Protocol,
    SyncRequest,
    SyncResponse,
)
from kraftlog.broker.groups._group_records import GroupMetadataValue
from kraftlog.common import errors as kerr

__all__ = ["ClassicGroup", "Outcome"]


class ClassicGroup(ClassicGroupBase):
    """A classic group and the four requests that change it (see the module docstring)."""

    # ===================================================================== calls

    def poll(self, now_ms: int) -> Outcome:
        """Fire every timer due by ``now_ms`` (session and rebalance timeouts, the initial delay), in
        deadline order, each at its own deadline; requests do the same before they are handled."""
        self._fire_due(now_ms)
        return self._take()

    def join(self, request: JoinRequest, token: object, now_ms: int) -> Outcome:
        """JoinGroup (validated by the coordinator for group id and session timeout)."""
        self._fire_due(now_ms)
        member_id = request.member_id
        if not self._accepts(member_id):
            self._remove(member_id)
            self._answer(token, JoinResponse(kerr.GroupMaxSizeReachedError, UNKNOWN_MEMBER_ID))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(request, token, now_ms)
        else:
            self._join_existing_member(request, token, now_ms)
        return self._take()

    def _join_new_member(self, request: JoinRequest, token: object, now_ms: int) -> None:
        if self.state is GroupState.DEAD:
            self._answer(token, JoinResponse(kerr.CoordinatorNotAvailableError, UNKNOWN_MEMBER_ID))
            return
        if not self._supports(request.protocol_type, request.protocols):
            self._answer(token, JoinResponse(kerr.InconsistentGroupProtocolError, UNKNOWN_MEMBER_ID))
            return
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        new_id = f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"
        if request.group_instance_id is not None:
            existing = self._static.get(request.group_instance_id)
            if existing is not None:
                self._replace_static_member(request, existing, new_id, token, now_ms)
            else:
                self._add_member(request, new_id, token, now_ms)
        elif request.requires_known_member_id:  # KIP-394: come back with this id
            self._pending_join.add(new_id)
            self._schedule(
                ("hb", new_id), now_ms + request.session_timeout_ms, lambda t: self._expire_heartbeat(new_id, t)
            )
            self._answer(token, JoinResponse(kerr.MemberIdRequiredError, new_id))
        else:
            self._add_member(request, new_id, token, now_ms)

    def _add_member(self, request: JoinRequest, member_id: str, token: object, now_ms: int) -> None:
        member = ClassicMember(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
            is_new=True,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.previous_state is GroupState.EMPTY:
            self._new_member_added = True
        self._add(member, token)
        self._heartbeat_deadline(member, now_ms, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_or_complete(now_ms)

    def _update_member(self, member: ClassicMember, request: JoinRequest, token: object | None) -> None:
        self._count_protocols(member, -1)
        member.protocols = request.protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.join_waiter = token

    def _join_existing_member(self, request: JoinRequest, token: object, now_ms: int) -> None:
        member_id = request.member_id
        if self.state is GroupState.DEAD:
            self._answer(token, JoinResponse(kerr.CoordinatorNotAvailableError, member_id))
            return
        if not self._supports(request.protocol_type, request.protocols):
            self._answer(token, JoinResponse(kerr.InconsistentGroupProtocolError, member_id))
            return
        if member_id in self._pending_join:
            if request.group_instance_id is not None:  # a KIP-394 id is only ever handed to dynamic members
                # Kafka throws IllegalStateException here, which its service answers as
                self._answer(token, JoinResponse(kerr.UnknownServerError, UNKNOWN_MEMBER_ID))
                return
            self._add_member(request, member_id, token, now_ms)
            return
        error = self._validate_member(member_id, request.group_instance_id)
        if error is not None:
            self._answer(token, JoinResponse(error, member_id))
            return
        member = self._members[member_id]
        unchanged = member.protocols == request.protocols
        if self.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, request, token)
            self._maybe_prepare_or_complete(now_ms)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            if unchanged:  # a resend: answer with the generation in progress
                is_leader = member_id == self.leader_id
                self._answer(token, self._join_response(member_id, with_members=is_leader))
            else:
                self._update_member(member, request, token)
                self._maybe_prepare_or_complete(now_ms)
        elif self.state is GroupState.STABLE:
            if member_id == self.leader_id or not unchanged:
                self._update_member(member, request, token)
                self._maybe_prepare_or_complete(now_ms)
            else:
                self._answer(token, self._join_response(member_id, with_members=False))
        else:  # Empty: the member is gone
            self._answer(token, JoinResponse(kerr.UnknownMemberIdError, member_id))

    def _swap_static(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """Kafka's replaceStaticMember: the member under ``old_id`` continues as ``new_id``; whatever
        the old id had parked is answered FENCED_INSTANCE_ID."""
        old = self._members.pop(old_id)
        self._order.remove(old_id)
        self._complete_join(old, JoinResponse(kerr.FencedInstanceIdError, old_id))
        self._complete_sync(old, SyncResponse(kerr.FencedInstanceIdError))
        member = ClassicMember(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self._members[new_id] = member
        self._order.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        self._static[instance_id] = new_id
        self._cancel(("hb", old_id))
        return member

    def _replace_static_member(
        self, request: JoinRequest, old_id: str, new_id: str, token: object, now_ms: int
    ) -> None:
        """A known instance id joins with no member id (it restarted): the new id replaces the old
        one, which is fenced; a stable group whose protocol stays the same does not rebalance."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_leader = self.leader_id
        member = self._swap_static(instance_id, old_id, new_id)
        self._heartbeat_deadline(member, now_ms)
        before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._update_member(member, request, token)
        if self.state is GroupState.STABLE:
            if self.protocol_name != self._select_protocol():
                self._maybe_prepare_or_complete(now_ms)
                return
            assignment = {m.member_id: m.assignment for m in self.members}

            def then(error: type[kerr.KafkaError] | None, t: int) -> None:
                if error is not None:  # undo: the old member id stands again, and this join fails
                    # Kafka's undo throws (swallowed) when the new id is gone or replaced again in
                    # the meantime; then only the answer is left to give
                    if self._members.get(new_id) is member and old_id not in self._members:
                        self._count_protocols(member, -1)
                        member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = before
                        self._count_protocols(member, +1)
                        member.join_waiter = None
                        restored = self._swap_static(instance_id, new_id, old_id)
                        self._heartbeat_deadline(restored, t)
                    failed = JoinResponse(
                        coordinator_error(error),
                        UNKNOWN_MEMBER_ID,
                        self.generation_id,
                        self.protocol_type,
                        self.protocol_name,
                        old_leader or "",
                    )
                    self._answer(token, failed)
                    return
                is_leader = new_id == self.leader_id
                if is_leader and self.state in (GroupState.PREPARING_REBALANCE, GroupState.DEAD):
                    # Kafka cannot list the members now (its callback throws): the JoinGroup stays
                    # parked and is answered when the rebalance completes
                    return
                if request.supports_skip_assignment:
                    response = self._join_response(new_id, with_members=is_leader, skip=is_leader)
                else:
                    response = JoinResponse(
                        None, new_id, self.generation_id, self.protocol_type, self.protocol_name, old_leader or ""
                    )
                self._complete_join(member, response)

            self._append([self.metadata_record(assignment)], then)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(now_ms)
        else:
            self._maybe_complete_join_phase(now_ms)

    def sync(self, request: SyncRequest, token: object, now_ms: int) -> Outcome:
        """SyncGroup: the leader hands in the assignment; everyone gets its part once it is stored."""
        self._fire_due(now_ms)
        error = self._validate_sync(request)
        if error is not None:
            self._answer(token, SyncResponse(error))
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._answer(token, SyncResponse(kerr.RebalanceInProgressError))
        elif self.state is GroupState.COMPLETING_REBALANCE:
            member = self._members[request.member_id]
            member.sync_waiter = token
            self._pending_sync.discard(request.member_id)
            if not self._pending_sync:
                self._cancel(("sync",))
            if request.member_id == self.leader_id:
                assignment = dict(request.assignments)
                for m in self._members.values():
                    assignment.setdefault(m.member_id, b"")
                generation = request.generation_id

                def then(error: type[kerr.KafkaError] | None, t: int) -> None:
                    if self.state is not GroupState.COMPLETING_REBALANCE or generation != self.generation_id:
                        return
                    if error is not None:
                        for m in self._members.values():
                            m.assignment = b""
                        self._propagate_assignment(coordinator_error(error), t)
                        self._maybe_prepare_or_complete(t)
                    else:
                        for m in self._members.values():
                            m.assignment = assignment.get(m.member_id, b"")
                        self._propagate_assignment(None, t)
                        self._transition(GroupState.STABLE, t)

                self._append([self.metadata_record(assignment)], then)
        elif self.state is GroupState.STABLE:
            self._pending_sync.discard(request.member_id)
            if not self._pending_sync:
                self._cancel(("sync",))
            member = self._members[request.member_id]
            self._answer(token, SyncResponse(None, self.protocol_type, self.protocol_name, member.assignment))
        else:
            self._answer(token, SyncResponse(kerr.UnknownMemberIdError))
        return self._take()

    def _validate_sync(self, request: SyncRequest) -> type[kerr.KafkaError] | None:
        if self.state is GroupState.DEAD:
            return kerr.CoordinatorNotAvailableError
        error = self._validate_member(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != self.generation_id:
            return kerr.IllegalGenerationError
        # Kafka's isProtocolInconsistent: only when both sides name one
        if (
            request.protocol_type is not None
            and self.protocol_type is not None
            and request.protocol_type != self.protocol_type
        ) or (
            request.protocol_name is not None
            and self.protocol_name is not None
            and request.protocol_name != self.protocol_name
        ):
            return kerr.InconsistentGroupProtocolError
        return None

    def heartbeat(
        self, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> type[kerr.KafkaError] | None:
        """Heartbeat: the member's error (None: carry on). Answers that due timers produced stay
        for the next `poll`."""
        self._fire_due(now_ms)
        if self.state is GroupState.DEAD:
            return kerr.CoordinatorNotAvailableError
        error = self._validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != self.generation_id:
            return kerr.IllegalGenerationError
        if self.state is GroupState.EMPTY:
            return kerr.UnknownMemberIdError
        self._heartbeat_deadline(self._members[member_id], now_ms)
        return kerr.RebalanceInProgressError if self.state is GroupState.PREPARING_REBALANCE else None

    def leave(
        self, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[list[tuple[str, str | None, type[kerr.KafkaError] | None]], Outcome]:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs: each one's error, and what the
        departure set off (a rebalance, answers to parked requests)."""
        self._fire_due(now_ms)
        if self.state is GroupState.DEAD:
            return [(m, i, kerr.CoordinatorNotAvailableError) for m, i in members], self._take()
        results: list[tuple[str, str | None, type[kerr.KafkaError] | None]] = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                existing = self._static.get(instance_id) if instance_id is not None else None
                if existing is None:
                    results.append((member_id, instance_id, kerr.UnknownMemberIdError))
                    continue
                self._leave_member(existing)
            elif member_id in self._pending_join:
                self._remove(member_id)
                self._cancel(("hb", member_id))
            else:
                error = self._validate_member(member_id, instance_id)
                if error is not None:
                    results.append((member_id, instance_id, error))
                    continue
                self._leave_member(member_id)
            results.append((member_id, instance_id, None))
        if any(e is None for _m, _i, e in results):
            if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_or_complete(now_ms)
            elif self.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(now_ms)
        return results, self._take()

    def _leave_member(self, member_id: str) -> None:
        member = self._members[member_id]
        self._cancel(("hb", member_id))
        self._complete_join(member, JoinResponse(kerr.UnknownMemberIdError, UNKNOWN_MEMBER_ID))
        self._remove(member_id)

    def new_group_record(self) -> Record:
        """The record a brand-new group writes (Kafka stores an empty group at its first join)."""
        return self.metadata_record({})

    # ============================================================ offsets and loading

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> type[kerr.KafkaError] | None:
        """Kafka's ClassicGroup.validateOffsetCommit: who may commit in which state. A valid commit
        from a member of a Stable or rebalancing group also counts as its heartbeat."""
        self._fire_due(now_ms)
        if self.state is GroupState.DEAD:
            return kerr.CoordinatorNotAvailableError
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return None  # an admin client or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != self.generation_id:
                return kerr.IllegalGenerationError
        elif self.state is not GroupState.EMPTY:
            return kerr.UnknownMemberIdError
        if self.state is GroupState.COMPLETING_REBALANCE:
            return kerr.RebalanceInProgressError
        if self.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._heartbeat_deadline(self._members[member_id], now_ms)
        return None

    @classmethod
    def from_record(
        cls, group_id: str, value: GroupMetadataValue, config: ClassicGroupConfig, rng: random.Random, now_ms: int
    ) -> ClassicGroup:
        """A group as its last GroupMetadata record left it (loading a coordinator partition):
        Empty without members, else Stable with every member's assignment; sessions start at
        `start_sessions`."""
        group = cls(group_id, config, rng, now_ms)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp_ms = value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0 else now_ms
        for m in value.members:
            protocols = (Protocol(value.protocol or "", m.subscription),)
            member = ClassicMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                value.protocol_type,
                protocols,
                m.assignment,
            )
            group._add(member, None)
        group.leader_id = value.leader if value.leader in group._members else group.leader_id
        if group._members:
            group.previous_state, group.state = GroupState.EMPTY, GroupState.STABLE
        return group

    def start_sessions(self, now_ms: int) -> None:
        """After loading: every member's session starts now (Kafka reschedules every heartbeat)."""
        for m in self.members:
            self._heartbeat_deadline(m, now_ms)

    def mark_dead(self, now_ms: int) -> Outcome:
        """The group was deleted (or its partition moved away): parked requests learn it."""
        for m in self.members:
            self._complete_join(m, JoinResponse(kerr.CoordinatorNotAvailableError, m.member_id))
            self._complete_sync(m, SyncResponse(kerr.CoordinatorNotAvailableError))
        self._timers.clear()
        self._transition(GroupState.DEAD, now_ms)
        return self._take()
