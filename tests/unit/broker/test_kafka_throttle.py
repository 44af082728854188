"""Quota enforcement on the Kafka listener (issue 24): the answer's throttle_time and the
connection's mute, per Kafka's KafkaApis; KIP-599's strict refusal of mutating requests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_throttle import KafkaThrottle
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.broker.quota import QuotaManagers
from kraftlog.common import ManualClock
from kraftlog.common.security._request_context import Session
from kraftlog.metadata_log import ClientQuotaRecord, MetadataDelta, MetadataImage


def _image(*records: ClientQuotaRecord) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for r in records:
        delta.replay(r)
    return delta.apply()


def _produce(size: int, client_id: str = "app") -> ParsedRequest:
    body = SimpleNamespace(topic_data=[SimpleNamespace(partition_data=[SimpleNamespace(records=b"x" * size)])])
    return ParsedRequest(0, 9, 1, client_id, body)


def _conn(principal: str = "User:alice") -> ConnectionInfo:
    return ConnectionInfo("PLAINTEXT", "127.0.0.1:5", Session(principal, "127.0.0.1", "PLAINTEXT", "PLAINTEXT"))


def test_a_produce_over_the_users_quota_is_answered_with_its_throttle_and_mutes_the_connection() -> None:
    clock = ManualClock()
    image = _image(ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1000))
    throttle = KafkaThrottle(QuotaManagers(lambda: image.quotas, clock=clock))
    conn = _conn()
    answer: dict[str, Any] = {"throttle_time": 0, "responses": []}
    throttle.after(_produce(5_000), conn, answer, elapsed_ns=1000)
    assert answer["throttle_time"] == 0 and conn.throttle_ms == 0  # 500 B/s over the 10 s window
    throttle.after(_produce(15_000), conn, answer, elapsed_ns=1000)
    # 20 000 bytes over 10 s: 2000 B/s against 1000, (2000 - 1000) / 1000 * 10 s
    assert answer["throttle_time"] == 10_000
    assert conn.throttle_ms == 10_000
    other = _conn("User:bob")
    answer = {"throttle_time": 0}
    throttle.after(_produce(100_000), other, answer, elapsed_ns=1000)
    assert answer["throttle_time"] == 0 and other.throttle_ms == 0  # bob has no quota


def test_a_mutating_request_is_muted_for_the_throttle_the_controller_answered() -> None:
    """KIP-599 on the listener: the active controller applies the mutation quota topic by topic
    (tests/unit/quorum); the listener forwards whether the version is strict and mutes the
    connection for the throttle the controller's answer carries."""
    clock = ManualClock()
    image = _image()
    throttle = KafkaThrottle(QuotaManagers(lambda: image.quotas, clock=clock))
    body = SimpleNamespace(topics=[SimpleNamespace(name="t", num_partitions=20, assignments=())])
    assert KafkaThrottle.strict_quota(ParsedRequest(19, 6, 1, "admin", body))
    assert not KafkaThrottle.strict_quota(ParsedRequest(19, 5, 1, "admin", body))  # served, throttled after
    assert not KafkaThrottle.strict_quota(ParsedRequest(20, 4, 1, "admin", body))
    assert KafkaThrottle.strict_quota(ParsedRequest(37, 3, 1, "admin", body))
    assert KafkaThrottle.strict_quota(ParsedRequest(18, 0, 1, "admin", body))  # not a mutation at all
    conn = _conn()
    answer: dict[str, Any] = {"throttle_time": 9_000, "topics": [{"name": "t", "error_code": 0}]}
    throttle.after(ParsedRequest(19, 7, 1, "admin", body), conn, answer, elapsed_ns=1000)
    assert answer["throttle_time"] == 9_000 and conn.throttle_ms == 9_000


def test_a_throttled_fetch_is_answered_empty_and_its_bytes_unrecorded() -> None:
    """KIP-219 as Kafka's KafkaApis (review, issue 24): over the quota, the answer goes out empty
    with the throttle, and the bytes it would have carried do not count against the client."""
    clock = ManualClock()
    image = _image(ClientQuotaRecord(entity=(("user", "alice"),), key="consumer_byte_rate", value=1000))
    quotas = QuotaManagers(lambda: image.quotas, clock=clock)
    throttle = KafkaThrottle(quotas)
    conn = _conn()
    fetch = ParsedRequest(1, 12, 1, "app", SimpleNamespace())
    assert throttle.fetch_max_bytes(fetch, conn) == 10_000  # 1000 B/s x 10 sampled windows of 1 s
    assert throttle.fetch_max_bytes(fetch, _conn("User:bob")) is None
    emptied: list[bool] = []

    def fetch_answer(size: int) -> dict[str, Any]:
        part = {"partition_index": 0, "records": b"x" * size}
        return {
            "throttle_time": 0,
            "responses": [{"topic": "t", "partitions": [part]}],
            "_throttled": lambda: emptied.append(True),
        }

    first = fetch_answer(8_000)
    throttle.after(fetch, conn, first, elapsed_ns=1000)
    assert first["throttle_time"] == 0 and not emptied and "_throttled" not in first
    second = fetch_answer(8_000)
    throttle.after(fetch, conn, second, elapsed_ns=1000)
    assert second["throttle_time"] > 0 and emptied == [True]
    # only the first answer's bytes count: 8 000 over the 10 s window, within the quota
    assert quotas.fetch.record("alice", "app", 0, clock.monotonic_ms()) == 0


def test_without_a_client_quota_nothing_is_recorded_and_a_mutation_throttle_still_mutes() -> None:
    """The no-quota fast path (issue 24, broker_bench): `enabled` is False, `after` takes the
    fetch's undo callback out of the answer and records nothing (no size sums, no sensors), and a
    controller's mutation throttle still mutes the connection."""
    clock = ManualClock()
    image = _image(ClientQuotaRecord(entity=(("user", "alice"),), key="controller_mutation_rate", value=1.0))
    quotas = QuotaManagers(lambda: image.quotas, clock=clock)
    throttle = KafkaThrottle(quotas)
    assert not throttle.enabled
    conn = _conn()
    emptied: list[bool] = []
    fetched: dict[str, Any] = {"throttle_time": 0, "responses": [], "_throttled": lambda: emptied.append(True)}
    throttle.after(ParsedRequest(1, 12, 1, "app", SimpleNamespace()), conn, fetched, elapsed_ns=10**12)
    throttle.after(_produce(10**6), conn, {"throttle_time": 0}, elapsed_ns=10**12)
    assert "_throttled" not in fetched and not emptied and conn.throttle_ms == 0
    assert list(quotas.samples(clock.monotonic_ms())) == []
    body = SimpleNamespace(topics=[])
    throttle.after(ParsedRequest(19, 7, 1, "admin", body), conn, {"throttle_time": 4_000}, elapsed_ns=1)
    assert conn.throttle_ms == 4_000
    with_quota = _image(ClientQuotaRecord(entity=(("user", None),), key="request_percentage", value=1.0))
    assert KafkaThrottle(QuotaManagers(lambda: with_quota.quotas, clock=clock)).enabled
