"""pysyncobj glue: the `SyncObj` subclass the seam runs (`_RaftNode`), its configuration, the durable
journal and transport installed into it, and the log filter for pysyncobj's own chatter (see
`quorum.raft`). Nothing outside `quorum.raft*` touches pysyncobj.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pysyncobj.syncobj as _syncobj_module
import structlog
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.journal import Journal
from pysyncobj.monotonic import monotonic as _raft_monotonic
from pysyncobj.syncobj import _COMMAND_TYPE, _RAFT_STATE
from pysyncobj.transport import Transport

from kraftlog.common.errors import (
    CorruptMessageError,
    RecordListTooLargeError,
)
from kraftlog.quorum.raft._journal import RaftJournal
from kraftlog.quorum.raft._membership import RaftVoter
from kraftlog.quorum.raft._prevote import (
    PRE_VOTE,
    PRE_VOTE_RESPONSE,
    TERM_AHEAD,
    TRANSFER_FLAG,
    PreVoteRound,
    grant_pre_vote,
    ignore_vote_request,
    leader_alive_window_s,
    log_is_up_to_date,
)
from kraftlog.quorum.raft._raft_messages import MAX_COMMAND_BYTES, VOTER_REPORT, decode_command, encode_append_command
from kraftlog.quorum.raft._raft_state import (
    _KEEPALIVE,
    _NO_BARRIER,
    _TRUNCATION_NOTICE,
    APPLY_INTERNAL,
    APPLY_INVALID,
    APPLY_OK,
    MetadataStateMachine,
    QuorumConfigError,
    RawEntry,
)
from kraftlog.quorum.raft._raft_voters import KRAFT_VERSION_MAX, VoterNode, _VoterChangesNode
from kraftlog.quorum.raft._serializer import DumpSerializer

_log = structlog.get_logger(__name__)

_FACTORY_LOCK = threading.Lock()


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

        def factory(journalFile: str | None = None) -> Journal:
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

    class DurableTransport(base):
        def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
            self._kl_owner = syncObj
            syncObj._kl_transport = self
            super().__init__(syncObj, selfNode, otherNodes)

        def send(self, node: Any, message: Any) -> bool:
            kind = message.get("type") if type(message) is dict else None
            if kind not in _NO_BARRIER:
                self._kl_owner._kl_sync()
            if kind == "request_vote" and self._kl_owner._kl_transfer_election:
                message = {**message, TRANSFER_FLAG: True}  # the leader asked for this election
            return bool(super().send(node, message))

    DurableTransport.__name__ = DurableTransport.__qualname__ = "Durable" + base.__name__
    return DurableTransport


class _RaftNode(_VoterChangesNode):
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
        voters: Mapping[int, RaftVoter] | None = None,
        dump_serializer: DumpSerializer | None = None,
        observer: bool = False,
        directory_id: str | None = None,
        port_offset: int | None = None,
    ) -> None:
        # Set before SyncObj.__init__: its tick thread starts inside it.
        #: this node's metadata log dir id, reported to the peers (the kraft.version upgrade needs it)
        self._kl_directory_id = directory_id
        self._kl_port_offset = port_offset
        #: what the peers reported: voter id -> (directory id, highest kraft.version supported)
        self._kl_voter_reports: dict[int, tuple[str | None, int]] = {}
        #: the committed voter set: the fold of the voter changes applied so far (what the dump keeps)
        self._kl_applied_voters: dict[int, RaftVoter] = dict(voters or {})
        #: the voter set in force (Raft: the last change in the log, committed or not) must be re-derived
        self._kl_voters_dirty = voters is not None
        #: voter changes are tracked (a `MetadataQuorum` node; the unit tests' bare nodes are not)
        self._kl_dynamic = voters is not None
        #: the voter set in force was derived from the loaded log (dump and journal) at least once:
        #: until then this node does not campaign (see `_VoterChangesNode._kl_reconcile_voters`)
        self._kl_voters_known = voters is None
        self._kl_node_id = node_id
        #: not in the voter set in force (KIP-853's observer): it replicates but never campaigns
        self._kl_observer = observer
        if dump_serializer is not None and voters is not None:
            # before SyncObj.__init__: its tick thread may load the dump at once
            dump_serializer.track_voters(self.kl_applied_voters, self.kl_load_applied_voters, VoterNode)
        self._kl_journal = journal
        self._kl_sm = state_machine
        self._kl_sink = sink
        self._kl_log = _log.bind(node_id=node_id)
        self._kl_transport: Transport | None = None  # set by the transport's constructor
        self._kl_keepalive_period = conf.connectionTimeout / 4
        self._kl_keepalive_at = 0.0
        #: set (by `MetadataQuorum`) once this node resigned for good: it never campaigns again
        self._kl_no_campaign = False
        # pre-vote (quorum.raft._prevote): the round in progress, the term a won round may start, when
        # a leader was last heard from, and whether the election being started is a leadership transfer
        self._kl_prevote: PreVoteRound | None = None
        self._kl_prevote_won_term: int | None = None
        self._kl_prevote_lost_rounds = 0
        self._kl_leader_heard_at: float | None = None
        self._kl_transfer_election = False
        self._kl_window_s = leader_alive_window_s(conf.raftMinTimeout, conf.appendEntriesPeriod)
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

    def _onTick(self, timeToWait: float = 0.0) -> None:
        # Barrier: whatever the previous tick appended is durable before this tick counts this
        # node towards a commit (leader) or applies anything.
        self._kl_sync()
        self._kl_keepalive()
        if self._kl_voters_dirty and not getattr(self, "_SyncObj__needLoadDumpFile", True):
            self._kl_reconcile_voters()
        if self._kl_no_campaign or self._kl_observer or not self._kl_voters_known:
            self._SyncObj__raftElectionDeadline = float("inf")
        else:
            self._kl_pre_vote_gate()
        try:
            super()._onTick(timeToWait)
        finally:
            self._kl_transfer_election = False

    # ------------------------------------------------------------------ pre-vote (quorum.raft._prevote)

    def _kl_is_leader_state(self) -> bool:
        return bool(self._SyncObj__raftState == _RAFT_STATE.LEADER)

    def _kl_pre_vote_gate(self) -> None:
        """Run before pysyncobj's tick: let its election start only after a won pre-vote round.

        pysyncobj starts an election (term + 1) when the election deadline passed. Here, when it has
        passed, either the leader asked for this election (``timeout_now``: no pre-vote, the vote
        requests carry ``kl_transfer``), or a pre-vote round for ``term + 1`` was won (pysyncobj
        proceeds, this tick), or a new pre-vote round starts and the deadline moves one election
        timeout on (the round's expiry; pysyncobj does nothing this tick).
        """
        if self._SyncObj__raftState not in (_RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE):
            self._kl_prevote = None
            self._kl_prevote_won_term = None
            return
        now = _raft_monotonic()
        if self._SyncObj__raftElectionDeadline >= now or not self._SyncObj__connectedToAnyone():
            return
        term = self.raftCurrentTerm
        if self._SyncObj__transferInProgress:
            self._kl_transfer_election = True
            self._kl_prevote = None
            return
        if self._kl_prevote_won_term == term + 1:
            self._kl_prevote = None
            self._kl_prevote_won_term = None
            self._kl_prevote_lost_rounds = 0
            return
        if self._kl_prevote is not None and not self._kl_prevote.won:
            self._kl_prevote_lost_rounds += 1
            if self._kl_prevote_lost_rounds in (1, 2) or self._kl_prevote_lost_rounds % 30 == 0:
                self._kl_log.info(
                    "raft_pre_vote_lost",
                    term=self._kl_prevote.term,
                    granted=len(self._kl_prevote.granted),
                    refused=len(self._kl_prevote.refused),
                    voters=self._kl_prevote.voters,
                    rounds_lost=self._kl_prevote_lost_rounds,
                )
        self._SyncObj__raftElectionDeadline = now + self._SyncObj__generateRaftTimeout()
        self._kl_prevote = PreVoteRound(
            term=term + 1, voters=len(self.otherNodes) + 1, granted={self._SyncObj__selfNode.id}
        )
        request = {
            "type": PRE_VOTE,
            "term": term + 1,
            "last_log_index": self._SyncObj__getCurrentLogIndex(),
            "last_log_term": self._SyncObj__getCurrentLogTerm(),
        }
        if self._kl_transport is not None:
            for node in self.otherNodes:
                self._kl_transport.send(node, request)
        self._kl_check_pre_vote()

    def _kl_check_pre_vote(self) -> None:
        round_ = self._kl_prevote
        if round_ is not None and round_.won and self._kl_prevote_won_term != round_.term:
            self._kl_prevote_won_term = round_.term
            self._SyncObj__raftElectionDeadline = 0.0  # pysyncobj campaigns on the next tick
            self._kl_log.info("raft_pre_vote_won", term=round_.term, granted=len(round_.granted), voters=round_.voters)

    def _kl_on_pre_vote(self, node: Any, message: dict[str, Any]) -> None:
        """Answer a pre-vote request; nothing of this node's state changes (``grant_pre_vote``)."""
        now = _raft_monotonic()
        own_index = self._SyncObj__getCurrentLogIndex()
        own_term = self._SyncObj__getCurrentLogTerm()
        leader = self._kl_is_leader_state()
        granted = grant_pre_vote(
            candidate_term=message["term"],
            candidate_last_term=message["last_log_term"],
            candidate_last_index=message["last_log_index"],
            own_term=self.raftCurrentTerm,
            own_last_term=own_term,
            own_last_index=own_index,
            is_leader=leader,
            leader_heard_s=self._kl_leader_heard_at,
            now_s=now,
            window_s=self._kl_window_s,
        )
        if self._kl_transport is not None:
            self._kl_transport.send(node, {"type": PRE_VOTE_RESPONSE, "term": message["term"], "granted": granted})
        behind = not log_is_up_to_date(message["last_log_term"], message["last_log_index"], own_term, own_index)
        if behind and not leader and not self._kl_leader_alive(now):
            # The asker cannot win and no leader is alive: campaign soon rather than at our own timer
            # (liveness only, like the stale request_vote case below).
            self._kl_campaign_within(0.0, self.conf.appendEntriesPeriod)

    def _kl_on_pre_vote_response(self, node: Any, message: dict[str, Any]) -> None:
        round_ = self._kl_prevote
        if round_ is None or self._SyncObj__raftState not in (_RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE):
            return
        round_.record(node.id, message["term"], message["granted"])
        self._kl_check_pre_vote()

    def _kl_leader_alive(self, now: float) -> bool:
        heard = self._kl_leader_heard_at
        return heard is not None and now - heard < self._kl_window_s

    def _kl_on_term_ahead(self, message: dict[str, Any]) -> None:
        """A voter whose term is above ours ignores our appends: as Raft's leader seeing a higher term
        in a response, step down to it (the voter's term got ahead only in a lost race between its
        won pre-vote and a new leader; without this it could never rejoin while we lead)."""
        term = message["term"]
        if self._kl_is_leader_state() and term > self.raftCurrentTerm:
            self._kl_log.warning("raft_leader_saw_higher_term", term=self.raftCurrentTerm, higher_term=term)
            self._SyncObj__setCurrentTerm(term, None)
            self._SyncObj__setState(_RAFT_STATE.FOLLOWER)
            self._SyncObj__raftLeader = None

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
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
        if kind == PRE_VOTE:
            self._kl_on_pre_vote(node, message)
            return
        if kind == PRE_VOTE_RESPONSE:
            self._kl_on_pre_vote_response(node, message)
            return
        if kind == TERM_AHEAD:
            self._kl_on_term_ahead(message)
            return
        if kind == VOTER_REPORT:
            self._kl_on_voter_report(node, message)
            return
        if kind == "request_vote":
            transfer = bool(message.pop(TRANSFER_FLAG, False))
            if ignore_vote_request(
                transfer=transfer,
                is_leader=self._kl_is_leader_state(),
                leader_heard_s=self._kl_leader_heard_at,
                now_s=_raft_monotonic(),
                window_s=self._kl_window_s,
            ):
                return  # leader stickiness: a live leader was heard from (quorum.raft._prevote)
        if kind == "append_entries":
            if message["term"] >= self.raftCurrentTerm:
                self._kl_leader_heard_at = _raft_monotonic()
                self._kl_prevote = None  # a leader of our term or newer: no round may turn into an election
                self._kl_prevote_won_term = None
            elif not self._kl_is_leader_state() and self._kl_transport is not None:
                self._kl_transport.send(node, {"type": TERM_AHEAD, "term": self.raftCurrentTerm})
        if kind == "next_node_idx" and message.get("success") and not message.get("reset") and self._isLeader():
            saved = self._SyncObj__raftNextIndex.get(node)
        stale_candidate = kind == "request_vote" and self._kl_candidate_is_behind(message)
        split_vote = kind == "request_vote" and self._kl_is_rival_candidate(message)
        SyncObj._SyncObj__onMessageReceived(self, node, message)
        if kind == "append_entries" and self._kl_dynamic:
            self._kl_voters_dirty = True
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
        if self._kl_no_campaign or self._kl_observer:
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
        failovers. Keepalives keep every voter-to-voter connection fresh. Each round also carries
        this node's report (directory id, highest kraft.version): whoever leads next knows it.
        """
        now = _raft_monotonic()
        if now < self._kl_keepalive_at or self._kl_transport is None:
            return
        self._kl_keepalive_at = now + self._kl_keepalive_period
        report = {"type": VOTER_REPORT, "dir": self._kl_directory_id, "kraft_max": KRAFT_VERSION_MAX}
        for node in self.otherNodes:
            if self.isNodeConnected(node):
                self._kl_transport.send(node, {"type": _KEEPALIVE})
                if not self._kl_observer:
                    self._kl_transport.send(node, report)

    def _kl_term_of(self, raft_index: int) -> int | None:
        term_of = getattr(self._kl_journal, "term_of", None)
        if term_of is not None:
            term: int | None = term_of(raft_index)
            return term
        journal = self._kl_journal  # a stock pysyncobj journal (tests)
        pos = raft_index - journal[0][1]
        return journal[pos][2] if 0 <= pos < len(journal) else None

    def _kl_term_start_applied(self) -> bool:
        """True when the last applied entry is of the current term (so all earlier ones are)."""
        return bool(self._kl_term_of(self.raftLastApplied) == self.raftCurrentTerm)

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

    def _SyncObj__doApplyCommand(self, command: bytes) -> Any:
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
        if isinstance(decoded, bytes):
            return self._kl_apply_voter_change(decoded)
        return self._kl_apply(decoded.epoch, decoded.timestamp_ms, decoded.records)

    def _kl_append_control(self, timestamp_ms: int, records: list[bytes]) -> None:
        """Append the metadata log's records of the voter change being applied (its Raft entry's
        term as their epoch, its proposal time): the next offsets, the same on every node."""
        term = self._kl_term_of(self.raftLastApplied + 1)
        result = self._kl_apply(term if term is not None else -1, timestamp_ms, records)
        if result[0] != APPLY_OK:
            self._kl_log.warning("raft_voter_records_not_appended", result=str(result)[:200])

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
        dynamicMembershipChange=True,  # our voter changes (quorum.raft._membership); never pickles
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
                "(see docs/snapshots.md)"
            ) from None
