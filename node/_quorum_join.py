"""How a controller that is not a voter yet finds the quorum (issue 26, KIP-853).

A controller formatted with ``--no-initial-controllers`` has no voter set in its metadata log dir.
At start it asks ``controller.quorum.bootstrap.servers`` (DescribeQuorum on the controllers' gRPC
listener, with this node's controller-listener security) for the voters and their endpoints, then
runs as an observer of that set: it replicates the log, never votes, and becomes a voter when the
change adding it (``kraftlog quorum add-controller``) is in its log. Voter changes already in the
log take over from the answer as soon as they are replicated, so a stale answer only delays that.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from kraftlog.node._errors import NodeStartupError

__all__ = ["discover_voters", "known_voters"]

_log = structlog.get_logger(__name__)


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def known_voters(config: Any) -> tuple[Any, dict[int, str]] | None:
    """The voter set this controller's own Raft dir kept (`quorum.raft.read_voters_file`), as
    `discover_voters` returns it; None when it has none (it never saw a voter change commit).

    Read first at start: a controller added at run time restarts without asking anyone, so a
    quorum made only of such voters can restart together (there is no leader to ask then).
    """
    from pathlib import Path

    from kraftlog.common import RAFT_DIR
    from kraftlog.common.errors import CorruptMessageError
    from kraftlog.quorum.raft import read_voters_file

    try:
        voters = read_voters_file(Path(config.metadata_log_dir) / RAFT_DIR)
    except CorruptMessageError as err:
        raise NodeStartupError(str(err)) from None
    if not voters:
        return None
    offset = int(config["controller.quorum.raft.port.offset"])
    endpoints = {vid: (v.host, v.port - offset) for vid, v in voters.items()}
    directories = {vid: v.directory_id for vid, v in voters.items() if v.directory_id}
    _log.info("quorum_voters_from_raft_dir", voters={k: f"{h}:{p}" for k, (h, p) in endpoints.items()})
    return config.with_discovered_voters(endpoints), directories


async def discover_voters(config: Any, *, timeout_s: float = 60.0, retry_s: float = 0.5) -> tuple[Any, dict[int, str]]:
    """``config`` running with the voter set the bootstrap servers report
    (`NodeConfig.with_discovered_voters`), and the voters' directory ids.

    Retries until a controller answers with a leader and every voter's endpoint; raises
    `NodeStartupError` after ``timeout_s`` (naming the servers it asked).
    """
    from kraftlog.broker import ControllerChannel
    from kraftlog.common.security import ListenerSecurity
    from kraftlog.proto import admin_pb2

    servers = config.controller_endpoints
    security = ListenerSecurity.from_config(config, "CONTROLLER")
    channel = ControllerChannel(servers, tls=security.tls, sasl=security.node_login(config))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last = "no answer"
    try:
        while loop.time() < deadline:
            try:
                resp = await channel.call("admin", "DescribeQuorum", admin_pb2.DescribeQuorumRequest(), timeout_s=5.0)
                if (
                    resp.error.code == 0
                    and resp.leader_id >= 0
                    and resp.voters
                    and all(v.endpoint for v in resp.voters)
                ):
                    voters = {v.replica_id: _endpoint(v.endpoint) for v in resp.voters}
                    directories = {v.replica_id: v.replica_directory_id for v in resp.voters if v.replica_directory_id}
                    break
                last = f"error {resp.error.code}, leader {resp.leader_id}, {len(resp.voters)} voters"
            except Exception as err:  # unreachable, refused: retry until the deadline
                last = str(err)
            await asyncio.sleep(retry_s)
        else:
            raise NodeStartupError(
                f"controller {config.node_id} is not a voter and found no quorum through "
                f"controller.quorum.bootstrap.servers={','.join(servers)} within {timeout_s:.0f}s ({last})"
            )
    finally:
        await channel.close()
    _log.info("quorum_voters_discovered", voters={k: f"{h}:{p}" for k, (h, p) in voters.items()})
    return config.with_discovered_voters(voters), directories
