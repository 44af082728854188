"""A consumer's membership in a group of the KIP-848 protocol (``group.protocol=consumer``), as
Kafka 4's ``ConsumerMembershipManager``: no JoinGroup/SyncGroup round and no client-side assignor;
the member heartbeats (ConsumerGroupHeartbeat) its subscription and what it owns, and the
coordinator answers with the member's epoch and, when it changed, its assignment.

Threads: the heartbeat thread talks to the coordinator (every ``heartbeat_interval_ms`` the
coordinator names, at once when the member has something to say: a new subscription, partitions
given up); the poll thread applies what the coordinator assigned (`take_assignment`): it revokes
what was taken away first (listener, auto commit), starts what was added, then tells the heartbeat
thread what it owns now (`acknowledge`). The coordinator hands a partition to another member only
after the one who had it said it let it go, so no partition has two owners.

A member fenced by the coordinator (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) has *lost* its
partitions: the poll thread tells the listener `on_partitions_lost` and only then does the member
rejoin (epoch 0), owning nothing. A poll interval longer than ``max_poll_interval_ms`` makes the
member leave until the next poll. Errors no retry can mend (FENCED_INSTANCE_ID,
UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, a broker without the
protocol) are fatal: the next `poll` raises them.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._heartbeat_loop import run_heartbeats
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.consumer._consumer_group import CommitFailedError
from kraftlog.client.consumer._group_client import COORDINATOR_ERRORS, GroupClient
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["ConsumerProtocolMembership"]

_log = structlog.get_logger(__name__)

_LEAVE_EPOCH = -1
_STATIC_LEAVE_EPOCH = -2
_FENCED = {kerr.FencedMemberEpochError.error_code, kerr.UnknownMemberIdError.error_code}
_FATAL = {
    kerr.FencedInstanceIdError,
    kerr.UnreleasedInstanceIdError,
    kerr.GroupMaxSizeReachedError,
    kerr.UnsupportedAssignorError,
    kerr.UnsupportedVersionError,
    kerr.InvalidRequestError,
    kerr.GroupIdNotFoundError,
    kerr.GroupAuthorizationFailedError,
    kerr.InvalidGroupIdError,
}


class ConsumerProtocolMembership(GroupClient):
    """One member of a consumer-protocol group (see the module docstring)."""

    cooperative = True  # partitions move one at a time; nothing is given up before it must be
    leader = False

    def __init__(
        self,
        group_id: str,
        pool: ChannelPool,
        metadata: ClusterMetadata,
        *,
        server_assignor: str | None = None,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        client_id: str = "kraftlog",
        client_rack: str = "",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.group_id = group_id
        self._pool = pool
        self._metadata = metadata
        self.server_assignor = server_assignor
        self.max_poll_interval_ms = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_rack = client_rack
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        # chosen here, kept for the consumer's life (ConsumerGroupHeartbeat v1): a join whose
        # answer is lost is retried under the same id, so it cannot leave a ghost member behind
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.owned: list[TopicPartition] = []  # set by the poll thread: what the consumer holds
        self._coordinator: str | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._topics: set[str] | None = None
        self._sent_topics: tuple[str, ...] | None = None
        self._target: set[TopicPartition] | None = None
        self._unresolved: tuple[tuple[str, tuple[int, ...]], ...] | None = None
        self._names: dict[str, str] = {}  # topic id -> name, as resolved
        self._lost = False
        self._releasing = False  # fenced: rejoin only once the poll thread let go of the partitions
        self._incarnation = 0  # bumped when the member is fenced or leaves: older answers are stale
        self._send_full = False  # after a failed heartbeat: send everything, so the answer does too
        self._poll_expired = False
        self._fatal: BaseException | None = None
        self._interval_s = 3.0
        self._last_poll = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{group_id}", daemon=True)
        self._thread.start()

    # ======================================================= the poll thread's side

    @property
    def generation(self) -> int:
        return self.member_epoch

    @property
    def rebalancing(self) -> bool:
        return False

    @property
    def needs_rejoin(self) -> bool:
        return self.member_epoch <= 0

    def set_subscription(self, topics: set[str]) -> None:
        """The topics to heartbeat; none (a pattern that matches nothing yet) leaves the group,
        since the coordinator takes no member without a subscription."""
        with self._lock:
            if not topics:
                if self._topics:
                    self._leave_locked("the subscription matches no topic")
                self._topics = None
                return
            if topics != self._topics:
                self._topics = set(topics)
                self._wake.set()

    def request_rejoin(self) -> None:
        """Something changed the coordinator should hear about now (what the member owns)."""
        self._wake.set()

    acknowledge = request_rejoin

    def note_poll(self) -> None:
        self._last_poll = time.monotonic()
        if self._poll_expired:
            with self._lock:
                self._poll_expired = False
                self._wake.set()

    def check_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def take_lost(self) -> bool:
        """Whether the member was fenced since the last call: the caller lets go of every
        partition it holds, tells its listener, then calls `released`, and only then does the
        member rejoin (so no other member gets them while this one still works on them)."""
        with self._lock:
            lost, self._lost = self._lost, False
            return lost

    def released(self) -> None:
        with self._lock:
            if self._releasing:
                self._releasing = False
                self._wake.set()

    def take_assignment(self) -> set[TopicPartition] | None:
        """The newest assignment not yet applied, or None (none while a fence is being handled)."""
        with self._lock:
            if self._lost or self._releasing:
                return None
            target, self._target = self._target, None
            return target

    # ================================================================ heartbeats

    def _run(self) -> None:
        run_heartbeats(
            self._beat,
            self._stop,
            self._wake,
            self.retry_backoff_ms / 1000.0,
            failed_event="heartbeat_failed",
            group_id=self.group_id,
        )

    def _beat(self) -> float:
        """One heartbeat when there is one to send; the seconds until the next."""
        with self._lock:
            if self._fatal is not None or self._topics is None or self._releasing or self._poll_expired:
                return 3600.0
            if self.member_epoch > 0 and (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms:
                _log.warning("consumer_poll_timeout", group=self.group_id, member=self.member_id)
                self._poll_expired = True
                request = self._leave_request()
                self._fenced()
            else:
                request = self._request()
            incarnation = self._incarnation
        if request.member_epoch < 0:  # the poll timeout's leave, sent outside the lock
            self._send(request)
            return 3600.0
        try:
            r = self._call("ConsumerGroupHeartbeat", request, self.request_timeout_ms / 1000.0)
        except kerr.CoordinatorNotAvailableError:
            with self._lock:
                self._send_full = True
            return self.retry_backoff_ms / 1000.0
        return self._handle(request, r, incarnation)

    def _request(self) -> Any:
        joining = self.member_epoch == 0
        full = joining or self._send_full  # Kafka's full request: the answer carries the assignment
        topics = tuple(sorted(self._topics or ()))
        req = group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.group_instance_id,
            rebalance_timeout_ms=self.max_poll_interval_ms if full else -1,
            client_id=self.client_id,
        )
        if self.client_rack:
            req.rack_id = self.client_rack
        if joining and self.server_assignor is not None:
            req.server_assignor = self.server_assignor
        if full or topics != self._sent_topics:
            req.subscribed_topic_names.names.extend(topics)
        owned: dict[str, list[int]] = {}
        if not joining:
            for tp in self.owned:
                topic_id = self._topic_id(tp.topic)
                if topic_id is not None:
                    owned.setdefault(topic_id, []).append(tp.partition)
        req.topic_partitions.SetInParent()
        for topic_id, partitions in sorted(owned.items()):
            req.topic_partitions.topics.add(topic_id=topic_id, partitions=sorted(partitions))
        return req

    def _topic_id(self, topic: str) -> str | None:
        for topic_id, name in self._names.items():
            if name == topic:
                return topic_id
        return self._metadata.topic_id(topic)

    def _handle(self, request: Any, r: Any, incarnation: int) -> float:
        code = r.error.code
        backoff = self.retry_backoff_ms / 1000.0
        with self._lock:
            if incarnation != self._incarnation:
                return 0.0  # the member was fenced or left while this was on its way: moot
            if code != 0:
                self._send_full = True
            if code == 0:
                self._send_full = False
                if request.HasField("subscribed_topic_names"):
                    self._sent_topics = tuple(request.subscribed_topic_names.names)
                self.member_id, self.member_epoch = r.member_id, r.member_epoch
                if r.heartbeat_interval_ms > 0:
                    self._interval_s = r.heartbeat_interval_ms / 1000.0
                if r.HasField("assignment"):
                    self._unresolved = tuple((t.topic_id, tuple(t.partitions)) for t in r.assignment.topics)
                if self._unresolved is not None and self._resolve():
                    return backoff  # topic names still unknown: ask again soon
                return self._interval_s
            if code in _FENCED:
                _log.info("group_member_fenced", group=self.group_id, member=self.member_id, error=r.error.name)
                self._fenced()
                return 0.0
            error = kerr.error_for_code(code)
            if error in COORDINATOR_ERRORS:
                self._coordinator = None
                return backoff
            if error in _FATAL:
                self._fatal = error(f"ConsumerGroupHeartbeat of group {self.group_id!r}: {r.error.message}")
                return 3600.0
            _log.warning("heartbeat_error", group=self.group_id, error=r.error.name, message=r.error.message)
            return backoff

    def _resolve(self) -> bool:
        """Turn the assignment's topic ids into names; True when some are not known yet. What is
        known is applied at once (revocations among it cannot wait); the rest once metadata names
        it, as Kafka's reconciliation does."""
        assert self._unresolved is not None
        target: set[TopicPartition] = set()
        missing = False
        for topic_id, partitions in self._unresolved:
            name = self._names.get(topic_id) or self._metadata.topic_name(topic_id)
            if name is None:
                missing = True
                continue
            self._names[topic_id] = name
            target |= {TopicPartition(name, p) for p in partitions}
        self._target = target
        if missing:
            self._metadata.request_update()
            return True
        self._unresolved = None
        return False

    def _fenced(self) -> None:
        """The coordinator threw the member out (or it left): whatever it holds, or is about to
        apply, is lost; it rejoins once the poll thread let go of it (`released`)."""
        self.member_epoch = 0
        self._incarnation += 1
        self._sent_topics = None
        self._target, self._unresolved = None, None
        self._lost = True
        self._releasing = True

    def _leave_request(self) -> Any:
        """The leave heartbeat: epoch -1, or -2 for a static member, which keeps its partitions
        until its session ends (KIP-345, Kafka's leaveGroupEpoch)."""
        epoch = _STATIC_LEAVE_EPOCH if self.group_instance_id is not None else _LEAVE_EPOCH
        return group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch if self.member_id and self.member_epoch > 0 else 0,
            instance_id=self.group_instance_id,
            rebalance_timeout_ms=-1,
        )

    def _send(self, request: Any) -> None:
        if request.member_epoch >= 0 or self._coordinator is None:
            return  # never joined: nothing to leave
        try:
            self._call("ConsumerGroupHeartbeat", request, self.request_timeout_ms / 1000.0)
        except kerr.KafkaError as err:
            _log.info("leave_group_failed", group=self.group_id, error=str(err))

    def _leave_locked(self, reason: str) -> None:
        _log.info("group_leave", group=self.group_id, member=self.member_id, reason=reason)
        request = self._leave_request()
        self._incarnation += 1
        self.member_epoch = 0
        self._topics, self._sent_topics = None, None
        self._target, self._unresolved = None, None
        threading.Thread(target=self._send, args=(request,), name=f"leave-{self.group_id}", daemon=True).start()

    # ================================================================== offsets

    def _commit_identity(self) -> tuple[int, str]:
        with self._lock:
            if self.member_epoch <= 0:
                raise CommitFailedError("Commit cannot be completed since the consumer is not part of an active group")
            return self.member_epoch, self.member_id

    def _commit_refused(self, code: int, generation: int) -> bool:
        if code == kerr.StaleMemberEpochError.error_code:
            if self.member_epoch > 0:  # the epoch moved on under the commit: send it again with the new one
                return True  # after the commit's back-off
        if code in (kerr.StaleMemberEpochError.error_code, kerr.UnknownMemberIdError.error_code):
            raise CommitFailedError(
                "Commit cannot be completed since the consumer is no longer a member of the group with that epoch"
            )
        return False

    # ================================================================== leaving

    def leave(self, reason: str) -> None:
        """Leave the group now (unsubscribe): no heartbeats until the next subscription."""
        with self._lock:
            self._leave_locked(reason)

    def close(self) -> None:
        """Leave the group (a static member leaves for a while, epoch -2: it keeps its partitions
        until its session ends, KIP-345)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5.0)
        with self._lock:
            request = self._leave_request()
            self._incarnation += 1
            self.member_epoch = 0
        self._send(request)
