"""find_coordinator on the one request driver: rounds over the brokers, retried while the
coordinator loads, raised at once for a fatal error or a closed client."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kraftlog.client import MockTransport
from kraftlog.client._channels import ChannelPool
from kraftlog.client._coordinators import GROUP_KEY, find_coordinator
from kraftlog.client._metadata import ClusterMetadata
from kraftlog.common import errors as kerr
from kraftlog.proto import errors_pb2, group_pb2

C = group_pb2.FindCoordinatorResponse.Coordinator


def coordinator(code: int = 0) -> group_pb2.FindCoordinatorResponse:
    error = errors_pb2.Error(code=code, name=kerr.error_for_code(code).error_name) if code else None
    return group_pb2.FindCoordinatorResponse(coordinators=[C(key="g", node_id=2, host="b2", port=9092, error=error)])


def lookup(answers: list[Any], stop: threading.Event | None = None, timeout_s: float = 10.0) -> tuple[Any, list[str]]:
    def handler(address: str, method: str, request: Any) -> Any:
        assert method == "GroupService/FindCoordinator" and list(request.keys) == ["g"]
        return answers.pop(0) if len(answers) > 1 else answers[0]

    transport = MockTransport(handler)
    pool = ChannelPool(security=transport)
    metadata = ClusterMetadata("b1:9092", pool)
    try:
        deadline = time.monotonic() + timeout_s
        found = find_coordinator(pool, metadata, "g", GROUP_KEY, deadline, backoff_s=0.001, stop=stop)
    finally:
        metadata.close()
        pool.close()
    return found, transport.methods()


def test_retried_while_the_coordinator_loads() -> None:
    loading = kerr.CoordinatorLoadInProgressError.error_code
    found, methods = lookup([coordinator(loading), coordinator(loading), coordinator()])
    assert found == (2, "b2:9092")
    assert methods.count("GroupService/FindCoordinator") == 3


def test_a_fatal_error_is_raised_at_once() -> None:
    with pytest.raises(kerr.GroupAuthorizationFailedError):
        lookup([coordinator(kerr.GroupAuthorizationFailedError.error_code), coordinator()])


def test_a_closed_client_stops_looking() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(kerr.CoordinatorNotAvailableError):
        lookup([coordinator()], stop=stop)


def test_gives_up_at_the_deadline_with_coordinator_not_available() -> None:
    with pytest.raises(kerr.CoordinatorNotAvailableError, match="COORDINATOR_NOT_AVAILABLE"):
        lookup([coordinator(kerr.CoordinatorNotAvailableError.error_code)], timeout_s=0.05)
