"""The rules a voter change of a dynamic quorum (KIP-853) must pass before the leader appends it:
pure functions over what the leader knows, raising Kafka's errors (AddRaftVoter, RemoveRaftVoter).

`quorum._voter_admin` runs them on the active controller before it appends the change
(`quorum.raft._membership`); each is tested on its own.

Raft's single-server rule, as KIP-853 states it, and the order the checks run in (Kafka's
AddVoterHandler / RemoveVoterHandler order, so the same request gets the same error):

1. the quorum is dynamic (``kraft.version`` >= 1), else UNSUPPORTED_VERSION;
2. this node is the leader (NOT_CONTROLLER: the caller follows the hint to the active controller);
3. the leader has committed an entry of its own epoch (a new leader may still hold an uncommitted
   change of the previous one, so deciding before would allow two overlapping changes), else
   REQUEST_TIMED_OUT;
4. no voter change is pending: one at a time, each committed before the next, else REQUEST_TIMED_OUT;
5. add: the id is not a voter yet (DUPLICATE_VOTER), the new voter names an endpoint
   (INVALID_REQUEST), and it is an observer with *this* directory id that has caught up (its log end
   within ``max_lag_offsets`` of the high watermark) -- a voter that joins empty would stall commits
   until it caught up (REQUEST_TIMED_OUT, retriable once it has);
6. update (UpdateRaftVoter, Kafka's UpdateVoterHandler; on a static quorum too, whose voters report
   their directory ids this way): the supported kraft.version range holds the quorum's
   (INVALID_REQUEST), the voter names an endpoint (INVALID_REQUEST), it is a voter -- by id on a
   static quorum, by ``(id, directory id)`` on a dynamic one (VOTER_NOT_FOUND). On a dynamic quorum
   an endpoint other than the voter set's is appended as a voter change of its own (the voter
   restarted on another listener: `quorum._endpoint_update`); the same endpoint is a no-op;
7. remove: ``(id, directory id)`` is a voter (VOTER_NOT_FOUND: a wiped and re-formatted disk has a
   new directory id and is another replica), the set does not become empty (INVALID_REQUEST), and
   the leader does not remove itself: it hands leadership to another voter first, whose leadership
   then removes it (NOT_CONTROLLER, so the caller retries at the new leader).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftlog.common.errors import (
    DuplicateVoterError,
    InvalidRequestError,
    NotControllerError,
    RequestTimedOutError,
    UnsupportedVersionError,
    VoterNotFoundError,
)
from kraftlog.quorum._dynamic_voters import DynamicVoter

__all__ = ["LeaderView", "check_add_voter", "check_remove_voter", "check_update_voter", "endpoint_changed"]


@dataclass(frozen=True)
class LeaderView:
    """What the node that received the request knows when it decides."""

    kraft_version: int
    node_id: int
    leader_id: int | None
    #: the current voter set (the last voter change appended, committed or not)
    voters: Mapping[int, DynamicVoter]
    #: the leader has committed an entry of its own epoch
    epoch_start_committed: bool
    high_watermark: int
    #: offset of a voter change appended but not committed yet, or None
    pending_change_offset: int | None = None
    #: observers the leader hears from: (id, directory id) -> log end offset
    observers: Mapping[tuple[int, str], int] = field(default_factory=dict)


def _check_leader(view: LeaderView, action: str, *, static_allowed: bool = False) -> None:
    if view.kraft_version < 1 and not static_allowed:
        raise UnsupportedVersionError(
            f"Cluster doesn't support {action} voter because the kraft.version feature is {view.kraft_version}"
        )
    if view.leader_id != view.node_id:
        raise NotControllerError(f"node {view.node_id} is not the leader (leader: {view.leader_id})")
    if not view.epoch_start_committed:
        raise RequestTimedOutError("the leader has not committed an entry of its epoch yet")
    if view.pending_change_offset is not None:
        raise RequestTimedOutError(
            "Request timed out waiting for voters to commit the latest voter change at offset "
            f"{view.pending_change_offset}"
        )


def check_add_voter(view: LeaderView, voter: DynamicVoter, *, max_lag_offsets: int) -> None:
    """Raise the Kafka error AddRaftVoter answers with, or return when ``voter`` may be appended."""
    _check_leader(view, "adding")
    if voter.node_id in view.voters:
        raise DuplicateVoterError(
            f"The voter id for ReplicaKey(id={voter.node_id}, directoryId={voter.directory_id}) "
            "is already part of the set of voters"
        )
    if not voter.host or voter.port <= 0:
        raise InvalidRequestError(f"voter {voter.node_id} names no endpoint")
    leo = view.observers.get((voter.node_id, voter.directory_id))
    if leo is None:
        raise RequestTimedOutError(
            f"voter {voter.node_id} (directory {voter.directory_id}) is not an observer of the leader yet: "
            "start it (formatted with --no-initial-controllers) and retry"
        )
    if view.high_watermark - leo > max_lag_offsets:
        raise RequestTimedOutError(
            f"voter {voter.node_id} is not caught up to the leader: log end offset {leo}, "
            f"high watermark {view.high_watermark}"
        )


def check_remove_voter(view: LeaderView, node_id: int, directory_id: str) -> None:
    """Raise the Kafka error RemoveRaftVoter answers with, or return when the removal may be appended."""
    _check_leader(view, "removing")
    voter = view.voters.get(node_id)
    if voter is None or voter.directory_id != directory_id:
        raise VoterNotFoundError(
            f"Cannot remove voter ReplicaKey(id={node_id}, directoryId={directory_id}) "
            "from the set of voters: it is not a voter"
        )
    if len(view.voters) == 1:
        raise InvalidRequestError(f"voter {node_id} is the only voter: the quorum cannot become empty")
    if node_id == view.node_id:
        raise NotControllerError(
            f"voter {node_id} is the leader: it hands leadership to another voter first; retry at the new leader"
        )


def check_update_voter(view: LeaderView, voter: DynamicVoter, kraft_min: int, kraft_max: int) -> None:
    """Raise the Kafka error UpdateRaftVoter answers with, or return when the report is accepted."""
    _check_leader(view, "updating", static_allowed=True)
    if not kraft_min <= view.kraft_version <= kraft_max:
        raise InvalidRequestError(
            f"voter {voter.node_id} supports kraft.version {kraft_min}-{kraft_max},"
            f" the quorum is at {view.kraft_version}"
        )
    if not voter.host or voter.port <= 0:
        raise InvalidRequestError(f"voter {voter.node_id} names no endpoint")
    current = view.voters.get(voter.node_id)
    if current is None or (view.kraft_version >= 1 and current.directory_id != voter.directory_id):
        raise VoterNotFoundError(
            f"Cannot update voter ReplicaKey(id={voter.node_id}, directoryId={voter.directory_id}): it is not a voter"
        )


def endpoint_changed(view: LeaderView, voter: DynamicVoter) -> bool:
    """Whether an accepted UpdateRaftVoter (`check_update_voter`) moves a dynamic quorum's voter to
    another endpoint: a voter change the leader appends, one at a time like any other."""
    current = view.voters.get(voter.node_id)
    return view.kraft_version >= 1 and current is not None and (current.host, current.port) != (voter.host, voter.port)
