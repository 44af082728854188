"""Producer state of one partition (KIP-98 idempotence): per producer id, its epoch and the
sequence ranges and offsets of its last five batches, so that the leader can tell a retried batch
(answered with the offsets it was first written at) from a gap in the sequence
(OUT_OF_ORDER_SEQUENCE_NUMBER) and a producer that an epoch bump retired (INVALID_PRODUCER_EPOCH).

Kafka's ``ProducerStateManager``, with its transactions: a producer's first transactional batch
opens its transaction (``current_txn_first_offset``); the coordinator's COMMIT or ABORT marker
closes it (`complete_txn`, fencing markers of an older producer or coordinator epoch); the first
offset of the oldest open transaction is the partition's first unstable offset, below which the
last stable offset stays. Also:

- the leader checks a batch (`check`) before it is written and records it (`update`) after; a
  follower only records what it replicates, so a new leader knows the same producers;
- snapshots ``{offset:020d}.snapshot`` in the partition's directory, Kafka's file format
  (version 1, CRC-32C, one entry per producer with its last batch), written when a segment rolls
  and at a clean shutdown; loading takes the newest snapshot at or below the log end and replays
  the batches after it (the log does the replay: `Log` reads them);
- ``producer.id.expiration.ms``: a producer silent that long is forgotten (`remove_expired`);
  producers whose last write fell below the log start offset are dropped (`truncate_head`).

Pure: no locks (the log's lock is held), time comes in as arguments.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kraftlog.common import errors as kerr
from kraftlog.common.records import crc32c

__all__ = [
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
]

SNAPSHOT_SUFFIX = ".snapshot"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
_CACHED_BATCHES = 5  # Kafka's NUM_BATCHES_TO_RETAIN: what max.in.flight.requests.per.connection may reach

_VERSION = 1
_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn


class CorruptSnapshotError(kerr.CorruptMessageError):
    """A producer snapshot that cannot be read (it is deleted and the state rebuilt from the log)."""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=_CACHED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producers of one partition (see the module docstring)."""

    def __init__(self, directory: Path, *, expiration_ms: int = 86_400_000) -> None:
        self.dir = Path(directory)
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset of an open transaction -> its producer id
        # KIP-890 part 1: producer id -> the guard of a verification with the coordinator on its
        # way; a marker drops it, so a batch verified for a transaction that ended meanwhile is refused
        self.verification_guards: dict[int, object] = {}
        self.map_end_offset = 0  # the state covers the log below this offset

    # ================================================================ the leader

    def check(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int, transactional: bool = False
    ) -> BatchMetadata | None:
        """A client's batch, before it is written: the batch it duplicates (answer with its
        offsets, write nothing), or None to write it; raises OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH or INVALID_TXN_STATE (a plain batch from a producer in the middle
        of a transaction). Kafka's ``ProducerAppendInfo`` checks."""
        entry = self.producers.get(producer_id)
        if entry is not None and not transactional and entry.current_txn_first_offset >= 0:
            raise kerr.InvalidTxnStateError(
                f"producer {producer_id} has an open transaction: its batches must be transactional"
            )
        if entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH:
            return None  # unknown (or expired, or below the log start): any sequence is accepted
        if epoch < entry.producer_epoch:
            raise kerr.InvalidProducerEpochError(
                f"producer {producer_id}'s epoch {epoch} is older than the partition's {entry.producer_epoch}"
            )
        if epoch > entry.producer_epoch:
            if first_seq != 0:
                raise kerr.OutOfOrderSequenceNumberError(
                    f"producer {producer_id} starts its new epoch {epoch} at sequence {first_seq}, not 0"
                )
            return None
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if not _in_sequence(entry.last_seq, first_seq):
            raise kerr.OutOfOrderSequenceNumberError(
                f"producer {producer_id} sent sequence {first_seq} after {entry.last_seq} (epoch {epoch})"
            )
        return None

    # ============================================================ every replica

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        ts: int,
        transactional: bool = False,
    ) -> None:
        """A batch written to the log (by the leader after `check`, or replicated, or replayed at
        load): it becomes the producer's latest. A new epoch forgets the old one's batches; a
        transactional batch opens the producer's transaction if none is open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = epoch
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, ts))
        entry.last_timestamp = max(entry.last_timestamp, ts)
        if transactional and entry.current_txn_first_offset < 0:
            self.verification_guards.pop(producer_id, None)  # used: the transaction is open here
            entry.current_txn_first_offset = first_offset
            self.ongoing[first_offset] = producer_id
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    # ============================================================== transactions

    def check_epoch(self, producer_id: int, epoch: int) -> None:
        """A coordinator's own transactional write for a producer (TxnOffsetCommit): only the
        epoch is checked (no sequences), so a fenced zombie cannot open a transaction here."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.producer_epoch:
            raise kerr.ProducerFencedError(
                f"producer {producer_id}'s epoch {epoch} is older than the partition's {entry.producer_epoch}"
            )

    def has_ongoing_txn(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer's transaction at ``epoch`` is open here (its batches need no
        verification with the coordinator: the first one had it)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == epoch and entry.current_txn_first_offset >= 0

    def start_verification(self, producer_id: int) -> object:
        """A guard for a verification with the coordinator that starts now (Kafka's
        ``VerificationGuard``): the append after it must present it (`check_verification`). A
        guard already out for the producer is shared (batches in flight together, each verified,
        all belong to the transaction the first one opens)."""
        guard = self.verification_guards.get(producer_id)
        if guard is None:
            guard = self.verification_guards[producer_id] = object()
        return guard

    def check_verification(self, producer_id: int, epoch: int, guard: object) -> None:
        """Before a verified transactional batch is written: INVALID_TXN_STATE unless its
        transaction is open here already (a batch in flight with it opened it) or the guard is
        still the producer's (a marker between the verification and the append dropped it: the
        transaction it was verified for is over, and the batch would open a hanging one);
        Kafka's ``batchMissingRequiredVerification``."""
        if self.has_ongoing_txn(producer_id, epoch):
            return
        if self.verification_guards.get(producer_id) is not guard:
            raise kerr.InvalidTxnStateError(
                f"producer {producer_id}'s transaction ended while its batch was being verified"
            )

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, *, strict: bool = False) -> None:
        """A transaction marker from the coordinator, before it is written: one of an older
        producer epoch is PRODUCER_FENCED, one of an older coordinator TRANSACTION_COORDINATOR_FENCED.
        ``strict`` (transaction version 2, whose every end bumps the epoch): the marker's epoch must
        be newer than the producer's here, else INVALID_PRODUCER_EPOCH (Kafka 4's check), so a
        marker of an ended transaction, delayed past the producer's next one, cannot close it."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if strict and entry.producer_epoch != NO_PRODUCER_EPOCH and epoch <= entry.producer_epoch:
            raise kerr.InvalidProducerEpochError(
                f"transaction version 2 marker for producer {producer_id} at epoch {epoch}, "
                f"not newer than the partition's {entry.producer_epoch}"
            )
        if epoch < entry.producer_epoch:
            raise kerr.ProducerFencedError(
                f"marker for producer {producer_id} at epoch {epoch}, older than the partition's {entry.producer_epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise kerr.TransactionCoordinatorFencedError(
                f"marker from coordinator epoch {coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    def complete_txn(
        self, producer_id: int, epoch: int, coordinator_epoch: int, marker_offset: int, ts: int
    ) -> tuple[int, int] | None:
        """A COMMIT or ABORT marker written at ``marker_offset``: the producer's transaction ends.
        Returns ``(first offset, marker offset)`` of the transaction it closed, or None when none
        was open (a marker for a partition the producer wrote nothing to)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if epoch > entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = epoch
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, ts)
        self.map_end_offset = max(self.map_end_offset, marker_offset + 1)
        self.verification_guards.pop(producer_id, None)
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        self.ongoing.pop(first, None)
        return first, marker_offset

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None when none is open."""
        return min(self.ongoing) if self.ongoing else None

    def advance(self, end_offset: int) -> None:
        """Batches without a producer id up to ``end_offset`` were written too."""
        self.map_end_offset = max(self.map_end_offset, end_offset)

    # ================================================================ forgetting

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``; how many went."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved: producers whose last write is gone are forgotten, and so are the
        snapshots below it."""
        for pid in [
            p
            for p, e in self.producers.items()
            if e.last_data_offset < log_start_offset and e.current_txn_first_offset < 0
        ]:
            del self.producers[pid]
        for offset, path in self.snapshot_files():
            if offset < log_start_offset:
                path.unlink(missing_ok=True)

    def clear(self, end_offset: int) -> None:
        """Forget everything (the state will be rebuilt from the log starting at ``end_offset``)."""
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = end_offset

    # ================================================================ snapshots

    def snapshot_files(self) -> list[tuple[int, Path]]:
        out = []
        try:
            entries = list(self.dir.iterdir())
        except FileNotFoundError:
            return []
        for p in entries:
            stem = p.name[: -len(SNAPSHOT_SUFFIX)]
            if p.name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
                out.append((int(stem), p))
        return sorted(out)

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write the state as of ``map_end_offset`` (once per offset); its path, or None."""
        path = self.dir / f"{self.map_end_offset:020d}{SNAPSHOT_SUFFIX}"
        if path.exists():
            return None
        body = [struct.pack(">i", len(self.producers))]
        for pid, e in sorted(self.producers.items()):
            last = e.batches[-1] if e.batches else None
            body.append(
                _ENTRY.pack(
                    pid,
                    e.producer_epoch,
                    last.last_seq if last else NO_SEQUENCE,
                    last.last_offset if last else -1,
                    last.offset_delta if last else 0,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            )
        entries = b"".join(body)
        data = struct.pack(">hI", _VERSION, crc32c(entries)) + entries
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @staticmethod
    def read_snapshot(path: Path) -> list[ProducerStateEntry]:
        """The entries of one snapshot file; CorruptSnapshotError when it does not check out."""
        data = path.read_bytes()
        if len(data) < _HEAD.size:
            raise CorruptSnapshotError(f"producer snapshot {path.name} is {len(data)} bytes long")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != _VERSION:
            raise CorruptSnapshotError(f"producer snapshot {path.name} has unknown version {version}")
        if crc32c(memoryview(data)[6:]) != crc:
            raise CorruptSnapshotError(f"producer snapshot {path.name} fails its CRC")
        if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
            raise CorruptSnapshotError(f"producer snapshot {path.name} claims {count} entries in {len(data)} bytes")
        out = []
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn = _ENTRY.unpack_from(
                data, _HEAD.size + i * _ENTRY.size
            )
            entry = ProducerStateEntry(
                pid, epoch, last_timestamp=ts, coordinator_epoch=coord, current_txn_first_offset=txn
            )
            if last_offset >= 0:
                entry.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset, ts))
            out.append(entry)
        return out

    def load_snapshot(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Load the newest readable snapshot at or below ``log_end_offset`` (newer ones, from a
        longer log, are deleted; unreadable ones too). Returns the offset the log must replay
        from to bring the state to its end."""
        self.producers.clear()
        self.ongoing.clear()
        for offset, path in reversed(self.snapshot_files()):
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = self.read_snapshot(path)
            except (CorruptSnapshotError, OSError):
                path.unlink(missing_ok=True)
                continue
            for e in entries:
                open_txn = e.current_txn_first_offset >= 0
                if open_txn or (
                    now_ms - e.last_timestamp < self.expiration_ms and e.last_data_offset >= log_start_offset
                ):
                    self.producers[e.producer_id] = e
                    if open_txn:
                        self.ongoing[e.current_txn_first_offset] = e.producer_id
            self.map_end_offset = max(offset, log_start_offset)
            return self.map_end_offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def delete_snapshots_from(self, offset: int) -> None:
        """Snapshots at or past ``offset`` describe a log that is gone (truncation)."""
        for o, path in self.snapshot_files():
            if o >= offset:
                path.unlink(missing_ok=True)
