"""The producer's sender thread, as Kafka's ``Sender``: which batches are ready for which leader, the
Produce requests, retries with back-off, splitting a batch that is too large, completing futures
(part of `client.producer._producer.Producer`).
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import grpc

from kraftlog.client._channels import ChannelPool, grpc_error
from kraftlog.client._metadata import ClusterMetadata, TopicPartition
from kraftlog.client.producer._producer_idempotence import IdempotenceState
from kraftlog.client.producer._producer_types import (
    _MESSAGE_TOO_LARGE,
    ProducerClosedError,
    _Batch,
    _log,
)
from kraftlog.common import backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.common.records.compression import CompressionType
from kraftlog.proto import broker_pb2


class _ProducerSender:
    """The sender thread: drain ready batches per leader, send, handle answers, retry, split, finish."""

    # Producer's fields this part uses (set in Producer.__init__).
    acks: int
    transactional_id: str | None
    batch_size: int
    linger_s: float
    codec: CompressionType
    max_in_flight: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    delivery_timeout_s: float
    request_timeout_ms: int
    max_request_size: int
    _rng: random.Random
    _pool: ChannelPool
    _metadata: ClusterMetadata
    _lock: threading.Condition
    _batches: dict[TopicPartition, deque[_Batch]]
    _incomplete: set[_Batch]
    _in_flight: dict[int, int]
    _muted: set[TopicPartition]
    _unreachable: dict[int, tuple[int, float]]
    _completions: deque[tuple[int, list[_Batch], Any]]
    _drain_start: dict[int, int]
    _idempotence: IdempotenceState | None

    if TYPE_CHECKING:

        def _txn_add_partitions(self) -> float | None:
            """A transactional producer's hook (`_producer_txn`): add the partitions batches wait for."""

    _buffer_used: int
    _memory_waiters: int
    _flushing: int
    _woken: bool
    _closing: bool
    _forced: bool
    _sender_done: bool

    def _wake(self) -> None:
        with self._lock:
            self._woken = True
            self._lock.notify_all()

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._forced:
                        break
                    if (
                        self._closing
                        and not self._incomplete
                        and not any(self._in_flight.values())
                        and not self._completions
                    ):
                        break
                self._run_once()
        except Exception:  # a bug here must not leave callers waiting forever
            _log.exception("producer_sender_crashed")
            self._forced = True
        finally:
            self._abort_all(ProducerClosedError("Producer is closed forcefully."))

    def _run_once(self) -> None:
        self._metadata.maybe_update()
        with self._lock:
            completions = list(self._completions)
            self._completions.clear()
        for node_id, batches, future in completions:
            self._handle_response(node_id, batches, future)
        id_wait = self._ensure_producer_id()
        now = time.monotonic()
        sends: list[tuple[int, list[_Batch]]] = []
        with self._lock:
            expired = self._expire(now)
            ready, delay, unknown_leader = self._ready(now) if id_wait is None else (set(), id_wait, False)
            if unknown_leader:
                self._metadata.request_update()
            for node_id in ready:
                batches = self._drain(node_id, now)
                if batches:
                    sends.append((node_id, batches))
        for batch, elapsed in expired:
            error = kerr.RequestTimedOutError(
                f"Expiring {batch.record_count} record(s) for {batch.tp}:{elapsed:.0f} ms has passed "
                "since batch creation"
            )
            self._note_failure(batch, error)
            self._finish(batch, error=error)
        for node_id, batches in sends:
            self._send(node_id, batches)
        delay = min(delay, self._metadata.time_to_next_update())
        with self._lock:
            done = self._closing and not self._incomplete and not any(self._in_flight.values())
            if not self._woken and not self._completions and not sends and not done:
                self._lock.wait(min(delay, 1.0))
            self._woken = False

    def _expire(self, now: float) -> list[tuple[_Batch, float]]:
        out = []
        for dq in self._batches.values():
            while dq and not dq[0].in_flight and now - dq[0].created >= self.delivery_timeout_s:
                batch = dq.popleft()
                out.append((batch, (now - batch.created) * 1000))
        return out

    def _ready(self, now: float) -> tuple[set[int], float, bool]:
        ready: set[int] = set()
        delay = float("inf")
        unknown = False
        everything = self._closing or self._flushing > 0 or self._memory_waiters > 0
        for tp, dq in self._batches.items():
            if not dq:
                continue
            batch = dq[0]
            delay = min(delay, batch.created + self.delivery_timeout_s - now)
            leader = self._metadata.leader_for(tp)
            if leader is None:
                unknown = True
                continue
            if tp in self._muted or leader.node_id in ready:
                continue
            if self._idempotence is not None and not self._idempotence.may_send(tp, batch.stamp):
                continue
            if self._awaiting_metadata(leader.node_id, now):
                delay = min(delay, 0.02)
                continue
            if batch.retry_at > now:
                delay = min(delay, batch.retry_at - now)
                continue
            if batch.attempts or everything or len(dq) > 1 or batch.is_full(self.batch_size):
                ready.add(leader.node_id)
                continue
            waited = now - batch.created
            if waited >= self.linger_s:
                ready.add(leader.node_id)
            else:
                delay = min(delay, self.linger_s - waited)
        return ready, max(0.0, delay), unknown

    def _awaiting_metadata(self, node_id: int, now: float) -> bool:
        """True while a node that did not answer waits for a metadata refresh newer than its failure."""
        entry = self._unreachable.get(node_id)
        if entry is None:
            return False
        version, failed_at = entry
        if self._metadata.version > version or now - failed_at >= self.request_timeout_ms / 1000.0:
            del self._unreachable[node_id]
            return False
        return True

    def _drain(self, node_id: int, now: float) -> list[_Batch]:
        if self._in_flight.get(node_id, 0) >= self.max_in_flight:
            return []
        tps = [
            tp
            for tp, dq in self._batches.items()
            if dq
            and tp not in self._muted
            and (leader := self._metadata.leader_for(tp)) is not None
            and leader.node_id == node_id
        ]
        if not tps:
            return []
        start = self._drain_start.get(node_id, 0) % len(tps)
        self._drain_start[node_id] = start + 1
        out: list[_Batch] = []
        size = 0
        for tp in tps[start:] + tps[:start]:
            dq = self._batches[tp]
            batch = dq[0]
            if batch.retry_at > now:
                continue
            idem = self._idempotence
            if idem is not None and not idem.may_send(tp, batch.stamp):
                continue
            batch_bytes = batch.size_estimate
            if out and size + batch_bytes > self.max_request_size:
                break
            batch.sealed = True  # encoded by `_send`, outside the lock
            if idem is not None:
                self._stamp(batch, idem)
            dq.popleft()
            size += batch_bytes
            out.append(batch)
            if self.max_in_flight == 1:
                self._muted.add(tp)
        return out

    def _send(self, node_id: int, batches: list[_Batch]) -> None:
        broker = self._metadata.broker(node_id)
        for batch in batches:
            batch.close()
        now = time.monotonic()
        by_topic: dict[str, list[broker_pb2.ProduceRequest.PartitionData]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp.topic, []).append(
                broker_pb2.ProduceRequest.PartitionData(index=batch.tp.partition, records=batch.payload)
            )
        request = broker_pb2.ProduceRequest(
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            transactional_id=self.transactional_id or "",  # its batches are authorized by it
            abortable_error=True,  # KIP-890: it takes TRANSACTION_ABORTABLE, as Produce v11+ clients do
            topics=[broker_pb2.ProduceRequest.TopicData(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        with self._lock:
            for batch in batches:
                batch.attempts += 1
                batch.last_attempt = now
                batch.in_flight = True
                if self._idempotence is not None and batch.stamp is not None:
                    self._idempotence.sent(batch.tp, batch.stamp)
            self._in_flight[node_id] = self._in_flight.get(node_id, 0) + 1
        try:
            if broker is None:
                raise kerr.LeaderNotAvailableError(f"broker {node_id} is no longer in the metadata")
            future = self._pool.stub(broker.address).Produce.future(request, timeout=self.request_timeout_ms / 1000.0)
        except Exception as err:  # a closed channel or a vanished broker: handled like a failed call
            self._answered(node_id, batches)
            self._metadata.request_update()
            error = (
                err if isinstance(err, kerr.KafkaError) else kerr.NetworkError(f"Produce to broker {node_id}: {err}")
            )
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        if self.acks == 0:  # nothing will come back that a record could wait for
            for batch in batches:
                self._finish(batch, base_offset=-1)
        future.add_done_callback(lambda f: self._on_response(node_id, batches, f))

    def _on_response(self, node_id: int, batches: list[_Batch], future: Any) -> None:
        with self._lock:
            self._completions.append((node_id, batches, future))
            self._woken = True
            self._lock.notify_all()

    def _answered(self, node_id: int, batches: list[_Batch]) -> None:
        with self._lock:
            self._in_flight[node_id] = max(0, self._in_flight.get(node_id, 0) - 1)
            for batch in batches:
                batch.in_flight = False
                self._muted.discard(batch.tp)
                if self._idempotence is not None and batch.stamp is not None:
                    self._idempotence.answered(batch.tp, batch.stamp)

    def _handle_response(self, node_id: int, batches: list[_Batch], future: Any) -> None:
        self._answered(node_id, batches)
        try:
            response = future.result()
        except (grpc.RpcError, grpc.FutureCancelledError, concurrent.futures.CancelledError) as err:
            error = (
                grpc_error(err, f"Produce to broker {node_id}")
                if isinstance(err, grpc.RpcError)
                else kerr.NetworkError(f"Produce to broker {node_id} was cancelled")
            )
            broker = self._metadata.broker(node_id)
            version = self._metadata.request_update()
            if (
                broker is not None
                and isinstance(err, grpc.RpcError)
                and err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            ):
                # a leader cut off the network answers nothing until the deadline: ask another broker
                # who leads now before sending there again (Kafka's sender waits out the node's
                # reconnect backoff, during which the metadata refresh lands)
                self._pool.mark_unreachable(broker.address)
                with self._lock:
                    self._unreachable[node_id] = (version, time.monotonic())
            if self.acks == 0:
                # the records were already completed; like Kafka's client on a disconnect, learn
                # where the leader went instead of sending on into the void until metadata.max.age.ms
                _log.debug("produce_acks0_failed", node=node_id, error=error.error_name)
                return
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        except kerr.KafkaError as err:
            self._metadata.request_update()
            if self.acks == 0:
                return
            for batch in batches:
                self._retry_or_fail(batch, err)
            return
        if self.acks == 0:
            self._learn_from_acks0_response(node_id, batches, response)
            return
        if response.error.code:
            error = kerr.error_for_code(response.error.code)(response.error.message or None)
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        results = {(t.name, p.index): p for t in response.topics for p in t.partitions}
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None:
                self._retry_or_fail(
                    batch, kerr.UnknownServerError(f"the response of broker {node_id} has no result for {batch.tp}")
                )
                continue
            code = result.error.code
            if code == 0:
                if self._idempotence is not None and batch.stamp is not None:
                    with self._lock:
                        self._idempotence.acked(batch.tp, batch.stamp, batch.record_count)
                self._finish(batch, base_offset=result.base_offset, log_append_time=result.log_append_time_ms)
                continue
            message = result.error.message or None
            if result.record_errors:
                details = "; ".join(f"batch_index {e.batch_index}: {e.message}" for e in result.record_errors)
                message = f"{message}: {details}" if message else details
            hint = result.current_leader if result.HasField("current_leader") else None
            context = {}
            if code == kerr.NotLeaderOrFollowerError.error_code and hint is not None and hint.leader_id >= 0:
                context = {"leader_id": hint.leader_id, "leader_epoch": hint.leader_epoch}
            error = kerr.error_for_code(code)(message, **context)
            if code == _MESSAGE_TOO_LARGE and batch.record_count > 1 and not self._forced:
                self._split(batch)
                continue
            moved = False
            if hint is not None and hint.leader_id >= 0:
                moved = self._metadata.apply_leader_hint(
                    batch.tp, hint.leader_id, hint.leader_epoch, response.node_endpoints
                )
            if isinstance(error, kerr.InvalidMetadataError) and not moved:
                self._metadata.request_update()
            self._retry_or_fail(batch, error, backoff=not moved)

    def _learn_from_acks0_response(self, node_id: int, batches: list[_Batch], response: Any) -> None:
        """acks=0: the records are done (never retried, as in Kafka), but an error answer still
        says the metadata is stale: take the leader hint (KIP-951) or refresh, so the next
        batches go to the new leader. (Kafka's broker closes the connection on such an error for
        the same purpose.)"""
        refresh = response.error.code != 0
        for t in response.topics:
            for p in t.partitions:
                if not p.error.code:
                    continue
                error_cls = kerr.error_for_code(p.error.code)
                hint = p.current_leader if p.HasField("current_leader") else None
                moved = (
                    hint is not None
                    and hint.leader_id >= 0
                    and self._metadata.apply_leader_hint(
                        TopicPartition(t.name, p.index), hint.leader_id, hint.leader_epoch, response.node_endpoints
                    )
                )
                if issubclass(error_cls, kerr.InvalidMetadataError) and not moved:
                    refresh = True
                _log.debug(
                    "produce_acks0_partition_error",
                    node=node_id,
                    tp=f"{t.name}-{p.index}",
                    error=error_cls.error_name,
                    moved=moved,
                    batches=len(batches),
                )
        if refresh:
            self._metadata.request_update()

    def _retry_or_fail(self, batch: _Batch, error: kerr.KafkaError, *, backoff: bool = True) -> None:
        now = time.monotonic()
        if batch.finished:
            return
        retriable = error.retriable
        if self._idempotence is not None:
            with self._lock:
                retriable = self._idempotence.on_error(batch.tp, batch.stamp, error)
        if (
            retriable
            and batch.attempts <= self.retries
            and not self._forced
            and now - batch.created < self.delivery_timeout_s
        ):
            delay = 0.0
            if backoff:
                delay = (
                    backoff_ms(
                        batch.attempts - 1,
                        base_ms=self.retry_backoff_ms,
                        max_ms=self.retry_backoff_max_ms,
                        rng=self._rng,
                    )
                    / 1000.0
                )
            _log.debug(
                "produce_retry",
                tp=str(batch.tp),
                attempt=batch.attempts,
                error=error.error_name,
                delay_ms=round(delay * 1000),
            )
            with self._lock:
                batch.retry_at = now + delay
                self._requeue(batch)
                self._woken = True
            return
        self._note_failure(batch, error)
        self._finish(batch, error=error)

    def _note_failure(self, batch: _Batch, error: BaseException) -> None:
        """A batch failed for good (an error, or its delivery timeout in the queue): after it was
        sent its outcome is unknown, so its partition's sequence must start over (an epoch bump);
        a transactional producer's transaction can only be aborted now."""
        idem = self._idempotence
        if idem is None:
            return
        with self._lock:
            if batch.attempts > 0:
                idem.failed_after_send(error)
            elif idem.transactional:  # never sent, yet part of the transaction
                idem.abortable = idem.abortable or error

    def _requeue(self, batch: _Batch) -> None:
        """Back to the head of its partition; stamped batches in sequence order (lock held)."""
        dq = self._batches.setdefault(batch.tp, deque())
        stamp = batch.stamp
        if stamp is None:
            dq.appendleft(batch)
            return
        i = 0
        while i < len(dq):
            other = dq[i].stamp
            if other is None or other.base_sequence >= stamp.base_sequence:
                break
            i += 1
        dq.insert(i, batch)

    # ================================================================ idempotence

    def _stamp(self, batch: _Batch, idem: IdempotenceState) -> None:
        """Give a drained batch its producer id, epoch and sequence (lock held); a batch from an
        older epoch is stamped anew."""
        stamp = idem.stamp(batch.tp, batch.stamp, batch.record_count)
        if stamp != batch.stamp:
            batch.restamp(stamp, transactional=idem.transactional)

    def _ensure_producer_id(self) -> float | None:
        """None when batches may go out; else the seconds to wait (InitProducerId failed, or an
        epoch bump waits for what is in flight)."""
        idem = self._idempotence
        if idem is None:
            return None
        if idem.transactional:
            return self._txn_add_partitions()  # the producer id comes from init_transactions
        with self._lock:
            if idem.ready:
                return None
            if idem.maybe_bump():
                _log.info("producer_epoch_bumped", producer_id=idem.producer_id, epoch=idem.epoch)
                return None
            if not idem.new_id_needed:
                return 0.05  # a bump waits for the batches in flight
        request = broker_pb2.InitProducerIdRequest(producer_id=idem.producer_id, producer_epoch=idem.epoch)
        for address in self._metadata.candidates():
            try:
                r = self._pool.stub(address).InitProducerId(request, timeout=self.request_timeout_ms / 1000.0)
            except grpc.RpcError as err:
                _log.debug("init_producer_id_failed", broker=address, error=str(err.code()))
                continue
            if r.error.code == 0:
                with self._lock:
                    idem.set_producer_id(r.producer_id, r.producer_epoch)
                _log.info("producer_id_assigned", producer_id=r.producer_id, epoch=r.producer_epoch)
                return None
            error = kerr.error_for_code(r.error.code)
            if not error.retriable:
                self._abort_all(error(f"InitProducerId: {r.error.message or r.error.name}"))
                return None
        return self.retry_backoff_ms / 1000.0

    def _split(self, batch: _Batch) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: retry it as two halves."""
        children = batch.halves(self.codec)
        children[0].reserved, batch.reserved = batch.reserved, 0
        with self._lock:
            batch.pending = len(children)
            self._incomplete.discard(batch)
            dq = self._batches.setdefault(batch.tp, deque())
            for child in reversed(children):
                dq.appendleft(child)
                child.close()
                self._incomplete.add(child)
            self._woken = True

    def _finish(
        self, batch: _Batch, *, base_offset: int = -1, log_append_time: int = -1, error: BaseException | None = None
    ) -> None:
        """Complete every record of ``batch`` (success or ``error``) and release its memory."""
        with self._lock:
            if batch.finished:
                return
            batch.finished = True
            self._incomplete.discard(batch)
            self._buffer_used -= batch.reserved
            batch.reserved = 0
            self._lock.notify_all()
        batch.settle(base_offset, log_append_time, error)
        with self._lock:
            batch.done.set()
            parent = batch.parent
            while parent is not None:
                parent.pending -= 1
                if parent.pending > 0:
                    break
                parent.done.set()
                parent = parent.parent

    def _abort_all(self, error: BaseException) -> None:
        with self._lock:
            self._sender_done = True
            pending = list(self._incomplete)
            for dq in self._batches.values():
                dq.clear()
        for batch in pending:
            self._finish(batch, error=error)
