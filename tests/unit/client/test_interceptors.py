"""Producer and consumer interceptors (issue 25, Kafka's ProducerInterceptor / ConsumerInterceptor)
over a `MockTransport` broker: where each method runs, in which order, with what, and that an
interceptor that raises breaks nothing."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from kraftlog.client import (
    Consumer,
    ConsumerInterceptor,
    OffsetAndMetadata,
    Producer,
    ProducerInterceptor,
    ProducerRecord,
    RecordMetadata,
    TopicPartition,
)
from kraftlog.client._transport import MockTransport
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatch
from tests.unit.client.test_clients_mock_transport import BROKER, FakeBroker

SENDER_THREAD = "kraftlog-producer-sender"


class Recording:
    """A producer interceptor that appends a suffix to the value and records what it saw."""

    def __init__(self, suffix: bytes, log: list[str]) -> None:
        self.suffix = suffix
        self.log = log
        self.acks: list[tuple[RecordMetadata, BaseException | None, str]] = []
        self.closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.log.append(f"send{self.suffix.decode()}:{record.value!r}")
        return dataclasses.replace(record, value=record.value + self.suffix)

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        self.acks.append((metadata, exception, threading.current_thread().name))

    def close(self) -> None:
        self.closed = True


class Broken:
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("on_send broke")

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        raise RuntimeError("on_acknowledgement broke")

    def close(self) -> None:
        raise RuntimeError("close broke")


def test_producer_interceptors_chain_in_order_before_serialization_and_partitioning() -> None:
    broker = FakeBroker({"t": 2})
    transport = MockTransport(broker)
    log: list[str] = []
    first, second = Recording(b"-a", log), Recording(b"-b", log)
    assert isinstance(first, ProducerInterceptor)
    serialized: list[Any] = []

    def serializer(value: Any) -> bytes:
        serialized.append(value)
        return bytes(value)

    class ToPartitionOne(Recording):
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return dataclasses.replace(super().on_send(record), partition=1, key=b"k")

    third = ToPartitionOne(b"-c", log)
    callbacks: list[Any] = []
    with Producer(
        BROKER, transport=transport, linger_ms=0, value_serializer=serializer, interceptors=[first, second, third]
    ) as producer:
        future = producer.send("t", b"v", callback=lambda m, e: callbacks.append((m, e)))
        metadata = future.result(10)
        producer.flush(10)
    transport.close()
    assert log == ["send-a:b'v'", "send-b:b'v-a'", "send-c:b'v-a-b'"]
    assert serialized == [b"v-a-b-c"]  # the serializer saw what the last interceptor returned
    assert (metadata.partition, metadata.offset) == (1, 0)
    [value] = [r.value for b in broker.logs[("t", 1)] for r in RecordBatch(b)]
    assert value == b"v-a-b-c"
    for interceptor in (first, second, third):
        assert interceptor.acks == [(metadata, None, SENDER_THREAD)]
        assert interceptor.closed
    assert callbacks == [(metadata, None)]


def test_every_ack_reaches_the_interceptors_failures_included() -> None:
    broker = FakeBroker({"t": 1})
    transport = MockTransport(broker)
    counting = Recording(b"", [])
    callbacks: list[Any] = []
    with Producer(BROKER, transport=transport, linger_ms=0, max_request_size=1000, interceptors=[counting]) as producer:
        ok = producer.send("t", b"small", partition=0)
        too_large = producer.send("t", b"x" * 2000, callback=lambda m, e: callbacks.append((m, e)))
        producer.flush(10)
    transport.close()
    assert ok.result(10).offset == 0
    with pytest.raises(kerr.MessageTooLargeError):
        too_large.result(10)
    assert len(counting.acks) == 2
    failed = [(m, e) for m, e, _thread in counting.acks if e is not None]
    assert len(failed) == 1
    metadata, error = failed[0]
    assert isinstance(error, kerr.MessageTooLargeError)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("t", -1, -1)  # refused before partitioning
    assert callbacks == [(None, error)]  # the send's callback gets what it always got


def test_an_interceptor_that_raises_breaks_nothing() -> None:
    broker = FakeBroker({"t": 1})
    transport = MockTransport(broker)
    after = Recording(b"-ok", [])
    with capture_logs() as logs:
        with Producer(BROKER, transport=transport, linger_ms=0, interceptors=[Broken(), after]) as producer:
            metadata = producer.send_sync("t", b"v", partition=0, timeout=10)
            producer.flush(10)
    transport.close()
    [value] = [r.value for b in broker.logs[("t", 0)] for r in RecordBatch(b)]
    assert value == b"v-ok"  # the original record went on to the next interceptor
    assert after.acks == [(metadata, None, SENDER_THREAD)] and after.closed
    failures = [e for e in logs if e["event"] == "interceptor_failed"]
    assert {e["method"] for e in failures} == {"on_send", "on_acknowledgement", "close"}
    assert all(e["interceptor"].endswith("Broken") for e in failures)


def test_something_else_than_an_interceptor_is_refused() -> None:
    with pytest.raises(TypeError, match="ProducerInterceptor"):
        Producer(BROKER, transport=MockTransport(FakeBroker({})), interceptors=[object()])


class Upper:
    """A consumer interceptor that rewrites values and records commits."""

    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []
        self.closed = False

    def on_consume(self, records: list[Any]) -> list[Any]:
        return [r._replace(value=r.value.upper()) for r in records]

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.commits.append(dict(offsets))

    def close(self) -> None:
        self.closed = True


class BrokenConsumerSide:
    def on_consume(self, records: list[Any]) -> list[Any]:
        raise RuntimeError("on_consume broke")

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        raise RuntimeError("on_commit broke")

    def close(self) -> None:
        pass


class _Group:
    """The consumer's group membership reduced to commit: succeeds, or refuses once."""

    def __init__(self) -> None:
        self.commits: list[dict[Any, Any]] = []
        self.refuse = False

    def commit(self, payload: dict[Any, Any], timeout_s: float) -> None:
        if self.refuse:
            raise kerr.RebalanceInProgressError("rebalancing")
        self.commits.append(payload)


def _poll_all(consumer: Consumer, count: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(50):  # bounded: each poll waits at most 100 ms
        got.extend(consumer.poll(timeout_ms=100))
        if len(got) >= count:
            break
    return got


def test_consumer_interceptors_rewrite_records_and_see_successful_commits() -> None:
    broker = FakeBroker({"t": 1})
    transport = MockTransport(broker)
    with Producer(BROKER, transport=transport, linger_ms=0) as producer:
        for value in (b"a", b"b", b"c"):
            producer.send_sync("t", value, partition=0, timeout=10)
    upper = Upper()
    assert isinstance(upper, ConsumerInterceptor)
    consumer = Consumer(
        BROKER, transport=transport, auto_offset_reset="earliest", interceptors=[BrokenConsumerSide(), upper]
    )
    group = _Group()
    try:
        consumer.assign([("t", 0)])
        with capture_logs() as logs:
            got = _poll_all(consumer, 3)
        assert [r.value for r in got] == [b"A", b"B", b"C"]  # what the application sees
        assert consumer.position(("t", 0)) == 3
        assert any(e["event"] == "interceptor_failed" and e["method"] == "on_consume" for e in logs)
        consumer._group = group  # type: ignore[assignment]
        group.refuse = True
        with pytest.raises(kerr.RebalanceInProgressError):
            consumer.commit({("t", 0): 2})
        assert upper.commits == []  # only a successful commit reaches on_commit
        group.refuse = False
        with capture_logs() as logs:
            consumer.commit({("t", 0): OffsetAndMetadata(3, "m")})
        assert upper.commits == [{TopicPartition("t", 0): OffsetAndMetadata(3, "m", -1)}]
        assert any(e["event"] == "interceptor_failed" and e["method"] == "on_commit" for e in logs)
    finally:
        consumer._group = None
        consumer.close()
        transport.close()
    assert upper.closed
