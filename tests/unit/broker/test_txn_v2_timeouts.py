"""A coordinator's own aborts under transaction version 2 (issue 28, KIP-890), as Kafka's
``abortTimedOutTransactions`` and ``handleInitProducerId`` make them: the transaction is aborted
with the server's transaction version, not the client's, so the producer's epoch is bumped to
fence it (Kafka's ``prepareFenceProducerEpoch``) and bumped again by the end itself (a version 2
end always bumps), and the markers carry that epoch as version 2 markers (strict at the
partition). The zombie at the old epoch cannot end, add to, or write into anything afterwards; at
the partition its late batch is refused (INVALID_PRODUCER_EPOCH), and a late copy of the abort
marker is refused as well."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kraftlog.broker.txn._txn_records import TxnState
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2
from kraftlog.storage import RecordBatchBuilder
from tests.unit.broker.test_replica_manager import fetch_req, fresp, presp, setup
from tests.unit.broker.test_txn_shard import Driver
from tests.unit.broker.test_txn_v2 import end_v2


def timed_out(level: int, *, fence_by_init: bool = False) -> tuple[Driver, int, int]:
    """A transaction (one partition) aborted by its coordinator at ``level``: by its timeout, or by
    a new instance's InitProducerId. Answers the driver, the producer id and the old epoch."""
    d = Driver()
    d.shard.transaction_version = lambda: level
    _e, pid, epoch = d.init(timeout_ms=5_000)  # type: ignore[misc]
    d.add(pid, epoch, ("a", 0))
    if fence_by_init:
        assert d.init()[0] is kerr.ConcurrentTransactionsError  # type: ignore[index]
    else:
        d.now += 5_001
        d.absorb(d.shard.poll(d.now))
    return d, pid, epoch


def test_a_timeout_abort_under_version_2_fences_and_bumps_and_its_markers_are_version_2() -> None:
    """Main aborted at the fence epoch with the first protocol's markers (epoch + 1, version 0)."""
    d, pid, epoch = timed_out(2)
    (job,) = d.jobs
    assert not job.commit and (job.producer_id, job.producer_epoch, job.transaction_version) == (pid, epoch + 2, 2)
    meta = d.shard.txns["tx"]
    assert (meta.state, meta.producer_epoch, meta.client_version) == (TxnState.PREPARE_ABORT, epoch + 2, 2)
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_ABORT
    # the zombie at the old epoch: no end (not even taken for a retry of one), no add
    assert end_v2(d, pid, epoch, False) == (kerr.ProducerFencedError, -1, -1)
    assert end_v2(d, pid, epoch, True) == (kerr.ProducerFencedError, -1, -1)
    assert d.end(pid, epoch, False) is kerr.ProducerFencedError
    assert d.add(pid, epoch, ("a", 0))[0] is kerr.ProducerFencedError  # type: ignore[index]
    # a new instance goes on past both bumps; the state survives a reload
    assert d.init() == (None, pid, epoch + 3)
    reloaded = d.reloaded().txns["tx"]
    assert (reloaded.producer_epoch, reloaded.state) == (epoch + 3, TxnState.EMPTY)


def test_a_fencing_init_producer_id_aborts_the_same_way_under_version_2() -> None:
    d, pid, epoch = timed_out(2, fence_by_init=True)
    (job,) = d.jobs
    assert (job.producer_epoch, job.transaction_version) == (epoch + 2, 2)
    d.finish_markers()
    assert d.init() == (None, pid, epoch + 3)


def test_version_1_keeps_the_first_protocols_abort() -> None:
    d, pid, epoch = timed_out(1)
    (job,) = d.jobs
    assert (job.producer_epoch, job.transaction_version) == (epoch + 1, 0)
    d.finish_markers()
    assert d.init() == (None, pid, epoch + 2)


def _batch(pid: int, epoch: int, value: bytes, seq: int = 0) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    b.append(0, None, value)
    return b.build()


def test_a_zombies_late_write_after_the_timeout_abort_cannot_land(tmp_path: Path) -> None:
    """At the partition leader (no coordinator to ask: verification off): the transaction's batch,
    the timeout abort's version 2 marker at the fencing epoch, then the zombie's late batch at
    its old epoch (refused, nothing written) and a late copy of the marker (refused: not newer)."""
    d, pid, epoch = timed_out(2)
    (job,) = d.jobs

    def marker(epoch_: int, version: int) -> broker_pb2.WriteTxnMarkersRequest:
        R = broker_pb2.WriteTxnMarkersRequest
        topic = R.Topic(name="t", partition_indexes=[0])
        m = R.Marker(producer_id=pid, producer_epoch=epoch_, transaction_result=False, topics=[topic])
        m.transaction_version = version
        return R(markers=[m], timeout_ms=2000)

    def produce(value: bytes, epoch_: int, seq: int) -> broker_pb2.ProduceRequest:
        R = broker_pb2.ProduceRequest
        part = R.PartitionData(index=0, records=_batch(pid, epoch_, value, seq))
        return R(acks=1, timeout_ms=2000, transactional_id="tx", topics=[R.TopicData(name="t", partitions=[part])])

    async def main() -> None:
        rm, _meta = setup(tmp_path)
        try:
            assert presp(await rm.produce(produce(b"in-txn", epoch, 0))).error.code == 0
            r = await rm.write_txn_markers(marker(job.producer_epoch, job.transaction_version))
            assert r.markers[0].topics[0].partitions[0].error.code == 0
            end = rm.get_partition("t", 0).log_end_offset
            late = presp(await rm.produce(produce(b"zombie", epoch, 1)))
            assert late.error.code == kerr.InvalidProducerEpochError.error_code
            assert rm.get_partition("t", 0).log_end_offset == end  # nothing landed
            again = await rm.write_txn_markers(marker(job.producer_epoch, job.transaction_version))
            assert again.markers[0].topics[0].partitions[0].error.code == kerr.InvalidProducerEpochError.error_code
            pd = fresp(await rm.fetch(fetch_req({0: 0})))
            assert b"zombie" not in pd.records and pd.high_watermark == end
        finally:
            await rm.shutdown()

    asyncio.run(main())
