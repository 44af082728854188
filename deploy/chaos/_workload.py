"""The chaos workload: acks=all producers (one thread per partition, one request in flight, so the
log must keep each partition's sequence in order) and a consumer that tails the topic meanwhile.

After the run, `read_back` reads every partition from its start to its end offset with a fresh
consumer: that read, not the tailing consumer, is what the checker compares acknowledgements with.
Every client here connects with the target's `ChaosSecurity` (``security``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from kraftlog.client import Consumer, Producer
from kraftlog.deploy.chaos._checker import Ack, ReadRecord, encode_value
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["Workload", "read_back"]

_log = structlog.get_logger("deploy.chaos")


class Workload:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        records_per_s_per_partition: float = 50.0,
        request_timeout_ms: int = 2_500,
        clock: Callable[[], float] = time.monotonic,
        client: str = "kraftlog",
        kafka_bootstrap_servers: str = "",
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        """``client``: kraftlog's own (gRPC, ``bootstrap_servers``) or ``kafka-python`` (the
        brokers' Kafka listeners, ``kafka_bootstrap_servers``)."""
        self.topic = topic
        self.partitions = partitions
        self._interval_s = 1.0 / records_per_s_per_partition
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acks: list[Ack] = []
        self.failures = 0
        self.consumed = 0
        self._producer: Any
        self._consumer: Any
        if client == "kafka-python":
            from kraftlog.deploy.chaos._kafka_clients import KafkaPythonConsumer, KafkaPythonProducer

            self._producer = KafkaPythonProducer(
                kafka_bootstrap_servers,
                request_timeout_ms=request_timeout_ms,
                delivery_timeout_ms=60_000,
                security=security,
            )
            self._consumer = KafkaPythonConsumer(kafka_bootstrap_servers, security=security)
        elif client != "kraftlog":
            raise ValueError(f"unknown client {client!r}")
        else:
            self._kraftlog_clients(bootstrap_servers, request_timeout_ms, security=security)
        self._threads = [
            threading.Thread(target=self._produce, args=(p,), name=f"chaos-produce-{p}", daemon=True)
            for p in range(partitions)
        ]
        self._threads.append(threading.Thread(target=self._consume, name="chaos-consume", daemon=True))

    def _kraftlog_clients(self, bootstrap_servers: str, request_timeout_ms: int, *, security: ChaosSecurity) -> None:
        self._producer = Producer(
            bootstrap_servers,
            acks="all",
            linger_ms=0,
            max_in_flight_requests_per_connection=1,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=60_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            max_block_ms=30_000,
            **security.client_kwargs(),
        )
        self._consumer = Consumer(
            bootstrap_servers,
            auto_offset_reset="earliest",
            request_timeout_ms=5_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            **security.client_kwargs(),
        )

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout_s: float = 90.0) -> None:
        """Stop sending; every send already started finishes (acknowledged or failed) first."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._producer.close(timeout=10)
        self._consumer.close()

    def ack_times(self) -> dict[int, list[float]]:
        with self._lock:
            out: dict[int, list[float]] = {p: [] for p in range(self.partitions)}
            for ack in self.acks:
                out[ack.partition].append(ack.time_s)
            return out

    def acknowledged(self) -> int:
        with self._lock:
            return len(self.acks)

    def _produce(self, partition: int) -> None:
        sequence = 0
        while not self._stop.is_set():
            sequence += 1
            started = self._clock()
            try:
                meta = self._producer.send_sync(
                    self.topic, encode_value(partition, sequence), partition=partition, timeout=90
                )
            except Exception as err:  # acknowledged nothing: the record may or may not be in the log
                with self._lock:
                    self.failures += 1
                _log.debug("chaos_produce_failed", partition=partition, sequence=sequence, error=repr(err))
                continue
            with self._lock:
                self.acks.append(Ack(partition, sequence, meta.offset, self._clock()))
            self._stop.wait(max(0.0, self._interval_s - (self._clock() - started)))

    def _consume(self) -> None:
        try:
            self._consumer.assign([(self.topic, p) for p in range(self.partitions)])
            self._consumer.seek_to_beginning(*[(self.topic, p) for p in range(self.partitions)])
            while not self._stop.is_set():
                try:
                    records = self._consumer.poll(timeout_ms=500)
                except Exception as err:  # retriable during faults; the final read is the verdict
                    _log.debug("chaos_consume_failed", error=repr(err))
                    self._stop.wait(0.2)
                    continue
                with self._lock:
                    self.consumed += len(records)
        except Exception:
            _log.warning("chaos_consumer_stopped", exc_info=True)


def read_back(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    timeout_s: float = 60.0,
    *,
    isolation_level: str = "read_uncommitted",
    security: ChaosSecurity = PLAINTEXT,
) -> list[ReadRecord]:
    """Every record of the topic, from each partition's start to its end offset (bounded); with
    ``isolation_level="read_committed"`` the records of aborted transactions are skipped, and the end
    is the last stable offset (every transaction of the topic must have ended)."""
    consumer = Consumer(
        bootstrap_servers,
        auto_offset_reset="earliest",
        request_timeout_ms=10_000,
        isolation_level=isolation_level,
        **security.client_kwargs(),
    )
    try:
        tps = [(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps, timeout_ms=30_000).items()}
        out: list[ReadRecord] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position((topic, p)) < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read back of {topic} did not reach the end offsets {ends} in {timeout_s} s")
            for rec in consumer.poll(timeout_ms=500):
                if rec.offset < ends[rec.partition]:
                    out.append(ReadRecord(rec.partition, rec.offset, rec.value))
        return out
    finally:
        consumer.close()
