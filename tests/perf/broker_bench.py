"""Broker benchmark: produce and consume throughput, end-to-end latency and failover, each next to
a plain gRPC echo of the same payloads measured in the same run on the same machine.

- RF=1: one broker (a combined single node), produce 1 MiB requests of 1 KiB records (acks=1),
  then fetch them back with 1 MiB fetches; then produce 1 MiB requests of 100-byte records, where
  the broker's per-record validation (issue 12) costs the most. Each produce figure sits next to an
  echo of the same payload (for 1 KiB records the median of echo runs before, between and after
  the produce and the consume), and the records/s are printed too.
- Idempotence (issue 15): acks=all produce of 1 KiB records with a producer id and sequence
  numbers against the same without, in the same run (each request's batch stamped either way,
  the two alternating in rounds, the median of each side);
  transactions/s of 10-partition transactions (one 100-byte record per partition, the client's
  transactional producer) against the same sends and a flush without a transaction.
- TLS (issue 17), measured first: the RF=1 produce (acks=1, 1 KiB records) and consume of the
  same sizes with the same gRPC client against a fresh plaintext node and a fresh TLS node
  (every listener TLS, a throw-away CA), runs alternating between the two; the median run of
  each, and the server's and the client's CPU seconds per GB, which show who pays for TLS.
- RF=3: three brokers (and three separate controllers), acks=all, min.insync.replicas=2.
- End-to-end latency at a fixed moderate rate: produce one small record (acks=all), a consumer long
  polls the partition; latency = consumed time - send time.
- Failover: kill -9 of the partition leader until an acks=all produce succeeds again (heartbeat
  500 ms, session 2 s).

    python tests/perf/broker_bench.py [--quick] [--rf1-only]

Targets (issue 4, issue 12, issue 15): RF=1 produce >= 0.6 of echo (1 KiB and 100-byte records)
and consume >= 0.8; idempotent produce >= 0.9 of plain; TLS produce and consume >= 0.7 of plaintext
(issue 17); RF=3 acks=all >= 0.25; failover < 3 s.
``--rf1-only`` skips the three-broker part. The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import structlog

from kraftlog import storage
from kraftlog.client import NewTopic
from kraftlog.common.records import set_producer_fields
from kraftlog.common.security._tls import TlsSettings
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, diagnostics_pb2, diagnostics_pb2_grpc, open_channel

MIB = 1024 * 1024
TLS_TOPIC = "tlscmp"
OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 4000,
    "controller.quorum.election.timeout.ms": 1000,
}


def one_mib_batch(value_bytes: int = 1000) -> tuple[bytes, int]:
    """About 1 MiB of records with an 8-byte key and a ``value_bytes`` value; ``(batch, count)``."""
    builder = storage.RecordBatchBuilder()
    value = b"v" * value_bytes
    now = int(time.time() * 1000)
    count = MIB // (value_bytes + 24) if value_bytes < 1000 else 1000
    for i in range(count):
        builder.append(now, f"{i:08d}".encode(), value)
    return builder.build(), count


def echo_mb_s(address: str, payload: bytes, seconds: float, threads: int) -> float:
    done = [0] * threads
    stop = time.monotonic() + seconds

    def work(i: int) -> None:
        with grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 * MIB), ("grpc.max_send_message_length", 64 * MIB)]
        ) as ch:
            stub = diagnostics_pb2_grpc.DiagnosticsServiceStub(ch)
            while time.monotonic() < stop:
                stub.Echo(diagnostics_pb2.EchoRequest(payload=payload), timeout=30)
                done[i] += len(payload)

    return _timed(threads, work)(done)


def _timed(threads: int, work: Callable[[int], None]) -> Callable[[list[int]], float]:
    def run(done: list[int]) -> float:
        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        start = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(done) / 1e6 / (time.monotonic() - start)

    return run


def produce_mb_s(
    address: str,
    topic: str,
    partitions: int,
    batch: bytes,
    acks: int,
    seconds: float,
    threads: int,
    *,
    requests_per_thread: int | None = None,
    tls: TlsSettings | None = None,
) -> float:
    """MB/s of ``batch`` produced by ``threads`` threads (thread i to partition i % partitions) for
    ``seconds``, or, with ``requests_per_thread``, exactly that many requests each (a fixed size,
    every one of which must succeed; ``seconds`` then only bounds the run). Over TLS with ``tls``."""
    done = [0] * threads
    stop = time.monotonic() + seconds

    def work(i: int) -> None:
        with open_channel(address, options=[("grpc.max_send_message_length", 64 * MIB)], tls=tls) as ch:
            stub = broker_pb2_grpc.BrokerServiceStub(ch)
            p = i % partitions
            sent = 0
            while time.monotonic() < stop and (requests_per_thread is None or sent < requests_per_thread):
                r = stub.Produce(
                    broker_pb2.ProduceRequest(
                        acks=acks,
                        timeout_ms=30_000,
                        topics=[
                            broker_pb2.ProduceRequest.TopicData(
                                name=topic, partitions=[broker_pb2.ProduceRequest.PartitionData(index=p, records=batch)]
                            )
                        ],
                    ),
                    timeout=60,
                )
                sent += 1
                error = r.topics[0].partitions[0].error
                if error.code == 0:
                    done[i] += len(batch)
                elif requests_per_thread is not None:
                    raise RuntimeError(f"produce to {topic}-{p} failed: {error}")

    return _timed(threads, work)(done)


def stamped_produce_mb_s(
    address: str, topic: str, batch: bytes, count: int, seconds: float, threads: int, *, idempotent: bool
) -> float:
    """acks=all produce of ``batch``, each thread to its own partition; every request's batch is
    stamped (and re-CRCed) first: with a producer id and the next sequence when ``idempotent``,
    with none otherwise, so both runs do the same client-side work and differ only in what the
    broker checks. The channels and producer ids are set up before the clock starts: a fresh
    node's first InitProducerId waits for a producer-id block from the controller, a one-time cost
    that would otherwise weigh on a short run."""
    done = [0] * threads
    channels = [
        grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 * MIB)]) for _ in range(threads)
    ]
    stubs = [broker_pb2_grpc.BrokerServiceStub(ch) for ch in channels]
    pids = [-1] * threads
    if idempotent:
        for i, stub in enumerate(stubs):
            r = stub.InitProducerId(broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=30)
            assert r.error.code == 0, r.error
            pids[i] = r.producer_id
    stop = 0.0

    def work(i: int) -> None:
        stub, pid = stubs[i], pids[i]
        buf = bytearray(batch)
        seq = 0
        while time.monotonic() < stop:
            set_producer_fields(buf, 0, len(buf), pid, 0 if idempotent else -1, seq if idempotent else -1)
            r = stub.Produce(
                broker_pb2.ProduceRequest(
                    acks=-1,
                    timeout_ms=30_000,
                    topics=[
                        broker_pb2.ProduceRequest.TopicData(
                            name=topic,
                            partitions=[broker_pb2.ProduceRequest.PartitionData(index=i, records=bytes(buf))],
                        )
                    ],
                ),
                timeout=60,
            )
            error = r.topics[0].partitions[0].error
            assert error.code == 0, error
            done[i] += len(batch)
            seq += count

    try:
        stop = time.monotonic() + seconds
        return _timed(threads, work)(done)
    finally:
        for ch in channels:
            ch.close()


def idempotence_comparison(
    address: str, server_pid: int, batch: bytes, count: int, seconds: float, threads: int, rounds: int
) -> dict[str, float]:
    """acks=all produce MB/s without and with idempotence (`stamped_produce_mb_s`), ``rounds``
    runs of each, to topics ``plain`` and ``idem``; the median run of each side is reported, and
    the median of the server's CPU s/GB of each side, which a busy machine disturbs less than
    the rate (the broker's own cost of the sequence checks).

    Ordering: the two sides alternate, plain first in even rounds and idempotent first in odd
    ones, so that a noisy machine's drift (and the writeback of what earlier runs wrote) hits
    both; one run of each before, measured once, would put all of it on the second."""
    rates: dict[str, list[float]] = {"plain": [], "idem": []}
    cpu: dict[str, list[float]] = {"plain": [], "idem": []}
    for run in range(rounds):
        for name in ("plain", "idem") if run % 2 == 0 else ("idem", "plain"):
            before, start = cpu_s(server_pid), time.monotonic()
            rate = stamped_produce_mb_s(address, name, batch, count, seconds, threads, idempotent=name == "idem")
            gigabytes = rate * (time.monotonic() - start) / 1e3
            rates[name].append(rate)
            cpu[name].append((cpu_s(server_pid) - before) / gigabytes)
    plain, idem = statistics.median(rates["plain"]), statistics.median(rates["idem"])
    plain_cpu, idem_cpu = statistics.median(cpu["plain"]), statistics.median(cpu["idem"])
    return {
        "produce_plain_acks_all_mb_s": round(plain, 1),
        "produce_idempotent_mb_s": round(idem, 1),
        "idempotent_produce_ratio": round(idem / plain, 3),
        "plain_acks_all_server_cpu_s_per_gb": round(plain_cpu, 2),
        "idempotent_server_cpu_s_per_gb": round(idem_cpu, 2),
        "idempotent_server_cpu_ratio": round(idem_cpu / plain_cpu, 3),
    }


def txns_per_s(bootstrap: str, topic: str, partitions: int, seconds: float, *, transactional: bool) -> float:
    """Rounds per second of one record to each of ``partitions`` partitions: in a transaction each
    (begin, send, commit), or, as the baseline, the same sends and a flush with the idempotent
    producer alone."""
    from kraftlog.client import Producer

    settings: dict[str, object] = {"linger_ms": 0}
    if transactional:
        settings["transactional_id"] = f"bench-{time.monotonic_ns()}"
    with Producer(bootstrap, **settings) as p:
        if transactional:
            p.init_transactions()
        rounds = 0
        stop = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < stop:
            if transactional:
                p.begin_transaction()
            for i in range(partitions):
                p.send(topic, b"x" * 100, partition=i)
            if transactional:
                p.commit_transaction(30)
            else:
                p.flush(30)
            rounds += 1
        return rounds / (time.monotonic() - start)


def consume_mb_s(
    address: str,
    topic: str,
    partitions: int,
    threads: int,
    *,
    limit_bytes_per_partition: int | None = None,
    tls: TlsSettings | None = None,
) -> float:
    """MB/s of reading every partition from offset 0 in 1 MiB fetches, to its end or, with
    ``limit_bytes_per_partition``, until that many record bytes of it were read."""
    done = [0] * threads

    def work(i: int) -> None:
        with open_channel(address, options=[("grpc.max_receive_message_length", 64 * MIB)], tls=tls) as ch:
            stub = broker_pb2_grpc.BrokerServiceStub(ch)
            for p in range(i, partitions, threads):
                offset = 0
                read = 0
                while limit_bytes_per_partition is None or read < limit_bytes_per_partition:
                    f = stub.Fetch(
                        broker_pb2.FetchRequest(
                            replica_id=-1,
                            max_wait_ms=0,
                            min_bytes=0,
                            max_bytes=MIB,
                            topics=[
                                broker_pb2.FetchRequest.FetchTopic(
                                    topic=topic,
                                    partitions=[
                                        broker_pb2.FetchRequest.FetchPartition(
                                            partition=p,
                                            current_leader_epoch=-1,
                                            fetch_offset=offset,
                                            last_fetched_epoch=-1,
                                            log_start_offset=-1,
                                            partition_max_bytes=MIB,
                                        )
                                    ],
                                )
                            ],
                        ),
                        timeout=30,
                    )
                    part = f.responses[0].partitions[0]
                    if part.error.code or not part.records:
                        break
                    done[i] += len(part.records)
                    read += len(part.records)
                    last = None
                    for _pos, b in storage.iter_batches(part.records):
                        last = b
                    offset = last.next_offset if last is not None else offset

    return _timed(threads, work)(done)


def cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds so far of process ``pid``, or of this (the client) process."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tls_comparison(
    plain: LocalCluster, secured: LocalCluster, batch: bytes, runs: int, requests_per_thread: int, threads: int
) -> dict[str, float]:
    """Produce (acks=1, 1 MiB requests) and consume (1 MiB fetches) MB/s of one workload on a
    plaintext and a TLS single-node cluster, with the same gRPC client and sizes, ``runs`` runs
    each; the median run of each side is reported, and the server's and this client's CPU s/GB,
    which say which side pays for TLS.

    Ordering: every produce run comes before every consume run; within a phase the two sides
    alternate, plaintext first in even runs and TLS first in odd ones, so a drift of a noisy
    machine hits both. A produce run appends ``requests_per_thread`` requests per thread, each
    thread to its own partition; a consume run reads the first run's worth of every partition
    back (from the page cache on both sides)."""
    tls = TlsSettings(truststore_location=str(secured.tls_dir / "ca.crt"))
    sides = {"plaintext": (plain, None), "tls": (secured, tls)}
    addresses = {}
    for name, (cluster, _) in sides.items():
        with cluster.admin() as admin:
            admin.create_topics([NewTopic(TLS_TOPIC, threads, 1)])
        addresses[name] = leader_address(cluster, TLS_TOPIC)[1]
    per_partition = requests_per_thread * len(batch)
    gigabytes = per_partition * threads / 1e9
    runners: dict[str, Callable[[str, TlsSettings | None], float]] = {
        "produce": lambda address, tls: produce_mb_s(
            address, TLS_TOPIC, threads, batch, 1, 600.0, threads, requests_per_thread=requests_per_thread, tls=tls
        ),
        "consume": lambda address, tls: consume_mb_s(
            address, TLS_TOPIC, threads, threads, limit_bytes_per_partition=per_partition, tls=tls
        ),
    }
    samples: dict[str, list[float]] = {}
    for phase, runner in runners.items():
        for run in range(runs):
            for name in ("plaintext", "tls") if run % 2 == 0 else ("tls", "plaintext"):
                cluster, settings = sides[name]
                pid = cluster.nodes[1].pid
                server_before, client_before = cpu_s(pid), cpu_s()
                rate = runner(addresses[name], settings)
                server, client = cpu_s(pid) - server_before, cpu_s() - client_before
                samples.setdefault(f"{name}_{phase}_mb_s", []).append(rate)
                samples.setdefault(f"{name}_{phase}_server_cpu_s_per_gb", []).append(server / gigabytes)
                samples.setdefault(f"{name}_{phase}_client_cpu_s_per_gb", []).append(client / gigabytes)
    medians = {key: statistics.median(values) for key, values in samples.items()}
    out = {key: round(value, 1 if key.endswith("mb_s") else 3) for key, value in medians.items()}
    for phase in ("produce", "consume"):
        out[f"tls_{phase}_ratio"] = round(medians[f"tls_{phase}_mb_s"] / medians[f"plaintext_{phase}_mb_s"], 3)
    out["tls_runs"] = runs
    out["tls_run_mb"] = round(gigabytes * 1000, 1)
    return out


def leader_address(cluster: LocalCluster, topic: str, partition: int = 0) -> tuple[int, str]:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        part = wait_until(
            lambda: (lambda p: p if p.leader_id >= 0 else None)(
                admin.describe_topics([topic]).topics[0].partitions[partition]
            ),
            30,
            what="a leader",
        )
    nid = part.leader_id
    return nid, f"127.0.0.1:{cluster.nodes[nid].broker_port}"


def start_cluster(base: Path, brokers: int, *, security: str = "plaintext", wait: bool = True) -> LocalCluster:
    """One combined node for RF=1; for RF=3 the production layout: three controllers and three
    brokers in separate processes, so a killed partition leader is never also the controller.
    Without ``wait`` the processes are only launched (`wait_serving` waits), so two clusters can
    start side by side."""
    if brokers == 1:
        c = LocalCluster(base, controllers=1, combined=True, overrides=OVERRIDES, security=security)
    else:
        c = LocalCluster(base, controllers=3, brokers=brokers, overrides=OVERRIDES, security=security)
    c.start(wait=False)
    if wait:
        wait_serving(c)
    return c


def wait_serving(c: LocalCluster) -> None:
    """Wait for an active controller and every broker unfenced."""
    brokers = sum(1 for spec in c.nodes.values() if spec.broker_port)
    c.wait_ready(90)
    with c.admin(request_timeout_ms=20_000) as admin:
        wait_until(
            lambda: sum(not b.fenced for b in admin.describe_cluster().brokers) == brokers, 60, what="brokers unfenced"
        )


def e2e_latency_ms(cluster: LocalCluster, topic: str, count: int, rate_per_s: float) -> list[float]:
    _nid, address = leader_address(cluster, topic)
    sent: dict[bytes, float] = {}
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        with grpc.insecure_channel(address) as ch:
            stub = broker_pb2_grpc.BrokerServiceStub(ch)
            offset = 0
            while not done.is_set() and len(latencies) < count:
                f = stub.Fetch(
                    broker_pb2.FetchRequest(
                        replica_id=-1,
                        max_wait_ms=500,
                        min_bytes=1,
                        max_bytes=MIB,
                        topics=[
                            broker_pb2.FetchRequest.FetchTopic(
                                topic=topic,
                                partitions=[
                                    broker_pb2.FetchRequest.FetchPartition(
                                        partition=0,
                                        current_leader_epoch=-1,
                                        fetch_offset=offset,
                                        last_fetched_epoch=-1,
                                        log_start_offset=-1,
                                        partition_max_bytes=MIB,
                                    )
                                ],
                            )
                        ],
                    ),
                    timeout=10,
                )
                now = time.monotonic()
                for _pos, b in storage.iter_batches(f.responses[0].partitions[0].records):
                    for r in b.records():
                        if r.offset >= offset and r.value in sent:
                            latencies.append((now - sent[r.value]) * 1000)
                        offset = max(offset, r.offset + 1)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    with grpc.insecure_channel(address) as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        for i in range(count):
            value = f"lat-{i}".encode()
            batch = storage.build_batch([(None, value)], timestamp_ms=int(time.time() * 1000))
            sent[value] = time.monotonic()
            stub.Produce(
                broker_pb2.ProduceRequest(
                    acks=-1,
                    timeout_ms=5000,
                    topics=[
                        broker_pb2.ProduceRequest.TopicData(
                            name=topic, partitions=[broker_pb2.ProduceRequest.PartitionData(index=0, records=batch)]
                        )
                    ],
                ),
                timeout=10,
            )
            time.sleep(1.0 / rate_per_s)
    t.join(20)
    done.set()
    return latencies


def failover_s(cluster: LocalCluster, topic: str) -> float:
    victim, _ = leader_address(cluster, topic)
    batch = storage.build_batch([(None, b"after-failover")], timestamp_ms=int(time.time() * 1000))
    cluster.kill(victim)
    killed = time.monotonic()
    channels: dict[str, grpc.Channel] = {}
    try:
        while time.monotonic() - killed < 30:
            for nid, spec in cluster.nodes.items():
                if nid == victim or not spec.broker_port:
                    continue
                addr = f"127.0.0.1:{spec.broker_port}"
                ch = channels.setdefault(addr, grpc.insecure_channel(addr))
                try:
                    r = broker_pb2_grpc.BrokerServiceStub(ch).Produce(
                        broker_pb2.ProduceRequest(
                            acks=-1,
                            timeout_ms=2000,
                            topics=[
                                broker_pb2.ProduceRequest.TopicData(
                                    name=topic,
                                    partitions=[broker_pb2.ProduceRequest.PartitionData(index=0, records=batch)],
                                )
                            ],
                        ),
                        timeout=3,
                    )
                except grpc.RpcError:
                    continue
                if r.topics[0].partitions[0].error.code == 0:
                    return time.monotonic() - killed
            time.sleep(0.02)
    finally:
        for ch in channels.values():
            ch.close()
        cluster.start_node(victim)
    raise RuntimeError("no successful produce within 30 s of the kill")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short variant for CI")
    parser.add_argument("--rf1-only", action="store_true", help="only the single-broker measurements")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    # --quick keeps the script working in `make test` (tests/integration/test_benchmarks_quick.py),
    # inside the suite's 30-minute budget: every phase runs, shorter (issue 23)
    seconds = 1.0 if args.quick else 10.0
    threads = 2
    latency_count = 50 if args.quick else 500
    tls_runs = 1 if args.quick else 5
    tls_requests = 32 if args.quick else 128  # per thread and run: 64 or 256 requests of ~1 MB
    idem_rounds = 3 if args.quick else 5
    batch, count = one_mib_batch()
    small, small_count = one_mib_batch(100)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kraftlog-broker-bench-") as tmp:
        base = Path(tmp)
        # the TLS comparison has a fresh plaintext node and a fresh TLS node of its own (the same
        # history on both sides, none on the node of the other figures), started beside it
        single = start_cluster(base / "rf1", 1, wait=False)
        pair = (
            start_cluster(base / "plain", 1, wait=False),
            start_cluster(base / "tls", 1, security="tls", wait=False),
        )
        try:
            for cluster in (single, *pair):
                wait_serving(cluster)
            out.update(tls_comparison(*pair, batch, tls_runs, tls_requests, threads))
            for cluster in pair:  # idle, they would still take CPU, and their files page cache
                cluster.stop()
                shutil.rmtree(cluster.base_dir)
            with single.admin() as admin:
                admin.create_topics([NewTopic("rf1", 2, 1)])
            _nid, addr = leader_address(single, "rf1")
            # the echo baseline is the median of three runs, before, between and after the produce
            # and consume runs it is compared with: one run beside them would carry the noise of
            # its own second alone
            echoes = [echo_mb_s(addr, batch, seconds, threads)]
            out["produce_rf1_mb_s"] = round(produce_mb_s(addr, "rf1", 2, batch, 1, seconds, threads), 1)
            echoes.append(echo_mb_s(addr, batch, seconds, threads))
            out["consume_rf1_mb_s"] = round(consume_mb_s(addr, "rf1", 2, threads), 1)
            echoes.append(echo_mb_s(addr, batch, seconds, threads))
            out["echo_mb_s"] = round(statistics.median(echoes), 1)
            with single.admin() as admin:
                admin.create_topics([NewTopic("rf1small", 2, 1)])
            _nid, addr = leader_address(single, "rf1small")
            out["echo_small_mb_s"] = round(echo_mb_s(addr, small, seconds, threads), 1)
            out["produce_rf1_small_mb_s"] = round(produce_mb_s(addr, "rf1small", 2, small, 1, seconds, threads), 1)
            with single.admin() as admin:
                admin.create_topics([NewTopic("plain", 2, 1), NewTopic("idem", 2, 1)])
            _nid, addr = leader_address(single, "idem")
            out.update(
                idempotence_comparison(addr, single.nodes[_nid].pid, batch, count, seconds, threads, idem_rounds)
            )
            with single.admin() as admin:
                admin.create_topics([NewTopic("txn", 10, 1)])
            boot = single.bootstrap_servers
            out["flush_rounds_per_s"] = round(txns_per_s(boot, "txn", 10, seconds, transactional=False), 1)
            out["txns_per_s"] = round(txns_per_s(boot, "txn", 10, seconds, transactional=True), 1)
        finally:
            for cluster in (*pair, single):
                cluster.stop()
        out["produce_rf1_records_s"] = round(out["produce_rf1_mb_s"] * 1e6 / len(batch) * count)
        out["produce_rf1_small_records_s"] = round(out["produce_rf1_small_mb_s"] * 1e6 / len(small) * small_count)
        out["produce_rf1_ratio"] = round(out["produce_rf1_mb_s"] / out["echo_mb_s"], 3)
        out["consume_rf1_ratio"] = round(out["consume_rf1_mb_s"] / out["echo_mb_s"], 3)
        out["produce_rf1_small_ratio"] = round(out["produce_rf1_small_mb_s"] / out["echo_small_mb_s"], 3)
        if args.rf1_only:
            _print_rf1(out, args.quick, threads)
            print(json.dumps(out))
            return 0
        triple = start_cluster(base / "rf3", 3)
        try:
            with triple.admin() as admin:
                admin.create_topics(
                    [
                        NewTopic("rf3", 1, 3, configs={"min.insync.replicas": "2"}),
                        NewTopic("lat", 1, 3, configs={"min.insync.replicas": "2"}),
                    ]
                )
            _nid, addr3 = leader_address(triple, "rf3")
            echo3 = echo_mb_s(addr3, batch, seconds, threads)
            out["echo3_mb_s"] = round(echo3, 1)
            out["produce_rf3_mb_s"] = round(produce_mb_s(addr3, "rf3", 1, batch, -1, seconds, threads), 1)
            lat = sorted(e2e_latency_ms(triple, "lat", latency_count, 50.0))
            out["e2e_p50_ms"] = round(statistics.median(lat), 2)
            out["e2e_p99_ms"] = round(lat[max(0, int(len(lat) * 0.99) - 1)], 2)
            out["failover_s"] = round(failover_s(triple, "lat"), 3)
        finally:
            triple.stop()
    out["produce_rf3_ratio"] = round(out["produce_rf3_mb_s"] / out["echo3_mb_s"], 3)
    _print_rf1(out, args.quick, threads)
    print(f"{'produce RF=3 acks=all':<36}{out['produce_rf3_mb_s']:>12.1f}{out['produce_rf3_ratio']:>8.2f}{0.25:>8.2f}")
    print(f"{'end-to-end latency p50 / p99 (ms)':<36}{out['e2e_p50_ms']:>12.2f} / {out['e2e_p99_ms']:.2f}")
    print(f"{'failover kill -9 -> produce ok (s)':<36}{out['failover_s']:>12.3f}{'':>8}{'< 3':>8}")
    print(json.dumps(out))
    return 0


def _print_rf1(out: dict[str, float], quick: bool, threads: int) -> None:
    print(
        f"broker benchmark ({'quick' if quick else 'full'}): 1 KiB and 100-byte records in 1 MiB "
        f"requests, {threads} client threads"
    )
    print(f"{'measurement':<36}{'MB/s or ms':>12}{'ratio':>8}{'target':>8}")
    print(f"{'gRPC echo 1 MiB (1 node)':<36}{out['echo_mb_s']:>12.1f}")
    print(
        f"{'produce RF=1 acks=1, 1 KiB records':<36}{out['produce_rf1_mb_s']:>12.1f}"
        f"{out['produce_rf1_ratio']:>8.2f}{0.6:>8.2f}   {out['produce_rf1_records_s']:,.0f} records/s"
    )
    print(f"{'consume RF=1':<36}{out['consume_rf1_mb_s']:>12.1f}{out['consume_rf1_ratio']:>8.2f}{0.8:>8.2f}")
    print(f"{'gRPC echo 1 MiB, 100-byte records':<36}{out['echo_small_mb_s']:>12.1f}")
    print(
        f"{'produce RF=1 acks=1, 100-byte recs':<36}{out['produce_rf1_small_mb_s']:>12.1f}"
        f"{out['produce_rf1_small_ratio']:>8.2f}{0.6:>8.2f}   "
        f"{out['produce_rf1_small_records_s']:,.0f} records/s"
    )
    print(
        f"{'produce RF=1 acks=all, plain (base)':<36}{out['produce_plain_acks_all_mb_s']:>12.1f}{'':16}"
        f"   server CPU s/GB {out['plain_acks_all_server_cpu_s_per_gb']:.2f}"
    )
    print(
        f"{'produce RF=1 acks=all, idempotent':<36}{out['produce_idempotent_mb_s']:>12.1f}"
        f"{out['idempotent_produce_ratio']:>8.2f}{0.9:>8.2f}   server CPU s/GB "
        f"{out['idempotent_server_cpu_s_per_gb']:.2f} ({out['idempotent_server_cpu_ratio']:.2f} of plain)"
    )
    print(f"{'10 records + flush per round (base)':<36}{out['flush_rounds_per_s']:>12.1f}   rounds/s")
    print(
        f"{'10-partition transactions':<36}{out['txns_per_s']:>12.1f}"
        f"{out['txns_per_s'] / out['flush_rounds_per_s']:>8.2f}   txns/s (ratio to base)"
    )
    print(
        f"TLS against plaintext: two single-node clusters, the same gRPC client, median of "
        f"{out['tls_runs']:.0f} alternating runs of {out['tls_run_mb']:.0f} MB each"
    )
    for key, label in (("produce", "produce RF=1 acks=1"), ("consume", "consume RF=1")):
        for side in ("plaintext", "tls"):
            ratio = f"{out[f'tls_{key}_ratio']:>8.2f}{0.7:>8.2f}" if side == "tls" else " " * 16
            cpu = f"{out[f'{side}_{key}_server_cpu_s_per_gb']:.2f} / {out[f'{side}_{key}_client_cpu_s_per_gb']:.2f}"
            name = f"{label}, {'TLS' if side == 'tls' else 'plaintext (base)'}"
            print(f"{name:<36}{out[f'{side}_{key}_mb_s']:>12.1f}{ratio}   CPU s/GB server / client {cpu}")


if __name__ == "__main__":
    sys.exit(main())
