"""The replicated state machine of the controller quorum (`MetadataStateMachine`: one command appends one
batch of records, offsets assigned at apply time, epoch-fenced), its result codes, and the status
the seam reports (see `quorum.raft` for the rules).
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

import structlog
from pysyncobj.syncobj import _COMMAND_TYPE

from kraftlog.metadata_log import LogEntry
from kraftlog.quorum.raft._prevote import PRE_VOTE, PRE_VOTE_RESPONSE
from kraftlog.quorum.raft._raft_messages import (
    COMMAND_NO_OP,
    COMMAND_REGULAR,
    KEEPALIVE,
    MAX_COMMAND_BYTES,
    VOTER_REPORT,
)
from kraftlog.quorum.raft._serializer import DumpCorruptError

if (_COMMAND_TYPE.REGULAR, _COMMAND_TYPE.NO_OP) != (COMMAND_REGULAR, COMMAND_NO_OP):  # pragma: no cover
    raise ImportError("pysyncobj's command type bytes changed; quorum.raft._wire must follow them")


_log = structlog.get_logger(__name__)


APPLY_OK: Final = 0
#: a committed voter change (quorum.raft._membership): (APPLY_VOTERS, op, voter id)
APPLY_VOTERS: Final = 4


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


#: A message type pysyncobj's dispatcher ignores (it only acts on the types it knows).
_KEEPALIVE: Final = KEEPALIVE


#: pre-votes promise nothing durable (no term, no vote is recorded), so they skip the barrier too
_NO_BARRIER: Final = frozenset({"append_entries", _KEEPALIVE, VOTER_REPORT, PRE_VOTE, PRE_VOTE_RESPONSE})


_TRUNCATION_NOTICE: Final = "truncating already-applied log entries"


@dataclass(frozen=True, slots=True)
class VoterStatus:
    """One voter (or observer) as DescribeQuorum reports it. Offsets are metadata offsets, exclusive ends;
    -1 when unknown (only the leader knows its followers' progress)."""

    voter_id: int
    raft_address: str
    log_end_offset: int
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int
    raft_match_index: int | None = None
    #: an observer's metadata log dir id, as its Raft handshake proved it (KIP-853); None for voters
    directory_id: str | None = None


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
    #: on the leader, the controllers outside the voter set replicating from it (KIP-853's
    #: observers), by id; empty elsewhere (only the leader sends them entries)
    observers: tuple[VoterStatus, ...] = ()
