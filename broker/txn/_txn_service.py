"""``TxnService``: the transaction coordinator's requests (the calls of proto/txn.proto), translated
to and from `TxnShard` calls on this broker's `TxnCoordinator`. AddOffsetsToTxn adds the group's
``__consumer_offsets`` partition to the transaction, as Kafka does.

One service object per broker, called by both front ends: the gRPC listener through the thin
`TxnServicer` (broker/_coordinator_servicers.py) and the Kafka listener's transaction handlers
(broker/_kafka_txn.py). Every call authorizes through the current request context.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.coordinator import ShardUnavailable
from kraftlog.broker.groups import OFFSETS_TOPIC, GroupCoordinator
from kraftlog.broker.replica import error_pb
from kraftlog.broker.txn._txn_coordinator import TRANSACTION_VERSION, TxnCoordinator
from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import txn_pb2

#: the feature whose level 2 is KIP-890's protocol (EndTxn v5, epoch bump at every end)

__all__ = ["TxnService"]

Error = type[kerr.KafkaError] | None
_TXN_DENIED = kerr.TransactionalIdAuthorizationFailedError


def _may_write_txn(txn_id: str) -> bool:
    """Write on the transactional id: what every call of a transaction's producer needs."""
    return current_request().authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)


class TxnService:
    def __init__(self, txn: TxnCoordinator, groups: GroupCoordinator) -> None:
        self.txn = txn
        self.groups = groups

    async def _add(self, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]]) -> tuple[Error, Any]:
        try:
            result: tuple[Error, Any] = await self.txn.call(
                txn_id, lambda s, token, now: s.add_partitions(txn_id, pid, epoch, parts, token, now)
            )
        except ShardUnavailable as err:
            return err.error, tuple((t, p, err.error) for t, p in parts)
        return result

    async def _verify(self, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]]) -> tuple[Error, Any]:
        try:
            result: tuple[Error, Any] = await self.txn.call(
                txn_id, lambda s, token, now: s.verify_partitions(txn_id, pid, epoch, parts, token)
            )
        except ShardUnavailable as err:
            return err.error, tuple((t, p, err.error) for t, p in parts)
        return result

    async def verify_or_add(
        self, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]], add: bool
    ) -> dict[tuple[str, int], Error]:
        """This broker's produce path asks its own coordinator (no authorization: the broker
        asks, for a produce it authorized): each partition's error, None when it is in the open
        transaction; ``add`` (transaction version 2) adds it first."""
        call = self._add if add else self._verify
        error, results = await call(txn_id, pid, epoch, parts)
        return {(t, p): (e or error) for t, p, e in results}

    async def AddPartitionsToTxn(self, request: Any) -> Any:
        """A client's AddPartitionsToTxn, or (``verify_only``, KIP-890 part 1) a partition
        leader's question whether the partitions are in the producer's open transaction: asked by
        a broker (CLUSTER_ACTION), or in process by this broker's own produce path."""
        R = txn_pb2.AddPartitionsToTxnResponse
        parts = [(t.name, p) for t in request.topics for p in t.partitions]
        error: Error
        results: tuple[tuple[str, int, Error], ...]
        if request.verify_only:
            if not current_request().authorize(
                AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
            ):
                error = kerr.ClusterAuthorizationFailedError
                results = tuple((t, p, error) for t, p in parts)
            else:
                error, results = await self._verify(
                    request.transactional_id, request.producer_id, request.producer_epoch, parts
                )
        elif not _may_write_txn(request.transactional_id):
            error, results = _TXN_DENIED, tuple((t, p, _TXN_DENIED) for t, p in parts)
        else:
            # Write on every topic, or nothing is added: the denied ones say why, the others
            # OPERATION_NOT_ATTEMPTED (Kafka's answer)
            writable = current_request().authorized(AclOperation.WRITE, ResourceType.TOPIC, [t for t, _p in parts])
            if any(t not in writable for t, _p in parts):
                error = kerr.TopicAuthorizationFailedError
                results = tuple(
                    (t, p, kerr.OperationNotAttemptedError if t in writable else kerr.TopicAuthorizationFailedError)
                    for t, p in parts
                )
            else:
                error, results = await self._add(
                    request.transactional_id, request.producer_id, request.producer_epoch, parts
                )
        by_topic: dict[str, list[Any]] = {}
        for topic, index, e in results:
            by_topic.setdefault(topic, []).append(R.Partition(partition_index=index, error=error_pb(e)))
        return R(error=error_pb(error), results=[R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def AddOffsetsToTxn(self, request: Any) -> Any:
        if not _may_write_txn(request.transactional_id):
            return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(_TXN_DENIED))
        if not request.group_id:
            return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(kerr.InvalidGroupIdError, "empty group id"))
        if not current_request().authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(kerr.GroupAuthorizationFailedError))
        partition = coordinator_partition(request.group_id, self.groups.partition_count(self.txn.image()))
        error, _results = await self._add(
            request.transactional_id, request.producer_id, request.producer_epoch, [(OFFSETS_TOPIC, partition)]
        )
        return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(error))

    async def EndTxn(self, request: Any) -> Any:
        """EndTxn; ``client_transaction_version`` 2 (EndTxn v5, KIP-890) bumps the epoch and
        answers the producer id and epoch of the producer's next transaction. A gRPC client
        always offers 2 and gets it while ``transaction.version`` 2 is finalized (the Kafka
        listener asks for it only with EndTxn v5, which clients send only then): below it the
        answer's producer id is -1 and the client keeps its epoch, the first protocol."""
        txn_id = request.transactional_id
        R = txn_pb2.EndTxnResponse
        if not _may_write_txn(txn_id):
            return R(error=error_pb(_TXN_DENIED), producer_id=-1, producer_epoch=-1)
        pid, epoch = -1, -1
        try:
            finalized = self.txn.image().features.level(TRANSACTION_VERSION)
            if request.client_transaction_version >= 2 and finalized >= 2:
                shard = self.txn.shard_for(txn_id)
                new_pid = await self.txn.producer_ids.generate() if shard.end_needs_producer_id(txn_id) else -1
                error, pid, epoch = await self.txn.call(
                    txn_id,
                    lambda s, token, now: s.end_txn_v2(
                        txn_id, request.producer_id, request.producer_epoch, request.committed, token, now, new_pid
                    ),
                )
            else:
                error = await self.txn.call(
                    txn_id,
                    lambda s, token, now: s.end_txn(
                        txn_id, request.producer_id, request.producer_epoch, request.committed, token, now
                    ),
                )
        except ShardUnavailable as err:
            error = err.error
        return R(error=error_pb(error), producer_id=pid, producer_epoch=epoch)

    async def ListTransactions(self, request: Any) -> Any:
        R = txn_pb2.ListTransactionsResponse
        states = set(request.state_filters) or None
        pids = set(request.producer_id_filters) or None
        found = [m for shard in self.txn.shards() for m in shard.list_transactions(states, pids)]
        describable = current_request().authorized(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, [m.transactional_id for m in found]
        )
        found = [m for m in found if m.transactional_id in describable]
        return R(
            error=error_pb(None),
            transaction_states=[
                R.TransactionState(
                    transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.kafka_name
                )
                for m in sorted(found, key=lambda m: m.transactional_id)
            ],
        )

    async def DescribeTransactions(self, request: Any) -> Any:
        R = txn_pb2.DescribeTransactionsResponse
        out = []
        ctx = current_request()
        describable = ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, list(request.transactional_ids)
        )
        for txn_id in request.transactional_ids:
            if txn_id not in describable:
                out.append(R.TransactionState(error=error_pb(_TXN_DENIED), transactional_id=txn_id))
                continue
            try:
                meta = self.txn.shard_for(txn_id).txns.get(txn_id)
            except ShardUnavailable as err:
                out.append(R.TransactionState(error=error_pb(err.error), transactional_id=txn_id))
                continue
            if meta is None:
                out.append(
                    R.TransactionState(error=error_pb(kerr.TransactionalIdNotFoundError), transactional_id=txn_id)
                )
                continue
            by_topic: dict[str, list[int]] = {}
            describable = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [t for t, _i in meta.partitions])
            for topic, index in sorted(meta.partitions):
                if topic in describable:  # the topics the caller may see, as Kafka filters them
                    by_topic.setdefault(topic, []).append(index)
            out.append(
                R.TransactionState(
                    error=error_pb(None),
                    transactional_id=txn_id,
                    transaction_state=meta.state.kafka_name,
                    transaction_timeout_ms=meta.timeout_ms,
                    transaction_start_time_ms=meta.start_ms,
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    topics=[R.Topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                )
            )
        return R(transaction_states=out)
