"""The purgatory: delayed operations completed by events or by their own timer (broker/_purgatory)."""

from __future__ import annotations

import asyncio
import time

from kraftlog.broker.replica._purgatory import DelayedOperation, DelayedOperations


class Op(DelayedOperation):
    def __init__(self, delay_ms: int, state: dict[str, int], need: int) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.need = need
        self.tries = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.state["value"] >= self.need:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        self.expirations += 1


def test_completes_at_once_when_the_condition_holds() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        op = Op(10_000, {"value": 5}, 1)
        assert p.try_complete_else_watch(op, ["a"])
        assert op.completed and await op.future is True
        assert p.watched() == 0

    asyncio.run(main())


def test_event_completes_watched_operation_and_not_before() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        state = {"value": 0}
        op = Op(10_000, state, 2)
        assert not p.try_complete_else_watch(op, ["a", "b"])
        assert p.watched("a") == 1 and p.watched("b") == 1 and p.watched() == 1
        state["value"] = 1
        assert p.check_and_complete("a") == 0
        assert not op.future.done()
        state["value"] = 2
        assert p.check_and_complete("c") == 0  # other key: not evaluated
        assert p.check_and_complete("b") == 1
        assert await op.future is True
        # completion removed it from every key and cancelled its timer
        assert p.watched("a") == 0 and p.watched("b") == 0
        assert op._timer is None and op.expirations == 0

    asyncio.run(main())


def test_timeout_expires_with_loop_timer() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        op = Op(30, {"value": 0}, 1)
        start = time.monotonic()
        assert not p.try_complete_else_watch(op, ["a"])
        assert await op.future is False  # expired, not completed by an event
        elapsed = time.monotonic() - start
        assert 0.02 <= elapsed < 1.0
        assert op.expired and op.expirations == 1
        # no polling: the operation was evaluated once (when parked), never by a timer
        assert op.tries == 1
        assert p.watched() == 0

    asyncio.run(main())


def test_force_complete_is_idempotent_and_complete_all() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        ops = [Op(10_000, {"value": 0}, 1) for _ in range(3)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, ["k", f"own{i}"])
        assert p.complete_all("k") == 3
        assert p.complete_all("k") == 0
        assert all(op.completed and not op.force_complete() for op in ops)
        assert p.watched() == 0

    asyncio.run(main())


def test_reentrant_check_does_not_evaluate_an_operation_twice() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        state = {"value": 0}

        class Reentrant(Op):
            def try_complete(self) -> bool:
                self.tries += 1
                p.check_and_complete("a")  # an event raised while evaluating
                if state["value"] >= self.need:
                    return self.force_complete()
                return False

        op = Reentrant(10_000, state, 1)
        other = Op(10_000, state, 1)
        p.try_complete_else_watch(op, ["a"])
        p.try_complete_else_watch(other, ["a"])
        state["value"] = 1
        p.check_and_complete("a")
        assert op.completed and other.completed
        assert op.tries == 2  # once when parked, once for the event
        assert p.watched() == 0

    asyncio.run(main())


def test_shutdown_expires_everything() -> None:
    async def main() -> None:
        p = DelayedOperations("t")
        ops = [Op(10_000, {"value": 0}, 1) for _ in range(2)]
        for op in ops:
            p.try_complete_else_watch(op, ["k"])
        p.shutdown()
        assert [await op.future for op in ops] == [False, False]
        late = Op(10_000, {"value": 0}, 1)
        assert p.try_complete_else_watch(late, ["k"])  # a closed purgatory parks nothing
        assert late.completed

    asyncio.run(main())
