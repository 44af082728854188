"""AddRaftVoter and RemoveRaftVoter (KIP-853, Kafka API keys 80 and 81) on the active controller:
the rules of `quorum._voter_changes` over what this leader's Raft layer knows, then one replicated
voter change (`quorum.raft.MetadataQuorum.change_voters`).

Identity (issue 26): the new voter's public key is not taken from the request but from the
observer connection its Raft handshake authenticated -- an observer with this voter id *and*
directory id must be connected to this leader and caught up -- so the key every voter will accept
for that id is the key that controller proved it holds. Endpoints: the request names the new
voter's controller listener; its Raft endpoint is that port plus
``controller.quorum.raft.port.offset``, as for every voter.

Ordering: the checks and the proposal run on the event loop; pysyncobj re-checks the single-server
rule when it appends (a concurrent second change is refused there: REQUEST_TIMED_OUT, retriable).
"""

from __future__ import annotations

from typing import Any, Final

from kraftlog.common import errors as kerr
from kraftlog.proto import admin_pb2, errors_pb2
from kraftlog.quorum._dynamic_voters import DynamicVoter
from kraftlog.quorum._voter_changes import (
    LeaderView,
    check_add_voter,
    check_remove_voter,
    check_update_voter,
    endpoint_changed,
)
from kraftlog.quorum.raft import VOTER_ADD, VOTER_REMOVE, VOTER_UPDATE, RaftVoter, VoterChange

__all__ = ["MAX_OBSERVER_LAG_ENTRIES", "add_raft_voter", "remove_raft_voter", "update_raft_voter"]

#: how far (Raft entries) behind the commit index an observer may be when it is added: a voter that
#: joins further behind would hold back commits that need it while it catches up
MAX_OBSERVER_LAG_ENTRIES: Final = 1000
_DEFAULT_TIMEOUT_MS: Final = 30_000


def _view(server: Any) -> tuple[LeaderView, dict[int, RaftVoter], dict[int, Any], int]:
    quorum = server.quorum
    offset = int(server.config["controller.quorum.raft.port.offset"])
    commit_index, pending, observers = quorum.voter_change_view()
    voters = quorum.voters()
    leader = server.node_id if quorum.is_leader else quorum.leader_id
    if leader == server.node_id and not quorum.is_leader:
        leader = None
    view = LeaderView(
        kraft_version=server.kraft_version,
        node_id=server.node_id,
        leader_id=leader,
        voters={vid: DynamicVoter(vid, v.host, v.port - offset, v.directory_id or "") for vid, v in voters.items()},
        epoch_start_committed=bool(quorum.is_leader),
        high_watermark=commit_index,
        pending_change_offset=pending,
        observers={(oid, peer.directory_id or ""): match for oid, (peer, match) in observers.items()},
    )
    return view, voters, observers, offset


def _error(response: Any, err: kerr.KafkaError, server: Any) -> Any:
    response.error.CopyFrom(errors_pb2.Error(code=err.error_code, name=err.error_name, message=str(err)))
    response.controller.CopyFrom(server.hint())
    return response


async def add_raft_voter(server: Any, request: admin_pb2.AddRaftVoterRequest) -> admin_pb2.AddRaftVoterResponse:
    """Add the observer ``(voter_id, voter_directory_id)`` as a voter; the response carries Kafka's error."""
    R = admin_pb2.AddRaftVoterResponse
    try:
        if server.quorum is None:
            raise kerr.NotControllerError("this controller is not running")
        view, _voters, observers, offset = _view(server)
        voter = DynamicVoter(request.voter_id, request.host, request.port, request.voter_directory_id)
        check_add_voter(view, voter, max_lag_offsets=MAX_OBSERVER_LAG_ENTRIES)
        peer = observers[request.voter_id][0]
        change = VoterChange(
            VOTER_ADD,
            RaftVoter(
                request.voter_id, request.host, request.port + offset, request.voter_directory_id, peer.public_key
            ),
        )
        timeout_ms = request.timeout_ms or _DEFAULT_TIMEOUT_MS
        await server.quorum.change_voters(change, timeout_s=timeout_ms / 1000.0)
    except kerr.KafkaError as err:
        refused: admin_pb2.AddRaftVoterResponse = _error(R(), err, server)
        return refused
    return R(error=errors_pb2.Error(code=0, name="NONE"), controller=server.hint())


async def remove_raft_voter(
    server: Any, request: admin_pb2.RemoveRaftVoterRequest
) -> admin_pb2.RemoveRaftVoterResponse:
    """Remove voter ``(voter_id, voter_directory_id)``. The leader does not remove itself: it hands
    leadership to another voter and answers NOT_CONTROLLER, so the caller retries at the new leader."""
    R = admin_pb2.RemoveRaftVoterResponse
    try:
        if server.quorum is None:
            raise kerr.NotControllerError("this controller is not running")
        view, voters, _observers, _offset = _view(server)
        try:
            check_remove_voter(view, request.voter_id, request.voter_directory_id)
        except kerr.NotControllerError:
            if request.voter_id == server.node_id and server.quorum.is_leader:
                server.quorum.transfer_leadership()
            raise
        change = VoterChange(VOTER_REMOVE, voters[request.voter_id])
        await server.quorum.change_voters(change, timeout_s=_DEFAULT_TIMEOUT_MS / 1000.0)
    except kerr.KafkaError as err:
        not_removed: admin_pb2.RemoveRaftVoterResponse = _error(R(), err, server)
        return not_removed
    return R(error=errors_pb2.Error(code=0, name="NONE"), controller=server.hint())


async def update_raft_voter(
    server: Any, request: admin_pb2.UpdateRaftVoterRequest
) -> admin_pb2.UpdateRaftVoterResponse:
    """UpdateRaftVoter (KIP-853, API key 82): a voter tells the active controller its directory id,
    CONTROLLER endpoint and supported kraft.version range (`quorum._voter_changes.check_update_voter`).
    On a static quorum the leader keeps the directory id for the upgrade to kraft.version 1; on a
    dynamic one a new endpoint is one voter change (the voter keeps its key and directory id; the
    Raft endpoint is the port plus ``controller.quorum.raft.port.offset``), committed before the
    answer; an unchanged endpoint is all there is to confirm."""
    R = admin_pb2.UpdateRaftVoterResponse
    try:
        if server.quorum is None:
            raise kerr.NotControllerError("this controller is not running")
        view, voters, _observers, offset = _view(server)
        voter = DynamicVoter(request.voter_id, request.host, request.port, request.voter_directory_id)
        check_update_voter(view, voter, request.kraft_version_min, request.kraft_version_max)
        if endpoint_changed(view, voter):
            current = voters[request.voter_id]
            moved = RaftVoter(
                request.voter_id, request.host, request.port + offset, current.directory_id, current.public_key
            )
            await server.quorum.change_voters(VoterChange(VOTER_UPDATE, moved), timeout_s=_DEFAULT_TIMEOUT_MS / 1000.0)
        elif view.kraft_version < 1:
            server.quorum.record_voter_report(request.voter_id, request.voter_directory_id, request.kraft_version_max)
    except kerr.KafkaError as err:
        refused: admin_pb2.UpdateRaftVoterResponse = _error(R(), err, server)
        return refused
    return R(error=errors_pb2.Error(code=0, name="NONE"), controller=server.hint())
