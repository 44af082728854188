"""The voter-change face of `quorum.raft.MetadataQuorum` (issue 26, KIP-853): append one voter
change or the upgrade to kraft.version 1, and read what such a change is decided on (the committed
voter set, the pending change, the observers, the voters' reports).

Ordering: the proposals run on the event loop and are resolved there from pysyncobj's callback; the
readers take pysyncobj's state without its lock (maps replaced whole: a view a tick old at worst).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from pysyncobj import FAIL_REASON

from kraftlog.common.errors import InvalidRequestError, NotControllerError, RequestTimedOutError
from kraftlog.quorum.raft._membership import (
    KRaftUpgrade,
    MembershipChange,
    RaftVoter,
    VoterChangeError,
    apply_voter_change,
    kraft_version_of,
)
from kraftlog.quorum.raft._raft_delivery import _QuorumDelivery
from kraftlog.quorum.raft._raft_state import APPLY_VOTERS

__all__: list[str] = []


class _QuorumVoters(_QuorumDelivery):
    """`MetadataQuorum`'s voter changes; `MetadataQuorum` derives from it."""

    _inflight: set[asyncio.Future[Any]]
    _raft_voters: dict[int, RaftVoter]

    @property
    def is_leader(self) -> bool:  # MetadataQuorum's
        raise NotImplementedError

    def _leader_hint(self) -> dict[str, Any]:  # MetadataQuorum's
        raise NotImplementedError

    def _stamped(self, node: Any, change: MembershipChange) -> MembershipChange:
        """``change`` with the proposal time and, for an add or remove, the whole voter set after it
        (from the set in force on this leader): what the metadata log's VotersRecord is made of."""
        now_ms = int(self._wall_clock() * 1000)
        if isinstance(change, KRaftUpgrade):
            return dataclasses.replace(change, timestamp_ms=now_ms)
        try:
            after = apply_voter_change(node._kl_voters_in_force(), change)
        except VoterChangeError as err:
            raise InvalidRequestError(f"voter change refused: {err}") from None
        return dataclasses.replace(change, timestamp_ms=now_ms, voters_after=tuple(after[v] for v in sorted(after)))

    async def change_voters(self, change: MembershipChange, *, timeout_s: float) -> None:
        """Append one voter change (issue 26) -- or the upgrade to kraft.version 1 -- on this
        leader and return once it is committed.

        The caller checked KIP-853's rules first (`quorum._voter_changes`); pysyncobj enforces the
        single-server rule again (its leader appends a change only once its epoch's no-op and the
        previous change are applied): a refusal there is ``RequestTimedOutError`` (retriable).
        ``NotControllerError`` when this node is not the leader or lost leadership meanwhile;
        ``RequestTimedOutError`` when not committed within ``timeout_s`` (outcome unknown).
        """
        node = self._node
        if node is None or not self.is_leader:
            raise NotControllerError(**self._leader_hint())
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._inflight.add(fut)

        def on_result(result: Any, error: int) -> None:  # pysyncobj's thread
            self._call_soon(self._resolve_voter_change, fut, result, error)

        try:
            try:
                stamped = self._stamped(node, change)
                node._kl_change_voters(stamped, callback=on_result)
            except BlockingIOError:
                pass
            try:
                await asyncio.wait_for(fut, timeout_s)
            except TimeoutError:
                raise RequestTimedOutError(
                    f"voter change not committed within {timeout_s:.3f}s; outcome unknown", **self._leader_hint()
                ) from None
        finally:
            self._inflight.discard(fut)

    def voter_change_view(self) -> tuple[int, int | None, dict[int, tuple[Any, int]]]:
        """What a voter change is decided on (issue 26): (raft commit index, raft index of a voter
        change not committed yet or None, observers: id -> (`ObserverPeer`, raft match index)).
        Read from pysyncobj's state without its lock: a snapshot that may be a tick old."""
        node = self._node
        if node is None:
            return -1, None, {}
        return int(node.raftCommitIndex), node.kl_pending_voter_change(), node.kl_observers()

    def transfer_leadership(self) -> None:
        """Ask pysyncobj to hand leadership to a caught-up voter (the leader removing itself)."""
        node = self._node
        if node is not None and self.is_leader:
            node.transferLeadership()

    def voters(self) -> dict[int, RaftVoter]:
        """The committed voter set (this node's view)."""
        node = self._node
        return node.kl_applied_voters() if node is not None else dict(self._raft_voters)

    @property
    def kraft_version(self) -> int:
        """1 when the committed voter set is dynamic (every voter has a directory id), else 0."""
        return kraft_version_of(self.voters())

    def voter_reports(self) -> dict[int, tuple[str | None, int]]:
        """Voter id -> (directory id, highest kraft.version supported), as the voters reported them
        to this node (its own included): what the upgrade to kraft.version 1 is decided on."""
        node = self._node
        return node.kl_voter_reports() if node is not None else {}

    def record_voter_report(self, voter_id: int, directory_id: str | None, kraft_version_max: int) -> None:
        """Keep what a voter's UpdateRaftVoter reported, as its keepalive report would (the map is
        replaced whole; a report racing pysyncobj's thread may be lost, and is sent again)."""
        node = self._node
        if node is not None:
            node._kl_voter_reports = {**node._kl_voter_reports, voter_id: (directory_id or None, kraft_version_max)}

    def _resolve_voter_change(self, fut: asyncio.Future[Any], result: Any, error: int) -> None:
        if fut.done():
            return
        if error == FAIL_REASON.SUCCESS and isinstance(result, tuple) and result and result[0] == APPLY_VOTERS:
            fut.set_result(None)
        elif error == FAIL_REASON.SUCCESS:
            fut.set_exception(InvalidRequestError(f"voter change refused: {result!r:.200}"))
        elif error == FAIL_REASON.REQUEST_DENIED:
            fut.set_exception(
                RequestTimedOutError(
                    "the leader has not committed its epoch's first entry or the previous voter change yet",
                    **self._leader_hint(),
                )
            )
        elif error in (FAIL_REASON.QUEUE_FULL, FAIL_REASON.UNKNOWN_OUTCOME):
            fut.set_exception(RequestTimedOutError("voter change outcome unknown", **self._leader_hint()))
        else:
            fut.set_exception(NotControllerError(f"voter change not committed (reason {error})", **self._leader_hint()))
