"""Consumer interceptors: Kafka's ConsumerInterceptor and ConsumerInterceptors (the rules common to
both sides are in `kraftlog.client._interceptors`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from kraftlog.client._interceptors import checked_chain, close_all, interceptor_failed
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.consumer._fetched import ConsumerRecord

#: what `on_commit` gets per partition: an `OffsetAndMetadata` (a ``(offset, metadata, leader_epoch)``
#: tuple; named so here because `_consumer_groups`, which defines it, imports this module)
CommittedOffset = tuple[int, str, int]

__all__ = ["ConsumerInterceptor", "ConsumerInterceptors"]


@runtime_checkable
class ConsumerInterceptor(Protocol):
    """Kafka's ConsumerInterceptor: ``on_consume`` on each poll's records before the application
    (returns the records it gets), ``on_commit`` after each successful commit, ``close``."""

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]: ...

    def on_commit(self, offsets: Mapping[TopicPartition, CommittedOffset]) -> None: ...

    def close(self) -> None: ...


class ConsumerInterceptors:
    """The chain of a consumer's interceptors; each call isolates every interceptor's errors."""

    def __init__(self, interceptors: Iterable[ConsumerInterceptor] | None) -> None:
        self.chain: tuple[ConsumerInterceptor, ...] = checked_chain(interceptors, ConsumerInterceptor)

    def __bool__(self) -> bool:
        return bool(self.chain)

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """``records`` through every interceptor in order; one that raises (or returns something
        else than a sequence of records) is skipped: the next gets the records as they were."""
        for interceptor in self.chain:
            try:
                returned = interceptor.on_consume(records)
            except Exception as err:
                interceptor_failed(interceptor, "on_consume", repr(err))
                continue
            if isinstance(returned, Sequence) and not isinstance(returned, (str, bytes)):
                records = list(returned)
            else:
                interceptor_failed(
                    interceptor, "on_consume", f"returned {type(returned).__name__}, not a list of records"
                )
        return records

    def on_commit(self, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        for interceptor in self.chain:
            try:
                interceptor.on_commit(offsets)
            except Exception as err:
                interceptor_failed(interceptor, "on_commit", repr(err))

    def close(self) -> None:
        close_all(self.chain)
