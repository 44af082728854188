"""The chaos run's transactional workload (``--workload eos``): N processors (threads of the run)
read the input topic A with read_committed consumers of one group and write each record to the
output topic B (same partition, value `encode_output`) in a transaction that also commits the
consumed offsets (``send_offsets_to_transaction``): read-process-write, exactly once.

Each processor has its own transactional id, kept across its restarts, so a restarted processor's
``init_transactions`` fences its previous producer (a zombie) and ends its open transaction. Per
poll: begin, send, send the offsets, commit. On an error the transaction is aborted (the producer is
replaced when the abort fails too, or it was fenced), and the consumer seeks back to the group's
committed offsets (replaced when that fails) so the inputs of the failed transaction are processed
again. Besides the faults' errors, a seeded share of transactions is aborted on purpose after their
outputs were sent, and at seeded times a processor "crashes": it sends a transaction's outputs and
offsets, then drops its producer and consumer without ending it; the next instance fences it.

Every attempt is recorded with a run-wide unique id (`TxnAttempt`), the inputs it sent outputs for
and its outcome, for `deploy.chaos._eos_check`.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import structlog

from kraftlog.client import Consumer, Producer
from kraftlog.deploy.chaos._drain import DrainOutcome, drain_workload
from kraftlog.deploy.chaos._eos_check import TxnAttempt, encode_output
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["EosOutcome", "EosWorkload"]

_log = structlog.get_logger("deploy.chaos")

#: seconds between a processor's crashes (seeded per processor)
CRASH_INTERVAL_S = (12.0, 22.0)
#: seconds a crashed processor stays away before its next instance starts (seeded)
CRASH_PAUSE_S = (0.3, 1.0)
#: a consumer that failed this many polls in a row is replaced
MAX_POLL_FAILURES = 20
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
#: the coordinator aborts a transaction left open this long (a crashed processor's, when its next
#: instance does not come): longer than a fault, shorter than the run's drain
TRANSACTION_TIMEOUT_MS = 20_000
TXN_END_TIMEOUT_S = 30.0


#: how the workload ended (`EosWorkload.finish`): the report shape of every consuming workload
EosOutcome = DrainOutcome


class EosWorkload:
    """The processors; every client they make connects with ``security``."""

    def __init__(
        self,
        bootstrap_servers: str,
        input_topic: str,
        output_topic: str,
        partitions: int,
        *,
        processors: int = 2,
        seed: int = 0,
        abort_ratio: float = 0.1,
        crashes: bool = True,
        group_id: str | None = None,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.partitions = partitions
        self.group_id = group_id or f"{input_topic}-eos"
        self.processors = processors
        self.abort_ratio = abort_ratio
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._crashes_allowed = threading.Event()
        if crashes:
            self._crashes_allowed.set()
        self.attempts: list[TxnAttempt] = []
        self.committed_offsets: dict[int, int] = {}  # highest offset committed in a transaction
        self.restarts = 0
        self.crashes = 0
        self.poll_failures = 0
        self.txn_failures = 0
        self.seek_failures = 0
        self._threads = [_Processor(self, f"p{i}", random.Random(seed * 7919 + i)) for i in range(processors)]

    # ------------------------------------------------------------------ recording (processor threads)

    def _record(self, attempt: TxnAttempt, offsets: dict[int, int] | None = None) -> None:
        with self._lock:
            self.attempts.append(attempt)
            for p, o in (offsets or {}).items():
                self.committed_offsets[p] = max(o, self.committed_offsets.get(p, -1))

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    # ------------------------------------------------------------------ the run

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def transactional_ids(self) -> list[str]:
        return [t.transactional_id for t in self._threads]

    def highest_commits(self) -> dict[int, int]:
        with self._lock:
            return dict(self.committed_offsets)

    def snapshot(self) -> list[TxnAttempt]:
        with self._lock:
            return list(self.attempts)

    @property
    def consumed_topic(self) -> str:
        """The topic the group consumes (`deploy.chaos._drain.ConsumingWorkload`)."""
        return self.input_topic

    def finish(self, timeout_s: float = 90.0) -> EosOutcome:
        """After the producers of A stopped: no more crashes; wait (bounded) until the processors
        committed up to A's log end offsets; stop them; read the group's final committed offsets
        (`deploy.chaos._drain.drain_group`)."""
        self._crashes_allowed.clear()
        return drain_workload(self, "eos", timeout_s)

    def stop(self, timeout_s: float = 90.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))


class _Processor(threading.Thread):
    def __init__(self, workload: EosWorkload, name: str, rng: random.Random) -> None:
        super().__init__(name=f"chaos-eos-{name}", daemon=True)
        self.w = workload
        self.pname = name
        self.rng = rng
        self.transactional_id = f"{workload.group_id}-{name}"  # stable: a new instance fences the old
        self.sequence = 0
        self.instances = 0  # producers initialized so far (each fences the one before)
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None

    # ------------------------------------------------------------------ clients

    def _new_producer(self) -> Producer:
        """A producer of this processor's transactional id, initialized (retried until it is)."""
        while not self.w._stop.is_set():
            producer = Producer(
                self.w.bootstrap_servers,
                transactional_id=self.transactional_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                linger_ms=5,
                request_timeout_ms=5_000,
                delivery_timeout_ms=30_000,
                max_block_ms=20_000,
                retry_backoff_ms=50,
                retry_backoff_max_ms=250,
                **self.w.security.client_kwargs(),
            )
            try:
                producer.init_transactions(timeout=30)
                if self.instances:
                    self.w._count("restarts")
                self.instances += 1
                return producer
            except Exception as err:  # the coordinator moving or loading: try again
                _log.info("chaos_eos_init_failed", processor=self.pname, error=repr(err))
                producer.close(timeout=0)
                self.w._stop.wait(0.5)
        raise InterruptedError("stopped")

    def _new_consumer(self) -> Consumer:
        consumer = Consumer(
            self.w.bootstrap_servers,
            group_id=self.w.group_id,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            max_poll_interval_ms=60_000,
            max_poll_records=100,
            request_timeout_ms=5_000,
            default_api_timeout_ms=30_000,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            client_id=f"chaos-eos-{self.pname}",
            **self.w.security.client_kwargs(),
        )
        consumer.subscribe([self.w.input_topic])
        return consumer

    def _drop_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close(timeout=0)
            except Exception as err:  # noqa: BLE001 - a fenced or broken producer; the next one fences it
                _log.info("chaos_eos_producer_close_failed", processor=self.pname, error=repr(err))
            self.producer = None

    def _drop_consumer(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception as err:  # noqa: BLE001 - the group expels it
                _log.info("chaos_eos_consumer_close_failed", processor=self.pname, error=repr(err))
            self.consumer = None

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        w = self.w
        while not w._stop.is_set():
            try:
                self._session()
            except InterruptedError:
                pass
            except Exception:  # a processor outlives any one failure: new clients take over
                _log.warning("chaos_eos_processor_failed", processor=self.pname, exc_info=True)
                w._stop.wait(0.5)
            finally:
                self._drop_producer()
                self._drop_consumer()

    def _session(self) -> None:
        w = self.w
        crash_at = time.monotonic() + self.rng.uniform(*CRASH_INTERVAL_S)
        failures = 0
        while not w._stop.is_set():
            if self.producer is None:
                self.producer = self._new_producer()
            if self.consumer is None:
                self.consumer = self._new_consumer()
            try:
                batch = self.consumer.poll(200)
            except Exception as err:  # retriable under faults; a consumer failing for long is replaced
                w._count("poll_failures")
                failures += 1
                _log.info("chaos_eos_poll_failed", processor=self.pname, error=repr(err))
                if failures >= MAX_POLL_FAILURES:
                    self._drop_consumer()
                    failures = 0
                w._stop.wait(0.2)
                continue
            failures = 0
            if not batch:
                continue
            if w._crashes_allowed.is_set() and time.monotonic() >= crash_at:
                self._crash(batch)
                return
            self._transaction(batch)

    def _next_attempt(self) -> str:
        self.sequence += 1
        return f"{self.pname}.{self.sequence}"

    def _send(self, attempt: str, batch: list[Any]) -> dict[int, int]:
        """Begin, send every output, send the offsets; returns the offsets sent."""
        assert self.producer is not None and self.consumer is not None
        offsets: dict[int, int] = {}
        self.producer.begin_transaction()
        for r in batch:
            value = encode_output(r.partition, r.offset, attempt, r.value)
            self.producer.send(self.w.output_topic, value, partition=r.partition)
            offsets[r.partition] = max(r.offset + 1, offsets.get(r.partition, 0))
        self.producer.send_offsets_to_transaction(
            {(self.w.input_topic, p): o for p, o in offsets.items()}, self.consumer.group_metadata()
        )
        return offsets

    def _transaction(self, batch: list[Any]) -> None:
        w = self.w
        attempt = self._next_attempt()
        inputs = tuple((r.partition, r.offset) for r in batch)
        deliberate = self.rng.random() < w.abort_ratio
        stage = "send"
        try:
            offsets = self._send(attempt, batch)
            if deliberate:
                stage = "abort"
                assert self.producer is not None
                self.producer.flush(TXN_END_TIMEOUT_S)  # the outputs reach B, then are aborted
                self.producer.abort_transaction(TXN_END_TIMEOUT_S)
                w._record(TxnAttempt(attempt, self.pname, inputs, "aborted", "deliberate"))
                self._rewind()
                return
            stage = "commit"
            assert self.producer is not None
            self.producer.commit_transaction(TXN_END_TIMEOUT_S)
        except Exception as err:
            w._count("txn_failures")
            _log.info("chaos_eos_txn_failed", processor=self.pname, attempt=attempt, stage=stage, error=repr(err))
            outcome = self._abort(stage)
            w._record(TxnAttempt(attempt, self.pname, inputs, outcome, f"{stage}: {type(err).__name__}"))
            if self.producer is None:  # the new instance ends the old one's transaction first
                self.producer = self._new_producer()
            self._rewind()
            return
        w._record(TxnAttempt(attempt, self.pname, inputs, "committed"), offsets)

    def _abort(self, stage: str) -> str:
        """After a failed transaction: abort it; replace the producer when that fails. Returns the
        attempt's outcome: aborted, or unknown when its commit was asked for and the abort failed."""
        try:
            assert self.producer is not None
            self.producer.abort_transaction(TXN_END_TIMEOUT_S)
            return "aborted"
        except Exception as err:  # fenced, fatal or unreachable: the next instance ends it
            _log.info("chaos_eos_abort_failed", processor=self.pname, error=repr(err))
            self._drop_producer()
            return "unknown" if stage == "commit" else "aborted"

    def _rewind(self) -> None:
        """Seek every assigned partition back to the group's committed offset (waiting out pending
        transactional commits), so the inputs of the aborted transaction are processed again."""
        consumer = self.consumer
        if consumer is None:
            return
        try:
            assigned = sorted(consumer.assignment())
            committed = consumer.committed([(tp.topic, tp.partition) for tp in assigned], timeout_ms=30_000)
            for tp in assigned:
                found = committed.get(tp)
                if found is None:
                    consumer.seek_to_beginning((tp.topic, tp.partition))
                else:
                    consumer.seek((tp.topic, tp.partition), found.offset)
        except Exception as err:  # a new consumer starts from the committed offsets
            self.w._count("seek_failures")
            _log.info("chaos_eos_rewind_failed", processor=self.pname, error=repr(err))
            self._drop_consumer()

    def _crash(self, batch: list[Any]) -> None:
        """Send a transaction's outputs and offsets, then drop both clients without ending it."""
        w = self.w
        attempt = self._next_attempt()
        try:
            self._send(attempt, batch)
            assert self.producer is not None
            self.producer.flush(10)
        except Exception as err:  # noqa: BLE001 - a crash all the same
            _log.info("chaos_eos_crash_send_failed", processor=self.pname, error=repr(err))
        w._record(TxnAttempt(attempt, self.pname, tuple((r.partition, r.offset) for r in batch), "aborted", "crash"))
        w._count("crashes")
        _log.info("chaos_eos_processor_crash", processor=self.pname, attempt=attempt)
        self._drop_producer()
        self._drop_consumer()
        w._stop.wait(self.rng.uniform(*CRASH_PAUSE_S))
