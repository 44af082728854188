"""TRANSACTION_ABORTABLE (error 120, KIP-890) in kraftlog's transactional producer, as Kafka's
client treats it (issue 28): the producer asks for it (Produce and TxnOffsetCommit say the client
takes it, as Produce v11+ and TxnOffsetCommit v4+ do), and wherever it comes (a batch, the
offsets, AddPartitionsToTxn, EndTxn) the transaction can only be aborted: ``commit_transaction``
refuses, ``abort_transaction`` recovers and the next transaction commits. Over a `MockTransport`."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlog.client import Producer
from kraftlog.client._transport import MockTransport
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2, errors_pb2, group_pb2, txn_pb2
from tests.unit.client.test_clients_mock_transport import BROKER, FakeBroker

ABORTABLE = kerr.TransactionAbortableError.error_code


def _error(cls: type[kerr.KafkaError]) -> errors_pb2.Error:
    return errors_pb2.Error(code=cls.error_code, name=cls.error_name)


class TxnBroker(FakeBroker):
    """The fake broker, also the coordinator of every transactional id and group. ``refuse``
    names the calls answered TRANSACTION_ABORTABLE once each (a Produce only when the request
    says the client takes it, else INVALID_TXN_STATE, as Kafka's leader answers)."""

    def __init__(self, refuse: set[str]) -> None:
        super().__init__({"t": 2})
        self.refuse = set(refuse)
        self.epoch = 0
        self.requests: list[tuple[str, Any]] = []

    def __call__(self, address: str, method: str, request: Any) -> Any:
        name = method.split("/")[-1]
        with self.lock:
            self.requests.append((name, request))
            return getattr(self, name)(request)

    def _refused(self, name: str) -> bool:
        if name in self.refuse:
            self.refuse.discard(name)
            return True
        return False

    def InitProducerId(self, request: broker_pb2.InitProducerIdRequest) -> broker_pb2.InitProducerIdResponse:
        self.epoch += 1
        return broker_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=self.epoch)

    def FindCoordinator(self, request: group_pb2.FindCoordinatorRequest) -> group_pb2.FindCoordinatorResponse:
        C = group_pb2.FindCoordinatorResponse.Coordinator
        return group_pb2.FindCoordinatorResponse(coordinators=[C(key=request.keys[0], node_id=1, host="b1", port=9092)])

    def AddPartitionsToTxn(self, request: txn_pb2.AddPartitionsToTxnRequest) -> txn_pb2.AddPartitionsToTxnResponse:
        R = txn_pb2.AddPartitionsToTxnResponse
        if self._refused("AddPartitionsToTxn"):
            return R(error=_error(kerr.TransactionAbortableError))
        return R(
            results=[
                R.Topic(name=t.name, partitions=[R.Partition(partition_index=p) for p in t.partitions])
                for t in request.topics
            ]
        )

    def AddOffsetsToTxn(self, request: txn_pb2.AddOffsetsToTxnRequest) -> txn_pb2.AddOffsetsToTxnResponse:
        if self._refused("AddOffsetsToTxn"):
            return txn_pb2.AddOffsetsToTxnResponse(error=_error(kerr.TransactionAbortableError))
        return txn_pb2.AddOffsetsToTxnResponse()

    def TxnOffsetCommit(self, request: group_pb2.TxnOffsetCommitRequest) -> group_pb2.TxnOffsetCommitResponse:
        P = group_pb2.OffsetCommitResponse
        refused = self._refused("TxnOffsetCommit")
        error = (
            (kerr.TransactionAbortableError if request.abortable_error else kerr.InvalidTxnStateError)
            if refused
            else None
        )
        return group_pb2.TxnOffsetCommitResponse(
            topics=[
                P.Topic(
                    name=t.name,
                    partitions=[
                        P.Partition(partition_index=p.partition_index, error=_error(error) if error else None)
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    def EndTxn(self, request: txn_pb2.EndTxnRequest) -> txn_pb2.EndTxnResponse:
        if self._refused("EndTxn"):
            return txn_pb2.EndTxnResponse(error=_error(kerr.TransactionAbortableError), producer_id=-1)
        self.epoch += 1
        return txn_pb2.EndTxnResponse(producer_id=7, producer_epoch=self.epoch)

    def Produce(self, request: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        if not self._refused("Produce"):
            return super().Produce(request)
        R = broker_pb2.ProduceResponse
        error = _error(kerr.TransactionAbortableError if request.abortable_error else kerr.InvalidTxnStateError)
        return R(
            topics=[
                R.TopicResponse(
                    name=t.name,
                    partitions=[R.PartitionResponse(index=p.index, error=error, base_offset=-1) for p in t.partitions],
                )
                for t in request.topics
            ]
        )

    def ends(self) -> list[bool]:
        return [r.committed for name, r in self.requests if name == "EndTxn"]


def run(refuse: set[str], first: Any) -> tuple[TxnBroker, list[BaseException]]:
    """``first(producer)`` runs in the first transaction and answers what it raised; then the
    transaction must refuse to commit, abort, and a second transaction (a record and offsets)
    commits."""
    broker = TxnBroker(refuse)
    transport = MockTransport(broker)
    raised: list[BaseException] = []
    producer = Producer(
        BROKER,
        transport=transport,
        transactional_id="app",
        linger_ms=0,
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        max_block_ms=3000,
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        raised.extend(first(producer))
        with pytest.raises(kerr.KafkaError) as refused:
            producer.commit_transaction(5)
        raised.append(refused.value)
        producer.abort_transaction(5)
        producer.begin_transaction()
        producer.send("t", b"second", partition=0)
        producer.send_offsets_to_transaction({("t", 0): 1}, "group", timeout=5)
        producer.commit_transaction(5)
    finally:
        producer.close(timeout=2)
        transport.close()
    return broker, raised


def test_a_batch_answered_transaction_abortable_fails_and_the_transaction_aborts() -> None:
    def first(producer: Producer) -> list[BaseException]:
        future = producer.send("t", b"first", partition=0)
        with pytest.raises(kerr.KafkaError) as failed:
            future.result(5)
        return [failed.value]

    broker, raised = run({"Produce"}, first)
    assert isinstance(raised[0], kerr.TransactionAbortableError)  # main: INVALID_TXN_STATE (not asked for)
    produces = [r for name, r in broker.requests if name == "Produce"]
    assert produces and all(r.abortable_error for r in produces)
    assert broker.ends()[-2:] == [False, True]


def test_offsets_answered_transaction_abortable_make_the_transaction_abortable() -> None:
    """Main let the transaction commit without the offsets the application meant to commit."""

    def first(producer: Producer) -> list[BaseException]:
        producer.send("t", b"first", partition=0).result(5)
        with pytest.raises(kerr.TransactionAbortableError) as failed:
            producer.send_offsets_to_transaction({("t", 0): 1}, "group", timeout=5)
        return [failed.value]

    broker, raised = run({"TxnOffsetCommit"}, first)
    assert isinstance(raised[1], kerr.TransactionAbortableError)  # commit refuses, naming why
    commits = [r for name, r in broker.requests if name == "TxnOffsetCommit"]
    assert all(r.abortable_error for r in commits)
    assert broker.ends() == [False, True]


def test_add_offsets_answered_transaction_abortable_make_the_transaction_abortable() -> None:
    def first(producer: Producer) -> list[BaseException]:
        with pytest.raises(kerr.TransactionAbortableError) as failed:
            producer.send_offsets_to_transaction({("t", 0): 1}, "group", timeout=5)
        return [failed.value]

    broker, _raised = run({"AddOffsetsToTxn"}, first)
    assert broker.ends() == [True]  # nothing was added to the first transaction: no EndTxn for it


def test_add_partitions_answered_transaction_abortable_fails_the_batches() -> None:
    """Main took the answer for neither success nor refusal and asked again for good: the
    batch never went out and the commit's flush ran out of time."""

    def first(producer: Producer) -> list[BaseException]:
        future = producer.send("t", b"first", partition=1)
        with pytest.raises(kerr.TransactionAbortableError) as failed:
            future.result(5)
        return [failed.value]

    broker, raised = run({"AddPartitionsToTxn"}, first)
    assert isinstance(raised[1], kerr.TransactionAbortableError)
    assert broker.ends() == [True]  # the partition was never added: no EndTxn for the first transaction
    assert not any(b"first" in batch for batch in broker.logs[("t", 1)])


def test_end_txn_answered_transaction_abortable_is_aborted_and_the_producer_goes_on() -> None:
    def first(producer: Producer) -> list[BaseException]:
        producer.send("t", b"first", partition=0).result(5)
        with pytest.raises(kerr.TransactionAbortableError) as failed:
            producer.commit_transaction(5)
        return [failed.value]

    broker, raised = run({"EndTxn"}, first)
    assert isinstance(raised[1], kerr.TransactionAbortableError)
    assert broker.ends() == [True, False, True]
