"""``TxnService`` (proto/txn.proto): the transaction coordinator's requests over gRPC, translated to
and from `TxnShard` calls on this broker's `TxnCoordinator`. AddOffsetsToTxn adds the group's
``__consumer_offsets`` partition to the transaction, as Kafka does."""

from __future__ import annotations

from typing import Any

from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.proto import txn_pb2, txn_pb2_grpc

from ._group_coordinator import OFFSETS_TOPIC, GroupCoordinator, ShardUnavailable
from ._partition_types import error_pb
from ._txn_coordinator import TxnCoordinator

__all__ = ["TxnService"]

Error = type[kerr.KafkaError] | None


class TxnService(txn_pb2_grpc.TxnServiceServicer):
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

    async def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        R = txn_pb2.AddPartitionsToTxnResponse
        parts = [(t.name, p) for t in request.topics for p in t.partitions]
        error, results = await self._add(request.transactional_id, request.producer_id, request.producer_epoch, parts)
        by_topic: dict[str, list[Any]] = {}
        for topic, index, e in results:
            by_topic.setdefault(topic, []).append(R.Partition(partition_index=index, error=error_pb(e)))
        return R(error=error_pb(error), results=[R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def AddOffsetsToTxn(self, request: Any, context: Any) -> Any:
        if not request.group_id:
            return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(kerr.InvalidGroupIdError, "empty group id"))
        partition = coordinator_partition(request.group_id, self.groups.partition_count(self.txn._image()))
        error, _results = await self._add(
            request.transactional_id, request.producer_id, request.producer_epoch, [(OFFSETS_TOPIC, partition)]
        )
        return txn_pb2.AddOffsetsToTxnResponse(error=error_pb(error))

    async def EndTxn(self, request: Any, context: Any) -> Any:
        txn_id = request.transactional_id
        try:
            error: Error = await self.txn.call(
                txn_id,
                lambda s, token, now: s.end_txn(
                    txn_id, request.producer_id, request.producer_epoch, request.committed, token, now
                ),
            )
        except ShardUnavailable as err:
            error = err.error
        return txn_pb2.EndTxnResponse(error=error_pb(error))

    async def ListTransactions(self, request: Any, context: Any) -> Any:
        R = txn_pb2.ListTransactionsResponse
        states = set(request.state_filters) or None
        pids = set(request.producer_id_filters) or None
        found = [m for shard in self.txn.shards() for m in shard.list_transactions(states, pids)]
        return R(
            error=error_pb(None),
            transaction_states=[
                R.TransactionState(
                    transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.kafka_name
                )
                for m in sorted(found, key=lambda m: m.transactional_id)
            ],
        )

    async def DescribeTransactions(self, request: Any, context: Any) -> Any:
        R = txn_pb2.DescribeTransactionsResponse
        out = []
        for txn_id in request.transactional_ids:
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
            for topic, index in sorted(meta.partitions):
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
