"""Producer interceptors: Kafka's ProducerInterceptor and ProducerInterceptors (the rules common to
both sides are in `kraftlog.client._interceptors`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from kraftlog.client._interceptors import checked_chain, close_all, interceptor_failed
from kraftlog.client.producer._producer_types import RecordMetadata

__all__ = ["ProducerInterceptor", "ProducerInterceptors", "ProducerRecord"]


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record as given to ``send`` (key and value not serialized yet), what `on_send` sees and
    returns. ``partition`` and ``timestamp_ms`` None: the partitioner and the send time choose."""

    topic: str
    value: Any = None
    key: Any = None
    headers: Any = None
    partition: int | None = None
    timestamp_ms: int | None = None


@runtime_checkable
class ProducerInterceptor(Protocol):
    """Kafka's ProducerInterceptor: ``on_send`` before serialization and partitioning (returns the
    record that goes on), ``on_acknowledgement`` for every record on the sender thread, ``close``."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord: ...

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None: ...

    def close(self) -> None: ...


class ProducerInterceptors:
    """The chain of a producer's interceptors; each call isolates every interceptor's errors."""

    def __init__(self, interceptors: Iterable[ProducerInterceptor] | None) -> None:
        self.chain: tuple[ProducerInterceptor, ...] = checked_chain(interceptors, ProducerInterceptor)

    def __bool__(self) -> bool:
        return bool(self.chain)

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """``record`` through every interceptor in order; one that raises (or returns something
        else than a `ProducerRecord`) is skipped: the next gets what the previous one returned."""
        for interceptor in self.chain:
            try:
                returned = interceptor.on_send(record)
            except Exception as err:
                interceptor_failed(interceptor, "on_send", repr(err))
                continue
            if isinstance(returned, ProducerRecord):
                record = returned
            else:
                interceptor_failed(interceptor, "on_send", f"returned {type(returned).__name__}, not a ProducerRecord")
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        for interceptor in self.chain:
            try:
                interceptor.on_acknowledgement(metadata, exception)
            except Exception as err:
                interceptor_failed(interceptor, "on_acknowledgement", repr(err))

    def close(self) -> None:
        close_all(self.chain)
