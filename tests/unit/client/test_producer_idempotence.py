"""The idempotent producer's bookkeeping (issue 15): sequences per partition, retries in order,
what a lost sequence does to an idempotent and to a transactional producer."""

from __future__ import annotations

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.producer._producer_idempotence import IdempotenceState
from kraftlog.common import errors as kerr

TP = TopicPartition("t", 0)


def test_sequences_are_stamped_in_order_and_kept_on_retries() -> None:
    idem = IdempotenceState()
    idem.set_producer_id(7, 0)
    first = idem.stamp(TP, None, 3)
    second = idem.stamp(TP, None, 2)
    assert (first.base_sequence, second.base_sequence) == (0, 3)
    assert idem.stamp(TP, first, 3) is first  # a retry keeps its sequence
    idem.sent(TP, first)
    idem.sent(TP, second)
    idem.answered(TP, second)
    assert not idem.may_send(TP, second)  # the earlier batch is still in flight
    idem.answered(TP, first)
    assert idem.may_send(TP, second)


def test_an_out_of_order_answer_behind_an_unresolved_batch_is_retried() -> None:
    idem = IdempotenceState()
    idem.set_producer_id(7, 0)
    first, second = idem.stamp(TP, None, 1), idem.stamp(TP, None, 1)
    assert idem.on_error(TP, second, kerr.OutOfOrderSequenceNumberError("gap"))  # first is unresolved
    assert not idem.bump_requested
    assert not idem.on_error(TP, first, kerr.OutOfOrderSequenceNumberError("lost"))  # the earliest: lost
    assert idem.bump_requested and idem.maybe_bump() and idem.epoch == 1
    assert idem.stamp(TP, first, 1).base_sequence == 0  # stamped anew in the new epoch


def test_a_transactional_producer_aborts_instead_of_bumping() -> None:
    idem = IdempotenceState(transactional=True)
    idem.set_producer_id(7, 0)
    assert not idem.may_send(TP, None)  # not added to the transaction yet
    idem.txn_partitions.add(TP)
    assert idem.may_send(TP, None)
    stamp = idem.stamp(TP, None, 1)
    idem.failed_after_send(kerr.RequestTimedOutError("expired"))
    assert idem.abortable is not None and not idem.bump_requested
    assert not idem.on_error(TP, stamp, kerr.UnknownProducerIdError("forgotten"))


def test_a_partition_sends_one_batch_until_its_first_is_acked() -> None:
    """A leader that does not know the producer takes any first sequence (its state may be gone
    with retention, as in Kafka), so a second batch must not overtake a first that may still fail
    (NOT_LEADER_OR_FOLLOWER from a leader being elected on a new topic): sequences 1.. would land
    first and the first batch's retry would be out of order, failing it for good. Seen in CI:
    'producer 3000 sent sequence 0 after 32 (epoch 0)'."""
    idem = IdempotenceState()
    idem.set_producer_id(7, 0)
    first = idem.stamp(TP, None, 3)
    idem.sent(TP, first)
    assert not idem.may_send(TP, None)  # nothing acked on this partition yet
    assert idem.may_send(TopicPartition("t", 1), None)  # other partitions are not held
    idem.answered(TP, first)
    idem.acked(TP, first, 3)
    second = idem.stamp(TP, None, 2)
    idem.sent(TP, second)
    assert idem.may_send(TP, None)  # once one batch is acked, up to max.in.flight go out
    assert idem.on_error(TP, second, kerr.NotLeaderOrFollowerError("moved"))  # retriable as before


def test_the_halves_of_a_split_batch_keep_their_sequences_and_the_transaction() -> None:
    """MESSAGE_TOO_LARGE splits a batch in two: each half keeps its records, its part of the
    parent's sequence range and the transactional flag (a half sent outside the transaction would
    be visible to read_committed consumers after an abort)."""
    import concurrent.futures

    from kraftlog.client.producer._producer_idempotence import Stamp
    from kraftlog.client.producer._producer_types import _Batch
    from kraftlog.common.records import RecordBatch
    from kraftlog.common.records.compression import CompressionType

    batch = _Batch(TopicPartition("t", 0), CompressionType.NONE, 0.0)
    for i in range(4):
        batch.try_append(i, None, f"v{i}".encode(), [], 10, 1 << 20, concurrent.futures.Future(), None)
    batch.restamp(Stamp(7, 2, 100), transactional=True)
    halves = batch.halves(CompressionType.NONE)
    encoded = [RecordBatch(half.close()) for half in halves]
    assert [[r.value for r in b.records()] for b in encoded] == [[b"v0", b"v1"], [b"v2", b"v3"]]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in encoded] == [(7, 2, 100), (7, 2, 102)]
    assert all(b.is_transactional for b in encoded)
