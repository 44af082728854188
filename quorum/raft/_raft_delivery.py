"""How committed entries and leadership reach the asyncio loop: on pysyncobj's thread the seam
observes the node (leadership judged by the clock, stepping down, resigning) and queues what was
committed; on the loop it delivers entries in offset order and fills gaps (part of
`quorum.raft.MetadataQuorum`).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pysyncobj.monotonic import monotonic as _raft_monotonic
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _RAFT_STATE

from kraftlog.common import backoff_ms
from kraftlog.metadata_log import LogEntry, MetadataRecordError, decode_record
from kraftlog.quorum.raft._journal import RaftJournal
from kraftlog.quorum.raft._membership import RaftVoter, kraft_version_of, write_voters_file
from kraftlog.quorum.raft._raft_node import _RaftNode
from kraftlog.quorum.raft._raft_state import (
    MetadataStateMachine,
    RawEntry,
)
from kraftlog.quorum.raft._raft_view import _View


class _QuorumDelivery:
    """The two threads' halves: pysyncobj's thread observes and hands over; the loop delivers in order."""

    # MetadataQuorum's fields this part uses (set in MetadataQuorum.__init__).
    node_id: int
    _addresses: dict[int, str]
    _addr_to_id: dict[str, int]
    _raft_nodes: dict[int, TCPNode]
    _own_address: str
    _members_key: frozenset[str] | None
    _persisted_voters: dict[int, RaftVoter] | None
    _identity: Any  # NodeIdentity | None: observers need node-key mode
    _data_dir: Path
    _election_timeout_ms: int
    _fetch_timeout_s: float
    _loop: asyncio.AbstractEventLoop
    _on_committed: Callable[[list[LogEntry]], None]
    _on_leader_change: Callable[[int | None, int], None]
    _on_gap: Callable[[int, int], Awaitable[None]] | None
    _clock: Callable[[], float]
    _wall_clock: Callable[[], float]
    _log: Any
    _sm: MetadataStateMachine
    _node: _RaftNode | None
    _journal: RaftJournal | None
    _view: _View
    _last_emitted: tuple[int | None, int] | None
    _progress_at: float
    _caught_up_ms: dict[int, int]
    _observer_caught_up_ms: dict[int, int]
    _progress_term: int
    _pending: list[RawEntry]
    _pending_lock: threading.Lock
    _drain_scheduled: bool
    _delivered: int
    _delivery_error: str | None
    _gap_task: asyncio.Task[None] | None
    _resign_requested: bool
    _resign_since: float | None
    _resign_attempts: int
    _resign_next_at: float
    _rng: random.Random
    _closed: bool

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # loop closed: the process is going away

    def _sink(self, entries: list[RawEntry]) -> None:
        """Queue applied entries for the loop (pysyncobj thread). One drain is scheduled at a time;
        entries queued later join it or schedule the next, so loop order equals apply order."""
        if self._delivery_error is not None:
            return
        with self._pending_lock:
            self._pending.extend(entries)
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        self._call_soon(self._drain)

    def _load_state(self, state: dict[str, Any]) -> None:
        """Dump loaded (restart or snapshot from the leader): restore, re-offer retained entries."""
        self._sm.from_state(state)
        retained = self._sm.retained()
        self._log.info(
            "metadata_state_restored",
            next_offset=self._sm.next_offset,
            retained_from=retained[0].offset if retained else None,
        )
        if retained:
            self._sink(retained)

    def _observe(self) -> None:
        """Tick callback (pysyncobj thread, after apply): refresh the view, report leader changes."""
        node = self._node
        if node is None:
            return
        try:
            self._refresh_members(node)
            raft_leader = node._isLeader()
            leader = node._getLeader()
            term = node.raftCurrentTerm
            leader_id = self._addr_to_id.get(str(leader.id)) if leader is not None else None
            ready = raft_leader and node._kl_term_start_applied()
            progress, observer_progress = self._view.progress, self._view.observer_progress
            now = self._clock()
            if raft_leader and (now - self._progress_at >= 0.01 or not progress):
                self._progress_at = now
                progress, observer_progress = self._leader_progress(node, term)
            connected = tuple(
                sorted(
                    [self.node_id]
                    + [
                        vid
                        for vid in self._addr_to_id.values()
                        if vid != self.node_id and node.isNodeConnected(self._raft_nodes[vid])
                    ]
                )
            )
            last_index = self._journal.last_index if self._journal is not None else None
            contact_at = self._majority_contact_at(node, now) if raft_leader else float("-inf")
            if raft_leader and now - contact_at > self._fetch_timeout_s:
                # check-quorum: pysyncobj's own fallback uses the election timeout, which may be
                # longer than the fetch timeout (KRaft resigns after the fetch timeout)
                self._log.warning(
                    "metadata_quorum_check_quorum_failed",
                    epoch=term,
                    last_majority_contact_s=round(now - contact_at, 3),
                )
                self._step_down(node)
                raft_leader = ready = False
                leader_id = None
            view = _View(
                leader_id,
                term,
                raft_leader,
                node.hasQuorum,
                ready,
                node.raftCommitIndex,
                node.raftLastApplied,
                progress if raft_leader else {},
                observer_progress if raft_leader else {},
                connected,
                last_index or 0,
                observed_at=now,
                majority_contact_at=contact_at,
            )
            self._view = view
            emitted = (leader_id if (leader_id != self.node_id or ready) else None, term)
            if emitted != self._last_emitted:
                self._last_emitted = emitted
                self._log.info("metadata_quorum_leader_change", leader_id=emitted[0], epoch=term, raft_leader=leader_id)
                self._call_soon(self._emit_leader_change, emitted[0], term)
            if self._resign_requested and raft_leader:
                self._resign(node, now)
        except Exception:
            self._log.exception("metadata_quorum_observe_failed")

    def _refresh_members(self, node: _RaftNode) -> None:
        """Follow the voter set in force (issue 26): pysyncobj's members after voter changes, so the
        leader id, the connected voters and check-quorum's majority count the voters the log says.
        The maps are replaced whole (the loop thread reads them)."""
        if not getattr(node, "_kl_dynamic", False):
            return
        self._persist_voters(node)
        if kraft_version_of(node._kl_applied_voters) >= 1 and self._identity is not None:
            admit = getattr(node._kl_transport, "admit_observers", None)
            if admit is not None:
                admit()  # a static quorum upgraded to kraft.version 1 (idempotent)
        others = node.otherNodes
        key = frozenset(str(n.id) for n in others) | {str(node._kl_observer)}
        if key == self._members_key:
            return
        self._members_key = key
        addresses: dict[int, str] = {}
        for n in others:
            voter = getattr(n, "kl_voter", None)
            vid = voter.node_id if voter is not None else self._addr_to_id.get(str(n.id))
            if vid is not None:
                addresses[vid] = str(n.id)
        own = self._own_address
        if not node._kl_observer:
            addresses[self.node_id] = own
        self._raft_nodes = {vid: TCPNode(addr) for vid, addr in addresses.items()}
        self._addr_to_id = {addr: vid for vid, addr in addresses.items()} | {own: self.node_id}
        self._addresses = addresses or {self.node_id: own}

    def _persist_voters(self, node: _RaftNode) -> None:
        """Rewrite the Raft dir's voter file when the committed set changed (pysyncobj's thread,
        outside apply; voter changes are rare). A failure is logged: the log still holds the set."""
        committed = node._kl_applied_voters  # replaced whole on every change: compared by identity first
        if committed is self._persisted_voters or not committed:
            return
        if committed == self._persisted_voters:
            self._persisted_voters = committed
            return
        try:
            write_voters_file(self._data_dir, committed)
        except OSError as err:
            self._log.warning("raft_voters_file_write_failed", error=str(err))
            return
        self._persisted_voters = committed

    def _majority_contact_at(self, node: _RaftNode, now: float) -> float:
        """``clock()`` when a majority of voters (this leader included) last had answered it."""
        responses: dict[Any, float] = node._SyncObj__lastResponseTime
        now_raft = _raft_monotonic()
        times = sorted((now - (now_raft - responses[n]) for n in node.otherNodes if n in responses), reverse=True)
        needed = len(self._addresses) // 2  # others needed besides this node for a majority
        if needed == 0:
            return now
        return times[needed - 1] if len(times) >= needed else float("-inf")

    def _step_down(self, node: _RaftNode) -> None:
        """Leave leadership now (pysyncobj's thread), as its own check-quorum fallback does."""
        node._SyncObj__setState(_RAFT_STATE.FOLLOWER)
        node._SyncObj__raftLeader = None

    def _resign(self, node: _RaftNode, now: float) -> None:
        """A leader that cannot apply metadata hands leadership on (pysyncobj's thread).

        ``transferLeadership`` is refused while no follower is fully caught up, so it is retried
        with back-off; after ``fetch_timeout_ms`` of failed transfers this node steps down and stops
        campaigning, so the others elect a leader among themselves."""
        if self._resign_since is None:
            self._resign_since = now
        if now >= self._resign_next_at:
            node.transferLeadership()
            period_ms = self._election_timeout_ms / 4
            self._resign_next_at = (
                now
                + backoff_ms(self._resign_attempts, base_ms=period_ms, max_ms=self._election_timeout_ms, rng=self._rng)
                / 1000.0
            )
            self._resign_attempts += 1
        if now - self._resign_since >= self._fetch_timeout_s:
            self._log.warning("metadata_quorum_resigned", attempts=self._resign_attempts, reason=self._delivery_error)
            node._kl_no_campaign = True  # it never campaigns again until restarted
            self._step_down(node)

    def _leader_progress(
        self, node: _RaftNode, term: int
    ) -> tuple[dict[int, tuple[int, int, int]], dict[int, tuple[int, int, int, str | None]]]:
        """On the leader, per follower (raft match index, last fetch ms, last caught-up ms), and per
        observer (issue 26: a connected controller outside the voter set, pysyncobj's read-only
        node) the same and its directory id. Caught up: its match index reached this leader's last
        index, as Kafka's ``lastCaughtUpTimestamp``; both are forgotten when the term changes."""
        if term != self._progress_term:
            self._progress_term = term
            self._caught_up_ms = {}
            self._observer_caught_up_ms = {}
        match: dict[Any, int] = node._SyncObj__raftMatchIndex
        responses: dict[Any, float] = node._SyncObj__lastResponseTime
        last_index = self._journal.last_index if self._journal is not None else None
        now_ms = int(self._wall_clock() * 1000)
        now_raft = _raft_monotonic()
        out: dict[int, tuple[int, int, int]] = {}
        observers: dict[int, tuple[int, int, int, str | None]] = {}
        for raft_node, index in list(match.items()):
            peer = getattr(raft_node, "kl_observer", None)
            vid = peer.node_id if peer is not None else self._addr_to_id.get(str(raft_node.id))
            if vid is None:
                continue
            caught_up = self._observer_caught_up_ms if peer is not None else self._caught_up_ms
            if last_index is not None and index >= last_index:
                caught_up[vid] = now_ms
            seen = responses.get(raft_node)
            fetch_ms = int(now_ms - (now_raft - seen) * 1000) if seen is not None else -1
            if peer is not None:
                observers[vid] = (index, fetch_ms, caught_up.get(vid, -1), peer.directory_id)
            else:
                out[vid] = (index, fetch_ms, caught_up.get(vid, -1))
        return out, observers

    def _emit_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if self._closed:
            return
        try:
            self._on_leader_change(leader_id, epoch)
        except Exception:
            self._log.exception("on_leader_change_failed", leader_id=leader_id, epoch=epoch)

    def _drain(self) -> None:
        with self._pending_lock:
            self._drain_scheduled = False
            if self._gap_task is not None:
                return  # delivery waits for the gap fill; the entries stay queued in order
            batch, self._pending = self._pending, []
        if self._closed or self._delivery_error is not None:
            return
        out: list[LogEntry] = []
        for i, raw in enumerate(batch):
            expected = (out[-1].offset if out else self._delivered) + 1
            if raw.offset < expected:
                continue  # already delivered (journal replay, dump reload)
            if raw.offset > expected:
                if not self._deliver(out):
                    return
                out = []
                if self._on_gap is None:
                    self._handle_gap(expected, raw.offset)
                    return
                self._start_gap_fill(expected, raw.offset, batch[i:])
                return
            try:
                record = decode_record(raw.record)
            except MetadataRecordError as err:
                if self._deliver(out):
                    self._stall(
                        f"cannot decode metadata record at offset {raw.offset}: {err} "
                        "(is this controller older than the one that wrote it?)"
                    )
                return
            out.append(LogEntry(raw.offset, raw.epoch, raw.timestamp_ms, record))
        self._deliver(out)

    def _deliver(self, out: list[LogEntry]) -> bool:
        if not out:
            return True
        try:
            self._on_committed(out)
        except Exception as err:
            self._log.exception("on_committed_failed", first_offset=out[0].offset, last_offset=out[-1].offset)
            self._stall(f"on_committed raised {type(err).__name__}: {err}")
            return False
        self._delivered = out[-1].offset
        self._sm.durable_offset = self._delivered
        return True

    def _handle_gap(self, first_missing: int, first_available: int) -> None:
        self._stall(
            f"metadata offsets {first_missing}..{first_available - 1} were compacted away before "
            "this controller received them; fetch them from another controller"
        )

    def _start_gap_fill(self, first_missing: int, first_available: int, rest: list[RawEntry]) -> None:
        """Put ``rest`` back at the head of the queue and fill the gap without blocking the loop."""
        with self._pending_lock:
            self._pending[:0] = rest
            self._gap_task = self._loop.create_task(
                self._fill_gap(first_missing, first_available), name="metadata-gap-fill"
            )
        self._log.warning("metadata_delivery_gap", first_missing=first_missing, first_available=first_available)

    async def _fill_gap(self, first_missing: int, first_available: int) -> None:
        """Await ``on_gap`` until it succeeds (retried with back-off), then resume delivery."""
        assert self._on_gap is not None
        attempt = 0
        try:
            while not self._closed:
                try:
                    result = self._on_gap(first_missing, first_available)
                    if inspect.isawaitable(result):
                        await result
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as err:
                    delay_ms = backoff_ms(attempt, base_ms=100, max_ms=self._election_timeout_ms * 2, rng=self._rng)
                    attempt += 1
                    self._log.warning(
                        "metadata_gap_fill_failed",
                        first_missing=first_missing,
                        first_available=first_available,
                        error=f"{type(err).__name__}: {err}",
                        attempt=attempt,
                        retry_in_ms=round(delay_ms),
                    )
                    await asyncio.sleep(delay_ms / 1000.0)
            else:
                return
            self._delivered = max(self._delivered, first_available - 1)
            self._sm.durable_offset = self._delivered
        finally:
            with self._pending_lock:
                self._gap_task = None
        self._drain()

    def _stall(self, reason: str) -> None:
        self._delivery_error = reason
        self._resign_requested = True
        self._log.critical("metadata_delivery_stopped", reason=reason, delivered_offset=self._delivered)
