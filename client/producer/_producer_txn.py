"""The transactional producer (KIP-98; part of `client.producer._producer.Producer`, as Kafka's
``TransactionManager``): ``init_transactions``, ``begin_transaction``, ``send`` inside it,
``send_offsets_to_transaction``, ``commit_transaction`` and ``abort_transaction``, named as in
kafka-python and confluent-kafka.

Ordering: a partition's batches go out only after the coordinator added the partition to the
transaction (AddPartitionsToTxn, from the sender thread: `_txn_add_partitions`); commit first
flushes every batch of the transaction, then EndTxn; the coordinator writes the markers and the
next transaction may begin at once. A batch that failed makes the transaction abortable only
(``commit_transaction`` raises TRANSACTION_ABORTABLE, ``abort_transaction`` recovers);
PRODUCER_FENCED (another instance with the same transactional id) is fatal: every later call
raises it. TRANSACTION_ABORTABLE (KIP-890: the producer says it takes it, as Produce v11+ and
TxnOffsetCommit v4+ clients do) makes the transaction abortable wherever it comes from, as in
Kafka's client: a batch, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit (so do the other
errors that leave the offsets uncommitted) and EndTxn.
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from kraftlog.client._channels import ChannelPool, timed_out
from kraftlog.client._coordinators import GROUP_KEY, TRANSACTION_KEY, find_coordinator
from kraftlog.client._metadata import ClusterMetadata, TopicPartition, partitions_by_topic
from kraftlog.client.producer._producer_idempotence import IdempotenceState
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2, group_pb2, txn_pb2

__all__ = ["_ProducerTransactions", "TxnState"]

_log = structlog.get_logger(__name__)
_RETRY = {
    kerr.CoordinatorNotAvailableError.error_code,
    kerr.NotCoordinatorError.error_code,
    kerr.CoordinatorLoadInProgressError.error_code,
    kerr.ConcurrentTransactionsError.error_code,
}
#: what makes the open transaction abortable when AddOffsetsToTxn or EndTxn answers it (Kafka's client)
_ABORTABLE = frozenset({kerr.TransactionAbortableError.error_code})
_FATAL = {kerr.ProducerFencedError.error_code, kerr.InvalidProducerEpochError.error_code,
          kerr.TransactionalIdAuthorizationFailedError.error_code}  # fmt: skip


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    FATAL = "fatal"


class _ProducerTransactions:
    """The transaction API of `Producer` (which provides the fields below)."""

    transactional_id: str | None
    transaction_timeout_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    max_block_ms: int
    _rng: random.Random
    _idempotence: IdempotenceState | None
    _pool: ChannelPool
    _metadata: ClusterMetadata
    _lock: threading.Condition
    _batches: dict[TopicPartition, Any]
    _txn_state: TxnState
    _txn_fatal: BaseException | None
    _txn_coordinator: str | None
    _txn_new: set[TopicPartition]
    _txn_started: bool
    _txn_generation: int
    _txn_adding: bool

    if TYPE_CHECKING:  # Producer's and the sender's

        def flush(self, timeout: float | None = None) -> None: ...

        def _finish(
            self, batch: Any, *, base_offset: int = -1, log_append_time: int = -1, error: BaseException | None = None
        ) -> None: ...

    def _txn_init_fields(self) -> None:
        self._txn_state = TxnState.UNINITIALIZED
        self._txn_fatal = None
        self._txn_coordinator = None
        self._txn_new = set()  # partitions sent to in this transaction, not yet added
        self._txn_started = False  # the coordinator knows of this transaction (offsets were added)
        self._txn_generation = 0  # bumped at every end: an AddPartitionsToTxn answer of an older one is stale
        self._txn_adding = False  # the sender has an AddPartitionsToTxn on its way

    # ================================================================= the API

    def _idem(self) -> IdempotenceState:
        if self.transactional_id is None or self._idempotence is None:
            raise kerr.InvalidTxnStateError("this producer has no transactional_id")
        if self._txn_fatal is not None:
            raise self._txn_fatal
        return self._idempotence

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of the transactional id (fencing older instances: their
        open transaction is aborted first). Call once, before the first transaction."""
        idem = self._idem()
        if self._txn_state is not TxnState.UNINITIALIZED:
            raise kerr.InvalidTxnStateError("init_transactions was called already")
        request = broker_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms
        )
        r = self._coordinator_call(lambda addr, t: self._pool.stub(addr).InitProducerId(request, timeout=t), timeout)
        self._raise(r.error, "InitProducerId")
        with self._lock:
            idem.set_producer_id(r.producer_id, r.producer_epoch)
            self._txn_state = TxnState.READY
        _log.info("transactions_initialized", transactional_id=self.transactional_id, producer_id=r.producer_id)

    def begin_transaction(self) -> None:
        idem = self._idem()
        if self._txn_state is not TxnState.READY:
            raise kerr.InvalidTxnStateError(f"begin_transaction in state {self._txn_state.value}")
        with self._lock:
            idem.txn_partitions.clear()
            idem.abortable = None
            self._txn_new.clear()
            self._txn_state = TxnState.IN_TRANSACTION

    def _txn_check_send(self, tp: TopicPartition) -> None:
        """From `send` (lock held): a transactional producer sends only inside a transaction; the
        partition is added to it before its first batch goes out."""
        if self.transactional_id is None:
            return
        if self._txn_fatal is not None:
            raise self._txn_fatal
        if self._txn_state is not TxnState.IN_TRANSACTION:
            raise kerr.InvalidTxnStateError("send outside a transaction: call begin_transaction first")
        assert self._idempotence is not None
        if tp not in self._idempotence.txn_partitions:
            self._txn_new.add(tp)

    def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], Any], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a consumer group's offsets as part of this transaction (AddOffsetsToTxn, then
        TxnOffsetCommit to the group's coordinator): they count only if the transaction commits.
        ``group_metadata`` is the consumer's `group_metadata()` (or a group id)."""
        idem = self._idem()
        if self._txn_state is not TxnState.IN_TRANSACTION:
            raise kerr.InvalidTxnStateError("send_offsets_to_transaction outside a transaction")
        group_id = group_metadata if isinstance(group_metadata, str) else group_metadata.group_id
        generation = -1 if isinstance(group_metadata, str) else group_metadata.generation_id
        member_id = "" if isinstance(group_metadata, str) else group_metadata.member_id
        instance = None if isinstance(group_metadata, str) else group_metadata.group_instance_id
        add = txn_pb2.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=idem.producer_id,
            producer_epoch=idem.epoch,
            group_id=group_id,
        )
        r = self._coordinator_call(lambda a, t: self._pool.txn_stub(a).AddOffsetsToTxn(add, timeout=t), timeout)
        self._raise(r.error, "AddOffsetsToTxn", abortable=_ABORTABLE)
        self._txn_started = True
        by_topic = partitions_by_topic(TopicPartition(*tp) for tp in offsets)
        topics = []
        for topic, parts in by_topic.items():
            entries = []
            for p in parts:
                o = offsets[(topic, p)]
                offset = o if isinstance(o, int) else o.offset
                leader_epoch = -1 if isinstance(o, int) else o.leader_epoch
                metadata = "" if isinstance(o, int) else o.metadata
                entries.append(
                    group_pb2.OffsetCommitRequest.Partition(
                        partition_index=p, committed_offset=offset, committed_leader_epoch=leader_epoch,
                        committed_metadata=metadata,
                    )
                )  # fmt: skip
            topics.append(group_pb2.OffsetCommitRequest.Topic(name=topic, partitions=entries))
        commit = group_pb2.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=idem.producer_id,
            producer_epoch=idem.epoch,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            topics=topics,
            abortable_error=True,
        )
        deadline = time.monotonic() + (timeout if timeout is not None else self.max_block_ms / 1000.0)

        def attempt(_timeout_s: float) -> Outcome:
            coordinator = self._find_coordinator(group_id, GROUP_KEY, deadline)
            try:
                answer = self._pool.group_stub(coordinator).TxnOffsetCommit(
                    commit, timeout=self.request_timeout_ms / 1000.0
                )
            except grpc.RpcError as err:
                return Retry(str(err.code()), error=timed_out(f"TxnOffsetCommit: {err.code()}", err))
            codes = {p.error.code for t in answer.topics for p in t.partitions} - {0}
            failed = (
                kerr.error_for_code(next(iter(codes)))(f"TxnOffsetCommit of group {group_id!r} failed")
                if codes
                else None
            )
            if codes & _RETRY:
                return Retry(str(codes), error=failed)
            if failed is not None:
                # the offsets were not committed: the transaction must not commit without them
                self._txn_error(failed, fatal=bool(codes & _FATAL))
                raise failed
            return Done(None)

        self._retry(attempt, deadline, "TxnOffsetCommit")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it (EndTxn); raises the error that
        made the transaction abortable, if any (then `abort_transaction`)."""
        self._end(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records sent in it are never seen by read_committed consumers."""
        self._end(False, timeout)

    def _end(self, commit: bool, timeout: float | None) -> None:
        idem = self._idem()
        if self._txn_state is not TxnState.IN_TRANSACTION:
            raise kerr.InvalidTxnStateError(f"{'commit' if commit else 'abort'} outside a transaction")
        if commit:
            self.flush(timeout)
            if idem.abortable is not None:
                raise kerr.TransactionAbortableError(
                    f"the transaction cannot commit: {idem.abortable!r}; abort it"
                ) from idem.abortable
        else:
            self._txn_drop_unadded()
            self.flush(timeout)
        self._txn_wait_adding(timeout)  # an add still on its way would reopen the transaction after EndTxn
        if idem.txn_partitions or self._txn_started:  # Kafka's: nothing sent, no EndTxn
            request = txn_pb2.EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=idem.producer_id,
                producer_epoch=idem.epoch,
                committed=commit,
                client_transaction_version=2,  # the coordinator uses it while transaction.version 2 is finalized
            )
            r = self._coordinator_call(lambda a, t: self._pool.txn_stub(a).EndTxn(request, timeout=t), timeout)
            self._raise(r.error, "EndTxn", abortable=_ABORTABLE)
            if r.producer_id >= 0:  # KIP-890: the end bumped the epoch; the next transaction takes it
                with self._lock:
                    idem.set_producer_id(r.producer_id, r.producer_epoch)
        lost_sequence = idem.abortable is not None
        with self._lock:
            idem.txn_partitions.clear()
            idem.abortable = None
            self._txn_new.clear()
            self._txn_started = False
            self._txn_generation += 1
            self._txn_state = TxnState.READY
        if lost_sequence and not commit:
            self._reinit(timeout)

    def _txn_wait_adding(self, timeout: float | None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else self.max_block_ms / 1000.0)
        with self._lock:
            while self._txn_adding:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise kerr.RequestTimedOutError("an AddPartitionsToTxn did not finish in time")
                self._lock.wait(remaining)

    def _reinit(self, timeout: float | None) -> None:
        """After aborting a transaction in which a batch's outcome stayed unknown: a new epoch
        from the coordinator (KIP-360), so every partition's sequence starts over."""
        assert self._idempotence is not None
        request = broker_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self._idempotence.producer_id,
            producer_epoch=self._idempotence.epoch,
        )
        r = self._coordinator_call(lambda addr, t: self._pool.stub(addr).InitProducerId(request, timeout=t), timeout)
        self._raise(r.error, "InitProducerId")
        with self._lock:
            self._idempotence.set_producer_id(r.producer_id, r.producer_epoch)

    def _txn_drop_unadded(self) -> None:
        """Abort: batches of partitions never added are failed, not sent."""
        dropped = []
        with self._lock:
            for tp in list(self._txn_new):
                dq = self._batches.get(tp)
                while dq:
                    dropped.append(dq.popleft())
            self._txn_new.clear()
        for batch in dropped:
            self._finish(batch, error=kerr.KafkaError("the transaction was aborted before this batch was sent"))

    # ========================================================== the sender's side

    def _txn_add_partitions(self) -> float | None:
        """From the sender thread: add the partitions batches wait for (AddPartitionsToTxn); None
        when nothing waits, else the seconds until the sender should look again."""
        idem = self._idempotence
        assert idem is not None
        with self._lock:
            if self._txn_state is not TxnState.IN_TRANSACTION or not self._txn_new or self._txn_fatal is not None:
                return None
            wanted = sorted(self._txn_new)
            generation = self._txn_generation
            self._txn_adding = True
        try:
            return self._add_partitions(idem, wanted, generation)
        finally:
            with self._lock:
                self._txn_adding = False
                self._lock.notify_all()

    def _add_partitions(self, idem: IdempotenceState, wanted: list[TopicPartition], generation: int) -> float | None:
        request = txn_pb2.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=idem.producer_id,
            producer_epoch=idem.epoch,
            topics=[
                txn_pb2.AddPartitionsToTxnRequest.Topic(name=t, partitions=ps)
                for t, ps in partitions_by_topic(wanted).items()
            ],
        )
        try:
            coordinator = self._find_coordinator(self.transactional_id or "", TRANSACTION_KEY, time.monotonic() + 1.0)
            r = self._pool.txn_stub(coordinator).AddPartitionsToTxn(request, timeout=self.request_timeout_ms / 1000.0)
        except (grpc.RpcError, kerr.KafkaError) as err:
            self._txn_coordinator = None
            _log.debug("add_partitions_retry", error=repr(err))
            return self.retry_backoff_ms / 1000.0
        if r.error.code in _RETRY:
            self._txn_coordinator = (
                None if r.error.code != kerr.ConcurrentTransactionsError.error_code else self._txn_coordinator
            )
            return self.retry_backoff_ms / 1000.0
        if r.error.code in _FATAL:
            self._txn_fatal = kerr.error_for_code(r.error.code)(
                f"AddPartitionsToTxn: {r.error.message or r.error.name}"
            )
            return None
        refused: list[tuple[Any, BaseException]] = []
        with self._lock:
            if self._txn_generation != generation:
                return None  # the transaction ended meanwhile: this answer is about an old one
            # refused as a whole (TRANSACTION_ABORTABLE, an authorization error): every partition asked
            codes = {tp: r.error.code for tp in wanted} if r.error.code else {}
            for t in r.results:
                for p in t.partitions:
                    codes[TopicPartition(t.name, p.partition_index)] = p.error.code
            for tp, code in codes.items():
                if code == 0:
                    idem.txn_partitions.add(tp)
                    self._txn_new.discard(tp)
                elif code not in _RETRY:
                    error = kerr.error_for_code(code)(f"AddPartitionsToTxn {tp}")
                    idem.abortable = idem.abortable or error
                    self._txn_new.discard(tp)
                    dq = self._batches.get(tp)
                    while dq:  # they can never go out in this transaction (Kafka's abortUndrainedBatches)
                        refused.append((dq.popleft(), error))
        for batch, why in refused:
            self._finish(batch, error=why)
        return None

    # ================================================================= plumbing

    def _find_coordinator(self, key: str, key_type: int, deadline: float) -> str:
        if key_type == TRANSACTION_KEY and self._txn_coordinator is not None:
            return self._txn_coordinator
        _node, address = find_coordinator(
            self._pool, self._metadata, key, key_type, deadline, backoff_s=self.retry_backoff_ms / 1000.0
        )
        if key_type == TRANSACTION_KEY:
            self._txn_coordinator = address
        return address

    def _coordinator_call(self, call: Any, timeout: float | None) -> Any:
        """Call the transaction coordinator, found again and retried while it moves, loads or
        finishes a previous transaction, until ``timeout`` (default ``max_block_ms``)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.max_block_ms / 1000.0)

        def attempt(_timeout_s: float) -> Outcome:
            address = self._find_coordinator(self.transactional_id or "", TRANSACTION_KEY, deadline)
            try:
                r = call(address, self.request_timeout_ms / 1000.0)
            except grpc.RpcError as err:
                self._txn_coordinator = None
                return Retry(str(err.code()), error=timed_out(f"transaction coordinator: {err.code()}", err))
            if r.error.code in _RETRY:
                if r.error.code != kerr.ConcurrentTransactionsError.error_code:
                    self._txn_coordinator = None
                return Retry(r.error.name, value=r)
            return Done(r)

        return self._retry(attempt, deadline, "transaction coordinator")

    def _retry(self, attempt: Callable[[float], Outcome], deadline: float, what: str) -> Any:
        """Run ``attempt`` until it is done or ``deadline`` passes, backing off by the producer's
        ``retry_backoff_ms`` / ``retry_backoff_max_ms`` (the one retry policy)."""
        policy = RetryPolicy(self.retry_backoff_ms, self.retry_backoff_max_ms, self.request_timeout_ms)
        return retry_until(attempt, timeout_s=deadline - time.monotonic(), policy=policy, what=what, rng=self._rng)

    def _raise(self, error: Any, what: str, abortable: frozenset[int] = frozenset()) -> None:
        """Raise ``error`` (if any); a fatal one ends the producer, one in ``abortable`` leaves
        the open transaction to be aborted."""
        if not error.code:
            return
        exc = kerr.error_for_code(error.code)(f"{what}: {error.message or error.name}")
        if error.code in _FATAL or error.code in abortable:
            self._txn_error(exc, fatal=error.code in _FATAL)
        raise exc

    def _txn_error(self, exc: kerr.KafkaError, *, fatal: bool) -> None:
        """A fatal error ends the producer (every later call raises it); any other makes the open
        transaction abortable only (Kafka's abortableError)."""
        if fatal:
            self._txn_fatal = exc
            self._txn_state = TxnState.FATAL
            return
        with self._lock:
            if self._idempotence is not None and self._txn_state is TxnState.IN_TRANSACTION:
                self._idempotence.abortable = self._idempotence.abortable or exc
