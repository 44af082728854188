"""ShareGroupForgetter: a share group whose state was altered is forgotten here and on every other
unfenced broker; a broker that fails or does not answer in time is reported and the rest still
forget."""

from __future__ import annotations

import asyncio

from kraftlog.broker.share import ShareGroupForgetter
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import BrokerEndpoint, MetadataImage, RegisterBrokerRecord


def registered(bid: int, *, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=bid,
        incarnation_id=f"inc-{bid}",
        broker_epoch=10 + bid,
        endpoints=(BrokerEndpoint("BROKER", f"host{bid}", 9090 + bid),),
        rack=None,
        fenced=fenced,
    )


IMAGE = MetadataImage.from_records([registered(1), registered(2), registered(3), registered(4, fenced=True)])


class Calls:
    def __init__(self, failing: dict[str, BaseException] | None = None, hanging: frozenset[str] = frozenset()) -> None:
        self.local: list[str] = []
        self.remote: list[tuple[str, str]] = []
        self.failing = failing or {}
        self.hanging = hanging

    async def forget_local(self, group_id: str) -> None:
        self.local.append(group_id)

    async def forget_remote(self, address: str, group_id: str) -> None:
        self.remote.append((address, group_id))
        if address in self.hanging:
            await asyncio.Event().wait()
        if address in self.failing:
            raise self.failing[address]


def forgetter(calls: Calls, *, timeout_ms: int = 1_000) -> ShareGroupForgetter:
    return ShareGroupForgetter(
        1,
        calls.forget_local,
        lambda: IMAGE,
        lambda bid: f"host{bid}:{9090 + bid}",
        calls.forget_remote,
        timeout_ms=timeout_ms,
    )


def test_the_group_is_forgotten_here_and_on_every_other_unfenced_broker() -> None:
    calls = Calls()
    missed = asyncio.run(forgetter(calls).everywhere("g"))
    assert missed == []
    assert calls.local == ["g"]
    # not itself (1) over gRPC, not the fenced 4
    assert sorted(calls.remote) == [("host2:9092", "g"), ("host3:9093", "g")]


def test_a_broker_that_fails_or_hangs_is_reported_and_the_others_still_forget() -> None:
    calls = Calls(failing={"host2:9092": kerr.ClusterAuthorizationFailedError("no")}, hanging=frozenset({"host3:9093"}))
    missed = asyncio.run(forgetter(calls, timeout_ms=50).everywhere("g"))
    assert missed == [2, 3]
    assert calls.local == ["g"]
    assert len(calls.remote) == 2
