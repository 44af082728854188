"""Bounded work per request and per connection (issue 24), against a real mutual-TLS broker:

- a producer of gzip "bombs" (a few hundred KiB on the wire, hundreds of MiB inflated) does not
  stall another client: its batches are decompressed and validated off the event loop, so an
  ApiVersions of another connection is answered in well under 500 ms meanwhile (on main: the
  broker validated on its loop and the other client waited for seconds);
- a consumer that asks for large fetches and never reads does not pin memory on a TLS listener:
  the fetched region goes out in bounded chunks with back-pressure instead of being read whole
  (on main: every pipelined fetch was read into memory at once).

Each test prints its figure (``-s`` shows it).
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
import threading
import time
import zlib

import pytest
from kio.schema.fetch.v11.request import FetchRequest
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer

from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.client import NewTopic
from kraftlog.common.records import crc32c, write_varint
from kraftlog.common.security._tls import client_context
from kraftlog.deploy._cluster import LocalCluster, wait_until
from tests.integration._security_helpers import mtls_cluster, recv, tls_of

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
_HEADER = struct.Struct(">qiibIhiqqqhii")
_GZIP = 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    yield from mtls_cluster(tmp_path_factory, "work-limits")


@pytest.fixture(scope="module")
def context(cluster: LocalCluster) -> ssl.SSLContext:
    return client_context(tls_of(cluster, "admin"))


def _create(cluster: LocalCluster, topic: str) -> None:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]).topics[0].error.code == 0


def _broker_pid(cluster: LocalCluster) -> int:
    (spec,) = [s for s in cluster.nodes.values() if "broker" in s.roles]
    assert spec.pid
    return spec.pid


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _connect(cluster: LocalCluster, context: ssl.SSLContext, *, receive_buffer: int = 0) -> ssl.SSLSocket:
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:  # before connect, so the window the peer sees is small from the start
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.settimeout(30)
    raw.connect((host, int(port)))
    return context.wrap_socket(raw, server_hostname=host)


def _frame(header_type: type, body_type: type, api_key: int, version: int, cid: int, body: dict) -> bytes:
    buf = io.BytesIO()
    header = {"request_api_key": api_key, "request_api_version": version, "correlation_id": cid, "client_id": "t"}
    entity_writer(header_type)(buf, build(header_type, header))
    entity_writer(body_type)(buf, build(body_type, body))
    return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()


def _produce_frame(topic: str, records: bytes, cid: int) -> bytes:
    body = {
        "acks": 1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return _frame(HeaderV2, ProduceRequest, 0, 9, cid, body)


def _answer(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv(sock, 4))
    return recv(sock, size)


def _produce_error(answer: bytes) -> int:
    """The error code of the only partition of a Produce v9 answer (correlation id, tagged
    fields, one topic, its name, one partition, its index, then the error code)."""
    pos = 4 + 1 + 1  # correlation id, header tagged fields, compact array length of topics
    name_len = answer[pos] - 1
    pos += 1 + name_len + 1 + 4  # the name, compact array length of partitions, index
    return int(struct.unpack_from(">h", answer, pos)[0])


def _record(offset_delta: int, value_bytes: int) -> bytes:
    body = bytearray(b"\x00\x00")  # attributes, timestamp delta 0
    write_varint(body, offset_delta)
    body += b"\x01"  # no key
    write_varint(body, value_bytes)
    body += bytes(value_bytes) + b"\x00"  # zeros, no headers
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def _batch(records: list[bytes], *, gzip: bool) -> bytes:
    section = b"".join(records)
    if gzip:
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
        section = compressor.compress(section) + compressor.flush()
    count = len(records)
    now = int(time.time() * 1000)
    attributes = _GZIP if gzip else 0
    header = bytearray(_HEADER.pack(0, 49 + len(section), -1, 2, 0, attributes, count - 1, now, now, -1, -1, -1, count))
    struct.pack_into(">I", header, 17, crc32c(bytes(header[21:]) + section))
    return bytes(header) + section


class _Prober(threading.Thread):
    """Another client: an ApiVersions every 50 ms on its own TLS connection, timing each answer."""

    def __init__(self, cluster: LocalCluster, context: ssl.SSLContext) -> None:
        super().__init__(daemon=True)
        self.sock = _connect(cluster, context)
        self.latencies_s: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        cid = 0
        while not self.done.is_set():
            cid += 1
            start = time.monotonic()
            self.sock.sendall(struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, cid, -1))
            _answer(self.sock)
            self.latencies_s.append(time.monotonic() - start)
            self.done.wait(0.05)  # the probe's period, not a synchronisation
        self.sock.close()


def test_a_gzip_bomb_producer_does_not_stall_another_clients_api_versions(
    cluster: LocalCluster, context: ssl.SSLContext
) -> None:
    """Two pipelined Produce requests of 4 gzip batches each, 60 records of 1 MiB of zeros per
    batch (about 240 KiB on the wire per request, 480 MiB inflated in all); the broker accepts
    them (they are valid) while another connection's ApiVersions keeps being answered."""
    topic = "bomb"
    _create(cluster, topic)
    bomb = _batch([_record(i, MIB) for i in range(60)], gzip=True)
    payload = bomb * 4
    prober = _Prober(cluster, context)
    prober.start()
    wait_until(lambda: len(prober.latencies_s) >= 3, timeout_s=10)
    with _connect(cluster, context) as producer:
        start = time.monotonic()
        producer.sendall(_produce_frame(topic, payload, 1) + _produce_frame(topic, payload, 2))
        errors = [_produce_error(_answer(producer)), _produce_error(_answer(producer))]
        produce_s = time.monotonic() - start
    seen = len(prober.latencies_s)
    wait_until(lambda: len(prober.latencies_s) >= seen + 2, timeout_s=10)
    prober.done.set()
    prober.join(timeout=10)
    worst_ms = max(prober.latencies_s) * 1000
    print(
        f"\ngzip bomb: {len(payload) // 1024} KiB per request on the wire, produce answered in {produce_s:.2f} s; "
        f"another client's ApiVersions: worst {worst_ms:.0f} ms of {len(prober.latencies_s)}"
    )
    assert errors == [0, 0]
    assert worst_ms < 500, f"another client's ApiVersions waited {worst_ms:.0f} ms behind the gzip bomb"


def test_a_tls_consumer_that_never_reads_does_not_pin_memory(cluster: LocalCluster, context: ssl.SSLContext) -> None:
    """8 TLS connections with a 4 KiB receive window, each with 2 pipelined Fetch requests of up
    to 64 MiB over a 16 MiB partition, none read: the broker's RSS grows by a few MiB at most
    (each connection holds its socket buffers plus one chunk), not by the 256 MiB asked."""
    topic = "slowreader"
    _create(cluster, topic)
    batch = _batch([_record(i, 250 * 1024) for i in range(4)], gzip=False)  # ~1000 KiB per batch
    with _connect(cluster, context) as producer:
        producer.sendall(b"".join(_produce_frame(topic, batch, cid) for cid in range(16)))
        assert [_produce_error(_answer(producer)) for _ in range(16)] == [0] * 16
    pid = _broker_pid(cluster)
    before = _rss_bytes(pid)

    def fetch(cid: int) -> bytes:
        partition = {"partition": 0, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 64 * MIB}
        body = {
            "replica_id": -1,
            "max_wait": 100,
            "min_bytes": 1,
            "max_bytes": 64 * MIB,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [partition]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        return _frame(HeaderV1, FetchRequest, 1, 11, cid, body)

    sockets = [_connect(cluster, context, receive_buffer=4096) for _ in range(8)]
    try:
        for sock in sockets:
            sock.sendall(fetch(1) + fetch(2))
        # every connection gets the start of its answer (the broker is sending), then the window
        # closes; the broker's memory is watched for a while after that
        for sock in sockets:
            assert len(sock.recv(1)) == 1
        peak = before
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            peak = max(peak, _rss_bytes(pid))
            time.sleep(0.05)  # sampling RSS, not synchronising
        growth = peak - before
    finally:
        for sock in sockets:
            sock.close()
    print(
        f"\nslow TLS readers: broker RSS {before // MIB} MiB before, +{growth // MIB} MiB at the peak "
        f"with 8 x 2 fetches of 16 MiB unread"
    )
    assert growth < 64 * MIB, f"the broker's RSS grew by {growth // MIB} MiB for fetches nobody reads"
    after_close: list[int] = []

    def settled() -> bool:
        after_close.append(_rss_bytes(pid) - before)
        return after_close[-1] < 32 * MIB

    wait_until(settled, timeout_s=10, what="the broker's memory to come back after the connections closed")
    print(f"slow TLS readers: +{max(0, after_close[-1]) // MIB} MiB after close")
