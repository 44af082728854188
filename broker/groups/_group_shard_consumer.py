"""The consumer groups (KIP-848) of one ``__consumer_offsets`` partition (`ConsumerGroups`, a
collaborator of `GroupShard` that owns them): ConsumerGroupHeartbeat and ConsumerGroupDescribe, the
members' timers, and loading the groups' records.

Unlike a classic group, a consumer group changes only by replaying its records: a heartbeat's
records are replayed at once (the next request sees them, as in Kafka, whose in-memory state runs
ahead of the log) and the answer waits until they are committed. Should the append fail, the state
has run ahead of the log: the answer is the append's error and the shard asks to be reloaded from
the log (``reload``), which is what Kafka's reverting its timeline to the committed offset amounts
to.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from kraftlog.broker.coordinator import coordinator_error
from kraftlog.broker.groups._group_consumer import ConsumerGroup, Record, TopicLookup, TopicNames, no_topic_names
from kraftlog.broker.groups._group_consumer_types import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupConfig,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResponse,
)
from kraftlog.broker.groups._group_records import GroupKey, GroupValue
from kraftlog.broker.groups._group_records_consumer import (
    Assignment,
    ConsumerGroupMetadataKey,
    ConsumerKey,
    ConsumerValue,
)
from kraftlog.broker.groups._group_regex import regex_error
from kraftlog.broker.groups._group_shard_types import ShardOutcome
from kraftlog.common import errors as kerr

__all__ = ["ConsumerGroups", "ConsumerGroupDescription", "ConsumerMemberDescription", "validate_heartbeat"]

# group id -> whether a classic group of that id keeps a consumer group from being made (it has
# members); else the records that delete the empty classic group (which the shard drops)
ClassicBlocks = Callable[[str], tuple[bool, list[tuple[GroupKey, GroupValue | None]]]]

Error = type[kerr.KafkaError] | None


@dataclass(frozen=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    error: Error
    state: str = ConsumerGroupState.DEAD.value
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[ConsumerMemberDescription, ...] = ()


def validate_heartbeat(req: HeartbeatRequest, assignors: tuple[str, ...]) -> kerr.KafkaError | None:
    """Kafka's checks of a ConsumerGroupHeartbeat that depend on no group."""
    if not req.group_id:
        return kerr.InvalidRequestError("GroupId can't be empty.")
    if req.instance_id == "":
        return kerr.InvalidRequestError("InstanceId can't be empty.")
    if req.rack_id == "":
        return kerr.InvalidRequestError("RackId can't be empty.")
    if req.subscribed_topic_regex:
        invalid = regex_error(req.subscribed_topic_regex)
        if invalid is not None:
            return invalid
    if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
        if not req.member_id:
            return kerr.InvalidRequestError("MemberId can't be empty.")
    elif req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return kerr.InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            return kerr.InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        if not req.subscribed_topic_names and not req.subscribed_topic_regex:
            return kerr.InvalidRequestError(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if not req.member_id:
            return kerr.InvalidRequestError("MemberId can't be empty.")
        if req.instance_id is None:
            return kerr.InvalidRequestError("InstanceId can't be null.")
    else:
        return kerr.InvalidRequestError("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        return kerr.UnsupportedAssignorError(
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}."
        )
    return None


class ConsumerGroups:
    """The consumer groups of one shard, with their writes in flight and the answers waiting on
    them (see the module docstring)."""

    def __init__(self, config: ConsumerGroupConfig, rng: random.Random, classic_blocks: ClassicBlocks) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self._config = config
        self._rng = rng
        self._classic_blocks = classic_blocks
        # consumer-group writes not yet committed, and the answers that wait for them: an answer
        # that wrote nothing may still show state those writes put in memory (Kafka answers it
        # once the last written offset is committed, too)
        self._writes = 0
        self._parked: list[tuple[object, HeartbeatRequest, HeartbeatResponse]] = []

    def heartbeat(
        self,
        req: HeartbeatRequest,
        token: object,
        now_ms: int,
        lookup: TopicLookup,
        topic_names: TopicNames = no_topic_names,
        group_config: ConsumerGroupConfig | None = None,
    ) -> ShardOutcome:
        """ConsumerGroupHeartbeat: answered once the records it wrote are committed.
        ``group_config``: the group's own settings (its config resource), which it keeps from
        then on (timers set after loading included); None: the broker's."""
        config = self._config
        refused = validate_heartbeat(req, config.assignors)
        if refused is not None:
            return ShardOutcome([(token, _failed(req, refused))])
        group = self.groups.get(req.group_id)
        prelude: list[tuple[GroupKey, GroupValue | None]] = []
        if group is None:
            if req.member_epoch != 0:
                error: kerr.KafkaError = kerr.UnknownMemberIdError(
                    f"group {req.group_id} has no member {req.member_id}"
                )
                if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                    error = kerr.GroupIdNotFoundError(f"group {req.group_id} is not a consumer group")
                return ShardOutcome([(token, _failed(req, error))])
            blocked, prelude = self._classic_blocks(req.group_id)  # an empty classic group is replaced
            if blocked:
                error = kerr.GroupIdNotFoundError(f"group {req.group_id} is a classic group with members")
                return ShardOutcome([(token, _failed(req, error))])
            group = ConsumerGroup(req.group_id, config, self._rng)
        if group_config is not None:
            group.config = replace(group_config, assignors=config.assignors, max_size=config.max_size)
        try:
            records, response = group.heartbeat(req, now_ms, lookup, topic_names)
        except kerr.KafkaError as err:
            return ShardOutcome([(token, _failed(req, err))])
        self.groups[req.group_id] = group
        for key, value in records:
            group.replay(key, value)
        written: list[tuple[GroupKey, GroupValue | None]] = [*prelude, *records]
        if not written:
            if self._writes:
                self._parked.append((token, req, response))
                return ShardOutcome()
            return ShardOutcome([(token, response)])
        self._writes += 1
        return ShardOutcome([], written, self._answer_after(token, req, response))

    def _answer_after(
        self, token: object, req: HeartbeatRequest, response: HeartbeatResponse
    ) -> Callable[[Error, int], ShardOutcome]:
        def then(error: Error, _t: int) -> ShardOutcome:
            out = self._write_done(error)
            if error is None:
                out.responses.insert(0, (token, response))
            else:
                failed = coordinator_error(error)("the group's records were not written")
                out.responses.insert(0, (token, _failed(req, failed)))
            return out

        return then

    def _write_done(self, error: Error) -> ShardOutcome:
        """One consumer-group write finished (in order); when none is left, the parked answers go
        (with the write's error when it failed: what they saw was never committed)."""
        self._writes -= 1
        out = ShardOutcome(reload=error is not None)
        if error is not None or not self._writes:
            parked, self._parked = self._parked, []
            for token, req, response in parked:
                if error is None:
                    out.responses.append((token, response))
                else:
                    out.responses.append(
                        (token, _failed(req, coordinator_error(error)("the group's state was not written")))
                    )
        return out

    def poll(self, now_ms: int) -> ShardOutcome:
        """Carry out the regex refreshes heartbeats scheduled, and fence the members whose session
        or rebalance timeout ran out: their records (replayed already), with the continuation
        that reloads the shard should they not be written."""
        records: list[Record] = []
        for group in list(self.groups.values()):
            refreshed = group.refresh_regexes(now_ms)
            for key, value in refreshed:
                group.replay(key, value)
            records.extend(refreshed)
            for member_id in group.expired_members(now_ms):
                fenced = group.fence(member_id)
                for key, value in fenced:
                    group.replay(key, value)
                records.extend(fenced)
        if not records:
            return ShardOutcome()
        self._writes += 1
        return ShardOutcome(records=list(records), then=lambda error, _t: self._write_done(error))

    def next_deadline(self) -> int | None:
        return min((d for g in self.groups.values() if (d := g.next_deadline()) is not None), default=None)

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """Loading: one consumer group record in log order."""
        group = self.groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = ConsumerGroup(key.group, self._config, self._rng)
            group.regexes.from_log = True
            self.groups[key.group] = group
        group.replay(key, value)
        if isinstance(key, ConsumerGroupMetadataKey) and value is None:
            del self.groups[key.group]

    def describe(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe of one group (GROUP_ID_NOT_FOUND when it is not a consumer group)."""
        g = self.groups.get(group_id)
        if g is None or g.dead:
            return ConsumerGroupDescription(group_id, kerr.GroupIdNotFoundError)
        members = tuple(
            ConsumerMemberDescription(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.subscribed_topic_regex,
                m.assigned,
                g.target.get(m.member_id, ()),
            )
            for _id, m in sorted(g.members.items())
        )
        return ConsumerGroupDescription(
            group_id,
            None,
            g.state.value,
            g.group_epoch,
            g.assignment_epoch,
            g.preferred_assignor(g.members),
            members,
        )


def _failed(req: HeartbeatRequest, error: kerr.KafkaError) -> HeartbeatResponse:
    return HeartbeatResponse(type(error), str(error), req.member_id, req.member_epoch)
