"""The state of one classic group and the steps of its rebalance (see `kraftlog.broker.groups._group_classic`
for the protocol; this file holds what the four requests share: members in Kafka's order, timers,
parked answers, records to append, and the join and sync phases)."""

from __future__ import annotations

import random
from collections.abc import Callable

from kraftlog.broker.coordinator import CoordinatorResult, chain
from kraftlog.broker.groups._group_classic_types import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    VALID_PREVIOUS,
    ClassicGroupConfig,
    ClassicMember,
    GroupState,
    JoinedMember,
    JoinResponse,
    Protocol,
    SyncResponse,
    subscription_topics,
)
from kraftlog.broker.groups._group_records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from kraftlog.common import JavaHashTable, java_string_hash
from kraftlog.common import errors as kerr

__all__ = ["ClassicGroupBase", "Outcome", "Record", "Response"]

Response = JoinResponse | SyncResponse
Record = tuple[GroupMetadataKey, GroupMetadataValue | None]


# What one call produced: answers to parked or current requests, records to append, and the
# continuation that runs once they are written (the coordinators' one result type).
Outcome = CoordinatorResult


class ClassicGroupBase:
    """A classic group's state, timers and rebalance steps; `ClassicGroup` adds the requests."""

    def __init__(self, group_id: str, config: ClassicGroupConfig, rng: random.Random, now_ms: int) -> None:
        self.group_id = group_id
        self.config = config
        self._rng = rng
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self._members: dict[str, ClassicMember] = {}
        self._order: JavaHashTable[str] = JavaHashTable(java_string_hash)
        self._static: dict[str, str] = {}  # group instance id -> member id
        self._pending_join: set[str] = set()  # KIP-394 ids handed out, not yet joined with
        self._pending_sync: set[str] = set()
        self._supported: dict[str, int] = {}  # protocol -> members supporting it
        self._new_member_added = False
        self._timers: dict[tuple[str, ...], tuple[int, int, Callable[[int], None]]] = {}
        self._timer_seq = 0
        self._out = Outcome()

    # ====================================================================== views

    @property
    def members(self) -> list[ClassicMember]:
        """Members in Kafka's HashMap order (the order the leader receives them in)."""
        return [self._members[m] for m in self._order]

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a member of a group of Kafka's consumers subscribes to ``topic``, read from the
        members' metadata of the selected protocol; a subscription that cannot be read counts as
        subscribed to everything (Kafka's ClassicGroup is as careful). Groups of other protocol
        types subscribe to nothing the coordinator knows of."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.protocol_name:
            return False
        for m in self.members:
            metadata = next((p.metadata for p in m.protocols if p.name == self.protocol_name), None)
            topics = None if metadata is None else subscription_topics(metadata)
            if topics is None or topic in topics:
                return True
        return False

    def member(self, member_id: str) -> ClassicMember | None:
        return self._members.get(member_id)

    def next_deadline(self) -> int | None:
        """The earliest timer, or 0 (due at once) while what timers set off on the way through
        another call waits in ``_out`` for `poll`: a call whose result cannot carry it (a
        TxnOffsetCommit's transactional write) leaves it there, and the runtime polls a shard
        only at its deadline."""
        if self._out.responses or self._out.records or self._out.then is not None or self._out.jobs:
            return 0
        return min((t[0] for t in self._timers.values()), default=None)

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self._members.values()) and not self._pending_join

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    # ================================================================= internals

    def _fire_due(self, now_ms: int) -> None:
        """Run every timer due by ``now_ms``, each at its own deadline, in deadline order. Every
        request calls this first, so it sees the group as Kafka's timers would have left it even
        when the shell's poll is late; their answers go out with the request's outcome."""
        # A timer set while this round fires runs in it only if time moved on (its deadline is past
        # the one that fired last): a join phase that waits another rebalance timeout of 0 ms waits
        # for the next round, as Kafka's timer would, instead of firing here forever.
        horizon = self._timer_seq
        last = None
        while True:
            due = [
                (d, seq, key)
                for key, (d, seq, _a) in self._timers.items()
                if d <= now_ms and (seq <= horizon or (last is not None and d > last))
            ]
            if not due:
                return
            deadline, _seq, key = min(due)
            _d, _s, action = self._timers.pop(key)
            last = deadline
            action(deadline)

    def _take(self) -> Outcome:
        out, self._out = self._out, Outcome()
        return out

    def _answer(self, token: object, response: Response) -> None:
        self._out.responses.append((token, response))

    def _schedule(self, key: tuple[str, ...], deadline_ms: int, action: Callable[[int], None]) -> None:
        self._timer_seq += 1
        self._timers[key] = (deadline_ms, self._timer_seq, action)

    def _cancel(self, key: tuple[str, ...]) -> None:
        self._timers.pop(key, None)

    def _append(self, records: list[Record], then: Callable[[type[kerr.KafkaError] | None, int], None]) -> None:
        """Records to write with this call's outcome; ``then`` runs once they are written, and
        what it answers or writes goes out as the continuation's result."""

        def written(error: type[kerr.KafkaError] | None, now_ms: int) -> Outcome:
            then(error, now_ms)
            return self._take()

        self._out.records.extend(records)
        self._out.then = chain(self._out.then, written)

    def _transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id} cannot move from {self.state.value} to {state.value}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = now_ms

    def _heartbeat_deadline(self, member: ClassicMember, now_ms: int, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        mid = member.member_id
        self._schedule(("hb", mid), now_ms + timeout, lambda t: self._expire_heartbeat(mid, t))

    def _supports(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self._supported.get(p.name, 0) == len(self._members) for p in protocols
        )

    def _count_protocols(self, member: ClassicMember, delta: int) -> None:
        for p in member.protocols:  # per entry, as Kafka counts (a name listed twice counts twice)
            self._supported[p.name] = self._supported.get(p.name, 0) + delta

    def _add(self, member: ClassicMember, token: object | None) -> None:
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._order.add(member.member_id)
        self._count_protocols(member, +1)
        member.join_waiter = token
        self._pending_join.discard(member.member_id)

    def _remove(self, member_id: str) -> None:
        member = self._members.pop(member_id, None)
        if member is not None:
            self._order.remove(member_id)
            self._count_protocols(member, -1)
            if member.group_instance_id is not None:
                self._static.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self._order), None)
        self._pending_join.discard(member_id)
        self._pending_sync.discard(member_id)

    def _complete_join(self, member: ClassicMember, response: JoinResponse) -> None:
        if member.join_waiter is not None:
            self._answer(member.join_waiter, response)
            member.join_waiter = None

    def _complete_sync(self, member: ClassicMember, response: SyncResponse) -> None:
        if member.sync_waiter is not None:
            self._answer(member.sync_waiter, response)
            member.sync_waiter = None

    def _joined_members(self) -> tuple[JoinedMember, ...]:
        assert self.protocol_name is not None
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members
        )

    def _join_response(self, member_id: str, *, with_members: bool, skip: bool = False) -> JoinResponse:
        return JoinResponse(
            None,
            member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            skip,
            self._joined_members() if with_members else (),
        )

    def _validate_member(self, member_id: str, instance_id: str | None) -> type[kerr.KafkaError] | None:
        if instance_id is not None:
            existing = self._static.get(instance_id)
            if existing is None:
                return kerr.UnknownMemberIdError
            if existing != member_id:
                return kerr.FencedInstanceIdError
        if member_id not in self._members:
            return kerr.UnknownMemberIdError
        return None

    def _accepts(self, member_id: str) -> bool:
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            m = self._members.get(member_id)
            awaiting = sum(1 for x in self._members.values() if x.awaiting_join)
            return (m is not None and m.awaiting_join) or awaiting < self.config.max_size
        return member_id in self._members or len(self._members) < self.config.max_size

    def metadata_record(self, assignment: dict[str, bytes] | None = None) -> Record:
        """The group's GroupMetadata record: members with their assignment (``assignment`` when
        given, else what each member holds)."""
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name) if self.protocol_name else b"",
                assignment.get(m.member_id, b"") if assignment is not None else m.assignment,
            )
            for m in self.members
        )
        value = GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp_ms,
            members,
        )
        return (GroupMetadataKey(self.group_id), value)

    def _select_protocol(self) -> str:
        candidates = {name for name, n in self._supported.items() if n == len(self._members)}
        votes: JavaHashTable[str] = JavaHashTable(java_string_hash)
        counts: dict[str, int] = {}
        for m in self.members:
            choice = m.vote(candidates)
            votes.add(choice)
            counts[choice] = counts.get(choice, 0) + 1
        best: str | None = None
        for name in votes:  # the first of the most voted, in HashMap order (Stream.max keeps the first)
            if best is None or counts[name] > counts[best]:
                best = name
        assert best is not None
        return best

    # =================================================================== rebalance

    def _maybe_prepare_or_complete(self, now_ms: int) -> None:
        if self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(now_ms)
        else:
            self._maybe_complete_join_phase(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:  # the assignment in flight is void
            for m in self._members.values():
                m.assignment = b""
            self._propagate_assignment(kerr.RebalanceInProgressError, now_ms)
        self._pending_sync.clear()  # Kafka's removeSyncExpiration
        self._cancel(("sync",))
        initial = self.state is GroupState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(self.rebalance_timeout_ms - delay, 0)
            self._schedule(("join",), now_ms + delay, lambda t: self._initial_rebalance_due(delay, remaining, t))
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)
        if not initial:
            if self.has_all_members_joined():
                self._complete_join_phase(now_ms)
            else:
                self._schedule(("join",), now_ms + self.rebalance_timeout_ms, self._complete_join_phase)

    def _initial_rebalance_due(self, delay_ms: int, remaining_ms: int, now_ms: int) -> None:
        if self._new_member_added and remaining_ms != 0:
            self._new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule(
                ("join",), now_ms + new_delay, lambda t: self._initial_rebalance_due(new_delay, new_remaining, t)
            )
        else:
            self._complete_join_phase(now_ms)

    def _maybe_complete_join_phase(self, now_ms: int) -> None:
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self.previous_state is not GroupState.EMPTY
            and self.has_all_members_joined()
        ):
            self._complete_join_phase(now_ms)

    def _complete_join_phase(self, now_ms: int) -> None:
        self._cancel(("join",))
        for m in [m for m in self.members if not m.awaiting_join and m.group_instance_id is None]:
            self._remove(m.member_id)
            self._cancel(("hb", m.member_id))
        if self.state is GroupState.DEAD:
            return
        if not self._elect_joined_leader() and self._members:
            # no member rejoined: try again after another rebalance timeout
            self._schedule(("join",), now_ms + self.rebalance_timeout_ms, self._complete_join_phase)
            return
        self.generation_id += 1
        self._pending_sync.clear()
        if not self._members:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, now_ms)
            self._append([self.metadata_record({})], lambda _err, _t: None)
            return
        self.protocol_name = self._select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for m in self.members:
            is_leader = m.member_id == self.leader_id
            self._complete_join(m, self._join_response(m.member_id, with_members=is_leader))
            self._heartbeat_deadline(m, now_ms)
            m.is_new = False
            self._pending_sync.add(m.member_id)
        generation = self.generation_id
        self._schedule(
            ("sync",), now_ms + self.rebalance_timeout_ms, lambda t: self._expire_pending_sync(generation, t)
        )

    def _elect_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self._members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members:
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def _expire_pending_sync(self, generation: int, now_ms: int) -> None:
        if generation != self.generation_id:
            return
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and self._pending_sync:
            for member_id in list(self._pending_sync):
                self._remove(member_id)
                self._cancel(("hb", member_id))
            self._prepare_rebalance(now_ms)

    def _propagate_assignment(self, error: type[kerr.KafkaError] | None, now_ms: int) -> None:
        """Answer every parked SyncGroup; each answered member's session starts again (Kafka's
        propagateAssignment: a member whose deadline passed while it waited is not forgotten)."""
        for m in self.members:
            if m.sync_waiter is None:
                continue
            self._complete_sync(
                m,
                SyncResponse(
                    error,
                    self.protocol_type if error is None else None,
                    self.protocol_name if error is None else None,
                    m.assignment,
                ),
            )
            self._heartbeat_deadline(m, now_ms)

    def _expire_heartbeat(self, member_id: str, now_ms: int) -> None:
        if self.state is GroupState.DEAD:
            return
        if member_id in self._pending_join:
            self._remove(member_id)
            if self.state is GroupState.PREPARING_REBALANCE and self.has_all_members_joined():
                self._complete_join_phase(now_ms)
            return
        member = self._members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            self._remove_member(member, now_ms)

    def _remove_member(self, member: ClassicMember, now_ms: int) -> None:
        self._complete_join(member, JoinResponse(kerr.UnknownMemberIdError, UNKNOWN_MEMBER_ID))
        self._remove(member.member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_or_complete(now_ms)
        elif self.state is GroupState.PREPARING_REBALANCE and self.has_all_members_joined():
            self._complete_join_phase(now_ms)
