"""Share sessions (KIP-932's ``ShareSessionCache``): the partitions a share consumer fetches from
one broker, keyed by (group, member), and the epoch each request must carry.

Rules (Kafka's ShareFetch/ShareAcknowledge session handling):
- epoch 0 opens a session with the request's partitions, replacing the member's session on this
  broker if it had one; the cache holds at most ``max_sessions`` (SHARE_SESSION_LIMIT_REACHED);
- epoch -1 closes the session (the caller releases what the member holds in its partitions);
- any other epoch must be the session's current one (INVALID_SHARE_SESSION_EPOCH), for a session
  that exists (SHARE_SESSION_NOT_FOUND); a request that used it moves the epoch on by one, as
  ``ShareSessionContext.updateAndGenerateResponseData`` does;
- a request adds its partitions to the session and removes the forgotten ones.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftlog.common import errors as kerr

__all__ = ["ShareSession", "ShareSessionCache", "SessionPartition", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

#: (topic id, topic name, partition)
SessionPartition = tuple[str, str, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 0  # the epoch of the request being served; the next one carries the next
    partitions: dict[tuple[str, int], SessionPartition] = field(default_factory=dict)

    def update(self, added: Iterable[SessionPartition], forgotten: Iterable[tuple[str, int]]) -> None:
        for topic_id, name, partition in added:
            self.partitions[(topic_id, partition)] = (topic_id, name, partition)
        for key in forgotten:
            self.partitions.pop(key, None)


class ShareSessionCache:
    """The share sessions of one broker (see the module docstring)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def begin(self, group_id: str, member_id: str, epoch: int) -> ShareSession | None:
        """The session a request of ``epoch`` works in: a new one for epoch 0, the existing one
        otherwise (removed from the cache for epoch -1, whose request closes it); raises the Kafka
        error of a request that may not use it."""
        key = (group_id, member_id)
        current = self._sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if current is None and len(self._sessions) >= self.max_sessions:
                raise kerr.ShareSessionLimitReachedError(f"{self.max_sessions} share sessions are open")
            session = ShareSession(group_id, member_id)
            self._sessions[key] = session
            return session
        if current is None:
            raise kerr.ShareSessionNotFoundError(f"no share session of member {member_id} of group {group_id}")
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return current
        if epoch != current.epoch + 1 and not (current.epoch == 2**31 - 1 and epoch == 1):
            raise kerr.InvalidShareSessionEpochError(f"share session epoch {epoch}, expected {current.epoch + 1}")
        return current

    def used(self, session: ShareSession, epoch: int) -> None:
        """The request of ``epoch`` was served in ``session``: the next one carries the next epoch."""
        session.epoch = epoch

    def close_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def clear(self) -> int:
        """Forget every session (share groups were turned off); how many there were."""
        count = len(self._sessions)
        self._sessions.clear()
        return count
