"""ShareFetch and ShareAcknowledge requests (issue 27): Kafka's authorization (the group first,
then each topic), acknowledgements refused on an opening epoch, a session that carries its
partitions from request to request, acknowledgements applied before the fetch, and a closing
request that releases what the member holds."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.share import (
    AcknowledgementBatch,
    PartitionFetch,
    ShareFetchCall,
    ShareFetchService,
    ShareSessionCache,
)
from kraftlog.broker.share._share_types import AcquiredRecords
from kraftlog.common import errors as kerr
from kraftlog.common.security import AclOperation, ResourceType, request_scope
from kraftlog.common.security._request_context import ANONYMOUS, RequestContext, Session

TID = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
HIDDEN = "11111111-2222-3333-4444-555555555555"
SHARE_ON = {"share.version": 1}


class Manager:
    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    async def acknowledge(self, group: str, member: str, tid: str, name: str, p: int, batches: Any) -> None:
        self.log.append(("ack", member, name, p, [tuple(b) for b in batches]))
        if p == 9:
            raise kerr.InvalidRecordStateError("not acquired")

    async def fetch(self, group: str, member: str, parts: Any, **kw: Any) -> dict[tuple[str, int], PartitionFetch]:
        self.log.append(("fetch", member, sorted(parts)))
        return {(TID, 0): PartitionFetch(records=b"x", acquired=(AcquiredRecords(0, 0, 1),))}

    async def release(self, group: str, member: str, parts: Any) -> None:
        self.log.append(("release", member, sorted(parts)))


def image() -> Any:
    topics = {TID: SimpleNamespace(name="t"), HIDDEN: SimpleNamespace(name="secret")}
    # share.version 1: share groups on, as a cluster formatted by default has them
    return SimpleNamespace(topics=SimpleNamespace(get_by_id=topics.get), features=SimpleNamespace(levels=SHARE_ON))


def serve(
    service: ShareFetchService, call: ShareFetchCall, allowed: set[tuple[ResourceType, str]] | None = None
) -> Any:
    def authorize(_session: Any, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        return allowed is None or (rtype, name) in allowed

    ctx = RequestContext(
        Session(ANONYMOUS, "127.0.0.1", "PLAINTEXT", "PLAINTEXT"), api="ShareFetch", authorize_fn=authorize
    )

    async def run() -> Any:
        with request_scope(ctx):
            return await service.serve(call)

    return asyncio.run(run())


def make() -> tuple[ShareFetchService, Manager]:
    manager = Manager()
    return ShareFetchService(manager, ShareSessionCache(10), image), manager  # type: ignore[arg-type]


def test_the_group_is_authorized_first_then_each_topic() -> None:
    service, manager = make()
    call = ShareFetchCall("g", "m", 0, [(TID, [(0, [])]), (HIDDEN, [(0, [])])])
    assert serve(service, call, allowed=set()).error is kerr.GroupAuthorizationFailedError
    answer = serve(service, call, allowed={(ResourceType.GROUP, "g"), (ResourceType.TOPIC, "t")})
    assert answer.error is None
    assert answer.partitions[(HIDDEN, 0)].error is kerr.TopicAuthorizationFailedError
    assert manager.log == [("fetch", "m", [(TID, "t", 0)])]  # the hidden topic is not in the session


def test_acknowledgements_on_an_opening_epoch_are_refused() -> None:
    service, manager = make()
    call = ShareFetchCall("g", "m", 0, [(TID, [(0, [AcknowledgementBatch(0, 0, (1,))])])])
    assert serve(service, call).error is kerr.InvalidRequestError
    assert manager.log == []


def test_a_session_keeps_its_partitions_and_acknowledges_before_fetching() -> None:
    service, manager = make()
    serve(service, ShareFetchCall("g", "m", 0, [(TID, [(0, []), (9, [])])]))
    answer = serve(
        service,
        ShareFetchCall(
            "g", "m", 1, [(TID, [(0, [AcknowledgementBatch(0, 0, (1,))]), (9, [AcknowledgementBatch(3, 3, (2,))])])]
        ),
    )
    assert answer.partitions[(TID, 9)].ack_error is kerr.InvalidRecordStateError
    assert answer.partitions[(TID, 0)].ack_error is None and answer.partitions[(TID, 0)].acquired
    assert manager.log[1:] == [
        ("ack", "m", "t", 0, [(0, 0, (1,))]),
        ("ack", "m", "t", 9, [(3, 3, (2,))]),
        ("fetch", "m", [(TID, "t", 0), (TID, "t", 9)]),
    ]
    assert serve(service, ShareFetchCall("g", "m", 1, [])).error is kerr.InvalidShareSessionEpochError
    serve(service, ShareFetchCall("g", "m", 2, [], forgotten=[(TID, [9])]))
    assert manager.log[-1] == ("fetch", "m", [(TID, "t", 0)])


def test_a_closing_acknowledge_releases_what_the_member_holds() -> None:
    service, manager = make()
    serve(service, ShareFetchCall("g", "m", 0, [(TID, [(0, [])])]))
    answer = serve(
        service, ShareFetchCall("g", "m", -1, [(TID, [(0, [AcknowledgementBatch(0, 0, (1,))])])], fetch=False)
    )
    assert answer.error is None
    assert manager.log[1:] == [("ack", "m", "t", 0, [(0, 0, (1,))]), ("release", "m", [(TID, "t", 0)])]
    assert serve(service, ShareFetchCall("g", "m", 1, [])).error is kerr.ShareSessionNotFoundError


def test_forgetting_a_connections_session_leaves_a_newer_one() -> None:
    service, manager = make()
    serve(service, ShareFetchCall("g", "m", 0, [(TID, [(0, [])])]))
    forget_old = service.forgetter("g", "m")
    serve(service, ShareFetchCall("g", "m", 0, [(TID, [(0, [])])]))  # reopened (another connection)

    async def closed() -> None:  # a connection closes on the broker's loop
        forget_old()
        assert service.sessions.get("g", "m") is not None
        assert not [e for e in manager.log if e[0] == "release"]  # the newer session's records stay
        service.forgetter("g", "m")()
        assert service.sessions.get("g", "m") is None
        while service._releases:
            await asyncio.sleep(0)

    asyncio.run(closed())
    # the closed connection's member gives its records back, as Kafka's onMemberLeave on a disconnect
    assert [e for e in manager.log if e[0] == "release"] == [("release", "m", [(TID, "t", 0)])]
