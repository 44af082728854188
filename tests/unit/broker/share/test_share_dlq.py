"""Dead-letter topics of share groups (KIP-1191, issue 27): a record archived by REJECT or by the
delivery limit is written to the group's DLQ topic with Kafka's context headers before the archive
is written to the share coordinator, once; a group without one, a topic the checks refuse, and a
failed write archive without a DLQ record; the original key and value are copied only when the
group asks for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kraftlog.broker.share import (
    AcknowledgementBatch,
    AcquireMode,
    ArchivedRecord,
    ArchiveReason,
    DeadLetterWriter,
    SharePartitionManager,
    dlq_payload,
    dlq_topic_problem,
)
from kraftlog.common import errors as kerr
from kraftlog.common.config import GROUP_CONFIG_DEFS, ConfigError, share_group_configs
from kraftlog.common.records import iter_batches
from kraftlog.metadata_log import ConfigResourceType
from tests.unit.broker.share.test_share_partition_manager import CONFIG, TID, Log, Persister, Replica

GROUP_DLQ = {"errors.deadletterqueue.topic.name": "dlq.t"}


class Cluster:
    """The image the writer reads (the DLQ topic, its partitions' leaders, its configs) and the
    appends it makes, with the share coordinator's writes interleaved in one event list."""

    def __init__(self, events: list[Any], *, partitions: int = 2, enabled: bool = True, exists: bool = True) -> None:
        self.events = events
        self.group_configs: dict[str, dict[str, str]] = {"g": dict(GROUP_DLQ)}
        self.topic_configs = {"errors.deadletterqueue.group.enable": "true" if enabled else "false"}
        self.partitions = partitions
        self.exists = exists
        self.created: list[str] = []
        self.fail: type[kerr.KafkaError] | None = None
        self.broker = {
            "errors.deadletterqueue.topic.name.prefix": "dlq.",
            "errors.deadletterqueue.auto.create.topics.enable": True,
        }

    def image(self) -> Any:
        parts = {i: SimpleNamespace(leader=1) for i in range(self.partitions)}
        topic = SimpleNamespace(partitions=parts) if self.exists else None
        return SimpleNamespace(
            topics=SimpleNamespace(get_by_name=lambda name: topic if name == "dlq.t" else None),
            configs=SimpleNamespace(
                config=lambda rtype, name: self.topic_configs if rtype == ConfigResourceType.TOPIC else {}
            ),
        )

    async def append(self, leader: int, topic: str, partition: int, payload: bytes) -> type[kerr.KafkaError] | None:
        if self.fail is not None:
            return self.fail
        records = [r for _p, b in iter_batches(payload) for r in b.records()]
        self.events.append(("dlq", topic, partition, records))
        return None

    async def create(self, name: str) -> None:
        self.created.append(name)
        self.exists = True

    def writer(self, timeout_ms: int = 5_000) -> DeadLetterWriter:
        async def no_sleep(_s: float) -> None:
            await asyncio.sleep(0)

        return DeadLetterWriter(
            group_configs=lambda g: self.group_configs.get(g, {}),
            image=self.image,
            append=self.append,
            create_topic=self.create,
            broker_config=self.broker.__getitem__,
            clock_ms=lambda: 5_000,
            timeout_ms=timeout_ms,
            sleep=no_sleep,
        )


class OrderedPersister(Persister):
    def __init__(self, events: list[Any]) -> None:
        super().__init__()
        self.events = events

    async def call(self, req: Any) -> Any:
        result = await super().call(req)
        if type(req).__name__ == "WriteStateRequest":
            self.events.append(("state", req.start_offset, tuple(tuple(b) for b in req.state_batches)))
        return result


def make(
    cluster_kw: dict[str, Any] | None = None, limit: int = 5
) -> tuple[SharePartitionManager, Log, Cluster, list[Any], list[int]]:
    events: list[Any] = []
    log = Log()
    replica = Replica(log)
    replicas = SimpleNamespace(get_partition=lambda topic, p: replica if (topic, p) == ("t", 0) else None)
    persister = OrderedPersister(events)
    persister.start = 0
    cluster = Cluster(events, **(cluster_kw or {}))
    now = [1000]
    manager = SharePartitionManager(
        1,
        {**CONFIG, "group.share.delivery.count.limit": limit},
        replicas=lambda: replicas,
        persister=persister,  # type: ignore[arg-type]
        clock_ms=lambda: now[0],
        dead_letters=cluster.writer(),
    )
    return manager, log, cluster, events, now


async def acquire(manager: SharePartitionManager, member: str = "a") -> Any:
    got = await manager.fetch(
        "g", member, [(TID, "t", 0)], max_wait_ms=0, max_bytes=1 << 20, max_records=10, mode=AcquireMode.RECORD_LIMIT
    )
    return got.get((TID, 0))


def headers(record: Any) -> dict[str, str]:
    return {k: (v or b"").decode() for k, v in record.headers}


def test_a_rejected_record_is_written_with_kafkas_headers_before_the_archive_is_persisted() -> None:
    async def scenario() -> None:
        manager, log, _cluster, events, _now = make()
        log.append(4)
        await acquire(manager)
        events.clear()
        await manager.acknowledge(
            "g", "a", TID, "t", 0, [AcknowledgementBatch(0, 0, (1,)), AcknowledgementBatch(1, 2, (3,))]
        )
        assert [e[0] for e in events] == ["dlq", "state"]  # the DLQ write is acknowledged first
        _kind, topic, partition, records = events[0]
        assert (topic, partition) == ("dlq.t", 0)  # source partition 0 % 2 DLQ partitions
        assert [headers(r) for r in records] == [
            {
                "__dlq.errors.topic": "t",
                "__dlq.errors.partition": "0",
                "__dlq.errors.offset": str(offset),
                "__dlq.errors.group": "g",
                "__dlq.errors.delivery.count": "1",
                "__dlq.errors.message": "Offset rejected by client.",
            }
            for offset in (1, 2)
        ]
        assert all(r.key is None and r.value is None for r in records)  # copy.record is off
        assert events[1][1] == 3  # the archive is persisted: the start moved past 0-2
        events.clear()
        with pytest.raises(kerr.InvalidRecordStateError):  # archived: never rejected (written) again
            await manager.acknowledge("g", "a", TID, "t", 0, [AcknowledgementBatch(1, 1, (3,))])
        assert events == []

    asyncio.run(scenario())


def test_the_delivery_limit_writes_the_record_once_with_its_reason() -> None:
    async def scenario() -> None:
        manager, log, _cluster, events, now = make(limit=2)
        log.append(1)
        for member in ("a", "b"):
            assert [tuple(r) for r in (await acquire(manager, member)).acquired][0][:2] == (0, 0)
            now[0] += 1000
            await manager.expire_due(now[0])  # the lock ends: released, then archived at count 2
        dlq = [e for e in events if e[0] == "dlq"]
        assert len(dlq) == 1
        assert headers(dlq[0][3][0])["__dlq.errors.delivery.count"] == "2"
        assert headers(dlq[0][3][0])["__dlq.errors.message"] == "Offset delivery count exceeded the threshold."
        assert events.index(dlq[0]) < len(events) - 1 and events[-1][0] == "state" and events[-1][1] == 1
        assert await acquire(manager, "c") is None  # archived: nothing more to deliver, nor to write
        assert len([e for e in events if e[0] == "dlq"]) == 1

    asyncio.run(scenario())


def test_the_original_key_and_value_are_copied_when_the_group_asks() -> None:
    async def scenario() -> None:
        manager, log, cluster, events, _now = make()
        cluster.group_configs["g"]["errors.deadletterqueue.copy.record.enable"] = "true"
        log.append(3)
        await acquire(manager)
        await manager.acknowledge("g", "a", TID, "t", 0, [AcknowledgementBatch(1, 1, (3,))])
        records = next(e for e in events if e[0] == "dlq")[3]
        assert [(r.key, r.value, headers(r)["__dlq.errors.offset"]) for r in records] == [(None, b"v1", "1")]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("cluster_kw", "group", "broker", "fail"),
    [
        ({}, {}, {}, None),  # the group names no DLQ topic
        ({"enabled": False}, GROUP_DLQ, {}, None),  # the topic did not opt in
        ({}, {"errors.deadletterqueue.topic.name": "other"}, {}, None),  # outside the prefix
        (
            {"exists": False},
            GROUP_DLQ,
            {"errors.deadletterqueue.auto.create.topics.enable": False},
            None,
        ),  # missing, no auto-create
        ({}, GROUP_DLQ, {}, kerr.NotEnoughReplicasError),  # the produce is refused
    ],
)
def test_without_a_usable_dlq_topic_the_record_is_archived_all_the_same(
    cluster_kw: dict[str, Any], group: dict[str, str], broker: dict[str, Any], fail: type[kerr.KafkaError] | None
) -> None:
    async def scenario() -> None:
        manager, log, cluster, events, _now = make(cluster_kw)
        cluster.group_configs["g"] = dict(group)
        cluster.broker.update(broker)
        cluster.fail = fail
        log.append(1)
        await acquire(manager)
        await manager.acknowledge("g", "a", TID, "t", 0, [AcknowledgementBatch(0, 0, (3,))])
        assert [e[0] for e in events if e[0] == "dlq"] == []
        assert events[-1][:2] == ("state", 1)  # archived: the start offset moved past it
        assert await acquire(manager, "b") is None
        assert manager.dead_letters is not None
        assert manager.dead_letters.failed.get("g", 0) == (1 if group else 0)  # counted when one was named

    asyncio.run(scenario())


def test_a_missing_dlq_topic_is_created_when_auto_creation_is_on() -> None:
    async def scenario() -> None:
        manager, log, cluster, events, _now = make({"exists": False})
        log.append(1)
        await acquire(manager)
        await manager.acknowledge("g", "a", TID, "t", 0, [AcknowledgementBatch(0, 0, (3,))])
        assert cluster.created == ["dlq.t"]
        assert [e[0] for e in events][-2:] == ["dlq", "state"]

    asyncio.run(scenario())


def test_a_dlq_write_that_never_ends_is_given_up_after_its_timeout() -> None:
    async def scenario() -> None:
        events: list[Any] = []
        cluster = Cluster(events)

        async def hang(*_args: Any) -> None:
            await asyncio.sleep(3600)

        cluster.append = hang  # type: ignore[method-assign,assignment]
        writer = cluster.writer(timeout_ms=20)
        rec = ArchivedRecord(0, 1, ArchiveReason.REJECTED)
        assert await writer.write("g", "t", 0, [rec]) is False
        assert writer.failed == {"g": 1}

    asyncio.run(scenario())


def test_the_topic_checks_are_kafkas() -> None:
    assert dlq_topic_problem("dlq.a", "dlq.", True, True, False) is None
    assert dlq_topic_problem("any", "", True, True, False) is None
    assert "__" in str(dlq_topic_problem("__dlq", "", True, True, True))
    assert "prefix" in str(dlq_topic_problem("x", "dlq.", True, True, True))
    assert "errors.deadletterqueue.group.enable" in str(dlq_topic_problem("dlq.a", "dlq.", True, False, True))
    assert "auto.create.topics.enable" in str(dlq_topic_problem("dlq.a", "dlq.", False, False, False))
    assert "__" in str(dlq_topic_problem("__x", "dlq.", False, False, False))  # Kafka's order of checks
    assert "group.enable" in str(dlq_topic_problem("x", "dlq.", True, False, True))
    assert dlq_topic_problem("dlq.a", "dlq.", False, False, True) is None


def test_dlq_records_are_one_batch_in_offset_order() -> None:
    recs = [ArchivedRecord(9, 3, ArchiveReason.DELIVERY_LIMIT), ArchivedRecord(4, 1, ArchiveReason.REJECTED)]
    out = [r for _p, b in iter_batches(dlq_payload("g", "t", 2, recs, 77)) for r in b.records()]
    assert [(r.timestamp_ms, headers(r)["__dlq.errors.offset"]) for r in out] == [(77, "4"), (77, "9")]


def test_the_group_configs_are_validated() -> None:
    assert "errors.deadletterqueue.topic.name" in GROUP_CONFIG_DEFS
    values = share_group_configs({"errors.deadletterqueue.topic.name": "dlq.x"}, CONFIG.__getitem__)  # type: ignore[arg-type]
    assert values["errors.deadletterqueue.topic.name"] == "dlq.x"
    assert values["errors.deadletterqueue.copy.record.enable"] is False
    with pytest.raises(ConfigError):
        share_group_configs({"errors.deadletterqueue.topic.name": "__consumer_offsets"}, CONFIG.__getitem__)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        share_group_configs({"errors.deadletterqueue.copy.record.enable": "maybe"}, CONFIG.__getitem__)  # type: ignore[arg-type]


def test_a_broker_appends_locally_when_it_leads_the_dlq_partition_else_produces_to_the_leader() -> None:
    from kraftlog.broker.share import broker_append
    from kraftlog.proto import broker_pb2

    local: list[tuple[str, int, bytes, int]] = []
    sent: list[tuple[str, Any, float]] = []
    answer = [0]

    class Replicas:
        async def append_internal(self, topic: str, partition: int, payload: bytes, timeout_ms: int) -> None:
            local.append((topic, partition, payload, timeout_ms))

    class Stub:
        def __init__(self, address: str) -> None:
            self.address = address

        async def Produce(self, req: Any, timeout: float) -> Any:  # noqa: N802 - the gRPC method's name
            sent.append((self.address, req, timeout))
            resp = broker_pb2.ProduceResponse()
            part = resp.topics.add(name="dlq.t").partitions.add(index=1)
            part.error.code = answer[0]
            return resp

    append = broker_append(1, Replicas, Stub, lambda b: {2: "h2:9"}.get(b), 3000)

    async def scenario() -> list[Any]:
        return [
            await append(1, "dlq.t", 0, b"batch"),
            await append(2, "dlq.t", 1, b"batch"),
            await append(3, "dlq.t", 1, b"batch"),  # a leader with no endpoint
            answer.__setitem__(0, kerr.NotEnoughReplicasError.error_code),
            await append(2, "dlq.t", 1, b"batch"),
        ]

    results = asyncio.run(scenario())
    assert results[0] is None and local == [("dlq.t", 0, b"batch", 3000)]
    assert results[1] is None and results[2] is kerr.LeaderNotAvailableError
    assert results[4] is kerr.NotEnoughReplicasError
    address, req, timeout = sent[0]
    assert (address, req.acks, req.timeout_ms, timeout) == ("h2:9", -1, 3000, 8.0)
    assert [(t.name, p.index, p.records) for t in req.topics for p in t.partitions] == [("dlq.t", 1, b"batch")]
