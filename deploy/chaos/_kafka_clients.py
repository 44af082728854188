"""The chaos workload through a real Kafka client (``kraftlog chaos run --client kafka-python``):
kafka-python's producer and consumer against the brokers' Kafka-protocol listeners, behind the
few calls `deploy.chaos._workload.Workload` makes of kraftlog's own client. The checker still
reads the topic back with kraftlog's client, so the verdict does not depend on the client tried.
Both connect with the target's `ChaosSecurity.kafka_kwargs` (the Kafka listener is SSL on a
secured cluster).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import structlog

from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["CLIENTS", "KafkaPythonConsumer", "KafkaPythonProducer"]

#: the producer/consumer the data workload runs: kraftlog's gRPC client, or kafka-python over the
#: Kafka listener
CLIENTS = ("kraftlog", "kafka-python")

_log = structlog.get_logger("deploy.chaos")


class _Sent(NamedTuple):
    offset: int


class KafkaPythonProducer:
    """acks=all, idempotent, one request in flight: the settings of the kraftlog workload producer."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            max_in_flight_requests_per_connection=1,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=50,
            max_block_ms=30_000,
            **security.kafka_kwargs(),
        )

    def send_sync(self, topic: str, value: bytes, *, partition: int, timeout: float) -> _Sent:
        meta = self._producer.send(topic, value=value, partition=partition).get(timeout=timeout)
        return _Sent(meta.offset)

    def close(self, timeout: float) -> None:
        """Close within about ``timeout`` seconds even if sends are still in flight.

        kafka-python's ``close(timeout)`` raises KafkaTimeoutError when its flush does not finish,
        and leaves the producer open, where Java's producer force-closes. A chaos run closes its
        producer while a fault may hold a broker down, so the sends still pending are aborted (they
        were never acknowledged: the checker counts them as failed sends, never as lost records)."""
        from kafka.errors import KafkaTimeoutError

        try:
            self._producer.close(timeout=timeout)
        except KafkaTimeoutError:
            _log.warning("chaos_producer_force_closed", timeout_s=timeout)
            self._producer._sender.force_close()  # aborts the incomplete batches, so flush ends
            self._producer.close(timeout=timeout)


class _Record(NamedTuple):
    partition: int
    offset: int
    value: bytes


class KafkaPythonConsumer:
    """A consumer without a group that tails assigned partitions."""

    def __init__(self, bootstrap_servers: str, *, security: ChaosSecurity = PLAINTEXT) -> None:
        from kafka import KafkaConsumer

        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=30_000,
            retry_backoff_ms=50,
            **security.kafka_kwargs(),
        )

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        from kafka import TopicPartition

        self._consumer.assign([TopicPartition(t, p) for t, p in partitions])

    def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        from kafka import TopicPartition

        self._consumer.seek_to_beginning(*[TopicPartition(t, p) for t, p in partitions])

    def poll(self, timeout_ms: int) -> list[Any]:
        batches = self._consumer.poll(timeout_ms=timeout_ms)
        return [_Record(m.partition, m.offset, m.value) for records in batches.values() for m in records]

    def close(self) -> None:
        self._consumer.close()
