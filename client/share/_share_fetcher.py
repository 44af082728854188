"""A share consumer's requests to partition leaders (KIP-932's ``ShareConsumeRequestManager``):
one share session per broker, ShareFetch with the acknowledgements piggybacked, ShareAcknowledge
for commits, and the answers decoded into records with their delivery counts.

Session rules (the broker's `ShareSessionCache`): the first request to a broker opens a session
(epoch 0) and may carry no acknowledgements; each later one carries the next epoch (wrapping from
2**31-1 to 1); -1 closes it (the broker releases what the member still holds there). Requests to
one broker go one at a time, in epoch order: an asynchronous commit's answer is awaited before the
next request to its broker. A session the broker no longer knows (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH) or a request lost on the way starts a new session; the
acknowledgements of such a request are sent again with the next one (a record's lock belongs to
the member, not to the session). Acknowledgements for a broker without a session open an empty
one first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc
import structlog

from kraftlog.client._channels import ChannelPool, grpc_error
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.share._acknowledgements import AcknowledgeType, ack_ranges
from kraftlog.common import errors as kerr
from kraftlog.common.records import iter_batches
from kraftlog.proto import share_pb2

__all__ = ["ShareConsumerRecord", "ShareFetcher", "AckResults", "FetchResult", "FetchSettings", "decode_acquired"]

_log = structlog.get_logger(__name__)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_SESSION_ERRORS = {kerr.ShareSessionNotFoundError.error_code, kerr.InvalidShareSessionEpochError.error_code}
Deserializer = Callable[[bytes | None], Any] | None
#: (node id, partition) -> offset -> type
Acks = Mapping[tuple[int, TopicPartition], Mapping[int, AcknowledgeType]]
#: partition -> the error of its acknowledgements (None: applied)
AckResults = dict[TopicPartition, kerr.KafkaError | None]


class ShareConsumerRecord(NamedTuple):
    """A record of a share group, with how many times it was delivered (this time included)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    timestamp_type: int = 0
    leader_epoch: int = -1
    delivery_count: int = 1


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def decode_acquired(
    tp: TopicPartition,
    data: bytes,
    acquired: Iterable[tuple[int, int, int]],
    *,
    check_crcs: bool = True,
    key_deserializer: Deserializer = None,
    value_deserializer: Deserializer = None,
) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records of ``data`` (whole batches) whose offsets the member acquired (``(first, last,
    delivery count)`` ranges), in offset order, and the acquired offsets without such a record
    (control records, compacted away): those are acknowledged as GAP."""
    counts: dict[int, int] = {}
    for first, last, count in acquired:
        for offset in range(first, last + 1):
            counts[offset] = count
    records: list[ShareConsumerRecord] = []
    seen: set[int] = set()
    if counts and data:
        first_acquired = min(counts)
        for _pos, batch in iter_batches(data, strict=True):
            if batch.last_offset < first_acquired or batch.is_control:
                continue
            if check_crcs:
                batch.ensure_valid()
            for r in batch.records():
                delivery_count = counts.get(r.offset)
                if delivery_count is None or r.offset in seen:
                    continue
                seen.add(r.offset)
                records.append(
                    ShareConsumerRecord(
                        tp.topic,
                        tp.partition,
                        r.offset,
                        r.timestamp_ms,
                        key_deserializer(r.key) if key_deserializer else r.key,
                        value_deserializer(r.value) if value_deserializer else r.value,
                        list(r.headers),
                        int(batch.timestamp_type),
                        batch.partition_leader_epoch,
                        delivery_count,
                    )
                )
    records.sort(key=lambda rec: rec.offset)
    return records, sorted(set(counts) - seen)


def _topics(
    partitions: Iterable[tuple[str, int]], acks: Mapping[tuple[str, int], Mapping[int, AcknowledgeType]]
) -> list[Any]:
    """The request's topics: ``partitions`` (topic id, partition) and those with acknowledgements."""
    by_topic: dict[str, dict[int, list[Any]]] = {}
    for topic_id, partition in partitions:
        by_topic.setdefault(topic_id, {}).setdefault(partition, [])
    for (topic_id, partition), offsets in acks.items():
        batches = by_topic.setdefault(topic_id, {}).setdefault(partition, [])
        for first, last, kind in ack_ranges(offsets):
            batches.append(
                share_pb2.ShareAcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[int(kind)])
            )
    return [
        share_pb2.ShareFetchTopic(
            topic_id=topic_id,
            partitions=[
                share_pb2.ShareFetchTopic.Partition(partition=p, acknowledgement_batches=b) for p, b in parts.items()
            ],
        )
        for topic_id, parts in by_topic.items()
    ]


@dataclass
class FetchResult:
    """What one round of ShareFetch brought: the records acquired, their offsets and the GAP
    offsets per (node, partition), and the acks not sent (a session being opened carries none:
    they go with the next request)."""

    records: list[ShareConsumerRecord]
    delivered: dict[tuple[int, TopicPartition], list[int]]
    gaps: dict[tuple[int, TopicPartition], list[int]]
    unsent: Acks


@dataclass
class _Session:
    address: str
    epoch: int = INITIAL_EPOCH  # the epoch the next request carries
    partitions: set[tuple[str, int]] = field(default_factory=set)  # (topic id, partition) the broker has
    in_flight: Any = None  # the future of an asynchronous commit, with its acks: (future, acks)


@dataclass
class FetchSettings:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    record_limit: bool = False  # share.acquire.mode=record_limit (KIP-1206)
    request_timeout_ms: int = 30_000
    check_crcs: bool = True


class ShareFetcher:
    """The member's sessions with partition leaders (see the module docstring). Used from the poll
    thread only."""

    def __init__(
        self,
        group_id: str,
        member_id: str,
        pool: ChannelPool,
        metadata: ClusterMetadata,
        settings: FetchSettings,
        *,
        key_deserializer: Deserializer = None,
        value_deserializer: Deserializer = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self._pool = pool
        self._metadata = metadata
        self.settings = settings
        self._kd = key_deserializer
        self._vd = value_deserializer
        self._sessions: dict[int, _Session] = {}
        #: the group's acquisition lock duration, as the last ShareFetch answer said (None: none yet)
        self.lock_timeout_ms: int | None = None

    # ================================================================== requests

    def _session(self, node_id: int) -> _Session | None:
        session = self._sessions.get(node_id)
        broker = self._metadata.broker(node_id)
        if broker is None:
            return session
        if session is None or session.address != broker.address:
            session = self._sessions[node_id] = _Session(broker.address)
        return session

    def _ids(self, acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]]) -> dict[tuple[str, int], Any]:
        out: dict[tuple[str, int], Any] = {}
        for tp, offsets in acks.items():
            topic_id = self._metadata.topic_id(tp.topic)
            if topic_id is not None and offsets:
                out[(topic_id, tp.partition)] = offsets
        return out

    def leaders(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The assigned partitions by their leader's node id (those without a known leader wait
        for a metadata refresh)."""
        out: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            leader = self._metadata.leader_for(tp)
            if leader is None or self._metadata.topic_id(tp.topic) is None:
                self._metadata.request_update()
                continue
            out.setdefault(leader.node_id, []).append(tp)
        return out

    def settle(self, node_id: int, results: AckResults) -> None:
        """Wait for broker ``node_id``'s asynchronous commit, if one is on its way; its results
        join ``results``."""
        session = self._sessions.get(node_id)
        if session is None or session.in_flight is None:
            return
        future, acks = session.in_flight
        session.in_flight = None
        self._acknowledged(node_id, session, future, acks, results)

    def settle_all(self, results: AckResults) -> None:
        for node_id in list(self._sessions):
            self.settle(node_id, results)

    def fetch(
        self,
        wanted: Mapping[int, list[TopicPartition]],
        acks: Acks,
        max_wait_ms: int,
        results: AckResults,
        *,
        renew_only: bool = False,
    ) -> FetchResult:
        """One ShareFetch to every broker in ``wanted`` (node -> partitions) or with ``acks``, in
        parallel (see `FetchResult`)."""
        nodes = set(wanted) | {node for node, _tp in acks}
        futures: list[tuple[int, _Session, Any, dict[tuple[int, TopicPartition], Any], Any]] = []
        unsent: dict[tuple[int, TopicPartition], Mapping[int, AcknowledgeType]] = {}
        for node_id in nodes:
            self.settle(node_id, results)
            session = self._session(node_id)
            node_acks = {k: v for k, v in acks.items() if k[0] == node_id}
            if session is None:
                unsent.update(node_acks)
                continue
            ids = {(self._metadata.topic_id(tp.topic), tp.partition) for tp in wanted.get(node_id, [])}
            want = {(t, p) for t, p in ids if t is not None}
            if session.epoch == INITIAL_EPOCH:
                unsent.update(node_acks)
                node_acks = {}
            acks_by_id = self._ids({tp: offs for (_n, tp), offs in node_acks.items()})
            forgotten: dict[str, list[int]] = {}
            # a partition named only for its acks must not join the session's fetches
            for topic_id, partition in (session.partitions | set(acks_by_id)) - want:
                forgotten.setdefault(topic_id, []).append(partition)
            request = share_pb2.ShareFetchRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                share_session_epoch=session.epoch,
                max_wait_ms=max_wait_ms if want and not renew_only else 0,
                min_bytes=self.settings.min_bytes,
                max_bytes=self.settings.max_bytes,
                max_records=self.settings.max_records,
                share_acquire_mode=1 if self.settings.record_limit else 0,
                is_renew_ack=renew_only,
                topics=_topics(want - session.partitions, acks_by_id),
                forgotten_topics=[
                    share_pb2.ShareFetchRequest.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in forgotten.items()
                ],
            )
            timeout_s = (max_wait_ms + self.settings.request_timeout_ms) / 1000.0
            future = self._pool.share_stub(session.address).ShareFetch.future(request, timeout=timeout_s)
            futures.append((node_id, session, future, node_acks, want))
        out = FetchResult([], {}, {}, unsent)
        for node_id, session, future, node_acks, want in futures:
            response = self._answer(node_id, session, future, node_acks, results)
            if response is None:
                continue
            session.partitions = set(want)
            for topic in response.topics:
                name = self._metadata.topic_name(topic.topic_id)
                for p in topic.partitions:
                    if name is None:
                        continue
                    tp = TopicPartition(name, p.partition)
                    self._partition_errors(node_id, tp, p, results)
                    if not p.acquired_records:
                        continue
                    got, missing = decode_acquired(
                        tp,
                        p.records,
                        [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                        check_crcs=self.settings.check_crcs,
                        key_deserializer=self._kd,
                        value_deserializer=self._vd,
                    )
                    out.records.extend(got)
                    if got:
                        out.delivered[(node_id, tp)] = [r.offset for r in got]
                    if missing:
                        out.gaps[(node_id, tp)] = missing
        return out

    def _answer(self, node_id: int, session: _Session, future: Any, acks: Acks, results: AckResults) -> Any | None:
        """The answer of a request to ``node_id`` once the session took it, or None (the session
        starts again; acks the broker did not take are handed back in ``results``' terms)."""
        try:
            response = future.result()
        except grpc.RpcError as err:
            error = grpc_error(err, f"ShareFetch to broker {node_id}")
            _log.debug("share_fetch_failed", node=node_id, error=str(error))
            self._metadata.request_update()
            self._restart(session)
            for _n, tp in acks:
                results[tp] = error
            return None
        code = response.error.code
        if code:
            error = kerr.error_for_code(code)(response.error.message or response.error.name)
            self._restart(session)
            if code not in _SESSION_ERRORS and not error.retriable:
                raise error
            for _n, tp in acks:
                results[tp] = error
            return None
        session.epoch = next_epoch(session.epoch)
        if response.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = response.acquisition_lock_timeout_ms
        for _n, tp in acks:
            results.setdefault(tp, None)
        return response

    @staticmethod
    def _restart(session: _Session) -> None:
        session.epoch = INITIAL_EPOCH
        session.partitions = set()

    def _partition_errors(self, node_id: int, tp: TopicPartition, p: Any, results: AckResults) -> None:
        if p.acknowledge_error.code:
            results[tp] = kerr.error_for_code(p.acknowledge_error.code)(
                p.acknowledge_error.message or p.acknowledge_error.name
            )
        if p.error.code:
            error = kerr.error_for_code(p.error.code)
            if issubclass(error, kerr.InvalidMetadataError) or error.retriable:
                self._metadata.request_update()
            else:
                _log.info("share_fetch_partition_error", tp=str(tp), node=node_id, error=p.error.name)

    # ============================================================ acknowledging

    def acknowledge(self, acks: Acks, results: AckResults, *, wait: bool, final: bool = False) -> Acks:
        """ShareAcknowledge of ``acks`` to each broker (``final``: closing its session, even with
        nothing to acknowledge); with ``wait`` the answers are in ``results`` on return, else they
        come with the next `settle`. Returns the acks that could not be sent (broker unknown)."""
        unsent: dict[tuple[int, TopicPartition], Mapping[int, AcknowledgeType]] = {}
        nodes = {node for node, _tp in acks} | (set(self._sessions) if final else set())
        for node_id in nodes:
            self.settle(node_id, results)
            node_acks = {k: v for k, v in acks.items() if k[0] == node_id}
            session = self._session(node_id)
            if session is None:
                unsent.update(node_acks)
                continue
            if session.epoch == INITIAL_EPOCH:
                if final:
                    continue  # no session there: nothing to close
                if not self._open_empty(node_id, session, results):
                    unsent.update(node_acks)
                    continue
            request = share_pb2.ShareAcknowledgeRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                share_session_epoch=FINAL_EPOCH if final else session.epoch,
                topics=_topics((), self._ids({tp: offs for (_n, tp), offs in node_acks.items()})),
            )
            future = self._pool.share_stub(session.address).ShareAcknowledge.future(
                request, timeout=self.settings.request_timeout_ms / 1000.0
            )
            if wait or final:
                self._acknowledged(node_id, session, future, node_acks, results)
            else:
                session.in_flight = (future, node_acks)
        if final:
            self._sessions.clear()
        return unsent

    def _open_empty(self, node_id: int, session: _Session, results: AckResults) -> bool:
        """Open a session without partitions (acquiring nothing), so that acks can follow."""
        request = share_pb2.ShareFetchRequest(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=INITIAL_EPOCH, max_wait_ms=0
        )
        future = self._pool.share_stub(session.address).ShareFetch.future(
            request, timeout=self.settings.request_timeout_ms / 1000.0
        )
        return self._answer(node_id, session, future, {}, results) is not None

    def _acknowledged(self, node_id: int, session: _Session, future: Any, acks: Acks, results: AckResults) -> None:
        response = self._answer(node_id, session, future, acks, results)
        if response is None:
            return
        for topic in response.topics:
            name = self._metadata.topic_name(topic.topic_id)
            for p in topic.partitions:
                if name is not None:
                    self._partition_errors(node_id, TopicPartition(name, p.partition), p, results)
