"""What every group member does the same way, whichever group protocol it speaks: find the group's
coordinator (FindCoordinator on any broker; NOT_COORDINATOR and the like send it looking again),
call it, and commit and fetch offsets (OffsetCommit under the member's generation or epoch,
OffsetFetch)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc

from kraftlog.client._channels import ChannelPool
from kraftlog.client._coordinators import GROUP_KEY, find_coordinator
from kraftlog.client._metadata import ClusterMetadata, TopicPartition, partitions_by_topic
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2, group_pb2_grpc

__all__ = ["GroupClient", "COORDINATOR_ERRORS", "raise_for"]

COORDINATOR_ERRORS = {
    kerr.NotCoordinatorError,
    kerr.CoordinatorNotAvailableError,
    kerr.CoordinatorLoadInProgressError,
}


def raise_for(error: Any, what: str) -> None:
    if error.code:
        raise kerr.error_for_code(error.code)(f"{what}: {error.name} {error.message}".strip())


_RNG = random.Random()  # the back-off's jitter


class GroupClient:
    """Coordinator lookup, calls and offsets of one member of ``group_id``."""

    group_id: str
    group_instance_id: str | None
    request_timeout_ms: int
    retry_backoff_ms: int
    _pool: ChannelPool
    _metadata: ClusterMetadata
    _coordinator: str | None
    _stop: threading.Event

    # ================================================================ coordinator

    def _stub(self) -> group_pb2_grpc.GroupServiceStub:
        address = self._coordinator
        if address is None:
            address = self._find_coordinator()
        return self._pool.group_stub(address)

    def _find_coordinator(self) -> str:
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        _node, address = find_coordinator(
            self._pool,
            self._metadata,
            self.group_id,
            GROUP_KEY,
            deadline,
            backoff_s=self.retry_backoff_ms / 1000.0,
            stop=self._stop,
        )
        self._coordinator = address
        return address

    def _call(self, method: str, request: Any, timeout_s: float) -> Any:
        """One RPC to the coordinator; a lost coordinator is looked up again next time."""
        try:
            return getattr(self._stub(), method)(request, timeout=timeout_s)
        except grpc.RpcError as err:
            self._coordinator = None
            raise kerr.CoordinatorNotAvailableError(f"{method} to the group coordinator failed: {err.code()}") from err

    def _retry(self, attempt: Callable[[float], Outcome], timeout_s: float, what: str) -> Any:
        """Run ``attempt(time left)`` until it is done or ``timeout_s`` passes, backing off from
        ``retry_backoff_ms`` (the one retry policy)."""
        policy = RetryPolicy(
            backoff_ms=self.retry_backoff_ms,
            backoff_max_ms=max(self.retry_backoff_ms, 1000),
            attempt_timeout_ms=max(timeout_s, 0.1) * 1000.0,
        )
        return retry_until(attempt, timeout_s=timeout_s, policy=policy, what=what)

    def _back_off(self, retry: int) -> None:
        """Wait before retry number ``retry`` (0 first) of a rebalance step, by the one retry policy;
        a close cuts the wait short."""
        policy = RetryPolicy(backoff_ms=self.retry_backoff_ms, backoff_max_ms=max(self.retry_backoff_ms, 1000))
        self._stop.wait(policy.delay_s(retry, _RNG))

    def _coordinator_lost(self, code: int) -> bool:
        if code and kerr.error_for_code(code) in COORDINATOR_ERRORS:
            self._coordinator = None
            return True
        return False

    # ============================================================ offsets and leaving

    def _commit_identity(self) -> tuple[int, str]:
        """The generation (member epoch) and member id a commit goes out under, or raises why the
        member cannot commit now."""
        raise NotImplementedError

    def _commit_refused(self, code: int, generation: int) -> bool:
        """A commit refused for the membership (``code``): True to send it again after a back-off
        (the member's epoch moved on meanwhile), else raises the consumer's error or returns False."""
        raise NotImplementedError

    def commit(self, offsets: Mapping[TopicPartition, tuple[int, int, str]], timeout_s: float) -> None:
        """OffsetCommit of ``tp -> (offset, leader epoch, metadata)`` under this member's generation."""
        if not offsets:
            return
        by_topic: dict[str, list[Any]] = {}
        for tp, (offset, epoch, metadata) in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                group_pb2.OffsetCommitRequest.Partition(
                    partition_index=tp.partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    committed_metadata=metadata,
                )
            )
        request = group_pb2.OffsetCommitRequest(
            group_id=self.group_id,
            group_instance_id=self.group_instance_id,
            topics=[group_pb2.OffsetCommitRequest.Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        def attempt(timeout_left_s: float) -> Outcome:
            request.generation_id, request.member_id = self._commit_identity()
            try:
                r = self._call("OffsetCommit", request, timeout_left_s)
            except kerr.CoordinatorNotAvailableError as err:
                return Retry("COORDINATOR_NOT_AVAILABLE", error=err)
            codes = {p.error.code for t in r.topics for p in t.partitions} - {0}
            if not codes:
                return Done(None)
            code = next(iter(codes))
            failed = kerr.error_for_code(code)(f"OffsetCommit of group {self.group_id!r} failed")
            if self._coordinator_lost(code):
                return Retry(f"OffsetCommit: {code}", error=failed)
            if code == kerr.FencedInstanceIdError.error_code:
                raise kerr.FencedInstanceIdError(f"group.instance.id {self.group_instance_id!r} was fenced")
            if self._commit_refused(code, request.generation_id):
                # the member's epoch moved on: back off, then send it again under the new one
                return Retry(f"OffsetCommit refused under generation {request.generation_id}", error=failed)
            raise failed

        self._retry(attempt, timeout_s, "OffsetCommit")

    def committed(self, tps: Iterable[TopicPartition], timeout_s: float) -> dict[TopicPartition, tuple[int, int, str]]:
        """Committed ``(offset, leader epoch, metadata)`` per partition; offset -1 when none."""
        wanted = partitions_by_topic(tps)
        request = group_pb2.OffsetFetchRequest(
            group_id=self.group_id,
            topics=[group_pb2.OffsetFetchRequest.Topic(name=t, partition_indexes=ps) for t, ps in wanted.items()],
            require_stable=True,
        )

        def attempt(timeout_left_s: float) -> Outcome:
            try:
                r = self._call("OffsetFetch", request, timeout_left_s)
            except kerr.CoordinatorNotAvailableError as err:
                return Retry("COORDINATOR_NOT_AVAILABLE", error=err)
            unstable = kerr.UnstableOffsetCommitError.error_code
            pending = any(p.error.code == unstable for t in r.topics for p in t.partitions)
            if self._coordinator_lost(r.error.code) or r.error.code == unstable or pending:
                # a lost coordinator is found again; a transaction's pending offsets (answered per
                # partition, as Kafka does) are waited out
                return Retry("UNSTABLE_OFFSET_COMMIT" if pending else r.error.name, value=r)
            return Done(r)

        r = self._retry(attempt, timeout_s, "OffsetFetch")
        raise_for(r.error, f"OffsetFetch of group {self.group_id!r}")
        for t in r.topics:
            for p in t.partitions:
                raise_for(p.error, f"OffsetFetch of {t.name}-{p.partition_index}")
        return {
            TopicPartition(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in r.topics
            for p in t.partitions
        }
