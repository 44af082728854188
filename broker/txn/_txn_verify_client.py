"""How a partition leader asks a transactional id's coordinator about a transactional batch
(issue 28, KIP-890; the leader's side is `kraftlog.broker.replica._txn_verification`): this
broker's own `TxnService` when it coordinates the id, else AddPartitionsToTxn over the broker
listener (verify-only, or adding the partitions for a client of transaction version 2), as
Kafka's ``AddPartitionsToTxnManager`` sends it.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from kraftlog.broker.coordinator import TXN_TOPIC
from kraftlog.broker.txn._txn_service import TxnService
from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.proto import txn_pb2, txn_pb2_grpc

__all__ = ["TxnVerifyClient"]

Error = type[kerr.KafkaError] | None
_TIMEOUT_S = 10.0


class TxnVerifyClient:
    """``verify`` is the replica manager's `TxnVerify`; ``broker_address`` gives a broker's gRPC
    address (None: unknown), ``channel`` the broker's channel to it."""

    def __init__(
        self,
        broker_id: int,
        service: TxnService,
        broker_address: Callable[[int], str | None],
        channel: Callable[[str], grpc.aio.Channel],
    ) -> None:
        self.broker_id = broker_id
        self.service = service
        self._address = broker_address
        self._channel = channel

    def coordinator(self, txn_id: str) -> int:
        """The broker leading the id's ``__transaction_state`` partition (-1: none now)."""
        image = self.service.txn.image()
        topic = image.topics.get_by_name(TXN_TOPIC)
        index = coordinator_partition(txn_id, self.service.txn.partition_count(image))
        return topic.partitions[index].leader if topic is not None and index in topic.partitions else -1

    async def verify(
        self, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]], add: bool
    ) -> dict[tuple[str, int], Error]:
        leader = self.coordinator(txn_id)
        if leader == self.broker_id:
            return await self.service.verify_or_add(txn_id, pid, epoch, parts, add)
        address = self._address(leader) if leader >= 0 else None
        if address is None:
            return dict.fromkeys(parts, kerr.CoordinatorNotAvailableError)
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        R = txn_pb2.AddPartitionsToTxnRequest
        request = R(
            transactional_id=txn_id,
            producer_id=pid,
            producer_epoch=epoch,
            verify_only=not add,
            topics=[R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        r = await txn_pb2_grpc.TxnServiceStub(self._channel(address)).AddPartitionsToTxn(request, timeout=_TIMEOUT_S)
        out: dict[tuple[str, int], Error] = dict.fromkeys(
            parts, kerr.error_for_code(r.error.code) if r.error.code else None
        )
        for t in r.results:
            for p in t.partitions:
                code = p.error.code or r.error.code
                out[(t.name, p.partition_index)] = kerr.error_for_code(code) if code else None
        return out
