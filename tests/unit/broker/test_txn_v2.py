"""Transaction version 2 in the coordinator's core (issue 28, KIP-890): EndTxn v5 bumps the epoch at
every end and answers it, a retry of an end is told from the next transaction's end by its epoch,
the epochs running out move the producer to a new id, the markers say so (strict at the
partition), a leader's verify-only question is answered without a write, and the v1 record of
``__transaction_state`` keeps the client's version across a reload."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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


def test_a_marker_between_verification_and_append_refuses_the_batch(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    guard = state.start_verification(9)
    assert state.start_verification(9) is guard  # a second batch in flight shares it
    state.check_verification(9, 1, guard)
    state.complete_txn(9, 1, 0, 5, 1)  # the transaction ended meanwhile
    with pytest.raises(kerr.InvalidTxnStateError):
        state.check_verification(9, 1, guard)
    fresh = state.start_verification(9)
    state.update(9, 1, 0, 0, 6, 6, 2, transactional=True)  # the batch opened the transaction
    assert state.has_ongoing_txn(9, 1) and not state.has_ongoing_txn(9, 2)
    state.check_verification(9, 1, fresh)  # a batch in flight with the one that opened it
    state.complete_txn(9, 2, 0, 7, 3)
    with pytest.raises(kerr.InvalidTxnStateError):
        state.check_verification(9, 1, fresh)  # used, and the transaction is over


class _Partitions:
    def __init__(self, tmp_path: Path) -> None:
        self.state = ProducerStateManager(tmp_path)

    def __call__(self, topic: str, index: int) -> ProducerStateManager | None:
        return self.state if topic == "t" else None


def _produce(*, add: bool = False, abortable: bool = False, epoch: int = 0) -> tuple[Any, list[list[bytes]]]:
    from kraftlog.proto import broker_pb2
    from kraftlog.storage import RecordBatchBuilder

    b = RecordBatchBuilder(producer_id=9, producer_epoch=epoch, base_sequence=0, is_transactional=True)
    b.append(1, None, b"v")
    R = broker_pb2.ProduceRequest
    req = R(
        acks=-1,
        transactional_id="tx",
        add_partitions=add,
        abortable_error=abortable,
        topics=[R.TopicData(name="t", partitions=[R.PartitionData(index=0, records=b.build())])],
    )
    return req, [[b.build()]]


@pytest.mark.parametrize(
    ("answer", "abortable", "expected"),
    [
        (None, False, None),
        (kerr.ProducerFencedError, False, kerr.InvalidProducerEpochError),
        (kerr.TransactionAbortableError, False, kerr.InvalidTxnStateError),
        (kerr.TransactionAbortableError, True, kerr.TransactionAbortableError),
        (kerr.ConcurrentTransactionsError, False, kerr.NotEnoughReplicasError),
        (kerr.NotCoordinatorError, True, kerr.NotEnoughReplicasError),
    ],
)
def test_the_leader_asks_the_coordinator_and_maps_its_answer(
    tmp_path: Path, answer: Any, abortable: bool, expected: Any
) -> None:
    from kraftlog.broker.replica._txn_verification import verify_transactional_batches

    asked: list[tuple[Any, ...]] = []

    async def verify(txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]], add: bool) -> dict[Any, Any]:
        asked.append((txn_id, pid, epoch, tuple(parts), add))
        return dict.fromkeys(parts, answer)

    partitions = _Partitions(tmp_path)
    req, payloads = _produce(add=True, abortable=abortable)
    out = asyncio.run(verify_transactional_batches(req, payloads, partitions, verify))
    assert asked == [("tx", 9, 0, (("t", 0),), True)]
    if expected is None:
        assert out.errors == {} and out.guards[(0, 0)] is partitions.state.verification_guards[9]
    else:
        assert type(out.errors[(0, 0)]) is expected and (0, 0) not in out.guards


def test_an_open_transaction_needs_no_question(tmp_path: Path) -> None:
    from kraftlog.broker.replica._txn_verification import verify_transactional_batches

    async def verify(*_args: Any) -> dict[Any, Any]:
        raise AssertionError("not asked")

    partitions = _Partitions(tmp_path)
    partitions.state.update(9, 0, 0, 0, 0, 0, 1, transactional=True)
    req, payloads = _produce()
    out = asyncio.run(verify_transactional_batches(req, payloads, partitions, verify))
    assert out.errors == {} and out.guards == {}
