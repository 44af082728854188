"""The share persister (Kafka's ``DefaultStatePersister``): how a partition leader and the group
coordinator reach the share coordinator of a share partition's state.

Each call names one (group, topic id, partition); the persister finds the leader of the
``__share_group_state`` partition that keeps it in the metadata image and calls it: this broker's
`ShareStateService` directly, another broker over gRPC (``ShareCoordinatorService``). A missing
topic is created first (as Kafka's persister has FindCoordinator create it). NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE (a leader moving, a shard loading,
the topic being created) are retried with a doubling back-off until ``max_wait_ms`` has passed;
the last answer is returned then. The group coordinator's `ShareStateInitializer` is
`SharePersister.initialize`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kraftlog.broker.share._share_coordinator_shell import ShareCoordinator
from kraftlog.broker.share._share_records import SHARE_STATE_TOPIC
from kraftlog.broker.share._share_shard_types import (
    DeleteStateRequest,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    ShareStateResult,
    WriteStateRequest,
)
from kraftlog.broker.share._share_state_calls import (
    AnyStateRequest,
    ShareStateService,
    request_to_pb,
    result_from_pb,
)
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import share_pb2

__all__ = ["SharePersister", "RemoteCall"]

_log = structlog.get_logger(__name__)

#: (broker id, RPC name, request) -> the ShareStateResponse of that broker
RemoteCall = Callable[[int, str, Any], Awaitable[Any]]

_RETRIABLE = (kerr.NotCoordinatorError, kerr.CoordinatorLoadInProgressError, kerr.CoordinatorNotAvailableError)


def _api_of(req: AnyStateRequest) -> str:
    if isinstance(req, InitializeStateRequest):
        return "InitializeShareGroupState"
    if isinstance(req, ReadStateRequest):
        return "ReadShareGroupState"
    if isinstance(req, WriteStateRequest):
        return "WriteShareGroupState"
    if isinstance(req, DeleteStateRequest):
        return "DeleteShareGroupState"
    assert isinstance(req, ReadStateSummaryRequest)
    return "ReadShareGroupStateSummary"


class SharePersister:
    """Calls of the share coordinator wherever it runs (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        coordinator: ShareCoordinator,
        service: ShareStateService,
        image: Callable[[], MetadataImage],
        remote: RemoteCall,
        *,
        clock_ms: Callable[[], int],
        max_wait_ms: int = 15_000,
        backoff_ms: int = 50,
        max_backoff_ms: int = 1_000,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.service = service
        self.image = image
        self.remote = remote
        self.clock_ms = clock_ms
        self.max_wait_ms = max_wait_ms
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self._sleep = sleep
        self._log = _log.bind(node_id=broker_id)

    async def call(self, req: AnyStateRequest) -> ShareStateResult:
        """One partition's call on its share coordinator, retried as the module docstring says."""
        deadline = self.clock_ms() + self.max_wait_ms
        backoff = self.backoff_ms
        while True:
            result = await self._attempt(req)
            if result.error not in _RETRIABLE or self.clock_ms() + backoff > deadline:
                return result
            await self._sleep(backoff / 1000.0)
            backoff = min(2 * backoff, self.max_backoff_ms)

    async def _attempt(self, req: AnyStateRequest) -> ShareStateResult:
        image = self.image()
        topic = image.topics.get_by_name(SHARE_STATE_TOPIC)
        if topic is None:
            await self.coordinator.ensure_topic()
            return ShareStateResult(req.topic_id, req.partition, kerr.CoordinatorNotAvailableError, "being created")
        index = self.coordinator.partition_for(req.group_id, req.topic_id, req.partition, image)
        p = topic.partitions.get(index)
        leader = p.leader if p is not None else -1
        if leader < 0:
            return ShareStateResult(req.topic_id, req.partition, kerr.CoordinatorNotAvailableError, "no leader")
        if leader == self.broker_id:
            return await self.service.one(req)
        try:
            response = await self.remote(
                leader, _api_of(req), share_pb2.ShareStateRequest(partitions=[request_to_pb(req)])
            )
        except Exception as err:  # noqa: BLE001 - the peer is unreachable: as if it no longer coordinated
            self._log.info("share_coordinator_call_failed", broker=leader, error=repr(err))
            return ShareStateResult(req.topic_id, req.partition, kerr.CoordinatorNotAvailableError, str(err))
        if len(response.results) != 1:
            return ShareStateResult(req.topic_id, req.partition, kerr.UnknownServerError, "no answer")
        return result_from_pb(response.results[0])

    async def initialize(self, job: Any) -> dict[str, set[int]]:
        """The group coordinator's `ShareStateInitializer`: InitializeShareGroupState for every
        partition of the `ShareInitJob` (state epoch the group epoch, start offset unknown:
        ``share.auto.offset.reset`` decides on the leader); the partitions that failed."""
        keys = [(topic_id, p) for topic_id, _name, parts in job.topics for p in parts]
        results = await asyncio.gather(
            *(self.call(InitializeStateRequest(job.group_id, t, p, job.group_epoch, -1)) for t, p in keys)
        )
        failed: dict[str, set[int]] = {}
        for (topic_id, p), result in zip(keys, results, strict=True):
            if result.error is not None:
                self._log.info(
                    "share_state_initialize_refused",
                    group_id=job.group_id,
                    topic_id=topic_id,
                    partition=p,
                    error=result.error.error_name,
                )
                failed.setdefault(topic_id, set()).add(p)
        return failed
