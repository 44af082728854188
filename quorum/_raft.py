"""The narrow seam between kraftlog and pysyncobj: :class:`MetadataQuorum`.

Nothing else in kraftlog imports pysyncobj. The active-controller logic proposes batches of metadata
records; every controller receives committed entries, in order, on its asyncio loop; leadership
changes arrive the same way. See DESIGN.md §1 and §3.

The replicated state machine
----------------------------
One replicated command (proposed by ``_RaftNode._kl_append(epoch, timestamp_ms, records)``, applied
by ``_RaftNode._kl_apply``) appends one batch of records atomically. Offsets are dense from 0 and
assigned *at apply time*, in Raft log order, so every controller assigns the same offsets. The
proposer's epoch and timestamp travel as arguments; apply reads no clock, draws no random number
and does no I/O: it validates, assigns offsets, keeps the entries in memory and hands them to the
delivery queue. Apply never raises (pysyncobj retries a raising entry on every tick, forever, which
stalls the node): every failure is a returned value.

Epoch fencing (what KRaft does): the Raft term is the controller epoch, and an entry carries the term
of the leader that appended it. A batch is accepted only if the epoch its proposer claimed equals
that term. So a decision made by the active controller of epoch 5 can never be committed in epoch 6,
not even when pysyncobj forwards a command queued on a leader that was deposed meanwhile, or when the
same node is re-elected in a later term: the batch is rejected (``NotControllerError``) on every node
alike and consumes no offset. ``propose`` refuses up front when this node is not the ready leader of
``epoch``.

Delivery and ordering rules
---------------------------
* ``on_committed(entries)`` runs on the event loop, entries strictly increasing and dense; each offset
  at most once per process (``delivered_offset`` tracks the last one, and entries at or below
  ``last_durable_offset`` given at construction are never delivered). pysyncobj replays its journal
  on every restart, so the consumer still writes idempotently by offset (skip what it has).
* The consumer acknowledges entries by returning from ``on_committed``: only then may pysyncobj drop
  them from its journal at compaction. Until then they stay in memory and in the full dump, and are
  delivered again after a restart. If ``on_committed`` raises, delivery stops (a hole would be worse),
  the node refuses to propose and asks pysyncobj to transfer leadership; a restart delivers again.
* When a snapshot installed from the leader starts after ``delivered_offset`` (this node was behind
  the leader's compacted journal by more than ``snapshot_retain_entries``), ``on_gap(first_missing,
  first_available)`` (a coroutine function) is awaited on the loop and must fetch the missing entries
  from another controller; delivery waits for it and nothing else blocks meanwhile. A fill that
  fails is retried with back-off; without ``on_gap`` delivery stops and ``status().delivery_error``
  says why.
* ``on_leader_change(leader_id, epoch)`` runs on the loop after the committed entries applied before
  the change. pysyncobj's thread observes leader and term on every tick (after apply) rather than
  through ``onStateChanged``, which fires mid-transition and misses changes that are not state
  changes (a follower learning a new leader, a new term without a leader). This node reports
  *itself* as leader only once it has applied every entry of earlier epochs (KRaft notifies its
  listener only after it caught up to the epoch start), so the active controller never decides on
  a stale image. ``propose`` returns after ``on_committed`` has
  received the proposed entries on this node.

Check-quorum (KRaft's rule) and stepping down
---------------------------------------------
``is_leader`` is evaluated on the loop against time, not only against the last view: the leader
must have heard from a majority of voters (itself included) within ``fetch_timeout_ms``
(``controller.quorum.fetch.timeout.ms``), and pysyncobj's thread must have refreshed the view within
that time too. So a leader whose fsync hangs or whose peers went silent stops acting as active at
once (``propose`` refuses with NOT_CONTROLLER), even while its Raft thread is stuck; the thread
itself steps down to follower on its next tick (pysyncobj's ``leaderFallbackTimeout``, the
election timeout, and the same check here). A node whose delivery stopped (``delivery_error``)
asks for a leadership transfer, retried with back-off while it leads, and after
``fetch_timeout_ms`` of failed transfers steps down and stops campaigning, so that a healthy
voter is elected; it never campaigns again until restarted.

Hardening of pysyncobj 0.3.17 (measured weaknesses)
---------------------------------------------------
* journal *and* full dump are set; the journal is `quorum._journal.RaftJournal` (fsync, CRC, conflict-
  only truncation), installed through pysyncobj's ``createJournal`` hook only while this module
  constructs its node (a lock serialises constructions; other paths go to pysyncobj's factory);
* the dump uses `quorum._serializer.DumpSerializer`: no fork, fsync before the rename, directory
  fsync before the journal drops the prefix it replaces;
* ``appendEntriesUseBatch=False`` (about 1 ms commits instead of 100 ms);
* ``leaderFallbackTimeout`` = the election timeout (its 30 s default left an isolated leader acting
  as leader for 30 s); ``raftMinTimeout``/``raftMaxTimeout`` = 1x/1.5x the election timeout,
  ``appendEntriesPeriod`` a twentieth of it (a new leader whose first append is refused retries
  only at the next period); ``connectionRetryTime`` half of it;
* a keepalive between every pair of voters (see ``_RaftNode._kl_keepalive``): pysyncobj drops the
  first message on a connection idle for ``connectionTimeout``, which was the vote request after a
  leader died -- a split vote and an extra election round in most failovers;
* two changes to pysyncobj's message handling (``_RaftNode._SyncObj__onMessageReceived``): the
  leader's ``nextIndex`` never moves back on a successful acknowledgement (pysyncobj re-sent every
  entry ~15 times under load), and a voter that refuses a candidate whose log is behind its own
  campaigns at once instead of waiting for its own timer (up to 1.5x the election timeout), and a
  candidate that gets a vote request from a rival of its own term (a split vote) re-campaigns after
  2-8 heartbeat periods instead of a whole election timeout (3 of 20 failovers took 2.5 s before);
* ``dynamicMembershipChange=False``; ``commandsWaitLeader=False`` (fail fast without a leader);
* every proposal has its own timeout: pysyncobj silently drops commands sent to a dead leader.

No pickle on the Raft port (issue 11)
-------------------------------------
pysyncobj's own transport pickles every message, and ``@replicated`` pickles every command into
the log; anyone holding the password ran code on every controller, and a peer was whoever it said
it was. Here:

* the transport is `quorum._transport.RaftTransport` (connections in `quorum._raft_connection`;
  frames, handshake and message shapes in `quorum._wire`): msgpack frames with a hard size limit,
  a first exchange that binds protocol version, cluster id and voter id and authenticates both
  sides with the password (HMAC over fresh nonces; the password never travels), authenticated
  encryption per frame, an idle timeout, a cap on unauthenticated connections, a real backlog, and
  a listening socket on this node's own voter host;
* a metadata batch is the msgpack command of `quorum._wire.encode_append_command`, proposed with
  ``_RaftNode._kl_append`` and applied by ``_RaftNode._SyncObj__doApplyCommand`` (which replaces
  pysyncobj's pickle-loading one): a committed entry of any other shape is refused, on every node
  alike, and consumes no offset. Membership and code-version commands (pickles) are never applied;
* ``appendEntriesBatchSizeBytes`` is one more than the largest command, so pysyncobj never takes
  its chunked ``transmission`` path (which unpickles); snapshots travel as ``serialized`` chunks
  of our msgpack dump file through the same frames;
* the password is still required (``controller.quorum.raft.password``): it is the only thing that
  tells a voter from anyone who can reach the port. ``allow_unauthenticated=True`` (tests, never
  production) runs with an empty password.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import inspect
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import pysyncobj.syncobj as _syncobj_module
import structlog
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjException
from pysyncobj.journal import Journal
from pysyncobj.monotonic import monotonic as _raft_monotonic
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE, _RAFT_STATE
from pysyncobj.transport import Transport

from kraftlog.common import backoff_ms
from kraftlog.common.errors import (
    CorruptMessageError,
    InvalidRequestError,
    NotControllerError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
)
from kraftlog.metadata_log._records import LogEntry, MetadataRecord, MetadataRecordError, decode_record, encode_record
from kraftlog.quorum._journal import RaftJournal
from kraftlog.quorum._serializer import DumpCorruptError, DumpSerializer, read_dump
from kraftlog.quorum._transport import TransportSettings, raft_transport_class
from kraftlog.quorum._wire import (
    COMMAND_NO_OP,
    COMMAND_REGULAR,
    KEEPALIVE,
    MAX_CLUSTER_ID_CHARS,
    MAX_COMMAND_BYTES,
    decode_command,
    derive_auth_key,
    encode_append_command,
)

if (_COMMAND_TYPE.REGULAR, _COMMAND_TYPE.NO_OP) != (COMMAND_REGULAR, COMMAND_NO_OP):  # pragma: no cover
    raise ImportError("pysyncobj's command type bytes changed; quorum._wire must follow them")

__all__ = [
    "APPLY_OK",
    "APPLY_STALE_EPOCH",
    "APPLY_INVALID",
    "APPLY_INTERNAL",
    "MAX_PROPOSAL_BYTES",
    "CommittedEntriesConsumer",
    "LeaderChangeListener",
    "MetadataQuorum",
    "MetadataStateMachine",
    "QuorumConfigError",
    "QuorumStatus",
    "RawEntry",
    "VoterStatus",
    "build_syncobj_conf",
]

_log = structlog.get_logger(__name__)

APPLY_OK: Final = 0
APPLY_STALE_EPOCH: Final = 1
APPLY_INVALID: Final = 2
APPLY_INTERNAL: Final = 3

_STOP_TIMEOUT_S: Final = 5.0
#: what the encoded records of one proposal may add up to, each counted with 5 bytes of msgpack
#: framing, so that the command they form stays within ``MAX_COMMAND_BYTES`` (the group commit of
#: `quorum._server` splits at it)
MAX_PROPOSAL_BYTES: Final = MAX_COMMAND_BYTES - 1024
JOURNAL_FILE: Final = "raft.journal"
DUMP_FILE: Final = "raft.dump"


class QuorumConfigError(ValueError):
    """The quorum was configured in a way that would be unsafe or cannot work."""


class CommittedEntriesConsumer(Protocol):
    """Receives committed metadata entries on the event loop (see the module docstring for rules).

    Called with a non-empty list whose offsets are dense and continue exactly after the previous
    call (or after ``last_durable_offset`` / an ``on_gap`` call). Returning acknowledges the entries:
    write them (idempotently by offset) before returning if the node relies on its files.
    """

    def __call__(self, entries: list[LogEntry], /) -> None: ...


class LeaderChangeListener(Protocol):
    """``(leader_id or None, epoch)`` on the event loop, after the entries committed before it."""

    def __call__(self, leader_id: int | None, epoch: int, /) -> None: ...


class RawEntry(NamedTuple):
    """A committed entry before decoding: what apply produces and the dump keeps."""

    offset: int
    epoch: int
    timestamp_ms: int
    record: bytes


# ---------------------------------------------------------------------------------------- state


class MetadataStateMachine:
    """The replicated state: the next metadata offset and a window of recent entries.

    :meth:`apply` runs on pysyncobj's thread only and must stay deterministic. ``durable_offset`` is
    written by the delivery side (last offset the consumer acknowledged) and only decides what may be
    forgotten, never what is assigned.
    """

    def __init__(self, *, retain_entries: int = 20_000, index_map_size: int = 4096) -> None:
        self.next_offset = 0
        self.durable_offset = -1
        self._retain = retain_entries
        self._retained: deque[RawEntry] = deque()
        self._index_map_size = index_map_size
        # (raft index, next offset after that raft entry), increasing; for DescribeQuorum only.
        self._index_map: list[tuple[int, int]] = []
        self._index_floor: tuple[int, int] | None = (0, 0)
        self._lock = threading.Lock()  # index map readers live on other threads

    def apply(
        self, *, raft_index: int, entry_term: int | None, epoch: Any, timestamp_ms: Any, records: Any
    ) -> tuple[tuple[Any, ...], list[RawEntry]]:
        """Validate and append one batch; returns (result value, new entries). Never raises."""
        if type(epoch) is not int or type(timestamp_ms) is not int or epoch < 0:
            return (APPLY_INVALID, "epoch and timestamp_ms must be integers"), []
        if not isinstance(records, (list, tuple)) or not records or any(type(r) is not bytes for r in records):
            return (APPLY_INVALID, "records must be a non-empty list of encoded records"), []
        if entry_term is None:
            return (APPLY_INVALID, f"raft entry {raft_index} is not in the journal"), []
        if epoch != entry_term:
            return (APPLY_STALE_EPOCH, entry_term), []
        first = self.next_offset
        entries = [RawEntry(first + i, epoch, timestamp_ms, record) for i, record in enumerate(records)]
        self.next_offset = first + len(entries)
        self._retained.extend(entries)
        self.trim()
        with self._lock:
            self._index_map.append((raft_index, self.next_offset))
            if len(self._index_map) > 2 * self._index_map_size:
                cut = len(self._index_map) - self._index_map_size
                self._index_floor = self._index_map[cut - 1]
                del self._index_map[:cut]
        return (APPLY_OK, first, self.next_offset - 1), entries

    def trim(self) -> None:
        """Forget entries the consumer acknowledged, beyond the retained window."""
        retained = self._retained
        durable = self.durable_offset
        while len(retained) > self._retain and retained[0].offset <= durable:
            retained.popleft()

    def retained(self) -> list[RawEntry]:
        return list(self._retained)

    def to_state(self) -> dict[str, Any]:
        """The dump's ``state`` map: everything not yet acknowledged plus the retained window."""
        self.trim()
        with self._lock:
            index_map = [list(item) for item in self._index_map]
            floor = list(self._index_floor) if self._index_floor is not None else None
        return {
            "next_offset": self.next_offset,
            "entries": [list(e) for e in self._retained],
            "index_map": index_map,
            "index_floor": floor,
        }

    def from_state(self, state: Mapping[str, Any]) -> None:
        next_offset = state["next_offset"]
        entries = [RawEntry(int(o), int(e), int(t), bytes(r)) for o, e, t, r in state["entries"]]
        if type(next_offset) is not int or (entries and entries[-1].offset != next_offset - 1):
            raise DumpCorruptError("dump state: next_offset does not follow its entries")
        index_map = [(int(i), int(o)) for i, o in state.get("index_map", [])]
        floor = state.get("index_floor")
        self.next_offset = next_offset
        self._retained = deque(entries)
        with self._lock:
            self._index_map = index_map
            self._index_floor = (int(floor[0]), int(floor[1])) if floor else None

    def end_offset_at(self, raft_index: int) -> int | None:
        """Exclusive end of the metadata offsets up to ``raft_index`` (None when forgotten)."""
        with self._lock:
            pos = bisect.bisect_right(self._index_map, (raft_index, float("inf")))
            if pos == len(self._index_map):
                return self.next_offset
            if pos > 0:
                return self._index_map[pos - 1][1]
            if self._index_floor is not None and raft_index >= self._index_floor[0]:
                return self._index_floor[1]
            return None


# ---------------------------------------------------------------------------------------- pysyncobj glue

_FACTORY_LOCK = threading.Lock()
#: A message type pysyncobj's dispatcher ignores (it only acts on the types it knows).
_KEEPALIVE: Final = KEEPALIVE
_NO_BARRIER: Final = frozenset({"append_entries", _KEEPALIVE})
_TRUNCATION_NOTICE: Final = "truncating already-applied log entries"


class _TentativeTruncationFilter(logging.Filter):
    """Drop pysyncobj's CRITICAL "truncating already-applied log entries" line.

    pysyncobj logs it before ``deleteEntriesFrom`` whenever a re-sent ``append_entries`` starts
    below the applied index, which its leader causes routinely (an out-of-date acknowledgement
    moves ``nextIndex`` back). With `RaftJournal` that call only records a tentative cut and nothing
    applied is ever removed, so the line would be a false alarm in every controller's log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(_TRUNCATION_NOTICE))


def _install_log_filter() -> None:
    logger = logging.getLogger(_syncobj_module.__name__)
    if not any(isinstance(f, _TentativeTruncationFilter) for f in logger.filters):
        logger.addFilter(_TentativeTruncationFilter())


@contextlib.contextmanager
def _journal_installed(journal: Journal, journal_file: str | None) -> Iterator[None]:
    """Make ``pysyncobj.syncobj.createJournal(journal_file)`` return ``journal`` during the block.

    pysyncobj builds its journal with ``createJournal(conf.journalFile)`` inside ``SyncObj.__init__``
    and offers no other hook. The replacement answers only for this node's path and defers to
    pysyncobj's factory otherwise; the lock keeps two constructions from swapping it concurrently.
    """
    with _FACTORY_LOCK:
        original = _syncobj_module.createJournal

        def factory(journalFile: str | None = None) -> Journal:  # noqa: N803 (pysyncobj's name)
            if journalFile == journal_file:
                return journal
            return original(journalFile)

        _syncobj_module.createJournal = factory
        try:
            yield
        finally:
            _syncobj_module.createJournal = original


def _durable_transport_class(base: type[Transport]) -> type[Transport]:
    """``base`` with a durability barrier: the journal is synced before any message but
    ``append_entries`` and keepalives leaves the node (acknowledgements, votes, vote requests...).

    ``append_entries`` is exempt because the leader sends one after every command; its own
    durability is what the tick-start barrier guarantees before it counts itself for a commit.
    """

    class DurableTransport(base):  # type: ignore[valid-type,misc]
        def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:  # noqa: N803
            self._kl_owner = syncObj
            syncObj._kl_transport = self
            super().__init__(syncObj, selfNode, otherNodes)

        def send(self, node: Any, message: Any) -> bool:
            if not (type(message) is dict and message.get("type") in _NO_BARRIER):
                self._kl_owner._kl_sync()
            return bool(super().send(node, message))

    DurableTransport.__name__ = DurableTransport.__qualname__ = "Durable" + base.__name__
    return DurableTransport


class _RaftNode(SyncObj):
    """pysyncobj node carrying the metadata state machine. Only `MetadataQuorum` and tests use it."""

    def __init__(
        self,
        *,
        self_address: str,
        other_addresses: Sequence[str],
        conf: SyncObjConf,
        journal: Journal,
        state_machine: MetadataStateMachine,
        sink: Callable[[list[RawEntry]], None],
        node_id: int,
        transport_class: type[Transport],
        receive_dump: Callable[[Any], bool] | None = None,
    ) -> None:
        # Set before SyncObj.__init__: its tick thread starts inside it.
        self._kl_journal = journal
        self._kl_sm = state_machine
        self._kl_sink = sink
        self._kl_log = _log.bind(node_id=node_id)
        self._kl_transport: Transport | None = None  # set by the transport's constructor
        self._kl_keepalive_period = conf.connectionTimeout / 4
        self._kl_keepalive_at = 0.0
        #: set (by `MetadataQuorum`) once this node resigned for good: it never campaigns again
        self._kl_no_campaign = False
        with _journal_installed(journal, conf.journalFile):
            super().__init__(
                self_address, list(other_addresses), conf, transportClass=_durable_transport_class(transport_class)
            )
        if receive_dump is not None:
            # pysyncobj writes a dump streamed from the leader without fsync; ours syncs it
            self._SyncObj__serializer.setTransmissionData = receive_dump

    def _kl_sync(self) -> None:
        sync = getattr(self._kl_journal, "sync", None)
        if sync is not None:
            sync()

    def _onTick(self, timeToWait: float = 0.0) -> None:  # noqa: N802,N803
        # Barrier: whatever the previous tick appended is durable before this tick counts this
        # node towards a commit (leader) or applies anything.
        self._kl_sync()
        self._kl_keepalive()
        if self._kl_no_campaign:
            self._SyncObj__raftElectionDeadline = float("inf")
        super()._onTick(timeToWait)

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
        """pysyncobj's message handler, minus one regression of the leader's ``nextIndex``.

        On a successful acknowledgement pysyncobj sets ``nextIndex = acknowledged + 1`` even when
        it already sent entries beyond that on the same (ordered) connection, so every late
        acknowledgement makes it re-send everything after it: under 64 proposals in flight a
        follower received ~15 copies of each entry. Here ``nextIndex`` never moves back on a success
        (Raft's pipelining); a failure or a ``reset`` still moves it wherever the follower says.
        Dispatch is otherwise pysyncobj's own (this overrides the name-mangled private method).
        """
        saved = None
        kind = message.get("type") if type(message) is dict else None
        if kind == "timeout_now" and self._kl_no_campaign:
            return  # a resigned node must not be handed leadership back
        if kind == "next_node_idx" and message.get("success") and not message.get("reset") and self._isLeader():
            saved = self._SyncObj__raftNextIndex.get(node)
        stale_candidate = kind == "request_vote" and self._kl_candidate_is_behind(message)
        split_vote = kind == "request_vote" and self._kl_is_rival_candidate(message)
        SyncObj._SyncObj__onMessageReceived(self, node, message)
        if saved is not None:
            next_index: dict[Any, int] = self._SyncObj__raftNextIndex
            if next_index.get(node, saved) < saved:
                next_index[node] = saved
        if stale_candidate and not self._isLeader():
            # We refused a candidate whose log is behind ours, so it cannot win; pysyncobj would wait
            # for our own timer (up to 1.5x the election timeout after the last heartbeat). Campaign
            # after a small jitter instead. Liveness only: Raft allows an election at any time.
            self._kl_campaign_within(0.0, self.conf.appendEntriesPeriod)
        elif split_vote and not self._isLeader():
            # Another candidate of our own term asked for our vote: we both voted for ourselves, and
            # with a voter down neither of us can win this term. pysyncobj would let both wait a
            # whole new election timeout (a 2.5 s failover instead of 1.2 s in 3 of 20 kills).
            # Re-campaign after a random delay instead, long enough (>= 2 heartbeat periods) for a
            # winner's first append to reach us if a third voter did elect one of us.
            period = self.conf.appendEntriesPeriod
            self._kl_campaign_within(2 * period, 8 * period)

    def _kl_campaign_within(self, low_s: float, high_s: float) -> None:
        """Bring this node's election deadline forward to a random point ``low_s..high_s`` from now."""
        if self._kl_no_campaign:
            return
        deadline = _raft_monotonic() + random.uniform(low_s, high_s)
        self._SyncObj__raftElectionDeadline = min(self._SyncObj__raftElectionDeadline, deadline)

    def _kl_is_rival_candidate(self, message: dict[str, Any]) -> bool:
        """True when we are a candidate that voted for itself and a vote request of our term arrives."""
        try:
            return bool(
                self._SyncObj__raftState == _RAFT_STATE.CANDIDATE
                and message["term"] == self.raftCurrentTerm
                and self._SyncObj__votedForNodeId == self._SyncObj__selfNode.id
            )
        except (KeyError, TypeError, AttributeError):
            return False

    def _kl_candidate_is_behind(self, message: dict[str, Any]) -> bool:
        """True when a vote request comes from a newer term but a log less up to date than ours."""
        try:
            if message["term"] <= self.raftCurrentTerm:
                return False
            last_index = self._kl_journal[-1][1]
            last_term = self._kl_journal[-1][2]
            theirs = (message["last_log_term"], message["last_log_index"])
            return bool(theirs < (last_term, last_index))
        except (KeyError, TypeError, IndexError):
            return False

    def _kl_keepalive(self) -> None:
        """Send every peer a message pysyncobj ignores, every ``connectionTimeout / 4``.

        Followers never talk to each other, and pysyncobj checks a connection's idle timeout only
        when it next uses it: the first message after ``connectionTimeout`` of silence -- the vote
        request once the leader died -- closes the connection instead of being sent. The lost vote
        request made split votes and added a whole election round (1-2 election timeouts) to most
        failovers. Keepalives keep every voter-to-voter connection fresh.
        """
        now = _raft_monotonic()
        if now < self._kl_keepalive_at or self._kl_transport is None:
            return
        self._kl_keepalive_at = now + self._kl_keepalive_period
        for node in self.otherNodes:
            if self.isNodeConnected(node):
                self._kl_transport.send(node, {"type": _KEEPALIVE})

    def _kl_term_of(self, raft_index: int) -> int | None:
        term_of = getattr(self._kl_journal, "term_of", None)
        if term_of is not None:
            return term_of(raft_index)
        journal = self._kl_journal  # a stock pysyncobj journal (tests)
        pos = raft_index - journal[0][1]
        return journal[pos][2] if 0 <= pos < len(journal) else None

    def _kl_term_start_applied(self) -> bool:
        """True when the last applied entry is of the current term (so all earlier ones are)."""
        return self._kl_term_of(self.raftLastApplied) == self.raftCurrentTerm

    def _kl_append(
        self, epoch: int, timestamp_ms: int, records: list[bytes], *, callback: Callable[[Any, int], None] | None = None
    ) -> None:
        """Propose one batch: queue its msgpack command for pysyncobj's thread (any thread).

        ``callback(result, error)`` follows pysyncobj's convention (``result`` is what
        `_kl_apply` returned on this node). Raises ``RecordListTooLargeError`` for a batch whose
        command exceeds ``MAX_COMMAND_BYTES`` (frames are sized for that), ``BlockingIOError`` when
        pysyncobj's wake-up pipe is full (the command is queued anyway).
        """
        payload = encode_append_command(epoch, timestamp_ms, records)
        if len(payload) + 1 > MAX_COMMAND_BYTES:
            raise RecordListTooLargeError(
                f"a metadata batch of {len(records)} records encodes to {len(payload)} bytes; "
                f"the limit is {MAX_COMMAND_BYTES}"
            )
        self._applyCommand(payload, callback, _COMMAND_TYPE.REGULAR)

    def _SyncObj__doApplyCommand(self, command: bytes) -> Any:  # noqa: N802
        """pysyncobj's apply of one committed entry, without unpickling anything.

        Overrides the name-mangled private method: pysyncobj's version ``pickle.loads`` the entry
        (REGULAR, membership and version commands alike). Here a NO_OP is skipped, a kraftlog
        command is decoded from msgpack, and anything else is refused -- logged, answered with
        ``APPLY_INVALID`` and given no offset, identically on every node. Never raises.
        """
        try:
            decoded = decode_command(command)
        except CorruptMessageError as err:
            self._kl_log.critical("raft_entry_refused", raft_index=self.raftLastApplied + 1, error=str(err))
            return (APPLY_INVALID, f"refused Raft entry: {err.message}")
        if decoded is None:
            return None
        return self._kl_apply(decoded.epoch, decoded.timestamp_ms, decoded.records)

    def _SyncObj__parseChangeClusterRequest(self, command: bytes) -> None:  # noqa: N802
        """Membership changes are pickles in pysyncobj and the voter set is static: there are none."""
        return None

    def _kl_apply(self, epoch: int, timestamp_ms: int, records: list[bytes]) -> tuple[Any, ...]:
        """Apply one committed batch. Deterministic; never raises (see the module docstring)."""
        try:
            raft_index = self.raftLastApplied + 1  # pysyncobj increments it after this returns
            result, entries = self._kl_sm.apply(
                raft_index=raft_index,
                entry_term=self._kl_term_of(raft_index),
                epoch=epoch,
                timestamp_ms=timestamp_ms,
                records=records,
            )
        except Exception:
            self._kl_log.critical("metadata_apply_failed", exc_info=True)
            return (APPLY_INTERNAL, "internal error while applying; see the controller log")
        if entries:
            try:
                self._kl_sink(entries)
            except Exception:
                self._kl_log.critical("metadata_delivery_enqueue_failed", exc_info=True)
        return result


def build_syncobj_conf(
    *,
    election_timeout_ms: int,
    journal_file: Path,
    dump_file: Path,
    serializer: DumpSerializer,
    compaction_entries: int,
    compaction_interval_s: float,
    auto_tick: bool = True,
) -> SyncObjConf:
    """pysyncobj settings derived from ``controller.quorum.election.timeout.ms`` (module docstring).

    No ``password``: pysyncobj's encryptor belongs to its pickle transport; kraftlog's transport
    authenticates and encrypts itself.
    """
    e = election_timeout_ms / 1000.0
    conf = SyncObjConf(
        autoTick=auto_tick,
        autoTickPeriod=min(0.05, e / 20),
        raftMinTimeout=e,
        raftMaxTimeout=1.5 * e,  # a narrower window: failover within 3 s even on a busy 2-core box
        appendEntriesPeriod=e / 20,
        leaderFallbackTimeout=e,
        connectionTimeout=max(2 * e, 3.5),
        connectionRetryTime=e / 2,
        appendEntriesUseBatch=False,
        # one entry never reaches the batch size, so pysyncobj never sends its pickled chunks (whose
        # last chunk it labelled by the command's length, not the chunked entry's: an entry just
        # below a multiple of the size was declared finished one chunk early)
        appendEntriesBatchSizeBytes=MAX_COMMAND_BYTES + 1,
        logCompactionBatchSize=1 << 16,  # snapshot chunk, far below MAX_FRAME_BYTES
        commandsWaitLeader=False,
        dynamicMembershipChange=False,
        journalFile=str(journal_file),
        fullDumpFile=str(dump_file),
        serializer=serializer.serialize,
        deserializer=serializer.deserialize,
        useFork=False,
        logCompactionMinEntries=compaction_entries,
        logCompactionMinTime=compaction_interval_s,
        logCompactionSplit=False,
        bindRetryTime=0.2,
        maxBindRetries=25,
    )
    conf.validate()
    return conf


def _check_journal_format(journal: RaftJournal, path: Path) -> None:
    """Refuse to start on a journal holding commands this version will not apply.

    Journals written before issue 11 hold pysyncobj's pickled commands. Replaying them would refuse
    each one (no offset assigned) while the metadata log on disk already has their offsets, so new
    records would reuse offsets the consumer skips as already written: fail loudly instead.
    """
    for pos in range(len(journal)):
        command, index, _ = journal[pos]
        try:
            decode_command(command)
        except CorruptMessageError as err:
            raise QuorumConfigError(
                f"the Raft journal {path} holds an entry (raft index {index}) this version does not apply "
                f"({err.message}): it was written by a version whose Raft log pickled its commands. Stop every "
                "controller and run `kraftlog quorum recover --snapshot <latest .checkpoint>` on each "
                "(see README)"
            ) from None


# ---------------------------------------------------------------------------------------- status


@dataclass(frozen=True, slots=True)
class VoterStatus:
    """One voter as DescribeQuorum reports it. Offsets are metadata offsets, exclusive ends;
    -1 when unknown (only the leader knows its followers' progress)."""

    voter_id: int
    raft_address: str
    log_end_offset: int
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int
    raft_match_index: int | None = None


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    """What ``kafka-metadata-quorum describe --status`` shows, from this node's point of view."""

    node_id: int
    leader_id: int | None
    epoch: int
    high_watermark: int  # exclusive: first offset not known committed here (committed_offset + 1)
    committed_offset: int
    delivered_offset: int
    is_leader: bool
    has_quorum: bool
    voters: tuple[VoterStatus, ...]
    raft_commit_index: int
    raft_last_applied: int
    delivery_error: str | None = None
    #: voters this node currently has a Raft connection with (itself included)
    connected_voters: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _View:
    """pysyncobj's state as last observed on its own thread (read lock-free by the loop)."""

    leader_id: int | None = None
    term: int = 0
    raft_leader: bool = False
    has_quorum: bool = False
    ready: bool = False
    commit_index: int = 0
    last_applied: int = 0
    progress: Mapping[int, tuple[int, int, int]] = field(default_factory=dict)
    connected: tuple[int, ...] = ()
    last_index: int = 0
    #: ``clock()`` when pysyncobj's thread took this view
    observed_at: float = float("-inf")
    #: ``clock()`` of the latest moment a majority (this leader included) had answered; -inf if never
    majority_contact_at: float = float("-inf")


# ---------------------------------------------------------------------------------------- the seam


class MetadataQuorum:
    """This controller's membership in the Raft quorum that keeps the metadata log.

    All methods are called on ``loop``'s thread; callbacks are invoked there too.
    """

    def __init__(
        self,
        *,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        data_dir: Path,
        password: str | None,
        cluster_id: str,
        bind_host: str | None = None,
        fsync: bool = True,
        election_timeout_ms: int = 1000,
        loop: asyncio.AbstractEventLoop,
        on_committed: Callable[[list[LogEntry]], None],
        on_leader_change: Callable[[int | None, int], None],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        last_durable_offset: int = -1,
        on_gap: Callable[[int, int], Awaitable[None]] | None = None,
        fetch_timeout_ms: int = 2000,
        leader_endpoints: Mapping[int, str] | None = None,
        allow_unauthenticated: bool = False,
        compaction_entries: int = 10_000,
        compaction_interval_s: float = 300.0,
        snapshot_retain_entries: int = 20_000,
    ) -> None:
        if node_id not in voters:
            raise QuorumConfigError(f"node {node_id} is not a voter of {sorted(voters)}")
        addresses = {vid: f"{host}:{int(port)}" for vid, (host, port) in voters.items()}
        if len(set(addresses.values())) != len(addresses):
            raise QuorumConfigError("two voters share one Raft endpoint")
        if not password:
            if not allow_unauthenticated:
                raise QuorumConfigError(
                    "controller.quorum.raft.password is required: it is what authenticates a controller "
                    "to the others on the Raft port (without it anyone who can connect could vote)"
                )
            password = None
        if not isinstance(cluster_id, str) or not 0 < len(cluster_id) <= MAX_CLUSTER_ID_CHARS:
            raise QuorumConfigError(
                f"cluster_id must be a non-empty string of at most {MAX_CLUSTER_ID_CHARS} characters"
            )
        if election_timeout_ms < 50:
            raise QuorumConfigError("election_timeout_ms must be at least 50")
        if compaction_entries < 2:
            raise QuorumConfigError("compaction_entries must be at least 2")
        if fetch_timeout_ms < 1:
            raise QuorumConfigError("fetch_timeout_ms must be positive")
        self.node_id = node_id
        self._addresses = addresses
        self._addr_to_id = {addr: vid for vid, addr in addresses.items()}
        self._raft_nodes = {vid: TCPNode(addr) for vid, addr in addresses.items()}
        self._data_dir = Path(data_dir)
        self._password = password
        self._cluster_id = cluster_id
        # the Raft port listens on this node's own voter host unless told otherwise
        self._bind_host = bind_host if bind_host is not None else voters[node_id][0]
        self._fsync = fsync
        self._election_timeout_ms = election_timeout_ms
        self._fetch_timeout_s = fetch_timeout_ms / 1000.0
        self._loop = loop
        self._on_committed = on_committed
        self._on_leader_change = on_leader_change
        self._on_gap = on_gap
        self._clock = clock
        self._wall_clock = wall_clock
        self._leader_endpoints = dict(leader_endpoints or {})
        self._compaction_entries = compaction_entries
        self._compaction_interval_s = compaction_interval_s
        self._log = _log.bind(node_id=node_id)

        self._sm = MetadataStateMachine(retain_entries=snapshot_retain_entries)
        self._sm.durable_offset = last_durable_offset
        self._node: _RaftNode | None = None
        self._journal: RaftJournal | None = None
        self._serializer: DumpSerializer | None = None
        self._view = _View()
        self._last_emitted: tuple[int | None, int] | None = None
        self._progress_at = 0.0
        self._caught_up_ms: dict[int, int] = {}
        self._progress_term = -1
        # delivery (pysyncobj thread -> loop)
        self._pending: list[RawEntry] = []
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self._delivered = last_durable_offset
        self._delivery_error: str | None = None
        self._gap_task: asyncio.Task[None] | None = None
        self._resign_requested = False
        self._resign_since: float | None = None  # clock() of the first transfer attempt
        self._resign_attempts = 0
        self._resign_next_at = 0.0
        self._rng = random.Random()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the journal and dump, bind the Raft port and join the quorum.

        The blocking part (journal replay, key derivation for the password, binding) runs in the
        default executor. Raises ``OSError`` when the Raft port cannot be bound.
        """
        if self._node is not None or self._closed:
            raise RuntimeError("MetadataQuorum.start() called twice")
        owner = threading.current_thread()
        self._node = await self._loop.run_in_executor(None, self._build, owner)
        self._log.info(
            "metadata_quorum_started",
            raft_address=self._addresses[self.node_id],
            voters=self._addresses,
            fsync=self._fsync,
            election_timeout_ms=self._election_timeout_ms,
            cluster_id=self._cluster_id,
            bind_host=self._bind_host,
            authenticated=self._password is not None,
        )

    def _build(self, owner: threading.Thread) -> _RaftNode:
        _install_log_filter()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        journal_path = self._data_dir / JOURNAL_FILE
        dump_path = self._data_dir / DUMP_FILE
        serializer = DumpSerializer(
            dump_path,
            state_provider=self._sm.to_state,
            state_loader=self._load_state,
            fsync=self._fsync,
            node_id=self.node_id,
        )
        journal = RaftJournal(
            journal_path,
            fsync=self._fsync,
            sync_on_add=False,
            before_prefix_drop=serializer.make_durable,
            node_id=self.node_id,
        )
        try:
            _check_journal_format(journal, journal_path)
            if dump_path.exists():
                self._align(journal, dump_path)
            conf = build_syncobj_conf(
                election_timeout_ms=self._election_timeout_ms,
                journal_file=journal_path,
                dump_file=dump_path,
                serializer=serializer,
                compaction_entries=self._compaction_entries,
                compaction_interval_s=self._compaction_interval_s,
            )
            me = self._addresses[self.node_id]
            others = [addr for vid, addr in sorted(self._addresses.items()) if vid != self.node_id]
            e = self._election_timeout_ms / 1000.0
            settings = TransportSettings(
                node_id=self.node_id,
                voters=dict(self._addresses),
                cluster_id=self._cluster_id,
                auth_key=derive_auth_key(self._password or "", self._cluster_id),
                bind_host=self._bind_host,
                # a voter finishes the handshake in two round trips; an attacker holds a slot this long
                handshake_timeout_s=min(max(2 * e, 1.0), 5.0),
            )
            node = _RaftNode(
                self_address=me,
                other_addresses=others,
                conf=conf,
                journal=journal,
                state_machine=self._sm,
                sink=self._sink,
                node_id=self.node_id,
                transport_class=raft_transport_class(settings),
                receive_dump=serializer.receive,
            )
        except BaseException:
            journal.close()
            raise
        # pysyncobj's tick thread stops when the thread that built the node dies; that was an
        # executor worker, so hand the role to the thread running the event loop.
        node._SyncObj__mainThread = owner
        try:
            node.waitBinded()
        except SyncObjException as err:
            node.destroy_synchronous()
            raise OSError(errno.EADDRINUSE, f"cannot bind the Raft port {me}") from err
        self._journal = journal
        self._serializer = serializer
        node.addOnTickCallback(self._observe)
        return node

    def _align(self, journal: RaftJournal, dump_path: Path) -> None:
        try:
            dump = read_dump(dump_path)
        except DumpCorruptError as err:
            if journal.first_index in (None, 1):
                # Never compacted: the journal alone holds the whole log; the dump is redundant.
                aside = dump_path.with_name(f"{dump_path.name}.corrupt-{int(self._wall_clock())}")
                dump_path.rename(aside)
                self._log.warning("raft_dump_corrupt_set_aside", error=str(err), moved_to=str(aside))
                return
            raise
        action = journal.align_with_dump(dump.raft_prev, dump.raft_last)
        self._log.info("raft_journal_aligned_with_dump", action=action, dump_index=dump.raft_last[1])

    async def stop(self) -> None:
        """Leave the quorum: stop pysyncobj's thread, close the journal, fail pending proposals.

        No callback runs after this returns.
        """
        node, self._node = self._node, None
        self._closed = True
        gap = self._gap_task
        if gap is not None:
            gap.cancel()
        if node is not None:
            # Bounded: a tick thread stuck in a hung fsync must not hold the node's shutdown (the
            # thread ends by itself once it returns: pysyncobj checks that the loop's thread lives).
            done = self._loop.run_in_executor(None, node.destroy_synchronous)
            try:
                await asyncio.wait_for(asyncio.shield(done), _STOP_TIMEOUT_S)
            except TimeoutError:
                self._log.warning("metadata_quorum_stop_timed_out", timeout_s=_STOP_TIMEOUT_S)
        for fut in list(self._inflight):
            if not fut.done():
                fut.set_exception(NotControllerError("this controller left the quorum", leader_id=None))
        self._inflight.clear()
        self._log.info("metadata_quorum_stopped")

    # ------------------------------------------------------------------ pysyncobj thread side

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # loop closed: the process is going away

    def _sink(self, entries: list[RawEntry]) -> None:
        """Queue applied entries for the loop (pysyncobj thread). One drain is scheduled at a time;
        entries queued later join it or schedule the next, so loop order equals apply order."""
        if self._delivery_error is not None:
            return
        with self._pending_lock:
            self._pending.extend(entries)
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        self._call_soon(self._drain)

    def _load_state(self, state: dict[str, Any]) -> None:
        """Dump loaded (restart or snapshot from the leader): restore, re-offer retained entries."""
        self._sm.from_state(state)
        retained = self._sm.retained()
        self._log.info(
            "metadata_state_restored",
            next_offset=self._sm.next_offset,
            retained_from=retained[0].offset if retained else None,
        )
        if retained:
            self._sink(retained)

    def _observe(self) -> None:
        """Tick callback (pysyncobj thread, after apply): refresh the view, report leader changes."""
        node = self._node
        if node is None:
            return
        try:
            raft_leader = node._isLeader()
            leader = node._getLeader()
            term = node.raftCurrentTerm
            leader_id = self._addr_to_id.get(str(leader.id)) if leader is not None else None
            ready = raft_leader and node._kl_term_start_applied()
            progress = self._view.progress
            now = self._clock()
            if raft_leader and (now - self._progress_at >= 0.01 or not progress):
                self._progress_at = now
                progress = self._leader_progress(node, term)
            connected = tuple(
                sorted(
                    [self.node_id]
                    + [
                        vid
                        for vid in self._addr_to_id.values()
                        if vid != self.node_id and node.isNodeConnected(self._raft_nodes[vid])
                    ]
                )
            )
            last_index = self._journal.last_index if self._journal is not None else None
            contact_at = self._majority_contact_at(node, now) if raft_leader else float("-inf")
            if raft_leader and now - contact_at > self._fetch_timeout_s:
                # check-quorum: pysyncobj's own fallback uses the election timeout, which may be
                # longer than the fetch timeout (KRaft resigns after the fetch timeout)
                self._log.warning(
                    "metadata_quorum_check_quorum_failed",
                    epoch=term,
                    last_majority_contact_s=round(now - contact_at, 3),
                )
                self._step_down(node)
                raft_leader = ready = False
                leader_id = None
            view = _View(
                leader_id,
                term,
                raft_leader,
                node.hasQuorum,
                ready,
                node.raftCommitIndex,
                node.raftLastApplied,
                progress if raft_leader else {},
                connected,
                last_index or 0,
                observed_at=now,
                majority_contact_at=contact_at,
            )
            self._view = view
            emitted = (leader_id if (leader_id != self.node_id or ready) else None, term)
            if emitted != self._last_emitted:
                self._last_emitted = emitted
                self._log.info("metadata_quorum_leader_change", leader_id=emitted[0], epoch=term, raft_leader=leader_id)
                self._call_soon(self._emit_leader_change, emitted[0], term)
            if self._resign_requested and raft_leader:
                self._resign(node, now)
        except Exception:
            self._log.exception("metadata_quorum_observe_failed")

    def _majority_contact_at(self, node: _RaftNode, now: float) -> float:
        """``clock()`` when a majority of voters (this leader included) last had answered it."""
        responses: dict[Any, float] = node._SyncObj__lastResponseTime
        now_raft = _raft_monotonic()
        times = sorted((now - (now_raft - responses[n]) for n in node.otherNodes if n in responses), reverse=True)
        needed = len(self._addresses) // 2  # others needed besides this node for a majority
        if needed == 0:
            return now
        return times[needed - 1] if len(times) >= needed else float("-inf")

    def _step_down(self, node: _RaftNode) -> None:
        """Leave leadership now (pysyncobj's thread), as its own check-quorum fallback does."""
        node._SyncObj__setState(_RAFT_STATE.FOLLOWER)
        node._SyncObj__raftLeader = None

    def _resign(self, node: _RaftNode, now: float) -> None:
        """A leader that cannot apply metadata hands leadership on (pysyncobj's thread).

        ``transferLeadership`` is refused while no follower is fully caught up, so it is retried
        with back-off; after ``fetch_timeout_ms`` of failed transfers this node steps down and stops
        campaigning, so the others elect a leader among themselves."""
        if self._resign_since is None:
            self._resign_since = now
        if now >= self._resign_next_at:
            node.transferLeadership()
            period_ms = self._election_timeout_ms / 4
            self._resign_next_at = (
                now
                + backoff_ms(self._resign_attempts, base_ms=period_ms, max_ms=self._election_timeout_ms, rng=self._rng)
                / 1000.0
            )
            self._resign_attempts += 1
        if now - self._resign_since >= self._fetch_timeout_s:
            self._log.warning("metadata_quorum_resigned", attempts=self._resign_attempts, reason=self._delivery_error)
            node._kl_no_campaign = True  # it never campaigns again until restarted
            self._step_down(node)

    def _leader_progress(self, node: _RaftNode, term: int) -> dict[int, tuple[int, int, int]]:
        """Per follower (raft match index, last fetch ms, last caught-up ms), on the leader."""
        if term != self._progress_term:
            self._progress_term = term
            self._caught_up_ms = {}
        match: dict[Any, int] = node._SyncObj__raftMatchIndex
        responses: dict[Any, float] = node._SyncObj__lastResponseTime
        last_index = self._journal.last_index if self._journal is not None else None
        now_ms = int(self._wall_clock() * 1000)
        now_raft = _raft_monotonic()
        out: dict[int, tuple[int, int, int]] = {}
        for raft_node, index in list(match.items()):
            vid = self._addr_to_id.get(str(raft_node.id))
            if vid is None:
                continue
            if last_index is not None and index >= last_index:
                self._caught_up_ms[vid] = now_ms
            seen = responses.get(raft_node)
            fetch_ms = int(now_ms - (now_raft - seen) * 1000) if seen is not None else -1
            out[vid] = (index, fetch_ms, self._caught_up_ms.get(vid, -1))
        return out

    # ------------------------------------------------------------------ loop side

    def _emit_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if self._closed:
            return
        try:
            self._on_leader_change(leader_id, epoch)
        except Exception:
            self._log.exception("on_leader_change_failed", leader_id=leader_id, epoch=epoch)

    def _drain(self) -> None:
        with self._pending_lock:
            self._drain_scheduled = False
            if self._gap_task is not None:
                return  # delivery waits for the gap fill; the entries stay queued in order
            batch, self._pending = self._pending, []
        if self._closed or self._delivery_error is not None:
            return
        out: list[LogEntry] = []
        for i, raw in enumerate(batch):
            expected = (out[-1].offset if out else self._delivered) + 1
            if raw.offset < expected:
                continue  # already delivered (journal replay, dump reload)
            if raw.offset > expected:
                if not self._deliver(out):
                    return
                out = []
                if self._on_gap is None:
                    self._handle_gap(expected, raw.offset)
                    return
                self._start_gap_fill(expected, raw.offset, batch[i:])
                return
            try:
                record = decode_record(raw.record)
            except MetadataRecordError as err:
                if self._deliver(out):
                    self._stall(
                        f"cannot decode metadata record at offset {raw.offset}: {err} "
                        "(is this controller older than the one that wrote it?)"
                    )
                return
            out.append(LogEntry(raw.offset, raw.epoch, raw.timestamp_ms, record))
        self._deliver(out)

    def _deliver(self, out: list[LogEntry]) -> bool:
        if not out:
            return True
        try:
            self._on_committed(out)
        except Exception as err:
            self._log.exception("on_committed_failed", first_offset=out[0].offset, last_offset=out[-1].offset)
            self._stall(f"on_committed raised {type(err).__name__}: {err}")
            return False
        self._delivered = out[-1].offset
        self._sm.durable_offset = self._delivered
        return True

    def _handle_gap(self, first_missing: int, first_available: int) -> None:
        self._stall(
            f"metadata offsets {first_missing}..{first_available - 1} were compacted away before "
            "this controller received them; fetch them from another controller"
        )

    def _start_gap_fill(self, first_missing: int, first_available: int, rest: list[RawEntry]) -> None:
        """Put ``rest`` back at the head of the queue and fill the gap without blocking the loop."""
        with self._pending_lock:
            self._pending[:0] = rest
            self._gap_task = self._loop.create_task(
                self._fill_gap(first_missing, first_available), name="metadata-gap-fill"
            )
        self._log.warning("metadata_delivery_gap", first_missing=first_missing, first_available=first_available)

    async def _fill_gap(self, first_missing: int, first_available: int) -> None:
        """Await ``on_gap`` until it succeeds (retried with back-off), then resume delivery."""
        assert self._on_gap is not None
        attempt = 0
        try:
            while not self._closed:
                try:
                    result = self._on_gap(first_missing, first_available)
                    if inspect.isawaitable(result):
                        await result
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as err:
                    delay_ms = backoff_ms(attempt, base_ms=100, max_ms=self._election_timeout_ms * 2, rng=self._rng)
                    attempt += 1
                    self._log.warning(
                        "metadata_gap_fill_failed",
                        first_missing=first_missing,
                        first_available=first_available,
                        error=f"{type(err).__name__}: {err}",
                        attempt=attempt,
                        retry_in_ms=round(delay_ms),
                    )
                    await asyncio.sleep(delay_ms / 1000.0)
            else:
                return
            self._delivered = max(self._delivered, first_available - 1)
            self._sm.durable_offset = self._delivered
        finally:
            with self._pending_lock:
                self._gap_task = None
        self._drain()

    def _stall(self, reason: str) -> None:
        self._delivery_error = reason
        self._resign_requested = True
        self._log.critical("metadata_delivery_stopped", reason=reason, delivered_offset=self._delivered)

    # ------------------------------------------------------------------ public API

    @property
    def leader_id(self) -> int | None:
        """The Raft leader as this node last saw it (itself only once it is ready to lead)."""
        view = self._view
        if view.leader_id == self.node_id and not view.ready:
            return None
        return view.leader_id

    @property
    def epoch(self) -> int:
        """The Raft term, which is the controller epoch."""
        return self._view.term

    @property
    def is_leader(self) -> bool:
        """Raft leader, connected to a majority, caught up to its epoch start, delivery healthy --
        and, by the clock, heard from a majority and observed by pysyncobj's thread within
        ``fetch_timeout_ms`` (check-quorum; see the module docstring)."""
        view = self._view
        if not (
            self._node is not None
            and view.raft_leader
            and view.has_quorum
            and view.ready
            and self._delivery_error is None
        ):
            return False
        now = self._clock()
        return (
            now - view.observed_at <= self._fetch_timeout_s and now - view.majority_contact_at <= self._fetch_timeout_s
        )

    @property
    def committed_offset(self) -> int:
        """Last metadata offset committed and applied on this node; -1 when none."""
        return self._sm.next_offset - 1

    @property
    def delivered_offset(self) -> int:
        """Last offset ``on_committed`` acknowledged (or ``last_durable_offset``)."""
        return self._delivered

    def _leader_hint(self) -> dict[str, Any]:
        leader = self.leader_id
        return {
            "leader_id": leader,
            "leader_address": self._leader_endpoints.get(leader) if leader is not None else None,
        }

    async def propose(self, records: Sequence[MetadataRecord], *, epoch: int, timeout_s: float) -> int:
        """Commit ``records`` as one batch written in ``epoch``; return the last offset committed.

        Raises ``NotControllerError`` (with the leader hint) when this node is not the ready leader
        of ``epoch`` or the batch was not committed in ``epoch``; ``RequestTimedOutError`` when it was
        not committed within ``timeout_s`` -- then the outcome is unknown: the batch may still commit
        later (it will show up through ``on_committed``). When this returns, ``on_committed`` has
        received the batch on this node.
        """
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if not records:
            raise InvalidRequestError("a metadata proposal needs at least one record")
        node = self._node
        if node is None:
            raise NotControllerError("this controller is not running", leader_id=None)
        if self._delivery_error is not None:
            raise NotControllerError(
                f"this controller stopped applying metadata: {self._delivery_error}", leader_id=None
            )
        view = self._view
        if not self.is_leader:
            raise NotControllerError(**self._leader_hint())
        if epoch != view.term:
            raise NotControllerError(
                f"epoch {epoch} is not the current controller epoch {view.term}", **self._leader_hint()
            )
        encoded = [encode_record(r) for r in records]
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._inflight.add(fut)

        def on_result(result: Any, error: int) -> None:  # pysyncobj's thread, or this one
            self._call_soon(self._resolve, fut, result, error)

        try:
            try:
                node._kl_append(epoch, int(self._wall_clock() * 1000), encoded, callback=on_result)
            except BlockingIOError:
                pass  # pysyncobj's wake-up pipe is full; the command is queued and the thread awake
            try:
                return await asyncio.wait_for(fut, timeout_s)
            except TimeoutError:
                self._log.warning("metadata_proposal_timed_out", records=len(encoded), epoch=epoch, timeout_s=timeout_s)
                raise RequestTimedOutError(
                    f"metadata proposal not committed within {timeout_s:.3f}s; outcome unknown", **self._leader_hint()
                ) from None
        finally:
            self._inflight.discard(fut)

    def _resolve(self, fut: asyncio.Future[Any], result: Any, error: int) -> None:
        if fut.done():
            return
        if error == FAIL_REASON.SUCCESS and isinstance(result, tuple) and result:
            code = result[0]
            if code == APPLY_OK:
                fut.set_result(result[2])
            elif code == APPLY_STALE_EPOCH:
                fut.set_exception(
                    NotControllerError(
                        f"the batch was appended in epoch {result[1]}, not the epoch it was decided in",
                        **self._leader_hint(),
                    )
                )
            elif code == APPLY_INVALID:
                fut.set_exception(InvalidRequestError(str(result[1])))
            else:
                fut.set_exception(UnknownServerError(str(result[1:])))
        elif error in (FAIL_REASON.QUEUE_FULL, FAIL_REASON.UNKNOWN_OUTCOME):
            fut.set_exception(
                RequestTimedOutError(
                    "metadata proposal outcome unknown"
                    if error == FAIL_REASON.UNKNOWN_OUTCOME
                    else "the Raft command queue is full",
                    **self._leader_hint(),
                )
            )
        elif error == FAIL_REASON.SUCCESS:
            fut.set_exception(UnknownServerError(f"unexpected apply result {result!r:.80}"))
        else:
            # MISSING_LEADER, NOT_LEADER, LEADER_CHANGED, DISCARDED, REQUEST_DENIED: not committed.
            fut.set_exception(
                NotControllerError(f"metadata proposal not committed (pysyncobj reason {error})", **self._leader_hint())
            )

    def status(self) -> QuorumStatus:
        """DescribeQuorum from this node's point of view (followers know only themselves)."""
        view = self._view
        now_ms = int(self._wall_clock() * 1000)
        voters: list[VoterStatus] = []
        for vid, addr in sorted(self._addresses.items()):
            if vid == self.node_id:
                voters.append(VoterStatus(vid, addr, self._sm.next_offset, now_ms, now_ms, view.last_index))
                continue
            progress = view.progress.get(vid) if view.raft_leader else None
            if progress is None:
                voters.append(VoterStatus(vid, addr, -1, -1, -1, None))
                continue
            match_index, fetch_ms, caught_up_ms = progress
            end = self._sm.end_offset_at(match_index)
            voters.append(VoterStatus(vid, addr, -1 if end is None else end, fetch_ms, caught_up_ms, match_index))
        committed = self.committed_offset
        return QuorumStatus(
            node_id=self.node_id,
            leader_id=self.leader_id,
            epoch=view.term,
            high_watermark=committed + 1,
            committed_offset=committed,
            delivered_offset=self._delivered,
            is_leader=self.is_leader,
            has_quorum=view.has_quorum,
            voters=tuple(voters),
            raft_commit_index=view.commit_index,
            raft_last_applied=view.last_applied,
            delivery_error=self._delivery_error,
            connected_voters=view.connected,
        )
