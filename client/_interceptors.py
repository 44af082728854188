"""Producer and consumer interceptors: Kafka's ProducerInterceptor and ConsumerInterceptor.

``Producer(..., interceptors=[a, b])`` and ``Consumer(..., interceptors=[a, b])`` run a chain of
interceptors, in list order, at fixed points of the pipeline:

- `ProducerInterceptor.on_send` gets each `ProducerRecord` in ``send``, before the key and value are
  serialized and before the partition is chosen, and may return another record (``dataclasses.replace``)
  that continues instead; the next interceptor gets what the previous one returned.
- `ProducerInterceptor.on_acknowledgement` gets ``(metadata, exception)`` once for every record sent:
  on success the record's `RecordMetadata`, on failure a `RecordMetadata` with its topic, its partition
  (-1 when none was chosen yet) and offset -1, and the exception. It runs on the producer's sender (I/O)
  thread, before the send's own callback -- or on the caller's thread when ``send`` itself failed
  (serialization, a record too large, no metadata) -- so it must be quick.
- `ConsumerInterceptor.on_consume` gets the records of each ``poll`` before the application does and
  may return other records (``record._replace(value=...)``); positions are those of the records
  fetched, whatever it returns.
- `ConsumerInterceptor.on_commit` gets the offsets (``{TopicPartition: OffsetAndMetadata}``) after every
  successful commit: ``commit``, ``commit_async`` (on its worker thread) and auto commits.
- ``close()`` of each runs when the producer or consumer closes.

An interceptor that raises breaks nothing (Kafka's ProducerInterceptors / ConsumerInterceptors): the
error is logged with the interceptor's name (``interceptor_failed``) and the pipeline goes on with what
it had before that interceptor -- the record (or records) as the previous interceptor returned them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import structlog

__all__ = ["checked_chain", "close_all", "interceptor_failed"]

_log = structlog.get_logger(__name__)


def _name(interceptor: object) -> str:
    cls = type(interceptor)
    return f"{cls.__module__}.{cls.__qualname__}"


def interceptor_failed(interceptor: object, method: str, error: object) -> None:
    """Log one interceptor's failure (``interceptor_failed``, its class name, the method): the
    pipeline goes on without what it would have done."""
    _log.warning("interceptor_failed", interceptor=_name(interceptor), method=method, error=error)


def checked_chain(interceptors: Iterable[Any] | None, protocol: type) -> tuple[Any, ...]:
    """The interceptors as a tuple, in order; `TypeError` naming one that lacks a method of ``protocol``."""
    chain = tuple(interceptors or ())
    for interceptor in chain:
        if not isinstance(interceptor, protocol):
            raise TypeError(
                f"interceptors: {_name(interceptor)} is not a {protocol.__name__} (it lacks one of its methods)"
            )
    return chain


def close_all(chain: Sequence[Any]) -> None:
    """``close()`` every interceptor of ``chain``; one that raises is logged and the rest still close."""
    for interceptor in chain:
        try:
            interceptor.close()
        except Exception as err:
            interceptor_failed(interceptor, "close", repr(err))
