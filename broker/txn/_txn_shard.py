"""One partition of ``__transaction_state`` as its transaction coordinator sees it (Kafka's
``TransactionStateManager`` and ``TransactionCoordinator``, first transaction protocol): the
transactional ids it owns, each with its producer id and epoch, its state and the partitions of
its open transaction.

Pure, like the group shard: every call takes ``now_ms`` and returns a `TxnOutcome` (the
coordinators' `CoordinatorResult`) of answers, records and marker jobs (``jobs``). A state change
is *pending* while its record is written and applied only once it is committed (the result's
continuation), so a failed write changes nothing; while one is pending the
transactional id answers CONCURRENT_TRANSACTIONS (retriable). Ordering of a transaction's end:

1. EndTxn writes PrepareCommit (or PrepareAbort) and answers the producer once that is committed;
2. the shell writes the COMMIT (ABORT) markers into every partition of the transaction (a
   `MarkerJob`), retrying until every leader took them;
3. `markers_written` writes CompleteCommit (CompleteAbort), and the transactional id is free for
   its next transaction.

InitProducerId for an id whose transaction is open fences the old producer: the epoch is bumped
and the transaction aborted (steps 2-3 with the new epoch), the caller retries until it is done.
A transaction open longer than its timeout is aborted the same way (`poll`). Such an abort is the
coordinator's own, so it takes the cluster's finalized ``transaction.version``
(`TxnShard.transaction_version`), not the client's, as Kafka's does: under version 2 the end
bumps the fenced epoch once more and the markers are version 2 markers (strict at the partition),
so the fenced producer's epoch is two behind and no request of it passes for a retry of this end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kraftlog.broker.coordinator import CoordinatorResult, coordinator_error, merge
from kraftlog.broker.txn._txn_records import TransactionLogKey, TransactionLogValue, TxnState
from kraftlog.common import errors as kerr

__all__ = ["TxnShard", "TxnMetadata", "TxnOutcome", "MarkerJob", "TxnShardConfig"]

Error = type[kerr.KafkaError] | None
_MAX_EPOCH = 32_766
_PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_RETRY_MS = 1000
_COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY)


@dataclass(frozen=True)
class TxnShardConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1  # KIP-890: the producer id a bump past the last epoch moves to
    client_version: int = 0  # the transaction version of the client of the last change (2: KIP-890)

    def value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            by_topic.setdefault(topic, []).append(p)
        parts = tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            parts,
            self.last_update_ms,
            self.start_ms,
            self.previous_producer_id,
            self.next_producer_id,
            self.client_version,
        )

    @classmethod
    def of(cls, transactional_id: str, v: TransactionLogValue) -> TxnMetadata:
        partitions = frozenset((t, p) for t, ps in v.partitions for p in ps)
        return cls(
            transactional_id,
            v.producer_id,
            v.producer_epoch,
            v.timeout_ms,
            v.state,
            partitions,
            v.last_update_ms,
            v.start_ms,
            v.previous_producer_id,
            v.next_producer_id,
            v.client_transaction_version,
        )


@dataclass(frozen=True)
class MarkerJob:
    """COMMIT (or ABORT) markers to write into ``partitions`` for a producer."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
    transaction_version: int = 0  # 2: the markers close a KIP-890 transaction (a bumped epoch)


# answers, records, what runs once they are written, and marker jobs (``jobs``)
TxnOutcome = CoordinatorResult


class TxnShard:
    """The transactional ids of one ``__transaction_state`` partition (see the module docstring)."""

    def __init__(self, partition: int, config: TxnShardConfig) -> None:
        self.partition = partition
        self.config = config
        self.txns: dict[str, TxnMetadata] = {}
        self.pending: dict[str, TxnState] = {}  # transactional id -> the state being written
        self._retry_at: dict[str, int] = {}  # a failed write of the id is tried again from then
        #: the cluster's finalized transaction.version, for the coordinator's own aborts
        self.transaction_version: Callable[[], int] = lambda: 0

    # ================================================================ plumbing

    def _write(
        self, meta: TxnMetadata, then: Callable[[Error, int], TxnOutcome], pending: TxnState | None = None
    ) -> TxnOutcome:
        """Write ``meta``; it becomes the id's state once committed, then ``then`` runs."""
        txn_id = meta.transactional_id
        self.pending[txn_id] = pending if pending is not None else meta.state

        def done(error: Error, now_ms: int) -> TxnOutcome:
            self.pending.pop(txn_id, None)
            if error is None:
                self.txns[txn_id] = meta
            return then(error, now_ms)

        return TxnOutcome(records=[(TransactionLogKey(txn_id), meta.value())], then=done)

    def _check(self, txn_id: str, producer_id: int, epoch: int) -> tuple[Error, TxnMetadata | None]:
        """Kafka's checks of a producer's request against its transactional id."""
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return kerr.InvalidProducerIdMappingError, meta
        if epoch != meta.producer_epoch:
            return kerr.ProducerFencedError, meta
        if txn_id in self.pending or meta.state in _PREPARING or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            return kerr.ConcurrentTransactionsError, meta
        return None, meta

    # ============================================================ InitProducerId

    def needs_producer_id(self, txn_id: str) -> bool:
        """Whether InitProducerId for ``txn_id`` would take a new producer id (the shell fetches
        one from the controller's blocks first)."""
        meta = self.txns.get(txn_id)
        return meta is None or (meta.state in _COMPLETE and meta.producer_epoch >= _MAX_EPOCH)

    def init_producer_id(
        self, txn_id: str, timeout_ms: int, token: object, now_ms: int, new_producer_id: int = -1
    ) -> TxnOutcome:
        """InitProducerId with a transactional id: the producer id and a fresh epoch; an open
        transaction of an older producer is aborted first (CONCURRENT_TRANSACTIONS meanwhile).
        Answers ``(error, producer id, epoch)``."""
        if not txn_id:
            return TxnOutcome([(token, (kerr.InvalidRequestError, -1, -1))])
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return TxnOutcome([(token, (kerr.InvalidTransactionTimeoutError, -1, -1))])
        meta = self.txns.get(txn_id)
        if txn_id in self.pending or (meta is not None and meta.state in (*_PREPARING, TxnState.PREPARE_EPOCH_FENCE)):
            return TxnOutcome([(token, (kerr.ConcurrentTransactionsError, -1, -1))])
        if meta is not None and meta.state is TxnState.ONGOING:
            out = self._abort_fenced(meta, now_ms)
            out.responses.append((token, (kerr.ConcurrentTransactionsError, -1, -1)))
            return out
        if meta is None or meta.producer_epoch >= _MAX_EPOCH:
            assert new_producer_id >= 0, "needs_producer_id said so: the caller allocates one"
            previous = meta.producer_id if meta is not None else -1
            new = TxnMetadata(txn_id, new_producer_id, 0, timeout_ms, TxnState.EMPTY, frozenset(), now_ms, -1, previous)
        else:
            new = replace(meta, producer_epoch=meta.producer_epoch + 1, timeout_ms=timeout_ms, state=TxnState.EMPTY)
            new = replace(new, partitions=frozenset(), last_update_ms=now_ms, start_ms=-1)

        def answer(error: Error, _t: int) -> TxnOutcome:
            if error is not None:
                return TxnOutcome([(token, (coordinator_error(error), -1, -1))])
            return TxnOutcome([(token, (None, new.producer_id, new.producer_epoch))])

        return self._write(new, answer)

    def _abort_fenced(self, meta: TxnMetadata, now_ms: int) -> TxnOutcome:
        """Abort an open transaction under a bumped epoch (its producer is fenced: a newer
        instance took the id over, or the transaction timed out). Under transaction version 2
        the end bumps once more (Kafka's ``prepareFenceProducerEpoch`` then ``prepareAbortOrCommit``;
        the last epoch may be reached: the next InitProducerId then takes a new producer id)."""
        epoch = min(meta.producer_epoch + 1, _MAX_EPOCH)
        version = 2 if self.transaction_version() >= 2 else 0
        if version >= 2:
            epoch += 1
        prepared = replace(
            meta,
            producer_epoch=epoch,
            state=TxnState.PREPARE_ABORT,
            last_update_ms=now_ms,
            client_version=version,
            next_producer_id=-1,
        )

        def then(error: Error, now: int) -> TxnOutcome:
            if error is not None:
                self._retry_at[meta.transactional_id] = now + _RETRY_MS  # the timeout abort tries again then
                return TxnOutcome()
            return TxnOutcome(jobs=[self._job(prepared, commit=False)])

        return self._write(prepared, then)

    # ========================================================== adding partitions

    def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        token: object,
        now_ms: int,
    ) -> TxnOutcome:
        """AddPartitionsToTxn (and AddOffsetsToTxn, for the group's offsets partition): answers
        ``(error, ((topic, partition, error), ...))``."""
        wanted = frozenset(partitions)
        error, meta = self._check(txn_id, producer_id, epoch)

        def refuse(e: type[kerr.KafkaError]) -> TxnOutcome:
            return TxnOutcome([(token, (e, tuple((t, p, e) for t, p in sorted(wanted))))])

        if error is not None:
            return refuse(error)
        assert meta is not None
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return TxnOutcome([(token, (None, tuple((t, p, None) for t, p in sorted(wanted))))])
        start = meta.start_ms if meta.state is TxnState.ONGOING else now_ms
        new = replace(
            meta, state=TxnState.ONGOING, partitions=meta.partitions | wanted, start_ms=start, last_update_ms=now_ms
        )

        def answer(err: Error, _t: int) -> TxnOutcome:
            if err is not None:
                return refuse(coordinator_error(err))
            return TxnOutcome([(token, (None, tuple((t, p, None) for t, p in sorted(wanted))))])

        return self._write(new, answer)

    # ====================================================================== EndTxn

    def end_txn(
        self, txn_id: str, producer_id: int, epoch: int, commit: bool, token: object, now_ms: int
    ) -> TxnOutcome:
        """EndTxn: prepare, answer once prepared, then the markers (see the module docstring).
        A retry of an end already done answers NONE; of one the other way INVALID_TXN_STATE."""
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return TxnOutcome([(token, kerr.InvalidProducerIdMappingError)])
        if epoch != meta.producer_epoch:
            return TxnOutcome([(token, kerr.ProducerFencedError)])
        if txn_id in self.pending:
            return TxnOutcome([(token, kerr.ConcurrentTransactionsError)])
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        wanted_done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state is wanted_done:
            return TxnOutcome([(token, None)])
        if meta.state is wanted_prepare:
            return TxnOutcome([(token, kerr.ConcurrentTransactionsError)])
        if meta.state is not TxnState.ONGOING:
            return TxnOutcome([(token, kerr.InvalidTxnStateError)])
        prepared = replace(meta, state=wanted_prepare, last_update_ms=now_ms, client_version=0)

        def then(error: Error, _t: int) -> TxnOutcome:
            if error is not None:
                return TxnOutcome([(token, coordinator_error(error))])
            return TxnOutcome([(token, None)], jobs=[self._job(prepared, commit)])

        return self._write(prepared, then)

    def end_needs_producer_id(self, txn_id: str) -> bool:
        """Whether EndTxn v5 for ``txn_id`` would bump past the last epoch, so the shell fetches a
        producer id for the transaction's end to move to (KIP-890's overflow)."""
        meta = self.txns.get(txn_id)
        return meta is not None and meta.state is TxnState.ONGOING and meta.producer_epoch >= _MAX_EPOCH

    def end_txn_v2(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        token: object,
        now_ms: int,
        new_producer_id: int = -1,
    ) -> TxnOutcome:
        """EndTxn v5, transaction version 2 (KIP-890 part 2): the prepare record bumps the epoch,
        so the markers carry an epoch newer than the transaction's batches and every batch of the
        producer's next transaction; the answer ``(error, producer id, epoch)`` hands the client
        the bumped epoch (or, when the epochs ran out, ``new_producer_id`` at epoch 0) for its
        next transaction. A retry of an end already made (the epoch one below the stored one, the
        same result) answers that epoch again; any other epoch is PRODUCER_FENCED: the epoch,
        not the state, tells a retry from the next transaction's end."""
        meta = self.txns.get(txn_id)

        def answer(error: Error, pid: int = -1, ep: int = -1) -> TxnOutcome:
            return TxnOutcome([(token, (error, pid, ep))])

        if meta is None:
            return answer(kerr.InvalidProducerIdMappingError)
        v2 = meta.client_version >= 2
        bumped_retry = v2 and meta.producer_id == producer_id and meta.producer_epoch == epoch + 1
        overflow_retry = (
            v2 and meta.previous_producer_id == producer_id and epoch == _MAX_EPOCH and meta.producer_epoch == 0
        )
        if meta.producer_id != producer_id and not overflow_retry:
            return answer(kerr.InvalidProducerIdMappingError)
        if v2 and meta.state in _PREPARING:
            valid = bumped_retry
        elif v2 and meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = bumped_retry or overflow_retry
        else:
            valid = epoch == meta.producer_epoch
        if not valid:
            return answer(kerr.ProducerFencedError)
        if txn_id in self.pending:
            return answer(kerr.ConcurrentTransactionsError)
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        wanted_done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state is wanted_done:
            return answer(None, meta.producer_id, meta.producer_epoch)
        if meta.state is wanted_prepare:
            return answer(kerr.ConcurrentTransactionsError)
        if meta.state is not TxnState.ONGOING:
            return answer(kerr.InvalidTxnStateError)
        next_pid = new_producer_id if meta.producer_epoch >= _MAX_EPOCH else -1
        if meta.producer_epoch >= _MAX_EPOCH and next_pid < 0:
            return answer(kerr.ConcurrentTransactionsError)  # the shell fetches an id first (retriable)
        prepared = replace(
            meta,
            state=wanted_prepare,
            producer_epoch=meta.producer_epoch + 1,
            next_producer_id=next_pid,
            client_version=2,
            last_update_ms=now_ms,
        )

        def then(error: Error, _t: int) -> TxnOutcome:
            if error is not None:
                return answer(coordinator_error(error))
            pid, ep = (next_pid, 0) if next_pid >= 0 else (prepared.producer_id, prepared.producer_epoch)
            return TxnOutcome([(token, (None, pid, ep))], jobs=[self._job(prepared, commit)])

        return self._write(prepared, then)

    def verify_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]], token: object
    ) -> TxnOutcome:
        """AddPartitionsToTxn v4+ with VerifyOnly, from a partition leader before it writes a
        transactional batch (KIP-890 part 1): whether each partition is in the producer's open
        transaction. Nothing is written. Answers ``(error, ((topic, partition, error), ...))``,
        TRANSACTION_ABORTABLE for a partition that is not (Kafka's
        ``handleVerifyPartitionsInTransaction``)."""
        wanted = sorted(frozenset(partitions))
        meta = self.txns.get(txn_id)
        error: Error = None
        if meta is None or meta.producer_id != producer_id:
            error = kerr.InvalidProducerIdMappingError
        elif meta.producer_epoch != epoch:
            error = kerr.ProducerFencedError
        elif meta.state in _PREPARING:
            error = kerr.ConcurrentTransactionsError
        if error is not None:
            return TxnOutcome([(token, (error, tuple((t, p, error) for t, p in wanted)))])
        assert meta is not None
        open_parts = meta.partitions if meta.state is TxnState.ONGOING else frozenset()
        results = tuple((t, p, None if (t, p) in open_parts else kerr.TransactionAbortableError) for t, p in wanted)
        return TxnOutcome([(token, (None, results))])

    def _job(self, meta: TxnMetadata, commit: bool) -> MarkerJob:
        return MarkerJob(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            commit,
            meta.partitions,
            2 if meta.client_version >= 2 else 0,
        )

    def markers_written(self, job: MarkerJob, now_ms: int) -> TxnOutcome:
        """Every partition took the job's markers: the transaction is complete."""
        meta = self.txns.get(job.transactional_id)
        prepare = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if meta is None or meta.state is not prepare or meta.producer_epoch != job.producer_epoch:
            return TxnOutcome()  # moved on meanwhile (a reload resumed it already)
        done = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        complete = replace(meta, state=done, partitions=frozenset(), last_update_ms=now_ms)
        if meta.client_version >= 2 and meta.next_producer_id >= 0:  # the epochs ran out: the next id
            complete = replace(
                complete,
                producer_id=meta.next_producer_id,
                producer_epoch=0,
                previous_producer_id=meta.producer_id,
                next_producer_id=-1,
            )

        def then(error: Error, now: int) -> TxnOutcome:
            if error is None or coordinator_error(error) is kerr.NotCoordinatorError:
                return TxnOutcome()  # done, or the next coordinator resumes it from the prepared state
            # not written (e.g. too few replicas): try the end again shortly, as Kafka retries it
            self._retry_at[job.transactional_id] = now + _RETRY_MS
            return TxnOutcome(jobs=[job])

        return self._write(complete, then)

    # ================================================================ time

    def poll(self, now_ms: int) -> TxnOutcome:
        """Abort transactions open past their timeout (the producer is fenced); forget ids idle
        past ``transactional.id.expiration.ms``."""
        out = TxnOutcome()
        for txn_id, meta in sorted(self.txns.items()):
            if txn_id in self.pending or self._retry_at.get(txn_id, 0) > now_ms:
                continue
            if meta.state is TxnState.ONGOING and now_ms - meta.start_ms > meta.timeout_ms:
                merge(out, self._abort_fenced(meta, now_ms))
            elif meta.state in _COMPLETE and now_ms - meta.last_update_ms > self.config.id_expiration_ms:
                merge(out, self._expire(meta))
        return out

    def _expire(self, meta: TxnMetadata) -> TxnOutcome:
        txn_id = meta.transactional_id
        self.pending[txn_id] = TxnState.DEAD

        def done(error: Error, _t: int) -> TxnOutcome:
            self.pending.pop(txn_id, None)
            if error is None:
                self.txns.pop(txn_id, None)
            return TxnOutcome()

        return TxnOutcome(records=[(TransactionLogKey(txn_id), None)], then=done)

    def retry_delay_ms(self, txn_id: str, now_ms: int) -> int:
        """How long a job of ``txn_id`` should wait because a write of the id just failed."""
        return max(0, self._retry_at.get(txn_id, 0) - now_ms)

    def next_deadline(self) -> int | None:
        deadlines = []
        for txn_id, m in self.txns.items():
            if txn_id in self.pending:
                continue  # a write is on its way: its continuation decides what comes next
            if m.state is TxnState.ONGOING:
                deadlines.append(max(m.start_ms + m.timeout_ms + 1, self._retry_at.get(txn_id, 0)))
            elif m.state in _COMPLETE:
                deadlines.append(
                    max(m.last_update_ms + self.config.id_expiration_ms + 1, self._retry_at.get(txn_id, 0))
                )
        return min(deadlines, default=None)

    # ============================================================= loading, views

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None) -> None:
        if value is None:
            self.txns.pop(key.transactional_id, None)
        else:
            self.txns[key.transactional_id] = TxnMetadata.of(key.transactional_id, value)

    def loaded(self) -> TxnOutcome:
        """Loading done: transactions that were being ended get their markers written again."""
        jobs = [
            self._job(m, m.state is TxnState.PREPARE_COMMIT)
            for _id, m in sorted(self.txns.items())
            if m.state in _PREPARING
        ]
        return TxnOutcome(jobs=list(jobs))

    def list_transactions(
        self, states: set[str] | None = None, producer_ids: set[int] | None = None
    ) -> list[TxnMetadata]:
        """ListTransactions (state names as Kafka's, e.g. ``Ongoing``)."""
        wanted = {s.lower() for s in states} if states else None
        return [
            m
            for _id, m in sorted(self.txns.items())
            if (wanted is None or m.state.kafka_name.lower() in wanted)
            and (not producer_ids or m.producer_id in producer_ids)
        ]
