"""GroupAdmin and TransactionAdmin over a `MockTransport`: coordinator lookup, retriable answers
retried with the one retry policy, the last answer or error at the deadline."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlog.client import MockTransport, TransactionAdmin
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2, errors_pb2, group_pb2, txn_pb2

LOADING = kerr.CoordinatorLoadInProgressError


class Cluster:
    """One broker (b1:9092) that coordinates everything; DescribeTransactions answers from a list."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.slept: list[float] = []

    def __call__(self, address: str, method: str, request: Any) -> Any:
        if method == "BrokerService/Metadata":
            return broker_pb2.MetadataResponse(brokers=[broker_pb2.NodeEndpoint(node_id=1, host="b1", port=9092)])
        if method == "GroupService/FindCoordinator":
            coordinator = group_pb2.FindCoordinatorResponse.Coordinator(
                key=request.keys[0], node_id=1, host="b1", port=9092
            )
            return group_pb2.FindCoordinatorResponse(coordinators=[coordinator])
        assert method == "TxnService/DescribeTransactions" and address == "b1:9092"
        code = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        R = txn_pb2.DescribeTransactionsResponse
        error = errors_pb2.Error(code=code, name=kerr.error_for_code(code).error_name) if code else None
        return R(
            transaction_states=[
                R.TransactionState(
                    error=error,
                    transactional_id=request.transactional_ids[0],
                    transaction_state="Ongoing",
                    producer_id=9,
                    producer_epoch=2,
                    topics=[R.Topic(topic="t", partitions=[1, 0])],
                )
            ]
        )


def make(cluster: Cluster, **kwargs: Any) -> tuple[TransactionAdmin, MockTransport]:
    transport = MockTransport(cluster)
    admin = TransactionAdmin("b1:9092", transport=transport, **kwargs)
    admin._sleep = cluster.slept.append  # no real waits
    return admin, transport


def test_describe_transaction_retries_a_loading_coordinator() -> None:
    cluster = Cluster([LOADING.error_code, LOADING.error_code, 0])
    admin, transport = make(cluster)
    try:
        description = admin.describe_transaction("tx")
    finally:
        admin.close()
    assert (description.state, description.producer_id, description.coordinator) == ("Ongoing", 9, 1)
    assert [tp.partition for tp in description.partitions] == [0, 1]
    assert transport.methods().count("TxnService/DescribeTransactions") == 3
    assert len(cluster.slept) == 2 and 0.08 <= cluster.slept[0] <= 0.12 and cluster.slept[1] > cluster.slept[0] * 1.2


def test_describe_transaction_raises_a_fatal_error_at_once() -> None:
    cluster = Cluster([kerr.TransactionalIdNotFoundError.error_code])
    admin, transport = make(cluster)
    try:
        with pytest.raises(kerr.TransactionalIdNotFoundError):
            admin.describe_transaction("tx")
    finally:
        admin.close()
    assert transport.methods().count("TxnService/DescribeTransactions") == 1 and cluster.slept == []
