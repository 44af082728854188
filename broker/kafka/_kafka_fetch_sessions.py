"""Incremental fetch sessions (KIP-227) for the Kafka-protocol listener.

A consumer that fetches many partitions sends, after its first (full) fetch, only the partitions
whose fetch position changed, and the broker answers only the partitions with something new
(records, an error, or a moved high watermark, last stable offset or log start offset). The broker
remembers the rest in a session, named by ``session_id`` and stepped by ``session_epoch``:

- epoch -1: a full fetch without a session (a given session id is closed);
- epoch 0: a full fetch that opens a new session (a given session id is closed first); when the
  cache is full, the least recently used session idle longer than ``eviction_idle_ms`` makes room,
  else the fetch is answered without one (session id 0), as Kafka does;
- epoch > 0: an incremental fetch of an existing session: unknown id -> FETCH_SESSION_ID_NOT_FOUND,
  wrong epoch -> INVALID_FETCH_SESSION_EPOCH, a session opened with topic ids used by a request
  without them or the reverse -> FETCH_SESSION_TOPIC_ID_ERROR (checked in that order, as Kafka's
  FetchManager); otherwise the request's partitions are added or updated, its forgotten partitions
  removed, and the epoch advances.

A session opened by Fetch v13+ (KIP-516) keys its partitions by topic id, as Kafka's
CachedPartition: two incarnations of one topic name (deleted and recreated while the session held
it) are two partitions, a forgotten partition is named by id (even one the image no longer knows),
and a partition's topic name (`SessionPartition.topic`) is what the image said when the id was
first known: None until then (UNKNOWN_TOPIC_ID), and kept once known, so a deleted topic's
partition is still read by that name and the leader answers it INCONSISTENT_TOPIC_ID (recreated)
or UNKNOWN_TOPIC_OR_PARTITION (gone). Sessions of older versions key partitions by name.

A throttled fetch (KIP-219: the client is over a quota) is answered empty, as Kafka's
``getThrottledResponse``: `FetchSessionCache.throttled` forgets the session a full fetch opened
(the answer carries session id 0) and restores, for an incremental one, what the session
remembered as answered, so the partitions are answered again next time; the epoch still advances
and the request's positions stay, as Kafka updates those when it resolves the fetch.

Pure logic: time and randomness are parameters.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftlog.common import errors as kerr

__all__ = [
    "FetchSessionCache",
    "FetchSession",
    "SessionPartition",
    "SessionFetch",
    "THROTTLED_FETCH",
    "TopicPartition",
]

#: the key of a Fetch answer (a dict until it is built; the builder ignores it) under which the data
#: layer leaves the callable that empties the answer when the throttle decides so
THROTTLED_FETCH = "_throttled"

#: a session's key of a partition: (topic id, partition) in a session of Fetch v13+, else (name, partition)
TopicPartition = tuple[str | uuid.UUID, int]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class SessionPartition:
    """What the client last told of a partition, and what the broker last answered of it."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    #: the topic's name, in a session keyed by topic id (module docstring): None while the image
    #: does not know the id
    topic: str | None = None
    # last answered values; -2: never answered (the first answer always includes the partition)
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental fetch must carry
    partitions: OrderedDict[TopicPartition, SessionPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0
    uses_topic_ids: bool = False  # opened by Fetch v13+: partitions keyed by topic id


@dataclass(slots=True)
class SessionFetch:
    """One fetch as the session layer resolved it: which partitions to read, and whether the
    answer holds all of them (``full``) or only those with something new."""

    session_id: int  # what the answer carries (0: no session)
    partitions: OrderedDict[TopicPartition, SessionPartition]
    full: bool
    session: FetchSession | None = None
    #: what `include` overwrote, for `FetchSessionCache.throttled`: (partition, hw, lso, log start)
    answered_before: list[tuple[TopicPartition, int, int, int]] = field(default_factory=list)
    order_before: list[TopicPartition] | None = None  # the session's order before `include` moved one
    #: whether `include` keeps that journal: only while a quota could throttle the fetch (without
    #: one, a consumer's every fetch would copy its session's partition order for nothing)
    journal: bool = True

    def include(
        self, tp: TopicPartition, *, has_data: bool, has_error: bool, hw: int, lso: int, log_start: int
    ) -> bool:
        """Whether partition ``tp`` goes into the answer; remembers what was answered."""
        sp = self.partitions[tp]
        if has_error:  # remembered as unknown, so the partition is answered again once it recovers
            hw = lso = log_start = -1
        changed = (sp.high_watermark, sp.last_stable_offset, sp.log_start_offset) != (hw, lso, log_start)
        if self.journal:
            self.answered_before.append((tp, sp.high_watermark, sp.last_stable_offset, sp.log_start_offset))
        sp.high_watermark, sp.last_stable_offset, sp.log_start_offset = hw, lso, log_start
        if has_data and self.session is not None:
            # a partition that got records goes to the back of the session: the next fetch's
            # byte budget reaches the others first (Kafka rotates its sessions so)
            if self.journal and self.order_before is None:
                self.order_before = list(self.partitions)
            self.partitions.move_to_end(tp)
        return self.full or has_data or has_error or changed


class FetchSessionCache:
    """The broker's fetch sessions (``max.incremental.fetch.session.cache.slots``)."""

    def __init__(self, max_slots: int, *, rng: random.Random, eviction_idle_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self._rng = rng
        self._eviction_idle_ms = eviction_idle_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(
        self,
        session_id: int,
        epoch: int,
        requested: Iterable[tuple[TopicPartition, SessionPartition]],
        forgotten: Iterable[TopicPartition],
        now_ms: int,
        *,
        uses_topic_ids: bool = False,
    ) -> SessionFetch:
        """The partitions of this fetch under the session rules (module docstring); raises
        FetchSessionIdNotFoundError / InvalidFetchSessionEpochError / FetchSessionTopicIdError for
        a bad incremental one. ``uses_topic_ids``: the request is Fetch v13+ (keys are topic ids)."""
        if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
            if session_id:
                self._sessions.pop(session_id, None)
            parts: OrderedDict[TopicPartition, SessionPartition] = OrderedDict(requested)
            if epoch == FINAL_EPOCH or not self._make_room(now_ms):
                return SessionFetch(0, parts, full=True)
            session = FetchSession(self._new_id(), 1, parts, now_ms, uses_topic_ids)
            self._sessions[session.session_id] = session
            return SessionFetch(session.session_id, parts, full=True, session=session)
        existing = self._sessions.get(session_id)
        if existing is None:
            raise kerr.FetchSessionIdNotFoundError(f"fetch session {session_id} is not known to this broker")
        session = existing
        if epoch != session.epoch:
            raise kerr.InvalidFetchSessionEpochError(
                f"fetch session {session_id} expected epoch {session.epoch}, the request has {epoch}"
            )
        if session.uses_topic_ids != uses_topic_ids:
            how = ("by topic id", "by name") if session.uses_topic_ids else ("by name", "by topic id")
            raise kerr.FetchSessionTopicIdError(
                f"fetch session {session_id} was opened {how[0]}, the request names topics {how[1]}"
            )
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp, sp in requested:
            old = session.partitions.get(tp)
            if old is not None:  # keep what was last answered: only news is sent
                if sp.topic is None:  # a name once known stays (Kafka resolves unknown names only)
                    sp.topic = old.topic
                sp.high_watermark, sp.last_stable_offset, sp.log_start_offset = (
                    old.high_watermark,
                    old.last_stable_offset,
                    old.log_start_offset,
                )
            session.partitions[tp] = sp
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return SessionFetch(session_id, session.partitions, full=False, session=session)

    def throttled(self, fetch: SessionFetch) -> int:
        """Undo what answering ``fetch`` did to its session, as it is answered empty (module
        docstring); the session id the empty answer carries."""
        session = fetch.session
        if session is None:
            return 0
        if fetch.full or not fetch.journal:
            # Kafka opens the session only with a real answer; an incremental one answered without
            # a journal (a quota set while it was served) cannot be put back: it is closed, and
            # the client's next fetch is a full one (its positions did not move)
            if self._sessions.get(session.session_id) is session:
                del self._sessions[session.session_id]
            return 0
        for tp, hw, lso, log_start in reversed(fetch.answered_before):
            sp = fetch.partitions.get(tp)
            if sp is not None:
                sp.high_watermark, sp.last_stable_offset, sp.log_start_offset = hw, lso, log_start
        if fetch.order_before is not None:
            for tp in fetch.order_before:
                if tp in fetch.partitions:
                    fetch.partitions.move_to_end(tp)
        fetch.answered_before.clear()
        fetch.order_before = None
        return session.session_id

    def _make_room(self, now_ms: int) -> bool:
        if self.max_slots <= 0:
            return False
        if len(self._sessions) < self.max_slots:
            return True
        oldest_id, oldest = next(iter(self._sessions.items()))
        if now_ms - oldest.last_used_ms >= self._eviction_idle_ms:
            del self._sessions[oldest_id]
            return True
        return False

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randrange(1, 2**31)
            if candidate not in self._sessions:
                return candidate
