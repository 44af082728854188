"""Controller quorum benchmark: three real controller processes on 127.0.0.1.

Measures, next to a gRPC echo baseline taken in the same run:
- records committed per second with many requests in flight (IncrementalAlterConfigs, one
  ConfigRecord each, from many client threads; the controller folds concurrent requests into one
  proposal),
- CreateTopics of 1,000 topics x 10 partitions (RF 3, on registered brokers),
- failover: kill -9 of the active controller until the next write commits (median of N),
- the time to load the image of a 100,000-partition cluster from a snapshot file (what a new broker
  or controller does),
- (issue 26) failover with 5 voters next to the same with 3 (median of N each),
- (issue 26) adding a voter to a dynamic quorum whose metadata log holds N records (1,000,000; 20,000
  with --quick): from the new controller's start as an observer to AddRaftVoter committed, and on to
  its log caught up, next to a plain copy of the bytes it had to receive (the leader's metadata and
  Raft dirs) in the same run.

    python tests/perf/quorum_bench.py [--quick]

Targets (issue 3): failover median < 2 s; 100,000-partition image loaded in < 10 s.
The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import structlog

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from _fake_brokers import FakeBrokers  # noqa: E402

from kraftlog.client import NewTopic  # noqa: E402
from kraftlog.deploy._cluster import LocalCluster, wait_until  # noqa: E402
from kraftlog.proto import admin_pb2, admin_pb2_grpc, diagnostics_pb2, diagnostics_pb2_grpc  # noqa: E402


def echo_baseline(threads: int, seconds: float) -> float:
    """Round trips per second of a tiny unary gRPC call at the same concurrency."""

    class Echo(diagnostics_pb2_grpc.DiagnosticsServiceServicer):
        def Echo(self, request, context):
            return diagnostics_pb2.EchoResponse(payload=request.payload)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    diagnostics_pb2_grpc.add_DiagnosticsServiceServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return _run_threads(
            threads,
            seconds,
            lambda stub: stub.Echo(diagnostics_pb2.EchoRequest(payload=b"x" * 64), timeout=5),
            lambda: diagnostics_pb2_grpc.DiagnosticsServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}")),
        )
    finally:
        server.stop(None)


def _run_threads(threads: int, seconds: float, call, make_stub) -> float:
    count = [0] * threads
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        stub = make_stub()
        while time.monotonic() < stop:
            if call(stub) is not False:
                count[i] += 1

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(count) / (time.monotonic() - start)


def commits_per_second(cluster: LocalCluster, threads: int, seconds: float) -> float:
    leader = cluster.active_controller()
    address = f"127.0.0.1:{cluster.nodes[leader].controller_port}"
    counter = iter(range(10**9))
    lock = threading.Lock()

    def call(stub) -> bool:
        with lock:
            n = next(counter)
        req = admin_pb2.IncrementalAlterConfigsRequest(
            resources=[
                admin_pb2.IncrementalAlterConfigsRequest.Resource(
                    resource=admin_pb2.ConfigResource(resource_type=4, resource_name=""),
                    configs=[
                        admin_pb2.IncrementalAlterConfigsRequest.Op(
                            name="log.retention.ms", op=0, value=str(600_000 + n)
                        )
                    ],
                )
            ]
        )
        resp = stub.IncrementalAlterConfigs(req, timeout=10)
        return resp.results[0].error.code == 0

    return _run_threads(threads, seconds, call, lambda: admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(address)))


def create_topics_time(cluster: LocalCluster, topics: int, partitions: int) -> float:
    with cluster.admin(request_timeout_ms=120_000) as admin:
        names = [f"bench-{i:05d}" for i in range(topics)]
        chunks = [names[i : i + 100] for i in range(0, len(names), 100)]
        start = time.monotonic()
        with futures.ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            results = list(
                pool.map(
                    lambda c: admin.create_topics([NewTopic(n, partitions, 3) for n in c], timeout_ms=120_000), chunks
                )
            )
        elapsed = time.monotonic() - start
    bad = [t for r in results for t in r.topics if t.error.code != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} topics failed, first: {bad[0].error.name} {bad[0].error.message}")
    return elapsed


def failover_times(cluster: LocalCluster, rounds: int) -> list[float]:
    out = []
    for r in range(rounds):
        leader = cluster.active_controller()
        # a tight client retry loop, so the figure is the cluster's failover, not client backoff
        with cluster.admin(request_timeout_ms=20_000, retry_backoff_ms=20, retry_backoff_max_ms=50) as admin:
            killed = time.monotonic()
            cluster.kill(leader)
            i = 0
            while True:
                resp = admin.incremental_alter_configs({(4, ""): [("log.retention.ms", 0, str(700_000 + r * 100 + i))]})
                i += 1
                if resp.results and resp.results[0].error.code == 0:
                    out.append(time.monotonic() - killed)
                    break
                if time.monotonic() - killed > 30:
                    raise RuntimeError("no commit within 30 s of the failover")
        cluster.start_node(leader)
        wait_until(lambda: cluster.is_running(leader), 10)
        # let the restarted node rejoin before the next kill
        n = len([s for s in cluster.nodes.values() if s.controller_port])
        wait_until(lambda: _voters_caught_up(cluster, n), 30, what="voters caught up")
    return out


def failover_with(work: Path, voters: int, rounds: int) -> list[float]:
    """`failover_times` on a static quorum of ``voters`` controllers of its own."""
    cluster = LocalCluster(
        work / f"failover-{voters}", controllers=voters, overrides={"controller.quorum.election.timeout.ms": 1000}
    )
    cluster.start(timeout_s=120)
    try:
        wait_until(lambda: _voters_caught_up(cluster, voters), 60, what=f"{voters} voters up")
        return failover_times(cluster, rounds)
    finally:
        cluster.stop()


def fill_metadata_log(cluster: LocalCluster, records: int, batch: int = 5000) -> float:
    """Commit ``records`` metadata records (one ClientQuotaRecord each, ``batch`` per request);
    returns the seconds it took."""
    start = time.monotonic()
    with cluster.admin(request_timeout_ms=120_000) as admin:
        for first in range(0, records, batch):
            alterations = [
                ({"user": f"bench-user-{i:07d}"}, {"producer_byte_rate": float(1_000_000 + i)})
                for i in range(first, min(records, first + batch))
            ]
            resp = admin.alter_client_quotas(alterations)
            bad = [r.error for r in resp.results if r.error.code != 0] + ([resp.error] if resp.error.code else [])
            if bad:
                raise RuntimeError(f"AlterClientQuotas: {bad[0].name} {bad[0].message}")
    return time.monotonic() - start


def add_voter_times(cluster: LocalCluster, node: int) -> tuple[float, float]:
    """Start controller ``node`` (formatted --no-initial-controllers) and AddRaftVoter it, retried
    while it catches up as an observer: (seconds to the committed change, seconds to its log end
    at the high watermark), both from its start."""
    from kraftlog.storage import read_meta_properties

    spec = cluster.nodes[node]
    directory = read_meta_properties(Path(spec.dir) / "metadata").directory_id
    start = time.monotonic()
    cluster.start_node(node)
    with cluster.admin(request_timeout_ms=10_000) as admin:

        def added() -> bool:
            resp = admin.add_raft_voter(node, directory, spec.host, spec.controller_port, timeout_ms=10_000)
            return resp.error.code == 0

        wait_until(added, 600, interval_s=0.1, what=f"voter {node} added")
        added_s = time.monotonic() - start

        def caught_up() -> bool:
            q = admin.describe_quorum()
            mine = [v for v in q.voters if v.replica_id == node]
            return q.error.code == 0 and bool(mine) and mine[0].log_end_offset >= q.high_watermark

        wait_until(caught_up, 600, interval_s=0.1, what=f"voter {node} caught up")
    return added_s, time.monotonic() - start


def copy_baseline(cluster: LocalCluster, node: int, work: Path) -> tuple[float, int]:
    """Seconds to copy controller ``node``'s metadata dir (segments, snapshots, Raft journal and
    dump: what a joining voter receives) to another dir, and the bytes copied."""
    import shutil

    src = Path(cluster.nodes[node].dir) / "metadata"
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    dst = work / "copy-baseline"
    start = time.monotonic()
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            with p.open("rb+") as f:
                os.fsync(f.fileno())
    elapsed = time.monotonic() - start
    shutil.rmtree(dst)
    return elapsed, size


def add_voter_bench(work: Path, records: int) -> dict[str, float]:
    """A dynamic quorum of 3 voters whose log holds ``records`` records, then voter 4 added."""
    cluster = LocalCluster(
        work / "add-voter",
        controllers=4,
        quorum="dynamic",
        initial_controllers=3,
        overrides={"controller.quorum.election.timeout.ms": 1000},
    )
    cluster.plan()
    try:
        for node in (1, 2, 3):
            cluster.start_node(node)
        wait_until(lambda: _voters_caught_up(cluster, 3), 60, what="3 voters up")
        fill_s = fill_metadata_log(cluster, records)
        leader = cluster.active_controller()
        copy_s, size = copy_baseline(cluster, leader, work)
        added_s, caught_up_s = add_voter_times(cluster, 4)
    finally:
        cluster.stop()
    return {
        "add_voter_records": records,
        "add_voter_fill_s": round(fill_s, 3),
        "add_voter_committed_s": round(added_s, 3),
        "add_voter_caught_up_s": round(caught_up_s, 3),
        "add_voter_copy_baseline_s": round(copy_s, 3),
        "add_voter_copied_bytes": size,
        "add_voter_vs_copy_ratio": round(added_s / max(copy_s, 1e-6), 1),
    }


def _voters_caught_up(cluster: LocalCluster, voters: int = 3) -> bool:
    with cluster.admin(request_timeout_ms=2000) as admin:
        q = admin.describe_quorum()
        return (
            q.error.code == 0
            and len(q.voters) == voters
            and all(v.log_end_offset >= q.high_watermark for v in q.voters)
        )


def load_image_time(partitions: int, work: Path) -> tuple[float, float]:
    """Write a snapshot of ``partitions`` partitions (RF 3), then time reading it into an image."""
    from kraftlog.metadata_log import MetadataImage, read_snapshot, write_snapshot
    from kraftlog.metadata_log._records import BrokerEndpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord

    records = [
        RegisterBrokerRecord(b, f"inc-{b}", b, (BrokerEndpoint("BROKER", "h", 9000 + b),), fenced=False)
        for b in range(1, 7)
    ]
    per_topic = 100
    for t in range(partitions // per_topic):
        tid = f"00000000-0000-4000-8000-{t:012d}"
        records.append(TopicRecord(name=f"topic-{t:05d}", topic_id=tid))
        for p in range(per_topic):
            reps = tuple(((t + p + k) % 6) + 1 for k in range(3))
            records.append(PartitionRecord(partition_id=p, topic_id=tid, replicas=reps, isr=reps, leader=reps[0]))
    start = time.monotonic()
    path = write_snapshot(work, len(records) - 1, 1, 0, records)
    write_s = time.monotonic() - start
    start = time.monotonic()
    snap = read_snapshot(path)
    image = MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
    load_s = time.monotonic() - start
    assert image.topics.partition_count == partitions
    return load_s, write_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short variant for CI")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    quick = args.quick
    # --quick keeps the script working in `make test` (issue 23's time budget): every phase, shorter
    seconds = 1.0 if quick else 10.0
    threads = 16
    topics = 50 if quick else 1000
    rounds = 2 if quick else 10
    partitions = 10_000 if quick else 100_000
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kraftlog-quorum-bench-") as tmp:
        work = Path(tmp)
        echo = echo_baseline(threads, seconds)
        results["echo_rps"] = round(echo, 1)
        cluster = LocalCluster(
            work / "cluster", controllers=3, overrides={"controller.quorum.election.timeout.ms": 1000}
        )
        cluster.start(timeout_s=90)
        brokers = FakeBrokers(cluster.controller_addresses, str(cluster.cluster_id), [1, 2, 3]).start()
        try:
            with cluster.admin(request_timeout_ms=30_000) as admin:
                brokers.wait_unfenced(admin, 60)
            commits = commits_per_second(cluster, threads, seconds)
            results["commits_per_s"] = round(commits, 1)
            results["commits_vs_echo_ratio"] = round(commits / echo, 3)
            create_s = create_topics_time(cluster, topics, 10)
            results[f"create_{topics * 10 // 1000}k_partitions_s"] = round(create_s, 3)
            results["create_10k_partitions_s"] = round(create_s * (1000 / topics), 3)
            fo = failover_times(cluster, rounds)
            results["failover_median_s"] = round(statistics.median(fo), 3)
            results["failover_max_s"] = round(max(fo), 3)
        finally:
            brokers.stop()
            cluster.stop()
        fo5 = failover_with(work, 5, rounds)
        results["failover_5_voters_median_s"] = round(statistics.median(fo5), 3)
        results["failover_5_vs_3_ratio"] = round(statistics.median(fo5) / max(results["failover_median_s"], 1e-6), 3)
        results.update(add_voter_bench(work, 20_000 if quick else 1_000_000))
        load_s, write_s = load_image_time(partitions, work)
        results[f"load_{partitions // 1000}k_partitions_s"] = round(load_s, 3)
        results["load_100k_partitions_s"] = round(load_s * (100_000 / partitions), 3)
        results["snapshot_write_s"] = round(write_s, 3)
    print(
        f"controller quorum benchmark ({'quick' if quick else 'full'}): 3 controller processes, "
        f"{threads} client threads"
    )
    print(f"{'measurement':<42}{'value':>12}  {'baseline / target':<28}")
    print(f"{'gRPC echo round trips/s (same threads)':<42}{results['echo_rps']:>12.1f}  baseline")
    print(
        f"{'records committed/s (many in flight)':<42}{results['commits_per_s']:>12.1f}  "
        f"{results['commits_vs_echo_ratio']:.3f} of echo"
    )
    print(
        f"{f'CreateTopics {topics} x 10 partitions (s)':<42}{create_s:>12.3f}  "
        f"scaled to 1,000 topics: {results['create_10k_partitions_s']:.3f}"
    )
    print(
        f"{f'failover, kill -9 to next commit (median of {rounds}, s)':<42}{results['failover_median_s']:>12.3f}"
        f"  target < 2 s (max {results['failover_max_s']:.3f})"
    )
    print(
        f"{f'load {partitions:,}-partition image from snapshot (s)':<42}{load_s:>12.3f}  "
        f"scaled to 100k: {results['load_100k_partitions_s']:.3f}, target < 10 s"
    )
    print(
        f"{f'failover with 5 voters (median of {rounds}, s)':<42}{results['failover_5_voters_median_s']:>12.3f}"
        f"  {results['failover_5_vs_3_ratio']:.3f} of the 3-voter median"
    )
    print(
        f"{'add a voter, log of ' + format(results['add_voter_records'], ',') + ' records (s)':<42}"
        f"{results['add_voter_committed_s']:>12.3f}  caught up {results['add_voter_caught_up_s']:.3f} s; "
        f"copy of the {results['add_voter_copied_bytes'] / 2**20:.1f} MiB: {results['add_voter_copy_baseline_s']:.3f} s"
    )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
