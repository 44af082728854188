"""`ClusterMetadata.update`, the blocking refresh, on the one request driver: a round asks each
candidate once without waiting between them, rounds back off, the deadline ends it with a typed
error. Over a `MockTransport`: no server, no socket."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from kraftlog.client._channels import ChannelPool
from kraftlog.client._metadata import ClusterMetadata
from kraftlog.client._transport import MockTransport, rpc_error
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

UP, DOWN = "up:9092", "down:9092"


def answer(address: str, method: str, request: Any) -> Any:
    if address == DOWN:
        raise rpc_error(grpc.StatusCode.UNAVAILABLE)
    return broker_pb2.MetadataResponse(
        brokers=[broker_pb2.NodeEndpoint(node_id=1, host="up", port=9092)], cluster_id="c", controller_id=1
    )


def metadata(transport: MockTransport, servers: list[str], **kwargs: Any) -> ClusterMetadata:
    return ClusterMetadata(servers, ChannelPool(security=transport), **kwargs)


def test_a_down_broker_costs_no_back_off_when_another_answers() -> None:
    transport = MockTransport(answer)
    # a back-off of 10 s would show: the round must go on to the next candidate at once
    md = metadata(transport, [DOWN, UP], retry_backoff_ms=10_000, retry_backoff_max_ms=10_000)
    try:
        started = time.monotonic()
        md.update(timeout_ms=5_000)
        assert time.monotonic() - started < 5.0
        assert md.cluster_id == "c" and [b.node_id for b in md.brokers()] == [1]
        assert 1 <= len(transport.calls) <= 2
        assert transport.calls[-1][0] == UP
    finally:
        md.close()
        transport.close()


def test_rounds_back_off_and_the_deadline_raises_a_typed_error() -> None:
    transport = MockTransport(answer)
    md = metadata(transport, [DOWN], retry_backoff_ms=20, retry_backoff_max_ms=40)
    try:
        started = time.monotonic()
        with pytest.raises(kerr.RequestTimedOutError, match="no broker of down:9092 answered.*UNAVAILABLE"):
            md.update(timeout_ms=400)
        elapsed = time.monotonic() - started
        assert 0.35 <= elapsed < 3.0
        # several rounds, each after a back-off: not one call, and not a busy loop
        assert 2 <= len(transport.calls) <= 40, len(transport.calls)
    finally:
        md.close()
        transport.close()


def test_a_closed_cache_does_not_refresh() -> None:
    transport = MockTransport(answer)
    md = metadata(transport, [UP])
    md.close()
    try:
        with pytest.raises(kerr.RequestTimedOutError):
            md.update(timeout_ms=5_000)
        assert transport.calls == []
    finally:
        transport.close()


def test_an_illegal_topic_name_fails_at_once_not_after_the_timeout() -> None:
    """Issue 25: brokers answer INVALID_TOPIC_EXCEPTION for an illegal name; waiting the whole
    timeout for a topic that can never exist helps nobody (Kafka's producer throws at once)."""

    def invalid(address: str, method: str, request: Any) -> Any:
        response = answer(address, method, request)
        for name in request.topics:
            response.topics.add(name=name).error.code = kerr.InvalidTopicError.error_code
        return response

    transport = MockTransport(invalid)
    md = metadata(transport, [UP], retry_backoff_ms=20, retry_backoff_max_ms=40)
    try:
        started = time.monotonic()
        with pytest.raises(kerr.InvalidTopicError):
            md.wait_for_topic("bad$name", timeout_ms=10_000)
        assert time.monotonic() - started < 5.0
    finally:
        md.close()
        transport.close()
