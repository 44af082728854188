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
sender thread once the record is done, as Java's ``Callback.onCompletion``.

Without idempotence (a later issue; ``enable_idempotence=True`` and a ``transactional_id`` are refused
with `UnsupportedConfigError` until then) a retry after a lost response can write a batch twice. With more
than one request in flight per broker, a retried batch can land after a later one, and, unlike
Kafka's one-request-at-a-time TCP connections, gRPC may hand concurrent requests to the broker in
any order: set ``max_in_flight_requests_per_connection=1`` when the order of a partition's records
matters, and dedupe downstream if duplicates do.

`AsyncProducer` (and `Producer.send_async`) wrap the same machinery for asyncio code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import grpc
import structlog

from kraftlog.common import backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.common.compression import CompressionType
from kraftlog.common.records import HEADER_SIZE, RecordBatch, RecordBatchBuilder, record_size_upper_bound
from kraftlog.proto import broker_pb2

from ._config import (
    BYTES_SERIALIZER,
    FALSE_ONLY,
    PLAINTEXT_ONLY,
    Unsupported,
    check_unsupported_properties,
    java_class_is,
    parse_bool,
    refuse,
)
from ._metadata import ChannelPool, ClusterMetadata, TopicPartition, grpc_error
from ._partitioner import DefaultPartitioner

__all__ = [
    "AsyncProducer",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "producer_config_from_properties",
]

_log = structlog.get_logger(__name__)

_MESSAGE_TOO_LARGE = kerr.MessageTooLargeError.error_code
_NO_TIMESTAMP = -1
Callback = Callable[[Any, BaseException | None], None]
HeadersArg = Mapping[str, Any] | Iterable[tuple[str, Any]] | None


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. ``offset`` is -1 with ``acks=0`` (nothing comes back);
    ``timestamp`` is the broker's append time for LogAppendTime topics, else the record's."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerClosedError(RuntimeError):
    """The producer was closed: no more sends, or records dropped by a forced close."""


# ------------------------------------------------------------------------------- configuration

_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def _acks(value: str | int) -> int:
    key = str(value).strip().lower()
    if key not in _ACKS:
        raise ValueError(f"acks must be all, -1, 0 or 1, not {value!r}")
    return _ACKS[key]


#: Kafka's producer config names -> `Producer` keyword and type.
_PRODUCER_PROPERTIES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "bootstrap.servers": ("bootstrap_servers", str),
    "acks": ("acks", str),
    "batch.size": ("batch_size", int),
    "linger.ms": ("linger_ms", int),
    "compression.type": ("compression_type", str),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "max.request.size": ("max_request_size", int),
    "buffer.memory": ("buffer_memory", int),
    "max.block.ms": ("max_block_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "allow.auto.create.topics": ("allow_auto_topic_creation", lambda v: v.strip().lower() == "true"),
    "enable.idempotence": ("enable_idempotence", lambda v: parse_bool(v, "enable.idempotence")),
    "transactional.id": ("transactional_id", lambda v: v.strip() or None),
}
_NO_IDEMPOTENCE = (
    "kraftlog has no idempotent producer yet (producer ids and sequence numbers arrive with the idempotence issue)"
)
_NO_TRANSACTIONS = "kraftlog has no transactions yet"
#: Settings whose feature is missing: accepted only with a value that keeps Kafka's meaning.
_UNSUPPORTED_PRODUCER_PROPERTIES = {
    "partitioner.class": Unsupported(
        java_class_is("DefaultPartitioner", "BuiltInPartitioner"),
        "Java partitioner classes cannot run here",
        "pass partitioner= to Producer",
    ),
    "partitioner.ignore.keys": Unsupported(
        FALSE_ONLY, "keyed records always go to murmur2(key)", "use partitioner.ignore.keys=false"
    ),
    "security.protocol": PLAINTEXT_ONLY,
    "key.serializer": BYTES_SERIALIZER,
    "value.serializer": BYTES_SERIALIZER,
}
#: Accepted and ignored: they change nothing a user of this client can observe.
_IGNORED_PRODUCER_PROPERTIES = {"client.id", "send.buffer.bytes", "receive.buffer.bytes"}


def producer_config_from_properties(props: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Kafka producer properties (``linger.ms=5``) -> `Producer` keywords, plus the names this
    client does not know (Kafka warns about those and goes on). Settings of features this client
    does not have yet (``enable.idempotence=true``, ``transactional.id``, ``security.protocol=SSL``,
    ...) raise `UnsupportedConfigError` (a ValueError) naming the setting."""
    check_unsupported_properties(props, _UNSUPPORTED_PRODUCER_PROPERTIES)
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in props.items():
        if key in _PRODUCER_PROPERTIES:
            name, conv = _PRODUCER_PROPERTIES[key]
            try:
                out[name] = conv(value)
            except ValueError:
                raise ValueError(f"invalid value {value!r} for {key}") from None
        elif key not in _IGNORED_PRODUCER_PROPERTIES and key not in _UNSUPPORTED_PRODUCER_PROPERTIES:
            unknown.append(key)
    return out, unknown


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None (or give a serializer), not {type(value).__name__}")


def _headers(headers: HeadersArg) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError(f"header keys are str, not {type(key).__name__}")
        out.append((key, _to_bytes(value, f"header {key!r}")))
    return out


class _CallablePartitioner:
    """Adapts ``fn(key_bytes, all_partitions, available_partitions) -> partition`` (kafka-python's
    shape) to the partitioner interface."""

    def __init__(self, fn: Callable[[bytes | None, list[int], list[int]], int]) -> None:
        self._fn = fn

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        return self._fn(key, list(range(num_partitions)), list(available))

    def on_new_batch(self, *args: Any) -> None:
        pass


# ---------------------------------------------------------------------------------- batches


class _Batch:
    """The records of one partition on their way to the broker."""

    __slots__ = (
        "tp",
        "builder",
        "thunks",
        "created",
        "attempts",
        "last_attempt",
        "retry_at",
        "payload",
        "sealed",
        "in_flight",
        "finished",
        "reserved",
        "done",
        "parent",
        "pending",
    )

    def __init__(self, tp: TopicPartition, codec: CompressionType, now: float) -> None:
        self.tp = tp
        self.builder: RecordBatchBuilder | None = RecordBatchBuilder(compression=codec)
        self.thunks: list[tuple[concurrent.futures.Future, Callback | None, int, int]] = []
        self.created = now
        self.attempts = 0
        self.last_attempt = now
        self.retry_at = 0.0
        self.payload: bytes | None = None
        self.sealed = False  # no more appends (drained or split); encoded by `close`
        self.in_flight = False
        self.finished = False
        self.reserved = 0  # bytes of buffer_memory held
        self.done = threading.Event()
        self.parent: _Batch | None = None
        self.pending = 0  # children still running after a split

    @property
    def record_count(self) -> int:
        return len(self.thunks)

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        size: int,
        batch_size: int,
        future: concurrent.futures.Future,
        callback: Callback | None,
    ) -> bool:
        builder = self.builder
        if builder is None or self.sealed:
            return False
        if self.thunks and builder.estimated_size_bytes + size > batch_size:
            return False
        delta = builder.append(timestamp, key, value, headers)
        self.thunks.append((future, callback, delta, timestamp))
        self.reserved += size
        return True

    def is_full(self, batch_size: int) -> bool:
        return self.builder is None or self.sealed or self.builder.estimated_size_bytes >= batch_size

    @property
    def size_estimate(self) -> int:
        """The encoded size (uncompressed until encoded: an upper bound for the request size)."""
        if self.payload is not None:
            return len(self.payload)
        assert self.builder is not None
        return self.builder.estimated_size_bytes

    def close(self) -> bytes:
        """Seal the batch (no more appends) and encode it once (outside the producer's lock)."""
        self.sealed = True
        if self.payload is None:
            assert self.builder is not None
            self.payload = self.builder.build()
            self.builder = None
        return self.payload


# --------------------------------------------------------------------------------- producer


class Producer:
    """A thread-safe producer; see the module docstring. Use as a context manager or call `close`."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: str | int = "all",
        batch_size: int = 16_384,
        linger_ms: int = 5,
        compression_type: str | int = "none",
        max_in_flight_requests_per_connection: int = 5,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        max_request_size: int = 1_048_576,
        buffer_memory: int = 33_554_432,
        max_block_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
        allow_auto_topic_creation: bool = True,
        enable_idempotence: bool = False,
        transactional_id: str | None = None,
        partitioner: Any = None,
        key_serializer: Callable[[Any], bytes | None] | None = None,
        value_serializer: Callable[[Any], bytes | None] | None = None,
    ) -> None:
        if enable_idempotence:
            raise refuse(
                "enable.idempotence",
                "true",
                _NO_IDEMPOTENCE,
                "use enable.idempotence=false (and max.in.flight.requests.per.connection=1 if order matters)",
            )
        if transactional_id:
            raise refuse("transactional.id", transactional_id, _NO_TRANSACTIONS, "leave transactional.id unset")
        self.acks = _acks(acks)
        self.batch_size = max(1, int(batch_size))
        self.linger_s = max(0, linger_ms) / 1000.0
        self.codec = CompressionType.of(compression_type)
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.max_in_flight = max_in_flight_requests_per_connection
        self.retries = max(0, retries)
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

        self._pool = ChannelPool(max_message_bytes=max(104_857_600, 2 * max_request_size))
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
    ) -> concurrent.futures.Future:
        """Queue a record; returns a future of its `RecordMetadata`.

        Blocks only while the topic's metadata is unknown or ``buffer_memory`` is used up (at most
        ``max_block_ms``). Errors Kafka's Java client reports through the future (unknown topic
        after ``max_block_ms``, a record larger than ``max_request_size``, ...) arrive the same way
        here, and the callback hears of them too; a closed producer raises `ProducerClosedError`.
        """
        if self._closing:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        key_bytes = _to_bytes(self._key_serializer(key) if self._key_serializer else key, "key")
        value_bytes = _to_bytes(self._value_serializer(value) if self._value_serializer else value, "value")
        hdrs = _headers(headers)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            self._do_send(topic, key_bytes, value_bytes, hdrs, partition, timestamp_ms, future, callback)
        except kerr.KafkaError as err:
            future.set_exception(err)
            self._run_callback(callback, None, err)
        return future

    def _do_send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        partition: int | None,
        timestamp_ms: int | None,
        future: concurrent.futures.Future,
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
        future: concurrent.futures.Future,
        callback: Callback | None,
        *,
        abort_on_new_batch: bool,
    ) -> str:
        """Append under the lock: ``appended``, ``full`` (appended, and a batch is ready by size),
        ``new`` (opened a batch) or ``abort`` (a new batch would be needed and the caller asked
        to be told first)."""
        if self._sender_done:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
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
        return future.result(timeout)

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
        self._metadata.close()
        if threading.current_thread() is not self._sender:
            self._pool.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ================================================================= the sender thread

    def _wake(self) -> None:
        with self._lock:
            self._woken = True
            self._lock.notify_all()

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._forced:
                        break
                    if (
                        self._closing
                        and not self._incomplete
                        and not any(self._in_flight.values())
                        and not self._completions
                    ):
                        break
                self._run_once()
        except Exception:  # a bug here must not leave callers waiting forever
            _log.exception("producer_sender_crashed")
            self._forced = True
        finally:
            self._abort_all(ProducerClosedError("Producer is closed forcefully."))

    def _run_once(self) -> None:
        self._metadata.maybe_update()
        with self._lock:
            completions = list(self._completions)
            self._completions.clear()
        for node_id, batches, future in completions:
            self._handle_response(node_id, batches, future)
        now = time.monotonic()
        sends: list[tuple[int, list[_Batch]]] = []
        with self._lock:
            expired = self._expire(now)
            ready, delay, unknown_leader = self._ready(now)
            if unknown_leader:
                self._metadata.request_update()
            for node_id in ready:
                batches = self._drain(node_id, now)
                if batches:
                    sends.append((node_id, batches))
        for batch, elapsed in expired:
            self._finish(
                batch,
                error=kerr.RequestTimedOutError(
                    f"Expiring {batch.record_count} record(s) for {batch.tp}:{elapsed:.0f} ms has passed "
                    f"since batch creation"
                ),
            )
        for node_id, batches in sends:
            self._send(node_id, batches)
        delay = min(delay, self._metadata.time_to_next_update())
        with self._lock:
            done = self._closing and not self._incomplete and not any(self._in_flight.values())
            if not self._woken and not self._completions and not sends and not done:
                self._lock.wait(min(delay, 1.0))
            self._woken = False

    def _expire(self, now: float) -> list[tuple[_Batch, float]]:
        out = []
        for dq in self._batches.values():
            while dq and not dq[0].in_flight and now - dq[0].created >= self.delivery_timeout_s:
                batch = dq.popleft()
                out.append((batch, (now - batch.created) * 1000))
        return out

    def _ready(self, now: float) -> tuple[set[int], float, bool]:
        ready: set[int] = set()
        delay = float("inf")
        unknown = False
        everything = self._closing or self._flushing > 0 or self._memory_waiters > 0
        for tp, dq in self._batches.items():
            if not dq:
                continue
            batch = dq[0]
            delay = min(delay, batch.created + self.delivery_timeout_s - now)
            leader = self._metadata.leader_for(tp)
            if leader is None:
                unknown = True
                continue
            if tp in self._muted or leader.node_id in ready:
                continue
            if self._awaiting_metadata(leader.node_id, now):
                delay = min(delay, 0.02)
                continue
            if batch.retry_at > now:
                delay = min(delay, batch.retry_at - now)
                continue
            if batch.attempts or everything or len(dq) > 1 or batch.is_full(self.batch_size):
                ready.add(leader.node_id)
                continue
            waited = now - batch.created
            if waited >= self.linger_s:
                ready.add(leader.node_id)
            else:
                delay = min(delay, self.linger_s - waited)
        return ready, max(0.0, delay), unknown

    def _awaiting_metadata(self, node_id: int, now: float) -> bool:
        """True while a node that did not answer waits for a metadata refresh newer than its failure."""
        entry = self._unreachable.get(node_id)
        if entry is None:
            return False
        version, failed_at = entry
        if self._metadata.version > version or now - failed_at >= self.request_timeout_ms / 1000.0:
            del self._unreachable[node_id]
            return False
        return True

    def _drain(self, node_id: int, now: float) -> list[_Batch]:
        if self._in_flight.get(node_id, 0) >= self.max_in_flight:
            return []
        tps = [
            tp
            for tp, dq in self._batches.items()
            if dq
            and tp not in self._muted
            and (leader := self._metadata.leader_for(tp)) is not None
            and leader.node_id == node_id
        ]
        if not tps:
            return []
        start = self._drain_start.get(node_id, 0) % len(tps)
        self._drain_start[node_id] = start + 1
        out: list[_Batch] = []
        size = 0
        for tp in tps[start:] + tps[:start]:
            dq = self._batches[tp]
            batch = dq[0]
            if batch.retry_at > now:
                continue
            batch_bytes = batch.size_estimate
            if out and size + batch_bytes > self.max_request_size:
                break
            batch.sealed = True  # encoded by `_send`, outside the lock
            dq.popleft()
            size += batch_bytes
            out.append(batch)
            if self.max_in_flight == 1:
                self._muted.add(tp)
        return out

    def _send(self, node_id: int, batches: list[_Batch]) -> None:
        broker = self._metadata.broker(node_id)
        for batch in batches:
            batch.close()
        now = time.monotonic()
        by_topic: dict[str, list[broker_pb2.ProduceRequest.PartitionData]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp.topic, []).append(
                broker_pb2.ProduceRequest.PartitionData(index=batch.tp.partition, records=batch.payload)
            )
        request = broker_pb2.ProduceRequest(
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topics=[broker_pb2.ProduceRequest.TopicData(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        with self._lock:
            for batch in batches:
                batch.attempts += 1
                batch.last_attempt = now
                batch.in_flight = True
            self._in_flight[node_id] = self._in_flight.get(node_id, 0) + 1
        try:
            if broker is None:
                raise kerr.LeaderNotAvailableError(f"broker {node_id} is no longer in the metadata")
            future = self._pool.stub(broker.address).Produce.future(request, timeout=self.request_timeout_ms / 1000.0)
        except Exception as err:  # a closed channel or a vanished broker: handled like a failed call
            with self._lock:
                self._in_flight[node_id] = max(0, self._in_flight.get(node_id, 0) - 1)
                for batch in batches:
                    batch.in_flight = False
                    self._muted.discard(batch.tp)
            self._metadata.request_update()
            error = (
                err if isinstance(err, kerr.KafkaError) else kerr.NetworkError(f"Produce to broker {node_id}: {err}")
            )
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        if self.acks == 0:  # nothing will come back that a record could wait for
            for batch in batches:
                self._finish(batch, base_offset=-1)
        future.add_done_callback(lambda f: self._on_response(node_id, batches, f))

    def _on_response(self, node_id: int, batches: list[_Batch], future: Any) -> None:
        with self._lock:
            self._completions.append((node_id, batches, future))
            self._woken = True
            self._lock.notify_all()

    def _handle_response(self, node_id: int, batches: list[_Batch], future: Any) -> None:
        with self._lock:
            self._in_flight[node_id] = max(0, self._in_flight.get(node_id, 0) - 1)
            for batch in batches:
                batch.in_flight = False
                self._muted.discard(batch.tp)
        try:
            response = future.result()
        except (grpc.RpcError, grpc.FutureCancelledError, concurrent.futures.CancelledError) as err:
            error = (
                grpc_error(err, f"Produce to broker {node_id}")
                if isinstance(err, grpc.RpcError)
                else kerr.NetworkError(f"Produce to broker {node_id} was cancelled")
            )
            broker = self._metadata.broker(node_id)
            version = self._metadata.request_update()
            if (
                broker is not None
                and isinstance(err, grpc.RpcError)
                and err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            ):
                # a leader cut off the network answers nothing until the deadline: ask another broker
                # who leads now before sending there again (Kafka's sender waits out the node's
                # reconnect backoff, during which the metadata refresh lands)
                self._pool.mark_unreachable(broker.address)
                with self._lock:
                    self._unreachable[node_id] = (version, time.monotonic())
            if self.acks == 0:
                # the records were already completed; like Kafka's client on a disconnect, learn
                # where the leader went instead of sending on into the void until metadata.max.age.ms
                _log.debug("produce_acks0_failed", node=node_id, error=error.error_name)
                return
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        except kerr.KafkaError as err:
            self._metadata.request_update()
            if self.acks == 0:
                return
            for batch in batches:
                self._retry_or_fail(batch, err)
            return
        if self.acks == 0:
            self._learn_from_acks0_response(node_id, batches, response)
            return
        if response.error.code:
            error = kerr.error_for_code(response.error.code)(response.error.message or None)
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        results = {(t.name, p.index): p for t in response.topics for p in t.partitions}
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None:
                self._retry_or_fail(
                    batch, kerr.UnknownServerError(f"the response of broker {node_id} has no result for {batch.tp}")
                )
                continue
            code = result.error.code
            if code == 0:
                self._finish(batch, base_offset=result.base_offset, log_append_time=result.log_append_time_ms)
                continue
            message = result.error.message or None
            if result.record_errors:
                details = "; ".join(f"batch_index {e.batch_index}: {e.message}" for e in result.record_errors)
                message = f"{message}: {details}" if message else details
            hint = result.current_leader if result.HasField("current_leader") else None
            context = {}
            if code == kerr.NotLeaderOrFollowerError.error_code and hint is not None and hint.leader_id >= 0:
                context = {"leader_id": hint.leader_id, "leader_epoch": hint.leader_epoch}
            error = kerr.error_for_code(code)(message, **context)
            if code == _MESSAGE_TOO_LARGE and batch.record_count > 1 and not self._forced:
                self._split(batch)
                continue
            moved = False
            if hint is not None and hint.leader_id >= 0:
                moved = self._metadata.apply_leader_hint(
                    batch.tp, hint.leader_id, hint.leader_epoch, response.node_endpoints
                )
            if isinstance(error, kerr.InvalidMetadataError) and not moved:
                self._metadata.request_update()
            self._retry_or_fail(batch, error, backoff=not moved)

    def _learn_from_acks0_response(self, node_id: int, batches: list[_Batch], response: Any) -> None:
        """acks=0: the records are done (never retried, as in Kafka), but an error answer still
        says the metadata is stale: take the leader hint (KIP-951) or refresh, so the next
        batches go to the new leader. (Kafka's broker closes the connection on such an error for
        the same purpose.)"""
        refresh = response.error.code != 0
        for t in response.topics:
            for p in t.partitions:
                if not p.error.code:
                    continue
                error_cls = kerr.error_for_code(p.error.code)
                hint = p.current_leader if p.HasField("current_leader") else None
                moved = (
                    hint is not None
                    and hint.leader_id >= 0
                    and self._metadata.apply_leader_hint(
                        TopicPartition(t.name, p.index), hint.leader_id, hint.leader_epoch, response.node_endpoints
                    )
                )
                if issubclass(error_cls, kerr.InvalidMetadataError) and not moved:
                    refresh = True
                _log.debug(
                    "produce_acks0_partition_error",
                    node=node_id,
                    tp=f"{t.name}-{p.index}",
                    error=error_cls.error_name,
                    moved=moved,
                    batches=len(batches),
                )
        if refresh:
            self._metadata.request_update()

    def _retry_or_fail(self, batch: _Batch, error: kerr.KafkaError, *, backoff: bool = True) -> None:
        now = time.monotonic()
        if batch.finished:
            return
        if (
            error.retriable
            and batch.attempts <= self.retries
            and not self._forced
            and now - batch.created < self.delivery_timeout_s
        ):
            delay = 0.0
            if backoff:
                delay = (
                    backoff_ms(
                        batch.attempts - 1,
                        base_ms=self.retry_backoff_ms,
                        max_ms=self.retry_backoff_max_ms,
                        rng=self._rng,
                    )
                    / 1000.0
                )
            _log.debug(
                "produce_retry",
                tp=str(batch.tp),
                attempt=batch.attempts,
                error=error.error_name,
                delay_ms=round(delay * 1000),
            )
            with self._lock:
                batch.retry_at = now + delay
                self._batches.setdefault(batch.tp, deque()).appendleft(batch)
                self._woken = True
            return
        self._finish(batch, error=error)

    def _split(self, batch: _Batch) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: retry it as two halves."""
        records = RecordBatch(batch.close()).records()
        half = len(records) // 2
        children = []
        for chunk, thunks in ((records[:half], batch.thunks[:half]), (records[half:], batch.thunks[half:])):
            child = _Batch(batch.tp, self.codec, batch.created)
            assert child.builder is not None
            for rec, (future, callback, _delta, ts) in zip(chunk, thunks, strict=False):
                delta = child.builder.append(rec.timestamp_ms, rec.key, rec.value, rec.headers)
                child.thunks.append((future, callback, delta, ts))
            child.parent = batch
            child.attempts = batch.attempts
            children.append(child)
        children[0].reserved, batch.reserved = batch.reserved, 0
        with self._lock:
            batch.pending = len(children)
            self._incomplete.discard(batch)
            dq = self._batches.setdefault(batch.tp, deque())
            for child in reversed(children):
                dq.appendleft(child)
                child.close()
                self._incomplete.add(child)
            self._woken = True

    def _finish(
        self, batch: _Batch, *, base_offset: int = -1, log_append_time: int = -1, error: BaseException | None = None
    ) -> None:
        """Complete every record of ``batch`` (success or ``error``) and release its memory."""
        with self._lock:
            if batch.finished:
                return
            batch.finished = True
            self._incomplete.discard(batch)
            self._buffer_used -= batch.reserved
            batch.reserved = 0
            self._lock.notify_all()
        tp = batch.tp
        for future, callback, delta, ts in batch.thunks:
            metadata = None
            if error is None:
                metadata = RecordMetadata(
                    tp.topic,
                    tp.partition,
                    base_offset + delta if base_offset >= 0 else -1,
                    log_append_time if log_append_time != _NO_TIMESTAMP else ts,
                )
            try:
                if error is None:
                    future.set_result(metadata)
                else:
                    future.set_exception(error)
            except concurrent.futures.InvalidStateError:  # the caller cancelled it
                pass
            self._run_callback(callback, metadata, error)
        with self._lock:
            batch.done.set()
            parent = batch.parent
            while parent is not None:
                parent.pending -= 1
                if parent.pending > 0:
                    break
                parent.done.set()
                parent = parent.parent

    @staticmethod
    def _run_callback(callback: Callback | None, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if callback is None:
            return
        try:
            callback(metadata, error)
        except Exception:
            _log.exception("producer_callback_failed")

    def _abort_all(self, error: BaseException) -> None:
        with self._lock:
            self._sender_done = True
            pending = list(self._incomplete)
            for dq in self._batches.values():
                dq.clear()
        for batch in pending:
            self._finish(batch, error=error)


async def _send_from_loop(
    producer: Producer,
    topic: str,
    value: Any,
    key: Any,
    headers: HeadersArg,
    partition: int | None,
    timestamp_ms: int | None,
    callback: Callback | None,
) -> concurrent.futures.Future:
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
    ) -> asyncio.Future:
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
        return await future

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
