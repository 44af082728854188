"""`AlterPartitionManager`: the leader's channel for ISR changes to the active controller.

A partition leader never changes its ISR on its own (docs/architecture.md §4, KIP-497): it proposes the new ISR
with ``AlterPartition(leader_epoch, partition_epoch, new_isr)`` and applies it only when the
controller's answer (or the metadata log) says it was committed. A stale epoch in the request is
rejected by the controller; that is what fences a zombie leader.

This manager batches the proposals of every partition led by this broker into AlterPartition
requests sent through an injected ``send(request) -> response`` coroutine (the server wires it to
the active controller and follows NOT_CONTROLLER hints). Rules:

- One proposal in flight per partition. A proposal submitted while another one for the same
  partition is in flight waits for that answer; a proposal replacing a queued (unsent) one fails
  the replaced future with OPERATION_NOT_ATTEMPTED.
- Proposals submitted in the same loop iteration travel in one request; at most one request is in
  flight at a time (as Kafka's AlterPartitionManager), the next one carries whatever queued since.
- Request-level failures (an exception from ``send``, or a top-level error such as NOT_CONTROLLER
  or STALE_BROKER_EPOCH) are retried with exponential back-off; the futures stay pending.
- Partition-level results are handed back unchanged: the `Partition` decides (wait for metadata on
  INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH, revert on INELIGIBLE_REPLICA, retry otherwise).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from kraftlog.common import backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.proto import controller_pb2

__all__ = ["AlterPartitionManager", "AlterPartitionResult", "AlterPartitionSend"]

_log = structlog.get_logger(__name__)

AlterPartitionSend = Callable[[controller_pb2.AlterPartitionRequest], Awaitable[controller_pb2.AlterPartitionResponse]]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """The controller's answer for one partition.

    ``error`` is None on success; then ``isr`` / ``partition_epoch`` / ``leader_epoch`` are the state
    the controller committed (or already had, when nothing changed).
    """

    error: type[kerr.KafkaError] | None
    message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(slots=True)
class _Item:
    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    future: asyncio.Future[AlterPartitionResult]


class AlterPartitionManager:
    """Batches ISR proposals into AlterPartition requests; see the module docstring for the rules.

    ``broker_epoch()`` is read when each request is built, so a re-registered broker sends its
    current epoch. All methods must be called on the event loop that runs the manager.
    """

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        send: AlterPartitionSend,
        *,
        retry_backoff_ms: int = 50,
        max_backoff_ms: int = 1000,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        self._retry_backoff_ms = retry_backoff_ms
        self._max_backoff_ms = max_backoff_ms
        self._unsent: dict[tuple[str, int], _Item] = {}
        self._inflight: set[tuple[str, int]] = set()
        self._task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._closed = False
        self._log = _log.bind(node_id=broker_id)
        self.requests_sent = 0

    # ------------------------------------------------------------------ API

    def submit(
        self,
        topic_id: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: tuple[int, ...] | list[int],
    ) -> asyncio.Future[AlterPartitionResult]:
        """Queue a proposal; the future resolves with the controller's partition-level answer.

        The future fails with `OperationNotAttemptedError` when a newer proposal for the same
        partition replaces this one before it was sent, or when the manager shuts down.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AlterPartitionResult] = loop.create_future()
        if self._closed:
            fut.set_exception(kerr.OperationNotAttemptedError("the AlterPartition manager is shut down"))
            return fut
        key = (topic_id, partition)
        old = self._unsent.get(key)
        if old is not None and not old.future.done():
            old.future.set_exception(
                kerr.OperationNotAttemptedError("replaced by a newer AlterPartition proposal before it was sent")
            )
        self._unsent[key] = _Item(topic_id, partition, leader_epoch, partition_epoch, tuple(new_isr), fut)
        self._ensure_task()
        assert self._wakeup is not None
        self._wakeup.set()
        return fut

    @property
    def pending(self) -> int:
        """Proposals queued or in flight."""
        return len(self._unsent) + len(self._inflight)

    async def shutdown(self) -> None:
        """Stop sending; fail every queued proposal with OPERATION_NOT_ATTEMPTED."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        for item in self._unsent.values():
            if not item.future.done():
                item.future.set_exception(kerr.OperationNotAttemptedError("shutting down"))
        self._unsent.clear()
        self._inflight.clear()

    # ------------------------------------------------------------------ sending

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._wakeup = asyncio.Event()
            self._task = spawn(self._run(), name="alter-partition")

    async def _run(self) -> None:
        assert self._wakeup is not None
        failures = 0
        while not self._closed:
            batch = [item for key, item in self._unsent.items() if key not in self._inflight]
            if not batch:
                self._wakeup.clear()
                await self._wakeup.wait()
                # let every submit of this loop iteration join the batch
                await asyncio.sleep(0)
                continue
            for item in batch:
                del self._unsent[(item.topic_id, item.partition)]
                self._inflight.add((item.topic_id, item.partition))
            ok = await self._send_batch(batch)
            for item in batch:
                self._inflight.discard((item.topic_id, item.partition))
            if ok:
                failures = 0
                continue
            # put back what was not answered, unless a newer proposal replaced it meanwhile
            for item in batch:
                key = (item.topic_id, item.partition)
                if item.future.done():
                    continue
                if key in self._unsent:
                    item.future.set_exception(
                        kerr.OperationNotAttemptedError("replaced by a newer AlterPartition proposal")
                    )
                else:
                    self._unsent[key] = item
            await asyncio.sleep(
                backoff_ms(failures, base_ms=self._retry_backoff_ms, max_ms=self._max_backoff_ms) / 1000
            )
            failures += 1

    async def _send_batch(self, batch: list[_Item]) -> bool:
        """Send one request; resolve the futures it answers. False: retry the batch later."""
        live = [item for item in batch if not item.future.done()]
        if not live:
            return True
        by_topic: dict[str, list[_Item]] = {}
        for item in live:
            by_topic.setdefault(item.topic_id, []).append(item)
        req = controller_pb2.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self._broker_epoch(),
            topics=[
                controller_pb2.AlterPartitionRequest.TopicData(
                    topic_id=topic_id,
                    partitions=[
                        controller_pb2.AlterPartitionRequest.PartitionData(
                            partition_index=i.partition,
                            leader_epoch=i.leader_epoch,
                            new_isr=list(i.new_isr),
                            partition_epoch=i.partition_epoch,
                        )
                        for i in items
                    ],
                )
                for topic_id, items in by_topic.items()
            ],
        )
        self.requests_sent += 1
        try:
            resp = await self._send(req)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # network, NOT_CONTROLLER raised by the wiring, ...
            self._log.warning("alter_partition_send_failed", error=repr(err), partitions=len(live))
            return False
        if resp.error.code != 0:
            self._log.warning(
                "alter_partition_request_error", error=resp.error.name, message=resp.error.message, partitions=len(live)
            )
            return False
        answered: dict[tuple[str, int], controller_pb2.AlterPartitionResponse.PartitionData] = {}
        for t in resp.topics:
            for p in t.partitions:
                answered[(t.topic_id, p.partition_index)] = p
        for item in live:
            answer = answered.get((item.topic_id, item.partition))
            if answer is None:
                item.future.set_exception(
                    kerr.UnknownServerError(f"the controller did not answer for {item.topic_id}/{item.partition}")
                )
                continue
            p = answer
            if p.error.code != 0:
                result = AlterPartitionResult(
                    kerr.error_for_code(p.error.code),
                    p.error.message,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.isr),
                    p.partition_epoch,
                )
            else:
                result = AlterPartitionResult(None, "", p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch)
            item.future.set_result(result)
        return True
