"""`MetadataQuorum`: the narrow seam the controller uses: propose batches, receive committed entries
and leadership changes on the asyncio loop, report status (see `quorum.raft`).
"""

from __future__ import annotations

import asyncio
import errno
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObjException
from pysyncobj.node import TCPNode

from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common.errors import (
    InvalidRequestError,
    NotControllerError,
    RequestTimedOutError,
    UnknownServerError,
)
from kraftlog.metadata_log import LogEntry, MetadataRecord, encode_record
from kraftlog.quorum.raft._identity import NodeIdentity, public_key_text
from kraftlog.quorum.raft._journal import RaftJournal
from kraftlog.quorum.raft._membership import RaftVoter
from kraftlog.quorum.raft._raft_node import _check_journal_format, _install_log_filter, _RaftNode, build_syncobj_conf
from kraftlog.quorum.raft._raft_quorum_voters import _QuorumVoters
from kraftlog.quorum.raft._raft_state import (
    _STOP_TIMEOUT_S,
    APPLY_INVALID,
    APPLY_OK,
    APPLY_STALE_EPOCH,
    DUMP_FILE,
    JOURNAL_FILE,
    MetadataStateMachine,
    QuorumConfigError,
    QuorumStatus,
    RawEntry,
    VoterStatus,
)
from kraftlog.quorum.raft._raft_tls import RaftTls
from kraftlog.quorum.raft._raft_view import _log, _View
from kraftlog.quorum.raft._serializer import DumpCorruptError, DumpSerializer, read_dump
from kraftlog.quorum.raft._transport import TransportSettings, raft_transport_class
from kraftlog.quorum.raft._wire import MAX_CLUSTER_ID_CHARS, derive_auth_key


class MetadataQuorum(_QuorumVoters):
    """This controller's membership in the Raft quorum that keeps the metadata log.

    All methods are called on ``loop``'s thread; callbacks are invoked there too.
    """

    def __init__(
        self,
        *,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        data_dir: Path,
        password: str | None,
        cluster_id: str,
        bind_host: str | None = None,
        fsync: bool = True,
        election_timeout_ms: int = 1000,
        loop: asyncio.AbstractEventLoop,
        on_committed: Callable[[list[LogEntry]], None],
        on_leader_change: Callable[[int | None, int], None],
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic_s,
        wall_clock: Callable[[], float] = time.time,
        last_durable_offset: int = -1,
        on_gap: Callable[[int, int], Awaitable[None]] | None = None,
        fetch_timeout_ms: int = 2000,
        leader_endpoints: Mapping[int, str] | None = None,
        allow_unauthenticated: bool = False,
        compaction_entries: int = 10_000,
        compaction_interval_s: float = 300.0,
        snapshot_retain_entries: int = 20_000,
        identity: NodeIdentity | None = None,
        directory_ids: Mapping[int, str] | None = None,
        observer_endpoint: tuple[str, int] | None = None,
        admit_observers: bool = False,
        own_directory_id: str | None = None,
        controller_port_offset: int = 0,
        voter_records: bool = False,
        listen_endpoint: tuple[str, int] | None = None,
        tls: RaftTls | None = None,
    ) -> None:
        # An observer (issue 26, KIP-853: formatted with --no-initial-controllers) is not in
        # ``voters`` and names its own Raft endpoint; it replicates until a voter change adds it.
        self._observer = node_id not in voters
        if self._observer and (observer_endpoint is None or identity is None):
            raise QuorumConfigError(
                f"node {node_id} is not a voter of {sorted(voters)}: it can run only as an observer, "
                "which needs its own Raft endpoint and node-key authentication"
            )
        self._admit_observers = admit_observers
        #: TLS on the Raft port, each peer's certificate bound to its node id (issue 26)
        self._tls = tls
        #: this node's metadata log dir id, reported to the leader for the kraft.version upgrade
        #: a voter's controller port is its Raft port less this (the metadata log's VotersRecord)
        self._controller_port_offset = controller_port_offset
        #: a committed voter change also appends VotersRecord (KRaftVersionRecord) to the metadata log
        self._voter_records = voter_records
        self._own_directory_id = own_directory_id or (identity.directory_id if identity is not None else None)
        addresses = {vid: f"{host}:{int(port)}" for vid, (host, port) in voters.items()}
        if len(set(addresses.values())) != len(addresses):
            raise QuorumConfigError("two voters share one Raft endpoint")
        if observer_endpoint is not None and self._observer:
            addresses[node_id] = f"{observer_endpoint[0]}:{int(observer_endpoint[1])}"
            voters = {**voters, node_id: observer_endpoint}
        elif listen_endpoint is not None and not self._observer:
            # a voter restarted on another listener (issue 26): it runs at its own endpoint while the
            # voter set still names the old one, until its UpdateRaftVoter commits
            addresses[node_id] = f"{listen_endpoint[0]}:{int(listen_endpoint[1])}"
        if identity is not None:
            keyed = set(identity.voter_keys) | ({node_id} if self._observer else set())
            if identity.node_id != node_id or keyed != set(voters):
                raise QuorumConfigError(
                    f"the Raft identity is voter {identity.node_id}'s with keys of {sorted(identity.voter_keys)}; "
                    f"this is node {node_id} of voters {sorted(voters)}"
                )
            password = None
        elif not password:
            if not allow_unauthenticated:
                raise QuorumConfigError(
                    "controller.quorum.raft.password is required: it is what authenticates a controller "
                    "to the others on the Raft port (without it anyone who can connect could vote)"
                )
            password = None
        if not isinstance(cluster_id, str) or not 0 < len(cluster_id) <= MAX_CLUSTER_ID_CHARS:
            raise QuorumConfigError(
                f"cluster_id must be a non-empty string of at most {MAX_CLUSTER_ID_CHARS} characters"
            )
        if election_timeout_ms < 50:
            raise QuorumConfigError("election_timeout_ms must be at least 50")
        if compaction_entries < 2:
            raise QuorumConfigError("compaction_entries must be at least 2")
        if fetch_timeout_ms < 1:
            raise QuorumConfigError("fetch_timeout_ms must be positive")
        self.node_id = node_id
        self._addresses = addresses
        self._addr_to_id = {addr: vid for vid, addr in addresses.items()}
        self._raft_nodes = {vid: TCPNode(addr) for vid, addr in addresses.items()}
        self._own_address = addresses[node_id]
        self._members_key = None
        self._persisted_voters = None
        self._data_dir = Path(data_dir)
        self._password = password
        self._identity = identity
        #: the voter set this node starts from (voter changes in the log and dump take over at start)
        self._raft_voters = {
            vid: RaftVoter(
                node_id=vid,
                host=host,
                port=int(port),
                directory_id=(directory_ids or {}).get(vid),
                public_key=public_key_text(identity.voter_keys[vid]) if identity is not None else None,
            )
            for vid, (host, port) in voters.items()
            if not (self._observer and vid == node_id)
        }
        self._cluster_id = cluster_id
        # the Raft port listens on this node's own voter host unless told otherwise
        self._bind_host = bind_host if bind_host is not None else voters[node_id][0]
        self._fsync = fsync
        self._election_timeout_ms = election_timeout_ms
        self._fetch_timeout_s = fetch_timeout_ms / 1000.0
        self._loop = loop
        self._on_committed = on_committed
        self._on_leader_change = on_leader_change
        self._on_gap = on_gap
        self._clock = clock
        self._wall_clock = wall_clock
        self._leader_endpoints = dict(leader_endpoints or {})
        self._compaction_entries = compaction_entries
        self._compaction_interval_s = compaction_interval_s
        self._log = _log.bind(node_id=node_id)

        self._sm = MetadataStateMachine(retain_entries=snapshot_retain_entries)
        self._sm.durable_offset = last_durable_offset
        self._node: _RaftNode | None = None
        self._journal: RaftJournal | None = None
        self._serializer: DumpSerializer | None = None
        self._view = _View()
        self._last_emitted: tuple[int | None, int] | None = None
        self._progress_at = 0.0
        self._caught_up_ms: dict[int, int] = {}
        self._observer_caught_up_ms: dict[int, int] = {}
        self._progress_term = -1
        # delivery (pysyncobj thread -> loop)
        self._pending: list[RawEntry] = []
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self._delivered = last_durable_offset
        self._delivery_error: str | None = None
        self._gap_task: asyncio.Task[None] | None = None
        self._resign_requested = False
        self._resign_since: float | None = None  # clock() of the first transfer attempt
        self._resign_attempts = 0
        self._resign_next_at = 0.0
        self._rng = random.Random()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the journal and dump, bind the Raft port and join the quorum.

        The blocking part (journal replay, key derivation for the password, binding) runs in the
        default executor. Raises ``OSError`` when the Raft port cannot be bound.
        """
        if self._node is not None or self._closed:
            raise RuntimeError("MetadataQuorum.start() called twice")
        owner = threading.current_thread()
        self._node = await self._loop.run_in_executor(None, self._build, owner)
        self._log.info(
            "metadata_quorum_started",
            raft_address=self._addresses[self.node_id],
            voters=self._addresses,
            fsync=self._fsync,
            election_timeout_ms=self._election_timeout_ms,
            cluster_id=self._cluster_id,
            bind_host=self._bind_host,
            authenticated=self._password is not None or self._identity is not None,
            authentication="node-key" if self._identity is not None else "password",
        )

    def _build(self, owner: threading.Thread) -> _RaftNode:
        _install_log_filter()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        journal_path = self._data_dir / JOURNAL_FILE
        dump_path = self._data_dir / DUMP_FILE
        serializer = DumpSerializer(
            dump_path,
            state_provider=self._sm.to_state,
            state_loader=self._load_state,
            fsync=self._fsync,
            node_id=self.node_id,
        )
        journal = RaftJournal(
            journal_path,
            fsync=self._fsync,
            sync_on_add=False,
            before_prefix_drop=serializer.make_durable,
            node_id=self.node_id,
        )
        try:
            _check_journal_format(journal, journal_path)
            if dump_path.exists():
                self._align(journal, dump_path)
            conf = build_syncobj_conf(
                election_timeout_ms=self._election_timeout_ms,
                journal_file=journal_path,
                dump_file=dump_path,
                serializer=serializer,
                compaction_entries=self._compaction_entries,
                compaction_interval_s=self._compaction_interval_s,
            )
            me = self._addresses[self.node_id]
            others = [addr for vid, addr in sorted(self._addresses.items()) if vid != self.node_id]
            e = self._election_timeout_ms / 1000.0
            settings = TransportSettings(
                node_id=self.node_id,
                voters=dict(self._addresses),
                cluster_id=self._cluster_id,
                # node-key mode needs no password key (and skips the deliberately slow derivation)
                auth_key=b"" if self._identity is not None else derive_auth_key(self._password or "", self._cluster_id),
                identity=self._identity,
                bind_host=self._bind_host,
                observer=self._observer,
                admit_observers=self._admit_observers,
                # a voter finishes the handshake in two round trips; an attacker holds a slot this long
                handshake_timeout_s=min(max(2 * e, 1.0), 5.0),
                tls=self._tls,
            )
            node = _RaftNode(
                self_address=me,
                other_addresses=others,
                conf=conf,
                journal=journal,
                state_machine=self._sm,
                sink=self._sink,
                node_id=self.node_id,
                transport_class=raft_transport_class(settings),
                receive_dump=serializer.receive,
                voters=self._raft_voters,
                dump_serializer=serializer,
                observer=self._observer,
                directory_id=self._own_directory_id,
                port_offset=self._controller_port_offset if self._voter_records else None,
            )
        except BaseException:
            journal.close()
            raise
        # pysyncobj's tick thread stops when the thread that built the node dies; that was an
        # executor worker, so hand the role to the thread running the event loop.
        node._SyncObj__mainThread = owner
        try:
            node.waitBinded()
        except SyncObjException as err:
            node.destroy_synchronous()
            raise OSError(errno.EADDRINUSE, f"cannot bind the Raft port {me}") from err
        self._journal = journal
        self._serializer = serializer
        node.addOnTickCallback(self._observe)
        if not others:
            # The only voter stands for election at once, as Kafka's KafkaRaftClient does when it
            # starts (``quorum.isOnlyVoter()``): no one can outvote it, so waiting out a first
            # election timeout (1 s by default) only delayed every single-controller node's start.
            node._SyncObj__raftElectionDeadline = 0.0
        return node

    def _align(self, journal: RaftJournal, dump_path: Path) -> None:
        try:
            dump = read_dump(dump_path)
        except DumpCorruptError as err:
            if journal.first_index in (None, 1):
                # Never compacted: the journal alone holds the whole log; the dump is redundant.
                aside = dump_path.with_name(f"{dump_path.name}.corrupt-{int(self._wall_clock())}")
                dump_path.rename(aside)
                self._log.warning("raft_dump_corrupt_set_aside", error=str(err), moved_to=str(aside))
                return
            raise
        action = journal.align_with_dump(dump.raft_prev, dump.raft_last)
        self._log.info("raft_journal_aligned_with_dump", action=action, dump_index=dump.raft_last[1])

    async def stop(self) -> None:
        """Leave the quorum: stop pysyncobj's thread, close the journal, fail pending proposals.

        No callback runs after this returns.
        """
        node, self._node = self._node, None
        self._closed = True
        gap = self._gap_task
        if gap is not None:
            gap.cancel()
        if node is not None:
            # Bounded: a tick thread stuck in a hung fsync must not hold the node's shutdown (the
            # thread ends by itself once it returns: pysyncobj checks that the loop's thread lives).
            done = self._loop.run_in_executor(None, node.destroy_synchronous)
            try:
                await asyncio.wait_for(asyncio.shield(done), _STOP_TIMEOUT_S)
            except TimeoutError:
                self._log.warning("metadata_quorum_stop_timed_out", timeout_s=_STOP_TIMEOUT_S)
        for fut in list(self._inflight):
            if not fut.done():
                fut.set_exception(NotControllerError("this controller left the quorum", leader_id=None))
        self._inflight.clear()
        self._log.info("metadata_quorum_stopped")

    # ------------------------------------------------------------------ pysyncobj thread side

    # ------------------------------------------------------------------ loop side

    # ------------------------------------------------------------------ public API

    @property
    def leader_id(self) -> int | None:
        """The Raft leader as this node last saw it (itself only once it is ready to lead)."""
        view = self._view
        if view.leader_id == self.node_id and not view.ready:
            return None
        return view.leader_id

    @property
    def epoch(self) -> int:
        """The Raft term, which is the controller epoch."""
        return self._view.term

    @property
    def is_leader(self) -> bool:
        """Raft leader, connected to a majority, caught up to its epoch start, delivery healthy --
        and, by the clock, heard from a majority and observed by pysyncobj's thread within
        ``fetch_timeout_ms`` (check-quorum; see the module docstring)."""
        view = self._view
        if not (
            self._node is not None
            and view.raft_leader
            and view.has_quorum
            and view.ready
            and self._delivery_error is None
        ):
            return False
        now = self._clock()
        return (
            now - view.observed_at <= self._fetch_timeout_s and now - view.majority_contact_at <= self._fetch_timeout_s
        )

    @property
    def majority_connected(self) -> bool:
        """Whether this node is connected to a majority of the voters (itself included): without
        that no controller can commit anything, here or elsewhere, until peers come back."""
        return len(self._view.connected) > len(self._addresses) // 2  # `connected` holds this node

    @property
    def committed_offset(self) -> int:
        """Last metadata offset committed and applied on this node; -1 when none."""
        return self._sm.next_offset - 1

    @property
    def delivered_offset(self) -> int:
        """Last offset ``on_committed`` acknowledged (or ``last_durable_offset``)."""
        return self._delivered

    def _leader_hint(self) -> dict[str, Any]:
        leader = self.leader_id
        return {
            "leader_id": leader,
            "leader_address": self._leader_endpoints.get(leader) if leader is not None else None,
        }

    async def propose(self, records: Sequence[MetadataRecord], *, epoch: int, timeout_s: float) -> int:
        """Commit ``records`` as one batch written in ``epoch``; return the last offset committed.

        Raises ``NotControllerError`` (with the leader hint) when this node is not the ready leader
        of ``epoch`` or the batch was not committed in ``epoch``; ``RequestTimedOutError`` when it was
        not committed within ``timeout_s`` -- then the outcome is unknown: the batch may still commit
        later (it will show up through ``on_committed``). When this returns, ``on_committed`` has
        received the batch on this node.
        """
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if not records:
            raise InvalidRequestError("a metadata proposal needs at least one record")
        node = self._node
        if node is None:
            raise NotControllerError("this controller is not running", leader_id=None)
        if self._delivery_error is not None:
            raise NotControllerError(
                f"this controller stopped applying metadata: {self._delivery_error}", leader_id=None
            )
        view = self._view
        if not self.is_leader:
            raise NotControllerError(**self._leader_hint())
        if epoch != view.term:
            raise NotControllerError(
                f"epoch {epoch} is not the current controller epoch {view.term}", **self._leader_hint()
            )
        encoded = [encode_record(r) for r in records]
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._inflight.add(fut)

        def on_result(result: Any, error: int) -> None:  # pysyncobj's thread, or this one
            self._call_soon(self._resolve, fut, result, error)

        try:
            try:
                node._kl_append(epoch, int(self._wall_clock() * 1000), encoded, callback=on_result)
            except BlockingIOError:
                pass  # pysyncobj's wake-up pipe is full; the command is queued and the thread awake
            try:
                return await asyncio.wait_for(fut, timeout_s)
            except TimeoutError:
                self._log.warning("metadata_proposal_timed_out", records=len(encoded), epoch=epoch, timeout_s=timeout_s)
                raise RequestTimedOutError(
                    f"metadata proposal not committed within {timeout_s:.3f}s; outcome unknown", **self._leader_hint()
                ) from None
        finally:
            self._inflight.discard(fut)

    def _resolve(self, fut: asyncio.Future[Any], result: Any, error: int) -> None:
        if fut.done():
            return
        if error == FAIL_REASON.SUCCESS and isinstance(result, tuple) and result:
            code = result[0]
            if code == APPLY_OK:
                fut.set_result(result[2])
            elif code == APPLY_STALE_EPOCH:
                fut.set_exception(
                    NotControllerError(
                        f"the batch was appended in epoch {result[1]}, not the epoch it was decided in",
                        **self._leader_hint(),
                    )
                )
            elif code == APPLY_INVALID:
                fut.set_exception(InvalidRequestError(str(result[1])))
            else:
                fut.set_exception(UnknownServerError(str(result[1:])))
        elif error in (FAIL_REASON.QUEUE_FULL, FAIL_REASON.UNKNOWN_OUTCOME):
            fut.set_exception(
                RequestTimedOutError(
                    "metadata proposal outcome unknown"
                    if error == FAIL_REASON.UNKNOWN_OUTCOME
                    else "the Raft command queue is full",
                    **self._leader_hint(),
                )
            )
        elif error == FAIL_REASON.SUCCESS:
            fut.set_exception(UnknownServerError(f"unexpected apply result {result!r:.80}"))
        else:
            # MISSING_LEADER, NOT_LEADER, LEADER_CHANGED, DISCARDED, REQUEST_DENIED: not committed.
            fut.set_exception(
                NotControllerError(f"metadata proposal not committed (pysyncobj reason {error})", **self._leader_hint())
            )

    def _end_offset(self, raft_index: int) -> int:
        """The metadata log end offset (exclusive) at ``raft_index``; -1 when unknown."""
        end = self._sm.end_offset_at(raft_index)
        return -1 if end is None else end

    def status(self) -> QuorumStatus:
        """DescribeQuorum from this node's point of view (followers know only themselves)."""
        view = self._view
        now_ms = int(self._wall_clock() * 1000)
        voters: list[VoterStatus] = []
        for vid, addr in sorted(self._addresses.items()):
            if vid == self.node_id:
                voters.append(VoterStatus(vid, addr, self._sm.next_offset, now_ms, now_ms, view.last_index))
                continue
            progress = view.progress.get(vid) if view.raft_leader else None
            if progress is None:
                voters.append(VoterStatus(vid, addr, -1, -1, -1, None))
                continue
            match_index, fetch_ms, caught_up_ms = progress
            voters.append(VoterStatus(vid, addr, self._end_offset(match_index), fetch_ms, caught_up_ms, match_index))
        observers = tuple(
            VoterStatus(oid, "", self._end_offset(match), fetch_ms, caught_up_ms, match, directory_id=directory)
            for oid, (match, fetch_ms, caught_up_ms, directory) in sorted(view.observer_progress.items())
            if view.raft_leader and oid not in self._addresses
        )
        committed = self.committed_offset
        return QuorumStatus(
            node_id=self.node_id,
            leader_id=self.leader_id,
            epoch=view.term,
            high_watermark=committed + 1,
            committed_offset=committed,
            delivered_offset=self._delivered,
            is_leader=self.is_leader,
            has_quorum=view.has_quorum,
            voters=tuple(voters),
            raft_commit_index=view.commit_index,
            raft_last_applied=view.last_applied,
            delivery_error=self._delivery_error,
            connected_voters=view.connected,
            observers=observers,
        )
