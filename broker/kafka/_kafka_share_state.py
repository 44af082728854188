"""The share coordinator's APIs on the Kafka listener (KIP-932): InitializeShareGroupState (83, v0),
ReadShareGroupState (84, v0), WriteShareGroupState (85, v0-1), DeleteShareGroupState (86, v0) and
ReadShareGroupStateSummary (87, v0-1), as Kafka serves them to other brokers: ClusterAction on the
cluster, every partition answered. Each request is turned into the gRPC front end's message
(proto/share.proto) and served by the broker's one `ShareStateService`.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.broker.share import ShareStateService
from kraftlog.common import parse_uuid
from kraftlog.proto import share_pb2

__all__ = ["ShareStateApis"]


class ShareStateApis:
    """Handlers of APIs 83-87 over one `ShareStateService` (see the module docstring)."""

    def __init__(self, service: ShareStateService) -> None:
        self.service = service

    async def _serve(self, api: str, request: ParsedRequest, *, read: bool, summary: bool = False) -> dict[str, Any]:
        body = request.body
        pb = share_pb2.ShareStateRequest()
        for topic in body.topics:
            topic_id = str(topic.topic_id) if topic.topic_id is not None else ""
            for p in topic.partitions:
                part = pb.partitions.add(group_id=body.group_id, topic_id=topic_id, partition=p.partition)
                part.delivery_complete_count = -1  # unless the request (WriteShareGroupState v1) has one
                for name in ("state_epoch", "leader_epoch", "start_offset", "delivery_complete_count"):
                    if hasattr(p, name):
                        setattr(part, name, int(getattr(p, name)))
                for b in getattr(p, "state_batches", ()):
                    part.state_batches.add(
                        first_offset=b.first_offset,
                        last_offset=b.last_offset,
                        delivery_state=b.delivery_state,
                        delivery_count=b.delivery_count,
                    )
        answer = await self.service.call(api, pb)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in answer.results:
            out: dict[str, Any] = {
                "partition": r.partition,
                "error_code": r.error.code,
                "error_message": r.error.message or None if r.error.code else None,
            }
            if read or summary:
                out.update(state_epoch=r.state_epoch, start_offset=r.start_offset)
            if read:
                out["state_batches"] = [
                    {
                        "first_offset": b.first_offset,
                        "last_offset": b.last_offset,
                        "delivery_state": b.delivery_state,
                        "delivery_count": b.delivery_count,
                    }
                    for b in r.state_batches
                ]
            if summary:
                out.update(leader_epoch=r.leader_epoch, delivery_complete_count=r.delivery_complete_count)
            by_topic.setdefault(r.topic_id, []).append(out)
        return {
            "throttle_time": 0,
            "results": [{"topic_id": parse_uuid(t) if t else None, "partitions": ps} for t, ps in by_topic.items()],
        }

    async def initialize_share_group_state(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        return await self._serve("InitializeShareGroupState", request, read=False)

    async def read_share_group_state(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        return await self._serve("ReadShareGroupState", request, read=True)

    async def write_share_group_state(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        return await self._serve("WriteShareGroupState", request, read=False)

    async def delete_share_group_state(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        return await self._serve("DeleteShareGroupState", request, read=False)

    async def read_share_group_state_summary(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        return await self._serve("ReadShareGroupStateSummary", request, read=False, summary=True)
