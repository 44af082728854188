"""`Producer` and `Consumer` over a `MockTransport`: a one-broker cluster in a dict, no server.

The fake broker keeps each partition's batches in memory, assigns offsets as a leader does
(rewriting the base offset, which the CRC does not cover), and answers Metadata, InitProducerId,
Produce, ListOffsets and Fetch. Waits are bounded polls of the clients' own APIs.
"""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from kraftlog.client import Consumer, Producer
from kraftlog.client._transport import MockTransport, rpc_error
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatch, iter_batches, rewrite_offset_and_epoch
from kraftlog.proto import broker_pb2, errors_pb2

BROKER = "b1:9092"
NOT_LEADER = kerr.NotLeaderOrFollowerError.error_code


class FakeBroker:
    """Broker 1, leader of every partition of ``topics`` (name -> partition count)."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.logs: dict[tuple[str, int], list[bytes]] = {(t, p): [] for t, n in topics.items() for p in range(n)}
        self.lock = threading.Lock()
        self.refuse_produce = 0  # answer this many Produce partitions with NOT_LEADER_OR_FOLLOWER first

    def end_offset(self, tp: tuple[str, int]) -> int:
        batches = self.logs[tp]
        return RecordBatch(batches[-1]).next_offset if batches else 0

    def __call__(self, address: str, method: str, request: Any) -> Any:
        assert address == BROKER, address
        handler = getattr(self, method.removeprefix("BrokerService/"))
        with self.lock:
            return handler(request)

    def Metadata(self, request: broker_pb2.MetadataRequest) -> broker_pb2.MetadataResponse:
        R = broker_pb2.MetadataResponse
        return R(
            brokers=[broker_pb2.NodeEndpoint(node_id=1, host="b1", port=9092)],
            cluster_id="fake",
            controller_id=1,
            topics=[
                R.Topic(
                    name=name,
                    topic_id="AAAAAAAAAAAAAAAAAAAAAQ",
                    partitions=[
                        R.Partition(partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1])
                        for p in range(count)
                    ],
                )
                for name, count in self.topics.items()
            ],
        )

    def InitProducerId(self, request: broker_pb2.InitProducerIdRequest) -> broker_pb2.InitProducerIdResponse:
        return broker_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=0)

    def Produce(self, request: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        R = broker_pb2.ProduceResponse
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                if self.refuse_produce > 0:
                    self.refuse_produce -= 1
                    error = errors_pb2.Error(code=NOT_LEADER, name="NOT_LEADER_OR_FOLLOWER")
                    results.append(R.PartitionResponse(index=part.index, error=error, base_offset=-1))
                    continue
                tp = (topic.name, part.index)
                base = self.end_offset(tp)
                next_offset = base
                for _pos, batch in iter_batches(part.records):
                    buf = bytearray(batch.to_bytes())
                    rewrite_offset_and_epoch(buf, 0, next_offset, 0)
                    self.logs[tp].append(bytes(buf))
                    next_offset = RecordBatch(bytes(buf)).next_offset
                results.append(R.PartitionResponse(index=part.index, base_offset=base, log_append_time_ms=-1))
            topics.append(R.TopicResponse(name=topic.name, partitions=results))
        return R(topics=topics)

    def ListOffsets(self, request: broker_pb2.ListOffsetsRequest) -> broker_pb2.ListOffsetsResponse:
        R = broker_pb2.ListOffsetsResponse
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                offset = 0 if p.timestamp == -2 else self.end_offset((topic.name, p.partition_index))
                parts.append(R.Partition(partition_index=p.partition_index, offset=offset, timestamp=-1))
            topics.append(R.Topic(name=topic.name, partitions=parts))
        return R(topics=topics)

    def Fetch(self, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        R = broker_pb2.FetchResponse
        responses = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                data = b"".join(b for b in self.logs[tp] if RecordBatch(b).last_offset >= p.fetch_offset)
                end = self.end_offset(tp)
                parts.append(
                    R.PartitionData(
                        partition_index=p.partition,
                        high_watermark=end,
                        last_stable_offset=end,
                        log_start_offset=0,
                        records=data,
                        preferred_read_replica=-1,
                    )
                )
            responses.append(R.FetchableTopicResponse(topic=topic.topic, partitions=parts))
        return R(responses=responses)


@pytest.fixture
def broker() -> FakeBroker:
    return FakeBroker({"t": 2})


def test_producer_sends_batches_and_gets_offsets(broker: FakeBroker) -> None:
    transport = MockTransport(broker)
    with Producer(BROKER, transport=transport, linger_ms=0) as producer:
        first = producer.send_sync("t", b"v0", partition=1, timeout=10)
        second = producer.send_sync("t", b"v1", key=b"k", partition=1, timeout=10)
    transport.close()
    assert (first.topic, first.partition, first.offset) == ("t", 1, 0)
    assert second.offset == 1
    assert [r.value for b in broker.logs[("t", 1)] for r in RecordBatch(b)] == [b"v0", b"v1"]
    assert "BrokerService/InitProducerId" in transport.methods()  # idempotent by default (acks=all)
    stamped = RecordBatch(broker.logs[("t", 1)][0])
    assert stamped.producer_id == 7 and stamped.base_sequence == 0


def test_producer_retries_not_leader_then_succeeds(broker: FakeBroker) -> None:
    broker.refuse_produce = 1
    transport = MockTransport(broker)
    with Producer(BROKER, transport=transport, linger_ms=0, retry_backoff_ms=1, retry_backoff_max_ms=5) as producer:
        metadata = producer.send_sync("t", b"again", partition=0, timeout=10)
    transport.close()
    assert metadata.offset == 0
    assert transport.methods().count("BrokerService/Produce") == 2
    assert len(broker.logs[("t", 0)]) == 1  # written once


def test_producer_gives_a_typed_error_when_no_broker_answers() -> None:
    def handler(address: str, method: str, request: Any) -> Any:
        raise rpc_error(grpc.StatusCode.UNAVAILABLE)

    transport = MockTransport(handler)
    producer = Producer(BROKER, transport=transport, max_block_ms=300, retry_backoff_ms=1, retry_backoff_max_ms=5)
    try:
        with pytest.raises(kerr.KafkaError):
            producer.send_sync("t", b"x", timeout=5)
    finally:
        producer.close(timeout=1)
        transport.close()


def test_consumer_reads_what_the_producer_wrote(broker: FakeBroker) -> None:
    transport = MockTransport(broker)
    with Producer(BROKER, transport=transport, linger_ms=0) as producer:
        for i in range(5):
            producer.send_sync("t", f"v{i}".encode(), partition=0, timeout=10)
    consumer = Consumer(BROKER, transport=transport, auto_offset_reset="earliest")
    try:
        consumer.assign([("t", 0)])
        got: list[Any] = []
        for _ in range(50):  # bounded: each poll waits at most 100 ms
            got.extend(consumer.poll(timeout_ms=100))
            if len(got) >= 5:
                break
        assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(5)]
        assert consumer.position(("t", 0)) == 5
        assert consumer.end_offsets([("t", 0)]) == {("t", 0): 5}
    finally:
        consumer.close()
        transport.close()
    assert "BrokerService/Fetch" in transport.methods()


def test_consumer_seek_to_beginning_and_latest(broker: FakeBroker) -> None:
    transport = MockTransport(broker)
    with Producer(BROKER, transport=transport, linger_ms=0, acks=1) as producer:
        for _ in range(3):
            producer.send_sync("t", b"x", partition=1, timeout=10)
    consumer = Consumer(BROKER, transport=transport)  # latest by default
    try:
        consumer.assign([("t", 1)])
        assert consumer.position(("t", 1)) == 3
        consumer.seek_to_beginning(("t", 1))
        assert consumer.position(("t", 1)) == 0
    finally:
        consumer.close()
        transport.close()
