"""The one I/O shell of the coordinators (Kafka's ``CoordinatorRuntime``): the group coordinator
(``__consumer_offsets``) and the transaction coordinator (``__transaction_state``) each run one.

A coordinator keeps its state in the partitions of an internal topic; every partition this broker
leads has a *shard* (`CoordinatorShard`), a pure object that changes only through its calls. The
runtime

- follows leadership (`follow`, or `on_metadata` from the image): a partition now led is *loaded*
  (its log replayed into a new shard; requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS), one no
  longer led, or led at a new epoch, is dropped: what waited on it is answered NOT_COORDINATOR;
- runs a call on a shard and carries out its `CoordinatorResult`: answers go out, records are
  queued for the shard's appender *in the same event-loop step* as the call, so the log holds them
  in the order the shard changed;
- appends them with acks=all through a `PartitionWriter` and only then runs the result's
  continuation: an operation is answered once its records are committed; a write that failed
  fails it (the continuation gets the error), and a shard whose state ran ahead asks to be
  reloaded from its log;
- fires every shard's timers, and the coordinator's own (`call_at`: the transaction coordinator's
  marker retries), from one deadline queue, waiting at most ``max_wait_ms`` between rounds (a lost
  wake-up costs at most that).

Time comes from the injected ``clock_ms``; nothing here reads the wall clock. Everything runs on
one event loop, and a shard is only touched between awaits, so it needs no lock.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog

from kraftlog.broker.coordinator._coordinator_result import CoordinatorResult, Error
from kraftlog.broker.coordinator._internal_topic import LogEntry
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.metadata_log import MetadataImage

__all__ = [
    "CoordinatorRuntime",
    "CoordinatorShard",
    "ShardHandler",
    "PartitionWriter",
    "ShardUnavailable",
]

_log = structlog.get_logger(__name__)


class ShardUnavailable(Exception):
    """This broker cannot serve the key now: ``error`` says why (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, or UNKNOWN_SERVER_ERROR for a call that failed)."""

    def __init__(self, error: type[kerr.KafkaError]) -> None:
        super().__init__(error.error_name)
        self.error = error


class CoordinatorShard(Protocol):
    """What the runtime asks of every shard: its partition, and its timers."""

    partition: int

    def next_deadline(self) -> int | None: ...

    def poll(self, now_ms: int) -> CoordinatorResult: ...


S = TypeVar("S", bound=CoordinatorShard)


class ShardHandler(Protocol[S]):
    """What a coordinator tells the runtime about its shards: how to make one, replay a logged
    entry into it (decoding the record), what it does once loaded and when unloaded, and how its
    records are encoded."""

    def new_shard(self, partition: int, now_ms: int) -> S: ...

    def replay(self, shard: S, entry: LogEntry, now_ms: int) -> None: ...

    def loaded(self, shard: S, now_ms: int) -> CoordinatorResult: ...

    def unloaded(self, shard: S, now_ms: int) -> CoordinatorResult: ...

    def encode(self, record: tuple[Any, Any]) -> tuple[bytes, bytes | None]: ...


class PartitionWriter(Protocol):
    """Reads and appends the partitions of one internal topic (`ReplicaPartitionWriter` over the
    replica manager; an in-memory one in the tests)."""

    def read(self, partition: int, epoch: int) -> AsyncIterator[LogEntry]:
        """Every entry of the partition, from its start to its end, once the local replica leads
        it at ``epoch`` or later."""
        ...

    async def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]], producer: tuple[int, int] | None
    ) -> Error:
        """Append with acks=all; None once committed, else why not."""
        ...


class CoordinatorRuntime(Generic[S]):
    """Shards of the partitions of ``topic`` this broker leads (see the module docstring)."""

    def __init__(
        self,
        name: str,
        topic: str,
        broker_id: int,
        writer: PartitionWriter,
        handler: ShardHandler[S],
        *,
        clock_ms: Callable[[], int],
        on_jobs: Callable[[S, list[Any]], None] | None = None,
        max_wait_ms: int = 10_000,
        load_retry_ms: int = 1_000,
    ) -> None:
        self.name = name
        self.topic = topic
        self.broker_id = broker_id
        self._writer = writer
        self._handler = handler
        self._clock_ms = clock_ms
        self._on_jobs = on_jobs
        self.max_wait_ms = max_wait_ms
        self._load_retry_ms = load_retry_ms
        self._epochs: dict[int, int] = {}  # partition -> leader epoch it is (being) loaded for
        self._shards: dict[int, S] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        # by shard, not partition: a reloaded partition is a new shard with its own queue
        self._queues: dict[S, list[CoordinatorResult]] = {}
        self._appenders: dict[S, asyncio.Task[None]] = {}
        self._waiting: dict[S, set[asyncio.Future[Any]]] = {}  # operations awaited through `call`
        self._due: dict[S, int] = {}  # each shard's next deadline, as queued
        self._queue: list[tuple[int, int, S]] = []  # (deadline, seq, shard); stale entries skipped
        self._timers: list[tuple[int, int, Callable[[], None]]] = []  # (deadline, seq, action)
        self._seq = 0
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._stopped = False
        self._log = _log.bind(node_id=broker_id, coordinator=name)

    # ================================================================ leadership

    def start(self) -> None:
        self._ticker = spawn(self._tick(), name=f"{self.name}-timers")

    async def stop(self) -> None:
        self._stopped = True
        for task in [*self._loading.values(), *self._appenders.values()]:
            task.cancel()
        if self._ticker is not None:
            self._ticker.cancel()
        for partition in list(self._epochs):
            self._drop(partition)

    def on_metadata(self, image: MetadataImage) -> None:
        """Follow the leaders of ``topic``'s partitions in ``image``."""
        topic = image.topics.get_by_name(self.topic)
        led: dict[int, int] = {}
        if topic is not None:
            led = {i: p.leader_epoch for i, p in topic.partitions.items() if p.leader == self.broker_id}
        self.follow(led)

    def follow(self, led: Mapping[int, int]) -> None:
        """``led``: partition -> leader epoch of the partitions this broker leads. A partition led
        at another epoch than the one it was loaded for is dropped and loaded again."""
        if self._stopped:
            return
        for partition in [p for p, epoch in self._epochs.items() if led.get(p) != epoch]:
            self._drop(partition)
        for partition, epoch in led.items():
            if partition not in self._epochs:
                self._start_load(partition, epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        self._epochs[partition] = epoch
        self._loading[partition] = spawn(self._load(partition, epoch), name=f"{self.name}-load-{partition}")

    def _drop(self, partition: int) -> None:
        self._epochs.pop(partition, None)
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        shard = self._shards.pop(partition, None)
        if shard is None:
            return
        self._due.pop(shard, None)
        out = self._handler.unloaded(shard, self._clock_ms())
        for token, _response in out.responses:
            _fail(token, kerr.NotCoordinatorError)
        for future in self._waiting.pop(shard, set()):
            _fail(future, kerr.NotCoordinatorError)
        self._log.info("coordinator_partition_unloaded", partition=partition)
        # what was queued for it is never written: its appender finds the shard gone and fails it

    def _reload(self, shard: S) -> None:
        """The shard's state ran ahead of a write that failed: serve the partition again from what
        its log holds."""
        partition = shard.partition
        epoch = self._epochs.get(partition)
        if self._shards.get(partition) is not shard or epoch is None or self._stopped:
            return
        self._log.warning("coordinator_partition_reload", partition=partition, epoch=epoch)
        self._drop(partition)
        self._start_load(partition, epoch)

    async def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition from its start to its end, then serve it; a load that fails is
        logged and tried again while this broker still leads the partition at ``epoch``."""
        while not self._stopped and self._epochs.get(partition) == epoch:
            started = self._clock_ms()
            try:
                shard = self._handler.new_shard(partition, started)
                count = 0
                async for entry in self._writer.read(partition, epoch):
                    self._handler.replay(shard, entry, self._clock_ms())
                    count += 1
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - a corrupt or unreadable log: retried, not hung
                self._log.error("coordinator_partition_load_failed", partition=partition, epoch=epoch, error=repr(err))
                await asyncio.sleep(self._load_retry_ms / 1000.0)
                continue
            if self._epochs.get(partition) != epoch:
                return
            self._shards[partition] = shard
            self._loading.pop(partition, None)
            now = self._clock_ms()
            self._log.info(
                "coordinator_partition_loaded", partition=partition, epoch=epoch, entries=count, ms=now - started
            )
            self._execute(shard, self._handler.loaded(shard, now))
            return

    # ================================================================== requests

    def partitions(self) -> dict[int, int]:
        """The partitions this broker leads and their epochs (loaded or loading)."""
        return dict(self._epochs)

    def shards(self) -> list[S]:
        """The loaded shards."""
        return list(self._shards.values())

    def shard(self, partition: int) -> S:
        """The loaded shard of ``partition``, or `ShardUnavailable`."""
        shard = self._shards.get(partition)
        if shard is not None:
            return shard
        if partition in self._loading:
            raise ShardUnavailable(kerr.CoordinatorLoadInProgressError)
        raise ShardUnavailable(kerr.NotCoordinatorError)

    def epoch(self, partition: int) -> int | None:
        return self._epochs.get(partition)

    def is_current(self, shard: S) -> bool:
        """Whether ``shard`` still serves its partition (not dropped or reloaded)."""
        return self._shards.get(shard.partition) is shard

    def run(self, shard: S, call: Callable[[], CoordinatorResult]) -> None:
        """Run one shard call and carry out its result (answers now, records queued in this same
        step). A shard that was dropped gets no call: NOT_COORDINATOR. A call that raises
        anything but a Kafka error is a bug in the core: logged, UNKNOWN_SERVER_ERROR."""
        if not self.is_current(shard):
            raise ShardUnavailable(kerr.NotCoordinatorError)
        try:
            out = call()
        except (ShardUnavailable, kerr.KafkaError):
            raise
        except Exception as err:
            self._log.error("coordinator_call_failed", partition=shard.partition, error=repr(err))
            raise ShardUnavailable(kerr.UnknownServerError) from err
        self._execute(shard, out)

    async def call(self, partition: int, operation: Callable[[S, object, int], CoordinatorResult]) -> Any:
        """Run ``operation(shard, token, now_ms)`` on the partition's shard and wait for the answer
        to ``token`` (NOT_COORDINATOR, as `ShardUnavailable`, when the shard is dropped first)."""
        shard = self.shard(partition)
        token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(shard, set())
        waiting.add(token)
        try:
            self.run(shard, lambda: operation(shard, token, self._clock_ms()))
            return await token
        finally:
            waiting.discard(token)

    def _execute(self, shard: S, out: CoordinatorResult) -> None:
        for token, response in out.responses:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(response)
        if out.jobs and self._on_jobs is not None:
            self._on_jobs(shard, out.jobs)
        if out.reload:
            self._reload(shard)
            return
        if out.records:
            self._queues.setdefault(shard, []).append(out)
            appender = self._appenders.get(shard)
            if appender is None or appender.done():
                self._appenders[shard] = spawn(self._append_loop(shard), name=f"{self.name}-append-{shard.partition}")
        elif out.then is not None:
            self._execute(shard, out.then(None, self._clock_ms()))  # nothing to wait for
        self._schedule(shard)

    async def _append_loop(self, shard: S) -> None:
        """Write what is queued for ``shard``, oldest first, one append per round (of the results
        at the head written the same way: plain, or in one producer's transaction), then run
        their continuations in order (which may queue more)."""
        partition = shard.partition
        while self._queues.get(shard):
            queued = self._queues[shard]
            n = next((i for i, o in enumerate(queued) if o.producer != queued[0].producer), len(queued))
            batch, self._queues[shard] = queued[:n], queued[n:]
            error: Error = kerr.NotCoordinatorError
            if self.is_current(shard):
                try:
                    encoded = [self._handler.encode(r) for out in batch for r in out.records]
                except (ValueError, kerr.KafkaError) as err:
                    self._log.warning("coordinator_records_not_encodable", partition=partition, error=str(err))
                    error = kerr.InvalidRequestError
                else:
                    error = await self._writer.append(partition, encoded, batch[0].producer)
                if not self.is_current(shard):
                    error = kerr.NotCoordinatorError
            now = self._clock_ms()
            for out in batch:
                if out.then is None:
                    continue
                try:
                    follow = out.then(error, now)
                except Exception as err:  # noqa: BLE001 - a core bug: logged, the rest carry on
                    self._log.error("coordinator_continuation_failed", partition=partition, error=repr(err))
                    continue
                if self.is_current(shard):
                    try:
                        self._execute(shard, follow)
                    except Exception as err:  # noqa: BLE001 - the appender must go on with what is queued
                        self._log.error("coordinator_continuation_failed", partition=partition, error=repr(err))
                else:
                    for token, response in follow.responses:  # answered, but by a shard now gone
                        if isinstance(token, asyncio.Future) and not token.done():
                            token.set_result(response)
        self._queues.pop(shard, None)
        if self._appenders.get(shard) is asyncio.current_task():
            del self._appenders[shard]

    # ===================================================================== timers

    def _schedule(self, shard: S) -> None:
        """Queue the shard's next deadline (after every change of the shard)."""
        if not self.is_current(shard):
            return
        deadline = shard.next_deadline()
        if deadline is None:
            self._due.pop(shard, None)
            return
        if self._due.get(shard) == deadline:
            return
        self._due[shard] = deadline
        self._seq += 1
        heapq.heappush(self._queue, (deadline, self._seq, shard))
        if len(self._queue) > 4 * len(self._due) + 64:  # stale entries: rebuild from what is due
            self._queue = [(d, i, s) for i, (s, d) in enumerate(self._due.items())]
            heapq.heapify(self._queue)
        self._wake.set()

    def call_at(self, deadline_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` once the clock reaches ``deadline_ms`` (from the same queue as the
        shards' timers; dropped when the runtime stops)."""
        self._seq += 1
        heapq.heappush(self._timers, (deadline_ms, self._seq, action))
        self._wake.set()

    def wait_ms(self, now_ms: int) -> int:
        """How long the timer task sleeps from ``now_ms``: until the earliest deadline, at most
        ``max_wait_ms``."""
        while self._queue and self._due.get(self._queue[0][2]) != self._queue[0][0]:
            heapq.heappop(self._queue)  # stale: the shard moved its deadline or is gone
        deadlines = [q[0][0] for q in (self._queue, self._timers) if q]
        if not deadlines:
            return self.max_wait_ms
        return max(0, min(min(deadlines) - now_ms, self.max_wait_ms))

    def fire_due(self, now_ms: int) -> None:
        """Poll every shard whose deadline is at or before ``now_ms``, earliest first, then run
        the `call_at` actions due."""
        due: list[S] = []
        while self._queue and self._queue[0][0] <= now_ms:
            deadline, _seq, shard = heapq.heappop(self._queue)
            if self._due.get(shard) == deadline and self.is_current(shard):
                del self._due[shard]
                due.append(shard)
        for shard in due:
            if not self.is_current(shard):
                continue
            try:
                self._execute(shard, shard.poll(now_ms))
            except Exception as err:  # noqa: BLE001 - one shard's bug must not stop every timer
                self._log.error("coordinator_timers_failed", partition=shard.partition, error=repr(err))
                self._schedule(shard)
        while self._timers and self._timers[0][0] <= now_ms:
            _deadline, _seq, action = heapq.heappop(self._timers)
            try:
                action()
            except Exception as err:  # noqa: BLE001 - one action's bug must not stop every timer
                self._log.error("coordinator_timer_failed", error=repr(err))

    def wake(self) -> None:
        """Re-evaluate the deadlines now (the clock moved, as in tests)."""
        self._wake.set()

    async def _tick(self) -> None:
        while True:
            self._wake.clear()
            wait_ms = self.wait_ms(self._clock_ms())
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000.0)
            except TimeoutError:
                pass
            self.fire_due(self._clock_ms())


def _fail(token: object, error: type[kerr.KafkaError]) -> None:
    if isinstance(token, asyncio.Future) and not token.done():
        token.set_exception(ShardUnavailable(error))
