"""`ReplicaRequests`: the broker's data requests against its replicas — Produce (acks and
purgatory), Fetch (consumers and followers), ListOffsets, OffsetForLeaderEpoch, WriteTxnMarkers,
DescribeProducers, DeleteRecords. `ReplicaManager` holds one; it reads the `PartitionRegistry`
(never writes it) and parks requests in the `ReplicaPurgatories`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kraftlog import storage
from kraftlog.broker.replica._fetch_response import close_regions, fetch_response
from kraftlog.broker.replica._metrics import BrokerTopicMetrics
from kraftlog.broker.replica._partition import error_pb
from kraftlog.broker.replica._produce_pool import ByteBudget, ProducePreparation, payload_shape
from kraftlog.broker.replica._replica_registry import PartitionRegistry, ReplicaPurgatories
from kraftlog.broker.replica._replica_selector import replica_selector
from kraftlog.broker.replica._replica_types import (
    LEADER_HINT_CODES,
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    FetchResult,
    _DeleteStatus,
    _ProduceStatus,
)
from kraftlog.broker.replica._txn_verification import TxnVerify, verify_transactional_batches
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import broker_pb2

__all__ = ["ReplicaRequests"]

#: told (topic, partition, producer id, commit) of every transaction marker written and replicated
MarkerListener = Callable[[str, int, int, bool], None]


def _topic_denied(topic: str, operation: AclOperation) -> kerr.TopicAuthorizationFailedError:
    principal = current_request().principal
    return kerr.TopicAuthorizationFailedError(f"{principal} may not {operation.name} topic {topic!r}")


def _topics_allowed(operation: AclOperation, names: list[str], *, replica: bool = False) -> set[str]:
    """The topics of a request the caller may do ``operation`` on; a replica's request (a
    follower's fetch) needs ClusterAction instead, for all of them or none (Kafka's rule)."""
    ctx = current_request()
    if replica:
        return (
            set(names)
            if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
            else set()
        )
    return ctx.authorized(operation, ResourceType.TOPIC, names)


def _payloads(req: broker_pb2.ProduceRequest) -> list[list[bytes]]:
    """Each partition's records of a produce request, by topic and partition index: read once,
    as every read of a protobuf bytes field is a copy of it (1 MiB per partition and request)."""
    return [[p.records for p in t.partitions] for t in req.topics]


def _has_transactional_batch(payloads: list[list[bytes]]) -> bool:
    """Whether any batch of a produce request is transactional (header attributes only)."""
    for topic in payloads:
        for records in topic:
            if any(batch.is_transactional for _pos, batch in storage.iter_batches(records)):
                return True
    return False


class ReplicaRequests:
    """The data requests: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, ...
    ``marker_listeners`` is the replica manager's list (the server appends to it)."""

    def __init__(
        self,
        registry: PartitionRegistry,
        purgatories: ReplicaPurgatories,
        metrics: BrokerTopicMetrics,
        config: NodeConfig,
        clock_ms: Callable[[], int],
        marker_listeners: list[MarkerListener],
        preparation: ProducePreparation | None = None,
    ) -> None:
        self._preparation = preparation
        self._registry = registry
        self._purgatories = purgatories
        self._metrics = metrics
        self._config = config
        self._clock_ms = clock_ms
        self._marker_listeners = marker_listeners
        self._selector = replica_selector(config["replica.selector.class"])  # KIP-392; None: leader only
        # KIP-890: how a leader asks a transaction coordinator (the server sets it; None: no checks)
        self.txn_verify: TxnVerify | None = None

    async def produce(
        self, req: broker_pb2.ProduceRequest, connection: ByteBudget | None = None
    ) -> broker_pb2.ProduceResponse:
        """Produce: append each partition's batches to its leader log, then answer by ``acks``.

        Compressed or large payloads are validated on the produce-validation pool first, within
        the broker's and the ``connection``'s byte budget (`_prepare`); the appends then happen
        in request order on the loop.

        acks=0 and acks=1 are answered once the records are in the log; acks=-1 waits (up to
        ``timeout_ms``) until the HW passed every appended batch. A partition that fails (unknown,
        not leader, too few in-sync replicas, corrupt or too large batch, storage error) gets its
        own error and does not fail the others. Any other acks value: INVALID_REQUIRED_ACKS.
        """
        R = broker_pb2.ProduceResponse
        resp = R()
        hinted: set[int] = set()
        acks = req.acks
        err = None
        ctx = current_request()
        payloads = _payloads(req)
        # Kafka's rule: transactional batches need Write on a transactional id the request names
        # (a transaction no coordinator knows would hold back the LSO of its partitions for good)
        if not req.transactional_id and _has_transactional_batch(payloads):
            ctx.refused_early("transactional batches without a transactional id")
            err = error_pb(
                kerr.TransactionalIdAuthorizationFailedError,
                "transactional batches need the producer's transactional id in the request",
            )
        elif req.transactional_id and not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
        ):
            err = error_pb(
                kerr.TransactionalIdAuthorizationFailedError,
                f"{ctx.principal} may not WRITE transactional id {req.transactional_id!r}",
            )
        elif acks not in (-1, 0, 1):
            ctx.refused_early(f"acks {acks}")
            err = error_pb(kerr.InvalidRequiredAcksError, f"acks must be -1, 0 or 1, not {acks}")
        if err is not None:
            resp.error.CopyFrom(err)
            for t in req.topics:
                resp.topics.append(
                    R.TopicResponse(
                        name=t.name,
                        partitions=[
                            R.PartitionResponse(
                                index=p.index, error=err, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1
                            )
                            for p in t.partitions
                        ],
                    )
                )
            return resp
        resp.error.CopyFrom(error_pb())
        statuses: list[_ProduceStatus] = []
        writable = _topics_allowed(AclOperation.WRITE, [t.name for t in req.topics])
        prepared = await self._prepare(req, payloads, writable, connection)
        verified = await verify_transactional_batches(req, payloads, self._producer_state, self.txn_verify)
        for ti, t in enumerate(req.topics):
            tr = resp.topics.add(name=t.name)
            appended_bytes = appended_records = 0
            for pi, p in enumerate(t.partitions):
                pr = tr.partitions.add(index=p.index)
                try:
                    if t.name not in writable:
                        raise _topic_denied(t.name, AclOperation.WRITE)
                    if (ti, pi) in verified.errors:
                        raise verified.errors[(ti, pi)]
                    part = self._registry.leader_partition(t.name, p.index)
                    info = part.append_records_to_leader(
                        payloads[ti][pi],
                        acks,
                        prepared=prepared.get((ti, pi)),
                        verification_guard=verified.guards.get((ti, pi)),
                    )
                except Exception as exc:
                    self._set_produce_error(pr, exc, t.name, p.index, hinted)
                    continue
                appended_bytes += info.valid_bytes
                appended_records += info.num_records
                pr.error.CopyFrom(error_pb())
                pr.base_offset = info.first_offset
                pr.log_append_time_ms = info.log_append_time_ms
                pr.log_start_offset = info.log_start_offset
                if acks == -1:
                    statuses.append(
                        _ProduceStatus((t.name, p.index), part, info.last_offset + 1, part.leader_epoch, pr)
                    )
            if appended_records:
                self._metrics.record_produce(t.name, appended_bytes, appended_records)
        if statuses:
            op = DelayedProduce(req.timeout_ms, statuses, self._registry)
            if not self._purgatories.produce.try_complete_else_watch(op, [st.tp for st in statuses]):
                await op.future
            for st in statuses:
                if st.error is not None:
                    assert isinstance(st.response, broker_pb2.ProduceResponse.PartitionResponse)
                    self._set_produce_error(st.response, st.error, st.tp[0], st.tp[1], hinted, keep_offsets=True)
        if hinted:
            resp.node_endpoints.extend(self._registry.node_endpoints(hinted))
        return resp

    async def _prepare(
        self,
        req: broker_pb2.ProduceRequest,
        payloads: list[list[bytes]],
        writable: set[str],
        connection: ByteBudget | None,
    ) -> dict[tuple[int, int], storage.PreparedAppend | Exception]:
        """`Log.prepare_append` on the pool for the payloads that should not be checked on the
        loop: compressed ones, those past the request's inline allowance, and those a topic's
        ``compression.type`` may recompress. Keyed by (topic index, partition index); a failure is
        kept as its exception for the append to raise in its turn (after the leader's own checks).
        """
        pool = self._preparation
        if pool is None:
            return {}
        inline_left = pool.inline_max_bytes
        jobs = {}
        for ti, t in enumerate(req.topics):
            if t.name not in writable:
                continue
            for pi, p in enumerate(t.partitions):
                try:
                    part = self._registry.leader_partition(t.name, p.index)
                except Exception:  # not led here (or unknown): the append loop answers its error
                    continue
                log = part.log
                records = payloads[ti][pi]
                size, largest_compressed = payload_shape(records)
                if not largest_compressed and size <= inline_left and log.config.compression_type == "producer":
                    inline_left -= size
                    continue
                # a compressed payload is charged by steps of what it may inflate to (`prepare`)
                jobs[(ti, pi)] = pool.prepare(log, records, size, connection, largest_compressed=largest_compressed)
        if not jobs:
            return {}
        results = await asyncio.gather(*jobs.values(), return_exceptions=True)
        out: dict[tuple[int, int], storage.PreparedAppend | Exception] = {}
        for key, result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancelled: the request is being torn down
            out[key] = result
        return out

    def _set_produce_error(
        self,
        pr: broker_pb2.ProduceResponse.PartitionResponse,
        exc: BaseException | type[kerr.KafkaError],
        topic: str,
        pid: int,
        hinted: set[int],
        *,
        keep_offsets: bool = False,
    ) -> None:
        err = self._registry.error(exc, "produce")
        pr.error.CopyFrom(err)
        # INVALID_RECORD / INVALID_TIMESTAMP from the validator name the refused records (Kafka's
        # RecordErrors); error.message carries Kafka's ErrorMessage
        for rec_err in getattr(exc, "record_errors", ()):
            pr.record_errors.add(batch_index=rec_err.batch_index, message=rec_err.message)
        if not keep_offsets:
            pr.base_offset = -1
            pr.log_append_time_ms = -1
            pr.log_start_offset = -1
        if err.code in LEADER_HINT_CODES:
            hint = self._registry.leader_hint(topic, pid)
            leader, epoch = hint if hint is not None else (-1, -1)
            pr.current_leader.CopyFrom(broker_pb2.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch))
            if leader >= 0:
                hinted.add(leader)

    async def fetch(self, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        """Fetch for consumers (``replica_id`` -1: up to the HW) and followers (up to the LEO);
        see `fetch_results`."""
        return fetch_response(await self.fetch_results(req), self._registry)

    async def fetch_results(self, req: broker_pb2.FetchRequest, *, zero_copy: bool = False) -> list[FetchResult]:
        """Each partition's read of a fetch, in request order (what both listeners answer from).

        Answered at once when ``max_wait_ms`` <= 0, when ``min_bytes`` are readable, or when a
        partition has an error, a diverging epoch or a preferred read replica; otherwise parked in
        the fetch purgatory until new data, a leadership change, or ``max_wait_ms``. The answer is
        read when the request resumes, so it reflects the newest state. A follower fetch updates
        the follower's state (and may advance the HW and expand the ISR) each time it is read.
        ``zero_copy``: reads carry their batches as file regions, which the caller must close
        (`close_regions`).
        """
        names = [t.topic for t in req.topics]
        readable = _topics_allowed(AclOperation.READ, names, replica=req.replica_id >= 0)
        denied = set(names) - readable
        results = self._read_fetch(req, update_fetch_state=True, zero_copy=zero_copy, denied=denied)
        if req.max_wait_ms > 0 and results:
            total = 0
            immediate = False
            for r in results:
                rd = r.read
                if r.error is not None or (rd is not None and (rd.diverging_epoch or rd.preferred_read_replica >= 0)):
                    immediate = True
                    break
                if r.read is not None:
                    total += r.read.num_bytes
            if not immediate and total < req.min_bytes:
                close_regions(results)  # read again when the wait ends: no descriptor held meanwhile
                parts = {(r.topic, r.partition): r.part for r in results if r.part is not None}
                op = DelayedFetch(req.max_wait_ms, req, self._registry, parts)
                if not self._purgatories.fetch.try_complete_else_watch(op, list(parts)):
                    await op.future
                results = self._read_fetch(req, update_fetch_state=True, zero_copy=zero_copy, denied=denied)
        self._count_fetched(results, replica=req.replica_id >= 0)
        return results

    def _count_fetched(self, results: list[FetchResult], *, replica: bool) -> None:
        """Bytes out per topic of the answer actually sent (one counter step per topic)."""
        totals: dict[str, int] = {}
        for r in results:
            if r.read is not None and r.read.num_bytes:
                totals[r.topic] = totals.get(r.topic, 0) + r.read.num_bytes
        for topic, num_bytes in totals.items():
            self._metrics.record_fetch(topic, num_bytes, replica=replica)

    def _read_fetch(
        self,
        req: broker_pb2.FetchRequest,
        *,
        update_fetch_state: bool,
        zero_copy: bool = False,
        denied: set[str] | frozenset[str] = frozenset(),
    ) -> list[FetchResult]:
        """Read each partition of a fetch; the topics in ``denied`` (not authorized) get
        TOPIC_AUTHORIZATION_FAILED without being looked at."""
        is_replica = req.replica_id >= 0
        only_leader = is_replica or not req.fetch_from_follower  # Kafka's FetchParams.fetchOnlyLeader
        select = self._selector if not only_leader else None
        # the request's max_bytes, never above the broker's cap (Kafka's min of the two)
        cap = int(self._config["replica.fetch.response.max.bytes" if is_replica else "fetch.max.bytes"])
        limit = min(req.max_bytes, cap) if req.max_bytes > 0 else cap
        min_one = True
        now_ms = self._clock_ms()
        out: list[FetchResult] = []
        for t in req.topics:
            for p in t.partitions:
                res = FetchResult(t.topic, p.partition)
                out.append(res)
                try:
                    if t.topic in denied:
                        raise _topic_denied(t.topic, AclOperation.READ)
                    part = self._registry.hosted_partition(t.topic, p.partition)
                    if t.topic_id and t.topic_id != part.topic_id:  # Kafka's hasConsistentTopicId
                        raise kerr.InconsistentTopicIdError(
                            f"topic id {t.topic_id} of the fetch is not the id {part.topic_id} of {t.topic}'s log"
                        )
                    res.part = part
                    if select is not None:  # the leader may send the consumer to a follower (KIP-392)
                        res.read = self._registry.preferred_read(part, select, req.rack_id, p, now_ms)
                        if res.read is not None:
                            continue
                    pmax = p.partition_max_bytes if p.partition_max_bytes > 0 else limit
                    res.read = part.fetch_records(
                        fetch_offset=p.fetch_offset,
                        max_bytes=min(pmax, limit),
                        min_one_message=min_one,
                        current_leader_epoch=p.current_leader_epoch,
                        replica_id=req.replica_id,
                        replica_epoch=req.replica_epoch,
                        last_fetched_epoch=p.last_fetched_epoch,
                        follower_log_start_offset=p.log_start_offset,
                        update_fetch_state=update_fetch_state,
                        isolation_level=req.isolation_level,
                        zero_copy=zero_copy,
                        fetch_only_leader=only_leader,
                    )
                except Exception as exc:
                    res.error = exc
                    continue
                n = res.read.num_bytes
                if n:
                    limit = max(0, limit - n)
                    min_one = False
        return out

    def list_offsets(self, req: broker_pb2.ListOffsetsRequest) -> broker_pb2.ListOffsetsResponse:
        """ListOffsets: earliest (-2), latest (-1: the HW for consumers, the LEO for replicas),
        max timestamp (-3), or the first offset with a timestamp >= the one given. Not found:
        offset and timestamp -1. Served by the leader (a ``replica_id`` of -2, Kafka's debug id,
        may read a follower)."""
        R = broker_pb2.ListOffsetsResponse
        resp = R()
        is_consumer = req.replica_id < 0
        require_leader = req.replica_id != -2
        describable = _topics_allowed(AclOperation.DESCRIBE, [t.name for t in req.topics])
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                pr = tr.partitions.add(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
                try:
                    if t.name not in describable:
                        raise _topic_denied(t.name, AclOperation.DESCRIBE)
                    part = self._registry.hosted_partition(t.name, p.partition_index)
                    found = part.fetch_offset_for_timestamp(
                        p.timestamp,
                        current_leader_epoch=p.current_leader_epoch,
                        is_consumer=is_consumer,
                        require_leader=require_leader,
                        isolation_level=req.isolation_level,
                    )
                except Exception as exc:
                    pr.error.CopyFrom(self._registry.error(exc, "list_offsets"))
                    continue
                pr.error.CopyFrom(error_pb())
                if found is not None:
                    pr.timestamp = found.timestamp
                    pr.offset = found.offset
                    pr.leader_epoch = found.leader_epoch
        return resp

    def offset_for_leader_epoch(
        self, req: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        """OffsetForLeaderEpoch: the largest epoch <= the one asked and its end offset, from the
        leader's epoch cache (followers use it to truncate, consumers to validate positions)."""
        R = broker_pb2.OffsetForLeaderEpochResponse
        resp = R()
        require_leader = req.replica_id != -2
        allowed = _topics_allowed(AclOperation.DESCRIBE, [t.topic for t in req.topics], replica=req.replica_id >= 0)
        for t in req.topics:
            tr = resp.topics.add(topic=t.topic)
            for p in t.partitions:
                pr = tr.partitions.add(partition=p.partition, leader_epoch=-1, end_offset=-1)
                try:
                    if t.topic not in allowed:
                        raise _topic_denied(t.topic, AclOperation.DESCRIBE)
                    part = self._registry.hosted_partition(t.topic, p.partition)
                    epoch, end = part.last_offset_for_leader_epoch(
                        p.current_leader_epoch, p.leader_epoch, require_leader=require_leader
                    )
                except Exception as exc:
                    pr.error.CopyFrom(self._registry.error(exc, "offset_for_leader_epoch"))
                    continue
                pr.error.CopyFrom(error_pb())
                pr.leader_epoch = epoch
                pr.end_offset = end
        return resp

    async def append_internal(
        self, topic: str, partition: int, records: bytes, timeout_ms: int
    ) -> type[kerr.KafkaError] | None:
        """A coordinator's write to its internal partition (origin coordinator: no producer
        sequence checks), acks=all: None once replicated, else the error."""
        try:
            part = self._registry.leader_partition(topic, partition)
            info = part.append_records_to_leader(records, -1, storage.AppendOrigin.COORDINATOR)
        except kerr.KafkaError as exc:
            return type(exc)
        answer = broker_pb2.ProduceResponse.PartitionResponse(index=partition)
        status = _ProduceStatus((topic, partition), part, info.last_offset + 1, part.leader_epoch, answer)
        op = DelayedProduce(timeout_ms, [status], self._registry)
        if not self._purgatories.produce.try_complete_else_watch(op, [status.tp]):
            await op.future
        return status.error

    def _producer_state(self, topic: str, index: int) -> storage.ProducerStateManager | None:
        part = self._registry.partitions.get((topic, index))
        return part.log.producer_state if part is not None and part.is_leader else None

    async def write_txn_markers(self, req: broker_pb2.WriteTxnMarkersRequest) -> broker_pb2.WriteTxnMarkersResponse:
        """WriteTxnMarkers: each partition's leader appends the COMMIT or ABORT marker (a control
        batch, origin coordinator: fenced producer or coordinator epochs are refused) and answers
        once it is replicated to the ISR (acks=all, up to ``timeout_ms``)."""
        current_request().require_cluster(AclOperation.CLUSTER_ACTION)
        R = broker_pb2.WriteTxnMarkersResponse
        resp = R()
        statuses: list[_ProduceStatus] = []
        now = self._clock_ms()
        for m in req.markers:
            kind = storage.ControlRecordType.COMMIT if m.transaction_result else storage.ControlRecordType.ABORT
            batch = storage.build_control_batch(
                kind,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                coordinator_epoch=m.coordinator_epoch,
                timestamp_ms=now,
            )
            mr = resp.markers.add(producer_id=m.producer_id)
            for t in m.topics:
                tr = mr.topics.add(name=t.name)
                for index in t.partition_indexes:
                    pr = tr.partitions.add(partition_index=index)
                    try:
                        part = self._registry.leader_partition(t.name, index)
                        info = part.append_records_to_leader(
                            batch, -1, storage.AppendOrigin.COORDINATOR, transaction_version=m.transaction_version
                        )
                    except Exception as exc:
                        pr.error.CopyFrom(self._registry.error(exc, "write_txn_markers"))
                        continue
                    pr.error.CopyFrom(error_pb())
                    statuses.append(_ProduceStatus((t.name, index), part, info.last_offset + 1, part.leader_epoch, pr))
        if statuses:
            op = DelayedProduce(req.timeout_ms or 30_000, statuses, self._registry)
            if not self._purgatories.produce.try_complete_else_watch(op, [st.tp for st in statuses]):
                await op.future
            for st in statuses:
                if st.error is not None:
                    st.response.error.CopyFrom(self._registry.error(st.error, "write_txn_markers"))
        # a marker in a coordinator's partition (TxnOffsetCommit's offsets) tells that coordinator
        for m in req.markers:
            for t in m.topics:
                for index in t.partition_indexes:
                    if any(st.tp == (t.name, index) and st.error is None for st in statuses):
                        for listener in self._marker_listeners:
                            listener(t.name, index, m.producer_id, m.transaction_result)
        return resp

    def describe_producers(self, req: broker_pb2.DescribeProducersRequest) -> broker_pb2.DescribeProducersResponse:
        """DescribeProducers: the producers each partition's leader knows (its producer state)."""
        R = broker_pb2.DescribeProducersResponse
        resp = R()
        readable = _topics_allowed(AclOperation.READ, [t.name for t in req.topics])
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for index in t.partition_indexes:
                pr = tr.partitions.add(partition_index=index)
                try:
                    if t.name not in readable:
                        raise _topic_denied(t.name, AclOperation.READ)
                    part = self._registry.leader_partition(t.name, index)
                    producers = part.log.active_producers()
                except Exception as exc:
                    pr.error.CopyFrom(self._registry.error(exc, "describe_producers"))
                    continue
                pr.error.CopyFrom(error_pb())
                for e in producers:
                    pr.active_producers.add(
                        producer_id=e.producer_id,
                        producer_epoch=e.producer_epoch,
                        last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp,
                        coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_first_offset,
                    )
        return resp

    async def delete_records(self, req: broker_pb2.DeleteRecordsRequest) -> broker_pb2.DeleteRecordsResponse:
        """DeleteRecords: the leader moves its log start offset to the requested offset (-1: the HW;
        past the HW: OFFSET_OUT_OF_RANGE), then the request waits (up to ``timeout_ms``) until the
        low watermark — the smallest log start offset over the leader and the ISR followers that
        reported one in their fetches — reaches it. Followers move their own log start when the
        leader's fetch answers carry it."""
        R = broker_pb2.DeleteRecordsResponse
        resp = R()
        statuses: list[_DeleteStatus] = []
        deletable = _topics_allowed(AclOperation.DELETE, [t.name for t in req.topics])
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                pr = tr.partitions.add(partition_index=p.partition_index, low_watermark=-1)
                try:
                    if t.name not in deletable:
                        raise _topic_denied(t.name, AclOperation.DELETE)
                    part = self._registry.leader_partition(t.name, p.partition_index)
                    target = part.high_watermark if p.offset == -1 else p.offset
                    pr.low_watermark = part.delete_records_on_leader(p.offset)
                except Exception as exc:
                    pr.error.CopyFrom(self._registry.error(exc, "delete_records"))
                    continue
                pr.error.CopyFrom(error_pb())
                statuses.append(_DeleteStatus((t.name, p.partition_index), part, target, pr))
                # long polls below the new log start answer OFFSET_OUT_OF_RANGE now
                self._purgatories.fetch.check_and_complete((t.name, p.partition_index))
        if statuses:
            op = DelayedDeleteRecords(req.timeout_ms, statuses, self._registry)
            if not self._purgatories.delete_records.try_complete_else_watch(op, [st.tp for st in statuses]):
                await op.future
            for st in statuses:
                if st.error is not None:
                    st.response.error.CopyFrom(self._registry.error(st.error, "delete_records"))
        return resp
