"""A consumer's membership in a group (the classic protocol, as Kafka's ``ConsumerCoordinator``).

The poll thread drives the rebalance (`GroupMembership.ensure_active_group`): find the coordinator
(FindCoordinator on any broker), JoinGroup (a new member first gets its id, KIP-394), and the
leader computes every member's partitions with the assignor the group chose and hands them in with
SyncGroup; each member then learns its own. A heartbeat thread keeps the membership alive between
polls every ``heartbeat_interval_ms``: REBALANCE_IN_PROGRESS there marks the group for a rejoin at
the next poll, an unknown member or stale generation resets the membership, and a poll interval
longer than ``max_poll_interval_ms`` makes the member leave the group (Kafka's poll timeout), so a
stuck consumer does not hold partitions.

Eager assignors (range, roundrobin, sticky) give up every partition before joining; with
cooperative-sticky only the partitions taken away are revoked, and a member that lost some rejoins
at once so that they can be handed over (KIP-429).

Committed offsets: `commit` (OffsetCommit with the member's generation; a rebalance in between
raises `CommitFailedError`, as Kafka), `committed` (OffsetFetch).

Threads: the JoinGroup/SyncGroup round of a rebalance runs on a worker thread, so `poll` keeps to
its timeout (the consumer applies the result at a later poll); the heartbeat thread only beats in a
stable generation and only acts on an answer for the generation it asked about (an answer about an
older one, after a rebalance, changes nothing). Fields the threads share are set under ``_lock``.
A member the coordinator no longer knows (UNKNOWN_MEMBER_ID, a stale generation, its poll timeout)
has *lost* its partitions: the consumer tells the listener `on_partitions_lost` and commits nothing
for them. FENCED_INSTANCE_ID is fatal, as in Kafka: the next `poll` raises it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.assignors import PartitionAssignor, Subscription
from kraftlog.client.consumer._consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kraftlog.client.consumer._group_client import GroupClient, raise_for
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["GroupMembership", "CommitFailedError", "RebalanceListener"]

_log = structlog.get_logger(__name__)


class CommitFailedError(kerr.KafkaError):
    """The commit cannot be completed: the group rebalanced and gave the partitions to another
    member (or this member's generation is stale). Kafka's ``CommitFailedException``."""


class RebalanceListener:
    """Callbacks around a rebalance, run in the poll thread (Kafka's ConsumerRebalanceListener)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


class GroupMembership(GroupClient):
    """One member's view of its group (see the module docstring). Not for use by several threads
    at once, except the heartbeat thread it runs itself."""

    def __init__(
        self,
        group_id: str,
        pool: ChannelPool,
        metadata: ClusterMetadata,
        assignors: Sequence[PartitionAssignor],
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        client_id: str = "kraftlog",
        client_rack: str = "",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        if not assignors:
            raise ValueError("partition.assignment.strategy names no assignor")
        self.group_id = group_id
        self._pool = pool
        self._metadata = metadata
        self.assignors = list(assignors)
        self.cooperative = all(a.name == "cooperative-sticky" for a in self.assignors)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_rack = client_rack
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.owned: list[TopicPartition] = []
        self.state = "UNJOINED"  # UNJOINED, REBALANCING, STABLE (Kafka's MemberState)
        self._coordinator: str | None = None
        self._rejoin = True
        self._lost = False
        self._fatal: BaseException | None = None
        self._lock = threading.RLock()
        self._last_poll = time.monotonic()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._worker_result: list[TopicPartition] | None = None
        self._worker_error: BaseException | None = None
        self._join_retries = 0  # JoinGroup back-offs in a row (the one retry policy's attempt number)
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{group_id}", daemon=True)
        self._heartbeat.start()

    # ================================================================== rebalance

    @property
    def needs_rejoin(self) -> bool:
        return self._rejoin or not self.member_id or self.generation < 0

    @property
    def rebalancing(self) -> bool:
        return self.state == "REBALANCING"

    def request_rejoin(self) -> None:
        with self._lock:
            self._rejoin = True

    def note_poll(self) -> None:
        self._last_poll = time.monotonic()

    def check_fatal(self) -> None:
        """Raise what the heartbeat thread found fatal (FENCED_INSTANCE_ID)."""
        if self._fatal is not None:
            raise self._fatal

    def take_lost(self) -> bool:
        """Whether the member was thrown out since the last call (its partitions are lost)."""
        with self._lock:
            lost, self._lost = self._lost, False
            return lost

    def _reset(self, *, member: bool) -> None:
        """The coordinator no longer knows this generation (or member): partitions held are lost."""
        with self._lock:
            if member:
                self.member_id = ""
            self.generation = -1
            self._rejoin = True
            if self.state == "STABLE" and self.owned:
                self._lost = True
            self.state = "UNJOINED"

    def start_rebalance(self, topics: set[str]) -> None:
        """JoinGroup and SyncGroup on a worker thread; `finished` tells when it is done."""
        with self._lock:
            self.state = "REBALANCING"
            self._rejoin = False
            self._worker_result, self._worker_error = None, None
        owned = list(self.owned)

        def work() -> None:
            try:
                result = self._join_and_sync(topics, owned)
            except BaseException as err:  # noqa: BLE001 - handed to the poll thread
                with self._lock:
                    self._worker_error = err
                    self._rejoin = True
                return
            with self._lock:
                self._worker_result = result

        self._worker = threading.Thread(target=work, name=f"rebalance-{self.group_id}", daemon=True)
        self._worker.start()

    def finished(self) -> list[TopicPartition] | None:
        """The new assignment once the rebalance is done (None while it runs); raises what ended
        it (a fatal group error), leaving the member to rejoin at the next poll."""
        worker = self._worker
        if worker is None or worker.is_alive():
            return None
        self._worker = None
        with self._lock:
            if self._worker_error is not None:
                self.state = "UNJOINED"
                error, self._worker_error = self._worker_error, None
                raise error
            result = self._worker_result or []
            self.state = "STABLE"
            self._last_poll = time.monotonic()  # the poll interval starts again after a rebalance
            return result

    def _join_and_sync(self, topics: set[str], owned: list[TopicPartition]) -> list[TopicPartition]:
        while not self._stop.is_set():
            joined = self._join(topics, owned)
            if joined is None:
                continue
            assignment = self._sync(joined, topics)
            if assignment is not None:
                return assignment
        raise kerr.KafkaError("the consumer was closed during a rebalance")

    def _subscription(self, assignor: PartitionAssignor, topics: set[str], owned: list[TopicPartition]) -> bytes:
        mine = sorted(owned) if self.cooperative else []
        sub = Subscription(
            sorted(topics),
            assignor.subscription_user_data(),
            mine,
            rack_id=self.client_rack or None,
            generation_id=self.generation,
        )
        return encode_subscription(sub)

    def _join(self, topics: set[str], owned: list[TopicPartition]) -> Any | None:
        request = group_pb2.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=[
                group_pb2.JoinGroupRequest.Protocol(name=a.name, metadata=self._subscription(a, topics, owned))
                for a in self.assignors
            ],
            client_id=self.client_id,
        )
        timeout = (self.max_poll_interval_ms + 5000 + self.request_timeout_ms) / 1000.0
        try:
            r = self._call("JoinGroup", request, timeout)
        except kerr.CoordinatorNotAvailableError:
            self._back_off(self._join_retries)
            self._join_retries += 1
            return None
        code = r.error.code
        if code == kerr.MemberIdRequiredError.error_code:
            self.member_id = r.member_id
            return None
        if code in (kerr.UnknownMemberIdError.error_code, kerr.IllegalGenerationError.error_code):
            with self._lock:
                self.member_id, self.generation = "", -1
            return None
        if code == kerr.RebalanceInProgressError.error_code or self._coordinator_lost(code):
            self._back_off(self._join_retries)
            self._join_retries += 1
            return None
        self._join_retries = 0
        raise_for(r.error, f"JoinGroup of group {self.group_id!r}")
        with self._lock:
            self.member_id, self.generation, self.protocol = r.member_id, r.generation_id, r.protocol_name
            self.leader = r.leader == r.member_id
        return r

    def _assignor(self) -> PartitionAssignor:
        for a in self.assignors:
            if a.name == self.protocol:
                return a
        raise kerr.InconsistentGroupProtocolError(f"the group chose {self.protocol!r}, which this consumer lacks")

    def _lead(self, joined: Any) -> list[group_pb2.SyncGroupRequest.Assignment]:
        """The leader's part: every member's partitions, by the chosen assignor."""
        subscriptions: dict[str, Subscription] = {}
        for m in joined.members:  # in the order the coordinator gave (Java's HashMap order there)
            sub = decode_subscription(m.metadata)
            subscriptions[m.member_id] = Subscription(
                sub.topics,
                sub.user_data,
                sub.owned_partitions,
                m.group_instance_id if m.HasField("group_instance_id") else None,
                sub.rack_id,
                sub.generation_id,
            )
        wanted = {t for s in subscriptions.values() for t in s.topics}
        self._metadata.add_topics(wanted)
        self._metadata.update(wanted, self.request_timeout_ms)
        racks = {b.node_id: b.rack for b in self._metadata.brokers()}
        partitions: dict[str, list[frozenset[str]]] = {}
        for topic in sorted(wanted):
            ids = self._metadata.partitions_for_topic(topic)
            if ids:
                partitions[topic] = [self._replica_racks(TopicPartition(topic, i), racks) for i in range(max(ids) + 1)]
        result = self._assignor().assign(partitions, subscriptions)
        return [
            group_pb2.SyncGroupRequest.Assignment(member_id=m, assignment=encode_assignment(tps))
            for m, tps in result.items()
        ]

    def _replica_racks(self, tp: TopicPartition, racks: Mapping[int, str]) -> frozenset[str]:
        p = self._metadata.partition(tp)
        return frozenset(r for rid in (p.replicas if p is not None else []) if (r := racks.get(rid)))

    def _sync(self, joined: Any, topics: set[str]) -> list[TopicPartition] | None:
        leads = joined.leader == self.member_id and not joined.skip_assignment  # KIP-814: a static leader keeps
        assignments = self._lead(joined) if leads else []
        request = group_pb2.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol,
            assignments=assignments,
        )
        try:
            r = self._call("SyncGroup", request, (self.max_poll_interval_ms + self.request_timeout_ms) / 1000.0)
        except kerr.CoordinatorNotAvailableError:
            return None
        code = r.error.code
        if code in (kerr.UnknownMemberIdError.error_code, kerr.IllegalGenerationError.error_code):
            self.member_id, self.generation = (
                ("", -1)
                if code == kerr.UnknownMemberIdError.error_code
                else (
                    self.member_id,
                    -1,
                )
            )
            return None
        if code == kerr.RebalanceInProgressError.error_code or self._coordinator_lost(code):
            return None
        raise_for(r.error, f"SyncGroup of group {self.group_id!r}")
        partitions, _user_data = decode_assignment(r.assignment)
        self._assignor().on_assignment(partitions, self.generation)
        _log.info(
            "group_joined",
            group=self.group_id,
            member=self.member_id,
            generation=self.generation,
            partitions=len(partitions),
        )
        return partitions

    # ================================================================== heartbeat

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_ms / 1000.0):
            try:
                self._heartbeat_once()
            except Exception as err:  # noqa: BLE001 - the thread must outlive any one failure
                _log.warning("heartbeat_failed", group=self.group_id, error=repr(err))

    def _heartbeat_once(self) -> None:
        with self._lock:
            if self.state != "STABLE" or self.needs_rejoin or self._coordinator is None:
                return
            member, generation = self.member_id, self.generation
        if (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms:
            _log.warning("consumer_poll_timeout", group=self.group_id, member=member)
            self._leave("consumer poll timeout has expired")
            return
        request = group_pb2.HeartbeatRequest(
            group_id=self.group_id, generation_id=generation, member_id=member, group_instance_id=self.group_instance_id
        )
        try:
            r = self._call("Heartbeat", request, self.request_timeout_ms / 1000.0)
        except kerr.KafkaError:
            return
        code = r.error.code
        if code == 0:
            return
        with self._lock:
            if self.state != "STABLE" or (self.member_id, self.generation) != (member, generation):
                return  # an answer about a generation that is already gone
            if code == kerr.RebalanceInProgressError.error_code:
                self._rejoin = True
            elif code == kerr.UnknownMemberIdError.error_code:
                self._reset(member=True)
            elif code == kerr.IllegalGenerationError.error_code:
                self._reset(member=False)
            elif code == kerr.FencedInstanceIdError.error_code:
                self._fatal = kerr.FencedInstanceIdError(
                    f"another consumer joined with group.instance.id {self.group_instance_id!r}"
                )
            else:
                self._coordinator_lost(code)

    def _commit_identity(self) -> tuple[int, str]:
        with self._lock:
            if self.state == "REBALANCING":
                raise kerr.RebalanceInProgressError(
                    "Offset commit cannot be completed since the consumer is undergoing a rebalance"
                )
            if self.state != "STABLE" or self.generation < 0:
                raise CommitFailedError("Commit cannot be completed since the consumer is not part of an active group")
            return self.generation, self.member_id

    def _commit_refused(self, code: int, generation: int) -> bool:
        if code in (kerr.UnknownMemberIdError.error_code, kerr.IllegalGenerationError.error_code):
            self._reset(member=code == kerr.UnknownMemberIdError.error_code)
            raise CommitFailedError(
                "Commit cannot be completed since the group has already rebalanced and assigned the "
                "partitions to another member"
            )
        if code == kerr.RebalanceInProgressError.error_code:
            self.request_rejoin()
            raise kerr.RebalanceInProgressError("the group is rebalancing: poll, then commit again")
        return False

    def _leave(self, reason: str) -> None:
        if self.member_id and self.group_instance_id is None and self._coordinator is not None:
            request = group_pb2.LeaveGroupRequest(
                group_id=self.group_id,
                members=[group_pb2.LeaveGroupRequest.Member(member_id=self.member_id, reason=reason)],
            )
            try:
                self._call("LeaveGroup", request, self.request_timeout_ms / 1000.0)
            except kerr.KafkaError as err:
                _log.info("leave_group_failed", group=self.group_id, error=str(err))
        self._reset(member=True)

    def leave(self, reason: str) -> None:
        """Leave the group now (unsubscribe); a later subscribe joins again."""
        self._leave(reason)

    def close(self) -> None:
        """Leave the group (a static member stays: its session keeps its partitions, KIP-345)."""
        self._stop.set()
        self._leave("the consumer is being closed")
        self._heartbeat.join(timeout=5.0)
