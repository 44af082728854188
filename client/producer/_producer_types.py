"""The producer's vocabulary and its per-partition batches: `RecordMetadata`, the Kafka producer config
keys it accepts or refuses, and `_Batch` (records on their way to one partition's leader)
(see `client.producer._producer`). The config keys themselves are `PRODUCER_CONFIG` (`client._config`).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import structlog

from kraftlog.client._config import PRODUCER_CONFIG
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.producer._producer_idempotence import Stamp
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatch, RecordBatchBuilder, set_producer_fields
from kraftlog.common.records.compression import CompressionType

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


_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def _acks(value: str | int) -> int:
    key = str(value).strip().lower()
    if key not in _ACKS:
        raise ValueError(f"acks must be all, -1, 0 or 1, not {value!r}")
    return _ACKS[key]


def producer_config_from_properties(props: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Kafka producer properties (``linger.ms=5``) -> `Producer` keywords, plus the names this
    client does not know (Kafka warns about those and goes on), parsed by `PRODUCER_CONFIG`.
    Settings this client cannot honour (``partitioner.class``, ``security.protocol=SSL`` as a
    property, ...) raise `UnsupportedConfigError` (a ValueError) naming the setting."""
    return PRODUCER_CONFIG.from_properties(props)


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


class InterceptedCallback:
    """A send's callback behind the producer's interceptors (Kafka's InterceptorCallback): every
    outcome goes to `ProducerInterceptors.on_acknowledgement` first -- a failure with a
    `RecordMetadata` of the record's topic, its partition once chosen (else -1) and offset -1 --
    then to the send's own callback, unchanged. ``partition`` is set by ``send`` once chosen."""

    __slots__ = ("interceptors", "callback", "topic", "partition")

    def __init__(self, interceptors: Any, callback: Callback | None, topic: str, partition: int | None) -> None:
        self.interceptors = interceptors
        self.callback = callback
        self.topic = topic
        self.partition = partition if partition is not None else -1

    def __call__(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        seen = metadata if metadata is not None else RecordMetadata(self.topic, self.partition, -1, _NO_TIMESTAMP)
        self.interceptors.on_acknowledgement(seen, error)
        run_callback(self.callback, metadata, error)


def run_callback(callback: Callback | None, metadata: RecordMetadata | None, error: BaseException | None) -> None:
    """Run a send's callback, if any: one that raises is logged, never propagated (the sender
    thread and the caller's thread both run callbacks)."""
    if callback is None:
        return
    try:
        callback(metadata, error)
    except Exception:
        _log.exception("producer_callback_failed")


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
        "stamp",
    )

    def __init__(self, tp: TopicPartition, codec: CompressionType, now: float) -> None:
        self.tp = tp
        self.builder: RecordBatchBuilder | None = RecordBatchBuilder(compression=codec)
        self.thunks: list[tuple[concurrent.futures.Future[RecordMetadata], Callback | None, int, int]] = []
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
        self.stamp: Stamp | None = None  # an idempotent producer's (producer id, epoch, base sequence)

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
        future: concurrent.futures.Future[RecordMetadata],
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

    def restamp(self, stamp: Stamp, *, transactional: bool) -> None:
        """Take an idempotent producer's producer id, epoch and base sequence (a new stamp, or a
        batch from an older epoch stamped anew), in the builder or in the encoded bytes."""
        self.stamp = stamp
        if self.builder is not None:
            self.builder.producer_id = stamp.producer_id
            self.builder.producer_epoch = stamp.epoch
            self.builder.base_sequence = stamp.base_sequence
            self.builder.is_transactional = transactional
        elif self.payload is not None:
            buf = bytearray(self.payload)
            set_producer_fields(buf, 0, len(buf), stamp.producer_id, stamp.epoch, stamp.base_sequence)
            self.payload = bytes(buf)

    def halves(self, codec: CompressionType) -> list[_Batch]:
        """This batch's records as two sealed-to-be children (MESSAGE_TOO_LARGE for a batch of
        several records): each keeps its records' futures, callbacks and timestamps, and, when
        stamped, its part of the parent's sequence range, in order, and whether it is part of a
        transaction (a half sent outside it would be visible to read_committed after an abort)."""
        parent = RecordBatch(self.close())
        records = parent.records()
        half = len(records) // 2
        children: list[_Batch] = []
        for chunk, thunks in ((records[:half], self.thunks[:half]), (records[half:], self.thunks[half:])):
            child = _Batch(self.tp, codec, self.created)
            assert child.builder is not None
            for rec, (future, callback, _delta, ts) in zip(chunk, thunks, strict=False):
                delta = child.builder.append(rec.timestamp_ms, rec.key, rec.value, rec.headers)
                child.thunks.append((future, callback, delta, ts))
            child.parent = self
            child.attempts = self.attempts
            if self.stamp is not None:
                offset = 0 if not children else half
                child.stamp = Stamp(self.stamp.producer_id, self.stamp.epoch, self.stamp.base_sequence + offset)
                child.builder.producer_id = child.stamp.producer_id
                child.builder.producer_epoch = child.stamp.epoch
                child.builder.base_sequence = child.stamp.base_sequence
                child.builder.is_transactional = parent.is_transactional
            children.append(child)
        return children

    def settle(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Complete every record's future and run its callback: its offset (``base_offset`` plus
        its delta) and time (the broker's LogAppendTime, else its own), or ``error``. A future the
        caller cancelled is skipped; a callback that raises is logged, not propagated."""
        tp = self.tp
        for future, callback, delta, ts in self.thunks:
            metadata: RecordMetadata | None = None
            if error is None:
                metadata = RecordMetadata(
                    tp.topic,
                    tp.partition,
                    base_offset + delta if base_offset >= 0 else -1,
                    log_append_time if log_append_time != _NO_TIMESTAMP else ts,
                )
            try:
                if metadata is not None:
                    future.set_result(metadata)
                else:
                    future.set_exception(error)
            except concurrent.futures.InvalidStateError:  # the caller cancelled it
                pass
            run_callback(callback, metadata, error)
