"""The transaction coordinator on real brokers (issue 15), driven over gRPC as a transactional
producer drives it: FindCoordinator (key type 1) creates ``__transaction_state``, InitProducerId
with a transactional id, AddPartitionsToTxn, EndTxn writing COMMIT/ABORT markers into the
partitions, a read_committed consumer seeing only the committed transaction, a zombie fenced by a
new instance, and a coordinator killed -9 with a transaction open."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from kraftlog.client import Consumer, NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, group_pb2, group_pb2_grpc, txn_pb2, txn_pb2_grpc
from kraftlog.storage import RecordBatchBuilder

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
    "transaction.state.log.num.partitions": 3,
}
TOPIC = "ledger"
RETRY = {"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("txc") / "c", controllers=3, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(3)
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3)])
        yield c
    finally:
        c.stop()


def channel(cluster: LocalCluster, node: int) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{cluster.nodes[node].broker_port}")


class TxnClient:
    """Just enough of a transactional producer: the coordinator found again when it moves."""

    def __init__(self, cluster: LocalCluster, txn_id: str) -> None:
        self.cluster, self.txn_id = cluster, txn_id
        self.pid, self.epoch = -1, -1
        self.seq = {0: 0, 1: 0}

    def coordinator(self) -> int | None:
        for node in self.cluster.nodes:
            if not self.cluster.is_running(node):
                continue
            try:
                r = group_pb2_grpc.GroupServiceStub(channel(self.cluster, node)).FindCoordinator(
                    group_pb2.FindCoordinatorRequest(key_type=1, keys=[self.txn_id]), timeout=5
                )
            except grpc.RpcError:
                continue
            c = r.coordinators[0]
            if c.error.code == 0 and self.cluster.is_running(c.node_id):
                return int(c.node_id)
        return None

    def _retry(self, what: str, call: Any) -> Any:
        def once() -> Any:
            node = self.coordinator()
            if node is None:
                return None
            try:
                r = call(node)
            except grpc.RpcError:
                return None
            return None if r.error.name in RETRY else r

        return wait_until(once, 60, what=what)

    def init(self) -> Any:
        r = self._retry(
            "InitProducerId",
            lambda n: broker_pb2_grpc.BrokerServiceStub(channel(self.cluster, n)).InitProducerId(
                broker_pb2.InitProducerIdRequest(transactional_id=self.txn_id, transaction_timeout_ms=60_000),
                timeout=15,
            ),
        )
        assert r.error.code == 0, r.error
        self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, {0: 0, 1: 0}
        return r

    def add(self, *partitions: int) -> Any:
        return self._retry(
            "AddPartitionsToTxn",
            lambda n: txn_pb2_grpc.TxnServiceStub(channel(self.cluster, n)).AddPartitionsToTxn(
                txn_pb2.AddPartitionsToTxnRequest(
                    transactional_id=self.txn_id,
                    producer_id=self.pid,
                    producer_epoch=self.epoch,
                    topics=[txn_pb2.AddPartitionsToTxnRequest.Topic(name=TOPIC, partitions=list(partitions))],
                ),
                timeout=15,
            ),
        )

    def add_offsets(self, group: str) -> Any:
        return self._retry(
            "AddOffsetsToTxn",
            lambda n: txn_pb2_grpc.TxnServiceStub(channel(self.cluster, n)).AddOffsetsToTxn(
                txn_pb2.AddOffsetsToTxnRequest(
                    transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch, group_id=group
                ),
                timeout=15,
            ),
        )

    def end(self, commit: bool, epoch: int | None = None) -> Any:
        return self._retry(
            "EndTxn",
            lambda n: txn_pb2_grpc.TxnServiceStub(channel(self.cluster, n)).EndTxn(
                txn_pb2.EndTxnRequest(
                    transactional_id=self.txn_id,
                    producer_id=self.pid,
                    producer_epoch=self.epoch if epoch is None else epoch,
                    committed=commit,
                ),
                timeout=15,
            ),
        )

    def produce(self, partition: int, *values: bytes, epoch: int | None = None) -> Any:
        b = RecordBatchBuilder(
            producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=self.seq[partition],
            is_transactional=True,
        )
        for v in values:
            b.append(int(time.time() * 1000), None, v)
        payload = b.build()
        R = broker_pb2.ProduceRequest
        request = R(
            acks=-1,
            timeout_ms=10_000,
            transactional_id=self.txn_id,  # transactional batches name their transactional id (Kafka's rule)
            topics=[R.TopicData(name=TOPIC, partitions=[R.PartitionData(index=partition, records=payload)])],
        )

        def once() -> Any:
            for node in self.cluster.nodes:
                if not self.cluster.is_running(node):
                    continue
                try:
                    p = broker_pb2_grpc.BrokerServiceStub(channel(self.cluster, node)).Produce(request, timeout=15)
                except grpc.RpcError:
                    continue
                answer = p.topics[0].partitions[0]
                if answer.error.name != "NOT_LEADER_OR_FOLLOWER":
                    return answer
            return None

        answer = wait_until(once, 30, what="the transactional produce")
        if answer.error.code == 0:
            self.seq[partition] += len(values)
        return answer

    def describe(self) -> Any:
        return self._retry(
            "DescribeTransactions",
            lambda n: _described(
                txn_pb2_grpc.TxnServiceStub(channel(self.cluster, n)).DescribeTransactions(
                    txn_pb2.DescribeTransactionsRequest(transactional_ids=[self.txn_id]), timeout=10
                )
            ),
        )


class _described:
    def __init__(self, r: Any) -> None:
        self.state = r.transaction_states[0]
        self.error = self.state.error


def committed_values(cluster: LocalCluster) -> list[bytes]:
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", isolation_level="read_committed") as c:
        tps = [(TOPIC, 0), (TOPIC, 1)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(100))
        return sorted(out)


def test_a_committed_and_an_aborted_transaction(cluster: LocalCluster) -> None:
    tx = TxnClient(cluster, "orders-tx")
    first = tx.init()
    assert first.producer_epoch == 0
    added = tx.add(0, 1)
    assert added.error.code == 0 and all(p.error.code == 0 for t in added.results for p in t.partitions)
    assert tx.produce(0, b"c-0", b"c-1").error.code == 0
    assert tx.produce(1, b"c-2").error.code == 0
    assert committed_values(cluster) == []  # open: nothing is stable yet
    assert tx.end(True).error.code == 0
    wait_until(lambda: committed_values(cluster) == [b"c-0", b"c-1", b"c-2"], 30, what="the committed records")
    wait_until(lambda: tx.describe().state.transaction_state == "CompleteCommit", 30, what="CompleteCommit")
    assert tx.end(True).error.code == 0  # a retry of the finished commit

    tx.add(0)
    tx.produce(0, b"a-0")
    assert tx.end(False).error.code == 0
    wait_until(lambda: tx.describe().state.transaction_state == "CompleteAbort", 30, what="CompleteAbort")
    assert committed_values(cluster) == [b"c-0", b"c-1", b"c-2"]  # the aborted record never shows


def test_a_new_instance_fences_the_zombie(cluster: LocalCluster) -> None:
    zombie = TxnClient(cluster, "fenced-tx")
    zombie.init()
    zombie.add(1)
    zombie.produce(1, b"z-0")
    fresh = TxnClient(cluster, "fenced-tx")
    fresh.init()  # aborts the zombie's open transaction first (CONCURRENT_TRANSACTIONS meanwhile)
    assert fresh.pid == zombie.pid and fresh.epoch > zombie.epoch
    assert zombie.end(True).error.name == "PRODUCER_FENCED"
    late = zombie.produce(1, b"z-1")
    assert late.error.name in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED")
    assert b"z-0" not in committed_values(cluster)


def test_the_coordinator_killed_with_a_transaction_open(cluster: LocalCluster) -> None:
    tx = TxnClient(cluster, "moving-tx")
    tx.init()
    tx.add(0)
    tx.produce(0, b"m-0")
    coordinator = wait_until(tx.coordinator, 30, what="the coordinator")
    cluster.kill(coordinator)
    try:
        assert tx.end(True).error.code == 0  # the new coordinator loaded the open transaction
        wait_until(lambda: b"m-0" in committed_values(cluster), 40, what="the commit after the failover")
    finally:
        cluster.start_node(coordinator)
        cluster.wait_unfenced_brokers(3)


def _fetch_committed(cluster: LocalCluster, group: str, require_stable: bool) -> Any:
    for node in cluster.nodes:
        if not cluster.is_running(node):
            continue
        stub = group_pb2_grpc.GroupServiceStub(channel(cluster, node))
        c = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(key_type=0, keys=[group]), timeout=5).coordinators[0]
        if c.error.code:
            return None
        return group_pb2_grpc.GroupServiceStub(channel(cluster, c.node_id)).OffsetFetch(
            group_pb2.OffsetFetchRequest(
                group_id=group,
                topics=[group_pb2.OffsetFetchRequest.Topic(name=TOPIC, partition_indexes=[0])],
                require_stable=require_stable,
            ),
            timeout=10,
        )
    return None


def _txn_offset_commit(cluster: LocalCluster, tx: TxnClient, group: str, offset: int) -> Any:
    def once() -> Any:
        stub = group_pb2_grpc.GroupServiceStub(channel(cluster, 1))
        c = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(key_type=0, keys=[group]), timeout=5).coordinators[0]
        if c.error.code:
            return None
        r = group_pb2_grpc.GroupServiceStub(channel(cluster, c.node_id)).TxnOffsetCommit(
            group_pb2.TxnOffsetCommitRequest(
                transactional_id=tx.txn_id,
                group_id=group,
                producer_id=tx.pid,
                producer_epoch=tx.epoch,
                generation_id=-1,
                topics=[
                    group_pb2.OffsetCommitRequest.Topic(
                        name=TOPIC,
                        partitions=[
                            group_pb2.OffsetCommitRequest.Partition(
                                partition_index=0, committed_offset=offset, committed_leader_epoch=-1
                            )
                        ],
                    )
                ],
            ),
            timeout=15,
        )
        error = r.topics[0].partitions[0].error
        return None if error.name in RETRY else error

    return wait_until(once, 30, what="TxnOffsetCommit")


def test_offsets_committed_in_a_transaction_count_only_when_it_commits(cluster: LocalCluster) -> None:
    tx = TxnClient(cluster, "eos-tx")
    tx.init()
    added = tx.add_offsets("readers")
    assert added.error.code == 0
    assert _txn_offset_commit(cluster, tx, "readers", 17).code == 0
    pending = wait_until(lambda: _fetch_committed(cluster, "readers", True), 20, what="an OffsetFetch answer")
    assert pending.error.name == "UNSTABLE_OFFSET_COMMIT"  # the transaction is still open
    assert tx.end(True).error.code == 0

    def committed() -> int | None:
        r = _fetch_committed(cluster, "readers", True)
        if r is None or r.error.code:
            return None
        offset = r.topics[0].partitions[0].committed_offset
        return offset if offset >= 0 else None

    assert wait_until(committed, 30, what="the offset after the commit") == 17

    tx.add_offsets("readers")  # a second transaction with an offset, aborted: the committed offset stays 17
    _txn_offset_commit(cluster, tx, "readers", 99)
    assert tx.end(False).error.code == 0
    wait_until(lambda: (r := _fetch_committed(cluster, "readers", True)) is not None and r.error.code == 0, 30,
               what="a stable answer")  # fmt: skip
    assert committed() == 17


def test_the_transactional_client_commits_and_aborts(cluster: LocalCluster) -> None:
    from kraftlog.client import Producer
    from kraftlog.common import errors as kerr

    with Producer(cluster.bootstrap_servers, transactional_id="client-tx", linger_ms=1) as p:
        with pytest.raises(kerr.InvalidTxnStateError):
            p.begin_transaction()  # before init_transactions
        p.init_transactions()
        outside = p.send(TOPIC, b"outside", partition=0)
        with pytest.raises(kerr.InvalidTxnStateError):
            outside.result(10)
        p.begin_transaction()
        sent = [p.send(TOPIC, b"k-0", partition=0), p.send(TOPIC, b"k-1", partition=1)]
        p.commit_transaction(30)
        assert all(f.result(10).offset >= 0 for f in sent)
        p.begin_transaction()
        p.send(TOPIC, b"x-0", partition=0)
        p.abort_transaction(30)
        p.begin_transaction()
        p.commit_transaction(30)  # an empty transaction: nothing to end on the coordinator
    values = committed_values(cluster)
    assert b"k-0" in values and b"k-1" in values and b"x-0" not in values


def test_read_process_write_exactly_once(cluster: LocalCluster) -> None:
    """A consumer in a group reads ``in``, a transactional producer writes each record to ``out``
    and commits the consumer's offsets in the same transaction (send_offsets_to_transaction)."""
    from kraftlog.client import Producer

    with cluster.admin(request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("in", 1, 3), NewTopic("out", 1, 3)])
    with Producer(cluster.bootstrap_servers) as plain:
        for i in range(20):
            plain.send("in", f"r{i}".encode(), partition=0)
        plain.flush(30)
    with (
        Consumer(
            cluster.bootstrap_servers, group_id="eos", enable_auto_commit=False, auto_offset_reset="earliest"
        ) as c,
        Producer(cluster.bootstrap_servers, transactional_id="eos-app") as p,
    ):
        p.init_transactions()
        c.subscribe(["in"])
        done = 0
        deadline = time.monotonic() + 60
        while done < 20 and time.monotonic() < deadline:
            records = c.poll(200)
            if not records:
                continue
            p.begin_transaction()
            for r in records:
                p.send("out", r.value.upper(), partition=0)
            p.send_offsets_to_transaction({("in", 0): records[-1].offset + 1}, c.group_metadata())
            p.commit_transaction(30)
            done += len(records)
        assert done == 20
    with Consumer(cluster.bootstrap_servers, group_id="eos", enable_auto_commit=False) as again:
        committed = again.committed(("in", 0))
        assert committed is not None and committed.offset == 20
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", isolation_level="read_committed") as r:
        r.assign([("out", 0)])
        end = r.end_offsets([("out", 0)])[("out", 0)]
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while r.position(("out", 0)) < end and time.monotonic() < deadline:
            out.extend(x.value for x in r.poll(100))
    assert sorted(out) == sorted(f"R{i}".encode() for i in range(20))


def test_transactions_command(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """``kraftlog transactions list|describe|abort`` as kafka-transactions."""
    import json

    from kraftlog.cli.__main__ import main

    boot = ["--bootstrap-server", cluster.bootstrap_servers]
    tx = TxnClient(cluster, "cli-tx")
    tx.init()
    tx.add(1)
    tx.produce(1, b"hanging")
    capsys.readouterr()
    assert main(["transactions", "list", *boot, "--output", "json"]) == 0
    listed = {t["transactional_id"]: t for t in json.loads(capsys.readouterr().out)["transactions"]}
    assert listed["cli-tx"]["state"] == "Ongoing" and listed["cli-tx"]["producer_id"] == tx.pid
    assert main(["transactions", "list", "--state", "Ongoing", *boot, "--output", "json"]) == 0
    assert {t["state"] for t in json.loads(capsys.readouterr().out)["transactions"]} == {"Ongoing"}
    assert main(["transactions", "describe", "--transactional-id", "cli-tx", *boot, "--output", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["partitions"] == [f"{TOPIC}-1"] and described["start_ms"] is not None
    args = ["--topic", TOPIC, "--partition", "1", "--producer-id", str(tx.pid), "--producer-epoch", str(tx.epoch)]
    assert main(["transactions", "abort", *args, "--coordinator-epoch", "0", *boot]) == 0
    capsys.readouterr()
    assert (
        main(["transactions", "describe-producers", "--topic", TOPIC, "--partition", "1", *boot, "--output", "json"])
        == 0
    )
    producers = {p["producer_id"]: p for p in json.loads(capsys.readouterr().out)["producers"]}
    assert producers[tx.pid]["current_transaction_start_offset"] == -1  # the hanging transaction is closed
    assert b"hanging" not in committed_values(cluster)
    assert main(["transactions", "describe", "--transactional-id", "nope", *boot]) == 1
