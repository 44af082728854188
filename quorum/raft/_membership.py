"""The replicated voter change of the dynamic controller quorum (issue 26, KIP-853): one voter added
or removed by one Raft entry, in kraftlog's own msgpack (pysyncobj's membership commands are pickles,
which this Raft never loads).

Shape of the entry: pysyncobj's REGULAR type byte, then msgpack ``[2, op, voter, ms, after]`` where
``op`` is ``"add"``, ``"remove"`` or ``"update"`` (UpdateRaftVoter: the same voter, id and directory
id, at another endpoint), ``voter`` a map ``{"id", "host", "port", "directory.id",
"public.key"}``, ``ms`` the proposal's wall time and ``after`` the whole voter set after the change
(both absent in entries of earlier builds), or
``[2, "kraft.version", [voter, ...], ms]``: the upgrade of a static quorum to ``kraft.version`` 1
(KIP-1170; Kafka writes a ``KRaftVersionRecord`` and a ``VotersRecord`` in one control batch),
which gives every voter of the unchanged set its directory id (`KRaftUpgrade`). A metadata batch
is ``[1, epoch, timestamp_ms, records]`` (`quorum.raft._wire`), so the two never decode as each
other; `is_voter_change` tells them apart by the first three bytes without decoding a batch.
Applying a committed change also appends the metadata log's ``VotersRecord`` (and, for the
upgrade, ``KRaftVersionRecord``) at the next offsets (`kraftlog.metadata_log.VotersRecord`).

Why the voter travels whole: in ``node-key`` mode a connection is accepted only from a voter whose
public key this node knows (`quorum.raft._identity`), so a new voter's key must reach every voter
with the change that makes it one -- including voters that start later and replay the log. The
directory id makes a wiped and re-formatted disk another replica (KIP-853's ``ReplicaKey``).

Raft's single-server rule (Ongaro's thesis, 4.1), as pysyncobj runs it once
``dynamicMembershipChange`` is on and `quorum.raft._raft_node._RaftNode` decodes these entries:

* a change takes effect on every node when the entry is *appended* to its log (not when committed):
  the set in force is the committed set folded with the changes in the uncommitted tail
  (`voters_in_force`);
* it is reverted when a new leader truncates the entry away: the truncated change is no longer in
  the tail, so the fold no longer holds it (what `revert_voter_change` computes for one change);
* the leader appends the next change only after the previous one is applied (committed);
* the committed voter set (the fold of applied changes, `apply_voter_change`) is what the full dump
  persists beside the state it was taken at.

``kraft.version`` is not stored apart: a voter set whose every voter has a directory id is a
dynamic one (`kraft_version_of`): a static quorum's voters have none, a formatted or added voter
always has one, and the upgrade entry is the one change that gives them to a static set.

The functions here are pure: `apply_voter_change` and `revert_voter_change` return new maps and
raise `VoterChangeError` for a change that does not fit the set (the Raft path then leaves the set
as it is: applying is deterministic on every node alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgpack

from kraftlog.common import atomic_write
from kraftlog.common.errors import CorruptMessageError

__all__ = [
    "VOTER_ADD",
    "VOTER_REMOVE",
    "VOTER_UPDATE",
    "KRAFT_UPGRADE",
    "KRaftUpgrade",
    "MembershipChange",
    "RaftVoter",
    "VoterChange",
    "VoterChangeError",
    "apply_voter_change",
    "decode_voter_change",
    "encode_voter_change",
    "is_voter_change",
    "kraft_version_of",
    "upgraded_voter_set",
    "revert_voter_change",
    "voters_in_force",
    "pending_voter_change",
    "VOTERS_FILE",
    "read_voters_file",
    "voters_from_wire",
    "voters_to_wire",
    "write_voters_file",
]

#: in the Raft data dir: the committed voter set, rewritten when it changes (read at start)
VOTERS_FILE: Final = "voters.msgpack"

VOTER_ADD: Final = "add"
VOTER_REMOVE: Final = "remove"
#: the same voter (id and directory id, key kept) at another endpoint (UpdateRaftVoter, KIP-853)
VOTER_UPDATE: Final = "update"
_VOTER_OPS: Final = (VOTER_ADD, VOTER_REMOVE, VOTER_UPDATE)
KRAFT_UPGRADE: Final = "kraft.version"
_OP_VOTER_CHANGE: Final = 2
#: pysyncobj's REGULAR type byte, msgpack fixarray(4) or (with the set after it) fixarray(5)
#: (fixarray(3) before the time was added), positive fixint 2
_PREFIXES: Final = tuple(bytes([0, n, _OP_VOTER_CHANGE]) for n in (0x95, 0x94, 0x93))
_MAX_NODE_ID: Final = (1 << 31) - 1
_MAX_PORT: Final = 65535
_MAX_TEXT: Final = 255


class VoterChangeError(ValueError):
    """A voter change that does not fit the voter set it is applied to."""


@dataclass(frozen=True, slots=True)
class RaftVoter:
    """One voter as the Raft layer knows it: id, Raft endpoint, directory id, public key.

    ``directory_id`` is None for a voter of a static quorum; ``public_key`` (`public_key_text`'s
    form) is None in ``password`` mode.
    """

    node_id: int
    host: str
    port: int
    directory_id: str | None = None
    public_key: str | None = None

    @property
    def address(self) -> str:
        """pysyncobj's node id: ``host:port``."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class VoterChange:
    """Add or remove one voter; ``timestamp_ms``: when the leader proposed it (the metadata log's
    ``VotersRecord`` for it carries that time, the same on every node)."""

    op: str
    voter: RaftVoter
    timestamp_ms: int = 0
    #: the whole voter set after the change, as the leader computed it when it proposed it: the
    #: metadata log's VotersRecord is made from it, so it is the same on every node (a node that
    #: joined late, seeded with a later set, may not be able to apply an old change itself)
    voters_after: tuple[RaftVoter, ...] = ()


@dataclass(frozen=True, slots=True)
class KRaftUpgrade:
    """Move a static quorum to ``kraft.version`` 1: the same voters (ids and endpoints), each with
    the directory id it reported (`upgraded_voter_set`)."""

    voters: tuple[RaftVoter, ...]
    timestamp_ms: int = 0

    op: str = KRAFT_UPGRADE


#: one replicated change of the voter set
MembershipChange = VoterChange | KRaftUpgrade


def kraft_version_of(voters: Mapping[int, RaftVoter]) -> int:
    """1 when every voter of a non-empty set has a directory id (a dynamic quorum), else 0."""
    return 1 if voters and all(v.directory_id for v in voters.values()) else 0


def upgraded_voter_set(
    voters: Mapping[int, RaftVoter], reports: Mapping[int, tuple[str | None, int]]
) -> tuple[RaftVoter, ...]:
    """The voter set of the upgrade to ``kraft.version`` 1 (Kafka's
    ``LeaderState.maybeAppendUpgradedKRaftVersion``): the committed static set ``voters`` with each
    voter's directory id from ``reports`` (voter id -> (directory id, highest kraft.version it
    supports), what each voter told the leader). `VoterChangeError` when the set is dynamic already,
    or a voter has not reported, reported no directory id, or does not support ``kraft.version`` 1."""
    if kraft_version_of(voters) >= 1:
        raise VoterChangeError("the voter set is already at kraft.version 1")
    if not voters:
        raise VoterChangeError("no voter set to upgrade")
    missing = sorted(vid for vid in voters if vid not in reports)
    if missing:
        raise VoterChangeError(f"voter(s) {missing} have not reported their directory id to the leader yet")
    old = sorted(vid for vid in voters if reports[vid][1] < 1)
    if old:
        raise VoterChangeError(f"not all of the voters support kraft.version 1: {old} do not")
    blank = sorted(vid for vid in voters if not reports[vid][0])
    if blank:
        raise VoterChangeError(f"the directory id must be known for every voter: {blank} have none")
    return tuple(
        RaftVoter(v.node_id, v.host, v.port, reports[vid][0], v.public_key) for vid, v in sorted(voters.items())
    )


def _voter_map(voter: RaftVoter) -> dict[str, Any]:
    return {
        "id": voter.node_id,
        "host": voter.host,
        "port": voter.port,
        "directory.id": voter.directory_id,
        "public.key": voter.public_key,
    }


def _optional_text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str or not 0 < len(value) <= _MAX_TEXT:
        raise CorruptMessageError(f"voter change: {what} must be a short string")
    return value


def _voter_of(value: Any) -> RaftVoter:
    if type(value) is not dict:
        raise CorruptMessageError("voter change: the voter must be a map")
    try:
        node_id, host, port = value["id"], value["host"], value["port"]
    except KeyError as err:
        raise CorruptMessageError(f"voter change: the voter lacks {err.args[0]}") from None
    if type(node_id) is not int or not 0 <= node_id <= _MAX_NODE_ID:
        raise CorruptMessageError("voter change: the voter id must be a non-negative int32")
    if type(host) is not str or not 0 < len(host) <= _MAX_TEXT:
        raise CorruptMessageError("voter change: the host must be a short string")
    if type(port) is not int or not 0 < port <= _MAX_PORT:
        raise CorruptMessageError("voter change: the port must be 1..65535")
    return RaftVoter(
        node_id=node_id,
        host=host,
        port=port,
        directory_id=_optional_text(value.get("directory.id"), "the directory id"),
        public_key=_optional_text(value.get("public.key"), "the public key"),
    )


def encode_voter_change(change: MembershipChange) -> bytes:
    """The REGULAR command payload (without pysyncobj's type byte) of one voter change."""
    if isinstance(change, KRaftUpgrade):
        body: bytes = msgpack.packb(
            [_OP_VOTER_CHANGE, KRAFT_UPGRADE, [_voter_map(v) for v in change.voters], change.timestamp_ms],
            use_bin_type=True,
        )
        return body
    if change.op not in _VOTER_OPS:
        raise ValueError(f"unknown voter change {change.op!r}")
    fields: list[Any] = [_OP_VOTER_CHANGE, change.op, _voter_map(change.voter), change.timestamp_ms]
    if change.voters_after:
        fields.append([_voter_map(v) for v in change.voters_after])
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def is_voter_change(command: bytes) -> bool:
    """Whether a journal entry's command (type byte included) is a voter change (no decoding)."""
    return command[:3] in _PREFIXES


def decode_voter_change(command: bytes) -> MembershipChange:
    """Decode a journal entry's command (type byte included); ``CorruptMessageError`` if malformed."""
    if not is_voter_change(command):
        raise CorruptMessageError("not a voter change")
    try:
        value = msgpack.unpackb(command[1:], raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several unrelated types
        raise CorruptMessageError(f"undecodable voter change: {err}") from None
    if type(value) is not list or len(value) not in (3, 4, 5) or value[0] != _OP_VOTER_CHANGE:
        raise CorruptMessageError("not a voter change")
    timestamp_ms = value[3] if len(value) >= 4 else 0  # an entry written before the time was added
    if type(timestamp_ms) is not int or timestamp_ms < 0:
        raise CorruptMessageError("voter change: the timestamp must be a non-negative integer")
    op = value[1]
    if op == KRAFT_UPGRADE:
        listed = voters_from_wire(value[2])
        if not listed:
            raise CorruptMessageError("voter change: an upgrade names no voters")
        return KRaftUpgrade(tuple(listed[vid] for vid in sorted(listed)), timestamp_ms)
    if op not in _VOTER_OPS:
        raise CorruptMessageError(f"voter change: unknown operation {op!r}")
    after = voters_from_wire(value[4]) if len(value) == 5 else {}
    return VoterChange(
        op=op, voter=_voter_of(value[2]), timestamp_ms=timestamp_ms, voters_after=tuple(after[v] for v in sorted(after))
    )


def _add(voters: Mapping[int, RaftVoter], voter: RaftVoter) -> dict[int, RaftVoter]:
    if voter.node_id in voters:
        raise VoterChangeError(f"voter {voter.node_id} is already a voter")
    if any(v.address == voter.address for v in voters.values()):
        raise VoterChangeError(f"another voter already has the Raft endpoint {voter.address}")
    return {**voters, voter.node_id: voter}


def _remove(voters: Mapping[int, RaftVoter], voter: RaftVoter) -> dict[int, RaftVoter]:
    current = voters.get(voter.node_id)
    if current is None or current.directory_id != voter.directory_id:
        raise VoterChangeError(f"voter {voter.node_id} (directory {voter.directory_id}) is not a voter")
    if len(voters) == 1:
        raise VoterChangeError("the last voter cannot be removed")
    return {vid: v for vid, v in voters.items() if vid != voter.node_id}


def _update(voters: Mapping[int, RaftVoter], voter: RaftVoter) -> dict[int, RaftVoter]:
    current = voters.get(voter.node_id)
    if current is None or current.directory_id != voter.directory_id:
        raise VoterChangeError(f"voter {voter.node_id} (directory {voter.directory_id}) is not a voter")
    if any(v.address == voter.address for vid, v in voters.items() if vid != voter.node_id):
        raise VoterChangeError(f"another voter already has the Raft endpoint {voter.address}")
    return {**voters, voter.node_id: voter}


def _upgrade(voters: Mapping[int, RaftVoter], change: KRaftUpgrade) -> dict[int, RaftVoter]:
    if kraft_version_of(voters) >= 1:
        raise VoterChangeError("the voter set is already at kraft.version 1")
    after = {v.node_id: v for v in change.voters}
    if {vid: v.address for vid, v in after.items()} != {vid: v.address for vid, v in voters.items()}:
        raise VoterChangeError(f"the upgrade names voters {sorted(after)}, not the voter set {sorted(voters)}")
    if kraft_version_of(after) < 1:
        raise VoterChangeError("the upgrade leaves a voter without a directory id")
    return after


def apply_voter_change(voters: Mapping[int, RaftVoter], change: MembershipChange) -> dict[int, RaftVoter]:
    """The voter set after ``change``; `VoterChangeError` when it does not fit ``voters``."""
    if isinstance(change, KRaftUpgrade):
        return _upgrade(voters, change)
    if change.op == VOTER_ADD:
        return _add(voters, change.voter)
    if change.op == VOTER_UPDATE:
        return _update(voters, change.voter)
    return _remove(voters, change.voter)


def revert_voter_change(voters: Mapping[int, RaftVoter], change: MembershipChange) -> dict[int, RaftVoter]:
    """The voter set before ``change`` (a truncated entry); `VoterChangeError` when it does not fit."""
    if isinstance(change, KRaftUpgrade):
        if dict(voters) != {v.node_id: v for v in change.voters}:
            raise VoterChangeError("the voter set is not the one this upgrade made")
        return {vid: RaftVoter(v.node_id, v.host, v.port, None, v.public_key) for vid, v in voters.items()}
    if change.op == VOTER_UPDATE:
        # the entry names the new endpoint only: the set before it is the fold of the log without it
        raise VoterChangeError("an endpoint update is reverted by folding the log without it (voters_in_force)")
    if change.op == VOTER_ADD:
        current = voters.get(change.voter.node_id)
        if current != change.voter or len(voters) == 1:
            raise VoterChangeError(f"voter {change.voter.node_id} was not added by this change")
        return {vid: v for vid, v in voters.items() if vid != change.voter.node_id}
    return _add(voters, change.voter)


def voters_in_force(voters: Mapping[int, RaftVoter], commands: Iterable[bytes]) -> dict[int, RaftVoter]:
    """The voter set in force: the committed set ``voters`` after every voter change among
    ``commands`` (the journal's commands after the last applied entry, type byte included), in log
    order. A change that does not fit the set at its turn is skipped, as apply skips it; anything
    that is not a voter change is ignored. Pure: the caller re-runs it on the tail left after a
    truncation, which is how a change truncated away stops being in force."""
    current = dict(voters)
    for command in commands:
        if not is_voter_change(command):
            continue
        try:
            current = apply_voter_change(current, decode_voter_change(command))
        except (CorruptMessageError, VoterChangeError):
            continue
    return current


def pending_voter_change(entries: Iterable[tuple[bytes, int, int]]) -> int | None:
    """The raft index of the first voter change among ``entries`` (pysyncobj's ``(command, index,
    term)`` after the last applied entry), None without one: KIP-853's one change at a time refuses
    a new change while this is not None (`quorum._voter_changes`). A change truncated away is no
    longer among the entries, so it no longer blocks the next."""
    return next((index for command, index, _term in entries if is_voter_change(command)), None)


def voters_to_wire(voters: Iterable[RaftVoter]) -> list[dict[str, Any]]:
    """The voter set as the full dump stores it (sorted by id)."""
    return [_voter_map(v) for v in sorted(voters, key=lambda v: v.node_id)]


def voters_from_wire(value: Any) -> dict[int, RaftVoter]:
    """Inverse of `voters_to_wire`; ``CorruptMessageError`` for a malformed list or a duplicate id."""
    if type(value) is not list:
        raise CorruptMessageError("voters must be a list")
    voters: dict[int, RaftVoter] = {}
    for item in value:
        voter = _voter_of(item)
        if voter.node_id in voters:
            raise CorruptMessageError(f"voter {voter.node_id} is listed twice")
        voters[voter.node_id] = voter
    return voters


def write_voters_file(data_dir: Path, voters: Mapping[int, RaftVoter]) -> None:
    """Keep the committed voter set beside the Raft log (atomically, fsynced): a controller that
    restarts knows who votes without asking anyone -- a quorum whose voters were all added at run
    time could otherwise not restart together (no leader to ask)."""
    body: bytes = msgpack.packb(voters_to_wire(voters.values()), use_bin_type=True)
    atomic_write(Path(data_dir) / VOTERS_FILE, body, mode=0o644)


def read_voters_file(data_dir: Path) -> dict[int, RaftVoter] | None:
    """The voter set `write_voters_file` kept, None without one; ``CorruptMessageError`` if malformed."""
    path = Path(data_dir) / VOTERS_FILE
    if not path.exists():
        return None
    try:
        value = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several unrelated types
        raise CorruptMessageError(f"{path}: undecodable ({err})") from None
    return voters_from_wire(value)
