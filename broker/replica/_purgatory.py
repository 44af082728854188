"""The purgatory: requests parked until an event completes them or their own timeout expires.

Kafka's ``DelayedOperationPurgatory`` on one asyncio loop. A `DelayedOperation` (an acks=all produce,
a long-polling fetch, a DeleteRecords waiting for the low watermark) is watched under the keys it
depends on (the partitions, ``(topic, partition)``). Whoever changes a partition (an append, a high
watermark advance, a follower fetch, a leadership change) calls `DelayedOperations.check_and_complete`
with that key, which re-evaluates the operations watching it. Each operation also has one timer,
set with ``loop.call_later`` when it is parked and cancelled when it completes: nothing polls.

Rules:

- An operation completes exactly once (`DelayedOperation.force_complete` is idempotent); completion
  removes it from every key and cancels its timer, so nothing leaks.
- ``try_complete`` runs synchronously on the loop; it may be re-entered through another purgatory
  (completing a produce while a fetch is being evaluated) but an operation is never evaluated while
  it is already being evaluated.
- Completion only resolves the operation's future; the waiting request builds its response when it
  resumes, so a completion never does I/O inside another operation's event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

import structlog

__all__ = ["DelayedOperation", "DelayedOperations"]

_log = structlog.get_logger(__name__)


class DelayedOperation:
    """Base of a parked request. Subclasses implement `try_complete` (and may override
    `on_expiration`); `future` resolves to True when completed by an event, False when expired."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, int(delay_ms))
        self.completed = False
        self.expired = False
        self._evaluating = False
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: DelayedOperations | None = None
        self._keys: tuple[Hashable, ...] = ()
        self.future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    # -- to implement
    def try_complete(self) -> bool:
        """Check the completion condition; call `force_complete` and return True when it holds."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called once when the timeout expires, before the operation completes."""

    # -- machinery
    def maybe_try_complete(self) -> bool:
        if self.completed or self._evaluating:
            return False
        self._evaluating = True
        try:
            return self.try_complete()
        finally:
            self._evaluating = False

    def force_complete(self) -> bool:
        """Complete now (idempotent); returns False when it was already completed."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        if not self.future.done():
            self.future.set_result(not self.expired)
        return True

    def _expire(self) -> None:
        self._timer = None
        if self.completed:
            return
        self.expired = True
        try:
            self.on_expiration()
        except Exception as err:  # never leave the waiter hanging
            _log.error("delayed_operation_expiration_failed", error=repr(err))
        self.force_complete()


class DelayedOperations:
    """A purgatory: delayed operations watched by key (one instance per operation kind)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._closed = False

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; otherwise watch it under ``keys`` and start its timer.

        Returns True when it completed at once.
        """
        if op.maybe_try_complete():
            return True
        if op.completed:
            return True
        if self._closed:
            op.force_complete()
            return True
        op._purgatory = self
        op._keys = tuple(dict.fromkeys(keys))
        for key in op._keys:
            self._watchers.setdefault(key, []).append(op)
        op._timer = asyncio.get_running_loop().call_later(op.delay_ms / 1000, op._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-evaluate the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops):
            if not op.completed and op.maybe_try_complete():
                done += 1
        return done

    def complete_all(self, key: Hashable | None = None) -> int:
        """Force-complete every operation watching ``key`` (every operation when None)."""
        if key is None:
            ops = list({id(op): op for lst in self._watchers.values() for op in lst}.values())
        else:
            ops = list(self._watchers.get(key, ()))
        n = 0
        for op in list(ops):
            if op.force_complete():
                n += 1
        return n

    def watched(self, key: Hashable | None = None) -> int:
        """Operations watching ``key`` (distinct operations over all keys when None)."""
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({id(op) for lst in self._watchers.values() for op in lst})

    def shutdown(self) -> None:
        """Expire every parked operation (their requests answer with what they have)."""
        self._closed = True
        ops = {id(op): op for lst in self._watchers.values() for op in lst}.values()
        for op in list(ops):
            op._expire()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            lst = self._watchers.get(key)
            if lst is None:
                continue
            try:
                lst.remove(op)
            except ValueError:
                pass
            if not lst:
                del self._watchers[key]
