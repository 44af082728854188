"""Transactions on the partition log (issue 15): open transactions hold the last stable offset back,
the coordinator's markers close them, aborted ones are indexed in Kafka's ``.txnindex`` for
read_committed fetches, followers and restarts rebuild the same, and markers of a fenced producer
or coordinator are refused."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.records import ControlRecordType
from kraftlog.storage import AppendOrigin, Log, LogConfig, RecordBatchBuilder, build_batch, build_control_batch
from kraftlog.storage._txn_index import AbortedTxn

NOW = 1_700_000_000_000


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append(NOW, f"k{seq + i}".encode(), f"t{pid}-{seq + i}".encode())
    return b.build()


def marker(pid: int, kind: ControlRecordType, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch, timestamp_ms=NOW
    )


def make(tmp_path: Path, name: str = "t-0", **cfg: object) -> Log:
    return Log(tmp_path / name, LogConfig(**cfg), clock_ms=lambda: NOW)


def settle(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def test_an_open_transaction_holds_the_lso_until_its_marker(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(build_batch([(b"a", b"plain")], timestamp_ms=NOW), 0)  # offset 0
    log.append_as_leader(txn_batch(7, 0), 0)  # 1..2
    log.append_as_leader(txn_batch(7, 2), 0)  # 3..4
    settle(log)
    assert log.last_stable_offset == 1
    log.append_as_leader(marker(7, ControlRecordType.COMMIT), 0, origin=AppendOrigin.COORDINATOR)  # 5
    settle(log)
    assert log.last_stable_offset == log.high_watermark == 6
    assert log.collect_aborted(0, 6) == []


def test_an_abort_is_indexed_in_kafkas_txnindex(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0)  # 0..1
    log.append_as_leader(txn_batch(8, 0), 0)  # 2..3, a second open transaction
    log.append_as_leader(marker(7, ControlRecordType.ABORT), 0, origin=AppendOrigin.COORDINATOR)  # 4
    settle(log)
    assert log.last_stable_offset == 2  # producer 8's transaction is still open
    (aborted,) = log.collect_aborted(0, 5)
    assert aborted == AbortedTxn(7, 0, 4, 2)
    (index,) = log.dir.glob("*.txnindex")
    assert index.read_bytes() == struct.pack(">hqqqq", 0, 7, 0, 4, 2)
    log.append_as_leader(marker(8, ControlRecordType.COMMIT), 0, origin=AppendOrigin.COORDINATOR)
    settle(log)
    assert log.last_stable_offset == 6
    assert log.collect_aborted(5, 6) == []  # nothing aborted at or after offset 5


def test_a_plain_batch_in_the_middle_of_a_transaction_is_refused(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0)
    plain = build_batch([(b"k", b"v")], timestamp_ms=NOW, producer_id=7, producer_epoch=0, base_sequence=2)
    with pytest.raises(kerr.InvalidTxnStateError):
        log.append_as_leader(plain, 0)


def test_markers_of_a_fenced_producer_or_coordinator_are_refused(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn_batch(7, 0, epoch=3), 0)
    log.append_as_leader(
        marker(7, ControlRecordType.COMMIT, epoch=3, coordinator_epoch=5), 0, origin=AppendOrigin.COORDINATOR
    )
    end = log.log_end_offset
    with pytest.raises(kerr.ProducerFencedError):
        log.append_as_leader(
            marker(7, ControlRecordType.ABORT, epoch=2, coordinator_epoch=5), 0, origin=AppendOrigin.COORDINATOR
        )
    with pytest.raises(kerr.TransactionCoordinatorFencedError):
        log.append_as_leader(
            marker(7, ControlRecordType.ABORT, epoch=3, coordinator_epoch=4), 0, origin=AppendOrigin.COORDINATOR
        )
    assert log.log_end_offset == end
    with pytest.raises(kerr.InvalidRecordError):  # a client may not write markers
        log.append_as_leader(marker(7, ControlRecordType.ABORT, epoch=3, coordinator_epoch=5), 0)


def test_a_follower_builds_the_same_index_and_lso(tmp_path: Path) -> None:
    leader, follower = make(tmp_path, "t-0"), make(tmp_path / "f", "t-0")
    leader.append_as_leader(txn_batch(7, 0), 0)
    leader.append_as_leader(marker(7, ControlRecordType.ABORT), 0, origin=AppendOrigin.COORDINATOR)
    leader.append_as_leader(txn_batch(9, 0), 0)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    settle(follower)
    assert follower.collect_aborted(0, 10) == leader.collect_aborted(0, 10) == [AbortedTxn(7, 0, 2, 3)]
    assert follower.last_stable_offset == 3  # producer 9's transaction is open


def test_a_crash_rebuilds_open_transactions_and_a_lost_index(tmp_path: Path) -> None:
    log = make(tmp_path, segment_bytes=300)
    for seq in range(0, 8, 2):
        log.append_as_leader(txn_batch(7, seq), 0)
    log.append_as_leader(marker(7, ControlRecordType.ABORT), 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(txn_batch(9, 0), 0)  # still open
    expected = log.collect_aborted(0, 100)
    log.flush()
    log.close_without_flush()
    for index in (tmp_path / "t-0").glob("*.txnindex"):
        index.unlink()  # never reached the disk
    again = make(tmp_path, segment_bytes=300)
    settle(again)
    assert again.collect_aborted(0, 100) == expected
    assert again.last_stable_offset == again.log_end_offset - 2  # producer 9's transaction
    again.append_as_leader(marker(9, ControlRecordType.COMMIT), 0, origin=AppendOrigin.COORDINATOR)
    settle(again)
    assert again.last_stable_offset == again.log_end_offset


def test_truncation_removes_aborts_it_cut_off(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0)
    log.append_as_leader(marker(7, ControlRecordType.ABORT), 0, origin=AppendOrigin.COORDINATOR)  # 2
    log.truncate_to(2)
    settle(log)
    assert log.collect_aborted(0, 10) == []
    assert log.last_stable_offset == 0  # the transaction is open again: its marker is gone


def test_a_coordinator_write_of_a_fenced_producer_is_refused(tmp_path: Path) -> None:
    """TxnOffsetCommit's records are the coordinator's, but a zombie's epoch is still fenced
    (only the sequences are not checked), so it cannot open a transaction no marker will close."""
    log = make(tmp_path)
    log.append_as_leader(txn_batch(7, 0, epoch=6), 0)
    log.append_as_leader(marker(7, ControlRecordType.ABORT, epoch=6), 0, origin=AppendOrigin.COORDINATOR)
    zombie = RecordBatchBuilder(producer_id=7, producer_epoch=5, is_transactional=True)
    zombie.append(NOW, b"k", b"offset")
    with pytest.raises(kerr.ProducerFencedError):
        log.append_as_leader(zombie.build(), 0, origin=AppendOrigin.COORDINATOR)
    settle(log)
    assert log.last_stable_offset == log.log_end_offset  # no transaction was opened
