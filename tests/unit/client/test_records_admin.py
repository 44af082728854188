"""RecordsAdmin.delete_records over a `MockTransport` (issue 25): each partition to its leader,
a retriable answer (leadership moved) asked again after a metadata refresh, a fatal one and a
partition that does not exist answered per partition."""

from __future__ import annotations

from typing import Any

from kraftlog.client import MockTransport, RecordsAdmin
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2, errors_pb2

NOT_LEADER = kerr.NotLeaderOrFollowerError.error_code


class Cluster:
    """Brokers b1 and b2; topic t has partitions 0 (led by b1, then by b2 once b1 said
    NOT_LEADER) and 1 (b2). DeleteRecords answers past-the-HW offsets OFFSET_OUT_OF_RANGE."""

    def __init__(self) -> None:
        self.leader0 = 1
        self.deletes: list[tuple[str, list[tuple[int, int]]]] = []

    def __call__(self, address: str, method: str, request: Any) -> Any:
        if method == "BrokerService/Metadata":
            R = broker_pb2.MetadataResponse
            topics = [
                R.Topic(
                    name="t",
                    partitions=[
                        R.Partition(partition_index=0, leader_id=self.leader0, replica_nodes=[1, 2], isr_nodes=[1, 2]),
                        R.Partition(partition_index=1, leader_id=2, replica_nodes=[2, 1], isr_nodes=[2, 1]),
                    ],
                )
            ]
            for name in request.topics:
                if name != "t":
                    topics.append(R.Topic(name=name, error=errors_pb2.Error(code=3)))
            brokers = [broker_pb2.NodeEndpoint(node_id=i, host=f"b{i}", port=9092) for i in (1, 2)]
            return R(brokers=brokers, topics=topics)
        assert method == "BrokerService/DeleteRecords"
        R2 = broker_pb2.DeleteRecordsResponse
        asked = [(p.partition_index, p.offset) for t in request.topics for p in t.partitions]
        self.deletes.append((address, asked))
        out = R2()
        for t in request.topics:
            rt = out.topics.add(name=t.name)
            for p in t.partitions:
                rp = rt.partitions.add(partition_index=p.partition_index, low_watermark=-1)
                if p.partition_index == 0 and address == "b1:9092":
                    self.leader0 = 2  # leadership moved
                    rp.error.CopyFrom(errors_pb2.Error(code=NOT_LEADER, name="NOT_LEADER_OR_FOLLOWER"))
                elif p.offset > 100:
                    code = kerr.OffsetOutOfRangeError.error_code
                    rp.error.CopyFrom(errors_pb2.Error(code=code, name="OFFSET_OUT_OF_RANGE", message="past the HW"))
                else:
                    rp.low_watermark = p.offset
        return out


def test_each_partition_goes_to_its_leader_and_a_moved_leader_is_found_again() -> None:
    cluster = Cluster()
    transport = MockTransport(cluster)
    admin = RecordsAdmin("b1:9092", transport=transport, request_timeout_ms=5000)
    admin._sleep = lambda _s: None
    try:
        result = admin.delete_records({("t", 0): 5, ("t", 1): 500, ("nope", 0): 1}, timeout_ms=1000)
    finally:
        admin.close()
    assert result[("t", 0)].low_watermark == 5 and result[("t", 0)].error is None
    assert isinstance(result[("t", 1)].error, kerr.OffsetOutOfRangeError)
    assert isinstance(result[("nope", 0)].error, kerr.UnknownTopicOrPartitionError)
    # partition 0 asked of b1 (NOT_LEADER), then of b2; partition 1 once, of b2
    assert [(a, asked) for a, asked in cluster.deletes if (0, 5) in asked] == [
        ("b1:9092", [(0, 5)]),
        ("b2:9092", [(0, 5)]),
    ]
    assert sum(1 for _a, asked in cluster.deletes if (1, 500) in asked) == 1
