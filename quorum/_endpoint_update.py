"""A voter whose controller listener moved tells the quorum (issue 26, KIP-853, UpdateRaftVoter).

Kafka's controller sends UpdateRaftVoter (API key 82) to the leader when the quorum is dynamic
(``kraft.version`` 1) and the endpoints its voter entry holds differ from the listeners it runs
with (``KafkaRaftClient``: a follower whose ``localListeners`` differ from the voter set's). Here
the controller's timer (`quorum._server.ControllerServer._periodic`) runs `report_endpoint`: while
this node is a voter (same id *and* directory id) whose entry names another controller endpoint
than its own ``CONTROLLER`` listener, it asks the leader -- over the leader's gRPC AdminService with
this node's controller-listener security, or itself when it leads -- to replace the entry. The
leader appends the change through the Raft log like any voter change (one at a time, each committed
before the next: `quorum._voter_changes.check_update_voter`), and every voter then dials the new
Raft endpoint (controller port + ``controller.quorum.raft.port.offset``).

Ordering: at most one request in flight (the timer awaits it), at most one every
`REPORT_INTERVAL_S`; a refusal (NOT_CONTROLLER while leadership moves, REQUEST_TIMED_OUT while
another change is pending) is retried on a later tick, and a committed change stops the reports.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import grpc

from kraftlog.common.errors import NotControllerError
from kraftlog.common.security import ListenerSecurity
from kraftlog.proto import admin_pb2, admin_pb2_grpc, open_aio_channel
from kraftlog.storage import read_meta_properties

__all__ = ["REPORT_INTERVAL_S", "EndpointReporter"]

#: the least time between two UpdateRaftVoter requests of one controller
REPORT_INTERVAL_S: Final = 1.0
_REQUEST_TIMEOUT_S: Final = 5.0
#: after a committed update, how long this node waits for its own view to show it before asking again
_SETTLE_S: Final = 10.0
_NOT_CONTROLLER: Final = NotControllerError.error_code


class EndpointReporter:
    """Sends UpdateRaftVoter for this controller while its voter entry's endpoint is stale."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._directory_id: str | None = None
        self._next_at = 0.0
        #: the endpoint a committed change gave this voter (reported in the log once)
        self.updated_to: tuple[str, int] | None = None

    def _stale_entry(self) -> tuple[str, int, str] | None:
        """(own host, own port, directory id) when this node is a voter whose entry names another
        controller endpoint; None otherwise (static quorum, observer, another directory, up to date)."""
        server = self._server
        quorum = server.quorum
        if quorum is None or server.kraft_version < 1 or not hasattr(quorum, "voters"):
            return None
        if self._directory_id is None:
            meta = read_meta_properties(Path(server.config.metadata_log_dir))
            self._directory_id = (meta.directory_id if meta is not None else None) or ""
        entry = quorum.voters().get(server.node_id)
        if entry is None or not self._directory_id or entry.directory_id != self._directory_id:
            return None
        host, port_text = server.address.rsplit(":", 1)
        offset = int(server.config["controller.quorum.raft.port.offset"])
        if (entry.host, entry.port - offset) == (host, int(port_text)):
            return None
        return host, int(port_text), self._directory_id

    async def tick(self, now_s: float) -> None:
        """One round: send the request when due and the entry is stale (see the module docstring).
        Never raises (the controller's timer runs other duties): a failed round is logged."""
        try:
            await self._tick(now_s)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a timer must survive a failed round
            self._server._log.warning("raft_voter_endpoint_update_failed", error=str(err))

    async def _tick(self, now_s: float) -> None:
        if now_s < self._next_at:
            return
        stale = self._stale_entry()
        if stale is None:
            return
        self._next_at = now_s + REPORT_INTERVAL_S
        host, port, directory_id = stale
        server = self._server
        request = admin_pb2.UpdateRaftVoterRequest(
            voter_id=server.node_id,
            voter_directory_id=directory_id,
            host=host,
            port=port,
            kraft_version_min=0,
            kraft_version_max=1,
            current_leader_epoch=int(getattr(server.quorum, "epoch", -1)),
        )
        response = await self._send(request)
        code = response.error.code if response is not None else None
        log = server._log
        if code == 0:
            # committed; this node's own view follows with the next entries it receives
            self._next_at = now_s + _SETTLE_S
            self.updated_to = (host, port)
            log.info("raft_voter_endpoint_updated", host=host, port=port)
        else:
            log.info(
                "raft_voter_endpoint_update_refused",
                host=host,
                port=port,
                error=response.error.name if response is not None else "UNREACHABLE",
            )

    async def _send(self, request: admin_pb2.UpdateRaftVoterRequest) -> Any:
        """The leader's answer: this node's own handler when it leads, else the leader's over gRPC --
        the leader it knows, or (it may hear no one while the others dial its old Raft endpoint) each
        other voter in turn, following a NOT_CONTROLLER hint once."""
        server = self._server
        quorum = server.quorum
        if quorum.is_leader:
            return await server.update_raft_voter(request)
        endpoints = {vid: f"{h}:{p}" for vid, (h, p) in server.voter_endpoints().items() if vid != server.node_id}
        leader = quorum.leader_id
        targets = [endpoints[leader]] if leader in endpoints else sorted(endpoints.values())
        response = None
        for address in targets:
            response = await self._call(address, request)
            if response is None:
                continue
            hinted = response.controller.leader_address
            if response.error.code == _NOT_CONTROLLER and hinted and hinted != address:  # ask the leader
                response = await self._call(hinted, request) or response
            if response.error.code != _NOT_CONTROLLER:
                return response
        return response

    async def _call(self, address: str, request: admin_pb2.UpdateRaftVoterRequest) -> Any:
        server = self._server
        security = ListenerSecurity.from_config(server.config, "CONTROLLER")
        try:
            async with open_aio_channel(address, tls=security.tls, sasl=security.node_login(server.config)) as channel:
                stub = admin_pb2_grpc.AdminServiceStub(channel)
                return await stub.UpdateRaftVoter(request, timeout=_REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            return None
