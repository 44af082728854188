"""`RecordsAdmin`: DeleteRecords as Kafka's Admin ``deleteRecords`` and the kafka-delete-records tool
do it (issue 25). Each partition's request goes to its leader (found through the brokers' metadata,
found again when leadership moved); partitions still pending after a retriable error are asked
again until ``request_timeout_ms`` runs out. The answer is per partition: the new low watermark,
or the Kafka error that partition got."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from kraftlog.client._coordinators import BrokerAdminClient
from kraftlog.client._metadata import TopicPartition
from kraftlog.common import Done, Outcome, Retry
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

__all__ = ["DeletedRecords", "RecordsAdmin"]


@dataclass(frozen=True)
class DeletedRecords:
    """One partition's answer: ``low_watermark`` (-1 on error) and ``error`` (None when done)."""

    low_watermark: int
    error: kerr.KafkaError | None = None


class RecordsAdmin(BrokerAdminClient):
    """Record deletion through the partitions' leaders."""

    def delete_records(
        self, offsets: Mapping[tuple[str, int], int], *, timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], DeletedRecords]:
        """Move the log start offset of each ``(topic, partition)`` to its offset (-1: the high
        watermark). The leaders wait up to ``timeout_ms`` for the followers to follow."""
        pending = {TopicPartition(t, p): off for (t, p), off in offsets.items()}
        done: dict[tuple[str, int], DeletedRecords] = {}
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        topics = sorted({tp.topic for tp in pending})
        self._metadata.add_topics(topics)

        def attempt(_timeout_s: float) -> Outcome:
            self._metadata.update(topics, self.request_timeout_ms)
            by_leader: dict[str, list[TopicPartition]] = {}
            retry_reason = ""
            for tp in list(pending):
                ids = self._metadata.partitions_for_topic(tp.topic)
                if ids is None or tp.partition not in ids:
                    err = kerr.UnknownTopicOrPartitionError(f"{tp.topic}-{tp.partition} does not exist")
                    done[(tp.topic, tp.partition)] = DeletedRecords(-1, err)
                    del pending[tp]
                    continue
                leader = self._metadata.leader_for(tp)
                if leader is None:
                    retry_reason = f"no leader for {tp.topic}-{tp.partition}"
                    continue
                by_leader.setdefault(leader.address, []).append(tp)
            for address, tps in by_leader.items():
                request = broker_pb2.DeleteRecordsRequest(timeout_ms=timeout_ms)
                for topic in sorted({tp.topic for tp in tps}):
                    t = request.topics.add(name=topic)
                    for tp in tps:
                        if tp.topic == topic:
                            t.partitions.add(partition_index=tp.partition, offset=pending[tp])
                try:
                    resp = self._pool.stub(address).DeleteRecords(request, timeout=timeout_ms / 1000.0 + 10.0)
                except grpc.RpcError as err:
                    retry_reason = f"{address}: {err.code()}"
                    continue
                for rt in resp.topics:
                    for rp in rt.partitions:
                        tp = TopicPartition(rt.name, rp.partition_index)
                        if tp not in pending:
                            continue
                        if rp.error.code:
                            error = kerr.error_for_code(rp.error.code)
                            if error.retriable:
                                self._metadata.request_update()
                                retry_reason = rp.error.name
                                continue
                            done[(tp.topic, tp.partition)] = DeletedRecords(
                                -1, error(rp.error.message or rp.error.name)
                            )
                        else:
                            done[(tp.topic, tp.partition)] = DeletedRecords(rp.low_watermark)
                        del pending[tp]
            if pending:
                return Retry(retry_reason, value=None)
            return Done(None)

        self._retry(attempt, deadline, "DeleteRecords")
        for tp in pending:  # the deadline passed first
            done[(tp.topic, tp.partition)] = DeletedRecords(
                -1, kerr.RequestTimedOutError(f"DeleteRecords of {tp.topic}-{tp.partition}: no leader answered")
            )
        return done
