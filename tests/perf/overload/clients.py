"""The clients of tests/perf/overload_bench.py (issue 24): the Kafka wire bytes they send, the
well-behaved producer and consumer, the ApiVersions probe and the RSS sampler that measure, and the
attackers (idle connections, a gzip-bomb producer, slow TLS readers) in a process of their own.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import selectors
import socket
import ssl
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.common.records import build_batch
from kraftlog.common.records.compression import CompressionType
from kraftlog.deploy._cluster import wait_until

MIB = 1024 * 1024
WELL_BEHAVED_TOPIC, BOMB_TOPIC, BULK_TOPIC = "well-behaved", "bomb", "bulk"
PRODUCE_INTERVAL_S = 0.02
PROBE_INTERVAL_S = 0.05
SLOW_WINDOW_BYTES = 4096
SLOW_FETCH_BYTES = 64 * MIB


ATTACKERS = ("idle", "slow", "bomb")


@dataclass(frozen=True)
class Plan:
    """The sizes of one run."""

    baseline_s: float
    attack_s: float
    after_s: float
    idle: int
    slow_readers: int
    bulk_mib: int
    bomb_batches: int
    attackers: tuple[str, ...] = ATTACKERS  # a subset: what each attack costs alone


_T0 = time.monotonic()


def progress(what: str) -> None:
    """A progress line on stderr (where a slow run spends its time)."""
    print(f"[{time.monotonic() - _T0:6.1f} s] {what}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- wire


def request_frame(api_key: int, version: int, correlation_id: int, values: dict[str, Any]) -> bytes:
    """One size-prefixed Kafka request."""
    request_type = load_request_schema(api_key, version)
    header_type = request_type.__header_schema__
    header = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": "overload-bench",
    }
    out = io.BytesIO()
    entity_writer(header_type)(out, build(header_type, header))
    entity_writer(request_type)(out, build(request_type, values))
    return struct.pack(">i", len(out.getvalue())) + out.getvalue()


def produce_frame(topic: str, records: bytes, correlation_id: int) -> bytes:
    body = {
        "acks": 1,
        "timeout": 60_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return request_frame(0, 9, correlation_id, body)


def produce_error(frame: bytes) -> int:
    """The error code of the only partition of a Produce v9 answer."""
    response_type = load_response_schema(0, 9)
    _header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    response: Any = entity_reader(response_type)(frame, offset)[0]
    return int(response.responses[0].partition_responses[0].error_code)


def fetch_frame(topic: str, max_bytes: int, correlation_id: int) -> bytes:
    partition = {"partition": 0, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": max_bytes}
    body = {
        "replica_id": -1,
        "max_wait": 100,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return request_frame(1, 11, correlation_id, body)


def api_versions_frame(correlation_id: int) -> bytes:
    return request_frame(18, 0, correlation_id, {})


def read_exactly(sock: socket.socket, n: int, done: threading.Event | None = None) -> bytes:
    """``n`` bytes of ``sock``; with ``done``, the socket's timeout is a chance to give up once
    ``done`` is set (ConnectionAbortedError)."""
    parts, got = [], 0
    while got < n:
        try:
            part = sock.recv(min(n - got, MIB))
        except TimeoutError:
            if done is None or done.is_set():
                raise ConnectionAbortedError("given up") from None
            continue
        if not part:
            raise ConnectionError("the broker closed the connection")
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def read_answer(sock: socket.socket, done: threading.Event | None = None) -> bytes:
    (size,) = struct.unpack(">i", read_exactly(sock, 4, done))
    return read_exactly(sock, size, done)


def tls_connect(address: tuple[str, int], ca: str, *, receive_buffer: int = 0, timeout_s: float = 120) -> ssl.SSLSocket:
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:  # before connect, so the window the broker sees is small from the start
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.settimeout(timeout_s)
    raw.connect(address)
    return ssl.create_default_context(cafile=ca).wrap_socket(raw, server_hostname=address[0])


# ---------------------------------------------------------------------------- measuring (this process)


def open_files_limit(pid: int) -> int:
    """The soft RLIMIT_NOFILE of process ``pid`` (-1: unlimited)."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft = line.split()[3]
                return -1 if soft == "unlimited" else int(soft)
    raise RuntimeError(f"no open files limit for process {pid}")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


class Sampler(threading.Thread):
    """Calls ``sample`` every ``interval_s`` from its own thread, keeping ``(start, value)``; a
    None value (a failure) is counted, not kept."""

    def __init__(self, name: str, interval_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self.failures = 0
        self.stopped = threading.Event()

    def sample(self) -> float | None:
        raise NotImplementedError

    def run(self) -> None:
        while not self.stopped.is_set():
            start = time.monotonic()
            value = self.sample()
            if value is None:
                self.failures += 1
            else:
                self.samples.append((start, value))
            self.stopped.wait(max(0.0, self.interval_s - (time.monotonic() - start)))

    def stop(self) -> None:
        self.stopped.set()
        self.join(60)


class RssSampler(Sampler):
    def __init__(self, pid: int) -> None:
        super().__init__("rss", 0.05)
        self.pid = pid

    def sample(self) -> float | None:
        return rss_kib(self.pid) / 1024


class ApiVersionsProbe(Sampler):
    """Another client: an ApiVersions every 50 ms on its own TLS connection; latency in ms."""

    def __init__(self, address: tuple[str, int], ca: str) -> None:
        super().__init__("probe", PROBE_INTERVAL_S)
        self.address, self.ca = address, ca
        self.sock: ssl.SSLSocket | None = None
        self.correlation_id = 0

    def sample(self) -> float | None:
        self.correlation_id += 1
        start = time.monotonic()
        try:
            if self.sock is None:
                self.sock = tls_connect(self.address, self.ca)
                start = time.monotonic()
            self.sock.sendall(api_versions_frame(self.correlation_id))
            read_answer(self.sock)
        except OSError:  # (ConnectionError and ssl.SSLError are ones)
            if self.sock is not None:
                self.sock.close()
            self.sock = None
            return None
        return (time.monotonic() - start) * 1000


class WellBehaved:
    """A kafka-python producer sending one record every 20 ms at fixed times (acks=1) and a
    consumer of the same partition; each record carries its scheduled send time."""

    def __init__(self, bootstrap: str, security: dict[str, Any]) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=0, request_timeout_ms=120_000, **security
        )
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=100,
            auto_offset_reset="earliest",
            **security,
        )
        self.consumer.assign([TopicPartition(WELL_BEHAVED_TOPIC, 0)])
        self.acked: list[tuple[float, float]] = []  # (scheduled, ack latency ms)
        self.received: list[tuple[float, float]] = []  # (scheduled, end-to-end latency ms)
        self.sent = self.failed = 0
        self.stopped = threading.Event()
        self._drain_deadline = float("inf")
        self._threads = [
            threading.Thread(target=self._produce, name="producer", daemon=True),
            threading.Thread(target=self._consume, name="consumer", daemon=True),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _acked(self, scheduled: float, _metadata: object) -> None:
        self.acked.append((scheduled, (time.monotonic() - scheduled) * 1000))

    def _failed(self, _scheduled: float, _error: object) -> None:
        self.failed += 1

    def _produce(self) -> None:
        next_at = time.monotonic()
        while not self.stopped.is_set():
            scheduled = next_at
            value = struct.pack(">d", scheduled) + b"x" * 92
            future = self.producer.send(WELL_BEHAVED_TOPIC, value=value, partition=0)
            future.add_callback(self._acked, scheduled).add_errback(self._failed, scheduled)
            self.sent += 1
            next_at += PRODUCE_INTERVAL_S  # open loop: behind schedule, the next one goes at once
            self.stopped.wait(max(0.0, next_at - time.monotonic()))

    def _consume(self) -> None:
        while not self.stopped.is_set() or len(self.received) < len(self.acked):
            for records in self.consumer.poll(timeout_ms=100).values():
                now = time.monotonic()
                for record in records:
                    (scheduled,) = struct.unpack_from(">d", record.value)
                    self.received.append((scheduled, (now - scheduled) * 1000))
            if self.stopped.is_set() and time.monotonic() > self._drain_deadline:
                break

    def stop(self) -> None:
        """Stop sending, wait for what was sent to be answered and consumed (bounded), close."""
        self._drain_deadline = time.monotonic() + 30
        self.stopped.set()
        self._threads[0].join(30)
        self.producer.flush(30)
        self._threads[1].join(40)
        self.producer.close(10)
        self.consumer.close()


# ---------------------------------------------------------------------------- attacking (another process)


class Attackers:
    """The attacking process. Forked before the node starts, while this process has no thread
    (and so without importing anything again); it builds the bombs, then waits for `go`."""

    def __init__(self, plan: Plan) -> None:
        context = multiprocessing.get_context("fork")
        self.orders: Any = context.Queue()
        self.results: Any = context.Queue()
        self.prepared, self.ready, self.stopping = context.Event(), context.Event(), context.Event()
        self.process = context.Process(
            target=attack,
            args=(plan, self.orders, self.prepared, self.ready, self.stopping, self.results),
            name="attackers",
            daemon=True,
        )
        self.process.start()

    def go(self, address: tuple[str, int], ca: str, broker_pid: int) -> None:
        """Start attacking; returns once every attacker is at work."""
        if not self.prepared.wait(300):
            raise RuntimeError("the attackers did not build their bombs in 300 s")
        self.orders.put((address, ca, broker_pid))
        if not self.ready.wait(300):
            raise RuntimeError("the attackers did not get going in 300 s")

    def stop(self) -> dict[str, Any]:
        """Stop attacking, close every connection; the attackers' figures."""
        self.stopping.set()
        figures: dict[str, Any] = self.results.get(timeout=180)
        self.process.join(60)
        return figures

    def close(self) -> None:
        if self.process.is_alive():
            self.orders.put(None)
            self.stopping.set()
            self.process.join(30)
        if self.process.is_alive():
            self.process.kill()


def attack(plan: Plan, orders: Any, prepared: Any, ready: Any, stopping: Any, results: Any) -> None:
    """The attacking process: the three attackers, each on its own thread, from its orders until
    ``stopping`` is set; puts their figures on ``results``."""
    batch = build_batch(
        [(None, bytes(MIB))] * 60, timestamp_ms=int(time.time() * 1000), compression=CompressionType.GZIP
    )
    payload = batch * plan.bomb_batches
    prepared.set()
    order = orders.get()
    if order is None:
        return
    address, ca, broker_pid = order
    figures: dict[str, float] = {}
    done = threading.Event()
    started = [threading.Event() for _ in range(3)]
    threads = [
        threading.Thread(target=_idle_horde, args=(address, broker_pid, plan.idle, started[0], done, figures)),
        threading.Thread(target=_slow_readers, args=(address, ca, plan.slow_readers, started[1], done, figures)),
        threading.Thread(target=_bomber, args=(address, ca, payload, plan.bomb_batches, started[2], done, figures)),
    ]
    for name, thread, event in zip(ATTACKERS, threads, started, strict=True):
        if name in plan.attackers:
            thread.start()
        else:
            event.set()
    threads = [t for name, t in zip(ATTACKERS, threads, strict=True) if name in plan.attackers]
    for event, what in zip(started, ("idle connections open", "slow readers waiting", "first bombs sent"), strict=True):
        event.wait(300)
        progress(f"attackers: {what}")
    ready.set()
    stopping.wait()
    done.set()
    for t in threads:
        t.join(120)
    results.put(figures)


def _idle_horde(
    address: tuple[str, int],
    broker_pid: int,
    count: int,
    started: threading.Event,
    done: threading.Event,
    out: dict[str, Any],
) -> None:
    """``count`` connections that send nothing; one the broker closes is opened again."""
    selector = selectors.DefaultSelector()
    fds_before = len(os.listdir(f"/proc/{broker_pid}/fd"))
    opened = reopened = failed = 0

    def open_one() -> bool:
        try:
            sock = socket.create_connection(address, timeout=10)
        except OSError:
            return False
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        return True

    # in steps the listen backlog holds: a burst over it makes the kernel drop SYNs (retried 1 s later)
    while opened < count and not done.is_set():
        step = min(40, count - opened)
        opened += sum(open_one() for _ in range(step))
        try:
            wait_until(lambda: len(os.listdir(f"/proc/{broker_pid}/fd")) >= fds_before + opened - 10, 10)
        except Exception:  # the broker is slow to accept: go on, the kernel queues them
            pass
    started.set()
    while not done.is_set():
        for key, _events in selector.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            selector.unregister(sock)
            sock.close()
            if open_one():
                reopened += 1
            else:
                failed += 1
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    out.update(idle_opened=opened, idle_reopened=reopened, idle_reopen_failed=failed)


def _slow_readers(
    address: tuple[str, int], ca: str, count: int, started: threading.Event, done: threading.Event, out: dict[str, Any]
) -> None:
    """``count`` TLS connections with a tiny receive window and 2 pipelined large fetches each,
    read 4 KiB at a time every half second (again from the start when the broker closes one)."""
    frames = fetch_frame(BULK_TOPIC, SLOW_FETCH_BYTES, 1) + fetch_frame(BULK_TOPIC, SLOW_FETCH_BYTES, 2)

    def open_one() -> ssl.SSLSocket:
        sock = tls_connect(address, ca, receive_buffer=SLOW_WINDOW_BYTES)
        sock.sendall(frames)
        sock.settimeout(0.01)
        return sock

    socks = [open_one() for _ in range(count)]
    started.set()
    read = reopened = 0
    while not done.wait(0.5):
        for i, sock in enumerate(socks):
            try:
                data = sock.recv(SLOW_WINDOW_BYTES)
            except (TimeoutError, ssl.SSLWantReadError):
                continue
            except OSError:
                data = b""
            read += len(data)
            if not data:
                sock.close()
                socks[i] = open_one()
                reopened += 1
    for sock in socks:
        sock.close()
    out.update(slow_read_kib=read // 1024, slow_reopened=reopened)


def _bomber(
    address: tuple[str, int],
    ca: str,
    payload: bytes,
    batches: int,
    started: threading.Event,
    done: threading.Event,
    out: dict[str, Any],
) -> None:
    """Pipelined pairs of Produce requests of ``payload`` (gzip batches of zeros), one pair after
    the other."""
    sock = tls_connect(address, ca)
    sent = pairs = errors = 0
    slowest_s = 0.0
    correlation_id = 0
    while not done.is_set():
        start = time.monotonic()
        correlation_id += 2
        try:
            sock.settimeout(120)
            sock.sendall(
                produce_frame(BOMB_TOPIC, payload, correlation_id - 1)
                + produce_frame(BOMB_TOPIC, payload, correlation_id)
            )
            sent += 1
            started.set()
            sock.settimeout(0.5)  # to leave when told, with the pair unanswered
            errors += sum(produce_error(read_answer(sock, done)) != 0 for _ in range(2))
        except OSError:
            sock.close()
            started.set()
            if done.is_set():  # leaving: the pair in flight is abandoned
                break
            errors += 1  # closed by the broker: once more on a new connection
            sock = tls_connect(address, ca)
            continue
        pairs += 1
        slowest_s = max(slowest_s, time.monotonic() - start)
    sock.close()
    out.update(
        bomb_pairs_sent=sent,
        bomb_pairs=pairs,
        bomb_errors=errors,
        bomb_wire_kib_per_pair=2 * len(payload) // 1024,
        bomb_inflated_mib_per_pair=2 * batches * 60,
        bomb_slowest_pair_s=round(slowest_s, 2),
    )
