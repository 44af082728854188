"""The Bufstream analysis' delayed marker on one partition log, deterministically (issue 28): T1 of a
producer ends with its marker, T2 of the same producer writes, then a copy of T1's marker arrives
(a marker request held up in the network, or retried after a lost answer), then T2's own end.

Transaction version 1 (the marker has the batches' epoch): the copy closes T2, so an aborted T2
is read (aborted read) or a committed T2 is hidden (lost write). Version 2 (every end bumped the
epoch; the leader takes a marker only with a newer one): the copy is refused and T2 ends as its
producer decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.records import ControlRecordType, iter_batches
from kraftlog.storage import AppendOrigin, Log
from tests.unit.storage.test_transactions_log import NOW, make, settle

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def txn(value: bytes, epoch: int, seq: int) -> bytes:
    from kraftlog.storage import RecordBatchBuilder

    b = RecordBatchBuilder(producer_id=7, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    b.append(NOW, None, value)
    return b.build()


def marker(kind: ControlRecordType, epoch: int) -> bytes:
    from kraftlog.storage import build_control_batch

    return build_control_batch(kind, producer_id=7, producer_epoch=epoch, coordinator_epoch=0, timestamp_ms=NOW)


def write_marker(log: Log, kind: ControlRecordType, epoch: int, version: int) -> None:
    log.append_as_leader(marker(kind, epoch), 0, origin=AppendOrigin.COORDINATOR, transaction_version=version)


def read_committed(log: Log) -> list[bytes]:
    """What a read_committed consumer reads: up to the LSO, without aborted transactions' records."""
    settle(log)
    lso = log.last_stable_offset
    aborted = log.collect_aborted(0, lso)
    raw = log.read(0, 1 << 20, max_offset=lso).records
    out = []
    for _pos, batch in iter_batches(raw):
        if batch.is_control or batch.last_offset >= lso:
            continue
        if batch.is_transactional and any(
            a.producer_id == batch.producer_id and a.first_offset <= batch.base_offset <= a.last_offset for a in aborted
        ):
            continue
        out.extend(r.value for r in batch.records())
    return out


@pytest.mark.parametrize("first_commits", [True, False])
def test_version_1_the_delayed_marker_ends_the_next_transaction(tmp_path: Path, first_commits: bool) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn(b"T1", 0, 0), 0)
    write_marker(log, COMMIT if first_commits else ABORT, 0, 1)
    log.append_as_leader(txn(b"T2", 0, 1), 0)  # the same epoch (version 1)
    write_marker(log, COMMIT if first_commits else ABORT, 0, 1)  # T1's marker again, late: taken
    write_marker(log, ABORT if first_commits else COMMIT, 0, 1)  # T2's own end
    if first_commits:
        assert read_committed(log) == [b"T1", b"T2"]  # aborted read: T2 aborted, yet read
    else:
        assert read_committed(log) == []  # lost write: T2 committed, yet hidden


@pytest.mark.parametrize("first_commits", [True, False])
def test_version_2_refuses_the_delayed_marker(tmp_path: Path, first_commits: bool) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn(b"T1", 0, 0), 0)  # epoch 0
    write_marker(log, COMMIT if first_commits else ABORT, 1, 2)  # its end bumped the epoch to 1
    log.append_as_leader(txn(b"T2", 1, 0), 0)  # epoch 1
    with pytest.raises(kerr.InvalidProducerEpochError):
        write_marker(log, COMMIT if first_commits else ABORT, 1, 2)  # T1's marker again, late: refused
    write_marker(log, ABORT if first_commits else COMMIT, 2, 2)  # T2's own end, epoch 2
    assert read_committed(log) == ([b"T1"] if first_commits else [b"T2"])
