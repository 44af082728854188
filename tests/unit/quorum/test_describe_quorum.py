"""DescribeQuorum's answer (issue 26): voters and observers as Kafka's leader reports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlog.cli._quorum import quorum_replication, quorum_status
from kraftlog.proto import controller_pb2
from kraftlog.quorum._describe_quorum import describe_quorum
from kraftlog.quorum.raft import QuorumStatus, RaftVoter, VoterStatus

DIR = {1: "AAAAAAAAAAAAAAAAAAAAAQ", 2: "AAAAAAAAAAAAAAAAAAAAAg", 4: "AAAAAAAAAAAAAAAAAAAABA"}


@dataclass
class FakeQuorum:
    observers: tuple[VoterStatus, ...]

    def status(self) -> QuorumStatus:
        return QuorumStatus(
            node_id=1,
            leader_id=1,
            epoch=7,
            high_watermark=41,
            committed_offset=40,
            delivered_offset=40,
            is_leader=True,
            has_quorum=True,
            voters=(
                VoterStatus(1, "127.0.0.1:9094", 41, 5_000, 5_000, 90),
                VoterStatus(2, "127.0.0.1:9096", 38, 4_900, 4_000, 85),
            ),
            raft_commit_index=90,
            raft_last_applied=90,
            observers=self.observers,
        )

    def voters(self) -> dict[int, RaftVoter]:
        return {vid: RaftVoter(vid, "127.0.0.1", 9092 + 2 * vid + 1, DIR[vid]) for vid in (1, 2)}


@dataclass
class FakeServer:
    quorum: Any
    kraft_version: int = 1
    voter_directory_ids: dict[int, str] = field(default_factory=dict)

    def voter_endpoints(self) -> dict[int, tuple[str, int]]:
        return {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9095)}

    def hint(self) -> controller_pb2.ControllerHint:
        return controller_pb2.ControllerHint(leader_id=1, leader_address="127.0.0.1:9093", leader_epoch=7)


def test_observers_are_listed_with_their_replica_state_and_no_endpoint() -> None:
    observer = VoterStatus(4, "", 30, 4_950, 3_000, 70, directory_id=DIR[4])
    resp = describe_quorum(FakeServer(FakeQuorum((observer,))))
    assert resp.error.code == 0 and resp.leader_id == 1 and resp.leader_epoch == 7 and resp.kraft_version == 1
    assert [(v.replica_id, v.endpoint, v.replica_directory_id) for v in resp.voters] == [
        (1, "127.0.0.1:9093", DIR[1]),
        (2, "127.0.0.1:9095", DIR[2]),
    ]
    (obs,) = resp.observers
    assert (obs.replica_id, obs.log_end_offset, obs.last_fetch_timestamp_ms, obs.last_caught_up_timestamp_ms) == (
        4,
        30,
        4_950,
        3_000,
    )
    assert obs.replica_directory_id == DIR[4] and obs.endpoint == ""

    # the operator's view: CurrentObservers and an Observer row with its lag behind the leader
    status = quorum_status(resp, "cluster")
    assert status["current_observers"] == [4]
    assert [(o["id"], o["directory_id"]) for o in status["observers"]] == [(4, DIR[4])]
    rows = {r["node_id"]: r for r in quorum_replication(resp)}
    assert rows[4]["status"] == "Observer" and rows[4]["lag"] == 11 and rows[4]["directory_id"] == DIR[4]


def test_no_observer_no_row() -> None:
    resp = describe_quorum(FakeServer(FakeQuorum(())))
    assert list(resp.observers) == []
    assert {r["status"] for r in quorum_replication(resp)} == {"Leader", "Follower"}
