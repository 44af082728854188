"""Kafka-protocol data requests: Produce, Fetch (zero copy, fetch sessions), ListOffsets,
OffsetForLeaderEpoch, DeleteRecords. Each is built into the gRPC request the replica manager already serves and
its answer turned back; the record batches are the bytes the client sent and, for a fetch, the
bytes of the segment file (a `FileRegion` the listener sends with sendfile).
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kraftlog.broker.kafka._kafka_fetch_sessions import (
    THROTTLED_FETCH,
    FetchSessionCache,
    SessionFetch,
    SessionPartition,
    TopicPartition,
)
from kraftlog.broker.kafka._kafka_server import CLOSE_CONNECTION, ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, RegionRecords, ms
from kraftlog.broker.replica import LEADER_HINT_CODES, FetchResult, close_regions
from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common import errors as kerr
from kraftlog.common.security import current_request
from kraftlog.proto import broker_pb2

if TYPE_CHECKING:
    from kraftlog.broker.replica import ReplicaManager
    from kraftlog.metadata_log import MetadataImage

__all__ = ["DataApis"]


class DataApis:
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch for `KafkaApis`, over the replica manager
    (``replicas``: there once the broker started) and the broker's metadata image. It owns the
    listener's incremental fetch sessions (KIP-227), ``fetch_session_slots`` of them at most.
    ``fetch_max_bytes`` caps a consumer's Fetch by its quota (None: no cap); ``quotas_enabled``
    says whether any client quota is set (else a fetch keeps no journal to undo a throttle)."""

    def __init__(
        self,
        replicas: Callable[[], ReplicaManager],
        image: Callable[[], MetadataImage],
        fetch_session_slots: int,
        fetch_max_bytes: Callable[[ParsedRequest, ConnectionInfo], int | None] = lambda request, conn: None,
        quotas_enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self._replicas = replicas
        self._image = image
        self._fetch_max_bytes = fetch_max_bytes
        self._quotas_enabled = quotas_enabled
        self.fetch_sessions = FetchSessionCache(fetch_session_slots, rng=random.Random())

    def _endpoints(self, broker_ids: Iterable[int], listener: str) -> list[dict[str, Any]]:
        """Endpoints on ``listener`` of the brokers named in leader hints (Produce v10+, Fetch v16+)."""
        image = self._image()
        out = []
        for bid in sorted(set(broker_ids)):
            reg = image.cluster.broker(bid)
            ep = None if reg is None else reg.endpoint(listener)
            if reg is not None and ep is not None:
                out.append({"node_id": bid, "host": ep.host, "port": ep.port, "rack": reg.rack or None})
        return out

    # ------------------------------------------------------------------ topic ids

    def _names_of_ids(self, ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID | None, str]:
        """The topics' names of the ids the image knows (Produce v13+, Fetch v13+)."""
        image = self._image()
        out: dict[uuid.UUID | None, str] = {}
        for topic_id in ids:
            topic = image.topics.get_by_id(str(topic_id)) if topic_id is not None else None
            if topic is not None:
                out[topic_id] = topic.name
        return out

    def _id_of(self, name: str) -> str | None:
        topic = self._image().topics.get_by_name(name)
        return topic.topic_id if topic is not None else None

    # ------------------------------------------------------------------ Produce

    async def produce(self, request: ParsedRequest, conn: ConnectionInfo) -> Any:
        """acks=0 has no answer; when a partition failed the connection is closed instead (Kafka's
        way to make such a producer refresh its metadata)."""
        body = request.body
        # KIP-890: from v12 (clients of transaction.version 2) a transactional batch adds its
        # partition to the transaction; from v11 the client takes TRANSACTION_ABORTABLE
        pb = broker_pb2.ProduceRequest(
            acks=body.acks,
            timeout_ms=ms(body.timeout),
            transactional_id=body.transactional_id or "",
            add_partitions=request.api_version >= 12,
            abortable_error=request.api_version >= 11,
        )
        # v13+ (KIP-516): topics by id; an id the image does not know is UNKNOWN_TOPIC_ID
        by_id = request.api_version >= 13
        names = self._names_of_ids([t.topic_id for t in body.topic_data]) if by_id else {}
        unknown: list[Any] = []
        for t in body.topic_data:
            name = names.get(t.topic_id) if by_id else t.name
            if name is None:
                unknown.append(t)
                continue
            td = pb.topics.add(name=name)
            for p in t.partition_data:
                td.partitions.add(index=p.index, records=p.records or b"")
        replicas = self._replicas()
        if conn.produce_budget is None:
            conn.produce_budget = replicas.produce_preparation.connection_budget()
        resp = await replicas.produce(pb, conn.produce_budget)
        if body.acks == 0:
            failed = resp.error.code or any(p.error.code for t in resp.topics for p in t.partitions)
            return CLOSE_CONNECTION if failed else None
        hinted: list[int] = []
        topics = []
        for t in resp.topics:
            parts = []
            for p in t.partitions:
                code = p.error.code or resp.error.code
                entry: dict[str, Any] = {
                    "index": p.index,
                    "error_code": code,
                    "base_offset": p.base_offset,
                    "log_append_time": p.log_append_time_ms,
                    "log_start_offset": p.log_start_offset,
                    "record_errors": [
                        {"batch_index": e.batch_index, "batch_index_error_message": e.message or None}
                        for e in p.record_errors
                    ],
                    "error_message": (p.error.message or None) if code else None,
                }
                if p.HasField("current_leader") and p.current_leader.leader_id >= 0:
                    entry["current_leader"] = {
                        "leader_id": p.current_leader.leader_id,
                        "leader_epoch": p.current_leader.leader_epoch,
                    }
                    hinted.append(p.current_leader.leader_id)
                parts.append(entry)
            topics.append({"name": t.name, "topic_id": self._id_of(t.name), "partition_responses": parts})
        for t in unknown:
            missing = kerr.UnknownTopicIdError.error_code
            topics.append(
                {
                    "topic_id": t.topic_id,
                    "partition_responses": [
                        {"index": p.index, "error_code": missing, "base_offset": -1, "log_start_offset": -1}
                        for p in t.partition_data
                    ],
                }
            )
        if body.acks == 0 and unknown:
            return CLOSE_CONNECTION
        return {
            "responses": topics,
            "throttle_time": 0,
            "node_endpoints": self._endpoints(hinted, conn.listener_name),
        }

    # ------------------------------------------------------------------ Fetch

    async def fetch(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """Fetch for consumers; the answer's batches stay in the segment files (`RegionRecords`).

        Replication between kraftlog brokers runs over gRPC, so a replica fetch (``replica_id``
        >= 0) on this listener is refused with INVALID_REQUEST. From v11 (KIP-392) the leader may
        answer a partition with ``preferred_read_replica`` (``replica.selector.class`` and the
        request's ``rack_id``), and a follower serves the fetch up to its high watermark."""
        body = request.body
        version = request.api_version
        replica_id = getattr(body, "replica_id", None)
        if replica_id is None:  # v15+ (KIP-903): the replica's id moved into a tagged ReplicaState
            state = getattr(body, "replica_state", None)
            replica_id = state.replica_id if state is not None else -1
        if replica_id >= 0:
            current_request().refused_early("replica fetches run over gRPC")
            return {"error_code": kerr.InvalidRequestError.error_code, "session_id": 0, "responses": []}
        # v13+ (KIP-516): topics by id; the session keeps partitions by id with the name the image
        # gave (see _kafka_fetch_sessions); an id the image does not know is UNKNOWN_TOPIC_ID
        by_id = version >= 13
        forgotten_data = getattr(body, "forgotten_topics_data", ()) or ()
        names = self._names_of_ids([t.topic_id for t in body.topics]) if by_id else {}
        requested = []
        for t in body.topics:
            for p in t.partitions:
                sp = SessionPartition(
                    fetch_offset=p.fetch_offset,
                    partition_max_bytes=p.partition_max_bytes,
                    current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                    topic=names.get(t.topic_id) if by_id else t.topic,
                )
                requested.append(((t.topic_id if by_id else t.topic, p.partition), sp))
        forgotten = [(t.topic_id if by_id else t.topic, pid) for t in forgotten_data for pid in t.partitions]
        session_id = getattr(body, "session_id", 0) if version >= 7 else 0
        epoch = getattr(body, "session_epoch", -1) if version >= 7 else -1
        try:
            fetch = self.fetch_sessions.resolve(
                session_id, epoch, requested, forgotten, SYSTEM_CLOCK.monotonic_ms(), uses_topic_ids=by_id
            )
        except kerr.KafkaError as err:
            current_request().refused_early(f"fetch session: {err.error_name}")
            return {"error_code": err.error_code, "session_id": 0, "responses": []}
        fetch.journal = self._quotas_enabled()  # only a quota can make this answer a throttled one
        max_bytes = getattr(body, "max_bytes", 0) or 0  # 0: no limit (v0-v2 have none)
        if (quota_cap := self._fetch_max_bytes(request, conn)) is not None:
            max_bytes = quota_cap if max_bytes <= 0 else min(max_bytes, quota_cap)
        pb = broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=ms(body.max_wait),
            min_bytes=body.min_bytes,
            max_bytes=max_bytes,
            isolation_level=getattr(body, "isolation_level", 0),
            rack_id=getattr(body, "rack_id", "") or "",
            fetch_from_follower=version >= 11,  # Kafka's ClientMetadata: KIP-392 from Fetch v11
        )
        # the session's partitions by topic (id or name) in session order; the replica manager
        # answers in request order, so ``read`` lists the keys of its results in that order
        by_topic: dict[str | uuid.UUID, tuple[Any, list[TopicPartition]]] = {}
        unknown: list[TopicPartition] = []
        for key, sp in fetch.partitions.items():
            name = self._session_name(key, sp) if by_id else str(key[0])
            if name is None:
                unknown.append(key)
                continue
            group = by_topic.get(key[0])
            if group is None:
                ft = pb.topics.add(topic=name, topic_id=str(key[0]) if by_id else "")
                group = by_topic[key[0]] = (ft, [])
            group[0].partitions.add(
                partition=key[1],
                current_leader_epoch=sp.current_leader_epoch,
                fetch_offset=sp.fetch_offset,
                last_fetched_epoch=sp.last_fetched_epoch,  # v12+: the leader reports a diverging epoch
                log_start_offset=-1,
                partition_max_bytes=sp.partition_max_bytes,
            )
            group[1].append(key)
        read = [key for _ft, keys in by_topic.values() for key in keys]
        # called even with nothing to read: it makes the request's authorization decision
        results = await self._replicas().fetch_results(pb, zero_copy=True)
        try:
            answer = self._fetch_answer(
                list(zip(read, results, strict=True)),
                unknown,
                fetch,
                by_id=by_id,
                committed=pb.isolation_level == 1,
                listener=conn.listener_name,
            )
        except BaseException:
            close_regions(results)
            raise
        return answer

    def _session_name(self, key: TopicPartition, sp: SessionPartition) -> str | None:
        """The topic name of a partition of a session by topic id: the one it was first known by
        (Kafka's CachedPartition keeps it), else the image's now (None: still unknown)."""
        if sp.topic is None and isinstance(key[0], uuid.UUID):
            topic = self._image().topics.get_by_id(str(key[0]))
            if topic is not None:
                sp.topic = topic.name
        return sp.topic

    def _fetch_answer(
        self,
        results: list[tuple[TopicPartition, FetchResult]],
        unknown: list[TopicPartition],
        fetch: SessionFetch,
        *,
        by_id: bool,
        committed: bool,
        listener: str,
    ) -> dict[str, Any]:
        """The answer of ``results`` (each under its session key) and of the ``unknown`` topic ids,
        the partitions the session has nothing new of left out (an error is always news)."""
        replicas = self._replicas()
        topics: dict[str | uuid.UUID, dict[str, Any]] = {}
        hinted: list[int] = []
        dropped: list[FetchResult] = []

        def add(key: TopicPartition, name: str | None, entry: dict[str, Any]) -> None:
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = {"topic": name, "partitions": []}
                if by_id:
                    topic["topic_id"] = key[0]
            topic["partitions"].append(entry)

        for key in unknown:  # Kafka answers these with its other erroneous partitions, first
            fetch.include(key, has_data=False, has_error=True, hw=-1, lso=-1, log_start=-1)
            add(key, None, _unknown_topic_id_partition(key[1]))
        for key, r in results:
            entry: dict[str, Any] = {"partition_index": r.partition, "preferred_read_replica": -1}
            if r.read is not None:
                rd = r.read
                lso = rd.last_stable_offset if rd.last_stable_offset >= 0 else rd.high_watermark
                entry["preferred_read_replica"] = rd.preferred_read_replica
                if not fetch.include(
                    key,
                    has_data=rd.num_bytes > 0 or rd.diverging_epoch is not None or rd.preferred_read_replica >= 0,
                    has_error=False,
                    hw=rd.high_watermark,
                    lso=lso,
                    log_start=rd.log_start_offset,
                ):
                    dropped.append(r)
                    continue
                entry.update(
                    error_code=0,
                    high_watermark=rd.high_watermark,
                    last_stable_offset=lso,
                    log_start_offset=rd.log_start_offset,
                    aborted_transactions=(
                        [{"producer_id": pid, "first_offset": first} for pid, first in rd.aborted]
                        if committed
                        else None
                    ),
                    records=RegionRecords(rd.region) if rd.region is not None else rd.records,
                )
                if rd.diverging_epoch is not None:
                    entry["diverging_epoch"] = {"epoch": rd.diverging_epoch[0], "end_offset": rd.diverging_epoch[1]}
            else:
                assert r.error is not None
                err = replicas.error_of(r.error, "fetch")
                hw = lso = log_start = -1
                if r.part is not None and not r.part.stopped:
                    log = r.part.log
                    hw, lso, log_start = log.high_watermark, log.last_stable_offset, log.log_start_offset
                fetch.include(key, has_data=False, has_error=True, hw=hw, lso=lso, log_start=log_start)
                entry.update(
                    error_code=err.code,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=log_start,
                    records=b"",
                )
                if err.code in LEADER_HINT_CODES:
                    hint = replicas.leader_hint(r.topic, r.partition)
                    leader, epoch = hint if hint is not None else (-1, -1)
                    entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
                    if leader >= 0:
                        hinted.append(leader)
            add(key, r.topic, entry)
        close_regions(dropped)
        answer: dict[str, Any] = {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": fetch.session_id,
            "responses": list(topics.values()),
            "node_endpoints": self._endpoints(hinted, listener),
        }
        answer[THROTTLED_FETCH] = functools.partial(self._answer_throttled, answer, fetch)
        return answer

    def _answer_throttled(self, answer: dict[str, Any], fetch: SessionFetch) -> None:
        """Empty ``answer`` as a throttled fetch is answered (KIP-219, Kafka's getThrottledResponse):
        its file regions closed, its session as if the fetch had not been answered."""
        for topic in answer["responses"]:
            for part in topic["partitions"]:
                records = part.get("records")
                if isinstance(records, RegionRecords):
                    records.region.close()
        answer["responses"] = []
        answer["session_id"] = self.fetch_sessions.throttled(fetch)

    # ------------------------------------------------------------------ ListOffsets, OffsetForLeaderEpoch

    async def list_offsets(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = broker_pb2.ListOffsetsRequest(
            replica_id=body.replica_id, isolation_level=getattr(body, "isolation_level", 0)
        )
        for t in body.topics:
            pt = pb.topics.add(name=t.name)
            for p in t.partitions:
                pt.partitions.add(
                    partition_index=p.partition_index,
                    current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    timestamp=p.timestamp,
                )
        resp = self._replicas().list_offsets(pb)
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": p.error.code,
                            "timestamp": p.timestamp,
                            "offset": p.offset,
                            "leader_epoch": p.leader_epoch,
                        }
                        for p in t.partitions
                    ],
                }
                for t in resp.topics
            ],
        }

    async def offset_for_leader_epoch(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = broker_pb2.OffsetForLeaderEpochRequest(replica_id=getattr(body, "replica_id", -1))
        for t in body.topics:
            pt = pb.topics.add(topic=t.topic)
            for p in t.partitions:
                pt.partitions.add(
                    partition=p.partition, current_leader_epoch=p.current_leader_epoch, leader_epoch=p.leader_epoch
                )
        resp = self._replicas().offset_for_leader_epoch(pb)
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "topic": t.topic,
                    "partitions": [
                        {
                            "error_code": p.error.code,
                            "partition": p.partition,
                            "leader_epoch": p.leader_epoch,
                            "end_offset": p.end_offset,
                        }
                        for p in t.partitions
                    ],
                }
                for t in resp.topics
            ],
        }

    # ------------------------------------------------------------------ DeleteRecords

    async def delete_records(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DeleteRecords (v0-2): the replica manager's; it authorizes DELETE on each topic, moves the
        leader's log start offset and waits (up to the request's timeout) for the low watermark."""
        body = request.body
        pb = broker_pb2.DeleteRecordsRequest(timeout_ms=ms(body.timeout))
        for t in body.topics:
            pt = pb.topics.add(name=t.name)
            for p in t.partitions:
                pt.partitions.add(partition_index=p.partition_index, offset=p.offset)
        resp = await self._replicas().delete_records(pb)
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "low_watermark": p.low_watermark,
                            "error_code": p.error.code,
                        }
                        for p in t.partitions
                    ],
                }
                for t in resp.topics
            ],
        }


def _unknown_topic_id_partition(partition: int) -> dict[str, Any]:
    """A Fetch v13+ answer's partition of a topic id the image does not know (UNKNOWN_TOPIC_ID)."""
    return {
        "partition_index": partition,
        "error_code": kerr.UnknownTopicIdError.error_code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "preferred_read_replica": -1,
        "records": b"",
    }
