"""Transaction version 2 in the coordinator's core (issue 28, KIP-890): EndTxn v5 bumps the epoch at
every end and answers it, a retry of an end is told from the next transaction's end by its epoch,
the epochs running out move the producer to a new id, the markers say so (strict at the
partition), a leader's verify-only question is answered without a write, and the v1 record of
``__transaction_state`` keeps the client's version across a reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.broker.txn._txn_records import TransactionLogValue, TxnState, decode_txn, encode_txn_value
from kraftlog.broker.txn._txn_shard import TxnMetadata
from kraftlog.common import errors as kerr
from kraftlog.storage._producer_state import ProducerStateManager
from tests.unit.broker.test_txn_shard import Driver


def end_v2(d: Driver, pid: int, epoch: int, commit: bool, new_pid: int = -1, txn_id: str = "tx") -> object:
    d.absorb(d.shard.end_txn_v2(txn_id, pid, epoch, commit, "end", d.now, new_pid))
    return d.answers.pop("end")


def test_every_end_bumps_the_epoch_and_answers_it() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    assert end_v2(d, pid, epoch, True) == (None, pid, epoch + 1)
    (job,) = d.jobs
    assert job.producer_epoch == epoch + 1 and job.transaction_version == 2  # markers newer than the batches
    assert d.state() is TxnState.PREPARE_COMMIT
    assert end_v2(d, pid, epoch, True) == (kerr.ConcurrentTransactionsError, -1, -1)  # a retry, markers on their way
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_COMMIT and d.shard.txns["tx"].producer_epoch == epoch + 1
    assert end_v2(d, pid, epoch, True) == (None, pid, epoch + 1)  # a retry after the end: the same answer
    assert end_v2(d, pid, epoch, False) == (kerr.InvalidTxnStateError, -1, -1)  # the other way round
    # the next transaction runs at the bumped epoch; the old one is fenced
    assert d.add(pid, epoch, ("a", 0))[0] is kerr.ProducerFencedError  # type: ignore[index]
    assert d.add(pid, epoch + 1, ("a", 0))[0] is None  # type: ignore[index]
    assert end_v2(d, pid, epoch, False) == (kerr.ProducerFencedError, -1, -1)  # a stale end of the last one
    assert end_v2(d, pid, epoch + 1, False) == (None, pid, epoch + 2)
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_ABORT


def test_the_first_protocol_keeps_the_epoch() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    assert d.end(pid, epoch, True) is None
    (job,) = d.jobs
    assert job.producer_epoch == epoch and job.transaction_version == 0
    d.finish_markers()
    assert d.shard.txns["tx"].producer_epoch == epoch


def test_the_last_epoch_moves_the_producer_to_a_new_id() -> None:
    d = Driver()
    _e, pid, _epoch = d.init()  # type: ignore[misc]
    d.shard.txns["tx"] = TxnMetadata("tx", pid, 32_766, 30_000, TxnState.ONGOING, frozenset({("a", 0)}), 1, 1)
    assert d.shard.end_needs_producer_id("tx")
    assert end_v2(d, pid, 32_766, True) == (kerr.ConcurrentTransactionsError, -1, -1)  # no id fetched yet
    assert end_v2(d, pid, 32_766, True, new_pid=555) == (None, 555, 0)
    (job,) = d.jobs
    assert (job.producer_id, job.producer_epoch) == (pid, 32_767)  # the markers close the old id's transaction
    d.finish_markers()
    meta = d.shard.txns["tx"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (555, 0, pid)
    assert end_v2(d, pid, 32_766, True) == (None, 555, 0)  # a retry with the old id
    reloaded = d.reloaded().txns["tx"]
    assert (reloaded.producer_id, reloaded.producer_epoch, reloaded.client_version) == (555, 0, 2)


def test_verify_only_answers_without_writing() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    written = len(d.log)
    d.absorb(d.shard.verify_partitions("tx", pid, epoch, [("a", 0), ("b", 0)], "v"))
    assert d.answers.pop("v") == (None, (("a", 0, None), ("b", 0, kerr.TransactionAbortableError)))
    d.absorb(d.shard.verify_partitions("tx", pid, epoch + 1, [("a", 0)], "v"))
    assert d.answers.pop("v") == (kerr.ProducerFencedError, (("a", 0, kerr.ProducerFencedError),))
    d.absorb(d.shard.verify_partitions("tx", pid + 1, epoch, [("a", 0)], "v"))
    assert d.answers.pop("v")[0] is kerr.InvalidProducerIdMappingError  # type: ignore[index]
    d.end(pid, epoch, True)
    d.absorb(d.shard.verify_partitions("tx", pid, epoch, [("a", 0)], "v"))
    assert d.answers.pop("v")[0] is kerr.ConcurrentTransactionsError  # type: ignore[index]
    d.finish_markers()
    d.absorb(d.shard.verify_partitions("tx", pid, epoch, [("a", 0)], "v"))
    assert d.answers.pop("v") == (None, (("a", 0, kerr.TransactionAbortableError),))  # ended: not in one
    assert len(d.log) == written + 2  # only the end's two records


def test_the_v1_record_round_trips_with_the_client_version() -> None:
    value = TransactionLogValue(7, 3, 30_000, TxnState.PREPARE_COMMIT, (("a", (0, 2)),), 11, 10, 5, 9, 2)
    raw = encode_txn_value(value)
    assert raw[:2] == b"\x00\x01"  # version 1, as Kafka writes it for a transaction version 2 client
    from kraftlog.broker.txn._txn_records import TransactionLogKey, encode_txn_key

    _k, back = decode_txn(encode_txn_key(TransactionLogKey("tx")), raw)
    assert back == value
    v0 = value._replace(client_transaction_version=0, previous_producer_id=-1, next_producer_id=-1)
    assert encode_txn_value(v0)[:2] == b"\x00\x00"
    assert decode_txn(encode_txn_key(TransactionLogKey("tx")), encode_txn_value(v0))[1] == v0


def test_a_strict_marker_must_carry_a_newer_epoch(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(9, 4, 0, 0, 10, 10, 1, transactional=True)  # the transaction's batch, epoch 4
    state.check_marker(9, 4, 0)  # the first protocol: the marker has the batches' epoch
    with pytest.raises(kerr.InvalidProducerEpochError):
        state.check_marker(9, 4, 0, strict=True)
    state.check_marker(9, 5, 0, strict=True)  # transaction version 2: the bumped epoch
    state.complete_txn(9, 5, 0, 11, 2)
    state.update(9, 5, 0, 0, 12, 12, 3, transactional=True)  # the next transaction, at the bumped epoch
    with pytest.raises(kerr.InvalidProducerEpochError):
        state.check_marker(9, 5, 0, strict=True)  # the last transaction's marker, delayed: refused
    assert state.producers[9].current_txn_first_offset == 12  # the open transaction stays open
