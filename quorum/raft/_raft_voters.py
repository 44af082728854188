"""The voter changes of a dynamic quorum (issue 26, KIP-853) inside pysyncobj: the part of
`quorum.raft._raft_node._RaftNode` that appends, applies and follows them (its base class).

The decisions are pure and live in `quorum.raft._membership` (decode, apply, fold); this class
only reads pysyncobj's state and drives it:

* the *committed* voter set (``_kl_applied_voters``) is the fold of the voter changes applied so
  far; the full dump keeps it (`quorum.raft._serializer.DumpSerializer.track_voters`);
* the voter set *in force* is the committed set folded with every voter change appended after the
  last applied entry (`quorum.raft._membership.voters_in_force`): Raft's rule, a change takes
  effect on append. A change truncated away (a new leader's log replaces the tail) drops out of the
  fold, so the set reverts without replaying anything backwards;
* ``_kl_reconcile_voters`` makes pysyncobj's members that set, on pysyncobj's thread, before the
  tick that follows an append, an apply or a loaded dump (``_kl_voters_dirty``).

Ordering: everything here runs on pysyncobj's thread except ``kl_applied_voters``,
``kl_pending_voter_change`` and ``kl_observers``, which the loop reads racily (a tick-old view).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pysyncobj import SyncObj
from pysyncobj.monotonic import monotonic as _raft_monotonic
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE

from kraftlog.common.errors import CorruptMessageError
from kraftlog.metadata_log import KRaftVersionRecord, MetadataRecord, Voter, VoterEndpoint, VotersRecord, encode_record
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VOTER_UPDATE,
    KRaftUpgrade,
    MembershipChange,
    RaftVoter,
    VoterChangeError,
    apply_voter_change,
    decode_voter_change,
    encode_voter_change,
    is_voter_change,
    pending_voter_change,
    voters_in_force,
)
from kraftlog.quorum.raft._raft_state import APPLY_INVALID, APPLY_VOTERS

__all__ = ["KRAFT_VERSION_MAX", "VoterNode"]

#: the highest ``kraft.version`` this build's Raft layer runs (1: the dynamic quorum, KIP-853)
KRAFT_VERSION_MAX = 1


class VoterNode(TCPNode):
    """A pysyncobj node that carries its `RaftVoter` (id, directory id, public key) to the transport.

    pysyncobj compares nodes by address only, so a ``VoterNode`` and a plain ``TCPNode`` of the same
    ``host:port`` are the same member.
    """

    def __init__(self, voter: RaftVoter) -> None:
        super().__init__(voter.address)
        self.kl_voter = voter


class _VoterChangesNode(SyncObj):
    """Voter changes on a pysyncobj node (see the module docstring). `_RaftNode` derives from it and
    sets ``_kl_applied_voters``, ``_kl_voters_dirty``, ``_kl_dynamic``, ``_kl_node_id``,
    ``_kl_observer``, ``_kl_voters_known``, ``_kl_directory_id`` and ``_kl_voter_reports`` before
    pysyncobj's constructor starts its thread."""

    _kl_applied_voters: dict[int, RaftVoter]
    _kl_voters_dirty: bool
    _kl_dynamic: bool
    _kl_node_id: int
    _kl_observer: bool
    _kl_voters_known: bool
    _kl_directory_id: str | None
    _kl_voter_reports: dict[int, tuple[str | None, int]]
    #: a voter's controller port is its Raft port less this (the VotersRecord's endpoint); None:
    #: the metadata log does not carry the voter set (a bare Raft seam: its own tests)
    _kl_port_offset: int | None

    def _kl_append_control(self, timestamp_ms: int, records: list[bytes]) -> None:  # `_RaftNode`'s
        raise NotImplementedError

    def _SyncObj__parseChangeClusterRequest(self, command: bytes) -> list[Any] | None:
        """pysyncobj's view of a membership entry: ``['add'|'rem', address, VoterNode]`` for a kraftlog
        voter change (`quorum.raft._membership`), None for anything else (pysyncobj's own membership
        commands are pickles and never decoded). pysyncobj applies it on append on the leader and
        followers and reverts it when the entry is truncated away."""
        if not is_voter_change(command):
            return None
        try:
            change = decode_voter_change(command)
        except CorruptMessageError:
            return None
        if isinstance(change, KRaftUpgrade) or change.op == VOTER_UPDATE:
            # the same members (an update moves one: `_kl_reconcile_voters` swaps its node)
            return None
        return ["add" if change.op == VOTER_ADD else "rem", change.voter.address, VoterNode(change.voter)]

    def _kl_change_voters(
        self, change: MembershipChange, *, callback: Callable[[Any, int], None] | None = None
    ) -> None:
        """Propose one voter change (any thread). pysyncobj's leader appends it only once its
        epoch's no-op and the previous change are applied, else ``callback(None, REQUEST_DENIED)``."""
        self._applyCommand(encode_voter_change(change), callback, _COMMAND_TYPE.REGULAR)

    def _kl_apply_voter_change(self, command: bytes) -> tuple[Any, ...]:
        """Apply a committed voter change to the committed voter set. Deterministic; never raises."""
        try:
            change = decode_voter_change(command)
        except CorruptMessageError as err:
            self._kl_log.warning("raft_voter_change_skipped", raft_index=self.raftLastApplied + 1, error=str(err))
            return (APPLY_INVALID, f"voter change not applied: {err}")
        # the metadata log's records come from the entry alone (the set the leader computed), so they
        # are the same on a node that cannot apply the change to the set it was seeded with
        after = change.voters if isinstance(change, KRaftUpgrade) else change.voters_after
        if self._kl_port_offset is not None and after:
            self._kl_append_control(change.timestamp_ms, self._kl_control_records(change, after, self._kl_port_offset))
        try:
            self._kl_applied_voters = apply_voter_change(self._kl_applied_voters, change)
        except VoterChangeError as err:
            self._kl_log.warning("raft_voter_change_skipped", raft_index=self.raftLastApplied + 1, error=str(err))
            return (APPLY_INVALID, f"voter change not applied: {err}")
        self._kl_voters_dirty = True
        if isinstance(change, KRaftUpgrade):
            self._kl_log.info(
                "raft_kraft_version_upgraded",
                kraft_version=1,
                voters={v.node_id: v.directory_id for v in change.voters},
            )
            return (APPLY_VOTERS, change.op, -1)
        self._kl_log.info(
            "raft_voter_change_committed",
            op=change.op,
            voter=change.voter.node_id,
            directory_id=change.voter.directory_id,
            voters=sorted(self._kl_applied_voters),
        )
        return (APPLY_VOTERS, change.op, change.voter.node_id)

    def _kl_control_records(
        self, change: MembershipChange, after: tuple[RaftVoter, ...], port_offset: int
    ) -> list[bytes]:
        """The metadata log's records of a committed change: the whole voter set after it
        (``VotersRecord``), after ``KRaftVersionRecord`` for the upgrade, as Kafka writes them."""
        voters = tuple(
            Voter(
                voter_id=v.node_id,
                voter_directory_id=v.directory_id or "",
                endpoints=(VoterEndpoint("CONTROLLER", v.host, v.port - port_offset),),
                kraft_version_min=0,
                kraft_version_max=KRAFT_VERSION_MAX,
            )
            for v in sorted(after, key=lambda v: v.node_id)
        )
        records: list[MetadataRecord] = [VotersRecord(voters=voters)]
        if isinstance(change, KRaftUpgrade):
            records.insert(0, KRaftVersionRecord(kraft_version=1))
        return [encode_record(r) for r in records]

    def _kl_on_voter_report(self, node: Any, message: Mapping[str, Any]) -> None:
        """A voter's report (``kl_voter_report``, every keepalive round): its directory id and the
        highest ``kraft.version`` it supports, kept by voter id for the upgrade to ``kraft.version``
        1 (Kafka's voters send UpdateRaftVoter to the leader for this). The id is the one the
        connection authenticated: a report names no id of its own."""
        voter = getattr(node, "kl_voter", None)
        vid = voter.node_id if voter is not None else None
        if vid is None:
            address = str(getattr(node, "id", ""))
            vid = next((v.node_id for v in self._kl_applied_voters.values() if v.address == address), None)
        if vid is not None:
            self._kl_voter_reports = {**self._kl_voter_reports, vid: (message["dir"], message["kraft_max"])}

    def kl_voter_reports(self) -> dict[int, tuple[str | None, int]]:
        """Voter id -> (directory id, highest kraft.version supported) as the voters reported them,
        this node's own included (racy read: a dict replaced whole)."""
        return {**self._kl_voter_reports, self._kl_node_id: (self._kl_directory_id, KRAFT_VERSION_MAX)}

    def kl_pending_voter_change(self) -> int | None:
        """The raft index of a voter change appended after the last applied entry, or None."""
        return pending_voter_change(self._SyncObj__getEntries(self.raftLastApplied + 1))

    def kl_observers(self) -> dict[int, tuple[Any, int]]:
        """Observers connected to this node: id -> (`ObserverPeer`, raft match index)."""
        transport = self._kl_transport
        observers = getattr(transport, "observers", None)
        if observers is None:
            return {}
        match: dict[Any, int] = dict(self._SyncObj__raftMatchIndex)
        return {oid: (node.kl_observer, match.get(node, 0)) for oid, node in observers().items()}

    def kl_applied_voters(self) -> dict[int, RaftVoter]:
        """The committed voter set (a copy); read on pysyncobj's thread (the dump) or racily."""
        return dict(self._kl_applied_voters)

    def kl_load_applied_voters(self, voters: Mapping[int, RaftVoter]) -> None:
        """The committed voter set of a dump just loaded (pysyncobj's thread)."""
        self._kl_applied_voters = dict(voters)
        self._kl_voters_dirty = True

    def _kl_voters_in_force(self) -> dict[int, RaftVoter]:
        """The committed set with every voter change appended after the last applied entry."""
        tail = self._SyncObj__getEntries(self.raftLastApplied + 1)
        return voters_in_force(self._kl_applied_voters, [entry[0] for entry in tail])

    def _kl_reconcile_voters(self) -> None:
        """Make pysyncobj's members the voter set the log says is in force.

        pysyncobj applies and reverts membership entries itself, but `RaftJournal` cuts only on a
        conflict while pysyncobj reverts every entry after a re-sent prefix, and a restart starts from
        the configured members: deriving the set from the log (on pysyncobj's thread, before each tick
        that follows an append or an apply) is what keeps it right.

        No election before the first run (``_kl_voters_known``): pysyncobj starts from the members it
        was given (a voter formatted ``--standalone`` is alone there) and loads its dump on its first
        tick, where it could otherwise elect itself leader of that stale set -- alone -- and commit
        without the voters its log added (measured: elected 3 ms before the log's set {1, 2} was in
        force). The first run campaigns within an election timeout.
        """
        self._kl_voters_dirty = False
        first = not self._kl_voters_known
        self._kl_voters_known = True
        desired = self._kl_voters_in_force()
        observer = self._kl_node_id not in desired
        if observer != self._kl_observer:
            self._kl_log.info("raft_voter_role", role="observer" if observer else "voter", voters=sorted(desired))
            self._kl_observer = observer
            if not observer:
                self._kl_campaign_within(self.conf.raftMinTimeout, self.conf.raftMaxTimeout)
            set_voter = getattr(self._kl_transport, "set_voter", None)
            if set_voter is not None:
                set_voter(not observer)
        if first and not observer:
            self._kl_campaign_within(self.conf.raftMinTimeout, self.conf.raftMaxTimeout)
        # this node by its id, not its address: a voter restarted on another listener runs at its new
        # endpoint while the voter set still names the old one, until its UpdateRaftVoter commits
        nodes = {VoterNode(v) for vid, v in desired.items() if vid != self._kl_node_id}
        current: set[Any] = self._SyncObj__otherNodes
        had = {n.address: getattr(n, "kl_voter", None) for n in current}
        if {n.address: n.kl_voter for n in nodes} == had:
            return
        self._kl_log.info("raft_voters_in_force", voters=sorted(desired))
        self._SyncObj__updateClusterConfiguration(nodes)
        for node in nodes:
            # pysyncobj tells nodes apart by address only: a voter removed and added back at the same
            # endpoint (a wiped directory: a new directory id and key) is the same node to it, and an
            # initial node names no voter. The transport learns the voter the log names (issue 26).
            if node.address in had and had[node.address] != node.kl_voter:
                self._kl_transport.addNode(node)
        if self._isLeader():
            # pysyncobj's check-quorum reads every member's last response; its own membership path
            # sets it for a member added while leading, this one must too (else a KeyError each tick)
            responses: dict[Any, float] = self._SyncObj__lastResponseTime
            now = _raft_monotonic()
            for node in nodes:
                responses.setdefault(node, now)
