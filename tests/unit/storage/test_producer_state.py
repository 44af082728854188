"""Idempotence on the partition log (issue 15): the leader's sequence checks, duplicates answered
with their first offsets, followers keeping the same state, Kafka's producer snapshots, and the
state rebuilt after a crash, a truncation and a moved log start."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.records import crc32c
from kraftlog.storage import Log, LogConfig, build_batch, iter_batches
from kraftlog.storage._producer_state import ProducerStateManager

NOW = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def produced(pid: int, epoch: int, seq: int, n: int = 3, tag: str = "v") -> bytes:
    records = [(f"k{seq + i}".encode(), f"{tag}{seq + i}".encode()) for i in range(n)]
    return build_batch(records, timestamp_ms=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def make(tmp_path: Path, name: str = "t-0", clock: Clock | None = None, **cfg: object) -> Log:
    return Log(tmp_path / name, LogConfig(**cfg), clock_ms=clock or Clock())


def test_in_sequence_batches_are_written_and_a_retry_gets_the_first_offsets(tmp_path: Path) -> None:
    log = make(tmp_path)
    first = log.append_as_leader(produced(7, 0, 0), 0)
    second = log.append_as_leader(produced(7, 0, 3), 0)
    assert (first.first_offset, first.last_offset, second.first_offset) == (0, 2, 3)
    end = log.log_end_offset
    retry = log.append_as_leader(produced(7, 0, 0), 0)  # the first batch again: a lost answer
    assert (retry.first_offset, retry.last_offset) == (0, 2)
    assert log.log_end_offset == end  # nothing written twice


@pytest.mark.parametrize(
    ("epoch", "seq", "error"),
    [
        (0, 9, kerr.OutOfOrderSequenceNumberError),  # a gap
        (0, 1, kerr.OutOfOrderSequenceNumberError),  # overlapping, not a cached batch
        (1, 5, kerr.OutOfOrderSequenceNumberError),  # a new epoch starts at 0
    ],
)
def test_out_of_order_sequences_are_refused_and_nothing_is_written(
    tmp_path: Path, epoch: int, seq: int, error: type[kerr.KafkaError]
) -> None:
    log = make(tmp_path)
    log.append_as_leader(produced(7, 0, 0), 0)
    with pytest.raises(error):
        log.append_as_leader(produced(7, epoch, seq), 0)
    assert log.log_end_offset == 3


def test_an_older_epoch_is_fenced_and_a_new_one_starts_over(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(produced(7, 3, 0), 0)
    with pytest.raises(kerr.InvalidProducerEpochError):
        log.append_as_leader(produced(7, 2, 3), 0)
    log.append_as_leader(produced(7, 4, 0), 0)
    (entry,) = log.active_producers()
    assert entry.producer_epoch == 4 and entry.last_seq == 2 and entry.last_data_offset == 5


def test_an_unknown_producer_may_start_anywhere(tmp_path: Path) -> None:
    log = make(tmp_path)
    assert log.append_as_leader(produced(9, 0, 40), 0).first_offset == 0  # e.g. its state expired


def test_one_batch_per_request_for_idempotent_producers(tmp_path: Path) -> None:
    log = make(tmp_path)
    with pytest.raises(kerr.InvalidRecordError):
        log.append_as_leader(produced(7, 0, 0) + produced(7, 0, 3), 0)


def test_a_follower_knows_the_producers_and_recognises_a_retry_after_failover(tmp_path: Path) -> None:
    leader, follower = make(tmp_path, "t-0"), make(tmp_path / "f", "t-0")
    for seq in (0, 3, 6):
        leader.append_as_leader(produced(7, 0, seq), 0)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    retry = follower.append_as_leader(produced(7, 0, 6), 1)  # the follower leads now
    assert (retry.first_offset, retry.last_offset) == (6, 8)
    assert follower.append_as_leader(produced(7, 0, 9), 1).first_offset == 9


def test_snapshots_at_roll_and_close_in_kafkas_format(tmp_path: Path) -> None:
    log = make(tmp_path, segment_bytes=400)
    for seq in range(0, 30, 3):
        log.append_as_leader(produced(7, 2, seq), 0)
    log.append_as_leader(produced(8, 0, 0, n=1), 0)
    snapshots = sorted(p.name for p in log.dir.glob("*.snapshot"))
    assert snapshots and all(len(n) == len("00000000000000000000.snapshot") for n in snapshots)
    log.close()
    newest = sorted(log.dir.glob("*.snapshot"))[-1]
    assert newest.name == f"{31:020d}.snapshot"  # the log end at the clean close
    data = newest.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2) and crc == crc32c(data[6:])
    pid, epoch, last_seq, last_offset, delta, _ts, coord, txn = struct.unpack_from(">qhiqiqiq", data, 10)
    assert (pid, epoch, last_seq, last_offset, delta, coord, txn) == (7, 2, 29, 29, 2, -1, -1)
    again = make(tmp_path, segment_bytes=400)
    assert [(e.producer_id, e.producer_epoch, e.last_seq) for e in again.active_producers()] == [(7, 2, 29), (8, 0, 0)]
    assert again.append_as_leader(produced(7, 2, 27), 0).first_offset == 27  # the last batch is known


def test_a_crash_rebuilds_the_state_from_the_newest_snapshot_and_the_log(tmp_path: Path) -> None:
    log = make(tmp_path, segment_bytes=400)
    for seq in range(0, 30, 3):
        log.append_as_leader(produced(7, 0, seq), 0)
    log.flush()
    log.close_without_flush()
    again = make(tmp_path, segment_bytes=400)
    (entry,) = again.active_producers()
    # the snapshot at the roll to 24 kept the producer's last batch (21-23), as Kafka's does; the
    # two batches after it were replayed from the log
    assert entry.last_seq == 29 and [b.first_seq for b in entry.batches] == [21, 24, 27]
    assert again.append_as_leader(produced(7, 0, 21), 0).first_offset == 21
    with pytest.raises(kerr.OutOfOrderSequenceNumberError):
        again.append_as_leader(produced(7, 0, 33), 0)


def test_a_corrupt_snapshot_is_dropped_and_the_log_replayed(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.append_as_leader(produced(7, 0, 0), 0)
    log.close()
    (snap,) = log.dir.glob("*.snapshot")
    snap.write_bytes(snap.read_bytes()[:-1] + b"\x00")
    again = make(tmp_path)
    assert [e.last_seq for e in again.active_producers()] == [2]
    assert not snap.exists() or ProducerStateManager.read_snapshot(snap)


def test_truncation_forgets_what_it_removed(tmp_path: Path) -> None:
    log = make(tmp_path)
    for seq in (0, 3, 6):
        log.append_as_leader(produced(7, 0, seq), 0)
    log.truncate_to(6)
    (entry,) = log.active_producers()
    assert entry.last_seq == 5
    assert log.append_as_leader(produced(7, 0, 6, tag="w"), 0).first_offset == 6  # written anew
    values = [r.value for _p, b in iter_batches(log.read(6, 1 << 20).records) for r in b.records()]
    assert values == [b"w6", b"w7", b"w8"]


def test_idle_producers_expire_and_those_below_the_log_start_go(tmp_path: Path) -> None:
    clock = Clock()
    log = Log(tmp_path / "t-0", LogConfig(), clock_ms=clock, producer_id_expiration_ms=1000)
    log.append_as_leader(produced(7, 0, 0), 0)
    log.append_as_leader(produced(8, 0, 0), 0)
    assert log.remove_expired_producers(NOW + 999) == 0
    assert log.remove_expired_producers(NOW + 1000) == 2
    log.append_as_leader(produced(7, 0, 50), 0)  # unknown again: accepted anywhere
    log.append_as_leader(build_batch([(b"k", b"v")], timestamp_ms=NOW), 0)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(log.log_end_offset)
    assert log.active_producers() == []
