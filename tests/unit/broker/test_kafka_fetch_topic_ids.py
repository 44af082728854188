"""Fetch sessions of Fetch v13+ keyed by topic id (issue 28, KIP-516), as Kafka's FetchSession and
ReplicaManager: a session opened by id remembers partitions by id, so a topic deleted and
recreated under its name while a session holds it is answered INCONSISTENT_TOPIC_ID (not read at
the old position in the new topic); an id the broker does not know is UNKNOWN_TOPIC_ID and stays in
the session until forgotten (by id); a session opened with names and used with ids, or the
reverse, is FETCH_SESSION_TOPIC_ID_ERROR. The Kafka-listener layer over a real replica manager."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from kraftlog.broker.kafka._kafka_data import DataApis
from kraftlog.broker.kafka._kafka_fetch_sessions import FetchSessionCache, SessionPartition
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, build
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import PartitionRecord, RemoveTopicRecord, TopicRecord
from tests.unit.broker.test_replica_manager import TOPIC_ID, batch, produce_req, setup

NEW_ID = "22222222-0000-4000-8000-000000000002"
OLD = uuid.UUID(TOPIC_ID)
NEW = uuid.UUID(NEW_ID)


def sp(offset: int) -> SessionPartition:
    return SessionPartition(fetch_offset=offset, partition_max_bytes=1 << 20)


# ------------------------------------------------------------------ the session cache alone


def test_a_session_by_id_refuses_a_request_by_name_and_the_reverse() -> None:
    """Kafka's FetchManager.newContext: after the epoch check, a session's use of topic ids must
    match the request's version (13+: ids), else FETCH_SESSION_TOPIC_ID_ERROR."""
    cache = FetchSessionCache(10, rng=random.Random(1))
    by_id = cache.resolve(0, 0, [((OLD, 0), sp(0))], [], now_ms=0, uses_topic_ids=True)
    by_name = cache.resolve(0, 0, [(("t", 0), sp(0))], [], now_ms=0, uses_topic_ids=False)
    with pytest.raises(kerr.FetchSessionTopicIdError):
        cache.resolve(by_id.session_id, 1, [], [], now_ms=1, uses_topic_ids=False)
    with pytest.raises(kerr.FetchSessionTopicIdError):
        cache.resolve(by_name.session_id, 1, [], [], now_ms=1, uses_topic_ids=True)
    # the epoch is checked first, and a refused request does not step the session
    with pytest.raises(kerr.InvalidFetchSessionEpochError):
        cache.resolve(by_id.session_id, 7, [], [], now_ms=1, uses_topic_ids=False)
    assert cache.resolve(by_id.session_id, 1, [], [], now_ms=2, uses_topic_ids=True).session_id == by_id.session_id
    assert cache.resolve(by_name.session_id, 1, [], [], now_ms=2, uses_topic_ids=False).session_id


def test_a_session_by_id_holds_two_incarnations_of_a_name_apart_and_forgets_by_id() -> None:
    cache = FetchSessionCache(10, rng=random.Random(2))
    full = cache.resolve(0, 0, [((OLD, 0), sp(5))], [], now_ms=0, uses_topic_ids=True)
    inc = cache.resolve(full.session_id, 1, [((NEW, 0), sp(0))], [], now_ms=1, uses_topic_ids=True)
    assert list(inc.partitions) == [(OLD, 0), (NEW, 0)]
    assert inc.partitions[(OLD, 0)].fetch_offset == 5 and inc.partitions[(NEW, 0)].fetch_offset == 0
    nxt = cache.resolve(full.session_id, 2, [], [(OLD, 0)], now_ms=2, uses_topic_ids=True)
    assert list(nxt.partitions) == [(NEW, 0)]


# ------------------------------------------------------------------ the Kafka listener over a replica manager


def fetch_request(
    version: int,
    parts: dict[tuple[Any, int], int],
    *,
    session_id: int = 0,
    epoch: int = 0,
    forgotten: tuple[tuple[Any, int], ...] = (),
) -> ParsedRequest:
    """A Fetch as a client sends it: topics by id from v13, else by name."""
    from kio.index import load_request_schema

    by_id = version >= 13
    topics: dict[Any, list[dict[str, Any]]] = {}
    for (topic, pid), offset in parts.items():
        topics.setdefault(topic, []).append(
            {"partition": pid, "fetch_offset": offset, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}
        )
    gone: dict[Any, list[int]] = {}
    for topic, pid in forgotten:
        gone.setdefault(topic, []).append(pid)
    key = "topic_id" if by_id else "topic"
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{key: t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{key: t, "partitions": ps} for t, ps in gone.items()],
        "rack_id": "",
    }
    return ParsedRequest(1, version, 1, "test", build(load_request_schema(1, version), body))


def answered(answer: dict[str, Any]) -> dict[tuple[Any, int], tuple[int, bytes]]:
    """(topic id or name, partition) -> (error code, records) of an answer."""
    out: dict[tuple[Any, int], tuple[int, bytes]] = {}
    for topic in answer["responses"]:
        key = topic.get("topic_id") or topic.get("topic")
        for p in topic["partitions"]:
            records = p.get("records") or b""
            region = getattr(records, "region", None)
            if region is not None:
                records = region.read()
                region.close()
            out[(uuid.UUID(str(key)) if topic.get("topic_id") else key, p["partition_index"])] = (
                p["error_code"],
                bytes(records),
            )
    return out


def recreate(meta: Any) -> None:
    meta.commit(RemoveTopicRecord(topic_id=TOPIC_ID))
    meta.commit(
        TopicRecord(name="t", topic_id=NEW_ID),
        PartitionRecord(partition_id=0, topic_id=NEW_ID, replicas=(1,), isr=(1,), leader=1),
    )


def run_listener(tmp_path: Path, scenario: Any) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path)
        data = DataApis(lambda: rm, lambda: meta.image, fetch_session_slots=10, quotas_enabled=lambda: False)
        conn = ConnectionInfo("PLAINTEXT", "127.0.0.1:1")

        async def call(request: ParsedRequest) -> dict[str, Any]:
            return await data.fetch(request, conn)

        try:
            await scenario(rm, meta, call)
        finally:
            await rm.shutdown()

    asyncio.run(main())


def test_a_recreated_topic_is_inconsistent_topic_id_for_a_session_that_holds_the_old_id(tmp_path: Path) -> None:
    """On main the session kept names: the incremental fetch read the new topic at the old
    topic's position, answered under the new id."""

    async def scenario(rm: Any, meta: Any, call: Any) -> None:
        await rm.produce(produce_req({0: batch(5, "old")}, acks=1))
        full = await call(fetch_request(13, {(OLD, 0): 5}))
        sid = full["session_id"]
        assert sid > 0 and answered(full)[(OLD, 0)][0] == 0
        recreate(meta)
        await rm.produce(produce_req({0: batch(8, "new")}, acks=1))
        inc = await call(fetch_request(13, {}, session_id=sid, epoch=1))
        assert inc["error_code"] == 0
        assert answered(inc) == {(OLD, 0): (kerr.InconsistentTopicIdError.error_code, b"")}
        # the client refreshes its metadata, forgets the old id and adds the new one (Kafka's
        # FetchSessionHandler replaces a partition whose id changed so)
        again = await call(fetch_request(13, {(NEW, 0): 0}, session_id=sid, epoch=2, forgotten=((OLD, 0),)))
        got = answered(again)
        assert list(got) == [(NEW, 0)] and got[(NEW, 0)][0] == 0 and b"new0" in got[(NEW, 0)][1]

    run_listener(tmp_path, scenario)


def test_a_deleted_topic_is_unknown_topic_or_partition_and_an_unknown_id_stays_until_forgotten(
    tmp_path: Path,
) -> None:
    stranger = uuid.UUID("33333333-0000-4000-8000-000000000003")

    async def scenario(rm: Any, meta: Any, call: Any) -> None:
        full = await call(fetch_request(15, {(OLD, 0): 0, (stranger, 0): 0}))
        sid = full["session_id"]
        assert answered(full)[(stranger, 0)][0] == kerr.UnknownTopicIdError.error_code
        inc = await call(fetch_request(15, {}, session_id=sid, epoch=1))
        # an error is answered each time; the known partition has no news
        assert answered(inc) == {(stranger, 0): (kerr.UnknownTopicIdError.error_code, b"")}
        meta.commit(RemoveTopicRecord(topic_id=TOPIC_ID))
        gone = await call(fetch_request(15, {}, session_id=sid, epoch=2, forgotten=((stranger, 0),)))
        assert answered(gone) == {(OLD, 0): (kerr.UnknownTopicOrPartitionError.error_code, b"")}
        # the deleted topic's id, unknown to the image now, is still forgotten by id
        last = await call(fetch_request(15, {}, session_id=sid, epoch=3, forgotten=((OLD, 0),)))
        assert answered(last) == {}

    run_listener(tmp_path, scenario)


def test_versions_with_and_without_ids_do_not_share_a_session(tmp_path: Path) -> None:
    async def scenario(rm: Any, meta: Any, call: Any) -> None:
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        by_name = await call(fetch_request(12, {("t", 0): 0}))
        refused = await call(fetch_request(13, {}, session_id=by_name["session_id"], epoch=1))
        assert refused["error_code"] == kerr.FetchSessionTopicIdError.error_code
        assert refused["session_id"] == 0 and refused["responses"] == []
        by_id = await call(fetch_request(17, {(OLD, 0): 0}))
        refused = await call(fetch_request(12, {}, session_id=by_id["session_id"], epoch=1))
        assert refused["error_code"] == kerr.FetchSessionTopicIdError.error_code
        # the sessions themselves are untouched: each goes on at the version it was opened with
        ok = await call(fetch_request(12, {("t", 0): 2}, session_id=by_name["session_id"], epoch=1))
        assert ok["error_code"] == 0 and ok["session_id"] == by_name["session_id"]
        ok = await call(fetch_request(17, {(OLD, 0): 2}, session_id=by_id["session_id"], epoch=1))
        assert ok["error_code"] == 0 and ok["session_id"] == by_id["session_id"]

    run_listener(tmp_path, scenario)
