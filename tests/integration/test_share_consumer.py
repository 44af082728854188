"""kraftlog's own `ShareConsumer` (issue 27) on a real node, over gRPC: five of them share a
2-partition topic (all receive records, every record once), RELEASE redelivers with delivery count
2, REJECT archives, a SIGKILLed consumer's records come back after the lock with delivery count 2,
and ours shares one group with confluent-kafka's ShareConsumer (librdkafka, Kafka's protocol).

On main there is no ``kraftlog.client.ShareConsumer``: every test fails at its import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from kraftlog.client import AcknowledgeType, NewTopic, Producer, ShareConsumer
from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

LOCK_MS = 2000
OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": LOCK_MS,
}
TOPICS = ("five", "again", "rejected", "killed", "mixed", "later")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharec") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1) for n in TOPICS])
        yield c
    finally:
        c.stop()


def earliest(cluster: LocalCluster, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (a group config, IncrementalAlterConfigs on
    the GROUP resource): records produced before the first fetch are delivered."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(cluster: LocalCluster, topic: str, n: int) -> list[bytes]:
    with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
        values = [f"{topic}-{i}".encode() for i in range(n)]
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % 2)
        p.flush()
    return values


def ours(cluster: LocalCluster, group: str, **conf: Any) -> ShareConsumer:
    return ShareConsumer(cluster.bootstrap_servers, group_id=group, fetch_max_wait_ms=200, **conf)


def test_five_share_consumers_on_two_partitions_each_receive_and_share_every_record_once(cluster: LocalCluster) -> None:
    earliest(cluster, "g-five")
    values = produce(cluster, "five", 200)
    consumers = [ours(cluster, "g-five", share_acquire_mode="record_limit", max_poll_records=4) for _ in range(5)]
    seen: dict[bytes, list[int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def work(i: int, c: ShareConsumer) -> None:
        c.subscribe(["five"])
        while not stop.is_set():
            for r in c.poll(200):
                assert r.delivery_count == 1
                with lock:
                    seen.setdefault(r.value, []).append(i)
                time.sleep(0.005)  # the work each record takes: others get the rest meanwhile

    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(consumers)]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: len(seen) == len(values), 60, what="every record")
        # a little more polling proves nothing comes back: the implicit ACCEPTs were applied
        for c in consumers:
            assert c.commit_sync() is not None
        stop.set()
        for t in threads:
            t.join(10)
        per = [sum(1 for who in seen.values() if who == [i]) for i in range(5)]
        print(f"per consumer: {per}")
        assert set(seen) == set(values)
        assert all(len(who) == 1 for who in seen.values()), [v for v, who in seen.items() if len(who) > 1]
        assert all(n > 0 for n in per), per
    finally:
        stop.set()
        for c in consumers:
            c.close()


def test_release_redelivers_with_count_two_and_reject_archives(cluster: LocalCluster) -> None:
    earliest(cluster, "g-again")
    c = ours(cluster, "g-again", share_acknowledgement_mode="explicit")
    try:
        values = produce(cluster, "again", 4)
        c.subscribe(["again"])  # after the produce: the first fetch acquires all four at once
        got: list[Any] = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 4, 20, what="the records")
        assert sorted(r.value for r in got) == sorted(values) and {r.delivery_count for r in got} == {1}
        released, rejected = got[0], got[1:]
        c.acknowledge(released, AcknowledgeType.RELEASE)
        for r in rejected:
            c.acknowledge(r, AcknowledgeType.REJECT)
        results = c.commit_sync()
        assert results and all(e is None for e in results.values()), results
        again: list[Any] = []
        wait_until(lambda: again.extend(c.poll(200)) or again, 20, what="the released record again")
        assert [(r.value, r.offset, r.delivery_count) for r in again] == [(released.value, released.offset, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        # the rejected ones never come back: a record produced after them arrives alone
        (marker,) = produce(cluster, "again", 1)
        later: list[Any] = []
        wait_until(lambda: later.extend(c.poll(200)) or later, 20, what="the marker")
        assert [r.value for r in later] == [marker]
        c.acknowledge(later[0])
    finally:
        c.close()


HOLDER = r"""
import sys, time
from kraftlog.client import ShareConsumer
c = ShareConsumer(sys.argv[1], group_id="g-killed", share_acknowledgement_mode="explicit", fetch_max_wait_ms=200)
c.subscribe(["killed"])
held = []
while not held:
    held = c.poll(500)
print(" ".join(f"{r.partition}:{r.offset}:{r.delivery_count}" for r in held), flush=True)
time.sleep(600)
"""


def test_a_sigkilled_consumers_records_come_back_after_the_lock_with_count_two(cluster: LocalCluster) -> None:
    earliest(cluster, "g-killed")
    values = produce(cluster, "killed", 20)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, cluster.bootstrap_servers], stdout=subprocess.PIPE, text=True
    )
    survivor = None
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().split()  # printed once it holds records (bounded by the test timeout)
        held = {(int(p), int(o)) for p, o, _count in (x.split(":") for x in line)}
        assert held and all(x.endswith(":1") for x in line)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed_at = time.monotonic()
        survivor = ours(cluster, "g-killed")
        survivor.subscribe(["killed"])
        seen: dict[tuple[int, int], int] = {}

        def all_seen() -> bool:
            for r in survivor.poll(200):
                seen[(r.partition, r.offset)] = r.delivery_count
            return len(seen) == len(values)

        wait_until(all_seen, 40, what="every record, the killed consumer's again")
        back_s = time.monotonic() - killed_at
        print(f"{len(held)} records of the killed consumer back after {back_s:.2f} s (lock {LOCK_MS} ms)")
        assert {k: v for k, v in seen.items() if k in held} == dict.fromkeys(held, 2)
        assert all(v in (1, 2) for k, v in seen.items() if k not in held)
    finally:
        if holder.poll() is None:
            holder.kill()
        if survivor is not None:
            survivor.close()


def test_ours_and_confluent_kafkas_share_consumer_share_one_group(cluster: LocalCluster) -> None:
    earliest(cluster, "g-mixed")
    values = produce(cluster, "mixed", 200)
    mine = ours(cluster, "g-mixed", share_acquire_mode="record_limit", max_poll_records=5)
    theirs = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "g-mixed", "log_level": 3}
    )
    seen: dict[bytes, list[str]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def run_ours() -> None:
        mine.subscribe(["mixed"])
        while not stop.is_set():
            for r in mine.poll(200):
                with lock:
                    seen.setdefault(r.value, []).append("ours")
                time.sleep(0.005)

    def run_theirs() -> None:
        theirs.subscribe(["mixed"])
        while not stop.is_set():
            for m in theirs.poll(0.2):
                if m.error() is None:
                    with lock:
                        seen.setdefault(m.value(), []).append("confluent")
                    time.sleep(0.005)

    threads = [threading.Thread(target=run_ours), threading.Thread(target=run_theirs)]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: len(seen) == len(values), 60, what="every record")
        stop.set()
        for t in threads:
            t.join(10)
        by = {who: sum(1 for w in seen.values() if w == [who]) for who in ("ours", "confluent")}
        print(f"records per client: {by}")
        assert all(len(w) == 1 for w in seen.values()), [v for v, w in seen.items() if len(w) > 1]
        assert by["ours"] > 0 and by["confluent"] > 0, by
    finally:
        stop.set()
        mine.close()
        theirs.close()


def test_implicit_mode_commit_async_reports_to_the_callback_and_nothing_comes_back(cluster: LocalCluster) -> None:
    earliest(cluster, "g-later")
    values = produce(cluster, "later", 10)
    reported: list[tuple[dict[Any, set[int]], Any]] = []
    c = ours(
        cluster, "g-later", acknowledgement_commit_callback=lambda offsets, error: reported.append((offsets, error))
    )
    try:
        c.subscribe(["later"])
        got: list[Any] = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 10, 20, what="the records")
        assert sorted(r.value for r in got) == sorted(values)
        c.commit_async()  # the implicit ACCEPT of every record, answered later
        wait_until(lambda: c.poll(100) == [] and sum(len(o) for os_, _e in reported for o in os_.values()) >= 10, 20)
        assert all(error is None for _o, error in reported)
        assert sorted(o for os_, _e in reported for offs in os_.values() for o in offs) == sorted(r.offset for r in got)
        # accepted: a new member of the group gets nothing
        with ours(cluster, "g-later") as other:
            other.subscribe(["later"])
            assert other.poll(1500) == []
    finally:
        c.close()
