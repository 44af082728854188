"""Broker lifecycle towards the controller: register, heartbeat, get unfenced, shut down cleanly.

1. Register with a fresh incarnation id (one per process start) and the broker's listeners, rack
   and log dirs; the answer is the broker epoch.
2. Heartbeat every ``broker.heartbeat.interval.ms`` with the metadata offset applied so far. The
   controller unfences the broker once that offset reaches its registration record. Every answer
   carries the active controller's committed metadata offset, handed to ``on_quorum_high_watermark``
   (the metadata follower judges its source by it).
3. On shutdown, heartbeat with ``want_shutdown`` until the controller answers ``should_shutdown``
   (every leadership moved away), then stop. A registration the controller no longer knows
   (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED) is redone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence

import structlog

from kraftlog.broker._controller_channel import ControllerChannel
from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import SUPPORTED_FEATURES
from kraftlog.proto import controller_pb2

__all__ = ["BrokerLifecycle"]

_REREGISTER = {kerr.StaleBrokerEpochError.error_code, kerr.BrokerIdNotRegisteredError.error_code}


class BrokerLifecycle:
    def __init__(
        self,
        channel: ControllerChannel,
        *,
        broker_id: int,
        cluster_id: str,
        listeners: Sequence[controller_pb2.Endpoint],
        rack: str | None,
        log_dirs: Sequence[str],
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        request_timeout_ms: int = 5000,
        session_timeout_ms: int | None = None,
        on_quorum_high_watermark: Callable[[int], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        previous_broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self._clock = clock  # monotonic seconds: heartbeat send times and the session timeout
        self.channel = channel
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listeners = list(listeners)
        self.rack = rack or ""
        self.log_dirs = list(log_dirs)
        self.interval_s = heartbeat_interval_ms / 1000.0
        self.timeout_s = request_timeout_ms / 1000.0
        # no heartbeat answered for a whole session: the controller has fenced us by now, whether or
        # not we heard it (paused, cut off from the quorum); None: never presume
        self.session_timeout_s = None if session_timeout_ms is None else session_timeout_ms / 1000.0
        self._last_heartbeat_sent_ok = self._clock.monotonic_s()  # send time of the last answered heartbeat
        self._metadata_offset = metadata_offset
        self._on_quorum_high_watermark = on_quorum_high_watermark
        #: the epoch the log dirs' clean-shutdown markers name (-1: the last stop was unclean)
        self._previous_broker_epoch = previous_broker_epoch
        #: the replicas whose log dir failed, by topic id: every heartbeat reports them (the
        #: replica manager's `offline_partitions`, set by the server)
        self.offline_partitions: Callable[[], dict[str, list[int]]] = dict
        self.incarnation_id = str(uuid.uuid4())
        self.broker_epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()
        self.fenced_event = asyncio.Event()  # the opposite of `unfenced`, so either state can be awaited
        self.fenced_event.set()
        self.registered = asyncio.Event()
        #: set when the controller refused the registration because a finalized feature level is
        #: one this build does not support (UNSUPPORTED_VERSION): the node must stop, not retry
        self.unsupported = asyncio.Event()
        self.unsupported_reason = ""
        self._want_shutdown = False
        self._shutdown_granted = asyncio.Event()
        self._wake = asyncio.Event()
        self._stop = False
        self._task: asyncio.Task[None] | None = None
        self._log = structlog.get_logger(__name__).bind(node_id=broker_id, role="broker")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="broker-lifecycle")

    async def stop(self) -> None:
        self._stop = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move every leadership away; True once it says we may stop."""
        self._want_shutdown = True
        self._wake.set()
        try:
            await asyncio.wait_for(self._shutdown_granted.wait(), timeout_s)
            return True
        except TimeoutError:
            self._log.warning("controlled_shutdown_timed_out", timeout_s=timeout_s)
            return False

    def heartbeat_now(self) -> None:
        """Send the next heartbeat at once, not after the interval: this broker's metadata has just
        caught up, so the controller may unfence it now (Kafka's broker does the same)."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stop:
            self._wake.clear()  # before the call: a wake that comes during it is not lost
            self._presume_fenced_after_silence()  # e.g. on waking from a SIGSTOP longer than a session
            try:
                if self.broker_epoch < 0:
                    await self._register()
                else:
                    await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except kerr.KafkaError as err:
                self._log.info("controller_unreachable", error=str(err))
            except Exception:
                self._log.exception("lifecycle_error")
            self._presume_fenced_after_silence()
            delay = 0.1 if self.broker_epoch < 0 else (0.05 if self._want_shutdown else self.interval_s)
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                pass

    async def _register(self) -> None:
        req = controller_pb2.RegisterBrokerRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=self.listeners,
            rack=self.rack,
            log_dirs=self.log_dirs,
            previous_broker_epoch=self._previous_broker_epoch(),
            features=[
                controller_pb2.RegisterBrokerRequest.Feature(
                    name=name, min_supported_version=r.min_version, max_supported_version=r.max_version
                )
                for name, r in sorted(SUPPORTED_FEATURES.items())
            ],
        )
        resp = await self.channel.call("controller", "RegisterBroker", req, timeout_s=self.timeout_s)
        if resp.error.code:
            self._log.warning("registration_refused", error=resp.error.name, message=resp.error.message)
            if resp.error.code == kerr.UnsupportedVersionError.error_code:
                self._log.critical("unsupported_finalized_feature", message=resp.error.message)
                self.unsupported_reason = resp.error.message
                self._stop = True
                self.unsupported.set()
                return
            if resp.error.code == kerr.InconsistentClusterIdError.error_code:
                raise kerr.InconsistentClusterIdError(resp.error.message)
            return
        self.broker_epoch = resp.broker_epoch
        self.registered.set()
        self._log.info("broker_registered", broker_epoch=self.broker_epoch, incarnation_id=self.incarnation_id)
        self._wake.set()

    def _set_fenced(self, fenced: bool) -> None:
        self.fenced = fenced
        if fenced:
            self.unfenced.clear()
            self.fenced_event.set()
        else:
            self.fenced_event.clear()
            self.unfenced.set()

    def _silent_for_a_session(self) -> bool:
        return (
            self.session_timeout_s is not None
            and self._clock.monotonic_s() - self._last_heartbeat_sent_ok > self.session_timeout_s
        )

    def _presume_fenced_after_silence(self) -> None:
        """Fenced from our own point of view once no heartbeat sent within the last session timeout
        was answered: the controller fences a broker it has not heard from for that long, so until a
        new answer says otherwise this broker must not report itself ready."""
        if self.fenced or self.broker_epoch < 0 or not self._silent_for_a_session():
            return
        self._log.warning(
            "broker_presumed_fenced",
            silent_s=round(self._clock.monotonic_s() - self._last_heartbeat_sent_ok, 3),
            session_timeout_s=self.session_timeout_s,
        )
        self._set_fenced(True)

    async def _heartbeat(self) -> None:
        started = self._clock.monotonic_s()
        req = controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self._metadata_offset(),
            want_fence=False,
            want_shutdown=self._want_shutdown,
            offline_partitions=[
                controller_pb2.BrokerHeartbeatRequest.OfflineTopic(topic_id=topic_id, partitions=pids)
                for topic_id, pids in sorted(self.offline_partitions().items())
            ],
        )
        resp = await self.channel.call("controller", "BrokerHeartbeat", req, timeout_s=self.timeout_s)
        if resp.error.code in _REREGISTER:
            self._log.warning("registration_lost", error=resp.error.name)
            self.broker_epoch = -1
            self.registered.clear()
            self.incarnation_id = str(uuid.uuid4())
            self._set_fenced(True)  # a new registration starts fenced
            return
        if resp.error.code:
            self._log.info(
                "heartbeat_failed", error=resp.error.name, elapsed_s=round(self._clock.monotonic_s() - started, 3)
            )
            return
        self._last_heartbeat_sent_ok = max(self._last_heartbeat_sent_ok, started)
        if self._on_quorum_high_watermark is not None:  # only an active controller answers without error
            self._on_quorum_high_watermark(resp.metadata_high_watermark)
        # an "unfenced" sent back more than a session ago (this process was paused meanwhile) no
        # longer holds: stay fenced until a fresh answer
        fenced = resp.is_fenced or self._silent_for_a_session()
        if self.fenced != fenced:
            self._log.info("broker_fencing_changed", fenced=fenced, metadata_offset=req.current_metadata_offset)
        self._set_fenced(fenced)
        if self._want_shutdown and resp.should_shutdown:
            self._shutdown_granted.set()
