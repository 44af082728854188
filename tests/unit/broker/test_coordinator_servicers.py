"""The gRPC servicers of the group and transaction coordinators are thin adapters (issue 23 §3):
each RPC reaches the one service object the Kafka handlers call too, with what only gRPC knows
(the listener FindCoordinator names, the client's host from the call's peer) as arguments."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kraftlog.broker._coordinator_servicers import GroupServicer, ShareCoordinatorServicer, TxnServicer
from kraftlog.broker.groups import client_host_of
from kraftlog.broker.share import STATE_APIS
from kraftlog.proto import group_pb2, share_pb2, txn_pb2


class _Recorder:
    """Stands for a service: records each call (name, request, keyword arguments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        async def call(request: Any, **kwargs: Any) -> str:
            self.calls.append((name, request, kwargs))
            return f"answer of {name}"

        return call


class _Context:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:127.0.0.1:5678", "/127.0.0.1"), ("ipv6:[::1]:5678", "/::1"), ("unix:/tmp/s", "//tmp/s")],
)
def test_client_host_is_kafkas_form_of_the_grpc_peer(peer: str, host: str) -> None:
    assert client_host_of(peer) == host


def test_find_coordinator_names_the_servicers_listener_and_accepts_any_endpoint() -> None:
    service = _Recorder()
    servicer = GroupServicer(service, "BROKER")  # type: ignore[arg-type]
    request = group_pb2.FindCoordinatorRequest(key_type=0, keys=["g"])
    answer = asyncio.run(servicer.FindCoordinator(request, _Context("ipv4:10.0.0.1:1")))
    assert answer == "answer of FindCoordinator"
    assert service.calls == [("FindCoordinator", request, {"listener": "BROKER", "any_endpoint": True})]


def test_the_client_host_of_a_join_and_a_consumer_heartbeat_comes_from_the_peer() -> None:
    service = _Recorder()
    servicer = GroupServicer(service, "BROKER")  # type: ignore[arg-type]
    join = group_pb2.JoinGroupRequest(group_id="g", member_id="", protocol_type="consumer", client_id="c")
    join.protocols.add(name="range", metadata=b"m")
    asyncio.run(servicer.JoinGroup(join, _Context("ipv4:10.0.0.7:4242")))
    heartbeat = group_pb2.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    asyncio.run(servicer.ConsumerGroupHeartbeat(heartbeat, _Context("ipv4:10.0.0.8:4242")))
    (name, req, kwargs), (name2, req2, kwargs2) = service.calls
    assert (name, req.group_id, req.client_id, req.client_host, kwargs) == ("join", "g", "c", "/10.0.0.7", {})
    assert [p.name for p in req.protocols] == ["range"]
    assert (name2, req2, kwargs2) == ("ConsumerGroupHeartbeat", heartbeat, {"client_host": "/10.0.0.8"})


def test_every_other_group_and_txn_rpc_passes_the_request_through() -> None:
    groups, txns = _Recorder(), _Recorder()
    group_servicer = GroupServicer(groups, "BROKER")  # type: ignore[arg-type]
    txn_servicer = TxnServicer(txns)  # type: ignore[arg-type]
    group_rpcs = [
        "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "ListGroups", "DescribeGroups",
        "DeleteGroups", "OffsetDelete", "ConsumerGroupDescribe", "TxnOffsetCommit",
    ]  # fmt: skip
    txn_rpcs = ["AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "ListTransactions", "DescribeTransactions"]
    for name in group_rpcs:
        assert asyncio.run(getattr(group_servicer, name)(name, _Context(""))) == f"answer of {name}"
    for name in txn_rpcs:
        assert asyncio.run(getattr(txn_servicer, name)(name, _Context(""))) == f"answer of {name}"
    assert groups.calls == [(name, name, {}) for name in group_rpcs]
    assert txns.calls == [(name, name, {}) for name in txn_rpcs]
    # the servicers serve every RPC of their proto (none falls back to UNIMPLEMENTED)
    for servicer, descriptor in ((group_servicer, group_pb2), (txn_servicer, txn_pb2)):
        service_descriptor = next(iter(descriptor.DESCRIPTOR.services_by_name.values()))
        for method in service_descriptor.methods:
            assert method.name in type(servicer).__dict__, method.name


class _WithShare:
    """Stands for a GroupService: its share-group calls are its ``share`` service's."""

    def __init__(self) -> None:
        self.share = _Recorder()


def test_share_group_rpcs_reach_the_service_with_the_client_host() -> None:
    holder = _WithShare()
    service = holder.share
    servicer = GroupServicer(holder, "BROKER")  # type: ignore[arg-type]
    heartbeat = group_pb2.ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    asyncio.run(servicer.ShareGroupHeartbeat(heartbeat, _Context("ipv4:10.0.0.9:4242")))
    describe = group_pb2.ShareGroupDescribeRequest(group_ids=["g"])
    assert asyncio.run(servicer.ShareGroupDescribe(describe, _Context(""))) == "answer of ShareGroupDescribe"
    assert service.calls == [
        ("ShareGroupHeartbeat", heartbeat, {"client_host": "/10.0.0.9"}),
        ("ShareGroupDescribe", describe, {}),
    ]


def test_the_share_coordinator_rpcs_reach_the_service_named_by_their_api() -> None:
    calls: list[tuple[str, Any]] = []

    class Service:
        async def call(self, api: str, request: Any) -> str:
            calls.append((api, request))
            return f"answer of {api}"

    servicer = ShareCoordinatorServicer(Service())  # type: ignore[arg-type]
    service_descriptor = next(iter(share_pb2.DESCRIPTOR.services_by_name.values()))
    names = [m.name for m in service_descriptor.methods]
    assert names == list(STATE_APIS)
    for name in names:
        assert asyncio.run(getattr(servicer, name)(name, _Context(""))) == f"answer of {name}"
    assert calls == [(name, name) for name in names]
