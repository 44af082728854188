"""Pre-vote and leader stickiness (issue 26, KIP-996): the pure rules of `quorum.raft._prevote` and
the wire shapes of the messages that carry them."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import msgpack
import pytest

from kraftlog.common.errors import CorruptMessageError
from kraftlog.quorum.raft._prevote import (
    PRE_VOTE,
    PRE_VOTE_RESPONSE,
    TERM_AHEAD,
    TRANSFER_FLAG,
    PreVoteRound,
    grant_pre_vote,
    ignore_vote_request,
    leader_alive_window_s,
    leader_recently_heard,
    log_is_up_to_date,
)
from kraftlog.quorum.raft._raft_messages import decode_message, encode_message

WINDOW = 0.9


def grant(**overrides: Any) -> bool:
    args: dict[str, Any] = {
        "candidate_term": 6,
        "candidate_last_term": 5,
        "candidate_last_index": 100,
        "own_term": 5,
        "own_last_term": 5,
        "own_last_index": 100,
        "is_leader": False,
        "leader_heard_s": None,
        "now_s": 50.0,
        "window_s": WINDOW,
    }
    args.update(overrides)
    return grant_pre_vote(**args)


def test_a_candidate_as_up_to_date_with_no_live_leader_is_granted() -> None:
    assert grant()
    assert grant(candidate_last_index=101)
    assert grant(candidate_last_term=6, candidate_last_index=1)  # a newer last term wins over a longer log
    assert grant(leader_heard_s=49.0)  # heard more than a window ago: no longer alive


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"candidate_last_index": 99}, "log shorter in the same last term"),
        ({"candidate_last_term": 4, "candidate_last_index": 500}, "older last term, however long"),
        ({"leader_heard_s": 49.5}, "a leader was heard 0.5 s ago"),
        ({"leader_heard_s": 50.0}, "a leader was heard just now"),
        ({"is_leader": True}, "the voter is the leader"),
        ({"candidate_term": 4}, "the would-be term is below the voter's"),
    ],
)
def test_a_candidate_that_could_not_win_or_a_live_leader_means_refusal(overrides: dict[str, Any], why: str) -> None:
    assert not grant(**overrides), why


def test_the_would_be_term_may_equal_the_voters_term() -> None:
    """A voter already in term T+1 (an election without a winner) still answers for T+1: granting
    changes nothing on it, and the real vote decides."""
    assert grant(candidate_term=5)


def test_log_comparison_is_rafts() -> None:
    assert log_is_up_to_date(3, 10, 3, 10)
    assert log_is_up_to_date(4, 0, 3, 10)
    assert not log_is_up_to_date(3, 9, 3, 10)
    assert not log_is_up_to_date(2, 99, 3, 10)


def test_leader_recency() -> None:
    assert not leader_recently_heard(None, 10.0, 1.0)
    assert leader_recently_heard(9.5, 10.0, 1.0)
    assert not leader_recently_heard(9.0, 10.0, 1.0)


def test_the_window_is_below_the_minimum_election_timeout_and_above_a_heartbeat() -> None:
    # election timeout 1 s, heartbeat 50 ms: a follower whose leader died campaigns >= 1 s after its last
    # heartbeat; the others' last heartbeat is then out of a 0.9 s window
    assert leader_alive_window_s(1.0, 0.05) == pytest.approx(0.9)
    assert leader_alive_window_s(1.0, 0.4) == pytest.approx(0.5)  # never below half the timeout


@pytest.mark.parametrize(
    ("transfer", "is_leader", "heard", "ignored"),
    [
        (False, False, None, False),
        (False, False, 9.95, True),
        (False, False, 8.0, False),
        (False, True, None, True),
        (True, True, 9.99, False),  # the leader asked for this election (timeout_now)
        (True, False, 9.99, False),
    ],
)
def test_vote_requests_are_ignored_while_a_leader_lives_unless_it_asked(
    transfer: bool, is_leader: bool, heard: float | None, ignored: bool
) -> None:
    assert (
        ignore_vote_request(transfer=transfer, is_leader=is_leader, leader_heard_s=heard, now_s=10.0, window_s=WINDOW)
        is ignored
    )


def test_a_round_needs_a_strict_majority_of_its_own_term() -> None:
    r = PreVoteRound(term=7, voters=3, granted={"me"})
    assert not r.won
    r.record("b", 6, True)  # an answer to an earlier round
    assert not r.won
    r.record("b", 7, False)
    assert not r.won and r.refused == {"b"}
    r.record("c", 7, True)
    assert r.won
    four = PreVoteRound(term=2, voters=4, granted={"me"})
    four.record("b", 2, True)
    assert not four.won  # 2 of 4 is no majority
    four.record("c", 2, True)
    assert four.won


def test_a_single_voter_wins_its_own_round() -> None:
    assert PreVoteRound(term=1, voters=1, granted={"me"}).won


def _wire(message: dict[str, Any]) -> dict[str, Any]:
    return decode_message(msgpack.packb(message, use_bin_type=True))


def test_pre_vote_messages_round_trip() -> None:
    request = {"type": PRE_VOTE, "term": 8, "last_log_index": 120, "last_log_term": 7}
    assert _wire(request) == request
    response = {"type": PRE_VOTE_RESPONSE, "term": 8, "granted": False}
    assert _wire(response) == response
    assert _wire({"type": TERM_AHEAD, "term": 9}) == {"type": TERM_AHEAD, "term": 9}
    vote = {"type": "request_vote", "term": 8, "last_log_index": 1, "last_log_term": 1, TRANSFER_FLAG: True}
    assert _wire(vote) == vote


@pytest.mark.parametrize(
    "message",
    [
        {"type": PRE_VOTE, "term": 8, "last_log_index": 1},
        {"type": PRE_VOTE, "term": -1, "last_log_index": 1, "last_log_term": 1},
        {"type": PRE_VOTE_RESPONSE, "term": 8, "granted": 1},
        {"type": PRE_VOTE_RESPONSE, "term": 8},
        {"type": TERM_AHEAD, "term": "9"},
        {"type": "request_vote", "term": 8, "last_log_index": 1, "last_log_term": 1, TRANSFER_FLAG: False},
        {"type": "request_vote", "term": 8, "last_log_index": 1, "last_log_term": 1, TRANSFER_FLAG: 1},
        {"type": "request_vote", "term": 8, "last_log_index": 1, "last_log_term": 1, "extra": True},
    ],
)
def test_malformed_pre_vote_messages_are_refused(message: dict[str, Any]) -> None:
    with pytest.raises(CorruptMessageError):
        _wire(message)


# ------------------------------------------------------------------ three _RaftNodes on an in-memory network


def _harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.unit.quorum.test_raft_journal import ADDRS, Cluster

    monkeypatch.setattr("kraftlog.quorum.raft._raft_node.random", types.SimpleNamespace(uniform=lambda a, b: 0.0))
    cl = Cluster(tmp_path, stock=False)
    cl.elect(ADDRS[0])
    assert cl.nodes[ADDRS[0]]._isLeader()
    return cl, ADDRS


def test_a_node_cut_off_from_a_live_leader_changes_no_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cl, (a, b, c) = _harness(tmp_path, monkeypatch)
    cl.propose(a, "X")
    term = cl.nodes[a].raftCurrentTerm
    cl.net.blocked |= {(a, c), (c, a)}
    cl.nodes[c]._SyncObj__raftElectionDeadline = 0  # c's timer fires; b heard from a just now
    cl.pump()
    assert [cl.nodes[n].raftCurrentTerm for n in (a, b, c)] == [term, term, term]
    assert cl.nodes[a]._isLeader()
    assert cl.nodes[c]._kl_prevote is not None and cl.nodes[c]._kl_prevote.refused == {b}
    # a real vote request (as a node without pre-vote would send) is ignored by b, which heard from a
    cl.net.inject(
        c, b, encode_message({"type": "request_vote", "term": term + 5, "last_log_index": 99, "last_log_term": term})
    )
    assert cl.nodes[b].raftCurrentTerm == term
    cl.net.blocked.clear()
    cl.pump()
    assert cl.propose(a, "Y")[0][1] == 0  # FAIL_REASON.SUCCESS
    assert cl.nodes[a]._isLeader() and cl.nodes[a].raftCurrentTerm == term


def test_a_node_whose_log_is_behind_cannot_start_a_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cl, (a, b, c) = _harness(tmp_path, monkeypatch)
    cl.net.blocked |= {(a, c), (c, a)}
    cl.propose(a, "X")  # c misses X
    cl.net.dead.add(a)
    cl.net.blocked.clear()
    term = cl.nodes[b].raftCurrentTerm
    cl.elect(c)  # no leader is alive now, but c is behind b: b refuses, then campaigns itself
    assert cl.nodes[b]._isLeader()
    assert cl.nodes[b].raftCurrentTerm == term + 1, "exactly one new term: b's, none for c's attempt"


def test_a_leader_told_of_a_higher_term_steps_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cl, (a, b, c) = _harness(tmp_path, monkeypatch)
    term = cl.nodes[a].raftCurrentTerm
    cl.nodes[c]._SyncObj__setCurrentTerm(term + 2, None)  # c's term got ahead (a lost race after a won pre-vote)
    cl.propose(a, "X")  # a's append of the lower term reaches c, which answers with its own term
    assert cl.nodes[a].raftCurrentTerm == term + 2
    assert not cl.nodes[a]._isLeader()


def test_a_leadership_transfer_needs_no_pre_vote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cl, (a, b, c) = _harness(tmp_path, monkeypatch)
    term = cl.nodes[a].raftCurrentTerm
    cl.pump()
    cl.nodes[a].transferLeadership(b)
    cl.pump()
    assert cl.nodes[b]._isLeader() and cl.nodes[b].raftCurrentTerm == term + 1
