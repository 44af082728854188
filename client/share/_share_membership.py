"""A share consumer's membership in its share group (KIP-932's ``ShareMembershipManager``):
ShareGroupHeartbeat to the group coordinator, from a thread of its own.

Unlike a consumer group's member, a share member hands nothing back: the coordinator may give one
partition to many members, and what a member holds are record locks on the partition leaders,
which outlive an assignment change. So an assignment is applied as it comes (the fetch side reads
`assignment`); there is no revocation step. The member id is the client's own (ShareGroupHeartbeat
v1), kept for the consumer's life: a fenced member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) joins
again under it at epoch 0, so the records it acquired stay its own. Errors no retry can mend
(authorization, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, a broker without share groups) are fatal:
the next `poll` raises them. Leaving sends epoch -1.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import structlog

from kraftlog.client._channels import ChannelPool
from kraftlog.client._heartbeat_loop import run_heartbeats
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.consumer import COORDINATOR_ERRORS, GroupClient
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["ShareMembership"]

_log = structlog.get_logger(__name__)

_LEAVE_EPOCH = -1
_FENCED = {kerr.FencedMemberEpochError.error_code, kerr.UnknownMemberIdError.error_code}
_FATAL = {
    kerr.GroupMaxSizeReachedError,
    kerr.UnsupportedVersionError,
    kerr.InvalidRequestError,
    kerr.GroupAuthorizationFailedError,
    kerr.TopicAuthorizationFailedError,
    kerr.InvalidGroupIdError,
}


class ShareMembership(GroupClient):
    """One member of a share group (see the module docstring)."""

    def __init__(
        self,
        group_id: str,
        pool: ChannelPool,
        metadata: ClusterMetadata,
        *,
        client_id: str = "kraftlog-share-consumer",
        client_rack: str = "",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.group_id = group_id
        self.group_instance_id = None
        self._pool = pool
        self._metadata = metadata
        self.client_id = client_id
        self.client_rack = client_rack
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._coordinator: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._topics: tuple[str, ...] | None = None
        self._sent_topics: tuple[str, ...] | None = None
        self._ids: tuple[tuple[str, tuple[int, ...]], ...] = ()  # the last assignment, by topic id
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._fatal: BaseException | None = None
        self._interval_s = 3.0
        self._thread: threading.Thread | None = None

    # ======================================================= the poll thread's side

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the coordinator gave this member, those whose topic names are known."""
        with self._lock:
            if self._ids and self._unresolved():
                self._resolve()
            return self._assignment

    def subscribe(self, topics: tuple[str, ...]) -> None:
        """Heartbeat ``topics`` from now on (none: leave the group)."""
        with self._lock:
            if not topics:
                if self._topics:
                    self._leave_locked()
                self._topics = None
                return
            self._topics = tuple(sorted(topics))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"share-heartbeat-{self.group_id}", daemon=True)
                self._thread.start()
        self._wake.set()

    def check_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # ================================================================ heartbeats

    def _run(self) -> None:
        run_heartbeats(
            self._beat,
            self._stop,
            self._wake,
            self.retry_backoff_ms / 1000.0,
            failed_event="share_heartbeat_failed",
            group_id=self.group_id,
        )

    def _beat(self) -> float:
        with self._lock:
            if self._fatal is not None or self._topics is None:
                return 3600.0
            request = group_pb2.ShareGroupHeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=self.member_epoch,
                client_id=self.client_id,
            )
            if self.client_rack:
                request.rack_id = self.client_rack
            if self.member_epoch == 0 or self._topics != self._sent_topics:
                request.subscribed_topic_names.names.extend(self._topics)
        try:
            r = self._call("ShareGroupHeartbeat", request, self.request_timeout_ms / 1000.0)
        except kerr.CoordinatorNotAvailableError:
            with self._lock:
                self._sent_topics = None  # the next one says it all again
            return self.retry_backoff_ms / 1000.0
        return self._handle(request, r)

    def _handle(self, request: Any, r: Any) -> float:
        code = r.error.code
        backoff = self.retry_backoff_ms / 1000.0
        with self._lock:
            if self._topics is None:
                return 3600.0  # left meanwhile
            if code == 0:
                if request.HasField("subscribed_topic_names"):
                    self._sent_topics = tuple(request.subscribed_topic_names.names)
                self.member_epoch = r.member_epoch
                if r.heartbeat_interval_ms > 0:
                    self._interval_s = r.heartbeat_interval_ms / 1000.0
                if r.HasField("assignment"):
                    self._ids = tuple((t.topic_id, tuple(t.partitions)) for t in r.assignment.topics)
                    self._assignment = frozenset()
                    if self._resolve():
                        return backoff
                return self._interval_s
            self._sent_topics = None
            if code in _FENCED:
                _log.info("share_member_fenced", group=self.group_id, member=self.member_id, error=r.error.name)
                self.member_epoch = 0
                return 0.0
            error = kerr.error_for_code(code)
            if error in COORDINATOR_ERRORS:
                self._coordinator = None
                return backoff
            if error in _FATAL:
                self._fatal = error(f"ShareGroupHeartbeat of group {self.group_id!r}: {r.error.message}")
                return 3600.0
            _log.warning("share_heartbeat_error", group=self.group_id, error=r.error.name, message=r.error.message)
            return backoff

    def _unresolved(self) -> bool:
        return sum(len(ps) for _t, ps in self._ids) != len(self._assignment)

    def _resolve(self) -> bool:
        """Turn the assignment's topic ids into names; True when some are not known yet (metadata
        is asked for them)."""
        out: set[TopicPartition] = set()
        missing = False
        for topic_id, partitions in self._ids:
            name = self._metadata.topic_name(topic_id)
            if name is None:
                missing = True
                continue
            out |= {TopicPartition(name, p) for p in partitions}
        self._assignment = frozenset(out)
        if missing:
            self._metadata.request_update()
        return missing

    # ================================================================== leaving

    def _leave_locked(self) -> None:
        request = group_pb2.ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=_LEAVE_EPOCH, client_id=self.client_id
        )
        joined = self.member_epoch > 0
        self.member_epoch = 0
        self._topics, self._sent_topics = None, None
        self._ids, self._assignment = (), frozenset()
        if joined and self._coordinator is not None:
            threading.Thread(target=self._send_leave, args=(request,), daemon=True).start()

    def _send_leave(self, request: Any) -> None:
        try:
            self._call("ShareGroupHeartbeat", request, self.request_timeout_ms / 1000.0)
        except kerr.KafkaError as err:
            _log.info("share_leave_failed", group=self.group_id, error=str(err))

    def close(self) -> None:
        """Stop heartbeating and leave the group (epoch -1)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        with self._lock:
            joined = self.member_epoch > 0 and self._coordinator is not None
            self.member_epoch = 0
            self._topics = None
        if joined:
            self._send_leave(
                group_pb2.ShareGroupHeartbeatRequest(
                    group_id=self.group_id,
                    member_id=self.member_id,
                    member_epoch=_LEAVE_EPOCH,
                    client_id=self.client_id,
                )
            )
