"""Dropping a share group's in-memory share partitions on every broker after its state changed in
the share coordinator (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups).

Why every broker: a share partition lives on its partition's leader, which is usually not the
group coordinator's broker. A leader that kept its copy would go on serving the old state: after an
alter back to an earlier offset it would never hand out the records again (its copy says they are
acknowledged), and after an alter forward it would hand out records the operator skipped. The
state epoch the alter bumped fences such a copy only at its next write to the share coordinator,
and a copy with nothing to acknowledge never writes.

Ordering rules: the share coordinator holds the new state before ``everywhere`` is called (the
group service writes it first), so any broker that reloads a share partition after forgetting it
reads the new state. The group is empty (Alter/Delete refuse a group with members), so no member
acquires records in between. A broker that cannot be reached within ``timeout_ms`` is logged and
skipped: the state epoch still fences its copy at its next write, and a broker that restarts or
loses the partition's leadership drops its copy anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
import structlog

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import share_pb2, share_pb2_grpc

__all__ = ["ShareGroupForgetter", "forget_over_grpc"]

_log = structlog.get_logger(__name__)


class ShareGroupForgetter:
    """``everywhere(group_id)``: this broker's share partitions of the group are dropped, then
    every other unfenced broker's, in parallel (``forget_remote(address, group_id)``, ForgetShareGroup
    over gRPC), each bounded by ``timeout_ms``."""

    def __init__(
        self,
        broker_id: int,
        forget_local: Callable[[str], Awaitable[None]],
        image: Callable[[], MetadataImage],
        broker_address: Callable[[int], str | None],
        forget_remote: Callable[[str, str], Awaitable[None]],
        *,
        timeout_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.forget_local = forget_local
        self.image = image
        self.broker_address = broker_address
        self.forget_remote = forget_remote
        self.timeout_ms = timeout_ms

    async def everywhere(self, group_id: str) -> list[int]:
        """Forget the group here and on every other unfenced broker; the ids of the brokers that
        could not be reached (logged), in id order."""
        await self.forget_local(group_id)
        targets: list[tuple[int, str]] = []
        for broker_id in self.image().cluster.unfenced_broker_ids():
            address = None if broker_id == self.broker_id else self.broker_address(broker_id)
            if address is not None:
                targets.append((broker_id, address))
        timeout_s = self.timeout_ms / 1000.0
        results = await asyncio.gather(
            *(asyncio.wait_for(self.forget_remote(address, group_id), timeout_s) for _, address in targets),
            return_exceptions=True,
        )
        missed: list[int] = []
        for (broker_id, address), result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancellation and the like are not a broker's failure
                missed.append(broker_id)
                _log.warning(
                    "share group not forgotten on a broker; its copy is fenced at its next write",
                    group_id=group_id,
                    node_id=self.broker_id,
                    peer_broker_id=broker_id,
                    address=address,
                    error=repr(result),
                )
        return missed


def forget_over_grpc(channel: Callable[[str], grpc.aio.Channel]) -> Callable[[str, str], Awaitable[None]]:
    """The ``forget_remote`` of a broker: ForgetShareGroup on the broker at ``address`` over the
    channel ``channel(address)`` gives (the broker's peer channels, with its TLS and login); an
    error answered is raised as its Kafka error."""

    async def call(address: str, group_id: str) -> None:
        stub = share_pb2_grpc.ShareServiceStub(channel(address))
        response = await stub.ForgetShareGroup(share_pb2.ForgetShareGroupRequest(group_id=group_id))
        kerr.raise_for_code(response.error.code, response.error.message)

    return call
