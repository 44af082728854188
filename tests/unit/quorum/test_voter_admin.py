"""AddRaftVoter / RemoveRaftVoter on the active controller (issue 26, KIP-853): Kafka's errors, the
new voter's key taken from its authenticated observer connection, the leader never removing itself."""

from __future__ import annotations

import asyncio
from typing import Any

from kraftlog.proto import admin_pb2, controller_pb2
from kraftlog.quorum._voter_admin import MAX_OBSERVER_LAG_ENTRIES, add_raft_voter, remove_raft_voter
from kraftlog.quorum.raft import VOTER_ADD, VOTER_REMOVE, RaftVoter, VoterChange
from kraftlog.quorum.raft._identity import ObserverPeer

OFFSET = 1
DIR1, DIR2, DIR3 = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"


class FakeQuorum:
    def __init__(self, *, leader: bool = True, pending: int | None = None, match: int = 100) -> None:
        self.is_leader = leader
        self.leader_id = 1 if leader else 2
        self.pending = pending
        self.match = match
        self.voter_set = {
            1: RaftVoter(1, "h1", 9001 + OFFSET, DIR1, "k1"),
            2: RaftVoter(2, "h2", 9002 + OFFSET, DIR2, "k2"),
        }
        self.changes: list[VoterChange] = []
        self.transfers = 0

    def voter_change_view(self) -> tuple[int, int | None, dict[int, tuple[Any, int]]]:
        return 100, self.pending, {3: (ObserverPeer(3, DIR3, "proven-key-3"), self.match)}

    def voters(self) -> dict[int, RaftVoter]:
        return dict(self.voter_set)

    async def change_voters(self, change: VoterChange, *, timeout_s: float) -> None:
        self.changes.append(change)

    def transfer_leadership(self) -> None:
        self.transfers += 1


class FakeServer:
    node_id = 1
    kraft_version = 1
    config = {"controller.quorum.raft.port.offset": OFFSET}

    def __init__(self, quorum: FakeQuorum) -> None:
        self.quorum = quorum

    def hint(self) -> controller_pb2.ControllerHint:
        return controller_pb2.ControllerHint(leader_id=self.quorum.leader_id)


def add(quorum: FakeQuorum, voter_id: int = 3, directory: str = DIR3, host: str = "h3") -> Any:
    request = admin_pb2.AddRaftVoterRequest(voter_id=voter_id, voter_directory_id=directory, host=host, port=9003)
    return asyncio.run(add_raft_voter(FakeServer(quorum), request))


def remove(quorum: FakeQuorum, voter_id: int, directory: str) -> Any:
    request = admin_pb2.RemoveRaftVoterRequest(voter_id=voter_id, voter_directory_id=directory)
    return asyncio.run(remove_raft_voter(FakeServer(quorum), request))


def test_an_observer_is_added_with_the_key_its_connection_proved() -> None:
    quorum = FakeQuorum()
    response = add(quorum)
    assert response.error.code == 0
    assert quorum.changes == [VoterChange(VOTER_ADD, RaftVoter(3, "h3", 9003 + OFFSET, DIR3, "proven-key-3"))]


def test_add_answers_kafkas_errors() -> None:
    assert add(FakeQuorum(leader=False)).error.name == "NOT_CONTROLLER"
    assert add(FakeQuorum(pending=120)).error.name == "REQUEST_TIMED_OUT"
    assert add(FakeQuorum(), voter_id=2, directory=DIR2).error.name == "DUPLICATE_VOTER"
    assert add(FakeQuorum(), host="").error.name == "INVALID_REQUEST"
    # another directory than the connected observer's: a different replica, not caught up here
    assert add(FakeQuorum(), directory=DIR1).error.name == "REQUEST_TIMED_OUT"
    lagging = FakeQuorum(match=100 - MAX_OBSERVER_LAG_ENTRIES - 1)
    assert add(lagging).error.name == "REQUEST_TIMED_OUT" and not lagging.changes


def test_remove_answers_kafkas_errors_and_the_leader_hands_over_first() -> None:
    quorum = FakeQuorum()
    assert remove(quorum, 2, DIR2).error.code == 0
    assert quorum.changes == [VoterChange(VOTER_REMOVE, quorum.voter_set[2])]
    assert remove(FakeQuorum(), 2, DIR3).error.name == "VOTER_NOT_FOUND"
    assert remove(FakeQuorum(), 7, DIR3).error.name == "VOTER_NOT_FOUND"
    leader = FakeQuorum()
    response = remove(leader, 1, DIR1)
    assert response.error.name == "NOT_CONTROLLER" and leader.transfers == 1 and not leader.changes
