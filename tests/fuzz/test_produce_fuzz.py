"""Mutation fuzzer through a running broker's produce path (issue 12 §4).

Real batches (every codec, keys and values null or not, headers, spread timestamps) are mutated —
bytes flipped or set, inserted, deleted, header fields overwritten, the tail cut — and, four times
in five, given a correct length and CRC again so the broker's content checks are what decides.
Each is produced (acks=1) to a one-node cluster, then:

- refused: the answer is one of Kafka's errors for bad input, with no offset, and nothing was
  written (the next good batch lands at the expected offset);
- stored: fetched back, it is the batch sent (only baseOffset, partitionLeaderEpoch and, when the
  header lied, maxTimestamp and the CRC differ), its CRC is valid and both decoders read it;
- either way the partition keeps serving: a good batch after each one is acknowledged, and at the
  end a `Consumer` reads every stored record without an error.

Seeded (``KRAFTLOG_FUZZ_SEED``, default 12); ``KRAFTLOG_FUZZ_EXAMPLES`` mutated batches (default 40;
``make fuzz`` sets a long budget).
"""

from __future__ import annotations

import os
import random
import struct
import time

import grpc
import pytest
from _oracle import kafka_python_can_judge
from kafka.record.default_records import DefaultRecordBatch

from kraftlog import storage
from kraftlog.client import Consumer, NewTopic
from kraftlog.common.records import crc32c
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

EXAMPLES = int(os.environ.get("KRAFTLOG_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("KRAFTLOG_FUZZ_SEED", "12"))
pytestmark = [pytest.mark.integration, pytest.mark.timeout(max(300, EXAMPLES // 2))]

REFUSALS = {
    "CORRUPT_MESSAGE",
    "INVALID_RECORD",
    "INVALID_TIMESTAMP",
    "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE",
    "UNSUPPORTED_COMPRESSION_TYPE",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    # a batch whose attributes say transactional, sent without a transactional id (Kafka's answer)
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
FIELDS = [
    (8, ">i"),
    (16, ">b"),
    (21, ">h"),
    (23, ">i"),
    (27, ">q"),
    (35, ">q"),
    (43, ">q"),
    (51, ">h"),
    (53, ">i"),
    (57, ">i"),
]  # length, magic, attributes, lastOffsetDelta, timestamps, producer, count


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("fuzz") / "c",
        controllers=1,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500},
    )
    cluster.start(timeout_s=90)
    try:
        cluster.wait_unfenced_brokers()
        with cluster.admin(request_timeout_ms=20_000) as admin:
            assert admin.create_topics([NewTopic("fuzz", 1, 1)]).topics[0].error.code == 0
        address = f"127.0.0.1:{cluster.nodes[1].broker_port}"
        with grpc.insecure_channel(address) as channel:
            stub = broker_pb2_grpc.BrokerServiceStub(channel)
            wait_until(lambda: _produce(stub, _good(0)).error.code == 0, 30, what="a leader for fuzz-0")
            yield cluster, stub
    finally:
        cluster.stop()


def _produce(stub: broker_pb2_grpc.BrokerServiceStub, records: bytes) -> broker_pb2.ProduceResponse.PartitionResponse:
    R = broker_pb2.ProduceRequest
    resp = stub.Produce(
        R(
            acks=1,
            timeout_ms=10_000,
            topics=[R.TopicData(name="fuzz", partitions=[R.PartitionData(index=0, records=records)])],
        ),
        timeout=30,
    )
    return resp.topics[0].partitions[0]


def _fetch(stub: broker_pb2_grpc.BrokerServiceStub, offset: int) -> broker_pb2.FetchResponse.PartitionData:
    R = broker_pb2.FetchRequest
    resp = stub.Fetch(
        R(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 22,
            topics=[
                R.FetchTopic(
                    topic="fuzz",
                    partitions=[
                        R.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 22,
                        )
                    ],
                )
            ],
        ),
        timeout=30,
    )
    return resp.responses[0].partitions[0]


def _now() -> int:
    return int(time.time() * 1000)


def _good(i: int) -> bytes:
    return storage.build_batch([(b"sentinel", b"%d" % i)], timestamp_ms=_now())


def _real_batch(rng: random.Random) -> bytes:
    builder = storage.RecordBatchBuilder(compression=rng.choice(list(storage.CompressionType)))
    now = _now()
    uniform = rng.random() < 0.5
    for i in range(rng.choice([1, 2, 5, 30, 200])):
        if uniform:
            builder.append(now + i // 10, b"key", b"v" * 40)
        else:
            builder.append(
                now + rng.randrange(-5000, 5000),
                rng.choice([None, b"", b"k%d" % i]),
                rng.choice([None, b"", rng.randbytes(rng.randrange(1, 300))]),
                [storage.Header("h", rng.choice([None, b"x"]))] if rng.random() < 0.2 else [],
            )
    return builder.build()


def _mutate(rng: random.Random, batch: bytes) -> bytes:
    buf = bytearray(batch)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["flip", "set", "insert", "delete", "field", "truncate"])
        at = rng.randrange(len(buf)) if buf else 0
        if kind == "flip" and buf:
            buf[at] ^= rng.randrange(1, 256)
        elif kind == "set" and buf:
            buf[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
        elif kind == "insert":
            buf[at:at] = rng.randbytes(rng.randint(1, 4))
        elif kind == "delete" and buf:
            del buf[at : at + rng.randint(1, 4)]
        elif kind == "field" and len(buf) >= 61:
            pos, fmt = rng.choice(FIELDS)
            bits = struct.calcsize(fmt) * 8
            value = rng.choice([rng.randrange(-2, 70), rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))])
            struct.pack_into(fmt, buf, pos, value)
        elif kind == "truncate" and len(buf) > 1:
            del buf[rng.randrange(1, len(buf)) :]
    if len(buf) >= 61 and rng.random() < 0.8:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _same_batch(sent: bytes, stored: bytes) -> None:
    """Stored = sent, but for baseOffset, partitionLeaderEpoch and (rewritten together) the
    maxTimestamp and CRC; the stored CRC is valid and both decoders agree on the records."""
    assert len(stored) == len(sent)
    assert stored[8:12] == sent[8:12] and stored[16:17] == sent[16:17]
    assert stored[21:35] == sent[21:35] and stored[43:] == sent[43:]
    if stored[35:43] == sent[35:43]:
        assert stored[17:21] == sent[17:21]
    b = storage.RecordBatch(stored)
    assert b.is_valid()
    records = b.records()
    assert len(records) == b.records_count
    assert b.max_timestamp == max(r.timestamp_ms for r in records)
    if kafka_python_can_judge(b, records):
        theirs = DefaultRecordBatch(stored)  # an independent decoder (kafka-python) reads the same
        assert theirs.validate_crc()
        assert [(r.offset, r.key, r.value) for r in theirs] == [(r.offset, r.key, r.value) for r in records]
    assert [(r.key, r.value, r.headers) for r in records] == [
        (r.key, r.value, r.headers) for r in storage.RecordBatch(sent).records()
    ]


def test_mutated_batches_are_refused_or_stored_intact(broker) -> None:
    cluster, stub = broker
    rng = random.Random(SEED)
    next_offset = _produce(stub, _good(-1)).base_offset + 1
    stored_records = next_offset
    outcomes = {"refused": 0, "stored": 0}
    for i in range(EXAMPLES):
        sent = _mutate(rng, _real_batch(rng))
        p = _produce(stub, sent)
        if p.error.code:
            assert p.error.name in REFUSALS, (i, p.error)
            assert p.base_offset == -1
            outcomes["refused"] += 1
        else:
            assert p.base_offset == next_offset, (i, p)
            pd = _fetch(stub, p.base_offset)
            assert pd.error.code == 0, (i, pd.error)
            [(_pos, stored)] = list(storage.iter_batches(pd.records))[:1]
            assert stored.base_offset == p.base_offset
            _same_batch(sent, stored.to_bytes())
            next_offset = stored.next_offset
            stored_records += stored.records_count
            outcomes["stored"] += 1
        sentinel = _produce(stub, _good(i))  # the partition keeps serving, nothing partial was written
        assert sentinel.error.code == 0 and sentinel.base_offset == next_offset, (i, sentinel)
        next_offset += 1
        stored_records += 1
    assert outcomes["refused"] and outcomes["stored"], outcomes
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest")
    try:
        consumer.assign([("fuzz", 0)])
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < stored_records and time.monotonic() < deadline:
            got += consumer.poll(500)
    finally:
        consumer.close()
    assert [r.offset for r in got] == list(range(stored_records))
