"""The transaction coordinator's core (issue 15): producer ids and epochs per transactional id,
partitions added, EndTxn's prepare -> markers -> complete, fencing a zombie, timeouts, retries
of a finished end, a failed write changing nothing, and a partition reloaded mid-end."""

from __future__ import annotations

from kraftlog.broker.txn._txn_records import TxnState, decode_txn, encode_txn_key, encode_txn_value
from kraftlog.broker.txn._txn_shard import MarkerJob, TxnOutcome, TxnShard, TxnShardConfig
from kraftlog.common import errors as kerr


class Driver:
    def __init__(self) -> None:
        self.now = 1000
        self.shard = TxnShard(0, TxnShardConfig(max_timeout_ms=60_000, id_expiration_ms=3_600_000))
        self.log: list[tuple[bytes, bytes | None]] = []
        self.answers: dict[object, object] = {}
        self.jobs: list[MarkerJob] = []
        self.fail: type[kerr.KafkaError] | None = None
        self._pid = 100

    def absorb(self, out: TxnOutcome) -> None:
        for token, response in out.responses:
            self.answers[token] = response
        self.jobs.extend(out.jobs)
        if out.records:
            assert out.then is not None
            if self.fail is None:
                for k, v in out.records:
                    self.log.append((encode_txn_key(k), None if v is None else encode_txn_value(v)))
            self.absorb(out.then(self.fail, self.now))

    def init(self, txn_id: str = "tx", timeout_ms: int = 30_000) -> object:
        pid = -1
        if self.shard.needs_producer_id(txn_id):
            self._pid += 1
            pid = self._pid
        self.absorb(self.shard.init_producer_id(txn_id, timeout_ms, "init", self.now, pid))
        return self.answers.pop("init")

    def add(self, pid: int, epoch: int, *parts: tuple[str, int], txn_id: str = "tx") -> object:
        self.absorb(self.shard.add_partitions(txn_id, pid, epoch, parts, "add", self.now))
        return self.answers.pop("add")

    def end(self, pid: int, epoch: int, commit: bool, txn_id: str = "tx") -> object:
        self.absorb(self.shard.end_txn(txn_id, pid, epoch, commit, "end", self.now))
        return self.answers.pop("end")

    def finish_markers(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            self.absorb(self.shard.markers_written(job, self.now))

    def state(self, txn_id: str = "tx") -> TxnState:
        return self.shard.txns[txn_id].state

    def reloaded(self) -> TxnShard:
        shard = TxnShard(0, self.shard.config)
        for k, v in self.log:
            key, value = decode_txn(k, v)
            shard.replay(key, value)
        return shard


def test_a_committed_transaction_goes_prepare_markers_complete() -> None:
    d = Driver()
    error, pid, epoch = d.init()  # type: ignore[misc]
    assert error is None and (pid, epoch) == (101, 0) and d.state() is TxnState.EMPTY
    assert d.add(pid, epoch, ("a", 0), ("b", 1)) == (None, (("a", 0, None), ("b", 1, None)))
    assert d.state() is TxnState.ONGOING
    assert d.end(pid, epoch, True) is None  # answered once PrepareCommit is written
    assert d.state() is TxnState.PREPARE_COMMIT
    (job,) = d.jobs
    assert job.commit and job.partitions == {("a", 0), ("b", 1)} and job.producer_epoch == 0
    assert d.end(pid, epoch, True) is kerr.ConcurrentTransactionsError  # a retry while the markers go out
    assert d.add(pid, epoch, ("a", 0)) == (
        kerr.ConcurrentTransactionsError,
        (("a", 0, kerr.ConcurrentTransactionsError),),
    )
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_COMMIT and not d.shard.txns["tx"].partitions
    assert d.end(pid, epoch, True) is None  # the retry of a finished commit
    assert d.end(pid, epoch, False) is kerr.InvalidTxnStateError
    assert d.add(pid, epoch, ("c", 0))[0] is None  # type: ignore[index]  # the next transaction
    assert d.reloaded().txns == d.shard.txns


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    assert d.init() == (kerr.ConcurrentTransactionsError, -1, -1)  # the zombie's transaction is aborted first
    (job,) = d.jobs
    assert not job.commit and job.producer_epoch == epoch + 1
    assert d.add(pid, epoch, ("a", 1))[0] is kerr.ProducerFencedError  # type: ignore[index]  # the zombie
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_ABORT
    error, pid2, epoch2 = d.init()  # type: ignore[misc]
    assert error is None and pid2 == pid and epoch2 == epoch + 2
    assert d.add(pid, epoch, ("a", 1))[0] is kerr.ProducerFencedError  # type: ignore[index]
    assert d.end(pid, epoch, True) is kerr.ProducerFencedError


def test_a_transaction_past_its_timeout_is_aborted() -> None:
    d = Driver()
    _e, pid, epoch = d.init(timeout_ms=5000)  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    assert d.shard.next_deadline() == d.now + 5001
    d.now += 5001
    d.absorb(d.shard.poll(d.now))
    assert d.state() is TxnState.PREPARE_ABORT
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_ABORT
    assert d.end(pid, epoch, True) is kerr.ProducerFencedError


def test_bad_requests() -> None:
    d = Driver()
    assert d.init(timeout_ms=120_000) == (kerr.InvalidTransactionTimeoutError, -1, -1)
    assert d.init(txn_id="") == (kerr.InvalidRequestError, -1, -1)
    assert d.add(5, 0, ("a", 0), txn_id="nope")[0] is kerr.InvalidProducerIdMappingError  # type: ignore[index]
    _e, pid, epoch = d.init()  # type: ignore[misc]
    assert d.end(pid, epoch, True) is kerr.InvalidTxnStateError  # nothing was added
    assert d.end(pid + 1, epoch, True) is kerr.InvalidProducerIdMappingError


def test_a_failed_write_changes_nothing() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.fail = kerr.NotEnoughReplicasError
    assert d.add(pid, epoch, ("a", 0)) == (
        kerr.CoordinatorNotAvailableError,
        (("a", 0, kerr.CoordinatorNotAvailableError),),
    )
    assert d.state() is TxnState.EMPTY and not d.shard.pending


def test_a_reload_mid_end_writes_the_markers_again() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    d.end(pid, epoch, False)
    shard = d.reloaded()  # the coordinator moved before the markers were all written
    (job,) = shard.loaded().jobs
    assert not job.commit and job.partitions == {("a", 0)} and job.producer_id == pid


def test_idle_ids_expire() -> None:
    d = Driver()
    d.init()
    d.now += 3_600_001
    d.absorb(d.shard.poll(d.now))
    assert "tx" not in d.shard.txns and "tx" not in d.reloaded().txns


def test_list_transactions_filters_by_state_and_producer() -> None:
    d = Driver()
    _e, pid, epoch = d.init("t1")  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0), txn_id="t1")
    d.init("t2")
    assert [m.transactional_id for m in d.shard.list_transactions({"ongoing"})] == ["t1"]
    assert [m.transactional_id for m in d.shard.list_transactions(producer_ids={pid})] == ["t1"]
    assert len(d.shard.list_transactions()) == 2


def test_a_failed_complete_write_is_tried_again_and_pending_ids_set_no_deadline() -> None:
    d = Driver()
    _e, pid, epoch = d.init()  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    d.end(pid, epoch, True)
    (job,) = d.jobs
    d.jobs = []
    d.fail = kerr.NotEnoughReplicasError
    d.absorb(d.shard.markers_written(job, d.now))
    assert d.state() is TxnState.PREPARE_COMMIT and d.jobs == [job]  # the end is tried again...
    assert d.shard.retry_delay_ms("tx", d.now) == 1000  # ...after a back-off
    d.fail = None
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_COMMIT
    out = d.shard.add_partitions("tx", pid, epoch, [("b", 0)], "p", d.now)  # its write is in flight
    assert "tx" in d.shard.pending and d.shard.next_deadline() is None
    d.absorb(out)


def test_a_timed_out_abort_whose_write_failed_backs_off() -> None:
    d = Driver()
    _e, pid, epoch = d.init(timeout_ms=5000)  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    d.now += 5001
    d.fail = kerr.NotEnoughReplicasError
    d.absorb(d.shard.poll(d.now))
    assert d.state() is TxnState.ONGOING and d.shard.next_deadline() == d.now + 1000
    d.absorb(d.shard.poll(d.now + 10))  # not again before the back-off
    assert not d.jobs
