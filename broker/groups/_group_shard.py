"""One partition of ``__consumer_offsets`` as its coordinator sees it: the groups it coordinates and
their committed offsets (Kafka's ``GroupCoordinatorShard``, classic groups).

Pure, like `ClassicGroup`: every call takes ``now_ms`` and returns a `CoordinatorResult` of answers
and records; the records of one call are appended together (acks=all) and the result's ``then``
then runs what waited on them. Committed offsets change along one path, `replay`: when a broker
loads the partition, and when an OffsetCommit's (or OffsetDelete's) records are committed, so
OffsetFetch never shows an offset that could still be lost. `loaded` then starts the members'
sessions.

Requests are checked here for what does not depend on a group (group id, session timeout bounds,
metadata size) and handed to the group; a group unknown to this shard is UNKNOWN_MEMBER_ID for
SyncGroup, Heartbeat and LeaveGroup, as in Kafka.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from kraftlog.broker.coordinator import coordinator_error, merge
from kraftlog.broker.groups._group_classic import ClassicGroup
from kraftlog.broker.groups._group_classic_types import (
    CONSUMER_PROTOCOL_TYPE,
    GroupState,
    JoinRequest,
    JoinResponse,
    SyncRequest,
    SyncResponse,
)
from kraftlog.broker.groups._group_consumer import ConsumerGroup, TopicLookup, TopicNames, no_topic_names
from kraftlog.broker.groups._group_consumer_types import (
    ConsumerGroupConfig,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResponse,
)
from kraftlog.broker.groups._group_records import (
    GroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kraftlog.broker.groups._group_records_consumer import CONSUMER_KEY_TYPES
from kraftlog.broker.groups._group_records_share import SHARE_KEY_TYPES
from kraftlog.broker.groups._group_shard_consumer import ConsumerGroupDescription, ConsumerGroups
from kraftlog.broker.groups._group_shard_share import ShareGroupDescription, ShareGroups
from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest, TxnOffsets
from kraftlog.broker.groups._group_shard_types import (
    CommittedOffset,
    Error,
    GroupDescription,
    GroupListing,
    GroupShardConfig,
    OffsetCommitRequest,
    OffsetCommitResponse,
    ShardOutcome,
)
from kraftlog.broker.groups._group_share import TopicLookup as ShareTopicLookup
from kraftlog.broker.groups._group_share_types import SHARE_PROTOCOL_TYPE, ShareGroupConfig, ShareHeartbeatRequest
from kraftlog.common import errors as kerr

__all__ = [
    "GroupShard",
    "GroupShardConfig",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "CommittedOffset",
    "GroupListing",
    "GroupDescription",
    "ShardOutcome",
]

INVALID_OFFSET = -1


class GroupShard:
    """Groups and offsets of one ``__consumer_offsets`` partition (see the module docstring)."""

    def __init__(
        self,
        partition: int,
        config: GroupShardConfig,
        rng: random.Random,
        now_ms: int,
        topic_lookup: ShareTopicLookup | None = None,
    ) -> None:
        """``topic_lookup``: topic name -> (id, partition count) in the broker's current metadata,
        for what timers do to share groups (a fenced member's group rehashes its topics)."""
        self.partition = partition
        self.config = config
        self._rng = rng
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer = ConsumerGroups(config.consumer, rng, self._classic_blocks)
        self.share = ShareGroups(config.share, self._not_share)
        self._topic_lookup: ShareTopicLookup = topic_lookup or (lambda _name: None)
        self.txn_offsets = TxnOffsets(self._txn_member_error)
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        self._next_expiry_ms = now_ms + config.offsets_retention_check_interval_ms

    # ============================================================ collaborators

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        """The consumer groups (KIP-848) of this partition, owned by `consumer`."""
        return self.consumer.groups

    def consumer_heartbeat(
        self,
        req: HeartbeatRequest,
        token: object,
        now_ms: int,
        lookup: TopicLookup,
        topic_names: TopicNames = no_topic_names,
        group_config: ConsumerGroupConfig | None = None,
    ) -> ShardOutcome:
        """ConsumerGroupHeartbeat: answered once the records it wrote are committed;
        ``topic_names`` gives every topic's name, for members that subscribe by regex;
        ``group_config`` the group's own session timeout and heartbeat interval."""
        if self.share.live(req.group_id) is not None:  # Kafka: not a consumer group
            refused = kerr.GroupIdNotFoundError(f"Group {req.group_id} is not a consumer group.")
            answer = HeartbeatResponse(type(refused), str(refused), req.member_id, req.member_epoch)
            return ShardOutcome([(token, answer)])
        return self.consumer.heartbeat(req, token, now_ms, lookup, topic_names, group_config)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        if self.share.live(group_id) is not None:
            return ConsumerGroupDescription(group_id, kerr.GroupIdNotFoundError)
        return self.consumer.describe(group_id)

    def share_heartbeat(
        self,
        req: ShareHeartbeatRequest,
        token: object,
        now_ms: int,
        lookup: ShareTopicLookup,
        group_config: ShareGroupConfig | None = None,
    ) -> ShardOutcome:
        """ShareGroupHeartbeat (KIP-932): answered once the records it wrote are committed."""
        return self.share.heartbeat(req, token, now_ms, lookup, group_config)

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        return self.share.describe(group_id)

    def _not_share(self, group_id: str) -> bool:
        """Whether a classic or consumer group has ``group_id`` (a share group cannot be made there)."""
        group = self.groups.get(group_id)
        consumer = self.consumer_groups.get(group_id)
        return (group is not None and group.state is not GroupState.DEAD) or (
            consumer is not None and not consumer.dead
        )

    def txn_commit_offsets(self, request: TxnOffsetCommitRequest, token: object, now_ms: int) -> ShardOutcome:
        """TxnOffsetCommit: written in the producer's transaction, pending until it ends."""
        return self.txn_offsets.commit(request, token, now_ms)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended (its marker is in this partition): its pending
        offsets here are committed (through `replay`), or dropped."""
        for key, value in self.txn_offsets.complete(producer_id, commit):
            self.replay(key, value, value.commit_timestamp_ms)

    def replay_txn_offset(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Loading: an offset record of a transactional batch (pending until its marker)."""
        self.txn_offsets.replay(producer_id, key, value)

    def unstable_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with transactional offsets pending (OffsetFetch with
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for each, as Kafka does)."""
        return self.txn_offsets.pending_partitions(group_id)

    def unstable(self, group_id: str, partitions: Iterable[tuple[str, int]] | None) -> bool:
        """Whether any of the group's partitions (all, with None) has transactional offsets pending."""
        return self.txn_offsets.unstable(group_id, partitions)

    def _txn_member_error(self, request: TxnOffsetCommitRequest, now_ms: int) -> Error:
        """Kafka's membership checks of a transactional commit (none for a simple group or when
        the producer sends no generation)."""
        if self.share.live(request.group_id) is not None:
            return kerr.GroupIdNotFoundError  # Kafka: a share group takes no offsets
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            if request.generation_id < 0 and not request.member_id:
                return None
            refused = consumer.validate_offset_commit(request.member_id, request.generation_id)
            return None if refused is None else type(refused)
        group = self.groups.get(request.group_id)
        if group is None or request.generation_id < 0:
            return None
        error: Error = group.validate_offset_commit(
            request.member_id, request.group_instance_id, request.generation_id, now_ms
        )
        return error

    def _classic_blocks(self, group_id: str) -> tuple[bool, list[tuple[GroupKey, GroupValue | None]]]:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return False, []
        if group.members or group.state is not GroupState.EMPTY:
            return True, []
        del self.groups[group_id]
        return False, [(GroupMetadataKey(group_id), None)]

    def _new_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, self.config.classic, self._rng, now_ms)
        self.groups[group_id] = group
        return group

    # ============================================================ membership calls

    def join(self, request: JoinRequest, token: object, now_ms: int) -> ShardOutcome:
        if not request.group_id:
            return ShardOutcome([(token, JoinResponse(kerr.InvalidGroupIdError, request.member_id))])
        cfg = self.config.classic
        if not cfg.min_session_timeout_ms <= request.session_timeout_ms <= cfg.max_session_timeout_ms:
            return ShardOutcome([(token, JoinResponse(kerr.InvalidSessionTimeoutError, request.member_id))])
        prelude: list[tuple[GroupKey, GroupValue | None]] = []
        if self.share.live(request.group_id) is not None:  # Kafka: the group is of another protocol
            return ShardOutcome([(token, JoinResponse(kerr.InconsistentGroupProtocolError, ""))])
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            if consumer.members:
                refused = JoinResponse(kerr.InconsistentGroupProtocolError, request.member_id)
                return ShardOutcome([(token, refused)])
            del self.consumer_groups[request.group_id]  # an empty consumer group becomes a classic one
            prelude = list(consumer.delete_records())
        group = self.groups.get(request.group_id)
        is_new = group is None
        if group is None:
            if request.member_id:  # a member id for a group this coordinator does not know
                return ShardOutcome([(token, JoinResponse(kerr.UnknownMemberIdError, request.member_id))])
            group = self._new_group(request.group_id, now_ms)
        out = group.join(request, token, now_ms)
        if is_new and not out.records:  # Kafka stores the new (empty) group at once
            out.records.append(group.new_group_record())

            def failed(error: Error, _t: int) -> ShardOutcome:
                if error is None:
                    return ShardOutcome()
                return ShardOutcome([(token, JoinResponse(coordinator_error(error), request.member_id))])

            out.then = failed
        if prelude:
            merge(out, ShardOutcome(records=prelude, then=lambda e, _t: ShardOutcome(reload=e is not None)))
        return out

    def sync(self, request: SyncRequest, token: object, now_ms: int) -> ShardOutcome:
        group = self.groups.get(request.group_id)
        if group is None or (group.state is GroupState.EMPTY and not group.members):
            return ShardOutcome([(token, SyncResponse(kerr.UnknownMemberIdError))])
        return group.sync(request, token, now_ms)

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> tuple[Error, ShardOutcome]:
        """Heartbeat: the member's error, and what timers that came due on the way set off."""
        group = self.groups.get(group_id)
        if group is None:
            return kerr.UnknownMemberIdError, ShardOutcome()
        error = group.heartbeat(member_id, group_instance_id, generation_id, now_ms)
        return error, group.poll(now_ms)

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[Error, list[tuple[str, str | None, Error]], ShardOutcome]:
        """LeaveGroup: the request's error (the group is unknown), each member's, and the outcome."""
        group = self.groups.get(group_id)
        if group is None:
            return kerr.UnknownMemberIdError, [], ShardOutcome()
        results, out = group.leave(members, now_ms)
        return None, results, out

    # ====================================================================== offsets

    def commit_offsets(self, request: OffsetCommitRequest, token: object, now_ms: int) -> ShardOutcome:
        """OffsetCommit: validated against the group, answered once the records are committed."""
        if not request.group_id:
            errors = tuple((t, p, kerr.InvalidGroupIdError) for t, p, *_rest in request.offsets)
            return ShardOutcome([(token, OffsetCommitResponse(errors))])
        if self.share.live(request.group_id) is not None:  # Kafka: a share group takes no offsets
            not_found: tuple[tuple[str, int, Error], ...] = tuple(
                (t, p, kerr.GroupIdNotFoundError) for t, p, *_rest in request.offsets
            )
            return ShardOutcome([(token, OffsetCommitResponse(not_found))])
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            refused_by = consumer.validate_offset_commit(request.member_id, request.generation_id)
            if refused_by is not None:
                refused = tuple((t, p, type(refused_by)) for t, p, *_rest in request.offsets)
                return ShardOutcome([(token, OffsetCommitResponse(refused))])
            return self._write_offsets(request, token, now_ms, ShardOutcome())
        group = self.groups.get(request.group_id)
        error: Error = None
        out = ShardOutcome()
        if group is None:
            if request.generation_id < 0:  # a "simple" group: committing is all it does
                group = self._new_group(request.group_id, now_ms)
                group.protocol_type = None
            else:
                error = kerr.IllegalGenerationError  # Kafka's answer before OffsetCommit v9
        if group is not None and error is None:
            error = group.validate_offset_commit(
                request.member_id, request.group_instance_id, request.generation_id, now_ms
            )
            out = group.poll(now_ms)  # what timers that came due on the way set off
        if error is not None:
            refused = tuple((t, p, error) for t, p, *_rest in request.offsets)
            out.responses.append((token, OffsetCommitResponse(refused)))
            return out
        return self._write_offsets(request, token, now_ms, out)

    def _write_offsets(
        self, request: OffsetCommitRequest, token: object, now_ms: int, out: ShardOutcome
    ) -> ShardOutcome:
        """The commit's records, after what ``out`` writes already; applied once committed."""
        expire = now_ms + request.retention_ms if request.retention_ms >= 0 else -1
        results: list[tuple[str, int, Error]] = []
        records: list[tuple[GroupKey, GroupValue | None]] = []
        for topic, partition, offset, leader_epoch, metadata in request.offsets:
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results.append((topic, partition, kerr.OffsetMetadataTooLargeError))
                continue
            value = OffsetCommitValue(offset, metadata, now_ms, leader_epoch, expire)
            records.append((OffsetCommitKey(request.group_id, topic, partition), value))
            results.append((topic, partition, None))
        if not records:
            out.responses.append((token, OffsetCommitResponse(tuple(results))))
            return out

        def committed(write_error: Error, now: int) -> ShardOutcome:
            if write_error is not None:
                failed = coordinator_error(write_error)
                answer = tuple((t, p, e if e is not None else failed) for t, p, e in results)
                return ShardOutcome([(token, OffsetCommitResponse(answer))])
            for key, value in records:
                self.replay(key, value, now)
            return ShardOutcome([(token, OffsetCommitResponse(tuple(results)))])

        # after whatever the group's due timers wrote, in one append
        merge(out, ShardOutcome(records=records, then=committed))
        return out

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None
    ) -> tuple[Error, list[CommittedOffset]]:
        """OffsetFetch: the committed offsets of ``partitions`` (-1 where none), or of every partition
        the group committed for (``partitions`` None); GROUP_ID_NOT_FOUND for a share group, as Kafka."""
        if self.share.live(group_id) is not None:
            return kerr.GroupIdNotFoundError, []
        group = self.groups.get(group_id)
        dead = group is not None and group.state is GroupState.DEAD
        stored = {} if dead else self.offsets.get(group_id, {})
        if partitions is None:
            keys: Iterable[tuple[str, int]] = sorted(stored)
        else:
            keys = partitions
        result = []
        for topic, partition in keys:
            v = stored.get((topic, partition))
            if v is None:
                result.append(CommittedOffset(topic, partition, INVALID_OFFSET))
            else:
                result.append(CommittedOffset(topic, partition, v.offset, v.leader_epoch, v.metadata))
        return None, result

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]], token: object, now_ms: int
    ) -> tuple[Error, list[tuple[str, int]], ShardOutcome]:
        """OffsetDelete, as Kafka's OffsetMetadataManager: the group's error (GROUP_ID_NOT_FOUND;
        NON_EMPTY_GROUP for a classic group with members that is not of Kafka's consumers), the
        partitions refused with GROUP_SUBSCRIBED_TO_TOPIC (their topic is subscribed to by a
        member: a consumer group's, or a classic consumer group's read from its members'
        subscriptions), and the outcome deleting the others' offsets."""
        consumer = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        subscribed_to: Callable[[str], bool]
        if consumer is not None:
            subscribed_to = consumer.is_subscribed_to
        elif group is None or group.state is GroupState.DEAD:
            return kerr.GroupIdNotFoundError, [], ShardOutcome()
        elif group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return kerr.NonEmptyGroupError, [], ShardOutcome()
        else:
            subscribed_to = group.is_subscribed_to
        refused = [(t, p) for t, p in partitions if subscribed_to(t)]
        stored = self.offsets.get(group_id, {})
        keys = [(t, p) for t, p in partitions if (t, p) in stored and (t, p) not in refused]
        return None, refused, self._tombstones(group_id, keys, token, delete_group=False)

    def _tombstones(
        self, group_id: str, keys: list[tuple[str, int]], token: object, *, delete_group: bool
    ) -> ShardOutcome:
        records: list[tuple[GroupKey, GroupValue | None]] = [(OffsetCommitKey(group_id, t, p), None) for t, p in keys]
        consumer = self.consumer_groups.get(group_id)
        if delete_group and consumer is not None:
            records.extend(consumer.delete_records())
        elif delete_group:
            records.append((GroupMetadataKey(group_id), None))
        if not records:
            return ShardOutcome([(token, ())])

        def applied(error: Error, t: int) -> ShardOutcome:
            if error is not None:
                return ShardOutcome([(token, ((group_id, error),))])
            for topic, partition in keys:
                self.replay(OffsetCommitKey(group_id, topic, partition), None, t)
            out = ShardOutcome([(token, ((group_id, None),))])
            if delete_group and group_id in self.groups:
                dead = self.groups.pop(group_id).mark_dead(t)
                out.responses.extend(dead.responses)
            if delete_group and group_id in self.consumer_groups and not self.consumer_groups[group_id].members:
                del self.consumer_groups[group_id]
            return out

        return ShardOutcome(records=records, then=applied)

    # ======================================================================= groups

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None) -> list[GroupListing]:
        """ListGroups: every live group, filtered by state and by type (case-insensitive, as Kafka)."""
        wanted_states = {s.lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        found: list[GroupListing] = []
        for group_id, g in self.groups.items():
            if g.state is not GroupState.DEAD:
                found.append(GroupListing(group_id, g.protocol_type or "", g.state.value, "classic"))
        for group_id, c in self.consumer_groups.items():
            if not c.dead:
                found.append(GroupListing(group_id, c.protocol_type, c.state.value, "consumer"))
        for group_id, sg in self.share.groups.items():
            if not sg.dead:
                found.append(GroupListing(group_id, SHARE_PROTOCOL_TYPE, sg.state.value, "share"))
        return sorted(
            (
                g
                for g in found
                if (wanted_states is None or g.state.lower() in wanted_states)
                and (wanted_types is None or g.group_type in wanted_types)
            ),
            key=lambda g: g.group_id,
        )

    def describe_group(self, group_id: str) -> GroupDescription:
        g = self.groups.get(group_id)
        if g is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        stable = g.state is GroupState.STABLE
        with_metadata = g.protocol_name is not None and g.state is not GroupState.PREPARING_REBALANCE
        members = tuple(
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(g.protocol_name) if with_metadata and g.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in g.members
        )
        return GroupDescription(group_id, g.state.value, g.protocol_type or "", g.protocol_name or "", members)

    def delete_group(self, group_id: str, token: object, now_ms: int) -> tuple[Error, ShardOutcome]:
        """DeleteGroups for one group: its offsets and its metadata get tombstones (a share group:
        NON_EMPTY_GROUP while it has members, as Kafka)."""
        if self.share.live(group_id) is not None:
            return self.share.delete(group_id, token)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return kerr.NonEmptyGroupError, ShardOutcome()
            keys = sorted(self.offsets.get(group_id, {}))
            return None, self._tombstones(group_id, keys, token, delete_group=True)
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return kerr.GroupIdNotFoundError, ShardOutcome()
        if g.state is not GroupState.EMPTY:
            return kerr.NonEmptyGroupError, ShardOutcome()
        keys = sorted(self.offsets.get(group_id, {}))
        return None, self._tombstones(group_id, keys, token, delete_group=True)

    # ============================================================ time and loading

    def next_deadline(self) -> int:
        """When `poll` has something to do next: a group's timer or the retention check."""
        group_deadlines = [d for g in self.groups.values() if (d := g.next_deadline()) is not None]
        consumer, share = self.consumer.next_deadline(), self.share.next_deadline()
        others = [d for d in (consumer, share) if d is not None]
        return min([self._next_expiry_ms, *group_deadlines, *others])

    def poll(self, now_ms: int) -> ShardOutcome:
        """Every group's due timers, and the offsets retention check when it is due."""
        out = ShardOutcome()
        for group in list(self.groups.values()):
            merge(out, group.poll(now_ms))
        merge(out, self.consumer.poll(now_ms))
        merge(out, self.share.poll(now_ms, self._topic_lookup))
        if now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
            merge(out, self._expire_offsets(now_ms))
        return out

    def _expire_offsets(self, now_ms: int) -> ShardOutcome:
        """Kafka's offsets retention: an Empty group's offsets go once the group has been empty for
        the retention time (or, with no record of when, since the commit); a simple group's (no
        protocol) since each commit; an offset with its own expire timestamp at that time. A group
        with no members and no offsets left is deleted."""
        out = ShardOutcome()
        retention = self.config.offsets_retention_ms
        for group_id, stored in sorted(self.offsets.items()):
            consumer = self.consumer_groups.get(group_id)
            if consumer is not None:
                self._expire_consumer_offsets(consumer, stored, now_ms, out)
                continue
            group = self.groups.get(group_id)
            if group is None or group.state is not GroupState.EMPTY:
                continue
            expired = []
            for key, v in sorted(stored.items()):
                if v.expire_timestamp_ms >= 0:
                    gone = now_ms >= v.expire_timestamp_ms
                else:
                    base = group.state_timestamp_ms if group.protocol_type is not None else v.commit_timestamp_ms
                    gone = now_ms - base >= retention
                if gone:
                    expired.append(key)
            if expired:
                delete_group = len(expired) == len(stored) and not group.members
                merge(out, self._tombstones(group_id, expired, None, delete_group=delete_group))
        # Kafka's cleanupGroupMetadata: an empty group with no offsets left is deleted
        for group_id, consumer in sorted(self.consumer_groups.items()):
            if consumer.state is ConsumerGroupState.EMPTY and not self.offsets.get(group_id):
                merge(out, self._tombstones(group_id, [], None, delete_group=True))
        for group_id, classic in sorted(self.groups.items()):
            if classic.state is GroupState.EMPTY and not classic.members and not self.offsets.get(group_id):
                merge(out, self._tombstones(group_id, [], None, delete_group=True))
        out.responses = [(t, r) for t, r in out.responses if t is not None]
        return out

    def _expire_consumer_offsets(
        self, group: ConsumerGroup, stored: dict[tuple[str, int], OffsetCommitValue], now_ms: int, out: ShardOutcome
    ) -> None:
        """Kafka's rule for a consumer group: an offset expires a retention time after its commit
        (or at its own expire timestamp) unless a member is subscribed to its topic."""
        expired = []
        for (topic, partition), v in sorted(stored.items()):
            if group.is_subscribed_to(topic):
                continue
            if v.expire_timestamp_ms >= 0:
                gone = now_ms >= v.expire_timestamp_ms
            else:
                gone = now_ms - v.commit_timestamp_ms >= self.config.offsets_retention_ms
            if gone:
                expired.append((topic, partition))
        if expired:
            delete_group = len(expired) == len(stored) and group.state is ConsumerGroupState.EMPTY
            merge(out, self._tombstones(group.group_id, expired, None, delete_group=delete_group))

    def replay(self, key: GroupKey, value: GroupValue | None, now_ms: int) -> None:
        """One record of the partition, in log order (loading): the last value of a key wins."""
        if isinstance(key, CONSUMER_KEY_TYPES):
            self.consumer.replay(key, value)  # type: ignore[arg-type]
            return
        if isinstance(key, SHARE_KEY_TYPES):
            self.share.replay(key, value)  # type: ignore[arg-type]
            return
        if isinstance(key, OffsetCommitKey):
            if value is None:
                stored = self.offsets.get(key.group, {})
                stored.pop((key.topic, key.partition), None)
                if not stored:
                    self.offsets.pop(key.group, None)
            else:
                assert isinstance(value, OffsetCommitValue)
                self.offsets.setdefault(key.group, {})[(key.topic, key.partition)] = value
            return
        if value is None:
            self.groups.pop(key.group, None)
        else:
            assert isinstance(value, GroupMetadataValue)
            self.groups[key.group] = ClassicGroup.from_record(key.group, value, self.config.classic, self._rng, now_ms)

    def loaded(self, now_ms: int) -> None:
        """Loading is done: members' sessions start now; offsets of groups that were not stored
        get a simple group to hang on (Kafka creates one for them)."""
        for group in self.groups.values():
            group.start_sessions(now_ms)
        for consumer in self.consumer_groups.values():
            consumer.start_sessions(now_ms)
        self.share.start_sessions(now_ms)
        for group_id in self.offsets:
            if (
                group_id not in self.groups
                and group_id not in self.consumer_groups
                and group_id not in self.share.groups
            ):
                group = self._new_group(group_id, now_ms)
                group.protocol_type = None
        self._next_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
