"""Transaction version 2 (issue 28, KIP-890) on a real node: the Bufstream analysis' scenario — a
transaction marker delayed past the producer's next transaction — and confluent-kafka's
transactions under both versions.

The delayed marker is a copy of the last transaction's marker (the same producer id, epoch and
coordinator epoch the coordinator wrote it with) delivered to the partition leader by
WriteTxnMarkers once the producer's next transaction has written there: what a marker request
held up in the network and delivered late (or retried by the coordinator after a lost answer)
does. Under transaction version 1 the marker carries the epoch the next transaction's batches
have, so it closes that transaction at the partition: a delayed COMMIT makes the next, aborted,
transaction's record readable (aborted read), a delayed ABORT hides the next, committed,
transaction's record (lost write). Under version 2 every end bumped the epoch: the marker is
not newer than the producer's epoch at the partition and is refused (INVALID_PRODUCER_EPOCH),
the next transaction ends as its producer decided."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraftlog.client import Consumer, NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, txn_pb2, txn_pb2_grpc
from tests.integration.test_txn_coordinator import TxnClient, channel

pytestmark = pytest.mark.integration

TOPIC = "ledger"  # the topic TxnClient writes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("tv2") / "c",
        controllers=1,
        combined=True,
        overrides={"transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1},
    )
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(1)
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
        yield c
    finally:
        c.stop()


def set_transaction_version(cluster: LocalCluster, level: int) -> None:
    """Finalize the level (an upgrade, else a safe downgrade), then wait until the broker's
    coordinator acts on it: a probe transaction's end bumps the epoch exactly under version 2."""
    with cluster.admin(request_timeout_ms=20_000) as admin:
        r = admin.update_features({"transaction.version": level})
        if r.error.code:
            r = admin.update_features({"transaction.version": level}, upgrade_type=2)
        assert r.error.code == 0, r.error
    probe = TxnClient(cluster, f"probe-{level}-{time.monotonic_ns()}")

    def acts_on_it() -> bool | None:
        probe.init()
        assert probe.add(0).error.code == 0
        return (end(probe, False).producer_id >= 0) == (level >= 2) or None

    wait_until(acts_on_it, 30, what=f"transaction.version {level} in force")


def end(tx: TxnClient, commit: bool) -> Any:
    """EndTxn offering transaction version 2 (as our producer does): adopts a bumped epoch."""
    r = tx._retry(
        "EndTxn",
        lambda n: txn_pb2_grpc.TxnServiceStub(channel(tx.cluster, n)).EndTxn(
            txn_pb2.EndTxnRequest(
                transactional_id=tx.txn_id,
                producer_id=tx.pid,
                producer_epoch=tx.epoch,
                committed=commit,
                client_transaction_version=2,
            ),
            timeout=15,
        ),
    )
    assert r.error.code == 0, r.error
    if r.producer_id >= 0:
        tx.pid, tx.epoch, tx.seq = r.producer_id, r.producer_epoch, {0: 0, 1: 0}
    return r


def wait_complete(tx: TxnClient) -> None:
    wait_until(
        lambda: tx.describe().state.transaction_state in ("CompleteCommit", "CompleteAbort") or None,
        30,
        what="the transaction's markers",
    )


def coordinator_epoch_at(cluster: LocalCluster, partition: int, pid: int) -> int:
    stub = broker_pb2_grpc.BrokerServiceStub(channel(cluster, next(iter(cluster.nodes))))
    R = broker_pb2.DescribeProducersRequest
    r = stub.DescribeProducers(R(topics=[R.Topic(name=TOPIC, partition_indexes=[partition])]), timeout=10)
    (state,) = [s for s in r.topics[0].partitions[0].active_producers if s.producer_id == pid]
    return int(state.coordinator_epoch)


def deliver_marker(cluster: LocalCluster, partition: int, marker: dict[str, Any]) -> str:
    """The delayed copy of a marker arrives at the partition's leader (the only node)."""
    R = broker_pb2.WriteTxnMarkersRequest
    request = R(
        timeout_ms=10_000,
        markers=[R.Marker(**marker, topics=[R.Topic(name=TOPIC, partition_indexes=[partition])])],
    )
    r = broker_pb2_grpc.BrokerServiceStub(channel(cluster, next(iter(cluster.nodes)))).WriteTxnMarkers(
        request, timeout=15
    )
    return str(r.markers[0].topics[0].partitions[0].error.name or "NONE")


def committed(cluster: LocalCluster, partition: int) -> list[bytes]:
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", isolation_level="read_committed") as c:
        tp = (TOPIC, partition)
        c.assign([tp])
        end_offset = c.end_offsets([tp])[tp]
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while c.position(tp) < end_offset and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(100))
        return out


def delayed_marker_run(cluster: LocalCluster, level: int, first_commits: bool, partition: int) -> tuple[str, list]:
    """T1 ends (commit or abort) with its marker; T2 writes to the same partition; a copy of
    T1's marker arrives; T2 ends the other way. Answers the delayed marker's error and what a
    read_committed consumer reads from the partition."""
    tx = TxnClient(cluster, f"bufstream-{level}-{int(first_commits)}")
    tx.init()
    assert tx.add(partition).error.code == 0
    assert tx.produce(partition, b"t1").error.code == 0
    data_epoch = tx.epoch
    end(tx, first_commits)
    marker_epoch = tx.epoch if level >= 2 else data_epoch  # v2: the end bumped it, the marker has it
    wait_complete(tx)
    marker = {
        "producer_id": tx.pid,
        "producer_epoch": marker_epoch,
        "transaction_result": first_commits,
        "coordinator_epoch": coordinator_epoch_at(cluster, partition, tx.pid),
        "transaction_version": 2 if level >= 2 else 0,
    }
    assert tx.add(partition).error.code == 0
    assert tx.produce(partition, b"t2").error.code == 0
    error = deliver_marker(cluster, partition, marker)
    end(tx, not first_commits)
    wait_complete(tx)
    return error, committed(cluster, partition)


def test_version_1_a_delayed_marker_closes_the_next_transaction(cluster: LocalCluster) -> None:
    """What transaction version 1 does (documented, as the Bufstream analysis found on Kafka)."""
    set_transaction_version(cluster, 1)
    error, read = delayed_marker_run(cluster, 1, first_commits=True, partition=0)
    assert error == "NONE"
    assert read == [b"t1", b"t2"]  # aborted read: T2 aborted, its record is readable
    error, read = delayed_marker_run(cluster, 1, first_commits=False, partition=1)
    assert error == "NONE"
    assert read == []  # lost write: T2 committed, its record is hidden


def test_version_2_refuses_the_delayed_marker(cluster: LocalCluster) -> None:
    set_transaction_version(cluster, 2)
    before0, before1 = committed(cluster, 0), committed(cluster, 1)
    error, read = delayed_marker_run(cluster, 2, first_commits=True, partition=0)
    assert error == "INVALID_PRODUCER_EPOCH"
    assert read[len(before0) :] == [b"t1"]  # T2 aborted: not read
    error, read = delayed_marker_run(cluster, 2, first_commits=False, partition=1)
    assert error == "INVALID_PRODUCER_EPOCH"
    assert read[len(before1) :] == [b"t2"]  # T2 committed: read


@pytest.mark.parametrize("level", [1, 2])
def test_confluent_kafka_transactions_under_both_versions(cluster: LocalCluster, level: int) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer

    set_transaction_version(cluster, level)
    topic = f"ck-tv{level}"
    with cluster.admin(request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    producer = CKProducer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "transactional.id": f"ck-tv{level}", "linger.ms": 1}
    )
    producer.init_transactions(30)
    for round_ in range(3):  # commit, abort, commit: the epoch moves under version 2 only
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, value=b"r%d-%d" % (round_, i), partition=i % 2)
        producer.flush(30)
        if round_ == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    consumer = CKConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": f"ck-tv{level}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []

    def poll() -> bool:
        for m in consumer.consume(100, 0.5):
            if m.error() is None:
                got.append(m.value())
        return len(got) >= 8

    try:
        wait_until(lambda: poll() or None, 60, what="the committed records")
        for _ in range(3):
            poll()
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"r%d-%d" % (r, i) for r in (0, 2) for i in range(4))


# ------------------------------------------------ a client of transaction version 2, on the wire


def kafka_call(cluster: LocalCluster, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request on the node's Kafka listener, as a Kafka 4 client of transaction version 2
    sends it (no Java client here; librdkafka 2.16 still speaks the first protocol)."""
    import io
    import socket
    import struct

    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader, entity_writer

    from kraftlog.broker.kafka._kafka_wire import build
    from tests.integration.test_kafka_clients import _answer

    request_type = load_request_schema(api_key, version)
    header_type = request_type.__header_schema__
    buf = io.BytesIO()
    header = {"request_api_key": api_key, "request_api_version": version, "correlation_id": 1, "client_id": "tv2"}
    entity_writer(header_type)(buf, build(header_type, header))
    entity_writer(request_type)(buf, build(request_type, body))
    spec = cluster.nodes[next(iter(cluster.nodes))]
    with socket.create_connection((spec.host, spec.kafka_port), timeout=15) as sock:
        sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        answer = _answer(sock)
    response_type = load_response_schema(api_key, version)
    header_size = 5 if response_type.__flexible__ else 4  # correlation id (+ empty tagged fields)
    return entity_reader(response_type)(answer, header_size)[0]


def txn_batch(pid: int, epoch: int, value: bytes) -> bytes:
    from kraftlog.storage import RecordBatchBuilder

    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
    b.append(int(time.time() * 1000), None, value)
    return b.build()


def produce(cluster: LocalCluster, version: int, txn_id: str, partition: int, batch: bytes) -> int:
    body = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
    }
    r = kafka_call(cluster, 0, version, body)
    return int(r.responses[0].partition_responses[0].error_code)


def txn_offset_commit_body(txn_id: str, group_id: str, pid: int, epoch: int, offset: int) -> dict[str, Any]:
    """A TxnOffsetCommit body (any version) committing ``offset`` for partition 0 of TOPIC."""
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    return {
        "transactional_id": txn_id,
        "group_id": group_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [partition]}],
    }


def test_a_version_2_client_adds_partitions_by_producing(cluster: LocalCluster) -> None:
    """Produce v12 adds the partition (no AddPartitionsToTxn), TxnOffsetCommit v5 the group's
    offsets partition (no AddOffsetsToTxn), EndTxn v5 answers the bumped epoch; a batch of
    Produce v11 for a partition not added is refused, and so is the old epoch afterwards."""
    set_transaction_version(cluster, 2)
    txn_id = "wire-tv2"

    def init() -> Any:
        r = kafka_call(cluster, 22, 5, {"transactional_id": txn_id, "transaction_timeout": 60_000})
        return r if r.error_code == 0 else None

    r = wait_until(init, 30, what="InitProducerId")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    before = committed(cluster, 0)
    assert produce(cluster, 12, txn_id, 0, txn_batch(pid, epoch, b"implicit")) == 0
    # a Produce v11 client did not add partition 1: the leader's question finds it outside
    assert produce(cluster, 11, txn_id, 1, txn_batch(pid, epoch, b"unadded")) == 120  # TRANSACTION_ABORTABLE
    assert produce(cluster, 10, txn_id, 1, txn_batch(pid, epoch, b"unadded")) == 48  # INVALID_TXN_STATE
    offsets = txn_offset_commit_body(txn_id, "wire-group", pid, epoch, 5)

    def commit_offsets() -> Any:
        # as a client does: FindCoordinator for the group first (it creates __consumer_offsets)
        kafka_call(cluster, 10, 4, {"key_type": 0, "coordinator_keys": ["wire-group"]})
        a = kafka_call(cluster, 28, 5, offsets)
        return None if a.topics[0].partitions[0].error_code in (14, 15, 16, 51) else a

    r = wait_until(commit_offsets, 30, what="TxnOffsetCommit")
    assert r.topics[0].partitions[0].error_code == 0
    end_body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    r = kafka_call(cluster, 26, 5, end_body)
    assert (r.error_code, int(r.producer_id), int(r.producer_epoch)) == (0, pid, epoch + 1)
    tx = TxnClient(cluster, txn_id)
    wait_complete(tx)
    assert committed(cluster, 0)[len(before) :] == [b"implicit"]
    with Consumer(cluster.bootstrap_servers, group_id="wire-group") as c:
        assert c.committed([(TOPIC, 0)])[(TOPIC, 0)][0] == 5  # the offsets partition joined the transaction
    # the old epoch is fenced at the coordinator; the new one opens the next transaction
    assert produce(cluster, 12, txn_id, 0, txn_batch(pid, epoch, b"zombie")) == 47  # INVALID_PRODUCER_EPOCH
    assert produce(cluster, 12, txn_id, 0, txn_batch(pid, epoch + 1, b"next")) == 0
    r = kafka_call(cluster, 26, 5, {**end_body, "producer_epoch": epoch + 1, "committed": False})
    assert (r.error_code, int(r.producer_epoch)) == (0, epoch + 2)
    wait_complete(tx)
    assert committed(cluster, 0)[len(before) :] == [b"implicit"]


def test_our_producer_speaks_version_2_when_it_is_finalized(cluster: LocalCluster) -> None:
    """kraftlog's own transactional producer: every end under version 2 bumps its epoch (the
    coordinator's answer), and commits and aborts still read as they should."""
    from kraftlog.client import Producer

    set_transaction_version(cluster, 2)
    before = committed(cluster, 1)
    with Producer(cluster.bootstrap_servers, transactional_id="ours-tv2", linger_ms=1) as p:
        p.init_transactions()
        epochs = [p._idempotence.epoch]  # type: ignore[attr-defined]
        for value, commit in ((b"ours-1", True), (b"ours-x", False), (b"ours-2", True)):
            p.begin_transaction()
            p.send(TOPIC, value, partition=1)
            if commit:
                p.commit_transaction(30)
            else:
                p.flush(30)
                p.abort_transaction(30)
            epochs.append(p._idempotence.epoch)  # type: ignore[attr-defined]
    assert epochs == [epochs[0] + i for i in range(4)]
    wait_until(lambda: committed(cluster, 1)[len(before) :] == [b"ours-1", b"ours-2"] or None, 30, what="the reads")


def test_txn_offset_commit_outside_the_transaction_is_transaction_abortable_from_v4(cluster: LocalCluster) -> None:
    """TRANSACTION_ABORTABLE (KIP-890) for offsets of a transaction that did not add the group's
    offsets partition: the group coordinator asks the transaction coordinator first, as Kafka's
    does; TxnOffsetCommit v4+ clients get TRANSACTION_ABORTABLE, older ones INVALID_TXN_STATE.
    Main wrote them pending (error 0), in a transaction no marker of which reaches the group's
    partition: the group's offsets stayed unstable for good."""
    txn_id = "offsets-unadded"

    def init() -> Any:
        # as a client does: FindCoordinator first (it creates __transaction_state)
        kafka_call(cluster, 10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        r = kafka_call(cluster, 22, 4, {"transactional_id": txn_id, "transaction_timeout": 60_000})
        return r if r.error_code == 0 else None

    r = wait_until(init, 30, what="InitProducerId")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    offsets = txn_offset_commit_body(txn_id, "unadded-group", pid, epoch, 3)

    def commit(version: int) -> Any:
        def attempt() -> Any:
            kafka_call(cluster, 10, 4, {"key_type": 0, "coordinator_keys": ["unadded-group"]})
            code = kafka_call(cluster, 28, version, offsets).topics[0].partitions[0].error_code
            return None if code in (14, 15, 16, 51) else [int(code)]  # the group's coordinator not there yet

        return wait_until(attempt, 30, what=f"TxnOffsetCommit v{version}")[0]

    assert commit(4) == 120  # TRANSACTION_ABORTABLE
    assert commit(3) == 48  # INVALID_TXN_STATE
    # added by AddOffsetsToTxn, the offsets are taken
    add = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": "unadded-group"}
    assert kafka_call(cluster, 25, 3, add).error_code == 0
    assert commit(4) == 0
    r = kafka_call(
        cluster, 26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    )
    assert r.error_code == 0
    wait_complete(TxnClient(cluster, txn_id))
    with Consumer(cluster.bootstrap_servers, group_id="unadded-group") as c:
        assert c.committed([(TOPIC, 0)])[(TOPIC, 0)][0] == 3


def test_a_zombies_late_write_after_a_timeout_abort_cannot_land(cluster: LocalCluster) -> None:
    """Under transaction version 2 the coordinator aborts a timed-out transaction as Kafka's does:
    the epoch bumped to fence the producer and bumped again by the (version 2) end, the markers
    version 2 markers with that epoch. The zombie's late batch (Produce v12 and v11) is refused,
    so is its EndTxn and a late copy of the abort marker; nothing of it is read. Main aborted at
    the fencing epoch (one up) with first-protocol markers, a late copy of which was taken."""
    set_transaction_version(cluster, 2)
    txn_id = "zombie-timeout"

    def init() -> Any:
        kafka_call(cluster, 10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        r = kafka_call(cluster, 22, 5, {"transactional_id": txn_id, "transaction_timeout": 1_000})
        return r if r.error_code == 0 else None

    r = wait_until(init, 30, what="InitProducerId")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    before = committed(cluster, 0)
    assert produce(cluster, 12, txn_id, 0, txn_batch(pid, epoch, b"timed-out")) == 0
    tx = TxnClient(cluster, txn_id)
    wait_until(lambda: tx.describe().state.transaction_state == "CompleteAbort" or None, 30, what="the timeout abort")
    state = tx.describe().state
    assert (int(state.producer_id), int(state.producer_epoch)) == (pid, epoch + 2)
    # the zombie wakes up: every way in is shut
    assert produce(cluster, 12, txn_id, 0, txn_batch(pid, epoch, b"zombie-12")) == 47  # INVALID_PRODUCER_EPOCH
    assert produce(cluster, 11, txn_id, 1, txn_batch(pid, epoch, b"zombie-11")) == 47
    end_body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    assert kafka_call(cluster, 26, 5, end_body).error_code == 90  # PRODUCER_FENCED
    marker = {
        "producer_id": pid,
        "producer_epoch": epoch + 2,
        "transaction_result": False,
        "coordinator_epoch": coordinator_epoch_at(cluster, 0, pid),
        "transaction_version": 2,
    }
    assert deliver_marker(cluster, 0, marker) == "INVALID_PRODUCER_EPOCH"  # a late copy of the abort's marker
    assert committed(cluster, 0)[len(before) :] == []
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest") as c:  # read_uncommitted: not there
        tp = (TOPIC, 1)
        c.assign([tp])
        end_offset = c.end_offsets([tp])[tp]
        seen: list[bytes] = []
        deadline = time.monotonic() + 20
        while c.position(tp) < end_offset and time.monotonic() < deadline:
            seen.extend(r.value for r in c.poll(100))
    assert b"zombie-11" not in seen
