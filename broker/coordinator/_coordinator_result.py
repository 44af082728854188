"""What a coordinator shard's call produces (Kafka's ``CoordinatorResult``), the one continuation
mechanism of the shards, and the one mapping of a failed append to what a client is told.

A shard call returns a `CoordinatorResult`: answers to give now, records to append to the shard's
partition, and ``then``, the continuation that runs once those records are committed (error None)
or failed to be written. A continuation returns a result of its own (more answers, more records).
There is no registry of pending appends anywhere: the continuation travels with its records, so
the runtime (`kraftlog.broker.coordinator._coordinator_runtime`) runs it after exactly that write, and a test
runs it by hand. `merge` puts two results into one append; their continuations then run in the
order the results were merged (the order their state changed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftlog.common import errors as kerr

__all__ = ["CoordinatorResult", "Continuation", "Error", "chain", "merge", "coordinator_error"]

Error = type[kerr.KafkaError] | None
Continuation = Callable[[Error, int], "CoordinatorResult"]


@dataclass
class CoordinatorResult:
    """Answers, records to append, and what runs once they are written (see the module docstring).

    ``reload``: the shard's state ran ahead of a write that failed; the runtime serves the
    partition again from what its log holds (as Kafka reverts to the last committed state).
    ``producer`` (id, epoch): the records go in that producer's transaction (TxnOffsetCommit).
    ``jobs``: work for the coordinator around the runtime, started once the result is carried out
    (the transaction coordinator's marker jobs)."""

    responses: list[tuple[object, Any]] = field(default_factory=list)
    records: list[tuple[Any, Any]] = field(default_factory=list)
    then: Continuation | None = None
    reload: bool = False
    producer: tuple[int, int] | None = None
    jobs: list[Any] = field(default_factory=list)


def chain(first: Continuation | None, second: Continuation | None) -> Continuation | None:
    """One continuation running ``first`` then ``second`` with the same write's outcome."""
    if first is None:
        return second
    if second is None:
        return first
    a, b = first, second

    def both(error: Error, now_ms: int) -> CoordinatorResult:
        out = a(error, now_ms)
        merge(out, b(error, now_ms))
        return out

    return both


def merge(into: CoordinatorResult, other: CoordinatorResult) -> CoordinatorResult:
    """Add ``other`` to ``into`` (one append for both; ``into``'s continuation runs first)."""
    if into.records and other.records:
        assert into.producer == other.producer, "records of different transactions are written apart"
    into.responses.extend(other.responses)
    into.jobs.extend(other.jobs)
    into.reload = into.reload or other.reload
    if other.records:
        into.producer = other.producer if not into.records else into.producer
        into.records.extend(other.records)
    into.then = chain(into.then, other.then)
    return into


_COORDINATOR_NOT_AVAILABLE: frozenset[type[kerr.KafkaError]] = frozenset(
    {
        kerr.UnknownTopicOrPartitionError,
        kerr.NotEnoughReplicasError,
        kerr.NotEnoughReplicasAfterAppendError,
        kerr.RequestTimedOutError,
    }
)
_NOT_COORDINATOR: frozenset[type[kerr.KafkaError]] = frozenset({kerr.NotLeaderOrFollowerError, kerr.KafkaStorageError})
_UNKNOWN_SERVER_ERROR: frozenset[type[kerr.KafkaError]] = frozenset(
    {kerr.MessageTooLargeError, kerr.RecordListTooLargeError, kerr.InvalidFetchSizeError}
)


def coordinator_error(error: type[kerr.KafkaError]) -> type[kerr.KafkaError]:
    """What a client is told when a coordinator's write failed with ``error`` (Kafka's mapping,
    ``GroupCoordinatorService.normalizeException`` and the transaction state manager's): the
    partition is not writable now -> COORDINATOR_NOT_AVAILABLE (retry, same coordinator); it is
    led elsewhere or its disk failed -> NOT_COORDINATOR (find the coordinator again); the write
    was too large -> UNKNOWN_SERVER_ERROR. Any other error is passed on. Mapping a mapped error
    again changes nothing."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return kerr.CoordinatorNotAvailableError
    if error in _NOT_COORDINATOR:
        return kerr.NotCoordinatorError
    if error in _UNKNOWN_SERVER_ERROR:
        return kerr.UnknownServerError
    return error
