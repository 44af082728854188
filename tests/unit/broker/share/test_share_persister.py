"""The share persister (issue 27): a share-state call goes to the leader of its
``__share_group_state`` partition (this broker's service, or another broker's over its remote
call), a missing topic is created first, a moving coordinator is retried within the bound, and
the group coordinator's initializer reports the partitions that failed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.share import SharePersister, request_from_pb, request_to_pb, result_from_pb, result_to_pb
from kraftlog.broker.share._share_shard_types import (
    InitializeStateRequest,
    ReadStateRequest,
    ShareStateResult,
    WriteStateRequest,
)
from kraftlog.broker.share._share_types import StateBatch
from kraftlog.common import errors as kerr
from kraftlog.proto import share_pb2

TOPIC = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms

    async def sleep(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


def image(leader: int | None) -> Any:
    topics = (
        {}
        if leader is None
        else {"__share_group_state": SimpleNamespace(partitions={0: SimpleNamespace(leader=leader)})}
    )
    return SimpleNamespace(topics=SimpleNamespace(get_by_name=topics.get))


class Coordinator:
    def __init__(self) -> None:
        self.ensured = 0

    def partition_for(self, *_args: Any) -> int:
        return 0

    async def ensure_topic(self) -> None:
        self.ensured += 1


class Service:
    def __init__(self, answers: list[ShareStateResult]) -> None:
        self.answers = answers
        self.calls: list[Any] = []

    async def one(self, req: Any) -> ShareStateResult:
        self.calls.append(req)
        return self.answers.pop(0) if self.answers else ShareStateResult(req.topic_id, req.partition)


def persister(images: list[Any], service: Service, remote: Any = None, clock: Clock | None = None) -> SharePersister:
    clock = clock or Clock()

    def current() -> Any:
        return images[0] if len(images) == 1 else images.pop(0)

    async def no_remote(*_args: Any) -> Any:
        raise AssertionError("no remote call expected")

    return SharePersister(
        1,
        Coordinator(),
        service,
        current,
        remote or no_remote,
        clock_ms=clock,
        max_wait_ms=2000,
        sleep=clock.sleep,  # type: ignore[arg-type]
    )


def test_a_missing_topic_is_created_then_the_local_shard_answers() -> None:
    service = Service([])
    p = persister([image(None), image(1)], service)
    result = asyncio.run(p.call(ReadStateRequest("g", TOPIC, 0)))
    assert result.error is None and len(service.calls) == 1
    assert p.coordinator.ensured == 1  # type: ignore[attr-defined]


def test_another_brokers_coordinator_is_called_and_a_moving_one_retried() -> None:
    calls: list[tuple[int, str]] = []

    async def remote(node: int, api: str, request: Any) -> Any:
        calls.append((node, api))
        (part,) = request.partitions
        error = kerr.NotCoordinatorError if len(calls) == 1 else None
        r = ShareStateResult(part.topic_id, part.partition, error, "", start_offset=part.start_offset)
        return share_pb2.ShareStateResponse(results=[result_to_pb(r)])

    p = persister([image(2)], Service([]), remote)
    write = WriteStateRequest("g", TOPIC, 3, 1, 0, 42, (StateBatch(42, 44, 0, 1),))
    result = asyncio.run(p.call(write))
    assert result.error is None and result.start_offset == 42
    assert calls == [(2, "WriteShareGroupState"), (2, "WriteShareGroupState")]


def test_the_retries_stop_at_the_bound_with_the_last_error() -> None:
    clock = Clock()
    loading = ShareStateResult(TOPIC, 0, kerr.CoordinatorLoadInProgressError, "")
    service = Service([loading] * 100)
    result = asyncio.run(persister([image(1)], service, clock=clock).call(ReadStateRequest("g", TOPIC, 0)))
    assert result.error is kerr.CoordinatorLoadInProgressError
    assert clock.now_ms <= 2000 and 3 <= len(service.calls) < 20


def test_a_refusal_is_not_retried_and_the_initializer_reports_what_failed() -> None:
    refused = ShareStateResult(TOPIC, 1, kerr.FencedStateEpochError, "")
    service = Service([ShareStateResult(TOPIC, 0), refused])
    job = SimpleNamespace(group_id="g", group_epoch=4, topics=((TOPIC, "t", (0, 1)),))
    failed = asyncio.run(persister([image(1)], service).initialize(job))
    assert failed == {TOPIC: {1}}
    assert [(c.partition, c.state_epoch, c.start_offset) for c in service.calls] == [(0, 4, -1), (1, 4, -1)]
    assert all(isinstance(c, InitializeStateRequest) for c in service.calls)


def test_requests_and_results_survive_the_wire() -> None:
    write = WriteStateRequest("g", TOPIC, 3, 2, 5, 42, (StateBatch(42, 44, 2, 1),), 7)
    assert request_from_pb("WriteShareGroupState", request_to_pb(write)) == write
    r = ShareStateResult(TOPIC, 3, kerr.FencedLeaderEpochError, "old", 2, 5, 42, 7, (StateBatch(42, 44, 4, 3),))
    assert result_from_pb(result_to_pb(r)) == r
