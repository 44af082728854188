"""The share groups (KIP-932) of one ``__consumer_offsets`` partition (`ShareGroups`, a collaborator
of `GroupShard` that owns them): ShareGroupHeartbeat and ShareGroupDescribe, the members' session
timers, the share-partition state initializations, and loading the groups' records.

As with consumer groups (`_group_shard_consumer`), a heartbeat's records are replayed at once and
its answer waits until they are committed; should the append fail, the answer is the append's
error and the shard asks to be reloaded from its log. An answer that wrote nothing waits for the
writes before it (what it saw may not be committed yet).

Initializations follow Kafka's GroupCoordinatorService: the heartbeat that marks partitions
"initializing" hands out a `ShareInitJob` once its records are committed; the coordinator has the
share coordinator initialize their state, then `initialized` (or `uninitialized`, on failure)
writes the outcome, and the members' next heartbeats assign the partitions.

A group id is one group: a share group cannot be made where a classic or consumer group lives
(GROUP_ID_NOT_FOUND, "is not a share group"), as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kraftlog.broker.coordinator import coordinator_error, merge
from kraftlog.broker.groups._group_records_consumer import Assignment
from kraftlog.broker.groups._group_records_share import ShareGroupMetadataKey, ShareKey, ShareValue
from kraftlog.broker.groups._group_shard_types import ShardOutcome
from kraftlog.broker.groups._group_share import InitMap, ShareGroup, ShareRecord, TopicLookup
from kraftlog.broker.groups._group_share_types import (
    LEAVE_EPOCH,
    ShareGroupConfig,
    ShareGroupState,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareInitJob,
    ShareMembersGone,
    validate_share_heartbeat,
)
from kraftlog.common import errors as kerr

__all__ = ["ShareGroups", "ShareGroupDescription", "ShareMemberDescription"]

Error = type[kerr.KafkaError] | None


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Assignment


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    error: Error
    message: str = ""
    state: str = ShareGroupState.DEAD.value
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[ShareMemberDescription, ...] = ()


class ShareGroups:
    """The share groups of one shard, with their writes in flight and the answers waiting on them
    (see the module docstring). ``other_group``: whether a classic or consumer group has the id."""

    def __init__(self, config: ShareGroupConfig, other_group: Callable[[str], bool]) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.config = config
        self._other_group = other_group
        self._writes = 0
        self._parked: list[tuple[object, ShareHeartbeatRequest, ShareHeartbeatResponse]] = []

    def live(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else group

    def heartbeat(
        self,
        req: ShareHeartbeatRequest,
        token: object,
        now_ms: int,
        lookup: TopicLookup,
        group_config: ShareGroupConfig | None = None,
    ) -> ShardOutcome:
        """ShareGroupHeartbeat: answered once the records it wrote are committed. ``group_config``:
        the group's own session timeout and heartbeat interval (None: the broker's)."""
        refused = validate_share_heartbeat(req)
        if refused is not None:
            return ShardOutcome([(token, _failed(req, refused))])
        group = self.live(req.group_id)
        if group is None:
            if self._other_group(req.group_id):
                error: kerr.KafkaError = kerr.GroupIdNotFoundError(f"Group {req.group_id} is not a share group.")
                return ShardOutcome([(token, _failed(req, error))])
            if req.member_epoch != 0:
                error = kerr.GroupIdNotFoundError(f"Share group {req.group_id} not found.")
                return ShardOutcome([(token, _failed(req, error))])
            group = ShareGroup(req.group_id, group_config or self.config)
        elif group_config is not None:
            group.config = group_config
        try:
            records, response, to_init = group.heartbeat(req, now_ms, lookup)
        except kerr.KafkaError as err:
            return ShardOutcome([(token, _failed(req, err))])
        self.groups[req.group_id] = group
        for key, value in records:
            group.replay(key, value)
        if not records:
            if self._writes:
                self._parked.append((token, req, response))
                return ShardOutcome()
            return ShardOutcome([(token, response)])
        self._writes += 1
        job = None
        if to_init:
            topics = tuple((t, name, tuple(sorted(ps))) for t, (name, ps) in sorted(to_init.items()))
            job = ShareInitJob(req.group_id, group.group_epoch, topics)
        gone = ShareMembersGone(req.group_id, (req.member_id,)) if req.member_epoch == LEAVE_EPOCH else None

        def then(error: Error, _t: int) -> ShardOutcome:
            out = self._write_done(error)
            if error is None:
                out.responses.insert(0, (token, response))
                if job is not None:
                    out.jobs.append(job)
                if gone is not None:
                    out.jobs.append(gone)
            else:
                failed = coordinator_error(error)("the group's records were not written")
                out.responses.insert(0, (token, _failed(req, failed)))
            return out

        return ShardOutcome([], list(records), then)

    def _write_done(self, error: Error) -> ShardOutcome:
        """One share-group write finished (in order); when none is left, the parked answers go
        (with the write's error when it failed)."""
        self._writes -= 1
        out = ShardOutcome(reload=error is not None)
        if error is not None or not self._writes:
            parked, self._parked = self._parked, []
            for token, req, response in parked:
                if error is None:
                    out.responses.append((token, response))
                else:
                    failed = coordinator_error(error)("the group's state was not written")
                    out.responses.append((token, _failed(req, failed)))
        return out

    def _write(self, group: ShareGroup, records: list[ShareRecord]) -> ShardOutcome:
        """Records of a timer or an initialization outcome: replayed now, reloaded if not written."""
        for key, value in records:
            group.replay(key, value)
        if not records:
            return ShardOutcome()
        self._writes += 1
        return ShardOutcome(records=list(records), then=lambda error, _t: self._write_done(error))

    def initialized(self, job: ShareInitJob, failed: dict[str, set[int]], names: Callable[[str], str]) -> ShardOutcome:
        """The share coordinator answered ``job``: the partitions it initialized become assignable;
        those in ``failed`` leave "initializing" to be asked for again."""
        group = self.live(job.group_id)
        if group is None:
            return ShardOutcome()
        done = {t: ps - failed.get(t, set()) for t, ps in job.partitions().items()}
        done = {t: ps for t, ps in done.items() if ps}
        out = self._write(group, group.initialized_records(done, names))
        failed_now = {t: ps for t, ps in failed.items() if ps}
        if failed_now:
            merge(out, self._write(group, group.uninitialized_records(failed_now)))
        return out

    def poll(self, now_ms: int, lookup: TopicLookup) -> ShardOutcome:
        """Fence the members whose session ran out (each fence replayed before the next); once
        written, their records go back (`ShareMembersGone`)."""
        records: list[ShareRecord] = []
        gone: list[ShareMembersGone] = []
        for group in list(self.groups.values()):
            expired = group.expired_members(now_ms)
            for member_id in expired:
                fenced = group.fence(member_id, lookup)
                for key, value in fenced:
                    group.replay(key, value)
                records.extend(fenced)
            if expired:
                gone.append(ShareMembersGone(group.group_id, tuple(expired)))
        if not records:
            return ShardOutcome()
        self._writes += 1

        def then(error: Error, _t: int) -> ShardOutcome:
            out = self._write_done(error)
            if error is None:
                out.jobs.extend(gone)
            return out

        return ShardOutcome(records=records, then=then)

    def next_deadline(self) -> int | None:
        return min((d for g in self.groups.values() if (d := g.next_deadline()) is not None), default=None)

    def replay(self, key: ShareKey, value: ShareValue | None) -> None:
        """Loading: one share group record in log order."""
        group = self.groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = ShareGroup(key.group, self.config)
            self.groups[key.group] = group
        group.replay(key, value)
        if isinstance(key, ShareGroupMetadataKey) and value is None:
            del self.groups[key.group]

    def start_sessions(self, now_ms: int) -> None:
        for group in self.groups.values():
            group.start_sessions(now_ms)

    def delete(self, group_id: str, token: object) -> tuple[Error, ShardOutcome]:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else its tombstones
        (replayed now; the shard is reloaded should they not be written); ``token`` gets
        ``((group_id, error),)`` once they are written."""
        group = self.live(group_id)
        if group is None:
            return kerr.GroupIdNotFoundError, ShardOutcome()
        if group.members:
            return kerr.NonEmptyGroupError, ShardOutcome()
        records = group.delete_records()
        for key, value in records:
            self.replay(key, value)
        self._writes += 1

        def applied(error: Error, _t: int) -> ShardOutcome:
            out = self._write_done(error)
            out.responses.insert(0, (token, ((group_id, error),)))
            return out

        return None, ShardOutcome(records=list(records), then=applied)

    def offsets_alterable(self, group_id: str) -> tuple[Error, str]:
        """Whether Alter/DeleteShareGroupOffsets may change the group's share partitions: only a
        share group without members (Kafka: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP)."""
        group = self.live(group_id)
        if group is None:
            kind = "is not a share group" if self._other_group(group_id) else "not found"
            return kerr.GroupIdNotFoundError, f"Group {group_id} {kind}."
        if group.members:
            return kerr.NonEmptyGroupError, f"The group {group_id} has active members."
        return None, ""

    def offsets_changed(
        self, group_id: str, initialized: InitMap, forgotten: set[str], token: object
    ) -> tuple[Error, ShardOutcome]:
        """The share coordinator has applied an alter (``initialized``) or a delete (``forgotten``
        topics): the group's initialized-topics record says so, once more checked empty (a member
        may have joined meanwhile); ``token`` gets the write's error once written."""
        error, _message = self.offsets_alterable(group_id)
        group = self.live(group_id)
        if error is not None or group is None:
            return error, ShardOutcome()
        records = group.offsets_records(initialized, forgotten)
        if not records:
            return None, ShardOutcome([(token, None)])
        out = self._write(group, records)
        then = out.then
        assert then is not None

        def written(err: Error, t: int) -> ShardOutcome:
            done = then(err, t)
            done.responses.insert(0, (token, err))
            return done

        out.then = written
        return None, out

    def describe(self, group_id: str) -> ShareGroupDescription:
        """ShareGroupDescribe of one group (GROUP_ID_NOT_FOUND when it is not a share group)."""
        g = self.live(group_id)
        if g is None:
            if self._other_group(group_id):
                return ShareGroupDescription(
                    group_id, kerr.GroupIdNotFoundError, f"Group {group_id} is not a share group."
                )
            return ShareGroupDescription(group_id, kerr.GroupIdNotFoundError, f"Group {group_id} not found.")
        members = tuple(
            ShareMemberDescription(
                m.member_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.assigned,
            )
            for _id, m in sorted(g.members.items())
        )
        return ShareGroupDescription(
            group_id, None, "", g.state.value, g.group_epoch, g.assignment_epoch, g.config.assignors[0], members
        )


def _failed(req: ShareHeartbeatRequest, error: kerr.KafkaError) -> ShareHeartbeatResponse:
    return ShareHeartbeatResponse(type(error), str(error), req.member_id, req.member_epoch)
