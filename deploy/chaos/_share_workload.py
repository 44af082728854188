"""The chaos run's share workload (``kraftlog chaos run --workload share``, issue 27): share
consumers of one share group, kraftlog's own `ShareConsumer` (gRPC) and confluent-kafka's
``ShareConsumer`` (librdkafka, the Kafka listener), read the produce workload's topic under the
faults and log what the share checker (`deploy.chaos._share_check`) needs.

Each member is a thread with its own consumer in explicit acknowledgement mode: it polls, then
acknowledges every record (ACCEPT, or RELEASE for a seeded few on their first deliveries, so the
run has redeliveries of its own), then `commit_sync` and logs per record: its delivery count, the
times around it (`Delivery`) and whether the broker applied the acknowledgement. A consumer that
fails many polls in a row is replaced by a new one (its locks end on their own). The group reads
from the start (``share.auto.offset.reset=earliest``, a group config set before any member joins).
`ShareWorkload.finish`, after the producers stopped, waits (bounded) until every acknowledged
produce was ACCEPTED, then stops the members.

confluent-kafka is a test dependency: without it (or on a secured cluster, whose librdkafka
settings this workload does not carry) the run has kraftlog members only, and says so.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from kraftlog.client import Admin, ShareConsumer
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity
from kraftlog.deploy.chaos._share_check import ACCEPT, RELEASE, Delivery, ack_outcome

__all__ = ["ShareWorkload", "DELIVERY_LIMIT", "SHARE_BROKER_KEYS", "set_group_configs"]

_log = structlog.get_logger("deploy.chaos")

#: Kafka's default ``group.share.delivery.count.limit``
DELIVERY_LIMIT = 5
#: share of first deliveries released (they come back with delivery count 2)
RELEASE_RATE = 0.05
#: a consumer that failed this many polls in a row is replaced by a new one
MAX_POLL_FAILURES = 20
GROUP_RESOURCE = 32  # Kafka's ConfigResource type GROUP
#: the broker keys of the run's own cluster: short record locks (a killed broker's acquired records
#: come back within a short run) and KIP-932 heartbeats as the group workload's members'
SHARE_BROKER_KEYS: dict[str, int] = {
    "share.coordinator.state.topic.num.partitions": 3,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 5000,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 500,
}
_POLL_S = 0.2


def set_group_configs(admin: Admin, group_id: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) of ``configs`` on the GROUP resource ``group_id``."""
    answer = admin.incremental_alter_configs({(GROUP_RESOURCE, group_id): [(k, 0, v) for k, v in configs.items()]})
    errors = [answer.error] + [r.error for r in answer.results]
    failed = [e for e in errors if e.code]
    if failed:
        raise RuntimeError(f"group configs of {group_id}: {failed[0].name} {failed[0].message}")


class _Ours:
    """kraftlog's ShareConsumer behind the member's four calls."""

    fetches_ahead = False

    def __init__(self, w: ShareWorkload, name: str) -> None:
        self.c = ShareConsumer(
            w.bootstrap_servers,
            group_id=w.group_id,
            share_acknowledgement_mode="explicit",
            max_poll_records=50,
            fetch_max_wait_ms=200,
            request_timeout_ms=5_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            client_id=name,
            **w.security.client_kwargs(),
        )
        self.c.subscribe([w.topic])
        self._batch: list[Any] = []

    def poll(self) -> list[tuple[int, int, int]]:
        self._batch = self.c.poll(int(_POLL_S * 1000))
        return [(r.partition, r.offset, r.delivery_count) for r in self._batch]

    def acknowledge(self, index: int, release: bool) -> None:
        from kraftlog.client import AcknowledgeType

        self.c.acknowledge(self._batch[index], AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT)

    def commit(self) -> dict[int, str | None]:
        return {tp.partition: _error_name(error) for tp, error in self.c.commit_sync().items()}

    def lock_ms(self) -> int | None:
        return self.c.acquisition_lock_timeout_ms()

    def close(self) -> None:
        self.c.close()


class _Theirs:
    """confluent-kafka's ShareConsumer (librdkafka) behind the same calls."""

    fetches_ahead = True  # librdkafka may fetch in the background: the poll before bounds the acquisition

    def __init__(self, w: ShareWorkload, name: str) -> None:
        import confluent_kafka

        self._ack = confluent_kafka.AcknowledgeType
        self.c = confluent_kafka.ShareConsumer(
            {
                "bootstrap.servers": w.kafka_bootstrap_servers,
                "group.id": w.group_id,
                "client.id": name,
                "share.acknowledgement.mode": "explicit",
                "log_level": 3,
            }
        )
        self.c.subscribe([w.topic])
        self._batch: list[Any] = []

    def poll(self) -> list[tuple[int, int, int]]:
        self._batch = [m for m in self.c.poll(_POLL_S) if m.error() is None]
        return [(m.partition(), m.offset(), m.delivery_count()) for m in self._batch]

    def acknowledge(self, index: int, release: bool) -> None:
        self.c.acknowledge(self._batch[index], self._ack.RELEASE if release else self._ack.ACCEPT)

    def commit(self) -> dict[int, str | None]:
        return {tp.partition: _error_name(error) for tp, error in (self.c.commit_sync(10) or {}).items()}

    def lock_ms(self) -> int | None:
        return None

    def close(self) -> None:
        self.c.close()


class ShareWorkload:
    """The share group's members (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_bootstrap_servers: str,
        topic: str,
        *,
        ours: int = 2,
        theirs: int = 2,
        seed: int = 0,
        group_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.kafka_bootstrap_servers = kafka_bootstrap_servers
        self.topic = topic
        self.group_id = group_id or f"{topic}-share"
        self.security = security
        self.theirs_skipped = ""
        if theirs and security.mode != "plaintext":
            self.theirs_skipped = f"a {security.mode} cluster: librdkafka's settings for it are not carried"
        elif theirs:
            try:
                import confluent_kafka  # noqa: F401 - a test dependency: present or not

            except ImportError:
                self.theirs_skipped = "confluent-kafka is not installed"
        if self.theirs_skipped:
            theirs = 0
        self.clients = {"kraftlog": ours, "confluent-kafka": theirs}
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.deliveries: list[Delivery] = []
        self.settled: set[tuple[int, int]] = set()  # accepted, or accepted with an unknown outcome
        self.lock_ms: int | None = None
        self.poll_failures = 0
        self.commit_failures = 0
        self.replaced = 0
        kinds: list[tuple[str, Callable[[ShareWorkload, str], Any]]] = [("kraftlog", _Ours)] * ours + [
            ("confluent-kafka", _Theirs)
        ] * theirs
        self._threads = [
            threading.Thread(
                target=self._member,
                args=(f"share-{kind}-{i}", make, random.Random(seed * 1013 + i)),
                name=f"chaos-share-{i}",
                daemon=True,
            )
            for i, (kind, make) in enumerate(kinds)
        ]

    # ------------------------------------------------------------------ the run

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def members(self) -> int:
        return len(self._threads)

    def consumers_with_records(self) -> int:
        with self._lock:
            return len({d.consumer for d in self.deliveries})

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def finish(self, wanted: Iterable[tuple[int, int]], timeout_s: float = 90.0) -> tuple[bool, float]:
        """After the producers stopped: wait (bounded) until every record of ``wanted``
        (partition, offset) was accepted, then stop the members; (drained, seconds waited)."""
        need = set(wanted)
        started = time.monotonic()
        drained = False
        while time.monotonic() - started < timeout_s:
            with self._lock:
                if need <= self.settled:
                    drained = True
                    break
            time.sleep(_POLL_S)
        waited = time.monotonic() - started
        self.stop()
        return drained, waited

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ members

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _member(self, name: str, make: Callable[[ShareWorkload, str], Any], rng: random.Random) -> None:
        while not self._stop.is_set():
            try:
                consumer = make(self, name)
            except Exception as err:  # noqa: BLE001 - under faults; a new one is made
                _log.warning("chaos_share_consumer_failed", consumer=name, error=repr(err))
                self._stop.wait(1.0)
                continue
            try:
                self._consume(name, consumer, rng)
            except Exception:  # noqa: BLE001 - a member outlives any one failure
                _log.warning("chaos_share_member_failed", consumer=name, exc_info=True)
            finally:
                try:
                    consumer.close()
                except Exception as err:  # noqa: BLE001 - the locks end on their own
                    _log.info("chaos_share_close_failed", consumer=name, error=repr(err))
            if not self._stop.is_set():
                self._count("replaced")
                self._stop.wait(0.5)

    def _consume(self, name: str, consumer: Any, rng: random.Random) -> None:
        failures = 0
        last_poll = self._clock()
        while not self._stop.is_set():
            poll_at = self._clock()
            lower = last_poll if consumer.fetches_ahead else poll_at
            last_poll = poll_at
            try:
                batch = consumer.poll()
            except Exception as err:  # noqa: BLE001 - retriable under faults
                self._count("poll_failures")
                failures += 1
                _log.info("chaos_share_poll_failed", consumer=name, error=repr(err))
                if failures >= MAX_POLL_FAILURES:
                    return
                self._stop.wait(0.2)
                continue
            failures = 0
            received = self._clock()
            lock_ms = consumer.lock_ms()
            if lock_ms:
                with self._lock:
                    self.lock_ms = lock_ms if self.lock_ms is None else min(self.lock_ms, lock_ms)
            if not batch:
                continue
            kinds = []
            for i, (_p, _o, count) in enumerate(batch):
                release = count == 1 and rng.random() < RELEASE_RATE
                consumer.acknowledge(i, release)
                kinds.append(RELEASE if release else ACCEPT)
            sent = self._clock()
            try:
                results: dict[int, str | None] | None = consumer.commit()  # partition -> error name
            except Exception as err:  # noqa: BLE001 - the outcome stays unknown; the lock ends on its own
                self._count("commit_failures")
                _log.info("chaos_share_commit_failed", consumer=name, error=repr(err))
                results = None
            out = [
                Delivery(
                    name,
                    p,
                    o,
                    count,
                    lower,
                    received,
                    kind,
                    sent,
                    None if results is None or p not in results else results[p] is None,
                    None if results is None else results.get(p),
                )
                for (p, o, count), kind in zip(batch, kinds, strict=True)
            ]
            with self._lock:
                self.deliveries.extend(out)
                # an ACCEPT of unknown outcome may have been applied (see _share_check): waiting for
                # another delivery of that record could wait for ever
                self.settled.update(
                    (d.partition, d.offset)
                    for d in out
                    if d.ack == ACCEPT and ack_outcome(d.ack_ok, d.ack_error) is not False
                )


def _error_name(error: Any) -> str | None:
    """None for an applied acknowledgement, else the Kafka error's name (ours: the exception's
    ``error_name``; librdkafka's KafkaError or KafkaException: its ``name()``)."""
    if error is None:
        return None
    name = getattr(error, "error_name", None)
    if isinstance(name, str):
        return name
    inner = error.args[0] if getattr(error, "args", None) else error
    named = getattr(inner, "name", None)
    return str(named()) if callable(named) else type(error).__name__
