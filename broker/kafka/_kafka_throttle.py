"""Client quota enforcement on the Kafka listener (KIP-13, KIP-124, KIP-219, KIP-599), as Kafka's
KafkaApis applies its quota managers.

After a request is handled (`KafkaThrottle.after`):

- Produce records the request's record bytes against ``producer_byte_rate``, Fetch the bytes of
  the answer's records against ``consumer_byte_rate``; every request but the SASL exchange
  records the time it held the broker against ``request_percentage`` (the event loop thread's
  CPU time while it was served, at most its wall time: time parked waiting, as a long-polled
  Fetch is, costs nothing, as Kafka counts only its handler threads' time; other connections'
  work interleaved on the loop meanwhile is counted too, so a busy broker throttles earlier);
- the throttle time is the larger of the bandwidth and request throttles (Kafka's
  ``maxThrottleTimeMs``); it goes into the answer's ``throttle_time_ms`` and the connection is
  muted for it (`ConnectionInfo.throttle_ms`: the listener reads no further request of that
  connection until it has passed), so a client that ignores the field is held back all the same.
  Kafka sends KIP-219 answers first and mutes after; the listener does the same for every version.
  A throttled Fetch is answered empty and its bytes un-recorded, as Kafka's: the client fetches
  the same positions again once the throttle has passed, and its fetch session is left as if
  this fetch had not been answered (`FetchSessionCache.throttled`).

CreateTopics, DeleteTopics and CreatePartitions are decided by the active controller, which
applies the client's ``controller_mutation_rate`` bucket topic by topic, as Kafka's controller does:
the forward names the client id and whether the version is one KIP-599 makes strict
(`strict_quota`: CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+), where a topic met with
the bucket below zero is refused with THROTTLING_QUOTA_EXCEEDED; older versions are served and
throttled afterwards. The answer's throttle time comes from the controller, and the connection is
muted for it like any other.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.kafka._kafka_fetch_sessions import THROTTLED_FETCH
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.broker.quota import QuotaManagers, quota_user

__all__ = ["KafkaThrottle"]

_PRODUCE, _FETCH = 0, 1
_CREATE_TOPICS, _DELETE_TOPICS, _CREATE_PARTITIONS = 19, 20, 37
#: KIP-599: the first version of each mutating API at which an exhausted quota refuses the request
_STRICT_SINCE = {_CREATE_TOPICS: 6, _DELETE_TOPICS: 5, _CREATE_PARTITIONS: 3}
#: never throttled on request time: the exchange that authenticates a connection (Kafka exempts it)
_EXEMPT = frozenset({17, 36})


def _size(records: Any) -> int:
    if records is None:
        return 0
    if isinstance(records, (bytes, bytearray, memoryview)):
        return len(records)
    size = getattr(records, "size", None)
    if isinstance(size, int):
        return size
    region = getattr(records, "region", None)
    return int(getattr(region, "size", 0) or 0)


def produce_bytes(body: Any) -> int:
    return sum(_size(p.records) for t in body.topic_data for p in t.partition_data)


def fetch_bytes(answer: Any) -> int:
    if not isinstance(answer, dict):
        return 0
    return sum(_size(p.get("records")) for t in answer.get("responses") or () for p in t.get("partitions") or ())


class KafkaThrottle:
    """Applies `QuotaManagers` to the Kafka listener's requests (see the module docstring)."""

    def __init__(self, quotas: QuotaManagers) -> None:
        self._quotas = quotas

    @property
    def enabled(self) -> bool:
        """Whether any client quota is set (`QuotaManagers.enabled`); without one `after` records
        nothing and the request's time need not be measured."""
        return self._quotas.enabled

    def fetch_max_bytes(self, request: ParsedRequest, conn: ConnectionInfo) -> int | None:
        """The cap a consumer_byte_rate quota puts on a Fetch's max_bytes, None without one."""
        cap = self._quotas.fetch.max_value_in_window(quota_user(conn.session.principal), request.client_id or "")
        return None if cap is None else max(1, int(min(cap, 2**31 - 1)))

    @staticmethod
    def strict_quota(request: ParsedRequest) -> bool:
        """Whether the controller may refuse this request's topics for an exhausted mutation
        quota (KIP-599's versions), rather than only throttle it afterwards."""
        strict_since = _STRICT_SINCE.get(request.api_key)
        return strict_since is None or request.api_version >= strict_since

    def after(
        self,
        request: ParsedRequest,
        conn: ConnectionInfo,
        answer: Any,
        elapsed_ns: int,
    ) -> None:
        """Record the request against its client's quotas; put the throttle into ``answer`` (a
        dict answer, before it is built) and mute the connection for it."""
        quotas = self._quotas
        empty_fetch = answer.pop(THROTTLED_FETCH, None) if isinstance(answer, dict) else None
        if not quotas.enabled and request.api_key not in _STRICT_SINCE:
            return  # no quota to record against (Kafka's managers skip too); a mutation's is the controller's
        fetched = 0
        user = quota_user(conn.session.principal)
        client_id = request.client_id or ""
        now_ms = quotas.now_ms()
        request_ms = 0
        if request.api_key not in _EXEMPT:
            request_ms = quotas.record_request_time(user, client_id, elapsed_ns, now_ms)
        bandwidth_ms = 0
        manager = None
        if request.api_key == _PRODUCE:
            manager = quotas.produce
            bandwidth_ms = manager.record(user, client_id, produce_bytes(request.body), now_ms)
        elif request.api_key == _FETCH:
            manager = quotas.fetch
            fetched = fetch_bytes(answer)
            bandwidth_ms = manager.record(user, client_id, fetched, now_ms)
        elif request.api_key in _STRICT_SINCE and isinstance(answer, dict):
            # the controller applied the mutation quota and said how long to wait (KIP-599)
            bandwidth_ms = int(answer.get("throttle_time") or 0)
        throttle_ms = max(request_ms, bandwidth_ms)
        if throttle_ms <= 0:
            return
        if manager is not None and bandwidth_ms >= request_ms:
            manager.record_throttle(user, client_id, throttle_ms, now_ms)
        elif request_ms > 0:
            quotas.request.record_throttle(user, client_id, throttle_ms, now_ms)
        if request.api_key == _FETCH and empty_fetch is not None:
            quotas.fetch.unrecord(user, client_id, fetched, now_ms)
            empty_fetch()
        if isinstance(answer, dict):
            answer["throttle_time"] = throttle_ms
        conn.throttle_ms = max(conn.throttle_ms, throttle_ms)
