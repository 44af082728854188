"""The Raft journal of the controller quorum: a `pysyncobj` ``Journal`` that is durable, checksummed
and truncates only on a conflicting term.

Why not pysyncobj's ``FileJournal`` (0.3.17)
--------------------------------------------
* It never fsyncs: entries go through an ``mmap`` and the meta file (term, vote) through a plain
  rename, so a power loss can undo a vote or an entry this node already acknowledged.
* It has no checksum: a torn tail after a crash is decoded as garbage.
* On ``append_entries`` pysyncobj calls ``deleteEntriesFrom(prevLogIdx + 1)`` whenever the follower
  has *any* entry after ``prevLogIdx``, conflicting or not, and ``FileJournal`` deletes them at once.
  A duplicated or late ``append_entries`` therefore shortens a follower below what it already
  acknowledged; if the leader counted that acknowledgement, a committed entry can be lost
  (``tests/unit/test_raft_journal.py`` shows it end to end). Raft truncates only on a conflict:
  *"If an existing entry conflicts with a new one (same index but different terms), delete the
  existing entry and all that follow it."*

How this journal truncates
--------------------------
``deleteEntriesFrom(pos)`` only records a *tentative* cut. The following ``add(command, idx, term)``
calls are compared with the entries already there: an entry with the same index and term is kept as
is (not rewritten); the first one with a different term truncates for real at that point and the
rest are appended. The first call that is not an ``add`` resolves what is left after the cursor:
entries up to the last *verified* one are kept, the rest are dropped. An entry is verified when its
term is the current term (it came from the current leader, so by Raft's Log Matching property it and
everything before it match the leader's log) or its index is at or below the commit index (committed
entries are in every future leader's log). Unverified stale entries must go, because pysyncobj then
sets the follower's commit index to ``min(leaderCommit, last log index)``: keeping an unverified
tail would let it commit an entry the leader does not have.

``clear()`` (pysyncobj installing a snapshot) is tentative too: if the journal already holds an
entry with the snapshot's index and term, the entries before it are dropped and the ones after it
follow the rule above, as Raft's InstallSnapshot says; otherwise the journal is really emptied.
Dropping a prefix (``deleteEntriesTo``, ``clear``) first calls ``before_prefix_drop`` so the full
dump that replaces those entries is durable (file and directory fsynced) before they disappear.

Durability
----------
With ``fsync=True`` (``controller.quorum.fsync``, the default) a term or vote change is fsynced
(file, rename, directory) before ``setCurrentTerm`` returns. Appended entries are fsynced before
``add`` returns when ``sync_on_add=True``; the Raft node uses ``sync_on_add=False`` and calls
:meth:`RaftJournal.sync` at its barriers instead (start of every tick, before every message other
than ``append_entries`` leaves the node), which is group commit: nothing this node acknowledges,
votes or counts towards a commit is ever ahead of the disk.

File format (all integers little endian)
----------------------------------------
``<path>``::

    header   magic "KLRAFTJ1" (8) | format version u32 (=1) | crc32c(magic + version) u32
    record*  length u32 | crc32c(payload) u32 | payload
    payload  raft index u64 | raft term u64 | pysyncobj command bytes (length - 16)

Records are contiguous by raft index. At open, records are read until the first one that is
incomplete, fails its CRC or is not contiguous; the file is truncated there (a torn tail is an entry
that was never acknowledged, since acknowledgement follows the fsync).

``<path>.meta`` (replaced atomically)::

    magic "KLRAFTM1" (8) | length u32 | crc32c u32 | msgpack {"term", "voted_for", "commit_index"}

The commit index is only a restart hint and is written at most once a second, after a journal sync,
so it never points past durable entries.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, overload

import msgpack
import structlog
from pysyncobj.journal import Journal

from kraftlog.common import atomic_write, crc_frame_header, crc_frame_problem, encode_crc_frame, fsync_directory
from kraftlog.common.records import crc32c

__all__ = [
    "JournalCorruptError",
    "JournalError",
    "JournalStats",
    "RaftJournal",
    "JOURNAL_MAGIC",
    "META_MAGIC",
]

JOURNAL_MAGIC: Final = b"KLRAFTJ1"
META_MAGIC: Final = b"KLRAFTM1"
FORMAT_VERSION: Final = 1
_HEADER_BODY: Final = struct.Struct("<8sI")
_HEADER_SIZE: Final = _HEADER_BODY.size + 4
_ENTRY_HEAD: Final = struct.Struct("<QQ")  # raft index, raft term
#: the records' and the meta file's frame: ``length u32 | crc32c u32``, little endian (the format above)
_FRAME: Final = crc_frame_header("little")
_SLOW_SYNC_S: Final = 0.1

#: pysyncobj's entry shape: (command bytes, raft index, raft term).
Entry = tuple[bytes, int, int]

_log = structlog.get_logger(__name__)


class JournalError(Exception):
    """The journal cannot do what pysyncobj asked without breaking its own invariants."""


class JournalCorruptError(JournalError):
    """A journal or meta file is damaged somewhere a crash cannot explain (not a torn tail)."""


@dataclass(slots=True)
class JournalStats:
    """Counters for tests and status: how often the conflict-only rules changed the outcome."""

    syncs: int = 0
    #: entries pysyncobj asked to delete that were kept because a re-sent entry matched them
    kept_matching: int = 0
    #: entries kept after a tentative cut because they were verified (current term / committed)
    kept_verified_tail: int = 0
    #: unverified entries dropped when a tentative cut was resolved
    dropped_unverified: int = 0
    #: real truncations caused by a conflicting term
    conflicts: int = 0
    #: snapshot installs that kept the journal's matching suffix
    rebases: int = 0
    #: bytes cut from a torn tail at open
    torn_bytes: int = 0
    #: slowest journal fsync so far
    max_sync_seconds: float = 0.0


def _header() -> bytes:
    body = _HEADER_BODY.pack(JOURNAL_MAGIC, FORMAT_VERSION)
    return body + struct.pack("<I", crc32c(body))


def _record(command: bytes, idx: int, term: int) -> bytes:
    return encode_crc_frame(_ENTRY_HEAD.pack(idx, term) + command, "little")


class RaftJournal(Journal):
    """pysyncobj journal with fsync, CRC-framed records and conflict-only truncation.

    Only pysyncobj's thread may call it once the Raft node runs (it is not locked). Positions given
    by pysyncobj (``deleteEntriesFrom``, ``deleteEntriesTo``, ``__getitem__``) are list positions,
    raft index minus the first index held.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        fsync: bool = True,
        sync_on_add: bool = True,
        before_prefix_drop: Callable[[], None] | None = None,
        node_id: int | None = None,
    ) -> None:
        self._path = Path(path)
        self._meta_path = self._path.with_name(self._path.name + ".meta")
        self._fsync = fsync
        self._sync_on_add = sync_on_add
        self._before_prefix_drop = before_prefix_drop
        self._log = _log.bind(node_id=node_id, journal=str(self._path))
        self.stats = JournalStats()
        self._entries: list[Entry] = []
        self._offsets: list[int] = []  # file offset of each record
        self._end = _HEADER_SIZE
        self._dirty = False
        # Tentative truncation state (see the module docstring).
        self._pending_cut: int | None = None
        self._pending_clear = False
        self._fd = -1
        self._closed = False
        self._open()
        meta = self._load_meta()
        self._term: int = meta.get("term", 0)
        self._voted_for: Any = meta.get("voted_for")
        self._commit_index: int = meta.get("commit_index", 1)
        self._stored_commit_index = self._commit_index

    # ------------------------------------------------------------------ opening

    @property
    def path(self) -> Path:
        return self._path

    @property
    def meta_path(self) -> Path:
        return self._meta_path

    def _open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        created = not self._path.exists()
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        with open(self._path, "rb") as f:
            data = f.read()
        header = _header()
        if len(data) < _HEADER_SIZE and header.startswith(data):
            # New file, or a crash while its header was being written: nothing was ever in it.
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, header, 0)
            if self._fsync:
                os.fsync(self._fd)
                if created:
                    fsync_directory(self._path.parent)
            self._end = _HEADER_SIZE
            return
        if data[:_HEADER_SIZE] != header:
            os.close(self._fd)
            raise JournalCorruptError(f"{self._path}: not a kraftlog Raft journal (bad header)")
        view = memoryview(data)
        pos = _HEADER_SIZE
        reason = ""
        while pos < len(data):
            if len(data) - pos < _FRAME.size:
                reason = "incomplete frame header"
                break
            length, checksum = _FRAME.unpack_from(view, pos)
            start = pos + _FRAME.size
            if length < _ENTRY_HEAD.size or start + length > len(data):
                reason = "incomplete record"
                break
            payload = view[start : start + length]
            if crc_frame_problem(payload, checksum) is not None:
                reason = "crc mismatch"
                break
            idx, term = _ENTRY_HEAD.unpack_from(payload)
            if self._entries and idx != self._entries[-1][1] + 1:
                reason = f"non-contiguous index {idx} after {self._entries[-1][1]}"
                break
            self._entries.append((bytes(payload[_ENTRY_HEAD.size :]), idx, term))
            self._offsets.append(pos)
            pos = start + length
        self._end = pos
        if pos < len(data):
            dropped = len(data) - pos
            self.stats.torn_bytes += dropped
            self._log.warning(
                "raft_journal_torn_tail_truncated",
                reason=reason,
                bytes_dropped=dropped,
                entries_kept=len(self._entries),
                file_offset=pos,
            )
            os.ftruncate(self._fd, pos)
            if self._fsync:
                os.fsync(self._fd)

    def _load_meta(self) -> dict[str, Any]:
        try:
            data = self._meta_path.read_bytes()
        except FileNotFoundError:
            return {}
        if len(data) < len(META_MAGIC) + _FRAME.size or not data.startswith(META_MAGIC):
            raise JournalCorruptError(f"{self._meta_path}: bad magic")
        length, checksum = _FRAME.unpack_from(data, len(META_MAGIC))
        body = data[len(META_MAGIC) + _FRAME.size :]
        if len(body) != length or crc_frame_problem(body, checksum) is not None:
            raise JournalCorruptError(f"{self._meta_path}: length or crc mismatch")
        try:
            meta = msgpack.unpackb(body, raw=False)
        except Exception as err:  # msgpack raises several unrelated types
            raise JournalCorruptError(f"{self._meta_path}: undecodable body: {err}") from err
        if not isinstance(meta, dict):
            raise JournalCorruptError(f"{self._meta_path}: not a map")
        for key in ("term", "commit_index"):
            value = meta.get(key, 0)
            if type(value) is not int or value < 0:
                raise JournalCorruptError(f"{self._meta_path}: {key} {value!r:.40} is not a non-negative integer")
        return meta

    def _store_meta(self) -> None:
        body = msgpack.packb(
            {"term": self._term, "voted_for": self._voted_for, "commit_index": self._commit_index}, use_bin_type=True
        )
        atomic_write(self._meta_path, META_MAGIC + encode_crc_frame(body, "little"), fsync=self._fsync)
        self._stored_commit_index = self._commit_index

    # ------------------------------------------------------------------ low-level writes

    def _append(self, command: bytes, idx: int, term: int) -> None:
        if self._entries and idx != self._entries[-1][1] + 1:
            # pysyncobj indexes the journal by position; a hole would silently misalign every read.
            raise JournalError(f"non-contiguous append: index {idx} after {self._entries[-1][1]}")
        data = _record(command, idx, term)
        os.pwrite(self._fd, data, self._end)
        self._entries.append((command, idx, term))
        self._offsets.append(self._end)
        self._end += len(data)
        self._dirty = True
        if self._sync_on_add:
            self.sync()

    def _truncate_at(self, pos: int) -> None:
        if pos >= len(self._entries):
            return
        self._end = self._offsets[pos]
        os.ftruncate(self._fd, self._end)
        del self._entries[pos:]
        del self._offsets[pos:]
        self._dirty = True

    def _rewrite(self, entries: Sequence[Entry]) -> None:
        """Replace the file with ``entries`` (tmp, fsync, rename, fsync dir), then reopen it."""
        if self._before_prefix_drop is not None:
            self._before_prefix_drop()
        parts = [_header()]
        offsets: list[int] = []
        end = _HEADER_SIZE
        for command, idx, term in entries:
            rec = _record(command, idx, term)
            offsets.append(end)
            end += len(rec)
            parts.append(rec)
        atomic_write(self._path, b"".join(parts), fsync=self._fsync)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_RDWR)
        self._entries = list(entries)
        self._offsets = offsets
        self._end = end
        self._dirty = False

    def sync(self) -> None:
        """fsync appended entries and truncations, if any are pending (no-op otherwise)."""
        if self._dirty and not self._closed:
            if self._fsync:
                started = time.monotonic()
                os.fsync(self._fd)
                elapsed = time.monotonic() - started
                self.stats.syncs += 1
                self.stats.max_sync_seconds = max(self.stats.max_sync_seconds, elapsed)
                if elapsed > _SLOW_SYNC_S:
                    # Raft's timers keep running while the thread waits: a stall near the election
                    # timeout delays votes and heartbeats (split votes, needless elections).
                    self._log.warning("raft_journal_slow_fsync", seconds=round(elapsed, 3))
            self._dirty = False

    @property
    def dirty(self) -> bool:
        return self._dirty

    # ------------------------------------------------------------------ tentative truncation

    def _resolve(self) -> None:
        """Settle a tentative cut or clear before anything reads or changes the journal otherwise."""
        if self._pending_clear:
            self._pending_clear = False
            self._log.info("raft_journal_cleared", entries_dropped=len(self._entries))
            self._rewrite([])
        cut = self._pending_cut
        if cut is None:
            return
        self._pending_cut = None
        if cut >= len(self._entries):
            return
        keep = cut
        for pos in range(cut, len(self._entries)):
            _command, idx, term = self._entries[pos]
            if term == self._term or idx <= self._commit_index:
                keep = pos + 1
        if keep > cut:
            self.stats.kept_verified_tail += keep - cut
        if keep < len(self._entries):
            dropped = len(self._entries) - keep
            self.stats.dropped_unverified += dropped
            self._log.info(
                "raft_journal_unverified_tail_dropped",
                from_index=self._entries[keep][1],
                entries=dropped,
                current_term=self._term,
            )
            self._truncate_at(keep)

    def _position_of(self, idx: int) -> int | None:
        if not self._entries:
            return None
        pos = idx - self._entries[0][1]
        if 0 <= pos < len(self._entries):
            return pos
        return None

    # ------------------------------------------------------------------ pysyncobj Journal API

    def add(self, command: bytes | str, idx: int, term: int) -> None:
        """Append an entry, or keep the existing one if a tentative cut is pending and it matches."""
        if isinstance(command, str):
            command = command.encode("utf-8")
        if self._pending_clear:
            self._pending_clear = False
            pos = self._position_of(idx)
            if pos is not None and self._entries[pos][2] == term:
                # InstallSnapshot: keep the entry with the snapshot's index and term and what follows.
                self.stats.rebases += 1
                self._log.info(
                    "raft_journal_rebased_on_snapshot",
                    index=idx,
                    term=term,
                    entries_dropped=pos,
                    entries_kept=len(self._entries) - pos,
                )
                if pos > 0:
                    self._rewrite(self._entries[pos:])
                self._pending_cut = 1
                return
            self._log.info("raft_journal_cleared", entries_dropped=len(self._entries))
            self._rewrite([])
        cut = self._pending_cut
        if cut is not None:
            if cut < len(self._entries):
                _existing_command, existing_idx, existing_term = self._entries[cut]
                if existing_idx == idx and existing_term == term:
                    self._pending_cut = cut + 1
                    self.stats.kept_matching += 1
                    return
                self.stats.conflicts += 1
                self._log.info(
                    "raft_journal_conflict_truncated",
                    index=idx,
                    term=term,
                    existing_term=existing_term,
                    entries_dropped=len(self._entries) - cut,
                )
                self._truncate_at(cut)
            self._pending_cut = None
        self._append(command, idx, term)

    def clear(self) -> None:
        self._resolve()
        self._pending_clear = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        self._resolve()
        if entryFrom < len(self._entries):
            self._pending_cut = max(entryFrom, 0)

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Drop entries before position ``entryTo`` (log compaction, after a full dump was written)."""
        self._resolve()
        if entryTo <= 0:
            return
        self._rewrite(self._entries[entryTo:])

    @overload
    def __getitem__(self, item: int) -> Entry: ...
    @overload
    def __getitem__(self, item: slice) -> list[Entry]: ...

    def __getitem__(self, item: int | slice) -> Entry | list[Entry]:
        self._resolve()
        return self._entries[item]

    def __len__(self) -> int:
        self._resolve()
        return len(self._entries)

    def _destroy(self) -> None:
        if self._closed:
            return
        self._resolve()
        self.sync()
        if self._commit_index != self._stored_commit_index:
            self._store_meta()
        os.close(self._fd)
        self._closed = True

    close = _destroy

    def flush(self) -> None:
        self._resolve()
        self.sync()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._resolve()
        self._commit_index = raftCommitIndex

    def getRaftCommitIndex(self) -> int:
        self._resolve()
        return self._commit_index

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        """Persist term and vote (fsynced) before returning: Raft needs both durable before a vote."""
        self._resolve()
        self.sync()
        self._term = term
        self._voted_for = votedForNodeId
        self._store_meta()

    def getCurrentTerm(self) -> int:
        self._resolve()
        return self._term

    def getVotedForNodeId(self) -> Any:
        self._resolve()
        return self._voted_for

    def onOneSecondTimer(self) -> None:
        self._resolve()
        if self._commit_index != self._stored_commit_index:
            self.sync()  # the hint must never point past durable entries
            self._store_meta()

    # ------------------------------------------------------------------ kraftlog extras

    def term_of(self, idx: int) -> int | None:
        """Raft term of the entry at raft index ``idx``, None when not held."""
        self._resolve()
        pos = self._position_of(idx)
        return None if pos is None else self._entries[pos][2]

    @property
    def first_index(self) -> int | None:
        self._resolve()
        return self._entries[0][1] if self._entries else None

    @property
    def last_index(self) -> int | None:
        self._resolve()
        return self._entries[-1][1] if self._entries else None

    def align_with_dump(self, prev: Entry, last: Entry) -> str:
        """Make the journal start with the full dump's two entries, keeping everything after them.

        Called once at start-up, before pysyncobj sees the journal. pysyncobj writes the dump, then
        (a tick later) drops the journal prefix; after a crash in between, its loader would *clear*
        the whole journal, entries after the dump included. Here the prefix is dropped and the
        suffix kept, which is what the interrupted compaction would have produced. Returns what was
        done, for the log.
        """
        self._resolve()
        if len(self._entries) >= 2 and self._entries[0] == prev and self._entries[1] == last:
            return "aligned"
        pos = self._position_of(prev[1])
        if pos is not None and self._entries[pos][2] == prev[2]:
            nxt = self._entries[pos + 1] if pos + 1 < len(self._entries) else None
            if nxt is not None and nxt[1] == last[1] and nxt[2] == last[2]:
                self._rewrite(self._entries[pos:])
                return "prefix_dropped"
        first = self.first_index
        if first is not None and first > prev[1]:
            # Compaction drops the journal prefix only after the dump is durable, so a journal that
            # starts after the dump means the dump on disk is older than one that existed.
            raise JournalCorruptError(
                f"{self._path} starts at raft index {first}, after the full dump's index {prev[1]}: "
                "the dump that covered the dropped prefix is missing"
            )
        # The journal does not hold the dump's position: the dump (this node's own applied state)
        # is authoritative for everything up to it; entries past it are learned from the leader.
        self._log.warning(
            "raft_journal_reset_to_dump",
            dump_index=last[1],
            journal_first=self.first_index,
            journal_last=self.last_index,
        )
        self._rewrite([prev, last])
        return "reset"
