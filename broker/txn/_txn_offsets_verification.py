"""TxnOffsetCommit's question to the transaction coordinator (issue 28, KIP-890), before the group
coordinator writes a producer's offsets into its ``__consumer_offsets`` partition: is that
partition in the producer's open transaction (AddOffsetsToTxn added it), or, for a client of
transaction version 2 (TxnOffsetCommit v5), add it. Kafka's group coordinator asks so for every
TxnOffsetCommit (``CoordinatorPartitionWriter.maybeStartTransactionVerification``); without the
question, offsets of a transaction that ended, or of one that never added the partition, are
written pending and no marker ever ends them (the group's offsets stay unstable for good).

Errors, as Kafka answers the client: TRANSACTION_ABORTABLE (not in the transaction) for clients
that take it (TxnOffsetCommit v4+, kraftlog's producer), INVALID_TXN_STATE for older ones;
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (Kafka's ``AddPartitionsToTxnManager``); an
unreachable coordinator is COORDINATOR_NOT_AVAILABLE, which clients retry.
"""

from __future__ import annotations

from kraftlog.broker.groups import OFFSETS_TOPIC, GroupService
from kraftlog.broker.replica import error_pb
from kraftlog.broker.txn._txn_verify_client import TxnVerifyClient
from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["verify_txn_offsets", "txn_offsets_refused"]

Error = type[kerr.KafkaError] | None


async def verify_txn_offsets(
    verify: TxnVerifyClient, groups: GroupService, request: group_pb2.TxnOffsetCommitRequest, *, add: bool
) -> Error:
    """The error of ``request`` at its transaction coordinator (None: the group's offsets
    partition is in the transaction, or was added with ``add``)."""
    partition = coordinator_partition(request.group_id, groups.c.partition_count(groups.image()))
    tp = (OFFSETS_TOPIC, partition)
    try:
        answers = await verify.verify(request.transactional_id, request.producer_id, request.producer_epoch, [tp], add)
    except Exception:  # noqa: BLE001 - an unreachable coordinator: the client retries
        return kerr.CoordinatorNotAvailableError
    error = answers.get(tp, kerr.CoordinatorNotAvailableError)
    if error is kerr.TransactionAbortableError and not request.abortable_error:
        return kerr.InvalidTxnStateError
    if error is kerr.ProducerFencedError:
        return kerr.InvalidProducerEpochError
    return error


def txn_offsets_refused(
    request: group_pb2.TxnOffsetCommitRequest, error: type[kerr.KafkaError]
) -> group_pb2.TxnOffsetCommitResponse:
    """Every partition of ``request`` answered ``error`` (Kafka's ``getErrorResponse``)."""
    P = group_pb2.OffsetCommitResponse
    return group_pb2.TxnOffsetCommitResponse(
        topics=[
            P.Topic(
                name=t.name,
                partitions=[
                    P.Partition(partition_index=p.partition_index, error=error_pb(error)) for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )
