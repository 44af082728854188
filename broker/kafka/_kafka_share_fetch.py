"""ShareFetch (78, v1-2) and ShareAcknowledge (79, v1-2) on the Kafka listener (KIP-932), as
librdkafka 2.16's ShareConsumer sends them: each request is decoded into a `ShareFetchCall` and
served by the broker's one `ShareFetchService`; v2's ``share_acquire_mode`` (KIP-1206: 0
batch_optimized, 1 record_limit) and ``is_renew_ack`` (KIP-1222) are honoured, v1 is
batch_optimized. A share session opened on a connection is forgotten when that connection closes.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, ms
from kraftlog.broker.share import AcknowledgementBatch, AcquireMode, ShareFetchAnswer, ShareFetchCall, ShareFetchService
from kraftlog.common import parse_uuid

__all__ = ["ShareFetchApis"]


def _acks(topics: Any) -> list[tuple[str, list[tuple[int, list[AcknowledgementBatch]]]]]:
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            batches = [
                AcknowledgementBatch(b.first_offset, b.last_offset, tuple(int(x) for x in b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
            parts.append((p.partition_index, batches))
        out.append((str(t.topic_id) if t.topic_id is not None else "", parts))
    return out


def _code(error: Any) -> int:
    return 0 if error is None else int(error.error_code)


class ShareFetchApis:
    """Handlers of ShareFetch and ShareAcknowledge (see the module docstring)."""

    def __init__(self, service: ShareFetchService) -> None:
        self.service = service

    async def share_fetch(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        call = ShareFetchCall(
            group_id=body.group_id or "",
            member_id=body.member_id or "",
            epoch=body.share_session_epoch,
            topics=_acks(body.topics),
            forgotten=[(str(f.topic_id), list(f.partitions)) for f in body.forgotten_topics_data],
            fetch=True,
            max_wait_ms=ms(body.max_wait),
            min_bytes=max(1, body.min_bytes),
            max_bytes=body.max_bytes,
            max_records=body.max_records,
            mode=AcquireMode.RECORD_LIMIT
            if getattr(body, "share_acquire_mode", 0) == 1
            else AcquireMode.BATCH_OPTIMIZED,
            renew_only=bool(getattr(body, "is_renew_ack", False)),
        )
        answer = await self.service.serve(call)
        if call.epoch == 0 and answer.error is None:
            # the share session lives as long as its connection, as Kafka's ShareSessionCache
            # keeps it: a consumer that went away does not hold a session slot (its records stay
            # acquired until their locks end)
            conn.on_close[("share-session", call.group_id, call.member_id)] = self.service.forgetter(
                call.group_id, call.member_id
            )
        out = self._answer(answer, fetch=True)
        out["acquisition_lock_timeout"] = self.service.manager.lock_duration_ms(call.group_id)
        return out

    async def share_acknowledge(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        call = ShareFetchCall(
            group_id=body.group_id or "",
            member_id=body.member_id or "",
            epoch=body.share_session_epoch,
            topics=_acks(body.topics),
            fetch=False,
        )
        answer = await self.service.serve(call)
        out = self._answer(answer, fetch=False)
        out["acquisition_lock_timeout"] = self.service.manager.lock_duration_ms(call.group_id)
        return out

    @staticmethod
    def _answer(answer: ShareFetchAnswer, *, fetch: bool) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic_id, partition), pa in answer.partitions.items():
            part: dict[str, Any] = {
                "partition_index": partition,
                "error_code": _code(pa.error),
                "error_message": pa.message or None if pa.error is not None else None,
                "current_leader": {"leader_id": pa.leader_id, "leader_epoch": pa.leader_epoch},
            }
            if fetch:
                part.update(
                    acknowledge_error_code=_code(pa.ack_error),
                    acknowledge_error_message=pa.ack_message or None if pa.ack_error is not None else None,
                    records=pa.records,
                    acquired_records=[
                        {
                            "first_offset": a.first_offset,
                            "last_offset": a.last_offset,
                            "delivery_count": a.delivery_count,
                        }
                        for a in pa.acquired
                    ],
                )
            by_topic.setdefault(topic_id, []).append(part)
        return {
            "throttle_time": 0,
            "error_code": _code(answer.error),
            "error_message": answer.message or None if answer.error is not None else None,
            "responses": [{"topic_id": parse_uuid(t) if t else None, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": [],
        }
