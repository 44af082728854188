"""The chaos run's queue workload (``--workload queue``, issue 28), after Jepsen's Kafka test: worker
threads send, poll and run transactions mixing both against a topic of its own, with kraftlog's
client, and write every operation to a history (`deploy.chaos._queue_history`) as it happens; the
checker (`deploy.chaos._queue_check`) reads only that history.

Workers differ (`WORKER_KINDS`, worker i takes kind i mod 4): a transactional producer with a
subscribed read_committed consumer of a classic group (offsets committed in the transaction, or
synchronously after a plain poll); an idempotent producer with an assigned consumer; a transactional
producer with an assigned consumer; an idempotent producer with an auto-committing KIP-848 consumer.
A transactional worker sends only inside transactions (a send-only transaction is recorded as
``send``, a mixed one as ``txn``).

Outcomes, so that the checker is never told more than the worker knows: ``ok`` when the send was
acknowledged, the poll returned, or ``commit_transaction`` returned; ``fail`` when nothing happened
(``abort_transaction`` returned; the consumer is then sought back to where the transaction began,
or to the group's committed offsets); ``info`` otherwise (a send or a commit that raised: it may
have happened). After ``info`` or any error, the worker "crashes" as Jepsen's processes do: it drops
both clients (a transactional producer's next instance fences the old one) and goes on as a new
process (``index + workers * crashes``), whose first operation is its ``assign`` or ``subscribe``.
Rebalance listener events during an operation are recorded in its ``rebalance`` keys.

Seeded on purpose: ``abort_ratio`` of the transactions are aborted after their records were flushed
to the log (so an aborted read has something to show), and before ``crash_ratio`` of the operations
the worker crashes (new clients, a group member leaving and joining, a producer fenced).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from kraftlog.client import Consumer, Producer, RebalanceListener, TopicPartition
from kraftlog.deploy.chaos._queue_history import HistoryOp, HistoryWriter, Mop, Poll, Send
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["WORKER_KINDS", "QueueWorkload", "WorkerKind"]

_log = structlog.get_logger("deploy.chaos")

SEND_TIMEOUT_S = 20.0
TXN_END_TIMEOUT_S = 20.0
TRANSACTION_TIMEOUT_MS = 15_000
POLL_MS = 200
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
#: the process number of the final reader, above any worker's
FINAL_PROCESS = 1_000_000


@dataclass(frozen=True, slots=True)
class WorkerKind:
    producer: str  # idempotent | transactional
    consumer: str  # assign | subscribe
    group_protocol: str | None = None  # subscribe: classic | consumer
    auto_commit: bool = False


WORKER_KINDS = (
    WorkerKind("transactional", "subscribe", "classic"),
    WorkerKind("idempotent", "assign"),
    WorkerKind("transactional", "assign"),
    WorkerKind("idempotent", "subscribe", "consumer", auto_commit=True),
)


class QueueWorkload:
    """The workers of one run; ``keys`` partitions of ``topic`` are the history's keys."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        keys: int,
        history: HistoryWriter,
        *,
        workers: int = 4,
        seed: int = 0,
        pause_s: tuple[float, float] = (0.01, 0.06),
        abort_ratio: float = 0.1,
        crash_ratio: float = 0.005,
        security: ChaosSecurity = PLAINTEXT,
        transactions: bool = True,
    ) -> None:
        """``transactions=False``: idempotent workers only (no ``txn`` operation; `make soak`'s
        queue run without transactions)."""
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.keys = keys
        self.history = history
        self.workers = workers
        self.pause_s = pause_s
        self.abort_ratio = abort_ratio
        self.crash_ratio = crash_ratio
        self.security = security
        self.counts: Counter[str] = Counter()
        self.acknowledged: dict[int, int] = {}  # key -> the highest offset an ok operation sent to
        self._lock = threading.Lock()
        self._values = itertools.count(1)
        self._stop = threading.Event()
        kinds = WORKER_KINDS if transactions else tuple(k for k in WORKER_KINDS if k.producer == "idempotent")
        self._threads = [
            _Worker(self, i, kinds[i % len(kinds)], random.Random(seed * 7919 + i)) for i in range(workers)
        ]

    def next_value(self) -> int:
        with self._lock:
            return next(self._values)

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def acknowledge(self, sends: Iterable[Send]) -> None:
        with self._lock:
            for s in sends:
                if s.offset is not None:
                    self.acknowledged[s.key] = max(s.offset, self.acknowledged.get(s.key, -1))

    def group_ids(self) -> list[str]:
        return sorted({f"{self.topic}-{k.group_protocol}" for k in WORKER_KINDS if k.group_protocol})

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout_s: float = 90.0) -> None:
        """Stop the workers; each ends its operation (and transaction) first."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def final_reads(self, timeout_s: float = 60.0) -> bool:
        """After `stop`: a fresh read_committed consumer assigned every key reads from the beginning
        past every acknowledged offset and to the end offsets (Jepsen's final polls), each poll an
        operation of the history. True when it got there within ``timeout_s`` (a transaction left
        open holds the last stable offset back until the coordinator aborts it)."""
        consumer = _consumer(self, None)
        try:
            tps = [(self.topic, k) for k in range(self.keys)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            self.history.complete(
                self.history.invoke(FINAL_PROCESS, "assign", tuple(range(self.keys))), "ok", tuple(range(self.keys))
            )
            deadline = time.monotonic() + timeout_s
            ends = consumer.end_offsets(tps, timeout_ms=int(timeout_s * 1000))
            targets = {tp: max(ends[TopicPartition(*tp)], self.acknowledged.get(tp[1], -1) + 1) for tp in tps}
            while time.monotonic() < deadline:
                if all(consumer.position(tp, timeout_ms=10_000) >= target for tp, target in targets.items()):
                    return True
                invocation = self.history.invoke(FINAL_PROCESS, "poll", (Poll(),))
                records = consumer.poll(500)
                self.history.complete(invocation, "ok", (_poll_of(records, self.topic),))
            return False
        finally:
            consumer.close()


def _consumer(w: QueueWorkload, kind: WorkerKind | None) -> Consumer:
    group: dict[str, Any] = {}
    if kind is not None and kind.consumer == "subscribe":
        group = {
            "group_id": f"{w.topic}-{kind.group_protocol}",
            "group_protocol": kind.group_protocol,
            "enable_auto_commit": kind.auto_commit,
        }
        if kind.group_protocol == "classic":  # KIP-848: the coordinator's keys
            group.update(session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    else:
        group = {"enable_auto_commit": False}
    return Consumer(
        w.bootstrap_servers,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        max_poll_records=50,
        request_timeout_ms=5_000,
        default_api_timeout_ms=20_000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=250,
        **group,
        **w.security.client_kwargs(),
    )


def _poll_of(records: list[Any], topic: str) -> Poll:
    reads: dict[int, list[tuple[int, int]]] = {}
    for r in records:
        if r.topic == topic:
            reads.setdefault(r.partition, []).append((r.offset, int(r.value)))
    return Poll({k: tuple(v) for k, v in reads.items()})


class _DeliberateAbort(Exception):
    """A transaction the worker aborts on purpose, so that aborted records are there to hide."""


class _Listener(RebalanceListener):
    def __init__(self, worker: _Worker) -> None:
        self.worker = worker

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.worker.rebalanced.update(tp.partition for tp in revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.worker.rebalanced.update(tp.partition for tp in assigned)


class _Worker(threading.Thread):
    def __init__(self, workload: QueueWorkload, index: int, kind: WorkerKind, rng: random.Random) -> None:
        super().__init__(name=f"chaos-queue-{index}", daemon=True)
        self.w = workload
        self.index = index
        self.kind = kind
        self.rng = rng
        self.process = index
        self.transactional_id = f"{workload.topic}-q{index}"
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.rebalanced: set[int] = set()
        self.unfenced = False  # a transactional producer was dropped: its transaction may be open

    # ------------------------------------------------------------------ clients

    def _open(self) -> None:
        w = self.w
        transactional = self.kind.producer == "transactional"
        self.producer = Producer(
            w.bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            transactional_id=self.transactional_id if transactional else None,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            linger_ms=2,
            request_timeout_ms=5_000,
            delivery_timeout_ms=int(SEND_TIMEOUT_S * 1000) - 1000,
            max_block_ms=10_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            **w.security.client_kwargs(),
        )
        if transactional:
            self.producer.init_transactions(timeout=30)
            self.unfenced = False
        self.consumer = _consumer(w, self.kind)
        if self.kind.consumer == "subscribe":
            keys = tuple(range(w.keys))
            invocation = w.history.invoke(self.process, "subscribe", keys)
            self.consumer.subscribe([w.topic], listener=_Listener(self))
            w.history.complete(invocation, "ok", keys)
        else:
            self._assign()

    def _assign(self) -> None:
        assert self.consumer is not None
        keys = tuple(sorted(self.rng.sample(range(self.w.keys), self.rng.randint(1, self.w.keys))))
        invocation = self.w.history.invoke(self.process, "assign", keys)
        self.consumer.assign([(self.w.topic, k) for k in keys])
        self.w.history.complete(invocation, "ok", keys)

    def _crash(self, why: str) -> None:
        """Drop both clients; go on as a new process (Jepsen's crash after an indefinite result)."""
        self.w.count("crashes")
        _log.info("chaos_queue_worker_crash", worker=self.index, process=self.process, why=why)
        if self.producer is not None:
            try:
                self.producer.close(timeout=0)
            except Exception as err:  # noqa: BLE001 - the next instance fences it
                _log.info("chaos_queue_producer_close_failed", error=repr(err))
            self.unfenced = self.kind.producer == "transactional"
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception as err:  # noqa: BLE001 - the group expels it
                _log.info("chaos_queue_consumer_close_failed", error=repr(err))
        self.producer = self.consumer = None
        self.rebalanced.clear()
        invocation = self.w.history.invoke(self.process, "crash", None)
        self.w.history.complete(invocation, "info", None, error=why)
        self.process += self.w.workers

    def _fence(self) -> None:
        """At the end: a dropped transactional producer's transaction must not hold the last stable
        offset back from the final reads, so a new instance of its id ends it."""
        try:
            producer = Producer(
                self.w.bootstrap_servers, transactional_id=self.transactional_id, **self.w.security.client_kwargs()
            )
            try:
                producer.init_transactions(timeout=30)
            finally:
                producer.close(timeout=5)
        except Exception as err:  # noqa: BLE001 - the coordinator's transaction timeout ends it
            _log.warning("chaos_queue_fence_failed", worker=self.index, error=repr(err))

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        w = self.w
        while not w._stop.is_set():
            try:
                if self.producer is None:
                    self._open()
                self._one()
            except Exception as err:
                self._crash(repr(err))
                w._stop.wait(0.3)
            w._stop.wait(self.rng.uniform(*w.pause_s))
        if self.producer is not None:
            self.producer.close(timeout=5)
        if self.consumer is not None:
            self.consumer.close()
        if self.unfenced:
            self._fence()

    def _one(self) -> None:
        if self.rng.random() < self.w.crash_ratio:  # Jepsen's client crashes: new clients, a new process
            self._crash("deliberate")
            return
        r = self.rng.random()
        if r < 0.04 and self.kind.consumer == "assign":
            self._assign()
        elif r < 0.45:
            sends = [Send(self.rng.randrange(self.w.keys), self.w.next_value()) for _ in range(self.rng.randint(1, 3))]
            if self.kind.producer == "transactional":
                self._txn("send", list(sends))
            else:
                self._send(sends)
        elif r < 0.75 or self.kind.producer != "transactional":
            self._poll()
        else:
            mops: list[Mop] = [
                Send(self.rng.randrange(self.w.keys), self.w.next_value()) if self.rng.random() < 0.5 else Poll()
                for _ in range(self.rng.randint(2, 4))
            ]
            self._txn("txn", mops)

    def _complete(self, invocation: HistoryOp, op_type: str, value: Any, error: str | None = None) -> None:
        self.w.history.complete(invocation, op_type, value, rebalance=sorted(self.rebalanced), error=error)
        if op_type == "ok":
            self.w.acknowledge(m for m in value if isinstance(m, Send))
        self.rebalanced.clear()
        self.w.count(f"{invocation.f}_{op_type}")

    def _send(self, sends: list[Send]) -> None:
        assert self.producer is not None
        invocation = self.w.history.invoke(self.process, "send", tuple(sends))
        try:
            futures = [self.producer.send(self.w.topic, str(s.value).encode(), partition=s.key) for s in sends]
            done = tuple(
                Send(s.key, s.value, f.result(SEND_TIMEOUT_S).offset) for s, f in zip(sends, futures, strict=True)
            )
        except Exception as err:
            self._complete(invocation, "info", tuple(sends), repr(err))
            raise
        self._complete(invocation, "ok", done)

    def _poll(self) -> None:
        assert self.consumer is not None
        invocation = self.w.history.invoke(self.process, "poll", (Poll(),))
        try:
            records = self.consumer.poll(POLL_MS)
        except Exception as err:  # nothing was returned
            self._complete(invocation, "fail", (Poll(),), repr(err))
            raise
        poll = _poll_of(records, self.w.topic)
        try:
            if self.kind.consumer == "subscribe" and not self.kind.auto_commit and records:
                self.consumer.commit()
        except Exception as err:  # read, but where the group resumes is not known
            self._complete(invocation, "info", (poll,), repr(err))
            raise
        self._complete(invocation, "ok", (poll,))

    def _positions(self) -> dict[tuple[str, int], int]:
        assert self.consumer is not None
        return {
            (tp.topic, tp.partition): self.consumer.position((tp.topic, tp.partition))
            for tp in self.consumer.assignment()
        }

    def _txn(self, f: str, mops: list[Mop]) -> None:
        assert self.producer is not None and self.consumer is not None
        producer, consumer = self.producer, self.consumer
        invocation = self.w.history.invoke(self.process, f, tuple(mops))
        polls = any(isinstance(m, Poll) for m in mops)
        before = self._positions() if polls and self.kind.consumer == "assign" else {}
        done: list[Any] = []
        stage = "send"
        try:
            producer.begin_transaction()
            for mop in mops:
                if isinstance(mop, Send):
                    future = producer.send(self.w.topic, str(mop.value).encode(), partition=mop.key)
                    done.append((mop, future))
                else:
                    done.append(_poll_of(consumer.poll(POLL_MS), self.w.topic))
            if polls and self.kind.consumer == "subscribe":
                producer.send_offsets_to_transaction(self._positions(), consumer.group_metadata())
            if self.rng.random() < self.w.abort_ratio:  # its records reach the log, then are aborted
                stage = "deliberate abort"
                producer.flush(TXN_END_TIMEOUT_S)
                raise _DeliberateAbort()
            stage = "commit"
            producer.commit_transaction(TXN_END_TIMEOUT_S)
        except Exception as err:
            # what the transaction polled stays in the history (a consumer must only ever return
            # committed data); its sends' offsets are not known to have held
            seen = [m[0] if isinstance(m, tuple) else m for m in done]
            tried = tuple(seen + [Send(m.key, m.value) if isinstance(m, Send) else Poll() for m in mops[len(done) :]])
            if stage == "commit" or not self._abort(before):
                self._complete(invocation, "info", tried, f"{stage}: {err!r}")
                raise
            self._complete(invocation, "fail", tried, f"{stage}: {err!r}")
            return
        value = tuple(Send(m[0].key, m[0].value, m[1].result(0).offset) if isinstance(m, tuple) else m for m in done)
        self._complete(invocation, "ok", value)

    def _abort(self, before: dict[tuple[str, int], int]) -> bool:
        """Abort the open transaction and seek the consumer back; False when either failed."""
        assert self.producer is not None and self.consumer is not None
        try:
            self.producer.abort_transaction(TXN_END_TIMEOUT_S)
            if self.kind.consumer == "assign":
                for tp, offset in before.items():
                    self.consumer.seek(tp, offset)
            else:
                tps = [(tp.topic, tp.partition) for tp in self.consumer.assignment()]
                committed = self.consumer.committed(tps, timeout_ms=20_000) if tps else {}
                for tp in tps:
                    found = committed.get(TopicPartition(*tp))
                    if found is None:
                        self.consumer.seek_to_beginning(tp)
                    else:
                        self.consumer.seek(tp, found.offset)
                    # back to the committed offset, behind this worker's polls outside
                    # transactions: the history says so, as for a rebalance
                    self.rebalanced.add(tp[1])
        except Exception as err:  # noqa: BLE001 - the caller records the transaction as unknown
            _log.info("chaos_queue_abort_failed", worker=self.index, error=repr(err))
            return False
        return True
