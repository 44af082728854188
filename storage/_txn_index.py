"""A segment's transaction index, ``{base_offset:020d}.txnindex`` (Kafka's ``TransactionIndex``):
the aborted transactions whose abort marker is in the segment, so that a read_committed fetch can
tell the consumer which records to drop without reading the segment's data again.

Kafka's file format: 34-byte entries of version (int16, 0), producer id, first offset, last offset
(the marker's) and last stable offset (int64 each: the LSO right after the abort, which lets a
fetch stop scanning once past it). Entries are in increasing last offset. The file is created with
its first entry; appends are written at once and fsynced with the segment.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from kraftlog.storage._errors import KafkaStorageError

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.path}: {err}") from err
        whole = len(data) - len(data) % _ENTRY.size  # a torn last entry (a crash mid-write) is dropped
        out = []
        for pos in range(0, whole, _ENTRY.size):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != 0:
                break
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            if txn in entries:
                return  # replayed at recovery: already there
            raise KafkaStorageError(
                f"aborted transaction ending at {txn.last_offset} is not after {entries[-1].last_offset} in {self.path}"
            )
        try:
            with open(self.path, "ab") as f:
                f.write(_ENTRY.pack(0, *txn))
        except OSError as err:
            raise KafkaStorageError(f"cannot write {self.path}: {err}") from err
        entries.append(txn)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions that overlap [fetch_offset, upper_offset); True when no later
        segment can hold more (an entry's last stable offset reached ``upper_offset``)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose abort marker is at or past ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self._entries = kept
        self._rewrite()

    def replace_with(self, entries: list[AbortedTxn]) -> None:
        self._entries = sorted(entries, key=lambda t: t.last_offset)
        self._rewrite()

    def _rewrite(self) -> None:
        entries = self._entries or []
        try:
            if not entries:
                self.path.unlink(missing_ok=True)
                return
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(b"".join(_ENTRY.pack(0, *t) for t in entries))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as err:
            raise KafkaStorageError(f"cannot rewrite {self.path}: {err}") from err
        self._dirty = False

    def flush(self) -> None:
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def rename(self, path: Path) -> None:
        try:
            os.replace(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
