"""Share group benchmark (issue 27): records per second when each record takes 5 ms of work, with
1, 4 and 8 share consumers (kraftlog's `ShareConsumer`) on a 2-partition topic, next to a consumer
group of 2 on the same topic measured in the same run.

A consumer group can keep at most one consumer busy per partition, so 2 partitions cap it near 2
consumers' worth of work (2 x 200 records/s at 5 ms a record); a share group hands records of the
same partitions to every member, so it should grow past the partition count: that growth,
``share_vs_group_ratio_8`` (8 share consumers over the group of 2), is the queue's point.

One combined node. The topic is filled first; each measurement is a new group reading it from the
start (``share.auto.offset.reset=earliest`` as a group config, ``auto.offset.reset=earliest`` for
the consumer group), consumers in threads, each record "worked on" by sleeping 5 ms, implicit
acknowledgement. Share consumers acquire at most 25 records a fetch (``share.acquire.mode=
record_limit``, KIP-1206), the group's consumers poll at most 25: no consumer hoards work, and a
share consumer's round trip (acknowledge, persist, acquire) is spread over 125 ms of work. The
window opens once every consumer has had a record (bounded) and counts the records done in it.

    python tests/perf/share_bench.py [--quick]

Full: 5 s windows; ``--quick``: 2 s. The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from kraftlog.client import Consumer, NewTopic, Producer, ShareConsumer
from kraftlog.deploy._cluster import LocalCluster

OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}
TOPIC = "queue"
PARTITIONS = 2
WORK_S = 0.005
PER_POLL = 25
GROUP_RESOURCE = 32  # Kafka's ConfigResource type GROUP


class _Run:
    """The consumers of one measurement: their threads, per-consumer counts, a stop flag."""

    def __init__(self, n: int) -> None:
        self.counts = [0] * n
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def worker(self, i: int, poll: Callable[[], Sequence[object]], close: Callable[[], None]) -> None:
        try:
            while not self.stop.is_set():
                for _record in poll():
                    time.sleep(WORK_S)  # the record's work
                    self.counts[i] += 1
        except BaseException as err:  # noqa: BLE001 - reported by the measurement
            self.errors.append(err)
        finally:
            close()

    def measure(self, threads: list[threading.Thread], window_s: float, warmup_timeout_s: float = 20.0) -> float:
        """Records per second over ``window_s``, from when every consumer has had a record (or
        ``warmup_timeout_s`` passed)."""
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + warmup_timeout_s
            while time.monotonic() < deadline and not all(self.counts) and not self.errors:
                time.sleep(0.05)
            if self.errors:
                raise self.errors[0]
            start, before = time.monotonic(), sum(self.counts)
            time.sleep(window_s)  # the measurement window (not a synchronisation)
            done, took = sum(self.counts) - before, time.monotonic() - start
        finally:
            self.stop.set()
            for t in threads:
                t.join(30)
        if self.errors:
            raise self.errors[0]
        return done / took


def share_rate(cluster: LocalCluster, consumers: int, group: str, window_s: float) -> float:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        answer = admin.incremental_alter_configs(
            {(GROUP_RESOURCE, group): [("share.auto.offset.reset", 0, "earliest")]}
        )
        if answer.error.code or any(r.error.code for r in answer.results):
            raise RuntimeError(f"group config of {group} refused: {answer}")
    run = _Run(consumers)
    threads = []
    for i in range(consumers):
        c = ShareConsumer(
            cluster.bootstrap_servers,
            group_id=group,
            share_acquire_mode="record_limit",
            max_poll_records=PER_POLL,
            fetch_max_wait_ms=100,
        )
        c.subscribe([TOPIC])
        threads.append(threading.Thread(target=run.worker, args=(i, lambda c=c: c.poll(100), c.close)))
    return run.measure(threads, window_s)


def group_rate(cluster: LocalCluster, consumers: int, group: str, window_s: float) -> float:
    run = _Run(consumers)
    threads = []
    for i in range(consumers):
        c = Consumer(
            cluster.bootstrap_servers,
            group_id=group,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            max_poll_records=PER_POLL,
        )
        c.subscribe([TOPIC])
        threads.append(threading.Thread(target=run.worker, args=(i, lambda c=c: c.poll(100), c.close)))
    return run.measure(threads, window_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short variant for CI")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    window_s = 2.0 if args.quick else 5.0
    # enough for 8 consumers flat out through every window, from the start each time
    records = int(8 / WORK_S * (window_s + 3) * 1.5)
    base = Path(tempfile.mkdtemp(prefix="kraftlog-share-bench-"))
    cluster = LocalCluster(base / "c", controllers=1, combined=True, overrides=OVERRIDES)
    cluster.start(timeout_s=90)
    try:
        cluster.wait_unfenced_brokers()
        with cluster.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        with Producer(cluster.bootstrap_servers, linger_ms=5) as producer:
            for i in range(records):
                producer.send(TOPIC, f"job-{i}".encode(), partition=i % PARTITIONS)
            producer.flush()
        group_2 = group_rate(cluster, 2, "bench-group-2", window_s)
        share = {n: share_rate(cluster, n, f"bench-share-{n}", window_s) for n in (1, 4, 8)}
    finally:
        cluster.stop()
    ideal = 1 / WORK_S
    variant = "quick" if args.quick else "full"
    print(f"share group benchmark ({variant}): {PARTITIONS} partitions, {WORK_S * 1000:.0f} ms a record")
    print(f"{'consumers':<34}{'records/s':>12}{'x one busy consumer':>22}")
    print(f"{'consumer group, 2 members':<34}{group_2:>12.0f}{group_2 / ideal:>22.2f}")
    for n, rate in share.items():
        print(f"{f'share group, {n} member(s)':<34}{rate:>12.0f}{rate / ideal:>22.2f}")
    print(f"{'share (8) / consumer group (2)':<34}{share[8] / group_2:>12.2f}")
    print(
        json.dumps(
            {
                "partitions": PARTITIONS,
                "work_ms_per_record": WORK_S * 1000,
                "window_s": window_s,
                "group_2_records_per_s": round(group_2, 1),
                "share_1_records_per_s": round(share[1], 1),
                "share_4_records_per_s": round(share[4], 1),
                "share_8_records_per_s": round(share[8], 1),
                "share_vs_group_ratio_8": round(share[8] / group_2, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
