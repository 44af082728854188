"""The consumer's offset RPCs: ListOffsets (position resets, ``offsets_for_times``) and
OffsetForLeaderEpoch (KIP-320 position validation after a leader change, see `_positions`).

Both go to each partition's leader as the metadata names it; retriable errors and unreachable
leaders refresh the metadata. ListOffsets retries until its deadline (callers wait for an answer);
validation makes one round per `Consumer.poll` and backs a failing partition off, so a poll never
blocks on a leader that is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

import grpc
import structlog

from kraftlog.client._channels import ChannelPool, grpc_error
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.consumer._positions import (
    LogTruncationError,
    PartitionState,
    judge_validation,
    needs_validation,
    validation_request,
)
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

__all__ = ["OffsetLookups"]

_log = structlog.get_logger(__name__)


class OffsetLookups:
    """ListOffsets and OffsetForLeaderEpoch for one consumer (its metadata, channels, timeouts)."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        pool: ChannelPool,
        *,
        isolation_level: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        default_api_timeout_ms: int,
    ) -> None:
        self._metadata = metadata
        self._pool = pool
        self.isolation_level = isolation_level
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.default_api_timeout_ms = default_api_timeout_ms

    def _timeout_ms(self, timeout_ms: int | None) -> int:
        return self.default_api_timeout_ms if timeout_ms is None else timeout_ms

    def _back_off(self, assignment: Mapping[TopicPartition, PartitionState], tps: Iterable[TopicPartition]) -> None:
        until = time.monotonic() + self.retry_backoff_ms / 1000.0
        for tp in tps:
            state = assignment.get(tp)
            if state is not None:
                state.backoff_until = until

    def list_offsets(
        self, query: Mapping[TopicPartition, int], timeout_ms: int | None, *, deadline: float | None = None
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """ListOffsets for every partition at its leader, retrying retriable errors until the
        deadline; returns ``{tp: (offset, timestamp, leader_epoch)}``."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout_ms(timeout_ms) / 1000.0
        self._metadata.add_topics({tp.topic for tp in query})
        remaining = dict(query)
        results: dict[TopicPartition, tuple[int, int, int]] = {}
        last_error: kerr.KafkaError | None = None
        refresh = False

        def timed_out_error() -> kerr.RequestTimedOutError:
            return kerr.RequestTimedOutError(
                f"Failed to get offsets by times in {self._timeout_ms(timeout_ms)} ms"
                + (f" (last error: {last_error.error_name}: {last_error})" if last_error else "")
            )

        def one_round(_timeout_s: float) -> Outcome:
            """Ask every leader for its partitions still missing; retriable errors retry the rest."""
            nonlocal last_error, refresh
            if refresh or any(self._metadata.leader_for(tp) is None for tp in remaining):
                refresh = False
                budget_ms = max(1, int((deadline - time.monotonic()) * 1000))
                try:
                    self._metadata.update(timeout_ms=budget_ms)
                except kerr.RequestTimedOutError as err:
                    # A refresh cut short by this lookup's own deadline says nothing new: keep the
                    # error an earlier, complete answer gave (UNKNOWN_TOPIC_OR_PARTITION, ...).
                    if last_error is None or budget_ms >= self.request_timeout_ms:
                        last_error = err
                    return Retry("metadata refresh timed out", error=timed_out_error())
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in remaining:
                leader = self._metadata.leader_for(tp)
                if leader is not None:
                    by_node.setdefault(leader.node_id, []).append(tp)
                elif tp.partition not in (self._metadata.partitions_for_topic(tp.topic) or []):
                    last_error = kerr.UnknownTopicOrPartitionError(f"partition {tp} does not exist")
                else:
                    last_error = kerr.LeaderNotAvailableError(f"partition {tp} has no leader")
            futures = []
            for node_id, tps in by_node.items():
                broker = self._metadata.broker(node_id)
                if broker is None:
                    continue
                topics: dict[str, list[broker_pb2.ListOffsetsRequest.Partition]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        broker_pb2.ListOffsetsRequest.Partition(
                            partition_index=tp.partition,
                            current_leader_epoch=self._metadata.leader_epoch(tp),
                            timestamp=remaining[tp],
                        )
                    )
                request = broker_pb2.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=self.isolation_level,
                    topics=[broker_pb2.ListOffsetsRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()],
                )
                timeout = max(0.001, min(deadline - time.monotonic(), self.request_timeout_ms / 1000.0))
                call = self._pool.stub(broker.address).ListOffsets.future(request, timeout=timeout)
                futures.append((node_id, call, timeout < self.request_timeout_ms / 1000.0))
            for node_id, future, cut_short in futures:
                try:
                    response = future.result()
                except grpc.RpcError as err:
                    if not (cut_short and last_error is not None and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED):
                        last_error = grpc_error(err, f"ListOffsets to broker {node_id}")
                    refresh = True
                    continue
                for topic in response.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, p.partition_index)
                        if tp not in remaining:
                            continue
                        code = p.error.code
                        if code == 0:
                            results[tp] = (p.offset, p.timestamp, p.leader_epoch)
                            del remaining[tp]
                            continue
                        error = kerr.error_for_code(code)(p.error.message or f"{p.error.name or code} for {tp}")
                        last_error = error
                        if not error.retriable:
                            raise error
                        if isinstance(error, kerr.InvalidMetadataError) or code in (
                            kerr.UnknownLeaderEpochError.error_code,
                            kerr.FencedLeaderEpochError.error_code,
                        ):
                            refresh = True
            return Done(results) if not remaining else Retry("offsets missing", error=timed_out_error())

        if not remaining:
            return results
        if time.monotonic() >= deadline:
            raise timed_out_error()
        policy = RetryPolicy(backoff_ms=self.retry_backoff_ms, backoff_max_ms=1000)
        offsets: dict[TopicPartition, tuple[int, int, int]] = retry_until(
            one_round, timeout_s=deadline - time.monotonic(), policy=policy, what="ListOffsets"
        )
        return offsets

    def validate(
        self,
        assignment: Mapping[TopicPartition, PartitionState],
        deadline: float,
        reset: int | None,
        drop_buffered: Callable[[TopicPartition], None],
    ) -> None:
        """KIP-320: positions read under an older leader epoch are checked with the current leader
        (OffsetForLeaderEpoch of the position's epoch) before fetching goes on; see `_positions`.

        One round per call: transport and retriable errors refresh metadata and back the
        partition off (the next `poll` tries again); a truncation with ``auto_offset_reset`` none
        raises `LogTruncationError` for every partition found truncated.
        """
        now = time.monotonic()
        todo: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        for tp, state in assignment.items():
            current = self._metadata.leader_epoch(tp)
            if not state.awaiting_validation:
                if needs_validation(state, current):
                    state.awaiting_validation = True
                    _log.debug(
                        "consumer_validating_position",
                        tp=str(tp),
                        position=state.position,
                        offset_epoch=state.offset_epoch,
                        leader_epoch=current,
                    )
                elif state.position is not None and current >= 0:
                    state.leader_epoch = current
            if not state.awaiting_validation or state.backoff_until > now:
                continue
            leader = self._metadata.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            assert state.offset_epoch is not None
            todo.setdefault(leader.node_id, {})[tp] = (current, state.offset_epoch)
        truncated: dict[TopicPartition, int] = {}
        divergent: dict[TopicPartition, int] = {}
        futures = []
        for node_id, items in todo.items():
            broker = self._metadata.broker(node_id)
            if broker is None:
                continue
            timeout = max(0.001, min(deadline - now, self.request_timeout_ms / 1000.0))
            request = validation_request(items)
            positions = {tp: assignment[tp].position for tp in items}
            futures.append(
                (
                    node_id,
                    items,
                    positions,
                    self._pool.stub(broker.address).OffsetForLeaderEpoch.future(request, timeout=timeout),
                )
            )
        for node_id, items, positions, future in futures:
            try:
                response = future.result()
            except grpc.RpcError as err:
                _log.debug("offset_for_leader_epoch_failed", node=node_id, error=str(grpc_error(err, "")))
                self._metadata.request_update()
                self._back_off(assignment, items)
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    answered_state = assignment.get(tp)
                    if (
                        tp not in items
                        or answered_state is None
                        or not answered_state.awaiting_validation
                        or answered_state.position != positions[tp]
                    ):
                        continue  # moved (seek, unassign) while the request was out
                    if p.error.code:
                        error = kerr.error_for_code(p.error.code)(p.error.message or None)
                        if not error.retriable:
                            raise error
                        self._metadata.request_update()
                        self._back_off(assignment, [tp])
                        continue
                    self._complete_validation(
                        tp,
                        answered_state,
                        items[tp][0],
                        p.leader_epoch,
                        p.end_offset,
                        truncated,
                        divergent,
                        reset,
                        drop_buffered,
                    )
        if truncated:
            raise LogTruncationError(
                "Truncation detected for partitions "
                + ", ".join(
                    f"{tp} at offset {off}"
                    + (f" (the leader's log diverges from offset {divergent[tp]})" if tp in divergent else "")
                    for tp, off in truncated.items()
                ),
                partitions=truncated,
                divergent_offsets=divergent,
            )

    def _complete_validation(
        self,
        tp: TopicPartition,
        state: PartitionState,
        leader_epoch: int,
        answer_epoch: int,
        answer_end: int,
        truncated: dict[TopicPartition, int],
        divergent: dict[TopicPartition, int],
        reset: int | None,
        drop_buffered: Callable[[TopicPartition], None],
    ) -> None:
        assert state.position is not None
        verdict = judge_validation(state.position, answer_epoch, answer_end)
        if verdict.valid:
            state.awaiting_validation = False
            state.leader_epoch = leader_epoch
            return
        _log.warning(
            "consumer_log_truncation_detected",
            tp=str(tp),
            position=state.position,
            offset_epoch=state.offset_epoch,
            divergent_offset=verdict.divergent_offset,
            reset=reset,
        )
        if reset is None:
            truncated[tp] = state.position
            if verdict.divergent_offset is not None:
                divergent[tp] = verdict.divergent_offset
            return  # still awaiting validation: raised again until the application seeks
        drop_buffered(tp)
        if verdict.divergent_offset is None:
            state.seek(None, reset=reset)
        else:
            state.seek(verdict.divergent_offset, epoch=verdict.divergent_epoch)
            state.leader_epoch = leader_epoch
