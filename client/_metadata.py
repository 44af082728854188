"""The client's view of the cluster: brokers, topics and partition leaders from the Metadata RPC.

`ClusterMetadata` is shared by a client's threads. It refreshes when asked (`request_update`, after a
retriable error), when a topic the client needs is missing, and when ``metadata.max.age.ms`` has
passed. Refreshes run asynchronously (`maybe_update`, for I/O loops that must not block) or block the
caller (`update`, `wait_for_topic`). A broker's answer goes to the first broker reachable among those
known, in random order, then the bootstrap list.

Leader epochs keep the cache from going backwards (KIP-320): a partition's entry is only replaced
by one with an equal or newer leader epoch, so a lagging broker's answer cannot undo a newer view.
The KIP-951 hints a broker attaches to NOT_LEADER_OR_FOLLOWER (``current_leader`` plus the leader's
endpoint) update the entry in place through `apply_leader_hint`, so a client need not refetch.

Channels to brokers are `client._channels.ChannelPool`'s; a blocking refresh runs on the one request
driver (`retry_until`: a round asks each candidate once, rounds back off by the retry policy).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc
import structlog

from kraftlog.client._channels import UNREACHABLE_CODES, ChannelPool, grpc_error
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, backoff_ms, parse_bootstrap_servers, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

__all__ = [
    "BrokerMetadata",
    "ClusterMetadata",
    "PartitionMetadata",
    "TopicPartition",
    "parse_bootstrap_servers",
]

_log = structlog.get_logger(__name__)

NO_LEADER = -1
_UNKNOWN_TOPIC = kerr.UnknownTopicOrPartitionError.error_code
_INVALID_TOPIC = kerr.InvalidTopicError.error_code


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def partitions_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Partition numbers grouped by topic, in the order given (the shape of Kafka's requests)."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str = ""

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"


@dataclass
class PartitionMetadata:
    topic: str
    partition: int
    leader: int = NO_LEADER
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)
    error_code: int = 0


class ClusterMetadata:
    """A thread-safe cache of the Metadata RPC's answer for the topics a client uses."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        pool: ChannelPool,
        *,
        metadata_max_age_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 30_000,
        allow_auto_topic_creation: bool = True,
        on_update: Callable[[], None] | None = None,
    ) -> None:
        self.bootstrap_servers = parse_bootstrap_servers(bootstrap_servers)
        self._pool = pool
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.request_timeout_ms = request_timeout_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._on_update = on_update
        self._cond = threading.Condition()
        self._brokers: dict[int, BrokerMetadata] = {}
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self._ids: dict[str, tuple[list[int], list[int]]] = {}  # topic -> (all, available), cached
        self._topic_ids: dict[str, str] = {}
        self._topic_errors: dict[str, int] = {}
        self._topics: set[str] = set()  # the topics this client needs
        self.cluster_id = ""
        self.controller_id = -1
        self._last_refresh = 0.0  # monotonic time of the last successful update
        self._last_attempt = 0.0
        self._failures = 0
        self._need_update = True
        self._in_flight = False
        self._version = 0  # bumped on every applied update
        self._rng = random.Random()
        self._closed = False

    # ------------------------------------------------------------------ reading the cache

    @property
    def version(self) -> int:
        return self._version

    def brokers(self) -> list[BrokerMetadata]:
        with self._cond:
            return list(self._brokers.values())

    def broker(self, node_id: int) -> BrokerMetadata | None:
        return self._brokers.get(node_id)

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> list[int] | None:
        """All partition ids of ``topic``, or None when the topic is not (yet) known."""
        ids = self._ids.get(topic)
        return ids[0] if ids is not None else None

    def available_partitions_for_topic(self, topic: str) -> list[int]:
        """Partitions of ``topic`` with a leader among the known brokers."""
        ids = self._ids.get(topic)
        return ids[1] if ids is not None else []

    def _reindex(self, topic: str) -> None:
        parts = self._partitions.get(topic)
        if parts is None:
            self._ids.pop(topic, None)
            return
        self._ids[topic] = (
            sorted(parts),
            sorted(p for p, m in parts.items() if m.leader != NO_LEADER and m.leader in self._brokers),
        )

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return (self._partitions.get(tp.topic) or {}).get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> BrokerMetadata | None:
        meta = self.partition(tp)
        if meta is None or meta.leader == NO_LEADER:
            return None
        return self._brokers.get(meta.leader)

    def leader_epoch(self, tp: TopicPartition) -> int:
        meta = self.partition(tp)
        return meta.leader_epoch if meta is not None else -1

    def topic_id(self, topic: str) -> str | None:
        """The id of ``topic`` (canonical uuid text) once metadata named it."""
        return self._topic_ids.get(topic)

    def topic_name(self, topic_id: str) -> str | None:
        """The name of the topic with id ``topic_id``, once metadata named it."""
        for name, known in list(self._topic_ids.items()):
            if known == topic_id:
                return name
        return None

    def topic_error(self, topic: str) -> int:
        """The error code of the last answer about ``topic`` (0 when fine or not asked)."""
        return self._topic_errors.get(topic, 0)

    # ------------------------------------------------------------------ wanting updates

    def add_topics(self, topics: Iterable[str]) -> None:
        with self._cond:
            new = set(topics) - self._topics
            if new:
                self._topics |= new
                if any(t not in self._partitions for t in new):
                    self._need_update = True

    def request_update(self) -> int:
        """Ask for a refresh at the next opportunity; returns the current version."""
        with self._cond:
            self._need_update = True
            return self._version

    def time_to_next_update(self, now: float | None = None) -> float:
        """Seconds until a refresh is due (0: now)."""
        now = time.monotonic() if now is None else now
        with self._cond:
            if self._in_flight:
                return float("inf")
            backoff = self._backoff_s()
            if self._need_update:
                return max(0.0, self._last_attempt + backoff - now)
            expires = self._last_refresh + self.metadata_max_age_ms / 1000.0
            return max(0.0, expires - now, self._last_attempt + backoff - now)

    def _backoff_s(self) -> float:
        """Time between refresh attempts: retry.backoff.ms, growing exponentially while they fail."""
        if self._failures == 0:
            return self.retry_backoff_ms / 1000.0
        return (
            backoff_ms(
                self._failures - 1, base_ms=self.retry_backoff_ms, max_ms=self.retry_backoff_max_ms, rng=self._rng
            )
            / 1000.0
        )

    # ------------------------------------------------------------------ refreshing

    def candidates(self) -> list[str]:
        """Broker addresses to ask, known brokers and bootstrap servers shuffled, the ones that
        failed lately last."""
        return self._candidates()

    def _candidates(self) -> list[str]:
        known = [b.address for b in self._brokers.values()]
        self._rng.shuffle(known)
        boot = list(self.bootstrap_servers)
        self._rng.shuffle(boot)
        seen: set[str] = set()
        out = []
        for address in known + boot:
            if address not in seen:
                seen.add(address)
                out.append(address)
        out.sort(key=self._pool.recently_unreachable)  # stable: the others first, still shuffled
        return out

    def _request(self, topics: Iterable[str] | None) -> broker_pb2.MetadataRequest:
        wanted = sorted(self._topics if topics is None else set(topics) | self._topics)
        return broker_pb2.MetadataRequest(topics=wanted, allow_auto_topic_creation=self.allow_auto_topic_creation)

    def maybe_update(self) -> bool:
        """Start an asynchronous refresh if one is due; True when one was started."""
        if self._closed or self.time_to_next_update() > 0:
            return False
        with self._cond:
            if self._in_flight:
                return False
            self._in_flight = True
            self._last_attempt = time.monotonic()
            request = self._request(None)
            candidates = self._candidates()
        self._send_async(request, candidates, 0)
        return True

    def _send_async(self, request: broker_pb2.MetadataRequest, candidates: list[str], index: int) -> None:
        address = candidates[index]
        try:
            future = self._pool.stub(address).Metadata.future(request, timeout=self.request_timeout_ms / 1000.0)
        except Exception as err:  # closed channel during shutdown
            self._async_done(None, err)
            return

        def done(f: Any) -> None:
            try:
                response = f.result()
            except (grpc.RpcError, grpc.FutureCancelledError) as err:
                _log.debug("metadata_request_failed", address=address, error=str(err))
                code = getattr(err, "code", lambda: None)()
                if code in UNREACHABLE_CODES:
                    self._pool.mark_unreachable(address)
                    if index + 1 < len(candidates) and not self._closed:
                        self._send_async(request, candidates, index + 1)  # try the next broker at once
                        return
                self._async_done(None, err)
                return
            self._pool.mark_reachable(address)
            self._async_done(response, None)

        future.add_done_callback(done)

    def _async_done(self, response: broker_pb2.MetadataResponse | None, err: BaseException | None) -> None:
        with self._cond:
            self._in_flight = False
            if response is not None:
                self._apply(response)
            else:
                self._failures += 1
            self._cond.notify_all()
        if self._on_update is not None:
            self._on_update()

    def update(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None) -> None:
        """Refresh now, blocking; raises `RequestTimedOutError` when no broker answered in time.

        A round asks each candidate once, in `candidates` order, without waiting between them (a
        broker that is down should not cost a back-off when another answers); a round nobody
        answered backs off by the retry policy before the next (`retry_until`)."""
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000.0
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if topics is not None:
                self._topics |= set(topics)

        def one_round(_attempt_timeout_s: float) -> Outcome:
            last: BaseException | None = None
            if not self._closed:
                with self._cond:
                    request = self._request(None)
                    candidates = self._candidates()
                    self._last_attempt = time.monotonic()
                for address in candidates:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        response = self._pool.stub(address).Metadata(
                            request, timeout=min(remaining, self.request_timeout_ms / 1000.0)
                        )
                    except grpc.RpcError as err:
                        last = err
                        if err.code() in UNREACHABLE_CODES:
                            self._pool.mark_unreachable(address)
                        continue
                    self._pool.mark_reachable(address)
                    with self._cond:
                        self._apply(response)
                        self._cond.notify_all()
                    if self._on_update is not None:
                        self._on_update()
                    return Done(None)
                with self._cond:
                    self._failures += 1
            detail = f" (last error: {grpc_error(last, 'Metadata')})" if isinstance(last, grpc.RpcError) else ""
            error = kerr.RequestTimedOutError(
                f"no broker of {','.join(self.bootstrap_servers)} answered a Metadata request in time{detail}"
            )
            if self._closed:
                raise error
            return Retry("no broker answered", error=error)

        policy = RetryPolicy(self.retry_backoff_ms, self.retry_backoff_max_ms, self.request_timeout_ms)
        retry_until(one_round, timeout_s=timeout_s, policy=policy, what="Metadata", rng=self._rng)

    def wait_for_topic(self, topic: str, timeout_ms: int, *, partition: int | None = None) -> list[int]:
        """Block until ``topic`` (and ``partition``, when given) is in the cache; returns its partition
        ids. Raises `UnknownTopicOrPartitionError` (or the topic's own error) when time runs out, and
        `InvalidTopicError` at once for a name the brokers call illegal."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        self.add_topics([topic])

        def present() -> list[int] | None:
            parts = self.partitions_for_topic(topic)
            return list(parts) if parts is not None and (partition is None or partition in parts) else None

        def attempt(_timeout_s: float) -> Outcome:
            found = present()
            if found is not None or self._closed or time.monotonic() >= deadline:
                return Done(found)
            try:
                self.update(timeout_ms=int((deadline - time.monotonic()) * 1000) + 1)
            except kerr.RequestTimedOutError:
                return Done(None)
            found = present()
            if found is None and self.topic_error(topic) == _INVALID_TOPIC:
                return Done(None)  # the name can never exist: fail now, as Kafka's producer does
            return Done(found) if found is not None else Retry(f"{topic} not in metadata yet", value=False)

        policy = RetryPolicy(self.retry_backoff_ms, self.retry_backoff_max_ms, timeout_ms)
        got = retry_until(attempt, timeout_s=deadline - time.monotonic(), policy=policy, what="Metadata")
        if got:
            return list(got)
        code = self.topic_error(topic)
        if code and code != _UNKNOWN_TOPIC:
            kerr.raise_for_code(code, f"topic {topic!r}: {kerr.error_for_code(code).error_name}")
        what = (
            f"partition {topic}-{partition}"
            if partition is not None and self.partitions_for_topic(topic) is not None
            else f"topic {topic}"
        )
        raise kerr.UnknownTopicOrPartitionError(f"{what} not present in metadata after {timeout_ms} ms.")

    # ------------------------------------------------------------------ applying answers

    def _apply(self, response: broker_pb2.MetadataResponse) -> None:
        """Apply a Metadata answer (caller holds the lock)."""
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        if brokers:
            self._brokers = brokers
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        for topic in response.topics:
            code = topic.error.code
            self._topic_errors[topic.name] = code
            if code == _UNKNOWN_TOPIC or (code and not topic.partitions):
                if code == _UNKNOWN_TOPIC:
                    self._partitions.pop(topic.name, None)
                    self._ids.pop(topic.name, None)
                continue
            old = self._partitions.get(topic.name, {})
            if topic.topic_id:
                if self._topic_ids.get(topic.name, topic.topic_id) != topic.topic_id:
                    old = {}  # deleted and created again: the old epochs mean nothing
                self._topic_ids[topic.name] = topic.topic_id
            new: dict[int, PartitionMetadata] = {}
            for p in topic.partitions:
                cached = old.get(p.partition_index)
                if cached is not None and p.leader_epoch < cached.leader_epoch:
                    new[p.partition_index] = cached  # a lagging broker's older view: keep ours
                    continue
                new[p.partition_index] = PartitionMetadata(
                    topic.name,
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    p.error.code,
                )
            self._partitions[topic.name] = new
        for name in list(self._partitions):
            self._reindex(name)
        self._last_refresh = time.monotonic()
        self._failures = 0
        self._need_update = False
        self._version += 1

    def apply_leader_hint(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, endpoints: Iterable[Any] = ()
    ) -> bool:
        """KIP-951: adopt ``leader_id``/``leader_epoch`` from an error answer if it is newer than the
        cached entry and the leader's endpoint is known (from ``endpoints`` or the cache).
        Returns True when the cache changed."""
        if leader_id < 0:
            return False
        with self._cond:
            for ep in endpoints:
                if (
                    ep.node_id not in self._brokers
                    or self._brokers[ep.node_id].address != BrokerMetadata(ep.node_id, ep.host, ep.port).address
                ):
                    self._brokers = dict(self._brokers)
                    self._brokers[ep.node_id] = BrokerMetadata(ep.node_id, ep.host, ep.port, ep.rack)
            if leader_id not in self._brokers:
                return False
            parts = self._partitions.get(tp.topic)
            if parts is None:
                return False
            cached = parts.get(tp.partition)
            if cached is not None and leader_epoch <= cached.leader_epoch:
                return False
            if cached is None:
                cached = PartitionMetadata(tp.topic, tp.partition)
                parts[tp.partition] = cached
            cached.leader = leader_id
            cached.leader_epoch = leader_epoch
            cached.error_code = 0
            self._reindex(tp.topic)
            self._version += 1
            return True

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._cond.notify_all()
