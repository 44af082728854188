"""Client quotas on the gRPC BrokerService (issue 24): a throttled answer carries its throttle and
comes late; replica fetches are exempt."""

from __future__ import annotations

import asyncio

from kraftlog.broker.quota import QuotaManagers, throttle_grpc_fetch, throttle_grpc_produce
from kraftlog.common import ManualClock
from kraftlog.metadata_log import ClientQuotaRecord, MetadataDelta, MetadataImage
from kraftlog.proto import broker_pb2


def _managers(key: str, clock: ManualClock) -> QuotaManagers:
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(ClientQuotaRecord(entity=(("client-id", "app"),), key=key, value=1000))
    quotas = delta.apply().quotas
    return QuotaManagers(lambda: quotas, window_num=2, clock=clock)


class _Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("other", "x"), ("kraftlog-client-id", "app"))


def test_client_id_comes_from_call_metadata() -> None:
    """The security interceptor puts it in the request context (`RequestContext.client_id`)."""
    from kraftlog.common.security import CLIENT_ID_METADATA, metadata_value

    assert (metadata_value(_Context(), CLIENT_ID_METADATA) or "") == "app"
    assert (metadata_value(object(), CLIENT_ID_METADATA) or "") == ""


def test_a_throttled_produce_answer_carries_its_throttle_time() -> None:
    clock = ManualClock()
    quotas = _managers("producer_byte_rate", clock)
    request = broker_pb2.ProduceRequest(
        topics=[broker_pb2.ProduceRequest.TopicData(name="t", partitions=[{"index": 0, "records": b"x" * 1100}])]
    )
    response = asyncio.run(throttle_grpc_produce(quotas, request, broker_pb2.ProduceResponse(), "User:a", "app"))
    # 1100 bytes over a 1 s window against 1000 B/s: (1100 - 1000) / 1000 * 1000 ms
    assert response.throttle_time_ms == 100
    other = asyncio.run(throttle_grpc_produce(quotas, request, broker_pb2.ProduceResponse(), "User:a", "other"))
    assert other.throttle_time_ms == 0


def test_replica_fetches_are_not_throttled() -> None:
    clock = ManualClock()
    quotas = _managers("consumer_byte_rate", clock)
    response = broker_pb2.FetchResponse(
        responses=[{"topic": "t", "partitions": [{"partition_index": 0, "records": b"y" * 5000}]}]
    )
    replica = broker_pb2.FetchRequest(replica_id=2)
    assert asyncio.run(throttle_grpc_fetch(quotas, replica, response, "User:b", "app")).throttle_time_ms == 0
    consumer = broker_pb2.FetchRequest(replica_id=-1)
    assert asyncio.run(throttle_grpc_fetch(quotas, consumer, response, "User:b", "app")).throttle_time_ms > 0


class _Unreadable:
    """A request or answer whose records must not be read (each read of a protobuf bytes field
    copies it)."""

    replica_id = -1

    @property
    def topics(self) -> list[object]:
        raise AssertionError("the payloads were read")

    responses = topics


def test_without_a_quota_of_its_type_no_payload_is_read() -> None:
    """issue 24, broker_bench: the no-quota case measures nothing; a quota of another type
    (consumer_byte_rate) does not make produces measured either."""
    quotas = _managers("consumer_byte_rate", ManualClock())
    assert quotas.enabled and quotas.fetch.enabled and not quotas.produce.enabled
    answer = broker_pb2.ProduceResponse()
    assert asyncio.run(throttle_grpc_produce(quotas, _Unreadable(), answer, "User:a", "app")) is answer
    none = _managers("producer_byte_rate", ManualClock())
    assert not none.fetch.enabled
    fetched = broker_pb2.FetchResponse()
    assert asyncio.run(throttle_grpc_fetch(none, _Unreadable(), fetched, "User:a", "app")) is fetched
