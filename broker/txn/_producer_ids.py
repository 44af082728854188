"""Producer ids on a broker (Kafka's ``RPCProducerIdManager``): ids come from blocks that the active
controller allocates (AllocateProducerIds, a ``ProducerIdsRecord`` in the metadata log, so no two
brokers ever hand out the same id); the broker hands them out one by one and asks for the next
block once 90% of the current one is used, so an InitProducerId rarely waits for the controller.

Also the InitProducerId answer for producers without a transactional id (idempotent producers):
a fresh producer id at epoch 0, as Kafka's transaction coordinator gives them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from kraftlog.broker.replica import error_pb
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.proto import broker_pb2, controller_pb2

__all__ = ["ProducerIdManager", "init_producer_id"]

_log = structlog.get_logger(__name__)
_PREFETCH_FRACTION = 0.9


class ProducerIdManager:
    """Hands out producer ids from controller-allocated blocks (see the module docstring).
    ``allocate()`` asks the controller for a block: ``(start, length)`` or raises."""

    def __init__(self, allocate: Callable[[], Coroutine[Any, Any, tuple[int, int]]]) -> None:
        self._allocate = allocate
        self._next = 0
        self._end = 0  # the current block is [next, end)
        self._block_len = 0
        self._fetching: asyncio.Task[tuple[int, int]] | None = None  # the next block, asked for

    async def generate(self, timeout_s: float = 10.0) -> int:
        """The next producer id; COORDINATOR_NOT_AVAILABLE (retriable) when no block came in time."""
        if self._next >= self._end:
            task = self._fetching or self._ask()
            try:
                start, length = await asyncio.wait_for(asyncio.shield(task), timeout_s)
            except (TimeoutError, kerr.KafkaError) as err:
                if task.done():
                    self._fetching = None  # a failed ask: the next call asks again
                raise kerr.CoordinatorNotAvailableError(f"no producer id block from the controller: {err!r}") from err
            if self._fetching is task:
                self._fetching = None
            if self._next >= self._end:  # another waiter may have installed this block already
                self._next, self._end, self._block_len = start, start + length, length
        pid = self._next
        self._next += 1
        used = self._block_len - (self._end - self._next)
        if self._fetching is None and used >= self._block_len * _PREFETCH_FRACTION:
            self._ask()
        return pid

    def _ask(self) -> asyncio.Task[tuple[int, int]]:
        self._fetching = spawn(self._allocate())
        self._fetching.add_done_callback(_log_failure)
        return self._fetching


def _log_failure(task: asyncio.Task[tuple[int, int]]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning("producer_id_block_failed", error=repr(task.exception()))


async def allocate_from_controller(
    call: Callable[..., Awaitable[Any]], broker_id: int, broker_epoch: Callable[[], int], timeout_s: float = 10.0
) -> tuple[int, int]:
    """AllocateProducerIds on the active controller (``call`` is the controller channel's). A
    stale broker epoch (the broker is re-registering) is asked again with the current one until
    ``timeout_s`` passes."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        request = controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch())
        response = await call("controller", "AllocateProducerIds", request, timeout_s=timeout_s)
        code = response.error.code
        if not code:
            return response.producer_id_start, response.producer_id_len
        error = kerr.error_for_code(code)
        if error is not kerr.StaleBrokerEpochError or asyncio.get_running_loop().time() >= deadline:
            raise error(response.error.message or response.error.name)
        await asyncio.sleep(0.2)


async def init_producer_id(manager: ProducerIdManager, request: Any) -> Any:
    """InitProducerId of a producer without a transactional id: a new producer id, epoch 0."""
    R = broker_pb2.InitProducerIdResponse
    if request.HasField("transactional_id") and request.transactional_id:
        return R(
            error=error_pb(kerr.UnsupportedVersionError, "transactions are not served by this broker yet"),
            producer_id=-1,
            producer_epoch=-1,
        )
    try:
        pid = await manager.generate()
    except kerr.KafkaError as err:
        return R(error=error_pb(type(err), str(err)), producer_id=-1, producer_epoch=-1)
    return R(error=error_pb(None), producer_id=pid, producer_epoch=0)
