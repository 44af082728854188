"""Client quotas on the gRPC BrokerService (issue 24): the same managers as the Kafka listener.

gRPC has no channel a broker could mute, so a throttled call is answered late: the answer carries
``throttle_time_ms`` (ProduceResponse, FetchResponse) and is sent once that time has passed, which
holds back a client that waits for its answers (the kraftlog client does). The client id is the
optional call metadata ``kraftlog-client-id`` (empty when absent: such calls match client-id
quotas of the default client id only); the user is the call's authenticated principal.
Replica fetches (``replica_id >= 0``) are never throttled, as Kafka exempts replication from
client quotas.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.quota._quota_manager import QuotaManagers, quota_user
from kraftlog.common.security import CLIENT_ID_METADATA

__all__ = ["CLIENT_ID_METADATA", "throttle_grpc_fetch", "throttle_grpc_produce"]


async def _throttle(quotas: QuotaManagers, response: Any, throttle_ms: int) -> Any:
    if throttle_ms > 0 and response is not None:
        response.throttle_time_ms = throttle_ms
        await quotas.clock.sleep_async(throttle_ms / 1000.0)
    return response


async def throttle_grpc_produce(
    quotas: QuotaManagers, request: Any, response: Any, principal: str, client_id: str
) -> Any:
    """Record a Produce's record bytes against ``producer_byte_rate``; the answer, late if throttled.
    Without any producer quota nothing is measured: each read of a protobuf bytes field copies
    it (a 1 MiB copy per partition, per request)."""
    if not quotas.produce.enabled:
        return response
    size = sum(len(p.records) for t in request.topics for p in t.partitions)
    user = quota_user(principal)
    now_ms = quotas.now_ms()
    throttle_ms = quotas.produce.record(user, client_id, size, now_ms)
    if throttle_ms > 0:
        quotas.produce.record_throttle(user, client_id, throttle_ms, now_ms)
    return await _throttle(quotas, response, throttle_ms)


async def throttle_grpc_fetch(
    quotas: QuotaManagers, request: Any, response: Any, principal: str, client_id: str
) -> Any:
    """Record a consumer Fetch's answered bytes against ``consumer_byte_rate`` (nothing is measured
    without any consumer quota, as for Produce)."""
    if request.replica_id >= 0 or not quotas.fetch.enabled:
        return response
    size = sum(len(p.records) for t in response.responses for p in t.partitions)
    user = quota_user(principal)
    now_ms = quotas.now_ms()
    throttle_ms = quotas.fetch.record(user, client_id, size, now_ms)
    if throttle_ms > 0:
        quotas.fetch.record_throttle(user, client_id, throttle_ms, now_ms)
    return await _throttle(quotas, response, throttle_ms)
