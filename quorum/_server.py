"""The controller process: the quorum, the metadata log files, the image, and the gRPC services.

One asyncio loop owns everything here. Committed entries arrive from the Raft seam in order
(`MetadataQuorum.on_committed`) and are (1) replayed into a delta of the image, then (2) written to
the metadata log segments, idempotently by offset, then (3) the new image is published and announced
to FetchMetadata streams. Every
controller does this, active or not: standbys change state only by replaying committed records.

The active controller is the Raft leader that has committed a NoOpRecord in its own epoch: until
then it answers NOT_CONTROLLER, because its image may still lack entries a previous leader
committed. Writes are serialised by one lock: a handler computes ``(records, response)`` from the
image, every record is replay-validated against that image before anything is proposed, the
records are proposed under the controller's epoch, and the response is sent only after they are
committed and applied (persist before acknowledge).

Deciding on a complete image (what KRaft gets from its in-memory state ahead of the commit point):
the active controller decides against the committed image plus its own records not yet committed.
Under the write lock at most one proposal is in flight and a decision waits for it, so that set is
empty whenever a round decides -- except after a proposal whose outcome is unknown (it timed out:
the batch may still commit in this epoch). Then, before the next decision, the controller proposes
a NoOp barrier in the same epoch and waits for it: the Raft log is ordered, so once the barrier is
applied every earlier batch of this epoch is applied too (or was refused and never will be). A
barrier that fails fails the round, and the next round tries again; a new epoch needs no barrier
(its own NoOp, committed before it became active, is one). So a retried CreateTopics sees the first
attempt's TopicRecord whenever that committed, and answers TOPIC_ALREADY_EXISTS.

A committed record that cannot be replayed is a controller bug or a corrupt log. It is never
skipped: the controller logs one ``metadata_replay_failed`` line (offset, record type, reason),
writes nothing of that batch, and stops the node (``fatal_error``); at start the same record stops
the node the same way. ``kraftlog quorum check`` finds it offline, ``kraftlog quorum repair``
rebuilds the log up to the record before it (on every controller).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import structlog
from prometheus_client import CollectorRegistry

from kraftlog.common import METADATA_PARTITION_DIR, RAFT_DIR, backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import (
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataLogWriter,
    MetadataRecord,
    NoOpRecord,
    decode_entry,
    decode_record,
    encode_entry,
    encode_record,
    latest_snapshot,
    oldest_available_offset,
    read_log_dir,
    read_snapshot,
    write_snapshot,
)
from kraftlog.metadata_log._image import MetadataReplayError
from kraftlog.metadata_log._log_files import delete_covered_segments
from kraftlog.proto import admin_pb2, admin_pb2_grpc, controller_pb2, controller_pb2_grpc, errors_pb2

from . import _controller as ctl
from ._metrics import ControllerStateCollector
from ._raft import MAX_PROPOSAL_BYTES

__all__ = ["ControllerServer", "METADATA_PARTITION_DIR", "MetadataReplayFailure", "raft_address"]

_TAIL_ENTRIES = 50_000  # committed entries kept in memory for FetchMetadata
_STREAM_BATCH = 2_000  # entries per MetadataBatch
_KEEPALIVE_S = 1.0
_FENCE_CHECK_S = 0.25
_GROUP_COMMIT_MAX = 500  # requests folded into one proposal
_STOP_TASKS_S = 5.0  # cancelled tasks get this long to finish at stop

_log = structlog.get_logger(__name__)


def raft_address(host: str, port: int, offset: int) -> tuple[str, int]:
    """The pysyncobj transport of a voter listens next to its gRPC port."""
    return host, port + offset


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataReplayFailure(Exception):
    """A committed metadata record that this controller cannot replay: the node must stop.

    The message names the offset, the record type and the reason; it is what the node's last log
    line and its exit status report.
    """

    def __init__(self, offset: int, record_type: str, reason: str) -> None:
        super().__init__(f"cannot replay the committed metadata record at offset {offset} ({record_type}): {reason}")
        self.offset = offset
        self.record_type = record_type
        self.reason = reason


class _AppliedWatch:
    """Wakes coroutines waiting for the image to move. Lock-free on purpose: waiters hold nothing
    while they wait, so a cancelled waiter (stream closed, shutdown) can never keep another from
    waking up or the stop path from finishing."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def advance(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """True once ``predicate()`` holds, False when ``timeout_s`` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._event
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True


class ControllerServer:
    """Controller role of a node: quorum member, metadata log keeper, and (when active) decider."""

    def __init__(
        self,
        config: Any,
        cluster_id: str,
        *,
        quorum_factory: Callable[..., Any] | None = None,
        wall_ms: Callable[[], int] = _wall_ms,
        rng: random.Random | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.node_id: int = config.node_id
        self._wall_ms = wall_ms
        self._rng = rng or random.Random()
        self._log = _log.bind(node_id=self.node_id, role="controller")
        voters = config.quorum_voters
        self.voters: dict[int, tuple[str, int]] = dict(voters)
        host, port = voters[self.node_id]
        self.address = f"{host}:{port}"
        self.metadata_dir = Path(config.metadata_log_dir) / METADATA_PARTITION_DIR
        self.image = MetadataImage.EMPTY
        self._tail: deque[tuple[int, bytes]] = deque()
        self._writer: MetadataLogWriter | None = None
        self._quorum: Any = None
        self._quorum_factory = quorum_factory
        self._applied = _AppliedWatch()
        #: epoch of a proposal whose outcome is unknown; the next decision in it waits for a barrier
        self._uncertain_epoch: int | None = None
        #: set when a committed record cannot be replayed; the node stops (see the module docstring)
        self.fatal_error: MetadataReplayFailure | None = None
        self.fatal = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._write_queue: list[tuple[Any, ...]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._active_epoch: int | None = None
        self._heartbeats = ctl.BrokerHeartbeats()
        self._tasks: list[asyncio.Task[Any]] = []
        self._bytes_since_snapshot = 0
        self._stopping = False
        self.request_timeout_s = config["controller.quorum.request.timeout.ms"] / 1000.0
        # the gauges read this server's state at scrape time; a private registry when the node
        # serves no metrics keeps the wiring the same
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(ControllerStateCollector(self))

    @property
    def quorum(self) -> Any:
        """The Raft seam (`MetadataQuorum`), None before `start`."""
        return self._quorum

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the image from the metadata log files, then join the quorum."""
        self.metadata_dir.mkdir(parents=True, exist_ok=True)
        self._load_image()
        self._writer = MetadataLogWriter(
            self.metadata_dir,
            segment_bytes=self.config["metadata.log.segment.bytes"],
            fsync=self.config["controller.quorum.fsync"],
        )
        loop = asyncio.get_running_loop()
        offset = self.config["controller.quorum.raft.port.offset"]
        raft_voters = {vid: raft_address(h, p, offset) for vid, (h, p) in self.voters.items()}
        password = self.config["controller.quorum.raft.password"]
        factory = self._quorum_factory
        if factory is None:
            from ._raft import MetadataQuorum as factory  # noqa: N813 - a class used as factory
        self._quorum = factory(
            node_id=self.node_id,
            voters=raft_voters,
            data_dir=Path(self.config.metadata_log_dir) / RAFT_DIR,
            password=str(password.value) if password is not None and hasattr(password, "value") else password,
            # the Raft handshake binds connections to this cluster; the port listens on the voter host
            cluster_id=self.cluster_id,
            bind_host=raft_voters[self.node_id][0],
            fsync=self.config["controller.quorum.fsync"],
            election_timeout_ms=self.config["controller.quorum.election.timeout.ms"],
            loop=loop,
            on_committed=self._on_committed,
            on_leader_change=self._on_leader_change,
            last_durable_offset=self.image.offset,
            on_gap=self._on_gap,
            fetch_timeout_ms=self.config["controller.quorum.fetch.timeout.ms"],
            leader_endpoints={vid: f"{h}:{p}" for vid, (h, p) in self.voters.items()},
        )
        await self._quorum.start()
        self._tasks.append(asyncio.create_task(self._periodic(), name="controller-periodic"))
        self._log.info("controller_started", address=self.address, image_offset=self.image.offset)

    async def stop(self) -> None:
        """Stop deciding, leave the quorum, close the log. Bounded: no step waits on a peer or on a
        lock another task holds (tasks are cancelled, waiters hold nothing, the quorum's own stop
        is bounded)."""
        self._stopping = True
        tasks = [t for t in (*self._tasks, self._drainer) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_STOP_TASKS_S)
        if self._quorum is not None:
            await self._quorum.stop()
        if self._writer is not None:
            self._writer.close()
        self._applied.advance()
        for _h, req, rtype, _x, fut in self._write_queue:
            if not fut.done():
                fut.set_result(
                    _with_error(rtype(), kerr.NotControllerError, "the controller is stopping", self.hint(), req)
                )
        self._write_queue.clear()

    def _load_image(self) -> None:
        snap = latest_snapshot(self.metadata_dir)
        image = MetadataImage.EMPTY
        start = 0
        if snap is not None:
            s = read_snapshot(snap.path)
            image = MetadataImage.from_records(s.records, s.offset, s.epoch, s.timestamp_ms)
            start = s.offset + 1
        delta = MetadataDelta(image)
        count = 0
        for entry in read_log_dir(self.metadata_dir, from_offset=start):
            self._replay_or_fail(delta, entry)
            self._remember(entry)
            count += 1
        self.image = delta.apply() if count else image
        self._log.info(
            "metadata_image_loaded",
            offset=self.image.offset,
            entries_replayed=count,
            snapshot=str(snap.path) if snap else None,
        )

    # ------------------------------------------------------------------ committed entries

    def _remember(self, entry: LogEntry) -> bytes:
        data = encode_entry(entry)
        self._tail.append((entry.offset, data))
        while len(self._tail) > _TAIL_ENTRIES:
            self._tail.popleft()
        return data

    def _replay_or_fail(self, delta: MetadataDelta, entry: LogEntry) -> None:
        """Replay one committed entry; a record that does not replay stops the node (never skipped)."""
        try:
            delta.replay(entry)
        except MetadataReplayError as err:
            failure = MetadataReplayFailure(entry.offset, type(entry.record).__name__, str(err))
            self._log.critical(
                "metadata_replay_failed",
                offset=entry.offset,
                epoch=entry.epoch,
                record_type=failure.record_type,
                reason=failure.reason,
                remedy="kraftlog quorum check / kraftlog quorum repair",
            )
            self.fatal_error = failure
            self.fatal.set()
            raise failure from err

    def _on_committed(self, entries: list[LogEntry]) -> None:
        """Replay, write, announce -- each entry once (the Raft journal replays old entries at every
        restart: anything at or below the image offset is already here). Replay comes first so that
        a record the image refuses never reaches the segment files: the node stops instead."""
        if self.fatal_error is not None:
            raise self.fatal_error
        fresh = [e for e in entries if e.offset > self.image.offset]
        if not fresh:
            return
        assert self._writer is not None
        delta = MetadataDelta(self.image)
        for e in fresh:
            self._replay_or_fail(delta, e)
        self._writer.append(fresh)
        for e in fresh:
            self._bytes_since_snapshot += len(self._remember(e))
        self.image = delta.apply()
        self._applied.advance()
        if self._bytes_since_snapshot >= self.config["metadata.log.max.record.bytes.between.snapshots"]:
            self.take_snapshot()

    async def _on_gap(self, first_missing: int, first_available: int) -> None:
        """Entries this controller never received were compacted out of the Raft log (it was down
        while the others moved far ahead): fetch them, or a snapshot covering them, from another
        controller's metadata log over FetchMetadata, then let the quorum continue.

        Runs on the event loop without blocking it (the quorum holds delivery until it returns);
        each attempt is bounded by the request timeout, and the quorum retries a failed fill."""
        target = first_available - 1
        errors = []
        for vid, (host, port) in sorted(self.voters.items()):
            if vid == self.node_id or self._stopping:
                continue
            try:
                async with grpc.aio.insecure_channel(f"{host}:{port}") as channel:
                    stub = controller_pb2_grpc.ControllerServiceStub(channel)
                    call = stub.FetchMetadata(
                        controller_pb2.FetchMetadataRequest(from_offset=self.image.offset + 1, broker_id=-1)
                    )
                    try:
                        while self.image.offset < target:
                            batch = await asyncio.wait_for(call.read(), max(self.request_timeout_s, _KEEPALIVE_S * 2))
                            if batch is grpc.aio.EOF or batch.keep_alive:
                                break
                            if batch.snapshot_offset >= 0 and batch.snapshot_offset > self.image.offset:
                                self._install_snapshot(
                                    [decode_record(r) for r in batch.snapshot_records],
                                    batch.snapshot_offset,
                                    batch.snapshot_epoch,
                                    batch.snapshot_timestamp_ms,
                                )
                            if batch.entries:
                                self._on_committed([decode_entry(e) for e in batch.entries])
                    finally:
                        call.cancel()
            except (TimeoutError, grpc.aio.AioRpcError) as err:
                errors.append(f"{vid}: {err.code().name if isinstance(err, grpc.aio.AioRpcError) else 'TIMEOUT'}")
                continue
            if self.image.offset >= target:
                self._log.warning(
                    "metadata_gap_filled", first_missing=first_missing, first_available=first_available, source=vid
                )
                return
        raise RuntimeError(f"no controller could serve metadata offsets {first_missing}..{target}: {errors}")

    def _install_snapshot(self, records: list[MetadataRecord], offset: int, epoch: int, timestamp_ms: int) -> None:
        """Replace the local metadata log with a snapshot from another controller (persist first)."""
        assert self._writer is not None
        write_snapshot(self.metadata_dir, offset, epoch, timestamp_ms, records)
        self._writer.truncate_fully_and_start_at(offset + 1)
        self.image = MetadataImage.from_records(records, offset, epoch, timestamp_ms)
        self._tail.clear()
        self._applied.advance()
        self._log.warning("metadata_snapshot_installed", offset=offset, epoch=epoch)

    def take_snapshot(self) -> Path | None:
        """Write a snapshot of the current image and delete segments it covers beyond retention."""
        if self.image.offset < 0:
            return None
        path = write_snapshot(
            self.metadata_dir, self.image.offset, self.image.epoch, self.image.timestamp_ms, self.image.to_records()
        )
        self._bytes_since_snapshot = 0
        delete_covered_segments(self.metadata_dir, self.image.offset, self.config["metadata.max.retention.bytes"])
        self._log.info("metadata_snapshot_written", path=str(path), offset=self.image.offset)
        return path

    def _on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self._active_epoch = None
        self._uncertain_epoch = None
        self._log.info("controller_leader_changed", leader_id=leader_id, epoch=epoch)
        self._tasks = [t for t in self._tasks if not t.done()]
        if leader_id == self.node_id:
            self._tasks.append(asyncio.get_running_loop().create_task(self._become_active(epoch)))

    async def _become_active(self, epoch: int) -> None:
        """Commit a NoOp in the new epoch; only then is the image known to be complete.

        Retries with back-off for as long as this node leads ``epoch``: giving up would leave the
        quorum with a Raft leader that never acts, i.e. no active controller until it loses
        leadership by other means (which a healthy leader never does)."""
        attempt = 0
        while not self._stopping:
            if self._quorum.epoch != epoch or self._quorum.leader_id != self.node_id:
                return
            try:
                async with self._write_lock:
                    await self._propose([NoOpRecord()], epoch)
                    self._heartbeats.reset(self.image.cluster.broker_ids(), self._wall_ms())
                    self._active_epoch = epoch
                    self._uncertain_epoch = None
                self._log.info("controller_active", epoch=epoch, offset=self.image.offset)
                return
            except kerr.KafkaError as err:
                delay_ms = backoff_ms(
                    attempt,
                    base_ms=self.config["controller.quorum.retry.backoff.ms"],
                    max_ms=self.request_timeout_s * 1000 / 2,
                    rng=self._rng,
                )
                attempt += 1
                self._log.warning(
                    "noop_commit_failed", epoch=epoch, error=str(err), attempt=attempt, retry_in_ms=round(delay_ms)
                )
                await asyncio.sleep(delay_ms / 1000.0)

    async def _propose(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        """Propose and wait until this node applied the records. A timeout leaves the outcome
        unknown: the epoch is marked so the next decision first waits for a barrier."""
        try:
            last = await self._quorum.propose(records, epoch=epoch, timeout_s=self.request_timeout_s)
        except kerr.RequestTimedOutError:
            self._uncertain_epoch = epoch
            raise
        if not await self._applied.wait(lambda: self.image.offset >= last or self._stopping, self.request_timeout_s):
            self._uncertain_epoch = epoch
            raise kerr.RequestTimedOutError("metadata records were committed but not applied in time")
        return last

    async def _settle(self, epoch: int) -> None:
        """Before deciding in ``epoch``: if an earlier proposal's outcome is unknown, commit a NoOp
        barrier so the image holds every batch of this epoch that will ever commit (see the module
        docstring). Raises what the barrier's proposal raised."""
        if self._uncertain_epoch is None:
            return
        if self._uncertain_epoch != epoch:
            self._uncertain_epoch = None  # a newer epoch's own NoOp already settled it
            return
        await self._propose([NoOpRecord()], epoch)
        self._uncertain_epoch = None
        self._log.info("metadata_outcome_settled", epoch=epoch, offset=self.image.offset)

    # ------------------------------------------------------------------ the active controller

    @property
    def is_active(self) -> bool:
        return (
            self._active_epoch is not None
            and self._quorum is not None
            and self._quorum.is_leader
            and self._quorum.epoch == self._active_epoch
        )

    def hint(self) -> controller_pb2.ControllerHint:
        leader = self._quorum.leader_id if self._quorum is not None else None
        if leader is None:
            return controller_pb2.ControllerHint(
                leader_id=-1, leader_address="", leader_epoch=self._quorum.epoch if self._quorum else -1
            )
        host, port = self.voters[leader]
        return controller_pb2.ControllerHint(
            leader_id=leader, leader_address=f"{host}:{port}", leader_epoch=self._quorum.epoch
        )

    def context(self) -> ctl.ControllerContext:
        return ctl.ControllerContext(
            cluster_id=self.cluster_id,
            config=self.config,
            now_ms=self._wall_ms(),
            rng=self._rng,
            next_offset=self.image.offset + 1,
        )

    async def run_write(
        self, handler: Callable[..., tuple[list[MetadataRecord], Any]], request: Any, response_type: type, *extra: Any
    ) -> Any:
        """Run a handler on the active controller: propose its records, answer after they apply.

        Group commit: requests that arrive while a proposal is in flight queue up; the next round
        runs them one after another, each against the image the previous ones will produce, and
        proposes all their records as one batch. Each still sees the effects of the ones before it,
        and none is answered before the batch is committed and applied.
        """
        if not self.is_active:
            return _with_error(
                response_type(), kerr.NotControllerError, "not the active controller", self.hint(), request
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._write_queue.append((handler, request, response_type, extra, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain_writes())
        return await future

    async def _drain_writes(self) -> None:
        while self._write_queue:
            async with self._write_lock:
                batch = self._write_queue[:_GROUP_COMMIT_MAX]
                del self._write_queue[: len(batch)]
                await self._commit_group(batch)

    async def _commit_group(self, batch: list[tuple[Any, ...]]) -> None:
        def fail_all(err: type[kerr.KafkaError], message: str) -> None:
            for _h, req, rtype, _x, fut in batch:
                if not fut.done():
                    fut.set_result(_with_error(rtype(), err, message, self.hint(), req))

        if not self.is_active:
            fail_all(kerr.NotControllerError, "not the active controller")
            return
        epoch = self._active_epoch
        assert epoch is not None
        try:
            await self._settle(epoch)
        except kerr.KafkaError as err:
            fail_all(type(err), f"an earlier metadata proposal's outcome is still unknown: {err}")
            return
        image = self.image
        base_offset = image.offset + 1  # nothing of ours is in flight: the batch starts here
        records: list[MetadataRecord] = []
        responses: list[Any] = []
        batch_bytes = 0
        for index, (handler, request, rtype, extra, _fut) in enumerate(batch):
            ctx = self.context()
            ctx.next_offset = base_offset + len(records)  # KRaft's broker epoch is this offset
            try:
                recs, response = handler(image, request, ctx, *extra)
                # Replay-validate before proposing: a record the image refuses would stop every
                # controller after commit.
                image = ctl.apply_records(image, recs) if recs else image
            except Exception as err:  # a handler bug fails its own request, never the group
                self._log.exception("controller_handler_failed", handler=getattr(handler, "__name__", "?"))
                response, recs = _with_error(rtype(), kerr.UnknownServerError, str(err), self.hint(), request), []
            size = sum(len(encode_record(r)) + 5 for r in recs)
            if records and batch_bytes + size > MAX_PROPOSAL_BYTES:
                # one proposal is capped: this request and the rest wait for the next round,
                # decided again against the image this round produces
                self._write_queue[:0] = batch[index:]
                batch = batch[:index]
                break
            batch_bytes += size
            records += recs
            responses.append(response)
        if records:
            try:
                await self._propose(records, epoch)
            except kerr.KafkaError as err:
                fail_all(type(err), str(err))
                return
        for (_h, _r, _t, _x, fut), response in zip(batch, responses, strict=False):
            if not fut.done():
                fut.set_result(response)

    async def run_read(self, fn: Callable[[], Any], response_type: type, request: Any = None) -> Any:
        if not self.is_active:
            return _with_error(
                response_type(), kerr.NotControllerError, "not the active controller", self.hint(), request
            )
        return fn()

    async def _periodic(self) -> None:
        """Active-controller duties on a timer: fence silent brokers, rebalance preferred leaders,
        finish reassignments."""
        last_rebalance = time.monotonic()
        while not self._stopping:
            await asyncio.sleep(_FENCE_CHECK_S)
            if not self.is_active:
                continue
            try:
                await self._run_internal(
                    lambda image, _req, ctx: (ctl.fence_expired_brokers(image, ctx, self._heartbeats), None)
                )
                await self._run_internal(lambda image, _req, ctx: (ctl.complete_reassignments(image, ctx), None))
                interval = self.config["leader.imbalance.check.interval.seconds"]
                if self.config["auto.leader.rebalance.enable"] and time.monotonic() - last_rebalance >= interval:
                    last_rebalance = time.monotonic()
                    await self._run_internal(
                        lambda image, _req, ctx: (ctl.preferred_leader_rebalance(image, ctx), None)
                    )
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a timer must survive a failed round
                self._log.warning("controller_periodic_failed", error=str(err))

    async def _run_internal(self, handler: Callable[..., tuple[list[MetadataRecord], Any]]) -> None:
        async with self._write_lock:
            if not self.is_active:
                return
            epoch = self._active_epoch
            assert epoch is not None
            await self._settle(epoch)
            records, _ = handler(self.image, None, self.context())
            if records:
                ctl.apply_records(self.image, records)  # replay-validate before proposing
                await self._propose(records, epoch)

    # ------------------------------------------------------------------ FetchMetadata

    def entries_from(self, offset: int, limit: int) -> list[bytes]:
        """Committed entries from ``offset`` (memory first, then the segment files)."""
        if self._tail and self._tail[0][0] <= offset:
            first = self._tail[0][0]
            out = []
            for i in range(offset - first, len(self._tail)):
                out.append(self._tail[i][1])
                if len(out) >= limit:
                    break
            return out
        out = []
        for entry in read_log_dir(self.metadata_dir, from_offset=offset):
            if entry.offset > self.image.offset:
                break
            out.append(encode_entry(entry))
            if len(out) >= limit:
                break
        return out

    async def stream_metadata(
        self, request: controller_pb2.FetchMetadataRequest
    ) -> AsyncIterator[controller_pb2.MetadataBatch]:
        """Committed entries from ``request.from_offset`` (a snapshot first when they are gone), then
        keep-alives when caught up. Every batch carries this controller's committed offset and the
        leader it knows (-1 when none): a broker judges its source by both (broker._metadata_follower).
        Keep-alives come every fetch timeout / 4 at most, so a broker that leaves a silent source
        after one fetch timeout never leaves a healthy one."""
        keepalive_s = min(_KEEPALIVE_S, self.config["controller.quorum.fetch.timeout.ms"] / 4000.0)
        offset = max(request.from_offset, 0)
        oldest = oldest_available_offset(self.metadata_dir)
        if offset <= self.image.offset and (oldest is None or offset < oldest):
            snap = latest_snapshot(self.metadata_dir)
            if snap is not None:
                s = read_snapshot(snap.path)
                yield self._batch(
                    snapshot_records=[encode_record(r) for r in s.records],
                    snapshot_offset=s.offset,
                    snapshot_epoch=s.epoch,
                    snapshot_timestamp_ms=s.timestamp_ms,
                )
                offset = s.offset + 1
        while not self._stopping:
            if offset <= self.image.offset:
                entries = self.entries_from(offset, _STREAM_BATCH)
                if entries:
                    offset += len(entries)
                    yield self._batch(entries=entries)
                    continue
            await self._applied.wait(lambda offset=offset: self.image.offset >= offset or self._stopping, keepalive_s)
            if self.image.offset < offset:
                yield self._batch(keep_alive=True)

    def _batch(self, **kwargs: Any) -> controller_pb2.MetadataBatch:
        hint = self.hint()
        kwargs.setdefault("snapshot_offset", -1)
        return controller_pb2.MetadataBatch(
            high_watermark=self.image.offset, leader_id=hint.leader_id, leader_epoch=hint.leader_epoch, **kwargs
        )

    # ------------------------------------------------------------------ gRPC

    def add_to_server(self, server: grpc.aio.Server) -> None:
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(_ControllerService(self), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(_AdminService(self), server)

    def describe_quorum(self) -> admin_pb2.DescribeQuorumResponse:
        R = admin_pb2.DescribeQuorumResponse
        status = self._quorum.status()
        voters = []
        for v in status.voters:
            voters.append(
                R.Replica(
                    replica_id=v.voter_id,
                    log_end_offset=v.log_end_offset,
                    last_fetch_timestamp_ms=v.last_fetch_timestamp_ms,
                    last_caught_up_timestamp_ms=v.last_caught_up_timestamp_ms,
                )
            )
        return R(
            error=ctl.error_pb(),
            leader_id=status.leader_id if status.leader_id is not None else -1,
            leader_epoch=status.epoch,
            high_watermark=status.committed_offset,
            voters=voters,
            controller=self.hint(),
        )


def _with_error(
    response: Any, err: type[kerr.KafkaError], message: str, hint: controller_pb2.ControllerHint, request: Any = None
) -> Any:
    """Put ``err`` wherever the response type carries errors — the top-level error, or one result
    per item of the request for responses that only have per-item errors — plus the hint."""
    e = errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)
    fields = response.DESCRIPTOR.fields_by_name
    if "error" in fields:
        response.error.CopyFrom(e)
    if "controller" in fields:
        response.controller.CopyFrom(hint)
    if request is None:
        return response
    if isinstance(response, admin_pb2.CreateTopicsResponse):
        response.topics.extend(response.Result(name=t.name, error=e) for t in request.topics)
    elif isinstance(response, admin_pb2.DeleteTopicsResponse):
        response.topics.extend(
            [response.Result(name=n, error=e) for n in request.names]
            + [response.Result(topic_id=i, error=e) for i in request.topic_ids]
        )
    elif isinstance(response, admin_pb2.CreatePartitionsResponse):
        response.results.extend(response.Result(name=t.name, error=e) for t in request.topics)
    elif isinstance(response, (admin_pb2.IncrementalAlterConfigsResponse, admin_pb2.DescribeConfigsResponse)):
        response.results.extend(response.Result(resource=r.resource, error=e) for r in request.resources)
    elif isinstance(response, admin_pb2.DescribeTopicsResponse):
        response.topics.extend(response.Topic(name=n, error=e) for n in request.names)
    return response


class _ControllerService(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, server: ControllerServer) -> None:
        self.s = server

    async def RegisterBroker(self, request, context):  # noqa: N802 - gRPC method names
        return await self.s.run_write(
            ctl.register_broker, request, controller_pb2.RegisterBrokerResponse, self.s._heartbeats
        )

    async def BrokerHeartbeat(self, request, context):  # noqa: N802
        return await self.s.run_write(
            ctl.broker_heartbeat, request, controller_pb2.BrokerHeartbeatResponse, self.s._heartbeats
        )

    async def AlterPartition(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.alter_partition, request, controller_pb2.AlterPartitionResponse)

    async def AllocateProducerIds(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.allocate_producer_ids, request, controller_pb2.AllocateProducerIdsResponse)

    async def FetchMetadata(self, request, context):  # noqa: N802
        async for batch in self.s.stream_metadata(request):
            yield batch


class _AdminService(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self, server: ControllerServer) -> None:
        self.s = server

    async def CreateTopics(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.create_topics, request, admin_pb2.CreateTopicsResponse)

    async def DeleteTopics(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.delete_topics, request, admin_pb2.DeleteTopicsResponse)

    async def CreatePartitions(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.create_partitions, request, admin_pb2.CreatePartitionsResponse)

    async def ElectLeaders(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.elect_leaders, request, admin_pb2.ElectLeadersResponse)

    async def AlterPartitionReassignments(self, request, context):  # noqa: N802
        return await self.s.run_write(
            ctl.alter_partition_reassignments, request, admin_pb2.AlterPartitionReassignmentsResponse
        )

    async def ListPartitionReassignments(self, request, context):  # noqa: N802
        return await self.s.run_read(
            lambda: ctl.list_partition_reassignments(self.s.image, request, self.s.context())[1],
            admin_pb2.ListPartitionReassignmentsResponse,
        )

    async def DescribeConfigs(self, request, context):  # noqa: N802
        return await self.s.run_read(
            lambda: ctl.describe_configs(self.s.image, request, self.s.context())[1],
            admin_pb2.DescribeConfigsResponse,
            request,
        )

    async def IncrementalAlterConfigs(self, request, context):  # noqa: N802
        return await self.s.run_write(ctl.incremental_alter_configs, request, admin_pb2.IncrementalAlterConfigsResponse)

    async def DescribeCluster(self, request, context):  # noqa: N802
        return await self.s.run_read(
            lambda: ctl.describe_cluster(self.s.image, self.s.context(), self.s.node_id),
            admin_pb2.DescribeClusterResponse,
        )

    async def DescribeQuorum(self, request, context):  # noqa: N802
        return await self.s.run_read(self.s.describe_quorum, admin_pb2.DescribeQuorumResponse)

    async def CreateMetadataSnapshot(self, request, context):  # noqa: N802
        path = self.s.take_snapshot()
        image = self.s.image
        return admin_pb2.CreateMetadataSnapshotResponse(
            error=ctl.error_pb(),
            node_id=self.s.node_id,
            snapshot_offset=image.offset if path else -1,
            snapshot_epoch=image.epoch if path else -1,
            path=str(path) if path else "",
        )

    async def DescribeTopics(self, request, context):  # noqa: N802
        return await self.s.run_read(
            lambda: ctl.describe_topics(self.s.image, request), admin_pb2.DescribeTopicsResponse, request
        )
