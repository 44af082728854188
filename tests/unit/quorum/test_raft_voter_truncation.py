"""A voter change appended and then truncated away (the leader changed before it committed) is no
longer in force (issue 26, KIP-853): on the pure core (`quorum.raft._membership`), no sockets.

The log is modelled as pysyncobj's entries ``(command, raft index, term)``; a new leader's log
replaces a follower's tail from the first conflicting index (Raft's truncation), and the node
re-derives the voter set in force and the pending change from what is left, as
`quorum.raft._raft_voters._VoterChangesNode` does before its next tick.
"""

from __future__ import annotations

import pytest

from kraftlog.common.errors import RequestTimedOutError
from kraftlog.quorum._dynamic_voters import DynamicVoter
from kraftlog.quorum._voter_changes import LeaderView, check_add_voter
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VOTER_REMOVE,
    RaftVoter,
    VoterChange,
    encode_voter_change,
    pending_voter_change,
    revert_voter_change,
    voters_in_force,
)
from kraftlog.quorum.raft._raft_messages import encode_append_command

V = {i: RaftVoter(i, "127.0.0.1", 9100 + i, f"AAAAAAAAAAAAAAAAAAAAA{'ABCDEFGH'[i]}", f"key-{i}") for i in range(1, 6)}

Entry = tuple[bytes, int, int]


def change(op: str, voter: RaftVoter) -> bytes:
    return b"\x00" + encode_voter_change(VoterChange(op, voter))


def batch(epoch: int) -> bytes:
    return b"\x00" + encode_append_command(epoch, 1_000 * epoch, [b"record"])


def truncate_and_append(log: list[Entry], leader_log: list[Entry]) -> list[Entry]:
    """Raft's follower rule: drop the tail from the first index whose term differs, take the leader's."""
    by_index = {index: term for _cmd, index, term in log}
    first_conflict = next((index for _cmd, index, term in leader_log if by_index.get(index) != term), None)
    if first_conflict is None:
        return log
    kept = [e for e in log if e[1] < first_conflict]
    return kept + [e for e in leader_log if e[1] >= first_conflict]


def test_an_added_voter_truncated_away_is_no_voter_again() -> None:
    committed = {1: V[1], 2: V[2], 3: V[3]}  # applied up to raft index 10
    # leader 1 (term 2) appends a batch and the change adding 4; it dies before either commits
    tail = [(batch(2), 11, 2), (change(VOTER_ADD, V[4]), 12, 2)]
    assert voters_in_force(committed, [c for c, _i, _t in tail]) == {**committed, 4: V[4]}
    assert pending_voter_change(tail) == 12

    # leader 2 (term 3) never had index 12: its no-op and its own batch replace the tail from 12
    leader_log = [(batch(2), 11, 2), (batch(3), 12, 3), (batch(3), 13, 3)]
    tail = truncate_and_append(tail, leader_log)
    assert [i for _c, i, t in tail] == [11, 12, 13] and tail[1][2] == 3
    in_force = voters_in_force(committed, [c for c, _i, _t in tail])
    assert in_force == committed, "the truncated change adding 4 is no longer in force"
    assert 4 not in in_force  # node 4 is an observer again: it neither votes nor is counted
    assert in_force == revert_voter_change({**committed, 4: V[4]}, VoterChange(VOTER_ADD, V[4]))
    assert pending_voter_change(tail) is None


def test_a_removal_truncated_away_gives_the_voter_its_vote_back() -> None:
    committed = {1: V[1], 2: V[2], 3: V[3]}
    tail = [(change(VOTER_REMOVE, V[3]), 21, 4)]
    assert voters_in_force(committed, [tail[0][0]]) == {1: V[1], 2: V[2]}
    tail = truncate_and_append(tail, [(batch(5), 21, 5)])
    assert voters_in_force(committed, [c for c, _i, _t in tail]) == committed


def test_the_new_leader_s_own_change_replaces_the_truncated_one() -> None:
    """Truncation replaces the old leader's change by the new leader's: the set in force is the new
    leader's change alone (not both), and it is the pending change the next request waits for."""
    committed = {1: V[1], 2: V[2], 3: V[3]}
    tail = [(change(VOTER_ADD, V[4]), 31, 6)]
    leader_log = [(change(VOTER_ADD, V[5]), 31, 7)]
    tail = truncate_and_append(tail, leader_log)
    assert voters_in_force(committed, [c for c, _i, _t in tail]) == {**committed, 5: V[5]}
    assert pending_voter_change(tail) == 31


def _view(pending: int | None) -> LeaderView:
    return LeaderView(
        kraft_version=1,
        node_id=1,
        leader_id=1,
        voters={vid: DynamicVoter(vid, v.host, v.port, v.directory_id or "") for vid, v in V.items() if vid <= 3},
        epoch_start_committed=True,
        high_watermark=40,
        pending_change_offset=pending,
        observers={(4, V[4].directory_id or ""): 40},
    )


def test_a_truncated_change_no_longer_blocks_the_next_one() -> None:
    """KIP-853's one change at a time looks at the pending change the log holds: once truncated
    away, the next AddRaftVoter is decided (here: allowed) instead of REQUEST_TIMED_OUT."""
    new = DynamicVoter(4, V[4].host, V[4].port, V[4].directory_id or "")
    tail = [(change(VOTER_ADD, V[5]), 41, 8)]
    with pytest.raises(RequestTimedOutError, match="offset 41"):
        check_add_voter(_view(pending_voter_change(tail)), new, max_lag_offsets=10)
    tail = truncate_and_append(tail, [(batch(9), 41, 9)])
    check_add_voter(_view(pending_voter_change(tail)), new, max_lag_offsets=10)
