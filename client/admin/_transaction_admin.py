"""`TransactionAdmin`: producers and transactions as an operator sees them (Kafka's Admin
``describeProducers``, and the kafka-transactions tool's calls as transactions arrive). Each call
goes to the partition's leader (found through the brokers' metadata, found again when leadership
moved) until ``request_timeout_ms`` runs out; errors are Kafka's typed errors."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from kraftlog.client._channels import timed_out
from kraftlog.client._coordinators import TRANSACTION_KEY, BrokerAdminClient, find_coordinator
from kraftlog.client._metadata import TopicPartition
from kraftlog.common import Done, Outcome, Retry
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2, txn_pb2

__all__ = ["TransactionAdmin", "ProducerState", "TransactionListing", "TransactionDescription"]


@dataclass(frozen=True)
class ProducerState:
    """One producer a partition's leader knows (Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: none
    current_transaction_start_offset: int  # -1: no open transaction


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int  # -1: no transaction open
    partitions: tuple[TopicPartition, ...]


class TransactionAdmin(BrokerAdminClient):
    """Producer and transaction administration through the brokers."""

    def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        """The producers the leader of ``topic``-``partition`` knows (DescribeProducers)."""
        tp = TopicPartition(topic, partition)
        request = broker_pb2.DescribeProducersRequest(
            topics=[broker_pb2.DescribeProducersRequest.Topic(name=topic, partition_indexes=[partition])]
        )
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        self._metadata.add_topics([topic])

        def no_answer(last: str) -> kerr.RequestTimedOutError:
            return kerr.RequestTimedOutError(f"DescribeProducers of {topic}-{partition}: no leader answered ({last})")

        def attempt(_timeout_s: float) -> Outcome:
            self._metadata.update([topic], self.request_timeout_ms)
            if self._metadata.partitions_for_topic(topic) is None:
                raise kerr.UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            leader = self._metadata.leader_for(tp)
            if leader is None:
                return Retry("no leader", error=no_answer(""))
            try:
                r = self._pool.stub(leader.address).DescribeProducers(request, timeout=10.0)
            except grpc.RpcError as err:
                return Retry(str(err.code()), error=no_answer(str(err.code())))
            p = r.topics[0].partitions[0]
            if p.error.code:
                error = kerr.error_for_code(p.error.code)
                if error.retriable:
                    self._metadata.request_update()
                    return Retry(p.error.name, error=error(p.error.message or p.error.name))
                raise error(p.error.message or p.error.name)
            return Done(
                [
                    ProducerState(
                        a.producer_id,
                        a.producer_epoch,
                        a.last_sequence,
                        a.last_timestamp,
                        a.coordinator_epoch,
                        a.current_txn_start_offset,
                    )
                    for a in p.active_producers
                ]
            )

        states: list[ProducerState] = self._retry(attempt, deadline, f"DescribeProducers of {topic}-{partition}")
        return states

    # ================================================================ transactions

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster (each broker lists those it coordinates)."""
        self._metadata.update(timeout_ms=self.request_timeout_ms)
        request = txn_pb2.ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids))
        out: dict[str, TransactionListing] = {}
        for broker in self._metadata.brokers():
            try:
                r = self._pool.txn_stub(broker.address).ListTransactions(request, timeout=10.0)
            except grpc.RpcError as err:
                raise kerr.CoordinatorNotAvailableError(
                    f"broker {broker.node_id} did not list its transactions"
                ) from err
            for t in r.transaction_states:
                out[t.transactional_id] = TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state, broker.node_id
                )
        return [out[k] for k in sorted(out)]

    def _coordinator(self, transactional_id: str, deadline: float) -> tuple[int, str]:
        return find_coordinator(self._pool, self._metadata, transactional_id, TRANSACTION_KEY, deadline)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """One transactional id, from its coordinator (DescribeTransactions)."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        request = txn_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id])

        def attempt(_timeout_s: float) -> Outcome:
            node, address = self._coordinator(transactional_id, deadline)
            try:
                r = self._pool.txn_stub(address).DescribeTransactions(request, timeout=10.0)
            except grpc.RpcError as err:
                return Retry(str(err.code()), error=timed_out(f"DescribeTransactions: {err.code()}", err))
            t = r.transaction_states[0]
            if t.error.code:
                error = kerr.error_for_code(t.error.code)
                if error.retriable:
                    return Retry(t.error.name, error=error(t.error.message or t.error.name))
                raise error(t.error.message or t.error.name)
            parts = tuple(sorted(TopicPartition(x.topic, p) for x in t.topics for p in x.partitions))
            return Done(
                TransactionDescription(
                    transactional_id,
                    node,
                    t.transaction_state,
                    t.producer_id,
                    t.producer_epoch,
                    t.transaction_timeout_ms,
                    t.transaction_start_time_ms,
                    parts,
                )
            )

        description: TransactionDescription = self._retry(attempt, deadline, "DescribeTransactions")
        return description

    def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an ABORT marker for a producer into one partition (kafka-transactions abort: a
        hanging transaction whose coordinator will not end it)."""
        tp = TopicPartition(topic, partition)
        W = broker_pb2.WriteTxnMarkersRequest
        request = W(
            timeout_ms=self.request_timeout_ms,
            markers=[
                W.Marker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=False,
                    coordinator_epoch=coordinator_epoch,
                    topics=[W.Topic(name=topic, partition_indexes=[partition])],
                )
            ],
        )
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        self._metadata.add_topics([topic])
        no_leader = kerr.RequestTimedOutError(f"no leader of {topic}-{partition} took the marker")

        def attempt(_timeout_s: float) -> Outcome:
            self._metadata.update([topic], self.request_timeout_ms)
            leader = self._metadata.leader_for(tp)
            if leader is None:
                return Retry("no leader", error=no_leader)
            try:
                r = self._pool.stub(leader.address).WriteTxnMarkers(request, timeout=self.request_timeout_ms / 1000.0)
            except grpc.RpcError as err:
                return Retry(str(err.code()), error=timed_out(f"WriteTxnMarkers: {err.code()}", err))
            error = r.markers[0].topics[0].partitions[0].error
            if not error.code:
                return Done(None)
            cls = kerr.error_for_code(error.code)
            if not cls.retriable:
                raise cls(error.message or error.name)
            return Retry(error.name, error=cls(error.message or error.name))

        self._retry(attempt, deadline, "WriteTxnMarkers")
