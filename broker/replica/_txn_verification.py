"""Transaction verification at the partition leader (issue 28, KIP-890 part 1; part 2's implicit add).

Before a transactional batch opens its producer's transaction at a partition, the leader asks the
producer's transaction coordinator whether the partition is in the open transaction (Kafka's
AddPartitionsToTxn v4+ with VerifyOnly, sent by `AddPartitionsToTxnManager`); a client of
``transaction.version`` 2 (Produce v12+) has it added by that question instead of sending
AddPartitionsToTxn itself. Without this, a batch that arrives after its transaction ended (a
retry delayed in the network, a zombie) opens a transaction no coordinator knows: it holds back
the partition's last stable offset for good (a hanging transaction) or joins the producer's
next transaction.

Ordering: the guard is taken (`ProducerStateManager.start_verification`) before the question is
sent, and the append presents it; a marker written meanwhile drops it, so the batch of a
transaction that ended during the verification is refused. Batches of a transaction already open
at the partition at the same epoch need no question.

Errors, as Kafka's leader answers the producer: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH;
TRANSACTION_ABORTABLE (not in the transaction) becomes INVALID_TXN_STATE for clients below
Produce v11; a retriable coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, an unreachable coordinator) becomes
NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kraftlog import storage
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

__all__ = ["TxnVerify", "Verification", "verify_transactional_batches"]

Error = type[kerr.KafkaError] | None
#: ``(transactional id, producer id, epoch, partitions, add)`` -> each partition's error (None: in
#: the transaction); ``add``: add the partitions (transaction version 2) rather than only verify
TxnVerify = Callable[[str, int, int, list[tuple[str, int]], bool], Awaitable[dict[tuple[str, int], Error]]]

_RETRIABLE: tuple[type[kerr.KafkaError], ...] = (
    kerr.NotCoordinatorError,
    kerr.CoordinatorNotAvailableError,
    kerr.CoordinatorLoadInProgressError,
    kerr.ConcurrentTransactionsError,
)


@dataclass
class Verification:
    """What the produce path needs: a partition's error (by topic and partition position in the
    request) or the guard its append presents."""

    errors: dict[tuple[int, int], kerr.KafkaError] = field(default_factory=dict)
    guards: dict[tuple[int, int], object] = field(default_factory=dict)


def _leader_error(error: type[kerr.KafkaError], abortable_error: bool) -> kerr.KafkaError:
    if error is kerr.ProducerFencedError:
        return kerr.InvalidProducerEpochError("the producer was fenced at its transaction coordinator")
    if error is kerr.TransactionAbortableError:
        if abortable_error:
            return kerr.TransactionAbortableError("the partition is not in the producer's open transaction")
        return kerr.InvalidTxnStateError("the partition was not added to the transaction")
    if issubclass(error, _RETRIABLE):
        return kerr.NotEnoughReplicasError(
            f"unable to verify the partition was added to the transaction: {error.error_name}"
        )
    return error(f"transaction verification: {error.error_name}")


async def verify_transactional_batches(
    req: broker_pb2.ProduceRequest,
    payloads: list[list[bytes]],
    producer_state: Callable[[str, int], storage.ProducerStateManager | None],
    verify: TxnVerify | None,
) -> Verification:
    """Verify (or, ``req.add_partitions``, add) the partitions whose transactional batch would
    open the producer's transaction; ``producer_state`` gives a partition's state on this leader
    (None: not the leader here, the append answers that). One question per request."""
    out = Verification()
    if verify is None or not req.transactional_id:
        return out
    asked: dict[tuple[str, int], tuple[int, int]] = {}
    producer: tuple[int, int] | None = None
    for ti, t in enumerate(req.topics):
        for pi, p in enumerate(t.partitions):
            first = next(iter(storage.iter_batches(payloads[ti][pi])), None)
            if first is None or not first[1].is_transactional or first[1].producer_id < 0:
                continue
            batch = first[1]
            state = producer_state(t.name, p.index)
            if state is None or state.has_ongoing_txn(batch.producer_id, batch.producer_epoch):
                continue
            producer = (batch.producer_id, batch.producer_epoch)
            out.guards[(ti, pi)] = state.start_verification(batch.producer_id)
            asked[(t.name, p.index)] = (ti, pi)
    if not asked or producer is None:
        return out
    try:
        answers = await verify(req.transactional_id, producer[0], producer[1], sorted(asked), req.add_partitions)
    except Exception as err:  # noqa: BLE001 - an unreachable coordinator: the producer retries
        answers = dict.fromkeys(asked, kerr.CoordinatorNotAvailableError)
        del err
    for tp, position in asked.items():
        error = answers.get(tp, kerr.CoordinatorNotAvailableError)
        if error is not None:
            out.errors[position] = _leader_error(error, req.abortable_error)
            out.guards.pop(position, None)
    return out
