"""What "the cluster converged" has to look at beyond the controller's metadata.

The metadata alone is blind for a while after a fault: a broker killed and started again inside its
session timeout is still registered, unfenced and in every ISR under its old incarnation while the
new process is only loading its logs; a dead controller leaves the leader's match index where it
was, which on an idle metadata log looks caught up. So convergence also asks

* every node's standard gRPC health service (`HealthProbe`): a broker says SERVING only while it
  knows its current registration unfenced (a restarted one not before its new registration is), a
  controller once it serves;
* the active controller's view of the quorum (`quorum_pending`): every voter answered the leader
  lately and has caught up with its log.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["HealthProbe", "quorum_pending", "QUORUM_STALE_MS"]

_log = structlog.get_logger("deploy.chaos")

#: a voter whose last answer to the leader, or whose last time caught up, is older than this (by
#: the leader's clock) is not part of a converged quorum; the leader contacts followers every few
#: tens of milliseconds
QUORUM_STALE_MS = 2000


def quorum_pending(resp: Any) -> str | None:
    """None when the DescribeQuorum answer shows a leader and every voter answering and caught up;
    otherwise what is missing. Times are compared with the leader's own entry (its clock)."""
    if resp.error.code != 0:
        return f"describe quorum: {resp.error.name}"
    if resp.leader_id < 0:
        return "no active controller"
    voters = {v.replica_id: v for v in resp.voters}
    leader = voters.get(resp.leader_id)
    if leader is None or leader.last_fetch_timestamp_ms < 0:
        return f"the active controller {resp.leader_id} does not report itself"
    now_ms = leader.last_fetch_timestamp_ms
    for vid, v in sorted(voters.items()):
        if vid == resp.leader_id:
            continue
        if v.last_fetch_timestamp_ms < 0 or now_ms - v.last_fetch_timestamp_ms > QUORUM_STALE_MS:
            return f"controller {vid} is not answering the active controller"
        if v.last_caught_up_timestamp_ms < 0 or now_ms - v.last_caught_up_timestamp_ms > QUORUM_STALE_MS:
            return f"controller {vid} has not caught up with the metadata log"
    return None


class HealthProbe:
    """Asks every node's gRPC health service whether it is SERVING, all nodes in parallel, so a paused
    node costs one ``timeout_s``, not one per node. ``security``: the channels' TLS and client
    certificate (a secured node answers nothing on plaintext)."""

    def __init__(
        self, addresses: Mapping[int, Sequence[str]], timeout_s: float = 1.0, *, security: ChaosSecurity = PLAINTEXT
    ) -> None:
        self.addresses = {node: list(addrs) for node, addrs in addresses.items()}
        self.timeout_s = timeout_s
        self.security = security
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, health_pb2_grpc.HealthStub] = {}

    def _stub(self, address: str) -> Any:  # a HealthStub (its stubs do not declare the methods)
        stub = self._stubs.get(address)
        if stub is None:
            channel = self.security.channel(address)
            self._channels[address] = channel
            stub = self._stubs[address] = health_pb2_grpc.HealthStub(channel)
        return stub

    def not_serving(self) -> list[int]:
        """Nodes with an address that did not answer SERVING (down, paused, cut off, or not ready)."""
        calls: list[tuple[int, str, Any]] = []
        for node, addrs in sorted(self.addresses.items()):
            for address in addrs:
                calls.append(
                    (
                        node,
                        address,
                        self._stub(address).Check.future(health_pb2.HealthCheckRequest(), timeout=self.timeout_s),
                    )
                )
        bad: set[int] = set()
        for node, address, call in calls:
            try:
                status = call.result()
            except (grpc.RpcError, concurrent.futures.CancelledError) as err:
                _log.debug("chaos_health_check_failed", node_id=node, address=address, error=repr(err))
                bad.add(node)
                continue
            if status.status != health_pb2.HealthCheckResponse.SERVING:
                bad.add(node)
        return sorted(bad)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()

    def __enter__(self) -> HealthProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
