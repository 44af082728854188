"""The controller's side of the metadata log: replaying committed entries (and stopping the node on one
it cannot replay), filling gaps, snapshots, and the FetchMetadata stream brokers follow (part of
`quorum._server.ControllerServer`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from kraftlog.common import Clock
from kraftlog.common.config import NodeConfig
from kraftlog.common.security import ListenerSecurity
from kraftlog.metadata_log import (
    FeatureLevelRecord,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataLogWriter,
    MetadataProvenance,
    MetadataRecord,
    QuorumControlState,
    UnsupportedFeatureLevelError,
    Voter,
    VoterEndpoint,
    VotersRecord,
    check_supported,
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
from kraftlog.metadata_log.image import MetadataReplayError
from kraftlog.metadata_log.log_files import delete_covered_segments
from kraftlog.proto import controller_pb2, controller_pb2_grpc, open_aio_channel
from kraftlog.quorum._controller_services import (
    _KEEPALIVE_S,
    _STREAM_BATCH,
    _TAIL_ENTRIES,
    MetadataReplayFailure,
    _AppliedWatch,
)
from kraftlog.quorum._dynamic_voters import DynamicVoterError, read_bootstrap_voters


class _ControllerLog:
    """Committed entries: replay, gaps, snapshots, and serving them to brokers (FetchMetadata)."""

    # The server's fields and methods this part uses (set in ControllerServer.__init__).
    config: NodeConfig
    node_id: int
    voters: dict[int, tuple[str, int]]
    metadata_dir: Path
    image: MetadataImage
    provenance: MetadataProvenance
    fatal_error: MetadataReplayFailure | None
    fatal: asyncio.Event
    request_timeout_s: float
    _log: Any
    _tail: deque[tuple[int, bytes]]
    _writer: MetadataLogWriter | None
    _applied: _AppliedWatch
    _bytes_since_snapshot: int
    _last_snapshot_at: float
    _clock: Clock
    _stopping: bool
    #: the voter set (and kraft.version) as of ``image.offset``: what every snapshot starts with
    quorum_control: QuorumControlState = QuorumControlState()

    if TYPE_CHECKING:

        def hint(self) -> controller_pb2.ControllerHint: ...

    def _caught_up(self, offset: int) -> bool:
        return self.image.offset >= offset or self._stopping

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
            if isinstance(entry.record, FeatureLevelRecord):  # a level this node cannot run at
                try:
                    check_supported({entry.record.name: entry.record.feature_level})
                except UnsupportedFeatureLevelError as unsupported:
                    raise MetadataReplayError(str(unsupported)) from unsupported
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
        control = self.quorum_control
        for e in fresh:
            self.provenance.observe(e)
            control = control.observe(e.record)
        self.quorum_control = control
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
                security = ListenerSecurity.from_config(self.config, "CONTROLLER")
                login = security.node_login(self.config)
                async with open_aio_channel(f"{host}:{port}", tls=security.tls, sasl=login) as channel:
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
        self.provenance = MetadataProvenance.from_snapshot(records, epoch, timestamp_ms)
        self.quorum_control = QuorumControlState.of(records)
        self._tail.clear()
        self._applied.advance()
        self._log.warning("metadata_snapshot_installed", offset=offset, epoch=epoch)

    def _snapshot_if_due(self, now: float) -> None:
        """Kafka's ``metadata.log.max.snapshot.interval.ms``: records committed since the last
        snapshot get one at the latest that long after it (0 turns the timer off)."""
        interval_ms = self.config["metadata.log.max.snapshot.interval.ms"]
        if interval_ms > 0 and self._bytes_since_snapshot > 0 and now - self._last_snapshot_at >= interval_ms / 1000:
            self.take_snapshot()

    def take_snapshot(self) -> Path | None:
        """Write a snapshot of the current image and delete segments it covers beyond retention."""
        if self.image.offset < 0:
            return None
        records = [*self._snapshot_control().to_records(), *self.image.to_records()]
        path = write_snapshot(self.metadata_dir, self.image.offset, self.image.epoch, self.image.timestamp_ms, records)
        self._bytes_since_snapshot = 0
        self._last_snapshot_at = self._clock.monotonic_s()
        delete_covered_segments(self.metadata_dir, self.image.offset, self.config["metadata.max.retention.bytes"])
        self._log.info("metadata_snapshot_written", path=str(path), offset=self.image.offset)
        return path

    def _snapshot_control(self) -> QuorumControlState:
        """The control records a snapshot starts with (issue 26): the voter set as of the image,
        or -- when the log never held a voter change -- the one this dir was formatted with (Kafka
        keeps that in its bootstrap checkpoint's VotersRecord); nothing for a static quorum."""
        control = self.quorum_control
        if control.voters is not None:
            return control
        try:
            formatted = read_bootstrap_voters(self.config.metadata_log_dir)
        except DynamicVoterError:
            return control
        if formatted is None:
            return control
        voters = tuple(
            Voter(v.node_id, v.directory_id, (VoterEndpoint("CONTROLLER", v.host, v.port),))
            for _vid, v in sorted(formatted.voters.items())
        )
        return QuorumControlState(voters=VotersRecord(voters=voters))

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
        leader it knows (-1 when none): a broker judges its source by both (broker.replica._metadata_follower).
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
            await self._applied.wait(partial(self._caught_up, offset), keepalive_s)
            if self.image.offset < offset:
                yield self._batch(keep_alive=True)

    def _batch(self, **kwargs: Any) -> controller_pb2.MetadataBatch:
        hint = self.hint()
        kwargs.setdefault("snapshot_offset", -1)
        return controller_pb2.MetadataBatch(
            high_watermark=self.image.offset, leader_id=hint.leader_id, leader_epoch=hint.leader_epoch, **kwargs
        )
