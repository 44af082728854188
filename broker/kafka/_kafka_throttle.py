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

Before CreateTopics, DeleteTopics and CreatePartitions (`KafkaThrottle.mutation_refusal`): a
client whose ``controller_mutation_rate`` bucket is below zero is refused with
THROTTLING_QUOTA_EXCEEDED and the throttle time, at the versions KIP-599 makes strict
(CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+); older versions are served and
throttled afterwards. Afterwards the partitions created or deleted are taken from the bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftlog.broker.kafka._kafka_fetch_sessions import THROTTLED_FETCH
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.broker.quota import QuotaManagers, quota_user
from kraftlog.common import errors as kerr

if TYPE_CHECKING:
    from kraftlog.metadata_log import MetadataImage

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

    def __init__(self, quotas: QuotaManagers, image: Callable[[], MetadataImage]) -> None:
        self._quotas = quotas
        self._image = image

    def fetch_max_bytes(self, request: ParsedRequest, conn: ConnectionInfo) -> int | None:
        """The cap a consumer_byte_rate quota puts on a Fetch's max_bytes, None without one."""
        cap = self._quotas.fetch.max_value_in_window(quota_user(conn.session.principal), request.client_id or "")
        return None if cap is None else max(1, int(min(cap, 2**31 - 1)))

    def mutation_refusal(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any] | None:
        """The answer refusing a strict mutating request whose client's bucket is exhausted, or None."""
        strict_since = _STRICT_SINCE.get(request.api_key)
        if strict_since is None or request.api_version < strict_since:
            return None
        quotas = self._quotas
        throttle_ms = quotas.controller_mutation.exhausted_ms(
            quota_user(conn.session.principal), request.client_id or "", quotas.now_ms()
        )
        if throttle_ms <= 0:
            return None
        conn.throttle_ms = max(conn.throttle_ms, throttle_ms)
        err = kerr.ThrottlingQuotaExceededError(f"the controller mutation quota is exhausted for {throttle_ms} ms")
        body = request.body

        def failed(name: Any) -> dict[str, Any]:
            return {"name": name, "error_code": err.error_code, "error_message": str(err)}

        if request.api_key == _CREATE_TOPICS:
            return {"throttle_time": throttle_ms, "topics": [failed(t.name) for t in body.topics]}
        if request.api_key == _CREATE_PARTITIONS:
            return {"throttle_time": throttle_ms, "results": [failed(t.name) for t in body.topics]}
        names = [t.name for t in body.topics] if request.api_version >= 6 else list(body.topic_names)
        return {"throttle_time": throttle_ms, "responses": [failed(n) for n in names]}

    def mutations(self, request: ParsedRequest) -> dict[str | None, int]:
        """Per topic name, the partitions a mutating request would create or delete, by the image
        before it (empty for any other request)."""
        if request.api_key not in _STRICT_SINCE:
            return {}
        body = request.body
        topics = self._image().topics
        if request.api_key == _CREATE_TOPICS:
            return {t.name: max(t.num_partitions, len(t.assignments or ()), 1) for t in body.topics}
        if request.api_key == _CREATE_PARTITIONS:
            out: dict[str | None, int] = {}
            for t in body.topics:
                topic = topics.by_name.get(t.name)
                out[t.name] = max(0, t.count - (len(topic.partitions) if topic is not None else 0))
            return out
        names = [t.name for t in body.topics] if request.api_version >= 6 else list(body.topic_names)
        out = {}
        for name in names:
            topic = topics.by_name.get(name) if name is not None else None
            out[name] = len(topic.partitions) if topic is not None else 0
        return out

    @staticmethod
    def _done_mutations(answer: Any, mutations: dict[str | None, int]) -> int:
        """The partitions of the topics the answer reports done (error code 0)."""
        if not mutations or not isinstance(answer, dict):
            return 0
        items = answer.get("topics") or answer.get("results") or answer.get("responses") or ()
        return sum(mutations.get(i.get("name"), 0) for i in items if isinstance(i, dict) and not i.get("error_code"))

    def after(
        self,
        request: ParsedRequest,
        conn: ConnectionInfo,
        answer: Any,
        elapsed_ns: int,
        mutations: dict[str | None, int] | None = None,
    ) -> None:
        """Record the request against its client's quotas; put the throttle into ``answer`` (a
        dict answer, before it is built) and mute the connection for it."""
        quotas = self._quotas
        empty_fetch = answer.pop(THROTTLED_FETCH, None) if isinstance(answer, dict) else None
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
        elif mutations and (done := self._done_mutations(answer, mutations)):
            bandwidth_ms = quotas.controller_mutation.record(user, client_id, done, now_ms)
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
