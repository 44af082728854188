"""The chaos run's group workload (``kraftlog chaos run --workload group``): consumer members of one
group read the produce workload's topic under the faults, and record what the group checker
(`deploy.chaos._group_check`) needs.

Each member is a thread with its own `Consumer` (``enable_auto_commit`` off): it polls, records
every record it was given, and commits the offsets after the last record of each partition in the
batch synchronously (at least once). Its rebalance listener records each assignment with the
member id and generation it was made in (``Consumer.group_metadata()``; the whole assignment, so
cooperative assignors and KIP-848's incremental assignments are covered too), commits what is
pending before partitions are revoked, and drops it when they are lost; each event carries the
time it happened (``time.monotonic()`` of this one process), from which the checker builds every
member's ownership intervals. Each member closes its consumer and, after a short seeded pause in
which the others take its partitions over, starts a new one at seeded intervals (a consumer
restart: the group rebalances under the faults too, partitions moving between members), until
`GroupWorkload.finish` lets the group drain up to the log end offsets, stops the members and reads
the group's final committed offsets.

``protocol`` is the members' ``group.protocol``: ``classic`` (JoinGroup/SyncGroup, the client's
assignor, the session and heartbeat below asked by the member) or ``consumer`` (KIP-848: the
coordinator assigns, and its broker keys ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms`` set what the classic members ask for, see
`CONSUMER_PROTOCOL_BROKER_KEYS`; the consumer refuses the classic-only settings).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from kraftlog.client import Consumer, RebalanceListener, TopicPartition
from kraftlog.deploy.chaos._drain import DrainOutcome, drain_workload
from kraftlog.deploy.chaos._group_check import AssignmentEvent, CommitRecord, ConsumedRecord
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["GroupWorkload", "GroupOutcome", "GROUP_PROTOCOLS", "CONSUMER_PROTOCOL_BROKER_KEYS"]

_log = structlog.get_logger("deploy.chaos")

#: seconds between a member's consumer restarts (seeded per member)
RESTART_INTERVAL_S = (12.0, 25.0)
#: seconds a restarting member stays away (seeded): longer than the heartbeat interval, so the
#: others take its partitions over before its new consumer joins and takes some back; without it a
#: KIP-848 member rejoins before anyone heard of its leaving and gets its own partitions back
RESTART_PAUSE_S = (0.8, 2.0)
#: a consumer that failed this many polls in a row is replaced by a new one
MAX_POLL_FAILURES = 20
#: the classic members' session and heartbeat (asked by each member in its JoinGroup)
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
GROUP_PROTOCOLS = ("classic", "consumer")
#: KIP-848: the coordinator decides a member's session and heartbeat; these broker keys give the
#: consumer-protocol members the classic members' values (the run's own cluster sets them)
CONSUMER_PROTOCOL_BROKER_KEYS: dict[str, int] = {
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
}


#: how the workload ended (`GroupWorkload.finish`): the report shape of every consuming workload
GroupOutcome = DrainOutcome


class GroupWorkload:
    """The group's members; every client they make connects with ``security``."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        members: int = 3,
        seed: int = 0,
        group_id: str | None = None,
        restarts: bool = True,
        protocol: str = "classic",
        clock: Callable[[], float] = time.monotonic,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        if protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group protocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {protocol!r}")
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.protocol = protocol
        self.topic = topic
        self.partitions = partitions
        self.group_id = group_id or f"{topic}-group"
        self.members = members
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._restarts_allowed = threading.Event()
        if restarts:
            self._restarts_allowed.set()
        self.consumed: list[ConsumedRecord] = []
        self.commits: list[CommitRecord] = []
        self.events: list[AssignmentEvent] = []
        self.commit_failures = 0
        self.poll_failures = 0
        self.restarts = 0
        self._members = [_Member(self, f"member-{i}", random.Random(seed * 1009 + i)) for i in range(members)]

    # ------------------------------------------------------------------ recording (member threads)

    def _record_consumed(self, records: list[ConsumedRecord]) -> None:
        with self._lock:
            self.consumed.extend(records)

    def _record_commit(self, commit: CommitRecord) -> None:
        with self._lock:
            self.commits.append(commit)

    def _record_event(self, event: AssignmentEvent) -> None:
        with self._lock:
            self.events.append(event)
        _log.info(
            "chaos_group_event",
            consumer=event.consumer,
            member=event.member_id,
            generation=event.generation,
            kind=event.kind,
            partitions=list(event.partitions),
            at=round(event.time_s, 6),
        )

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    # ------------------------------------------------------------------ the run

    def start(self) -> None:
        for m in self._members:
            m.start()

    def consumed_partitions(self) -> set[int]:
        with self._lock:
            return {r.partition for r in self.consumed}

    def highest_commits(self) -> dict[int, int]:
        with self._lock:
            out: dict[int, int] = {}
            for c in self.commits:
                for p, o in c.offsets.items():
                    out[p] = max(o, out.get(p, -1))
            return out

    def snapshot(self) -> tuple[list[ConsumedRecord], list[CommitRecord], list[AssignmentEvent]]:
        with self._lock:
            return list(self.consumed), list(self.commits), list(self.events)

    @property
    def consumed_topic(self) -> str:
        """The topic the group consumes (`deploy.chaos._drain.ConsumingWorkload`)."""
        return self.topic

    def finish(self, timeout_s: float = 90.0) -> GroupOutcome:
        """After the producers stopped: no more restarts; wait (bounded) until the group committed
        up to every partition's log end offset; stop the members; read the final committed offsets
        (`deploy.chaos._drain.drain_group`)."""
        self._restarts_allowed.clear()
        return drain_workload(self, "group", timeout_s)

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for m in self._members:
            m.join(max(0.0, deadline - time.monotonic()))


class _Listener(RebalanceListener):
    def __init__(self, member: _Member, consumer: Consumer) -> None:
        self.member = member
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.member.commit_pending(self.consumer, {tp.partition for tp in revoked}, why="revoke")
        self.member.event(self.consumer, "revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.member.event(self.consumer, "assigned", self.consumer.assignment())

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.member.drop_pending({tp.partition for tp in lost})
        self.member.event(self.consumer, "lost", lost)


def _membership(consumer: Consumer) -> tuple[str, int]:
    """The member id and generation (KIP-848: the member's epoch) of ``consumer``'s membership now;
    ``("", -1)`` when it cannot tell (a closed consumer)."""
    try:
        meta = consumer.group_metadata()
    except Exception as err:  # noqa: BLE001 - only a label of the recorded event
        _log.info("chaos_group_metadata_failed", error=repr(err))
        return "", -1
    return meta.member_id, meta.generation_id


class _Member(threading.Thread):
    def __init__(self, workload: GroupWorkload, name: str, rng: random.Random) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.workload = workload
        self.member_name = name
        self.rng = rng
        self.pending: dict[int, int] = {}  # partition -> next offset, consumed but not committed

    def _consumer(self) -> Consumer:
        w = self.workload
        classic: dict[str, Any] = {}
        if w.protocol == "classic":  # KIP-848: the coordinator's keys (CONSUMER_PROTOCOL_BROKER_KEYS)
            classic = {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS}
        consumer = Consumer(
            w.bootstrap_servers,
            group_id=w.group_id,
            group_protocol=w.protocol,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **classic,
            max_poll_interval_ms=30_000,
            max_poll_records=200,
            request_timeout_ms=5_000,
            default_api_timeout_ms=15_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            client_id=f"chaos-{self.member_name}",
            **w.security.client_kwargs(),
        )
        consumer.subscribe([w.topic], listener=_Listener(self, consumer))
        return consumer

    def run(self) -> None:
        w = self.workload
        while not w._stop.is_set():
            self.pending.clear()
            try:
                consumer = self._consumer()
            except Exception as err:
                _log.warning("chaos_group_consumer_failed", member=self.member_name, error=repr(err))
                w._stop.wait(1.0)
                continue
            restart_at = time.monotonic() + self.rng.uniform(*RESTART_INTERVAL_S)
            try:
                self._consume(consumer, restart_at)
            except Exception:  # a member must outlive any one failure: a new consumer takes over
                _log.warning("chaos_group_member_failed", member=self.member_name, exc_info=True)
                w._stop.wait(0.5)
            finally:
                try:
                    consumer.close()
                except Exception as err:  # noqa: BLE001 - a close under faults may fail; the group expels it
                    _log.info("chaos_group_close_failed", member=self.member_name, error=repr(err))
                # ends whatever the listener was not told to give up (it normally was: close revokes)
                w._record_event(AssignmentEvent(self.member_name, "", -1, "closed", (), w._clock()))
            if not w._stop.is_set():
                w._count("restarts")
                _log.info("chaos_group_member_restart", member=self.member_name)
                w._stop.wait(self.rng.uniform(*RESTART_PAUSE_S))

    def _consume(self, consumer: Consumer, restart_at: float) -> None:
        w = self.workload
        failures = 0
        while not w._stop.is_set():
            if w._restarts_allowed.is_set() and time.monotonic() >= restart_at:
                return
            try:
                batch = consumer.poll(200)
            except Exception as err:  # retriable under faults; a consumer failing for long is replaced
                w._count("poll_failures")
                failures += 1
                _log.info("chaos_group_poll_failed", member=self.member_name, error=repr(err))
                if failures >= MAX_POLL_FAILURES:
                    return
                w._stop.wait(0.2)
                continue
            failures = 0
            if not batch:
                if self.pending:
                    self.commit_pending(consumer, set(self.pending), why="retry")
                continue
            w._record_consumed([ConsumedRecord(self.member_name, r.partition, r.offset, r.value) for r in batch])
            for r in batch:
                self.pending[r.partition] = max(r.offset + 1, self.pending.get(r.partition, 0))
            self.commit_pending(consumer, set(self.pending), why="batch")

    def commit_pending(self, consumer: Consumer, partitions: set[int], *, why: str) -> None:
        """Commit the pending offsets of ``partitions`` (sync); recorded only when acknowledged."""
        w = self.workload
        offsets = {p: o for p, o in self.pending.items() if p in partitions}
        if not offsets:
            return
        member_id, generation = _membership(consumer)
        sent = w._clock()
        try:
            consumer.commit({(w.topic, p): o for p, o in offsets.items()}, timeout_ms=10_000)
        except Exception as err:  # not acknowledged: the records are consumed again later (at least once)
            w._count("commit_failures")
            _log.info("chaos_group_commit_failed", member=self.member_name, why=why, error=repr(err))
            if why == "revoke":
                self.drop_pending(partitions)
            return
        w._record_commit(CommitRecord(self.member_name, member_id, generation, offsets, sent, w._clock()))
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]

    def drop_pending(self, partitions: set[int]) -> None:
        for p in partitions:
            self.pending.pop(p, None)

    def event(self, consumer: Consumer, kind: str, partitions: set[TopicPartition]) -> None:
        member_id, generation = _membership(consumer)
        parts = tuple(sorted(tp.partition for tp in partitions if tp.topic == self.workload.topic))
        self.workload._record_event(
            AssignmentEvent(self.member_name, member_id, generation, kind, parts, self.workload._clock())
        )
