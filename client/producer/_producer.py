"""`Producer`: batching, compression, partitioning, retries and futures, as Kafka's Java producer.

``send`` serializes a record, picks its partition (`DefaultPartitioner` unless given: murmur2 of the
key, sticky for records without one), and appends it to the partition's open batch in the
accumulator; it returns a `concurrent.futures.Future` of `RecordMetadata` at once. A sender thread
turns batches into ProduceRequests:

- a partition's first batch is *ready* when it is full (``batch_size`` bytes, uncompressed), has
  waited ``linger_ms``, or a `flush`/`close` is in progress, or ``send`` is blocked on
  ``buffer_memory``; any ready partition makes its leader broker ready, and one request to that
  broker then carries the first batch of every partition it leads (up to ``max_request_size``);
- at most ``max_in_flight_requests_per_connection`` requests are outstanding per broker; with 1,
  a partition is muted while its batch is in flight, so retries cannot reorder records;
- a retriable error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, an unreachable
  broker, ...) puts the batch back at the head of its partition with exponential backoff
  (``retry_backoff_ms`` doubling up to ``retry_backoff_max_ms``), at most ``retries`` times and never
  after ``delivery_timeout_ms`` from the batch's creation. Errors meaning stale metadata ask for a
  refresh, except NOT_LEADER_OR_FOLLOWER carrying the new leader (KIP-951): the hint updates the
  cache in place and the batch goes to the new leader at once;
- MESSAGE_TOO_LARGE on a batch of several records splits it in two and retries the halves;
- with ``acks=0`` a record is done once its request is sent (offset -1, never retried), but a failed
  call (the leader died: the node is then skipped until newer metadata) or an error answer (leader
  hint or refresh) still updates the metadata, as Kafka's client does on a disconnect, so a stream
  follows a moved leader instead of sending into the void until ``metadata_max_age_ms``.

A failed record's future raises the typed `common.errors` exception (``err.retriable`` tells whether
Kafka would call it transient); the optional ``callback(metadata, exception)`` of `send` runs on the
sender thread once the record is done, as Java's ``Callback.onCompletion``. ``interceptors=[...]``
(`client.producer._interceptors`, rules in `client._interceptors`): Kafka's ProducerInterceptors,
``on_send`` in ``send`` before the record is serialized and partitioned, ``on_acknowledgement`` for
every record on the sender thread.

Idempotence (``enable_idempotence``, on by default as in Kafka 3+ whenever ``acks=all``,
``retries`` > 0 and at most 5 requests in flight; see `client.producer._producer_idempotence`): the producer
gets a producer id from a broker (InitProducerId) and numbers each partition's batches, so the
leader writes a retried batch once and in order, even across a leader change. Setting it
explicitly with ``acks`` other than all, ``retries=0`` or more than 5 in flight is refused, as
Kafka refuses it. Without it a retry after a lost response can write a batch twice, and with more
than one request in flight a retried batch can land after a later one (gRPC may hand concurrent
requests to the broker in any order). With a ``transactional_id`` the producer is transactional
(`client.producer._producer_txn`): ``init_transactions``, then ``begin_transaction`` ... ``commit_transaction``
or ``abort_transaction``; read_committed consumers see a transaction's records only once it
commits.

`AsyncProducer` (and `Producer.send_async`) wrap the same machinery for asyncio code. The keyword
defaults are `PRODUCER_CONFIG`'s (`client._config`, Kafka's names on common's ConfigDef);
``transport=`` (a `MockTransport`) replaces the network, for unit tests without servers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kraftlog.client._channels import ChannelPool
from kraftlog.client._config import PRODUCER_CONFIG as _P
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client._security import client_security
from kraftlog.client.producer._interceptors import ProducerInterceptor, ProducerInterceptors, ProducerRecord
from kraftlog.client.producer._partitioner import DefaultPartitioner
from kraftlog.client.producer._producer_idempotence import IdempotenceState
from kraftlog.client.producer._producer_sender import _ProducerSender
from kraftlog.client.producer._producer_txn import _ProducerTransactions
from kraftlog.client.producer._producer_types import (
    Callback,
    HeadersArg,
    InterceptedCallback,
    ProducerClosedError,
    RecordMetadata,
    _acks,
    _Batch,
    _CallablePartitioner,
    _headers,
    _to_bytes,
    producer_config_from_properties,
    run_callback,
)
from kraftlog.common import errors as kerr
from kraftlog.common.records import HEADER_SIZE, record_size_upper_bound
from kraftlog.common.records.compression import CompressionType

__all__ = [
    "AsyncProducer",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "producer_config_from_properties",
]


# ------------------------------------------------------------------------------- configuration


# ---------------------------------------------------------------------------------- batches


# --------------------------------------------------------------------------------- producer


def _idempotence(enabled: bool | None, acks: int, max_in_flight: int, retries: int) -> IdempotenceState | None:
    """Kafka's rule: on unless turned off; a conflicting setting turns the default off, and is
    refused when idempotence was asked for explicitly."""
    conflicts = []
    if acks != -1:
        conflicts.append("acks must be all (-1)")
    if max_in_flight > 5:
        conflicts.append("max.in.flight.requests.per.connection must be at most 5")
    if retries <= 0:
        conflicts.append("retries must be greater than 0")
    if enabled and conflicts:
        raise ValueError(f"enable.idempotence=true: {'; '.join(conflicts)}")
    if enabled is False or conflicts:
        return None
    return IdempotenceState()


class Producer(_ProducerSender, _ProducerTransactions):
    """A thread-safe producer; see the module docstring. Use as a context manager or call `close`."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: str | int = _P.default("acks"),
        batch_size: int = _P.default("batch.size"),
        linger_ms: int = _P.default("linger.ms"),
        compression_type: str | int = _P.default("compression.type"),
        max_in_flight_requests_per_connection: int = _P.default("max.in.flight.requests.per.connection"),
        retries: int = _P.default("retries"),
        retry_backoff_ms: int = _P.default("retry.backoff.ms"),
        retry_backoff_max_ms: int = _P.default("retry.backoff.max.ms"),
        delivery_timeout_ms: int = _P.default("delivery.timeout.ms"),
        request_timeout_ms: int = _P.default("request.timeout.ms"),
        max_request_size: int = _P.default("max.request.size"),
        buffer_memory: int = _P.default("buffer.memory"),
        max_block_ms: int = _P.default("max.block.ms"),
        metadata_max_age_ms: int = _P.default("metadata.max.age.ms"),
        allow_auto_topic_creation: bool = _P.default("allow.auto.create.topics"),
        enable_idempotence: bool | None = _P.default("enable.idempotence"),
        transactional_id: str | None = _P.default("transactional.id"),
        transaction_timeout_ms: int = _P.default("transaction.timeout.ms"),
        partitioner: Any = None,
        key_serializer: Callable[[Any], bytes | None] | None = None,
        value_serializer: Callable[[Any], bytes | None] | None = None,
        interceptors: Sequence[ProducerInterceptor] | None = None,
        security_protocol: str = "PLAINTEXT",
        **ssl: Any,
    ) -> None:
        security = client_security(security_protocol, **ssl)  # kafka-python's ssl_*/sasl_* arguments
        self._interceptors = ProducerInterceptors(interceptors)
        if transactional_id is not None and not transactional_id:
            raise ValueError("transactional_id must not be empty")
        if transactional_id and enable_idempotence is False:
            raise ValueError("transactional.id needs enable.idempotence (a transactional producer is idempotent)")
        self.transactional_id = transactional_id or None
        self.transaction_timeout_ms = transaction_timeout_ms
        self.acks = _acks(acks)
        self.batch_size = max(1, int(batch_size))
        self.linger_s = max(0, linger_ms) / 1000.0
        self.codec = CompressionType.of(compression_type)
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.max_in_flight = max_in_flight_requests_per_connection
        self.retries = max(0, retries)
        self._idempotence = _idempotence(
            True if self.transactional_id else enable_idempotence,
            self.acks,
            max_in_flight_requests_per_connection,
            self.retries,
        )
        if self._idempotence is not None and self.transactional_id:
            self._idempotence.transactional = True
        self._txn_init_fields()
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be at least linger_ms + "
                f"request_timeout_ms ({linger_ms + request_timeout_ms})"
            )
        self.delivery_timeout_s = delivery_timeout_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        if partitioner is None:
            partitioner = DefaultPartitioner()
        elif not hasattr(partitioner, "partition") and callable(partitioner):
            partitioner = _CallablePartitioner(partitioner)
        self._partitioner = partitioner
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._rng = random.Random()

        self._pool = ChannelPool(max_message_bytes=max(104_857_600, 2 * max_request_size), security=security)
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            self._pool,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=self.retry_backoff_max_ms,
            request_timeout_ms=request_timeout_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
            on_update=self._wake,
        )

        self._lock = threading.Condition(threading.Lock())
        self._batches: dict[TopicPartition, deque[_Batch]] = {}
        self._incomplete: set[_Batch] = set()
        self._in_flight: dict[int, int] = {}
        self._muted: set[TopicPartition] = set()
        # node -> (metadata version, time) of a produce that got no answer at all: no batch goes to
        # that node again until a newer metadata answer says it still leads (or a request timeout)
        self._unreachable: dict[int, tuple[int, float]] = {}
        self._completions: deque[tuple[int, list[_Batch], Any]] = deque()
        self._drain_start: dict[int, int] = {}
        self._buffer_used = 0
        self._memory_waiters = 0
        self._flushing = 0
        self._woken = False
        self._closing = False
        self._forced = False
        self._closed = False
        self._sender_done = False
        self._sender = threading.Thread(target=self._run, name="kraftlog-producer-sender", daemon=True)
        self._sender.start()

    @property
    def metadata(self) -> ClusterMetadata:
        return self._metadata

    # ================================================================= the caller's side

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (waiting up to ``max_block_ms`` for metadata)."""
        return self._metadata.wait_for_topic(topic, self.max_block_ms)

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; returns a future of its `RecordMetadata`.

        Blocks only while the topic's metadata is unknown or ``buffer_memory`` is used up (at most
        ``max_block_ms``). Errors Kafka's Java client reports through the future (unknown topic
        after ``max_block_ms``, a record larger than ``max_request_size``, ...) arrive the same way
        here, and the callback hears of them too; a closed producer raises `ProducerClosedError`.
        """
        if self._closing:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        if self._interceptors:  # before serialization and partitioning, as Kafka's
            record = self._interceptors.on_send(ProducerRecord(topic, value, key, headers, partition, timestamp_ms))
            topic, value, key, headers = record.topic, record.value, record.key, record.headers
            partition, timestamp_ms = record.partition, record.timestamp_ms
            callback = InterceptedCallback(self._interceptors, callback, topic, partition)
        try:
            key_bytes = _to_bytes(self._key_serializer(key) if self._key_serializer else key, "key")
            value_bytes = _to_bytes(self._value_serializer(value) if self._value_serializer else value, "value")
            hdrs = _headers(headers)
        except Exception as err:  # raised to the caller; the interceptors still hear of the record
            if isinstance(callback, InterceptedCallback):
                self._interceptors.on_acknowledgement(RecordMetadata(topic, callback.partition, -1, -1), err)
            raise
        future: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        try:
            self._do_send(topic, key_bytes, value_bytes, hdrs, partition, timestamp_ms, future, callback)
        except kerr.KafkaError as err:
            future.set_exception(err)
            run_callback(callback, None, err)
        return future

    def _do_send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        partition: int | None,
        timestamp_ms: int | None,
        future: concurrent.futures.Future[RecordMetadata],
        callback: Callback | None,
    ) -> None:
        deadline = time.monotonic() + self.max_block_ms / 1000.0
        parts = self._metadata.partitions_for_topic(topic)
        if parts is None or (partition is not None and partition not in parts):
            self._metadata.add_topics([topic])
            parts = self._metadata.wait_for_topic(topic, self.max_block_ms, partition=partition)
        size = record_size_upper_bound(key, value, headers)
        if size + HEADER_SIZE > self.max_request_size:
            raise kerr.MessageTooLargeError(
                f"The message is {size + HEADER_SIZE} bytes when serialized which is larger than "
                f"{self.max_request_size}, which is the value of the max.request.size configuration."
            )
        if size > self.buffer_memory:
            raise kerr.MessageTooLargeError(
                f"The message is {size} bytes when serialized which is larger than the total memory "
                f"buffer you have configured with the buffer.memory configuration."
            )
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        num = len(parts)
        chosen = partition
        if chosen is None:
            available = self._metadata.available_partitions_for_topic(topic)
            chosen = self._partitioner.partition(topic, key, num, available)
        if isinstance(callback, InterceptedCallback):
            callback.partition = chosen
        abort = partition is None
        outcome = None
        with self._lock:  # the common case: memory is free, one trip through the lock
            if not self._buffer_used or self._buffer_used + size <= self.buffer_memory:
                self._buffer_used += size
                outcome = self._append(
                    TopicPartition(topic, chosen),
                    timestamp,
                    key,
                    value,
                    headers,
                    size,
                    future,
                    callback,
                    abort_on_new_batch=abort,
                )
        if outcome is None:
            self._reserve(size, deadline)
            with self._lock:
                outcome = self._append(
                    TopicPartition(topic, chosen),
                    timestamp,
                    key,
                    value,
                    headers,
                    size,
                    future,
                    callback,
                    abort_on_new_batch=abort,
                )
        if outcome == "abort":  # KIP-480: a new batch is due, let the sticky partition move on
            available = self._metadata.available_partitions_for_topic(topic)
            self._partitioner.on_new_batch(topic, num, available, chosen)
            chosen = self._partitioner.partition(topic, key, num, available)
            if isinstance(callback, InterceptedCallback):
                callback.partition = chosen
            with self._lock:
                outcome = self._append(
                    TopicPartition(topic, chosen),
                    timestamp,
                    key,
                    value,
                    headers,
                    size,
                    future,
                    callback,
                    abort_on_new_batch=False,
                )

    def _reserve(self, size: int, deadline: float) -> None:
        with self._lock:
            while self._buffer_used and self._buffer_used + size > self.buffer_memory:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    raise kerr.RequestTimedOutError(
                        f"Failed to allocate memory within the configured max blocking time {self.max_block_ms} ms."
                    )
                self._memory_waiters += 1
                self._woken = True
                self._lock.notify_all()
                try:
                    self._lock.wait(remaining)
                finally:
                    self._memory_waiters -= 1
            self._buffer_used += size

    def _append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        size: int,
        future: concurrent.futures.Future[RecordMetadata],
        callback: Callback | None,
        *,
        abort_on_new_batch: bool,
    ) -> str:
        """Append under the lock: ``appended``, ``full`` (appended, and a batch is ready by size),
        ``new`` (opened a batch) or ``abort`` (a new batch would be needed and the caller asked
        to be told first)."""
        if self._sender_done:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        if self.transactional_id is not None:
            self._txn_check_send(tp)
        dq = self._batches.get(tp)
        if dq is None:
            dq = self._batches[tp] = deque()
        if dq:
            last = dq[-1]
            if last.try_append(timestamp, key, value, headers, size, self.batch_size, future, callback):
                if len(dq) > 1 or last.is_full(self.batch_size):
                    if not self._woken:
                        self._woken = True
                        self._lock.notify_all()
                    return "full"
                return "appended"
        if abort_on_new_batch:
            return "abort"
        batch = _Batch(tp, self.codec, time.monotonic())
        batch.try_append(timestamp, key, value, headers, size, self.batch_size, future, callback)
        dq.append(batch)
        self._incomplete.add(batch)
        self._woken = True
        self._lock.notify_all()
        return "new"

    def send_sync(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement (raises the typed error on failure)."""
        future = self.send(topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms)
        metadata: RecordMetadata = future.result(timeout)
        return metadata

    async def send_async(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record from asyncio code and await its `RecordMetadata`."""
        future = await _send_from_loop(self, topic, value, key, headers, partition, timestamp_ms, None)
        return await asyncio.wrap_future(future)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued so far at once (ignoring ``linger_ms``) and wait until each of those
        records is acknowledged or has failed. Raises `RequestTimedOutError` if ``timeout`` (seconds)
        passes first."""
        with self._lock:
            self._flushing += 1
            pending = list(self._incomplete)
            self._woken = True
            self._lock.notify_all()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.done.wait(remaining):
                    raise kerr.RequestTimedOutError(f"flush did not complete within {timeout} s")
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop. After ``timeout`` seconds (None: no limit; 0: at once) the
        records still pending fail with `ProducerClosedError`."""
        if self._closed:
            return
        with self._lock:
            self._closing = True
            self._woken = True
            self._lock.notify_all()
        if threading.current_thread() is self._sender:
            timeout = 0  # from a callback: waiting for ourselves would never end
        else:
            self._sender.join(timeout)
        if self._sender.is_alive() or timeout == 0:
            with self._lock:
                self._forced = True
                self._woken = True
                self._lock.notify_all()
            if threading.current_thread() is not self._sender:
                self._sender.join()
        self._closed = True
        self._interceptors.close()  # every record is settled by now: no acknowledgement follows
        self._metadata.close()
        if threading.current_thread() is not self._sender:
            self._pool.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ================================================================= the sender thread


async def _send_from_loop(
    producer: Producer,
    topic: str,
    value: Any,
    key: Any,
    headers: HeadersArg,
    partition: int | None,
    timestamp_ms: int | None,
    callback: Callback | None,
) -> concurrent.futures.Future[RecordMetadata]:
    """`Producer.send` without blocking the event loop: directly when the topic's metadata is known
    and memory is free, else in the default executor."""
    parts = producer.metadata.partitions_for_topic(topic)
    if (
        parts is not None
        and (partition is None or partition in parts)
        and producer._buffer_used < producer.buffer_memory // 2
    ):
        return producer.send(
            topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms, callback=callback
        )
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        None,
        lambda: producer.send(
            topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms, callback=callback
        ),
    )


class AsyncProducer:
    """The producer for asyncio code: the same batching and sender thread, awaitable results.

    ``await producer.send(...)`` queues a record and returns an `asyncio.Future` of its
    `RecordMetadata` (await it for the acknowledgement); ``await producer.send_and_wait(...)`` does
    both. Takes `Producer`'s keywords.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str], **config: Any) -> None:
        self._producer = Producer(bootstrap_servers, **config)

    @property
    def producer(self) -> Producer:
        return self._producer

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        future = await _send_from_loop(self._producer, topic, value, key, headers, partition, timestamp_ms, callback)
        return asyncio.wrap_future(future)

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        future = await self.send(topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms)
        metadata: RecordMetadata = await future
        return metadata

    async def partitions_for(self, topic: str) -> list[int]:
        return await asyncio.get_running_loop().run_in_executor(None, self._producer.partitions_for, topic)

    async def flush(self, timeout: float | None = None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._producer.flush, timeout)

    async def close(self, timeout: float | None = None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._producer.close, timeout)

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
