"""The idempotent producer's bookkeeping (KIP-98, KIP-360; the idempotent half of Kafka's
``TransactionManager``): the producer id and epoch, each partition's next sequence number and the
sequences it has in flight.

Rules, as Kafka's client keeps them:

- a batch gets its sequence when it is first drained, in the partition's order, and keeps it on
  every retry (that is what lets the leader recognise a retry of a batch it already wrote);
- a partition sends a retried batch only when no batch with a lower sequence is still in flight,
  and retried batches go back into the queue in sequence order;
- OUT_OF_ORDER_SEQUENCE_NUMBER for a batch behind which an earlier one is still unresolved is an
  ordering accident (gRPC may deliver concurrent requests out of order): the batch is retried;
  for the earliest unresolved batch it means the leader lost the sequence: that batch fails and
  the producer bumps its epoch (locally, KIP-360), which starts every partition at sequence 0;
  so does UNKNOWN_PRODUCER_ID, and a batch that failed for good after it was sent (its outcome
  is unknown, so its successors would leave a gap);
- the epoch is bumped only when nothing is in flight; batches stamped with an older epoch are
  stamped anew before they go out. Epoch 32767 is not used: a new producer id is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlog.client._metadata import TopicPartition
from kraftlog.common import errors as kerr

__all__ = ["IdempotenceState", "Stamp"]

_MAX_EPOCH = 32_766
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Stamp:
    producer_id: int
    epoch: int
    base_sequence: int


@dataclass
class IdempotenceState:
    """Bookkeeping of one idempotent producer (see the module docstring); the producer's lock
    guards every call."""

    producer_id: int = -1
    epoch: int = -1
    next_sequence: dict[TopicPartition, int] = field(default_factory=dict)
    in_flight: dict[TopicPartition, set[int]] = field(default_factory=dict)
    last_acked: dict[TopicPartition, int] = field(default_factory=dict)
    bump_requested: bool = False
    new_id_needed: bool = True
    # a transactional producer: batches go out only for partitions added to the transaction, and
    # a lost sequence is not mended by an epoch bump but fails the transaction (it must abort)
    transactional: bool = False
    txn_partitions: set[TopicPartition] = field(default_factory=set)
    abortable: BaseException | None = None

    @property
    def ready(self) -> bool:
        """Whether batches may be stamped and sent (a producer id is known, no bump pending)."""
        return self.producer_id >= 0 and not self.new_id_needed and not self.bump_requested

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.new_id_needed = False
        self._reset_sequences()

    def _reset_sequences(self) -> None:
        self.next_sequence.clear()
        self.last_acked.clear()

    def stamp(self, tp: TopicPartition, current: Stamp | None, records: int) -> Stamp:
        """The stamp a batch goes out with: its own when it has one of this epoch, else the next
        sequence of its partition."""
        if current is not None and (current.producer_id, current.epoch) == (self.producer_id, self.epoch):
            return current
        seq = self.next_sequence.get(tp, 0)
        nxt = seq + records
        self.next_sequence[tp] = nxt - _INT32_MAX - 1 if nxt > _INT32_MAX else nxt
        return Stamp(self.producer_id, self.epoch, seq)

    def may_send(self, tp: TopicPartition, stamp: Stamp | None) -> bool:
        """A retried batch waits while a batch before it in its partition is still in flight; a
        transactional producer's batch waits until its partition is in the transaction.

        Until a partition acked a batch of this epoch, it has one batch in flight at a time: a
        leader that does not know the producer accepts any first sequence (its state may have gone
        with retention, as Kafka's broker does), so a later batch that overtook a failing first one
        (NOT_LEADER_OR_FOLLOWER from a leader still being elected) would land first and the first
        one's retry would be out of order, failing it for good."""
        if self.transactional and tp not in self.txn_partitions:
            return False
        in_flight = self.in_flight.get(tp, ())
        if in_flight and tp not in self.last_acked:
            return False
        if stamp is None or (stamp.producer_id, stamp.epoch) != (self.producer_id, self.epoch):
            return True
        return not any(s < stamp.base_sequence for s in in_flight)

    def sent(self, tp: TopicPartition, stamp: Stamp) -> None:
        self.in_flight.setdefault(tp, set()).add(stamp.base_sequence)

    def answered(self, tp: TopicPartition, stamp: Stamp) -> None:
        seqs = self.in_flight.get(tp)
        if seqs is not None:
            seqs.discard(stamp.base_sequence)

    def acked(self, tp: TopicPartition, stamp: Stamp, records: int) -> None:
        if (stamp.producer_id, stamp.epoch) == (self.producer_id, self.epoch):
            last = stamp.base_sequence + records - 1
            self.last_acked[tp] = max(self.last_acked.get(tp, -1), last)

    def on_error(self, tp: TopicPartition, stamp: Stamp | None, error: kerr.KafkaError) -> bool:
        """True when ``error`` should be retried despite what it says of itself (an ordering
        accident, a producer the leader forgot); may request an epoch bump."""
        if stamp is None or (stamp.producer_id, stamp.epoch) != (self.producer_id, self.epoch):
            return error.retriable or isinstance(error, kerr.OutOfOrderSequenceNumberError)
        if isinstance(error, kerr.OutOfOrderSequenceNumberError):
            earliest = stamp.base_sequence == self.last_acked.get(tp, -1) + 1
            if earliest:
                self._lost_sequence(error)
                return False
            return True
        if isinstance(error, kerr.UnknownProducerIdError):
            self._lost_sequence(error)
            return not self.transactional
        return error.retriable

    def _lost_sequence(self, error: BaseException) -> None:
        if self.transactional:
            self.abortable = self.abortable or error
        else:
            self.bump_requested = True

    def failed_after_send(self, error: BaseException | None = None) -> None:
        """A batch that went out failed for good: its outcome is unknown, so start over (a
        transactional producer's transaction can only be aborted)."""
        self._lost_sequence(error or kerr.KafkaError("a batch of the transaction failed"))

    def maybe_bump(self) -> bool:
        """Bump the epoch when one was asked for and nothing is in flight; True when bumped.
        At the last epoch a new producer id is needed instead (`new_id_needed`)."""
        if not self.bump_requested or any(self.in_flight.values()):
            return False
        self.bump_requested = False
        if self.epoch >= _MAX_EPOCH:
            self.new_id_needed = True
            return False
        self.epoch += 1
        self._reset_sequences()
        return True
