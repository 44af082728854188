"""Producer ids on a broker (issue 15): blocks from the controller, handed out in order, the next
block asked for before the current one runs out, and a controller that does not answer."""

from __future__ import annotations

import asyncio

import pytest

from kraftlog.broker.txn._producer_ids import ProducerIdManager, init_producer_id
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2


def test_ids_come_in_order_and_the_next_block_is_fetched_ahead() -> None:
    calls: list[int] = []

    async def allocate() -> tuple[int, int]:
        calls.append(1)
        return (len(calls) - 1) * 10, 10

    async def run() -> list[int]:
        m = ProducerIdManager(allocate)
        out = []
        for _ in range(25):
            out.append(await m.generate())
            await asyncio.sleep(0)  # let a prefetch run
        return out

    ids = asyncio.run(run())
    assert ids == list(range(25))
    assert len(calls) == 3


def test_no_block_is_coordinator_not_available_and_a_later_call_retries() -> None:
    answers: list[object] = [kerr.NotControllerError("no"), (100, 5)]

    async def allocate() -> tuple[int, int]:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        assert isinstance(a, tuple)
        return a

    async def run() -> int:
        m = ProducerIdManager(allocate)
        with pytest.raises(kerr.CoordinatorNotAvailableError):
            await m.generate()
        return await m.generate()

    assert asyncio.run(run()) == 100


def test_init_producer_id_without_a_transactional_id() -> None:
    async def allocate() -> tuple[int, int]:
        return 7, 1000

    async def run() -> tuple[object, object]:
        m = ProducerIdManager(allocate)
        plain = await init_producer_id(m, broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
        txn = await init_producer_id(m, broker_pb2.InitProducerIdRequest(transactional_id="t"))
        return plain, txn

    plain, txn = asyncio.run(run())
    assert plain.error.code == 0 and (plain.producer_id, plain.producer_epoch) == (7, 0)  # type: ignore[attr-defined]
    assert txn.error.name == "UNSUPPORTED_VERSION"  # type: ignore[attr-defined]
