"""The consumer's fetching, as Kafka's Fetcher: one Fetch in flight per leader broker for the
partitions it leads, responses turned into buffered records, position errors and leader moves
(a mixin of `kraftlog.client.Consumer`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from kraftlog.client._channels import ChannelPool, grpc_error
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.consumer._fetched import CompletedFetch, decode_partition
from kraftlog.client.consumer._positions import PartitionState
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

_log = structlog.get_logger("kraftlog.client.consumer._consumer")  # one logger name for the consumer's lines


class _ConsumerFetches:
    """Fetch requests and responses; state lives on the Consumer."""

    # Consumer's fields and methods this part uses (set in Consumer.__init__).
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    isolation_level: int
    auto_offset_reset: str
    check_crcs: bool
    request_timeout_ms: int
    retry_backoff_ms: int
    client_rack: str
    _key_deserializer: Callable[[bytes | None], Any] | None
    _value_deserializer: Callable[[bytes | None], Any] | None
    _pool: ChannelPool
    _cond: threading.Condition
    _metadata: ClusterMetadata
    _assignment: dict[TopicPartition, PartitionState]
    _buffer: deque[CompletedFetch]
    _in_flight: dict[int, Any]  # node id -> grpc future of its Fetch
    _responses: deque[tuple[int, dict[TopicPartition, int], Any]]
    _closed: bool

    if TYPE_CHECKING:

        def _default_reset(self) -> int | None: ...

    def _fetchable(self, now: float) -> dict[int, list[TopicPartition]]:
        buffered = {c.tp for c in self._buffer}
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, state in self._assignment.items():
            if not state.fetchable or state.fetching or tp in buffered or state.backoff_until > now:
                continue
            leader = self._metadata.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            by_node.setdefault(leader.node_id, []).append(tp)
        return by_node

    def _send_fetches(self) -> None:
        self._metadata.maybe_update()
        for node_id, tps in self._fetchable(time.monotonic()).items():
            if node_id in self._in_flight:
                continue
            broker = self._metadata.broker(node_id)
            if broker is None:
                continue
            topics: dict[str, list[broker_pb2.FetchRequest.FetchPartition]] = {}
            offsets: dict[TopicPartition, int] = {}
            for tp in tps:
                state = self._assignment[tp]
                assert state.position is not None
                offsets[tp] = state.position
                state.fetching = True
                topics.setdefault(tp.topic, []).append(
                    broker_pb2.FetchRequest.FetchPartition(
                        partition=tp.partition,
                        current_leader_epoch=self._metadata.leader_epoch(tp),
                        fetch_offset=state.position,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=self.max_partition_fetch_bytes,
                    )
                )
            request = broker_pb2.FetchRequest(
                replica_id=-1,
                replica_epoch=-1,
                max_wait_ms=self.fetch_max_wait_ms,
                min_bytes=self.fetch_min_bytes,
                max_bytes=self.fetch_max_bytes,
                isolation_level=self.isolation_level,
                rack_id=self.client_rack,
                topics=[broker_pb2.FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            )
            timeout = (self.fetch_max_wait_ms + self.request_timeout_ms) / 1000.0
            try:
                future = self._pool.stub(broker.address).Fetch.future(request, timeout=timeout)
            except Exception as err:
                for tp in offsets:
                    self._assignment[tp].fetching = False
                _log.debug("fetch_send_failed", node=node_id, error=str(err))
                continue
            self._in_flight[node_id] = future

            def done(f: Any, node_id: int = node_id, offsets: dict[TopicPartition, int] = offsets) -> None:
                with self._cond:
                    self._responses.append((node_id, offsets, f))
                    self._cond.notify_all()

            future.add_done_callback(done)

    def _process_responses(self) -> None:
        with self._cond:
            responses = list(self._responses)
            self._responses.clear()
        errors: list[kerr.KafkaError] = []
        for node_id, offsets, future in responses:
            self._in_flight.pop(node_id, None)
            for tp in offsets:
                state = self._assignment.get(tp)
                if state is not None:
                    state.fetching = False
            try:
                response = future.result()
            except (grpc.RpcError, grpc.FutureCancelledError) as err:
                if self._closed:
                    continue
                error = (
                    grpc_error(err, f"Fetch from broker {node_id}")
                    if isinstance(err, grpc.RpcError)
                    else kerr.NetworkError("fetch cancelled")
                )
                _log.debug("fetch_failed", node=node_id, error=str(error))
                self._metadata.request_update()
                self._back_off(offsets)
                continue
            if response.error.code:
                error = kerr.error_for_code(response.error.code)(response.error.message or None)
                if not error.retriable:
                    errors.append(error)
                self._back_off(offsets)
                continue
            for topic in response.responses:
                for data in topic.partitions:
                    tp = TopicPartition(topic.topic, data.partition_index)
                    if tp not in offsets:
                        continue
                    try:
                        self._handle_partition(tp, offsets[tp], data, response.node_endpoints)
                    except kerr.KafkaError as err:
                        errors.append(err)
        if errors:
            raise errors[0]

    def _back_off(self, tps: Iterable[TopicPartition]) -> None:
        until = time.monotonic() + self.retry_backoff_ms / 1000.0
        for tp in tps:
            state = self._assignment.get(tp)
            if state is not None:
                state.backoff_until = until

    def _handle_partition(self, tp: TopicPartition, fetch_offset: int, data: Any, endpoints: Any) -> None:
        state = self._assignment.get(tp)
        if state is None or state.position != fetch_offset:
            return  # unassigned or moved by a seek since the fetch went out
        code = data.error.code
        if code == 0:
            state.high_watermark = data.high_watermark
            state.last_stable_offset = data.last_stable_offset
            state.log_start_offset = data.log_start_offset
            if data.records:
                completed = decode_partition(
                    tp,
                    fetch_offset,
                    data,
                    check_crcs=self.check_crcs,
                    read_committed=self.isolation_level == 1,
                    max_partition_fetch_bytes=self.max_partition_fetch_bytes,
                    key_deserializer=self._key_deserializer,
                    value_deserializer=self._value_deserializer,
                )
                if completed is not None:
                    self._buffer.append(completed)
            return
        error_cls = kerr.error_for_code(code)
        if code == kerr.OffsetOutOfRangeError.error_code:
            reset = self._default_reset()
            if reset is None:
                raise kerr.OffsetOutOfRangeError(
                    f"Fetch position FetchPosition{{offset={fetch_offset}}} is out of range for partition {tp}",
                    partitions={tp: fetch_offset},
                )
            _log.info("consumer_offset_out_of_range", tp=str(tp), offset=fetch_offset, reset=self.auto_offset_reset)
            state.seek(None, reset=reset)
            return
        if issubclass(error_cls, kerr.InvalidMetadataError) or code in (
            kerr.FencedLeaderEpochError.error_code,
            kerr.UnknownLeaderEpochError.error_code,
        ):
            hint = data.current_leader if data.HasField("current_leader") else None
            moved = hint is not None and self._metadata.apply_leader_hint(
                tp, hint.leader_id, hint.leader_epoch, endpoints
            )
            if not moved:
                self._metadata.request_update()
                state.backoff_until = time.monotonic() + self.retry_backoff_ms / 1000.0
            _log.debug("fetch_partition_error", tp=str(tp), error=error_cls.error_name, moved=moved)
            return
        if code == kerr.CorruptMessageError.error_code:
            # retriable in Kafka's table, but a refetch gets the same bytes: raise at the offset, as
            # Kafka's FetchCollector does; the position stays, so the caller may seek past it
            raise kerr.CorruptMessageError(
                f"Encountered corrupt message when fetching offset {fetch_offset} for topic-partition "
                f"{tp.topic}-{tp.partition}: {data.error.message}",
                topic_partition=tp,
                offset=fetch_offset,
            )
        if error_cls.retriable:
            state.backoff_until = time.monotonic() + self.retry_backoff_ms / 1000.0
            return
        raise error_cls(data.error.message or f"{error_cls.error_name} fetching {tp} at offset {fetch_offset}")
