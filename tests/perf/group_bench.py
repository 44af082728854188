"""Consumer group benchmark (issue 14): how long a group takes to hand out its partitions, and how
many offset commits a coordinator takes per second, next to a gRPC echo of the same broker
measured in the same run.

One combined node (``group.initial.rebalance.delay.ms=0``, so the figure is the protocol's own time
and not Kafka's deliberate wait for more members). Then:

1. rebalance: M consumers (threads, the kraftlog client) subscribe to a topic of P partitions in a
   new group; the time from the last member's subscribe to every member holding a disjoint share
   of all P partitions, median of R groups: once with the classic protocol (``range``, heartbeats
   every 200 ms) and once with KIP-848's (``group.protocol=consumer``, the coordinator's ``uniform``
   assignor, ``group.consumer.heartbeat.interval.ms=200``);
2. commits: one member commits one partition's offset per OffsetCommit, synchronously (acks=all on
   ``__consumer_offsets``), for S seconds.

Baseline: the round trip and rate of a small gRPC Echo to the same broker, one thread.

    python tests/perf/group_bench.py [--quick]

Full: 10 members x 100 partitions, 3 groups, 5 s of commits; ``--quick``: 5 x 20, 1 group, 2 s.
The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import structlog

from kraftlog.client import Consumer, NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import diagnostics_pb2, diagnostics_pb2_grpc

OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 200,
}


def echo(address: str, seconds: float) -> tuple[float, float]:
    """(median round trip in ms, calls per second) of a 64-byte Echo, one thread."""
    times = []
    with grpc.insecure_channel(address) as ch:
        stub = diagnostics_pb2_grpc.DiagnosticsServiceStub(ch)
        stop = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < stop:
            t = time.perf_counter()
            stub.Echo(diagnostics_pb2.EchoRequest(payload=b"x" * 64), timeout=10)
            times.append(time.perf_counter() - t)
        rate = len(times) / (time.monotonic() - start)
    return statistics.median(times) * 1000, rate


def rebalance_s(cluster: LocalCluster, topic: str, partitions: int, members: int, group: str, protocol: str) -> float:
    settings: dict[str, object] = (
        {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 200, "partition_assignment_strategy": "range"}
        if protocol == "classic"
        else {"group_protocol": "consumer"}
    )
    consumers = [
        Consumer(
            cluster.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            client_id=f"{group}-{i}",
            **settings,  # type: ignore[arg-type]
        )
        for i in range(members)
    ]
    stop = threading.Event()
    started: list[float] = []
    lock = threading.Lock()

    def run(c: Consumer) -> None:
        c.subscribe([topic])
        with lock:
            started.append(time.monotonic())
        while not stop.is_set():
            c.poll(50)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()

    def done() -> bool:
        owned = [c.assignment() for c in consumers]
        return sum(len(o) for o in owned) == partitions and len(set().union(*owned)) == partitions and all(owned)

    wait_until(lambda: len(started) == members, 30, what="every member started")
    last_join = max(started)
    wait_until(done, 120, interval_s=0.01, what="every member assigned")
    took = time.monotonic() - last_join
    stop.set()
    for t in threads:
        t.join(30)
    for c in consumers:
        c.close()
    return took


def commits_per_s(cluster: LocalCluster, topic: str, seconds: float) -> float:
    with Consumer(cluster.bootstrap_servers, group_id="bench-commits", enable_auto_commit=False) as c:
        c.subscribe([topic])
        wait_until(lambda: c.poll(50) is not None and bool(c.assignment()), 60, what="a member")
        tp = sorted(c.assignment())[0]
        n = 0
        stop = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < stop:
            c.commit({tp: n})
            n += 1
        return n / (time.monotonic() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short variant for CI")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    members, partitions, groups, commit_s = (5, 20, 1, 2.0) if args.quick else (10, 100, 3, 5.0)
    base = Path(tempfile.mkdtemp(prefix="kraftlog-group-bench-"))
    cluster = LocalCluster(base / "c", controllers=1, combined=True, overrides=OVERRIDES)
    cluster.start(timeout_s=90)
    try:
        cluster.wait_unfenced_brokers()
        with cluster.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic("bench", num_partitions=partitions, replication_factor=1)])
        address = cluster.bootstrap_servers.split(",")[0]
        echo_ms, echo_per_s = echo(address, 1.0 if args.quick else 3.0)
        times = [rebalance_s(cluster, "bench", partitions, members, f"bench-{i}", "classic") for i in range(groups)]
        modern = [rebalance_s(cluster, "bench", partitions, members, f"kip848-{i}", "consumer") for i in range(groups)]
        commit_rate = commits_per_s(cluster, "bench", commit_s)
    finally:
        cluster.stop()
    rebalance = statistics.median(times)
    rebalance_modern = statistics.median(modern)
    print(f"group benchmark ({'quick' if args.quick else 'full'}): {members} members x {partitions} partitions")
    print(f"{'measurement':<44}{'figure':>12}")
    print(f"{'gRPC echo round trip (ms), baseline':<44}{echo_ms:>12.2f}")
    print(f"{'gRPC echo calls/s, baseline':<44}{echo_per_s:>12.0f}")
    print(f"{'rebalance, classic protocol (s)':<44}{rebalance:>12.3f}  ({rebalance * 1000 / echo_ms:.0f} echo trips)")
    print(f"{'offset commits/s (sync, one partition)':<44}{commit_rate:>12.0f}  ({commit_rate / echo_per_s:.2f}x echo)")
    print(
        f"{'rebalance, KIP-848 consumer protocol (s)':<44}{rebalance_modern:>12.3f}"
        f"  ({rebalance_modern * 1000 / echo_ms:.0f} echo trips)"
    )
    print(
        json.dumps(
            {
                "members": members,
                "partitions": partitions,
                "echo_round_trip_ms": round(echo_ms, 3),
                "echo_calls_per_s": round(echo_per_s),
                "rebalance_classic_s": round(rebalance, 3),
                "rebalance_consumer_protocol_s": round(rebalance_modern, 3),
                "offset_commits_per_s": round(commit_rate),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
