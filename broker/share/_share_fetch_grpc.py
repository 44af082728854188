"""ShareFetch and ShareAcknowledge over gRPC (proto/share.proto ``ShareService``): the messages
turned into a `ShareFetchCall` and the `ShareFetchAnswer` back, served by the broker's one
`ShareFetchService` (the Kafka listener's handlers call it too). Also the brokers' own
ForgetShareGroup, which drops a group's share partitions held here."""

from __future__ import annotations

from typing import Any

from kraftlog.broker.share._share_fetch_service import ShareFetchAnswer, ShareFetchCall, ShareFetchService
from kraftlog.broker.share._share_types import AcknowledgementBatch, AcquireMode
from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import errors_pb2, share_pb2, share_pb2_grpc

__all__ = ["ShareServicer"]


def _topics(topics: Any) -> list[tuple[str, list[tuple[int, list[AcknowledgementBatch]]]]]:
    return [
        (
            t.topic_id,
            [
                (
                    p.partition,
                    [
                        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                        for b in p.acknowledgement_batches
                    ],
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _error(error: type[kerr.KafkaError] | None, message: str) -> Any:
    if error is None:
        return errors_pb2.Error(code=0, name="NONE")
    return errors_pb2.Error(code=error.error_code, name=error.error_name, message=message)


class ShareServicer(share_pb2_grpc.ShareServiceServicer):
    """``ShareService`` over the broker's `ShareFetchService`."""

    def __init__(self, service: ShareFetchService) -> None:
        self.service = service

    async def ShareFetch(self, request: Any, context: Any) -> Any:
        call = ShareFetchCall(
            group_id=request.group_id,
            member_id=request.member_id,
            epoch=request.share_session_epoch,
            topics=_topics(request.topics),
            forgotten=[(f.topic_id, list(f.partitions)) for f in request.forgotten_topics],
            fetch=True,
            max_wait_ms=request.max_wait_ms,
            min_bytes=max(1, request.min_bytes),
            max_bytes=request.max_bytes or 2**31 - 1,
            max_records=request.max_records or 500,
            mode=AcquireMode.RECORD_LIMIT if request.share_acquire_mode == 1 else AcquireMode.BATCH_OPTIMIZED,
            renew_only=request.is_renew_ack,
        )
        return self._answer(await self.service.serve(call), call.group_id)

    async def ShareAcknowledge(self, request: Any, context: Any) -> Any:
        call = ShareFetchCall(
            group_id=request.group_id,
            member_id=request.member_id,
            epoch=request.share_session_epoch,
            topics=_topics(request.topics),
            fetch=False,
        )
        return self._answer(await self.service.serve(call), call.group_id)

    async def ForgetShareGroup(self, request: Any, context: Any) -> Any:
        """Between brokers: drop the group's share partitions held here (see `ShareGroupForgetter`).
        ClusterAction on the cluster, as Kafka asks of its other broker-to-broker APIs."""
        R = share_pb2.ForgetShareGroupResponse
        if not current_request().authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            return R(error=_error(kerr.ClusterAuthorizationFailedError, "ForgetShareGroup is between brokers"))
        await self.service.manager.forget_group(request.group_id)
        return R(error=_error(None, ""))

    def _answer(self, answer: ShareFetchAnswer, group_id: str) -> Any:
        R = share_pb2.ShareFetchResponse
        by_topic: dict[str, list[Any]] = {}
        for (topic_id, partition), pa in answer.partitions.items():
            by_topic.setdefault(topic_id, []).append(
                R.Partition(
                    partition=partition,
                    error=_error(pa.error, pa.message),
                    acknowledge_error=_error(pa.ack_error, pa.ack_message),
                    records=pa.records,
                    acquired_records=[
                        R.AcquiredRecords(
                            first_offset=a.first_offset, last_offset=a.last_offset, delivery_count=a.delivery_count
                        )
                        for a in pa.acquired
                    ],
                    leader_id=pa.leader_id,
                    leader_epoch=pa.leader_epoch,
                )
            )
        return R(
            error=_error(answer.error, answer.message),
            acquisition_lock_timeout_ms=self.service.manager.lock_duration_ms(group_id),
            topics=[R.Topic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
        )
