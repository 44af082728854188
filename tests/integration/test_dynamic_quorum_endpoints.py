"""A voter of a dynamic quorum (KIP-853) restarted on another controller listener, with real processes
on 127.0.0.1 (issue 26, UpdateRaftVoter).

Kafka's controller sends UpdateRaftVoter when its listeners differ from its voter entry; the leader
commits the new endpoint through the Raft log and the others reach the voter there. Here: three
voters formatted with ``--initial-controllers``; a follower stops, its ``CONTROLLER`` listener moves
to a new port, it starts again; DescribeQuorum must name the new endpoint, and a failover afterwards
(the old leader killed: the moved voter is needed for a majority) must still elect and commit.
Every wait is a bounded poll.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.deploy._ports import free_port_pair

from ._fake_brokers import FakeBrokers

pytestmark = pytest.mark.integration

OVERRIDES = {"controller.quorum.election.timeout.ms": 1000, "broker.session.timeout.ms": 9000}


def _endpoints(admin) -> dict[int, str]:
    quorum = admin.describe_quorum()
    return {v.replica_id: v.endpoint for v in quorum.voters} if quorum.error.code == 0 else {}


def _move_listener(cluster: LocalCluster, node_id: int) -> int:
    """Point node ``node_id``'s CONTROLLER listener at a new free port (and its Raft port, +1)."""
    spec = cluster.nodes[node_id]
    taken = {p for n in cluster.nodes.values() for p in (n.controller_port, n.controller_port + 1) if p}
    new = free_port_pair(taken)
    path = Path(spec.config_path)
    old_listener = f"CONTROLLER://{spec.host}:{spec.controller_port}"
    text = path.read_text()
    assert old_listener in text
    path.write_text(text.replace(old_listener, f"CONTROLLER://{spec.host}:{new}"))
    spec.controller_port = new
    cluster.save()
    return new


def test_a_voter_restarted_on_a_new_listener_moves_its_voter_entry_and_fails_over(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=3, overrides=OVERRIDES, quorum="dynamic")
    cluster.start(timeout_s=60)
    brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1001]).start()
    try:
        with cluster.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
            wait_until(lambda: len(_endpoints(admin)) == 3, 30, what="three voters")
            before = admin.describe_quorum()
            moved = next(nid for nid in (1, 2, 3) if nid != before.leader_id)
            cluster.stop_node(moved)
            new_port = _move_listener(cluster, moved)
            started = time.monotonic()
            cluster.start_node(moved)
            host = cluster.nodes[moved].host
            wait_until(
                lambda: _endpoints(admin).get(moved) == f"{host}:{new_port}",
                30,
                what=f"voter {moved}'s entry at its new listener {host}:{new_port}",
            )
            learned_s = time.monotonic() - started
            # the old leader goes: the moved voter and the third one must elect and commit together
            cluster.kill(before.leader_id)

            def failed_over() -> bool:
                q = admin.describe_quorum()
                return (
                    q.error.code == 0
                    and q.leader_id not in (-1, before.leader_id)
                    and q.leader_epoch > before.leader_epoch
                )

            wait_until(failed_over, 30, what="a leader elected by the moved voter and the third one")
            resp = admin.create_topics([NewTopic("after-move", 1, 1)], timeout_ms=10_000)
            assert resp.topics[0].error.code in (0, 36), resp
            after = admin.describe_quorum()
            lead = [v for v in after.voters if v.replica_id == after.leader_id]
            follower = [v for v in after.voters if v.replica_id not in (after.leader_id, before.leader_id)]
            assert lead and follower and follower[0].log_end_offset > 0
        print(json.dumps({"moved_voter": moved, "new_port": new_port, "endpoint_learned_s": round(learned_s, 2)}))
    finally:
        brokers.stop()
        cluster.stop()
