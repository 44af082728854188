"""What the chaos runner counts as converged beyond metadata: the quorum view (pure, from a
DescribeQuorum answer) and the health probe (against real gRPC health servers on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraftlog.deploy.chaos import QUORUM_STALE_MS, HealthProbe, quorum_pending
from kraftlog.proto import admin_pb2

pytestmark = pytest.mark.integration

NOW_MS = 1_800_000_000_000


def _quorum(leader: int, voters: dict[int, tuple[int, int]], code: int = 0) -> admin_pb2.DescribeQuorumResponse:
    resp = admin_pb2.DescribeQuorumResponse(leader_id=leader)
    resp.error.code = code
    resp.error.name = "NOT_CONTROLLER" if code else "NONE"
    for vid, (fetch_ms, caught_up_ms) in voters.items():
        resp.voters.add(
            replica_id=vid,
            log_end_offset=10,
            last_fetch_timestamp_ms=fetch_ms,
            last_caught_up_timestamp_ms=caught_up_ms,
        )
    return resp


def test_a_quorum_with_every_voter_answering_and_caught_up_has_converged() -> None:
    fresh = (NOW_MS - 50, NOW_MS - 50)
    assert quorum_pending(_quorum(1, {1: (NOW_MS, NOW_MS), 2: fresh, 3: fresh})) is None


@pytest.mark.parametrize(
    ("voter_3", "expected"),
    [
        ((-1, -1), "controller 3 is not answering"),  # never heard of
        ((NOW_MS - QUORUM_STALE_MS - 1, NOW_MS - 10), "controller 3 is not answering"),  # dead, index unchanged
        ((NOW_MS - 10, NOW_MS - QUORUM_STALE_MS - 1), "controller 3 has not caught up"),  # alive, behind
    ],
)
def test_a_voter_silent_or_behind_keeps_the_quorum_pending(voter_3: tuple[int, int], expected: str) -> None:
    pending = quorum_pending(_quorum(1, {1: (NOW_MS, NOW_MS), 2: (NOW_MS, NOW_MS), 3: voter_3}))
    assert pending is not None and pending.startswith(expected)


def test_no_leader_or_an_error_is_pending() -> None:
    assert quorum_pending(_quorum(-1, {})) == "no active controller"
    assert quorum_pending(_quorum(1, {}, code=41)) == "describe quorum: NOT_CONTROLLER"
    assert "does not report itself" in str(quorum_pending(_quorum(1, {2: (NOW_MS, NOW_MS)})))


@pytest.fixture
def health_servers() -> Iterator[tuple[dict[int, list[str]], list[health.HealthServicer]]]:
    servers, servicers, addresses = [], [], {}
    for node in (1, 2):
        server = grpc.server(ThreadPoolExecutor(2))
        servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        servicers.append(servicer)
        addresses[node] = [f"127.0.0.1:{port}"]
    yield addresses, servicers
    for server in servers:
        server.stop(None)


def test_the_probe_names_nodes_not_serving_and_unreachable(
    health_servers: tuple[dict[int, list[str]], list[health.HealthServicer]],
) -> None:
    addresses, (one, two) = health_servers
    one.set("", health_pb2.HealthCheckResponse.SERVING)
    two.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    # node 3 has an address nobody listens on (a killed process)
    dead = grpc.server(ThreadPoolExecutor(1))
    dead_port = dead.add_insecure_port("127.0.0.1:0")
    dead.start()
    dead.stop(None)
    with HealthProbe({**addresses, 3: [f"127.0.0.1:{dead_port}"]}, timeout_s=1.0) as probe:
        assert probe.not_serving() == [2, 3]
        two.set("", health_pb2.HealthCheckResponse.SERVING)
        assert probe.not_serving() == [3]
