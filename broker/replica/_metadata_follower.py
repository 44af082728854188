"""The broker's copy of the metadata log: a FetchMetadata stream from any controller.

Controllers serve only committed records, so whatever arrives here is loaded at once: a snapshot
replaces the image, entries are replayed into a `MetadataDelta`. What is loaded is handed to the
listener as ``(delta, image)`` — the replica manager turns it into become-leader / become-follower /
stop / delete decisions — but only once the broker has caught up (`MetadataLoader`).

The initial catch-up (`MetadataLoader`)
---------------------------------------
A broker keeps no metadata across restarts: it replays the log from the start (or from the
controller's snapshot). Until its loaded offset reaches the quorum's committed offset, what it has
is history, not the present: an old PartitionRecord may name it leader in epoch 0 of a partition
whose leader epoch is now 5. Handing that to the replica manager would make it a leader in epoch 0
(``make_leader`` writes the epoch at the log end, which wipes the newer entries of its leader-epoch
cache) and, on the first full reconcile, delete the logs of topics the partial image does not know
yet. So, as Kafka's MetadataLoader does for its publishers (BrokerMetadataPublisher), nothing is
published until the loaded offset reaches the committed offset learned (from a batch or a heartbeat
answer); then the whole catch-up is published at once, as one delta over the (empty) published
image (or, if a snapshot was loaded meanwhile, as a snapshot: ``delta`` None), so the replica
manager sees the final state of every partition. After that every batch is published as it is
loaded. The offset the broker reports in heartbeats is the published one, so the controller
unfences it (its registration record reached) only after the catch-up. The broker's follower takes
the catch-up's target from the active controller too (its first heartbeat answer, sent right after
registering): the source's own committed offset is not enough, as a standby that restarted from
its local snapshot serves what it has replayed so far, which may be older than what this broker
saw before it restarted (the same hazard, without a crash of the broker).

Which controller to follow (`SourceMonitor`)
--------------------------------------------
Any controller may serve the stream, the active one or a standby (that spreads the load). A standby
cut off from the quorum keeps serving its frozen log and keep-alives, so "the stream is alive" is
not enough. With F = ``controller.quorum.fetch.timeout.ms``, the follower leaves its source when:

1. nothing (not even a keep-alive, which controllers send every F/4 at most) arrived for F;
2. every batch for F/4 said the source knows no leader (``leader_id = -1``): a standby cut off from
   the quorum loses its leader within 1.5 x ``controller.quorum.election.timeout.ms`` and campaigns;
3. the source's committed offset (each batch's ``high_watermark``) stayed below the quorum's for F/4.
   The quorum's committed offset is the highest the broker learned: from the active controller in
   every BrokerHeartbeatResponse (``metadata_high_watermark``), or from any stream. A cut-off standby
   may still name the old leader, but it cannot know what was committed after the cut;
4. a batch names a leader whose epoch is older than a leader epoch already seen: refused at once.
   Only epochs of batches that name a leader count. pysyncobj has no pre-vote, so a cut-off standby
   raises its term at every campaign while it knows no leader; counting those terms would make the
   broker refuse the real leader, whose epoch is lower, for as long as the standby is cut off.

A source is tried again only after the others, in a fixed shuffled rotation; the pause between two
attempts grows with consecutive attempts that delivered nothing and resets after a delivered batch.

Timing bound: a record committed at time t reaches a broker following a cut-off standby by
t + ``broker.heartbeat.interval.ms`` + F/4 (rule 3) + a reconnect, and in any case by the cut time
+ 1.5 x election timeout + F/2 (rule 2) + a reconnect. With Kafka's defaults (heartbeat 2 s, F = 2 s,
election 1 s) both are under 2 x F, which tests/integration/test_metadata_follower_isolation.py checks.
Rule 3's bound needs the heartbeat interval under 1.75 x F; rule 2 holds regardless.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Protocol

import grpc
import structlog

from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common.security import SaslLogin, TlsSettings
from kraftlog.metadata_log import LogEntry, MetadataDelta, MetadataImage, decode_entry, decode_record
from kraftlog.proto import RECONNECT_OPTIONS, controller_pb2, controller_pb2_grpc, open_aio_channel

__all__ = [
    "MetadataFollower",
    "MetadataListener",
    "MetadataLoader",
    "MetadataStream",
    "SourceMonitor",
    "StreamOpener",
]

MetadataListener = Callable[[MetadataDelta | None, MetadataImage, MetadataImage], None]
"""``(delta, new_image, old_image)``; ``delta`` is None when a snapshot was loaded since the previous
call (no delta spans the gap: reconcile everything)."""


class MetadataStream(Protocol):
    """What the follower reads: a FetchMetadata call (``read`` returns ``grpc.aio.EOF`` at the end)."""

    async def read(self) -> Any: ...


StreamOpener = Callable[
    [str, controller_pb2.FetchMetadataRequest], contextlib.AbstractAsyncContextManager[MetadataStream]
]
"""``(controller address, request)`` -> the stream, closed (call cancelled) when the context exits."""


def grpc_stream_opener(tls: TlsSettings | None = None, sasl: SaslLogin | None = None) -> StreamOpener:
    """FetchMetadata streams over gRPC (TLS with ``tls``: the controller listener's settings;
    ``sasl``: this node's login there)."""

    @contextlib.asynccontextmanager
    async def open_stream(address: str, request: controller_pb2.FetchMetadataRequest) -> AsyncIterator[MetadataStream]:
        async with _grpc_stream(address, request, tls, sasl) as call:
            yield call

    return open_stream


@contextlib.asynccontextmanager
async def _grpc_stream(
    address: str,
    request: controller_pb2.FetchMetadataRequest,
    tls: TlsSettings | None = None,
    sasl: SaslLogin | None = None,
) -> AsyncIterator[MetadataStream]:
    async with open_aio_channel(address, options=RECONNECT_OPTIONS, tls=tls, sasl=sasl) as channel:
        call = controller_pb2_grpc.ControllerServiceStub(channel).FetchMetadata(request)
        try:
            yield call
        finally:
            call.cancel()


class SourceMonitor:
    """Rules 1-4 of the module docstring: whether the controller streaming to us is still worth following.

    Pure state over an injected monotonic clock (seconds). `begin` starts a new source; `on_batch`
    and `on_quorum_high_watermark` feed what was learned, in arrival order; `reason_to_leave` says why
    the source should be left now (None: keep it); `seconds_to_next_check` is when that answer may
    change without new input. What was learned about the quorum (its committed offset, the highest
    leader epoch) outlives a source.
    """

    def __init__(self, fetch_timeout_s: float, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic_s) -> None:
        if fetch_timeout_s <= 0:
            raise ValueError(f"fetch timeout must be positive, not {fetch_timeout_s}")
        self.stall_s = fetch_timeout_s
        self.grace_s = fetch_timeout_s / 4
        self._clock = clock
        self.quorum_high_watermark = -1  # highest committed offset learned from anyone
        self.leader_epoch = -1  # highest epoch of a batch that named a leader
        self.source_high_watermark = -1  # the current source's committed offset (-1: it sent nothing yet)
        self._last_message = clock()
        self._leaderless_since: float | None = None
        self._lagging_since: float | None = None

    def begin(self) -> None:
        """A new source: nothing heard from it yet, the stall timer starts now."""
        self._last_message = self._clock()
        self.source_high_watermark = -1
        self._leaderless_since = None
        self._lagging_since = None

    def on_batch(self, *, leader_id: int, leader_epoch: int, high_watermark: int) -> str | None:
        """A batch arrived; returns why it must be refused (rule 4), else None."""
        now = self._clock()
        self._last_message = now
        if leader_id >= 0:
            if leader_epoch < self.leader_epoch:
                return (
                    f"it names leader {leader_id} of epoch {leader_epoch}, older than leader epoch "
                    f"{self.leader_epoch} already seen"
                )
            self.leader_epoch = leader_epoch
            self._leaderless_since = None
        elif self._leaderless_since is None:
            self._leaderless_since = now
        self.source_high_watermark = max(self.source_high_watermark, high_watermark)
        self.quorum_high_watermark = max(self.quorum_high_watermark, high_watermark)
        self._update_lag(now)
        return None

    def on_quorum_high_watermark(self, high_watermark: int) -> None:
        """The active controller's committed offset (a heartbeat answer)."""
        if high_watermark > self.quorum_high_watermark:
            self.quorum_high_watermark = high_watermark
            self._update_lag(self._clock())

    def _update_lag(self, now: float) -> None:
        behind = 0 <= self.source_high_watermark < self.quorum_high_watermark
        if not behind:
            self._lagging_since = None
        elif self._lagging_since is None:
            self._lagging_since = now

    def reason_to_leave(self) -> str | None:
        now = self._clock()
        if now - self._last_message >= self.stall_s:
            return f"no message for {now - self._last_message:.2f}s"
        if self._leaderless_since is not None and now - self._leaderless_since >= self.grace_s:
            return f"it has known no leader for {now - self._leaderless_since:.2f}s"
        if self._lagging_since is not None and now - self._lagging_since >= self.grace_s:
            return (
                f"its committed offset {self.source_high_watermark} has been behind the quorum's "
                f"{self.quorum_high_watermark} for {now - self._lagging_since:.2f}s"
            )
        return None

    def seconds_to_next_check(self) -> float:
        now = self._clock()
        deadlines = [self._last_message + self.stall_s]
        if self._leaderless_since is not None:
            deadlines.append(self._leaderless_since + self.grace_s)
        if self._lagging_since is not None:
            deadlines.append(self._lagging_since + self.grace_s)
        return max(0.0, min(deadlines) - now)


class MetadataLoader:
    """Loads the metadata log and hands it to the listener, not before the initial catch-up.

    Pure and synchronous (the follower drives it; the seeded simulation drives it too). Ordering:
    `load_snapshot` / `replay` load in log order; `publish` then decides. The first `publish` whose
    ``high_watermark`` the loaded offset has reached ends the catch-up and hands over everything
    loaded so far in one call; every later `publish` hands over what was loaded since the previous
    one. ``image`` is what the listener has (the broker acts and answers on it), ``loaded`` what
    was replayed (the stream resumes after it).
    """

    def __init__(self, listener: MetadataListener) -> None:
        self._listener = listener
        self.loaded = MetadataImage.EMPTY
        self.image = MetadataImage.EMPTY  # the published image
        self.caught_up = False
        self._pending: MetadataDelta | None = None  # over `image`: everything replayed since it
        self._replaced = False  # a snapshot was loaded since `image`: no delta spans the gap

    def load_snapshot(self, image: MetadataImage) -> None:
        """A snapshot replaces what was loaded (only one newer than it is loaded)."""
        if image.offset <= self.loaded.offset:
            return
        self.loaded = image
        self._pending = None
        self._replaced = True

    def replay(self, entries: Iterable[LogEntry]) -> int:
        """Replay committed entries in order; those at or below the loaded offset are skipped (a
        new stream may restart inside a batch). Returns how many were replayed."""
        replayed = 0
        try:
            for entry in entries:
                if entry.offset <= self.loaded.offset:
                    continue
                if self._pending is None:
                    self._pending = MetadataDelta(self.loaded)
                self._pending.replay(entry)  # a bad entry raises and leaves the delta as it was
                replayed += 1
        finally:
            if replayed:  # what was replayed before an error stays loaded: the delta holds it
                assert self._pending is not None
                self.loaded = self._pending.apply()
        return replayed

    def publish(self, high_watermark: int) -> bool:
        """Hand what was loaded to the listener if the broker has caught up (its loaded offset
        reached ``high_watermark``, the quorum's committed offset as far as it knows, once).
        Returns whether it has caught up. A listener that raises loses that change: the error goes
        to the caller, and the next publish starts from what was loaded."""
        if not self.caught_up:
            if self.loaded.offset < high_watermark:
                return False
            self.caught_up = True
        if self.loaded is self.image:
            return True
        old, delta = self.image, None if self._replaced else self._pending
        self.image, self._pending, self._replaced = self.loaded, None, False
        self._listener(delta, self.image, old)
        return True


class MetadataFollower:
    """Follows one controller at a time (see the module docstring for which one and when to move).

    ``open_stream`` and ``clock`` are seams for tests; by default a gRPC FetchMetadata call and
    the one system clock's monotonic seconds. With ``catch_up_to_active_controller`` (the broker
    sets it), the initial catch-up also waits for a committed offset from the active controller
    (`note_quorum_high_watermark`, fed by heartbeat answers): a source's own committed offset may
    lag, e.g. a standby that restarted from its local snapshot and is still replaying.
    ``on_caught_up`` runs once, when the initial catch-up ends (the broker heartbeats at once then).
    """

    def __init__(
        self,
        controllers: Sequence[str],
        *,
        broker_id: int,
        listener: MetadataListener,
        broker_epoch: Callable[[], int] = lambda: -1,
        fetch_timeout_ms: int = 2000,
        open_stream: StreamOpener | None = None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic_s,
        rng: random.Random | None = None,
        catch_up_to_active_controller: bool = False,
        on_caught_up: Callable[[], None] = lambda: None,
    ) -> None:
        self.controllers = list(controllers)
        self.broker_id = broker_id
        self.loader = MetadataLoader(self._publish)
        self.leader_id = -1  # the active controller as the serving controller knows it
        self.source: str | None = None  # the controller streaming to us now
        self.monitor = SourceMonitor(fetch_timeout_ms / 1000.0, clock)
        self._listener = listener
        self._broker_epoch = broker_epoch
        self._open_stream = open_stream or _grpc_stream
        self._caught_up = asyncio.Event()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()  # new knowledge about the quorum: re-judge the source now
        self._delivered = False  # the current attempt applied (or skipped as known) at least one batch
        self._catch_up_needs_active = catch_up_to_active_controller
        self._heard_active = False  # a committed offset came from the active controller
        self._on_caught_up = on_caught_up
        self._rng = rng or random.Random()
        self._log = structlog.get_logger(__name__).bind(node_id=broker_id, role="broker")
        self._task: asyncio.Task[None] | None = None

    @property
    def image(self) -> MetadataImage:
        """The image published to the listener: empty until the initial catch-up."""
        return self.loader.image

    @property
    def offset(self) -> int:
        """The last metadata offset published (the broker reports it in heartbeats, so the
        controller unfences it only after the initial catch-up)."""
        return self.loader.image.offset

    @property
    def high_watermark(self) -> int:
        """The quorum's last committed offset as far as this broker knows (-1 before any news)."""
        return self.monitor.quorum_high_watermark

    @property
    def highest_epoch_seen(self) -> int:
        """The highest epoch of a known leader (sent as ``min_epoch``)."""
        return self.monitor.leader_epoch

    def note_quorum_high_watermark(self, high_watermark: int) -> None:
        """The active controller's committed offset, from a heartbeat answer (rule 3; it also sets the
        initial catch-up's target). The follower's task acts on it: this only wakes it."""
        self.monitor.on_quorum_high_watermark(high_watermark)
        self._heard_active = True
        self._wake.set()

    async def wait_caught_up(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._caught_up.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metadata-follower")

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        attempt = 0
        idle_attempts = 0  # consecutive attempts that delivered no batch
        order = list(self.controllers)
        self._rng.shuffle(order)
        while not self._stop.is_set():
            address = order[attempt % len(order)]
            attempt += 1
            self._delivered = False
            try:
                await self._follow(address)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as err:
                self._log.info("metadata_stream_failed", controller=address, code=err.code().name)
            except _LeaveSource as err:
                self._log.warning(
                    "metadata_source_left",
                    controller=address,
                    reason=str(err),
                    offset=self.loader.loaded.offset,
                    quorum_high_watermark=self.high_watermark,
                )
            except Exception:  # a bad batch must not kill the follower: log, try elsewhere
                self._log.exception("metadata_stream_error", controller=address)
            self.source = None
            idle_attempts = 0 if self._delivered else idle_attempts + 1
            if not self._stop.is_set():
                await asyncio.sleep(min(0.05 * idle_attempts, 0.5))

    async def _follow(self, address: str) -> None:
        """Apply batches from ``address`` until the stream ends or a rule says to leave (raises)."""
        request = controller_pb2.FetchMetadataRequest(
            from_offset=self.loader.loaded.offset + 1,
            broker_id=self.broker_id,
            broker_epoch=self._broker_epoch(),
            min_epoch=self.highest_epoch_seen,
        )
        async with self._open_stream(address, request) as stream:
            self.monitor.begin()
            read: asyncio.Future[Any] | None = None
            try:
                while not self._stop.is_set():
                    if read is None:
                        read = asyncio.ensure_future(stream.read())
                    self._wake.clear()
                    woken = asyncio.ensure_future(self._wake.wait())
                    try:
                        await asyncio.wait(
                            {read, woken},
                            timeout=self.monitor.seconds_to_next_check(),
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                    finally:
                        woken.cancel()
                    if read.done():
                        batch, read = read.result(), None
                        if batch is grpc.aio.EOF:
                            return
                        self._apply(batch, address)
                    else:
                        self._maybe_publish()  # woken: the catch-up may have just ended
                    reason = self.monitor.reason_to_leave()
                    if reason is not None:
                        raise _LeaveSource(reason)
            finally:
                if read is not None and not read.done():
                    read.cancel()
                    read.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _apply(self, batch: controller_pb2.MetadataBatch, address: str = "") -> None:
        if batch.error.code:
            raise _LeaveSource(f"{batch.error.name}: {batch.error.message}")
        refused = self.monitor.on_batch(
            leader_id=batch.leader_id, leader_epoch=batch.leader_epoch, high_watermark=batch.high_watermark
        )
        if refused is not None:
            raise _LeaveSource(refused)
        self._delivered = True
        if self.source != address:
            self.source = address
            self._log.info(
                "metadata_source",
                controller=address,
                leader_id=batch.leader_id,
                leader_epoch=batch.leader_epoch,
                high_watermark=batch.high_watermark,
                offset=self.loader.loaded.offset,
            )
        self.leader_id = batch.leader_id
        loader = self.loader
        if batch.snapshot_offset >= 0 and batch.snapshot_offset > loader.loaded.offset:
            records = [decode_record(r) for r in batch.snapshot_records]
            loader.load_snapshot(
                MetadataImage.from_records(
                    records, batch.snapshot_offset, batch.snapshot_epoch, batch.snapshot_timestamp_ms
                )
            )
            self._log.info("metadata_snapshot_loaded", offset=loader.loaded.offset, records=len(records))
        if batch.entries:
            loader.replay(decode_entry(raw) for raw in batch.entries)
        self._maybe_publish()

    def _maybe_publish(self) -> None:
        """Hand the loader's news to the listener, unless the initial catch-up is not over."""
        loader = self.loader
        if not loader.caught_up and self._catch_up_needs_active and not self._heard_active:
            return
        try:
            loader.publish(self.high_watermark)
        finally:  # caught up even if the listener raised: the catch-up is over either way
            if loader.caught_up and not self._caught_up.is_set():
                self._caught_up.set()
                self._log.info("metadata_caught_up", offset=loader.image.offset, high_watermark=self.high_watermark)
                self._on_caught_up()

    def _publish(self, delta: MetadataDelta | None, image: MetadataImage, old: MetadataImage) -> None:
        try:
            self._listener(delta, image, old)
        except Exception:
            self._log.exception("metadata_listener_failed", offset=image.offset)
            raise


class _LeaveSource(Exception):
    """The current source must be left (refused batch, or one of the rules); the message says why."""
