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

`ChannelPool` holds one gRPC channel per broker address for all of a client's calls.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Self

import grpc
import structlog

from kraftlog.client._security import ClientSecurity, client_security
from kraftlog.client._transport import Transport
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, backoff_ms, parse_bootstrap_servers, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import (
    RECONNECT_OPTIONS,
    broker_pb2,
    broker_pb2_grpc,
    group_pb2,
    group_pb2_grpc,
    txn_pb2_grpc,
)

__all__ = [
    "BrokerMetadata",
    "ChannelPool",
    "ClusterMetadata",
    "PartitionMetadata",
    "TopicPartition",
    "grpc_error",
    "timed_out",
    "parse_bootstrap_servers",
]

_log = structlog.get_logger(__name__)

NO_LEADER = -1
_UNKNOWN_TOPIC = kerr.UnknownTopicOrPartitionError.error_code


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


def timed_out(message: str, cause: BaseException) -> kerr.RequestTimedOutError:
    """The `RequestTimedOutError` a retry loop raises at its deadline, caused by ``cause``."""
    error = kerr.RequestTimedOutError(message)
    error.__cause__ = cause
    return error


def grpc_error(err: grpc.RpcError, what: str) -> kerr.KafkaError:
    """A transport failure as a typed Kafka error: a deadline is REQUEST_TIMED_OUT, an unreachable
    or cancelled call NETWORK_EXCEPTION (both retriable); anything else UNKNOWN_SERVER_ERROR."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    text = f"{what}: {code.name if code is not None else 'error'}: {details}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return kerr.RequestTimedOutError(text)
    if code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.UNKNOWN,
    ):
        return kerr.NetworkError(text)
    return kerr.UnknownServerError(text)


# a broker that did not answer at all (down, or cut off the network), as opposed to one that answered
_UNREACHABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class ChannelPool:
    """One gRPC channel (and BrokerService stub) per address, and which addresses failed lately.

    A broker cut off the network does not refuse connections: calls to it hang until their deadline.
    Like Kafka's clients, which back off from a node whose connection failed, callers report such
    failures (`mark_unreachable`) and metadata requests try the other brokers first for
    ``UNREACHABLE_BACKOFF_S``.
    """

    UNREACHABLE_BACKOFF_S = 5.0

    def __init__(self, max_message_bytes: int = 104_857_600, *, security: Transport | None = None) -> None:
        max_message_bytes = min(max_message_bytes, 2**31 - 1)  # gRPC takes a C int
        self.security = security or ClientSecurity()  # default: plaintext channels
        self._options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            *RECONNECT_OPTIONS,
        ]
        self._stubs: dict[str, broker_pb2_grpc.BrokerServiceStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._unreachable_at: dict[str, float] = {}

    def mark_unreachable(self, address: str) -> None:
        self._unreachable_at[address] = time.monotonic()

    def mark_reachable(self, address: str) -> None:
        self._unreachable_at.pop(address, None)

    def recently_unreachable(self, address: str) -> bool:
        at = self._unreachable_at.get(address)
        return at is not None and time.monotonic() - at < self.UNREACHABLE_BACKOFF_S

    def stub(self, address: str) -> broker_pb2_grpc.BrokerServiceStub:
        stub = self._stubs.get(address)
        if stub is None:
            with self._lock:
                stub = self._stubs.get(address)
                if stub is None:
                    channel = self.security.open(address, self._options)
                    self._channels[address] = channel
                    stub = broker_pb2_grpc.BrokerServiceStub(channel)
                    self._stubs[address] = stub
        return stub

    def group_stub(self, address: str) -> group_pb2_grpc.GroupServiceStub:
        """GroupService on the same channel as `stub` (a consumer's group coordinator)."""
        self.stub(address)
        with self._lock:
            return group_pb2_grpc.GroupServiceStub(self._channels[address])

    def txn_stub(self, address: str) -> txn_pb2_grpc.TxnServiceStub:
        """TxnService on the same channel as `stub` (a producer's transaction coordinator)."""
        self.stub(address)
        with self._lock:
            return txn_pb2_grpc.TxnServiceStub(self._channels[address])

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()


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
                if code in _UNREACHABLE_CODES:
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
        """Refresh now, blocking; raises `RequestTimedOutError` when no broker answered in time."""
        deadline = time.monotonic() + (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000.0
        last: BaseException | None = None
        with self._cond:
            if topics is not None:
                self._topics |= set(topics)
        while not self._closed:
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
                    if err.code() in _UNREACHABLE_CODES:
                        self._pool.mark_unreachable(address)
                    continue
                self._pool.mark_reachable(address)
                with self._cond:
                    self._apply(response)
                    self._cond.notify_all()
                if self._on_update is not None:
                    self._on_update()
                return
            with self._cond:
                self._failures += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(remaining, self._backoff_s() or self.retry_backoff_ms / 1000.0))
        detail = f" (last error: {grpc_error(last, 'Metadata')})" if isinstance(last, grpc.RpcError) else ""
        raise kerr.RequestTimedOutError(
            f"no broker of {','.join(self.bootstrap_servers)} answered a Metadata request in time{detail}"
        )

    def wait_for_topic(self, topic: str, timeout_ms: int, *, partition: int | None = None) -> list[int]:
        """Block until ``topic`` (and ``partition``, when given) is in the cache; returns its partition
        ids. Raises `UnknownTopicOrPartitionError` (or the topic's own error) when time runs out."""
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


class BrokerAdminClient:
    """What the admin clients that talk to brokers (not the controller) share: a channel pool and
    the brokers' metadata, closed together; a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        security_protocol: str = "PLAINTEXT",
        **ssl: Any,
    ) -> None:
        """``security_protocol`` and kafka-python's ``ssl_*`` arguments or ``tls``: see
        `client_security`."""
        self.request_timeout_ms = request_timeout_ms
        self._pool = ChannelPool(security=client_security(security_protocol, **ssl))
        self._metadata = ClusterMetadata(bootstrap_servers, self._pool, request_timeout_ms=request_timeout_ms)
        # retries start at 100 ms and back off to 1 s (the one retry policy, KIP-580)
        self._policy = RetryPolicy(backoff_ms=100, backoff_max_ms=1000, attempt_timeout_ms=request_timeout_ms)
        self._sleep: Callable[[float], object] = time.sleep  # how retries wait (a unit test's no-op)

    def _retry(self, attempt: Callable[[float], Outcome], deadline: float, what: str) -> Any:
        """Run ``attempt`` until it is done or ``deadline`` passes (see `retry_until`)."""
        timeout_s = deadline - time.monotonic()
        return retry_until(attempt, timeout_s=timeout_s, policy=self._policy, what=what, sleep=self._sleep)

    def close(self) -> None:
        self._metadata.close()
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


GROUP_KEY = 0  # FindCoordinator key types: a group id, a transactional id
TRANSACTION_KEY = 1
_COORDINATOR_RETRY = {
    kerr.CoordinatorNotAvailableError.error_code,
    kerr.NotCoordinatorError.error_code,
    kerr.CoordinatorLoadInProgressError.error_code,
}


def find_coordinator(
    pool: ChannelPool,
    metadata: ClusterMetadata,
    key: str,
    key_type: int,
    deadline: float,
    *,
    backoff_s: float = 0.1,
    stop: threading.Event | None = None,
) -> tuple[int, str]:
    """``(node id, address)`` of the coordinator of a group (``key_type`` 0) or transactional id
    (1), asking FindCoordinator of every broker in turn until one names it; a coordinator not
    there yet (being created, loading) is asked for again until ``deadline``
    (COORDINATOR_NOT_AVAILABLE then), any other error is raised as its type."""
    if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
        raise kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} (no time left)")
    request = group_pb2.FindCoordinatorRequest(key_type=key_type, keys=[key])

    def one_round(_timeout_s: float) -> Outcome:
        """Ask every known broker once; a round that found nothing is retried after a back-off."""
        last = "stopped"
        if stop is not None and stop.is_set():
            raise kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} ({last})")
        for address in metadata.candidates():
            try:
                r = pool.group_stub(address).FindCoordinator(request, timeout=5.0)
            except grpc.RpcError as err:
                last = str(err.code())
                continue
            c = r.coordinators[0]
            if c.error.code == 0:
                host = f"[{c.host}]" if ":" in c.host else c.host
                return Done((c.node_id, f"{host}:{c.port}"))
            if c.error.code not in _COORDINATOR_RETRY:
                kerr.raise_for_code(c.error.code, c.error.message or c.error.name)
            last = c.error.name
        return Retry(last, error=kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} ({last})"))

    found: tuple[int, str] = retry_until(
        one_round,
        timeout_s=deadline - time.monotonic(),
        policy=RetryPolicy(backoff_ms=backoff_s * 1000.0, backoff_max_ms=max(backoff_s * 1000.0, 1000.0)),
        what="FindCoordinator",
        sleep=stop.wait if stop is not None else time.sleep,
    )
    return found
