"""Pre-vote (KIP-996, Raft thesis §9.6) and the leader-stickiness rule (thesis §4.2.3): the pure rules.

`_RaftNode` runs them on pysyncobj's tick thread; nothing here reads a clock or touches a socket
(the caller passes ``now``), so the unit tests drive every branch.

Why: pysyncobj lets any voter whose timer fires bump the term and send ``request_vote``, and every
voter that receives a higher term adopts it, deposing a live leader. So a controller that was paused,
partitioned away or is behind forced an epoch change on its return although it could not win.

The rules
---------
* A voter whose election timer fires does not increment its term. It first asks every voter
  whether it *would* vote for it (``kl_pre_vote`` carrying the would-be term ``current + 1`` and its
  last log index and term) and counts itself. Only a majority of grants lets it run pysyncobj's
  real election (term + 1, ``request_vote``). Without a majority the round simply expires with the
  next election timeout and a new round starts; nothing persistent changed.
* A voter grants a pre-vote (`grant_pre_vote`) only when the would-be term is not below its own,
  the candidate's log is at least as up to date as its own (Raft's comparison: last term, then last
  index), it is not itself an active leader, and it has not heard from a leader within
  ``leader_alive_window_s``. A pre-vote changes nothing on the voter (no term, no vote recorded).
* A voter that heard from a live leader within the window, or is the leader, ignores a real
  ``request_vote`` (`ignore_vote_request`): it neither adopts the term nor answers. The exception is
  a vote request sent on a leadership transfer (the leader's ``timeout_now``), flagged
  ``kl_transfer``: the leader itself asked for that election.
* The window is the minimum election timeout less two heartbeat periods: a live leader is heard every
  heartbeat period, and a follower whose leader died campaigns at least one minimum election timeout
  after its last heartbeat, so the others' last heartbeat (received within a tick of ours) is out of
  the window by then.

Epoch fencing is unchanged: the Raft term is still the controller epoch and a batch is still
accepted only in the term its proposer claimed. Pre-vote only decides *whether* a term starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "PRE_VOTE",
    "PRE_VOTE_RESPONSE",
    "TERM_AHEAD",
    "TRANSFER_FLAG",
    "PreVoteRound",
    "grant_pre_vote",
    "ignore_vote_request",
    "leader_alive_window_s",
    "leader_recently_heard",
    "log_is_up_to_date",
]

#: kraftlog's own Raft message kinds (pysyncobj's dispatcher ignores kinds it does not know).
PRE_VOTE: Final = "kl_pre_vote"
PRE_VOTE_RESPONSE: Final = "kl_pre_vote_response"
#: told to a leader whose term is below ours (see `_RaftNode`): it steps down.
TERM_AHEAD: Final = "kl_term_ahead"
#: optional key of ``request_vote``: the election was asked for by the leader (``timeout_now``)
TRANSFER_FLAG: Final = "kl_transfer"


def log_is_up_to_date(
    candidate_last_term: int, candidate_last_index: int, own_last_term: int, own_last_index: int
) -> bool:
    """Raft's §5.4.1 comparison: the candidate's log is at least as up to date as ours."""
    return (candidate_last_term, candidate_last_index) >= (own_last_term, own_last_index)


def leader_alive_window_s(min_election_timeout_s: float, heartbeat_period_s: float) -> float:
    """How long after hearing from a leader a voter still believes it alive (module docstring)."""
    return max(min_election_timeout_s - 2 * heartbeat_period_s, min_election_timeout_s / 2)


def leader_recently_heard(last_heard_s: float | None, now_s: float, window_s: float) -> bool:
    """True when a leader was heard from less than ``window_s`` before ``now_s``."""
    return last_heard_s is not None and now_s - last_heard_s < window_s


def grant_pre_vote(
    *,
    candidate_term: int,
    candidate_last_term: int,
    candidate_last_index: int,
    own_term: int,
    own_last_term: int,
    own_last_index: int,
    is_leader: bool,
    leader_heard_s: float | None,
    now_s: float,
    window_s: float,
) -> bool:
    """Whether this voter would vote for the candidate in ``candidate_term`` (KIP-996's rule)."""
    if candidate_term < own_term or is_leader:
        return False
    if leader_recently_heard(leader_heard_s, now_s, window_s):
        return False
    return log_is_up_to_date(candidate_last_term, candidate_last_index, own_last_term, own_last_index)


def ignore_vote_request(
    *, transfer: bool, is_leader: bool, leader_heard_s: float | None, now_s: float, window_s: float
) -> bool:
    """True when a real ``request_vote`` must be dropped unanswered (leader stickiness, §4.2.3)."""
    if transfer:
        return False
    return is_leader or leader_recently_heard(leader_heard_s, now_s, window_s)


@dataclass(slots=True)
class PreVoteRound:
    """One pre-vote round of this node: the would-be term and who granted it (itself included)."""

    term: int
    voters: int
    granted: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)

    def record(self, voter: str, term: int, granted: bool) -> None:
        """Count one answer; answers for another round's term are ignored."""
        if term != self.term:
            return
        if granted:
            self.refused.discard(voter)
            self.granted.add(voter)
        elif voter not in self.granted:
            self.refused.add(voter)

    @property
    def won(self) -> bool:
        """A strict majority of the voters granted."""
        return 2 * len(self.granted) > self.voters
