"""Produce validation on a real broker (issue 12 §1): batches whose CRC is valid but whose content
is not are refused with Kafka's errors and named records, nothing of them is stored and the
partition keeps serving; a corrupt batch that reached the disk before validation existed makes the
consumer raise a typed error at its offset instead of stalling.
"""

from __future__ import annotations

import gzip
import struct
import time
from pathlib import Path

import grpc
import pytest

from kraftlog import storage
from kraftlog.client import Consumer, NewTopic
from kraftlog.common import errors as kerr
from kraftlog.common.records import crc32c, write_varint
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.integration

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _record(offset_delta: int, value: bytes = b"value") -> bytes:
    body = bytearray(b"\x00\x00")  # attributes, timestamp delta 0
    write_varint(body, offset_delta)
    body += b"\x02k"  # key "k"
    write_varint(body, len(value))
    body += value + b"\x00"  # no headers
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def _batch(section: bytes, count: int, *, attributes: int = 0, base_offset: int = 0) -> bytes:
    now = int(time.time() * 1000)
    header = bytearray(
        _HEADER.pack(base_offset, 49 + len(section), -1, 2, 0, attributes, count - 1, now, now, -1, -1, -1, count)
    )
    struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + section))
    return bytes(header) + section


def _good(*values: bytes) -> bytes:
    return storage.build_batch([(b"k", v) for v in values], timestamp_ms=int(time.time() * 1000))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("validate") / "c",
        controllers=1,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500},
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            for topic in ("checked", "ondisk"):
                assert admin.create_topics([NewTopic(topic, 1, 1)]).topics[0].error.code == 0
        yield c
    finally:
        c.stop()


def _produce(
    cluster: LocalCluster, records: bytes, topic: str = "checked"
) -> broker_pb2.ProduceResponse.PartitionResponse:
    R = broker_pb2.ProduceRequest
    with grpc.insecure_channel(f"127.0.0.1:{cluster.nodes[1].broker_port}") as ch:
        resp = broker_pb2_grpc.BrokerServiceStub(ch).Produce(
            R(
                acks=1,
                timeout_ms=10_000,
                topics=[R.TopicData(name=topic, partitions=[R.PartitionData(index=0, records=records)])],
            ),
            timeout=30,
        )
    return resp.topics[0].partitions[0]


def _produce_when_led(
    cluster: LocalCluster, records: bytes, topic: str = "checked"
) -> broker_pb2.ProduceResponse.PartitionResponse:
    def attempt() -> broker_pb2.ProduceResponse.PartitionResponse | None:
        try:
            p = _produce(cluster, records, topic)
        except grpc.RpcError:
            return None
        return p if p.error.code == 0 else None

    return wait_until(attempt, 60, what="an acknowledged produce")


def test_bad_batches_are_refused_and_nothing_of_them_is_stored(cluster: LocalCluster) -> None:
    assert _produce_when_led(cluster, _good(b"a", b"b")).base_offset == 0
    too_few = _produce(cluster, _batch(_record(0) + _record(1), count=3))
    assert too_few.error.name == "INVALID_RECORD" and too_few.base_offset == -1
    assert [(e.batch_index, e.message) for e in too_few.record_errors] == [
        (2, "the batch declares 3 records but holds 2")
    ]
    not_gzip = _produce(cluster, _batch(gzip.compress(_record(0))[:-10], count=1, attributes=1))
    assert not_gzip.error.name == "CORRUPT_MESSAGE"
    shuffled = _produce(cluster, _batch(_record(1) + _record(0), count=2))
    assert shuffled.error.name == "INVALID_RECORD" and [e.batch_index for e in shuffled.record_errors] == [0]
    assert _produce(cluster, _good(b"c", b"d")).base_offset == 2  # nothing of the refused ones was stored
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest")
    try:
        consumer.assign([("checked", 0)])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            got += consumer.poll(200)
        assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    finally:
        consumer.close()


def test_a_corrupt_batch_on_disk_is_a_typed_consumer_error_at_its_offset(cluster: LocalCluster) -> None:
    assert _produce_when_led(cluster, _good(b"a", b"b"), "ondisk").base_offset == 0
    # a batch an older version let through: CRC fine, one of its three records missing
    cluster.stop_node(1)
    [segment] = sorted((Path(cluster.nodes[1].dir) / "data" / "ondisk-0").glob("*.log"))
    with open(segment, "ab") as fh:
        fh.write(_batch(_record(0) + _record(1), count=3, base_offset=2))
    cluster.start_node(1)
    cluster.wait_ready(60)
    assert _produce_when_led(cluster, _good(b"e"), "ondisk").base_offset == 5  # the partition keeps serving

    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", retry_backoff_ms=50)
    try:
        consumer.assign([("ondisk", 0)])
        got: list = []
        with pytest.raises(kerr.CorruptMessageError) as info:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                got += consumer.poll(200)
        assert [r.value for r in got] == [b"a", b"b"]
        assert info.value.offset == 2 and "batch at offset 2 is corrupt" in str(info.value)
        consumer.seek(("ondisk", 0), 5)
        records = wait_until(lambda: consumer.poll(200) or None, 30, what="the record after the corrupt batch")
        assert [(r.offset, r.value) for r in records] == [(5, b"e")]
    finally:
        consumer.close()
