"""Kafka-protocol producer and transaction requests: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers, DescribeTransactions and
ListTransactions, served by the broker's transaction coordinator, group coordinator and replica
manager: the same service objects the gRPC listener calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kraftlog.broker.groups import GroupService
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_translate import from_pb, to_pb
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, ms
from kraftlog.broker.txn import TxnService, TxnState, TxnVerifyClient, txn_offsets_refused, verify_txn_offsets
from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import broker_pb2, group_pb2, txn_pb2

if TYPE_CHECKING:
    from kraftlog.broker.replica import ReplicaManager

__all__ = ["TxnApis"]

# ListTransactions names the state filters that are no state
_TXN_STATES = frozenset(state.kafka_name for state in TxnState)


class TxnApis:
    """Producer and transaction requests for `KafkaApis`. ``init_producer_id`` is the broker's
    (it allocates producer ids, with or without a transaction); ``replicas`` gives the replica
    manager once the broker started."""

    def __init__(
        self,
        txn_service: TxnService,
        group_service: GroupService,
        init_producer_id: Callable[[broker_pb2.InitProducerIdRequest], Awaitable[broker_pb2.InitProducerIdResponse]],
        replicas: Callable[[], ReplicaManager],
        txn_verify: TxnVerifyClient | None = None,
        verify_offsets: Callable[[], bool] = lambda: True,
    ) -> None:
        self.txn_service = txn_service
        self.group_service = group_service
        self._init_producer_id = init_producer_id
        self._replicas = replicas
        self._txn_verify = txn_verify
        self._verify_offsets = verify_offsets  # transaction.partition.verification.enable

    async def init_producer_id(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = broker_pb2.InitProducerIdRequest(
            transaction_timeout_ms=ms(body.transaction_timeout),
            producer_id=getattr(body, "producer_id", -1),
            producer_epoch=getattr(body, "producer_epoch", -1),
        )
        if body.transactional_id:
            pb.transactional_id = body.transactional_id
        resp = await self._init_producer_id(pb)
        answer = from_pb(resp)
        answer["throttle_time"] = 0
        return answer

    async def add_partitions_to_txn(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v0-3: one client's transaction; v4+: the brokers' batched form of KIP-890 (CLUSTER_ACTION),
        each transaction verify-only or added."""
        if request.api_version >= 4:
            return await self._add_partitions_batched(request)
        body = request.body
        pb = txn_pb2.AddPartitionsToTxnRequest(
            transactional_id=body.v3_and_below_transactional_id,
            producer_id=body.v3_and_below_producer_id,
            producer_epoch=body.v3_and_below_producer_epoch,
        )
        for t in body.v3_and_below_topics:
            pb.topics.add(name=t.name, partitions=list(t.partitions))
        resp = await self.txn_service.AddPartitionsToTxn(pb)
        results = []
        for t in resp.results:
            results.append(
                {
                    "name": t.name,
                    "results_by_partition": [
                        {"partition_index": p.partition_index, "partition_error_code": p.error.code or resp.error.code}
                        for p in t.partitions
                    ],
                }
            )
        if not results and resp.error.code:  # refused as a whole: every partition gets the error
            results = [
                {
                    "name": t.name,
                    "results_by_partition": [
                        {"partition_index": p, "partition_error_code": resp.error.code} for p in t.partitions
                    ],
                }
                for t in body.v3_and_below_topics
            ]
        return {"throttle_time": 0, "results_by_topic_v3_and_below": results}

    async def _add_partitions_batched(self, request: ParsedRequest) -> dict[str, Any]:
        body = request.body
        if not current_request().authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            return {"throttle_time": 0, "error_code": kerr.ClusterAuthorizationFailedError.error_code}
        out = []
        for txn in body.transactions:
            pb = txn_pb2.AddPartitionsToTxnRequest(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                verify_only=txn.verify_only,
            )
            for t in txn.topics:
                pb.topics.add(name=t.name, partitions=list(t.partitions))
            resp = await self.txn_service.AddPartitionsToTxn(pb)
            topics = [
                {
                    "name": t.name,
                    "results_by_partition": [
                        {"partition_index": p.partition_index, "partition_error_code": p.error.code or resp.error.code}
                        for p in t.partitions
                    ],
                }
                for t in resp.results
            ]
            out.append({"transactional_id": txn.transactional_id, "topic_results": topics})
        return {"throttle_time": 0, "error_code": 0, "results_by_transaction": out}

    async def add_offsets_to_txn(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, txn_pb2.AddOffsetsToTxnRequest)
        answer = from_pb(await self.txn_service.AddOffsetsToTxn(pb))
        answer["throttle_time"] = 0
        return answer

    async def end_txn(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v5 (KIP-890 part 2, sent by clients of ``transaction.version`` 2): the coordinator
        bumps the epoch and the answer names the producer id and epoch to go on with."""
        pb = to_pb(request.body, txn_pb2.EndTxnRequest)
        pb.client_transaction_version = 2 if request.api_version >= 5 else 0
        answer = from_pb(await self.txn_service.EndTxn(pb))
        answer["throttle_time"] = 0
        return answer

    async def txn_offset_commit(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, group_pb2.TxnOffsetCommitRequest)
        if request.api_version < 3:  # no group membership in these versions: not checked
            pb.generation_id = -1
        if request.api_version < 2:
            for t in pb.topics:
                for p in t.partitions:
                    p.committed_leader_epoch = -1
        pb.abortable_error = request.api_version >= 4  # KIP-890: v4+ clients take TRANSACTION_ABORTABLE
        # KIP-890: the group's offsets partition must be in the producer's transaction (asked of its
        # coordinator, as Kafka's group coordinator does); v5 (transaction version 2, no
        # AddOffsetsToTxn) adds it there
        add = request.api_version >= 5
        if self._txn_verify is not None and (add or self._verify_offsets()):
            if not current_request().authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, pb.transactional_id):
                return _refused(pb, kerr.TransactionalIdAuthorizationFailedError)
            error = await verify_txn_offsets(self._txn_verify, self.group_service, pb, add=add)
            if error is not None:
                return _refused(pb, error)
        answer = from_pb(await self.group_service.TxnOffsetCommit(pb))
        answer["throttle_time"] = 0
        return answer

    async def describe_producers(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, broker_pb2.DescribeProducersRequest)
        answer = from_pb(self._replicas().describe_producers(pb))
        answer["throttle_time"] = 0
        return answer

    async def describe_transactions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = txn_pb2.DescribeTransactionsRequest(transactional_ids=list(request.body.transactional_ids))
        answer = from_pb(await self.txn_service.DescribeTransactions(pb))
        answer["throttle_time"] = 0
        return answer

    async def list_transactions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = txn_pb2.ListTransactionsRequest(
            state_filters=list(body.state_filters), producer_id_filters=list(body.producer_id_filters)
        )
        answer = from_pb(await self.txn_service.ListTransactions(pb))
        answer["throttle_time"] = 0
        answer["unknown_state_filters"] = [f for f in body.state_filters if f not in _TXN_STATES]
        return answer


def _refused(pb: group_pb2.TxnOffsetCommitRequest, error: type[kerr.KafkaError]) -> dict[str, Any]:
    answer = from_pb(txn_offsets_refused(pb, error))
    answer["throttle_time"] = 0
    return answer
