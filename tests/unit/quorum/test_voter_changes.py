"""The rules of a voter change (KIP-853, issue 26): each refusal with Kafka's error, in Kafka's order."""

from __future__ import annotations

import dataclasses

import pytest

from kraftlog.common import errors as kerr
from kraftlog.quorum import DynamicVoter, LeaderView, check_add_voter, check_remove_voter

D = ["K90IZ-0DRNazJ49kCZ1EMQ", "aUARLskQTCW4qCZDtS_cwA", "2ggvsS4kQb-fSJ_-zC_Ang", "JEXY6aqzQY-32P5TStzaFg"]
V = {n: DynamicVoter(n, "127.0.0.1", 9090 + n, D[n - 1]) for n in (1, 2, 3, 4)}


def _view(**changes: object) -> LeaderView:
    base = LeaderView(
        kraft_version=1,
        node_id=1,
        leader_id=1,
        voters={1: V[1], 2: V[2]},
        epoch_start_committed=True,
        high_watermark=100,
        observers={(3, D[2]): 95},
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_caught_up_observer_may_join() -> None:
    check_add_voter(_view(), V[3], max_lag_offsets=10)


@pytest.mark.parametrize(
    ("view", "voter", "error", "message"),
    [
        (_view(kraft_version=0), V[3], kerr.UnsupportedVersionError, "kraft.version feature is 0"),
        (_view(leader_id=2), V[3], kerr.NotControllerError, "not the leader"),
        (_view(epoch_start_committed=False), V[3], kerr.RequestTimedOutError, "committed an entry of its epoch"),
        (_view(pending_change_offset=42), V[3], kerr.RequestTimedOutError, "latest voter change at offset 42"),
        (_view(), V[2], kerr.DuplicateVoterError, "already part of the set of voters"),
        (_view(), dataclasses.replace(V[3], host=""), kerr.InvalidRequestError, "names no endpoint"),
        (_view(), V[4], kerr.RequestTimedOutError, "not an observer of the leader"),
        # the observer with another directory id is another replica
        (_view(), dataclasses.replace(V[3], directory_id=D[3]), kerr.RequestTimedOutError, "not an observer"),
        (_view(observers={(3, D[2]): 50}), V[3], kerr.RequestTimedOutError, "not caught up"),
    ],
)
def test_add_refusals(view: LeaderView, voter: DynamicVoter, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        check_add_voter(view, voter, max_lag_offsets=10)


def test_one_change_at_a_time_comes_before_the_voter_checks() -> None:
    """A pending change refuses even a request that would be a duplicate: the order is Kafka's."""
    with pytest.raises(kerr.RequestTimedOutError):
        check_add_voter(_view(pending_change_offset=7), V[2], max_lag_offsets=10)
    with pytest.raises(kerr.RequestTimedOutError):
        check_remove_voter(_view(pending_change_offset=7), 5, D[0])


def test_remove_rules() -> None:
    check_remove_voter(_view(), 2, D[1])
    with pytest.raises(kerr.VoterNotFoundError):
        check_remove_voter(_view(), 2, D[3])  # a re-formatted disk is not that voter
    with pytest.raises(kerr.VoterNotFoundError):
        check_remove_voter(_view(), 9, D[1])
    with pytest.raises(kerr.NotControllerError, match="hands leadership to another voter first"):
        check_remove_voter(_view(), 1, D[0])
    with pytest.raises(kerr.InvalidRequestError, match="only voter"):
        check_remove_voter(_view(voters={1: V[1]}), 1, D[0])
    with pytest.raises(kerr.UnsupportedVersionError):
        check_remove_voter(_view(kraft_version=0), 2, D[1])


# ------------------------------------------------------------------ UpdateRaftVoter (API key 82)


def test_a_voter_of_a_static_quorum_reports_by_id_only() -> None:
    from kraftlog.quorum import check_update_voter

    static = _view(kraft_version=0, voters={1: dataclasses.replace(V[1], directory_id=""), 2: V[2]})
    check_update_voter(static, V[1], 0, 1)  # its directory id is news to a static quorum
    with pytest.raises(kerr.VoterNotFoundError):
        check_update_voter(static, V[3], 0, 1)
    with pytest.raises(kerr.InvalidRequestError, match="the quorum is at 0"):
        check_update_voter(static, V[1], 1, 1)


@pytest.mark.parametrize(
    ("voter", "error", "message"),
    [
        (dataclasses.replace(V[2], directory_id=D[3]), kerr.VoterNotFoundError, "not a voter"),
        (dataclasses.replace(V[2], host=""), kerr.InvalidRequestError, "names no endpoint"),
    ],
)
def test_update_refusals_on_a_dynamic_quorum(voter: DynamicVoter, error: type[Exception], message: str) -> None:
    from kraftlog.quorum import check_update_voter

    check_update_voter(_view(), V[2], 0, 1)  # the same endpoint: nothing to change
    with pytest.raises(error, match=message):
        check_update_voter(_view(), voter, 0, 1)
    with pytest.raises(kerr.NotControllerError):
        check_update_voter(_view(leader_id=2), V[2], 0, 1)
    with pytest.raises(kerr.RequestTimedOutError):
        check_update_voter(_view(pending_change_offset=7), V[2], 0, 1)


def test_an_update_to_another_endpoint_is_a_voter_change_on_a_dynamic_quorum() -> None:
    """Issue 26: UpdateRaftVoter with a new endpoint (the voter restarted on another listener) is
    accepted -- it was INVALID_REQUEST before -- and is a change the leader appends; the same
    endpoint, or a static quorum's report, changes nothing."""
    from kraftlog.quorum import check_update_voter
    from kraftlog.quorum._voter_changes import endpoint_changed

    moved = dataclasses.replace(V[2], port=9999)
    check_update_voter(_view(), moved, 0, 1)
    assert endpoint_changed(_view(), moved)
    assert not endpoint_changed(_view(), V[2])
    static = _view(kraft_version=0, voters={1: dataclasses.replace(V[1], directory_id=""), 2: V[2]})
    assert not endpoint_changed(static, dataclasses.replace(V[1], port=9999))
    with pytest.raises(kerr.RequestTimedOutError):  # one change at a time
        check_update_voter(_view(pending_change_offset=7), moved, 0, 1)
