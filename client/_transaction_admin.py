"""`TransactionAdmin`: producers and transactions as an operator sees them (Kafka's Admin
``describeProducers``, and the kafka-transactions tool's calls as transactions arrive). Each call
goes to the partition's leader (found through the brokers' metadata, found again when leadership
moved) until ``request_timeout_ms`` runs out; errors are Kafka's typed errors."""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

from ._metadata import BrokerAdminClient, TopicPartition

__all__ = ["TransactionAdmin", "ProducerState"]


@dataclass(frozen=True)
class ProducerState:
    """One producer a partition's leader knows (Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: none
    current_transaction_start_offset: int  # -1: no open transaction


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
        last = ""
        while time.monotonic() < deadline:
            self._metadata.update([topic], self.request_timeout_ms)
            if self._metadata.partitions_for_topic(topic) is None:
                raise kerr.UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            leader = self._metadata.leader_for(tp)
            if leader is None:
                time.sleep(0.1)
                continue
            try:
                r = self._pool.stub(leader.address).DescribeProducers(request, timeout=10.0)
            except grpc.RpcError as err:
                last = str(err.code())
                time.sleep(0.1)
                continue
            p = r.topics[0].partitions[0]
            if p.error.code:
                error = kerr.error_for_code(p.error.code)
                if error.retriable and time.monotonic() < deadline:
                    last = p.error.name
                    self._metadata.request_update()
                    time.sleep(0.1)
                    continue
                raise error(p.error.message or p.error.name)
            return [
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
        raise kerr.RequestTimedOutError(f"DescribeProducers of {topic}-{partition}: no leader answered ({last})")
