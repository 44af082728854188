"""The broker's copy of the metadata log: a FetchMetadata stream from any controller.

Controllers serve only committed records, so whatever arrives here is applied at once: a snapshot
replaces the image, entries are replayed into a `MetadataDelta`, and each applied batch is handed to
the listener as ``(delta, image)`` — the replica manager turns it into become-leader /
become-follower / stop / delete decisions. When a controller dies or its stream stalls, the
follower moves to another controller and resumes from the next offset it needs. A stream whose
controller epoch is older than one this broker already saw is refused: that controller was cut off
from the quorum and may lag behind what the broker has already acted on.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import grpc
import structlog

from metadata_log import MetadataDelta, MetadataImage, decode_entry, decode_record
from proto import RECONNECT_OPTIONS, controller_pb2, controller_pb2_grpc

__all__ = ["MetadataFollower", "MetadataListener"]

MetadataListener = Callable[[MetadataDelta | None, MetadataImage, MetadataImage], None]
"""``(delta, new_image, old_image)``; ``delta`` is None when a snapshot replaced the image."""

_STALL_S = 5.0  # no message (not even a keep-alive) for this long: try another controller


class MetadataFollower:
    def __init__(self, controllers: Sequence[str], *, broker_id: int, listener: MetadataListener,
                 broker_epoch: Callable[[], int] = lambda: -1) -> None:
        self.controllers = list(controllers)
        self.broker_id = broker_id
        self.image = MetadataImage.EMPTY
        self.highest_epoch_seen = -1
        self.high_watermark = -1  # the serving controller's last committed offset
        self.leader_id = -1  # the active controller as the serving controller knows it
        self._listener = listener
        self._broker_epoch = broker_epoch
        self._caught_up = asyncio.Event()
        self._stop = asyncio.Event()
        self._rng = random.Random()
        self._log = structlog.get_logger(__name__).bind(node_id=broker_id, role="broker")
        self._task: asyncio.Task[None] | None = None

    @property
    def offset(self) -> int:
        """The last metadata offset applied (the broker reports it in heartbeats)."""
        return self.image.offset

    async def wait_caught_up(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._caught_up.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metadata-follower")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        attempt = 0
        order = list(self.controllers)
        self._rng.shuffle(order)
        while not self._stop.is_set():
            address = order[attempt % len(order)]
            attempt += 1
            try:
                await self._follow(address)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as err:
                self._log.info("metadata_stream_failed", controller=address, code=err.code().name)
            except _StaleController as err:
                self._log.warning("metadata_stream_refused", controller=address, reason=str(err))
            except Exception:  # a bad batch must not kill the follower: log, try elsewhere
                self._log.exception("metadata_stream_error", controller=address)
            await asyncio.sleep(min(0.05 * attempt, 0.5))

    async def _follow(self, address: str) -> None:
        async with grpc.aio.insecure_channel(address, options=list(RECONNECT_OPTIONS)) as channel:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            call = stub.FetchMetadata(controller_pb2.FetchMetadataRequest(
                from_offset=self.image.offset + 1, broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
                min_epoch=self.highest_epoch_seen))
            try:
                while not self._stop.is_set():
                    batch = await asyncio.wait_for(call.read(), _STALL_S)
                    if batch is grpc.aio.EOF:
                        return
                    self._apply(batch)
            finally:
                call.cancel()

    def _apply(self, batch: controller_pb2.MetadataBatch) -> None:
        if batch.error.code:
            raise _StaleController(f"{batch.error.name}: {batch.error.message}")
        if batch.leader_epoch < self.highest_epoch_seen:
            raise _StaleController(
                f"stream epoch {batch.leader_epoch} is older than epoch {self.highest_epoch_seen} already seen")
        self.highest_epoch_seen = max(self.highest_epoch_seen, batch.leader_epoch)
        self.high_watermark = max(self.high_watermark, batch.high_watermark)
        self.leader_id = batch.leader_id
        old = self.image
        if batch.snapshot_offset >= 0 and batch.snapshot_offset > self.image.offset:
            records = [decode_record(r) for r in batch.snapshot_records]
            self.image = MetadataImage.from_records(records, batch.snapshot_offset, batch.snapshot_epoch,
                                                    batch.snapshot_timestamp_ms)
            self._log.info("metadata_snapshot_loaded", offset=self.image.offset, records=len(records))
            self._publish(None, old)
            old = self.image
        if batch.entries:
            delta = MetadataDelta(self.image)
            applied = 0
            for raw in batch.entries:
                entry = decode_entry(raw)
                if entry.offset <= self.image.offset:
                    continue  # already applied (a new stream may restart inside a batch)
                delta.replay(entry)
                applied += 1
            if applied:
                self.image = delta.apply()
                self._publish(delta, old)
        if self.image.offset >= self.high_watermark:
            self._caught_up.set()

    def _publish(self, delta: MetadataDelta | None, old: MetadataImage) -> None:
        try:
            self._listener(delta, self.image, old)
        except Exception:
            self._log.exception("metadata_listener_failed", offset=self.image.offset)
            raise


class _StaleController(Exception):
    pass

