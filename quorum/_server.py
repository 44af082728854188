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
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import CollectorRegistry

import kraftlog.quorum.controller as ctl
from kraftlog.common import METADATA_PARTITION_DIR, RAFT_DIR, SYSTEM_CLOCK, Clock, backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.metadata_log import (
    AclGate,
    MetadataDelta,
    MetadataImage,
    MetadataLogWriter,
    MetadataProvenance,
    MetadataRecord,
    NoOpRecord,
    QuorumControlState,
    UnsupportedFeatureLevelError,
    check_supported,
    encode_record,
    latest_snapshot,
    read_log_dir,
    read_snapshot,
)
from kraftlog.proto import admin_pb2, admin_pb2_grpc, controller_pb2, controller_pb2_grpc
from kraftlog.quorum._bootstrap import read_bootstrap_records
from kraftlog.quorum._controller_log import _ControllerLog
from kraftlog.quorum._controller_services import (
    _FENCE_CHECK_S,
    _GROUP_COMMIT_MAX,
    _STOP_TASKS_S,
    MetadataReplayFailure,
    _AdminService,
    _AppliedWatch,
    _ControllerService,
    _log,
    _wall_ms,
    _with_error,
    raft_address,
)
from kraftlog.quorum._describe_quorum import describe_quorum
from kraftlog.quorum._dynamic_voters import read_bootstrap_voters
from kraftlog.quorum._endpoint_update import EndpointReporter
from kraftlog.quorum._kraft_upgrade import kraft_upgrade_problem
from kraftlog.quorum._metrics import ControllerStateCollector
from kraftlog.quorum._quorum_identity import kept_kraft_version, raft_identity, raft_tls
from kraftlog.quorum.raft import MAX_PROPOSAL_BYTES
from kraftlog.storage import read_meta_properties

__all__ = ["ControllerServer", "METADATA_PARTITION_DIR", "MetadataReplayFailure", "raft_address"]


class ControllerServer(_ControllerLog):
    """Controller role of a node: quorum member, metadata log keeper, and (when active) decider."""

    def __init__(
        self,
        config: Any,
        cluster_id: str,
        *,
        quorum_factory: Callable[..., Any] | None = None,
        wall_ms: Callable[[], int] = _wall_ms,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        registry: CollectorRegistry | None = None,
        mutation_quotas: ctl.MutationQuotas | None = None,
        voter_directory_ids: Mapping[int, str] | None = None,
    ) -> None:
        self.config = config
        #: the controller mutation quota (KIP-599) applied to topic creations, deletions and growth
        self.mutation_quotas = mutation_quotas
        self.cluster_id = cluster_id
        self.node_id: int = config.node_id
        self._wall_ms = wall_ms
        self._clock = clock  # monotonic time of the periodic duties (snapshots, rebalance)
        self._rng = rng or random.Random()
        self._log = _log.bind(node_id=self.node_id, role="controller")
        voters = config.quorum_voters
        self.voters: dict[int, tuple[str, int]] = dict(voters)
        #: not a voter at start (issue 26, KIP-853: formatted with --no-initial-controllers): it
        #: replicates as an observer until a voter change adds it
        self.observer = self.node_id not in voters
        own = config.controller_endpoint
        if own is None:
            raise ValueError(f"controller {self.node_id} has no endpoint: list it in 'listeners' as CONTROLLER://")
        host, port = own
        self.address = f"{host}:{port}"
        #: 0: static controller.quorum.voters; 1: the voter set formatted into the metadata log dir
        #: (the quorum's own level, after an upgrade, is `kraft_version`)
        self._configured_kraft_version: int = config.kraft_version
        #: voter id -> its metadata log dir id (KIP-853); empty in a static quorum
        self.voter_directory_ids: dict[int, str] = dict(voter_directory_ids or {})
        if self._configured_kraft_version >= 1 and voter_directory_ids is None:
            formatted = read_bootstrap_voters(config.metadata_log_dir)
            if formatted is not None:
                self.voter_directory_ids = {vid: v.directory_id for vid, v in formatted.voters.items()}
        self.metadata_dir = Path(config.metadata_log_dir) / METADATA_PARTITION_DIR
        self.image = MetadataImage.EMPTY
        self.acl_gate = AclGate(lambda: self.image, config)  # authorizes every request of its listener
        self.provenance = MetadataProvenance()  # facts about the entries behind the image (metadata tree)
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
        self.heartbeats = ctl.BrokerHeartbeats()
        self._tasks: list[asyncio.Task[Any]] = []
        self._bytes_since_snapshot = 0
        self._last_snapshot_at = self._clock.monotonic_s()  # or the start: metadata.log.max.snapshot.interval.ms
        self._stopping = False
        self.request_timeout_s = config["controller.quorum.request.timeout.ms"] / 1000.0
        # the gauges read this server's state at scrape time; a private registry when the node
        # serves no metrics keeps the wiring the same
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(ControllerStateCollector(self))

    @property
    def kraft_version(self) -> int:
        """The quorum's kraft.version: 1 when formatted dynamic or when the committed voter set is
        dynamic (a static quorum upgraded at run time, `quorum._kraft_upgrade`), else 0."""
        quorum = self._quorum
        upgraded = int(getattr(quorum, "kraft_version", 0)) if quorum is not None else 0
        return max(self._configured_kraft_version, upgraded)

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
        own_host, own_port = self.address.rsplit(":", 1)
        own_raft = raft_address(own_host, int(own_port), offset)
        password = self.config["controller.quorum.raft.password"]
        factory: Callable[..., Any]
        extra: dict[str, Any] = {}
        if self._quorum_factory is not None:
            factory = self._quorum_factory
        else:
            from kraftlog.quorum.raft import MetadataQuorum

            factory = MetadataQuorum
            # per-node Raft identity (node-key mode) or None (password mode); a bad combination fails
            # here. A dynamic quorum's voters' keys also come from the voter set this node kept.
            # a static quorum upgraded to kraft.version 1 runs dynamic from the voter set it kept
            dynamic = self.kraft_version >= 1 or kept_kraft_version(self.config.metadata_log_dir) >= 1
            extra["identity"] = raft_identity(
                self.config, node_id=self.node_id, voter_ids=set(raft_voters), dynamic=dynamic
            )
            # the CONTROLLER listener's TLS secures the Raft port too, each certificate bound to its node id
            extra["tls"] = raft_tls(self.config)
            meta = read_meta_properties(Path(self.config.metadata_log_dir))
            extra["own_directory_id"] = meta.directory_id if meta is not None else None
            extra["controller_port_offset"] = offset
            extra["voter_records"] = True
            if dynamic:
                extra["directory_ids"] = dict(self.voter_directory_ids)
                extra["admit_observers"] = True
                extra["listen_endpoint" if not self.observer else "observer_endpoint"] = own_raft
        self._quorum = factory(
            **extra,
            node_id=self.node_id,
            voters=raft_voters,
            data_dir=Path(self.config.metadata_log_dir) / RAFT_DIR,
            password=str(password.value) if password is not None and hasattr(password, "value") else password,
            # the Raft handshake binds connections to this cluster; the port listens on the voter host
            cluster_id=self.cluster_id,
            bind_host=own_raft[0],
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
        self._endpoint_reporter = EndpointReporter(self)
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
            self.provenance = MetadataProvenance.from_snapshot(s.records, s.epoch, s.timestamp_ms)
            self.quorum_control = QuorumControlState.of(s.records)
            start = s.offset + 1
            try:  # a finalized level this build cannot run at: refuse to start, naming it
                check_supported(image.features.levels, f"snapshot {snap.path.name}")
            except UnsupportedFeatureLevelError as err:
                self._log.critical("unsupported_finalized_feature", reason=str(err))
                self.fatal_error = MetadataReplayFailure(s.offset, "FeatureLevelRecord", str(err))
                raise self.fatal_error from err
        delta = MetadataDelta(image)
        count = 0
        for entry in read_log_dir(self.metadata_dir, from_offset=start):
            self._replay_or_fail(delta, entry)
            self.provenance.observe(entry)
            self.quorum_control = self.quorum_control.observe(entry.record)
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

    def _on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self._active_epoch = None
        self._uncertain_epoch = None
        self._log.info("controller_leader_changed", leader_id=leader_id, epoch=epoch)
        self._tasks = [t for t in self._tasks if not t.done()]
        if leader_id == self.node_id:
            self._tasks.append(spawn(self._become_active(epoch)))

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
                    await self._propose([NoOpRecord(leader_id=self.node_id), *self._bootstrap_records()], epoch)
                    self.heartbeats.reset(self.image.cluster.broker_ids(), self._wall_ms())
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

    def _bootstrap_records(self) -> list[MetadataRecord]:
        """The records of ``bootstrap.checkpoint`` (`kraftlog.quorum._bootstrap`) while this node
        has applied nothing yet, i.e. the metadata log may be empty; none once it holds anything."""
        if self.image.offset >= 0 or getattr(self._quorum, "committed_offset", -1) >= 0:
            return []
        records = read_bootstrap_records(self.config.metadata_log_dir)
        if records:
            self._log.info("bootstrap_records_proposed", count=len(records))
        return records

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
        return int(last)

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
        endpoint = self.voter_endpoints().get(leader)
        if endpoint is None:
            return controller_pb2.ControllerHint(leader_id=leader, leader_address="", leader_epoch=self._quorum.epoch)
        host, port = endpoint
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
            kraft_version=self.kraft_version,
            kraft_upgrade_problem=kraft_upgrade_problem(self._quorum) if self.kraft_version < 1 else None,
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
            self._drainer = spawn(self._drain_writes())
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
        """Duties on a timer: every controller snapshots records older than
        ``metadata.log.max.snapshot.interval.ms``; the active one fences silent brokers,
        rebalances preferred leaders and finishes reassignments."""
        last_rebalance = self._clock.monotonic_s()
        while not self._stopping:
            await self._clock.sleep_async(_FENCE_CHECK_S)
            self._snapshot_if_due(self._clock.monotonic_s())
            await self._endpoint_reporter.tick(self._clock.monotonic_s())  # UpdateRaftVoter, issue 26
            if not self.is_active:
                continue
            try:
                await self._run_internal(
                    lambda image, _req, ctx: (ctl.fence_expired_brokers(image, ctx, self.heartbeats), None)
                )
                await self._run_internal(lambda image, _req, ctx: (ctl.complete_reassignments(image, ctx), None))
                interval = self.config["leader.imbalance.check.interval.seconds"]
                if (
                    self.config["auto.leader.rebalance.enable"]
                    and self._clock.monotonic_s() - last_rebalance >= interval
                ):
                    last_rebalance = self._clock.monotonic_s()
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

    # ------------------------------------------------------------------ gRPC

    def add_to_server(self, server: grpc.aio.Server) -> None:
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(_ControllerService(self), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(_AdminService(self), server)

    async def add_raft_voter(self, request: admin_pb2.AddRaftVoterRequest) -> admin_pb2.AddRaftVoterResponse:
        """AddRaftVoter (KIP-853) on this controller: `quorum._voter_admin`."""
        from kraftlog.quorum._voter_admin import add_raft_voter

        return await add_raft_voter(self, request)

    async def remove_raft_voter(self, request: admin_pb2.RemoveRaftVoterRequest) -> admin_pb2.RemoveRaftVoterResponse:
        """RemoveRaftVoter (KIP-853) on this controller: `quorum._voter_admin`."""
        from kraftlog.quorum._voter_admin import remove_raft_voter

        return await remove_raft_voter(self, request)

    async def update_raft_voter(self, request: admin_pb2.UpdateRaftVoterRequest) -> admin_pb2.UpdateRaftVoterResponse:
        """UpdateRaftVoter (KIP-853) on this controller: `quorum._voter_admin`."""
        from kraftlog.quorum._voter_admin import update_raft_voter

        return await update_raft_voter(self, request)

    def voter_endpoints(self) -> dict[int, tuple[str, int]]:
        """voter id -> controller ``(host, port)``: the configured or formatted set, and in a dynamic
        quorum every voter its Raft log added (its Raft port less ``controller.quorum.raft.port.offset``)."""
        endpoints = dict(self.voters)
        quorum = self._quorum
        if quorum is not None and self.kraft_version >= 1 and hasattr(quorum, "voters"):
            offset = int(self.config["controller.quorum.raft.port.offset"])
            for vid, voter in quorum.voters().items():
                endpoints[vid] = (voter.host, voter.port - offset)
        return endpoints

    def describe_quorum(self) -> admin_pb2.DescribeQuorumResponse:
        """DescribeQuorum (Kafka API key 55): voters and observers (`quorum._describe_quorum`)."""
        return describe_quorum(self)
