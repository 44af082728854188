"""Cleaner benchmark (issue 12): compact 1 GiB of keyed data while producing to another topic.

One controller and one broker, separate processes (so a broker that stopped heartbeating would
really be fenced; heartbeat 500 ms, session 3 s). A compacted topic is filled with keyed records
(1 KiB values, about half of them superseded by later ones) while ``min.compaction.lag.ms`` keeps
the cleaner off it. Then, in the same run:

1. baseline: small acks=1 produce requests to another topic, one every 10 ms, nothing compacting;
2. ``min.compaction.lag.ms`` is set to 0: a cleaner thread compacts the whole topic while the same
   produce stream runs, until the broker logs ``log_cleaned`` for it; a monitor asks the
   controller every 100 ms whether the broker is fenced or registered again.

Target: the worst produce latency while compacting < 200 ms, and no fencing. The cleaner is a
Python thread: it shares the interpreter lock with the event loop, so the median latency rises
while it runs (the loop waits for the lock), but no request waits for the pass itself.

    python tests/perf/cleaner_bench.py [--quick]

``--quick`` compacts 48 MiB instead of 1 GiB. The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import structlog

from kraftlog import storage
from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

MIB = 1024 * 1024
TOPIC_RESOURCE = 2
OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "log.cleaner.backoff.ms": 500,
    "log.retention.check.interval.ms": 300_000,
}
TARGET_MAX_MS = 200.0


def keyed_batches(total_bytes: int, seed: int = 7):
    """~1 MiB batches of 900 records with 1 KiB values; keys drawn from half as many keys as
    records, so about half of the records are superseded and rewritten batches are the rule."""
    records = total_bytes // 1024
    keys = max(1, records // 2)
    rng = random.Random(seed)
    value = b"c" * 1000
    made = 0
    while made < records:
        now = int(time.time() * 1000)
        builder = storage.RecordBatchBuilder()
        for _ in range(min(900, records - made)):
            builder.append(now, b"key-%09d" % rng.randrange(keys), value)
        made += 900
        yield builder.build()


def fill(address: str, topic: str, total_bytes: int) -> int:
    sent = 0
    with grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 * MIB)]) as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        for batch in keyed_batches(total_bytes):
            r = stub.Produce(
                broker_pb2.ProduceRequest(
                    acks=1,
                    timeout_ms=30_000,
                    topics=[
                        broker_pb2.ProduceRequest.TopicData(
                            name=topic, partitions=[broker_pb2.ProduceRequest.PartitionData(index=0, records=batch)]
                        )
                    ],
                ),
                timeout=60,
            )
            err = r.topics[0].partitions[0].error
            if err.code:
                raise RuntimeError(f"fill produce failed: {err.name}: {err.message}")
            sent += len(batch)
    return sent


class LatencyProbe:
    """One small acks=1 produce every ``interval_s`` from a thread; keeps every latency (ms)."""

    def __init__(self, address: str, topic: str, interval_s: float = 0.01) -> None:
        self.address, self.topic, self.interval_s = address, topic, interval_s
        self.samples: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency-probe", daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self.address) as ch:
            stub = broker_pb2_grpc.BrokerServiceStub(ch)
            while not self._stop.is_set():
                batch = storage.build_batch([(b"k", b"x" * 100)], timestamp_ms=int(time.time() * 1000))
                req = broker_pb2.ProduceRequest(
                    acks=1,
                    timeout_ms=10_000,
                    topics=[
                        broker_pb2.ProduceRequest.TopicData(
                            name=self.topic,
                            partitions=[broker_pb2.ProduceRequest.PartitionData(index=0, records=batch)],
                        )
                    ],
                )
                start = time.perf_counter()
                try:
                    r = stub.Produce(req, timeout=20)
                    ok = r.topics[0].partitions[0].error.code == 0
                except grpc.RpcError:
                    ok = False
                self.samples.append((time.perf_counter() - start) * 1000)
                self.errors += 0 if ok else 1
                self._stop.wait(self.interval_s)

    def __enter__(self) -> LatencyProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


class FencingMonitor:
    """Asks the controller every 100 ms whether broker ``broker_id`` is fenced or has a new epoch."""

    def __init__(self, cluster: LocalCluster, broker_id: int) -> None:
        self.cluster, self.broker_id = cluster, broker_id
        self.fenced_samples = 0
        self.epochs: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fencing-monitor", daemon=True)

    def _run(self) -> None:
        with self.cluster.admin(request_timeout_ms=5000) as admin:
            while not self._stop.is_set():
                try:
                    for b in admin.describe_cluster().brokers:
                        if b.broker_id == self.broker_id:
                            self.epochs.add(b.broker_epoch)
                            self.fenced_samples += 1 if b.fenced else 0
                except Exception:  # the controller is busy: ask again
                    pass
                self._stop.wait(0.1)

    def __enter__(self) -> FencingMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def cleaned_events(log_path: Path, topic: str) -> list[dict]:
    out = []
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"log_cleaned"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "log_cleaned" and event.get("topic") == topic:
            out.append(event)
    return out


def summary(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p99 = ordered[max(0, int(len(ordered) * 0.99) - 1)]
    return statistics.median(ordered), p99, ordered[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="48 MiB instead of 1 GiB (for CI)")
    parser.add_argument("--mib", type=int, default=None, help="compact this many MiB instead")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    total = (args.mib or (48 if args.quick else 1024)) * MIB
    segment_bytes = 8 * MIB if args.quick else 64 * MIB
    baseline_s = 2.0 if args.quick else 10.0
    out: dict[str, float | int | bool] = {}
    with tempfile.TemporaryDirectory(prefix="kraftlog-cleaner-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", controllers=1, brokers=1, overrides=OVERRIDES)
        cluster.start(timeout_s=90)
        try:
            broker_id = next(n for n, spec in cluster.nodes.items() if spec.roles == ["broker"])
            address = f"127.0.0.1:{cluster.nodes[broker_id].broker_port}"
            with cluster.admin(request_timeout_ms=20_000) as admin:
                wait_until(
                    lambda: any(not b.fenced for b in admin.describe_cluster().brokers), 60, what="the broker unfenced"
                )
                resp = admin.create_topics(
                    [
                        NewTopic(
                            "compacted",
                            1,
                            1,
                            configs={
                                "cleanup.policy": "compact",
                                "segment.bytes": str(segment_bytes),
                                "min.compaction.lag.ms": str(7 * 86_400_000),
                            },
                        ),
                        NewTopic("latency", 1, 1),
                    ]
                )
                assert all(t.error.code == 0 for t in resp.topics), resp
                wait_until(
                    lambda: all(
                        p.leader_id == broker_id
                        for t in admin.describe_topics(["compacted", "latency"]).topics
                        for p in t.partitions
                    ),
                    30,
                    what="leaders",
                )
            start = time.monotonic()
            filled = fill(address, "compacted", total)
            out["filled_mib"] = round(filled / MIB, 1)
            out["fill_s"] = round(time.monotonic() - start, 1)

            with LatencyProbe(address, "latency") as base:
                wait_until(lambda: len(base.samples) and time.monotonic() > start, 5, what="probe")
                t0 = time.monotonic()
                wait_until(
                    lambda: time.monotonic() - t0 >= baseline_s,
                    baseline_s + 5,
                    interval_s=0.1,
                    what="the baseline window",
                )
            log_path = cluster.nodes[broker_id].log_path
            with FencingMonitor(cluster, broker_id) as fencing, LatencyProbe(address, "latency") as during:
                with cluster.admin(request_timeout_ms=20_000) as admin:
                    admin.incremental_alter_configs(
                        {(TOPIC_RESOURCE, "compacted"): [("min.compaction.lag.ms", 0, "0")]}
                    )
                t0 = time.monotonic()
                events = wait_until(
                    lambda: cleaned_events(log_path, "compacted"), 1800, interval_s=0.2, what="the compaction to finish"
                )
                compaction_s = time.monotonic() - t0
                t1 = time.monotonic()
                wait_until(lambda: time.monotonic() - t1 >= 1.0, 5, interval_s=0.1, what="a last second")
        finally:
            cluster.stop()
    event = events[0]
    b50, b99, bmax = summary(base.samples)
    d50, d99, dmax = summary(during.samples)
    out.update(
        {
            "compacted_read_mib": round(event.get("bytes_read", 0) / MIB, 1),
            "compacted_written_mib": round(event.get("bytes_written", 0) / MIB, 1),
            "compaction_s": round(compaction_s, 1),
            "compaction_mib_s": round(event.get("bytes_read", 0) / MIB / compaction_s, 1) if compaction_s else 0.0,
            "produce_p50_ms_baseline": round(b50, 2),
            "produce_p99_ms_baseline": round(b99, 2),
            "produce_max_ms_baseline": round(bmax, 2),
            "produce_p50_ms_compacting": round(d50, 2),
            "produce_p99_ms_compacting": round(d99, 2),
            "produce_max_ms_compacting": round(dmax, 2),
            "produce_requests_compacting": len(during.samples),
            "produce_errors_compacting": during.errors,
            "fenced_samples": fencing.fenced_samples,
            "broker_epochs_seen": len(fencing.epochs),
            "target_max_ms": TARGET_MAX_MS,
        }
    )
    out["ok"] = bool(
        dmax < TARGET_MAX_MS and fencing.fenced_samples == 0 and len(fencing.epochs) <= 1 and during.errors == 0
    )
    print(
        f"cleaner benchmark ({'quick' if args.quick else 'full'}): compact {out['compacted_read_mib']} MiB "
        f"(-> {out['compacted_written_mib']} MiB) in {out['compaction_s']} s while producing to another topic"
    )
    print(f"{'produce latency (ms)':<34}{'p50':>9}{'p99':>9}{'max':>9}")
    print(f"{'  baseline, nothing compacting':<34}{b50:>9.2f}{b99:>9.2f}{bmax:>9.2f}")
    print(f"{'  while compacting':<34}{d50:>9.2f}{d99:>9.2f}{dmax:>9.2f}   target max < {TARGET_MAX_MS:.0f}")
    print(
        f"fencing: {fencing.fenced_samples} fenced samples, {len(fencing.epochs)} broker epoch(s) seen "
        f"(target 0 and 1); {'OK' if out['ok'] else 'MISSED'}"
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
