"""Storage faults on a follower (issue 28), real processes: one controller and three brokers.

For each kind of `deploy.chaos._storage_faults` (a bit flipped in the newest segment, one in an
offset index, the newest segment cut, the writes not fsynced lost as a power loss would): a
follower is killed with SIGKILL, its files of the topic are damaged while it is down, and it is
started again. It must come back into the ISR (it detected the damage, truncated and refetched),
and then, made the only replica left (the two others stopped cleanly, so it leads with an ISR of
itself: no unclean election), serve every acknowledged record at its offset, each batch passing
the consumer's CRC check. A follower that kept a damaged batch would fail that read; one that kept
a hole would skip offsets.
"""

from __future__ import annotations

import contextlib
import random
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlog.client import Consumer, NewTopic, Producer
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.deploy.chaos._storage_faults import STORAGE_KINDS, damage_node

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    # the recovery-point checkpoint follows the fsyncs closely, so lose_unsynced keeps what they kept
    "log.flush.offset.checkpoint.interval.ms": 500,
}
#: small segments and a dense index: the topic's log has rolled segments with index files
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": "16384", "index.interval.bytes": "512"}
RECORDS = 400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("storage-faults"), controllers=1, brokers=3, overrides=OVERRIDES)
    c.start()
    c.wait_unfenced_brokers(3)
    try:
        yield c
    finally:
        c.stop()


def _partition(cluster: LocalCluster, topic: str) -> tuple[int, list[int], list[int]]:
    with cluster.admin() as admin:
        t = admin.describe_topics([topic]).topics[0]
        p = t.partitions[0]
        return p.leader_id, list(p.replicas), list(p.isr)


def _produce(
    cluster: LocalCluster, topic: str, start: int, count: int, *, batch_size: int = 2048
) -> list[tuple[int, bytes]]:
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=2, batch_size=batch_size) as producer:
        values = [f"{topic}-{i:06d}-".encode() + b"x" * 100 for i in range(start, start + count)]
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(60)
        return [(f.result().offset, v) for f, v in zip(futures, values, strict=True)]


def _read_all(cluster: LocalCluster, topic: str, end: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", check_crcs=True) as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
            got.extend((r.offset, r.value) for r in consumer.poll(200))
    return got


def _full_isr(cluster: LocalCluster, topic: str) -> bool:
    leader, replicas, isr = _partition(cluster, topic)
    return leader >= 0 and set(isr) == set(replicas)


def _written_topic(
    cluster: LocalCluster, topic: str, *, batch_size: int = 2048
) -> tuple[list[tuple[int, bytes]], int, list[int]]:
    """Create ``topic`` and write `RECORDS` to it; returns what was acknowledged, a follower and
    the replicas."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, 3, configs=TOPIC_CONFIGS)], timeout_ms=30_000)
    wait_until(lambda: _full_isr(cluster, topic), 30, what=f"{topic} fully replicated")
    acked = _produce(cluster, topic, 0, RECORDS, batch_size=batch_size)
    wait_until(lambda: _full_isr(cluster, topic), 30, what=f"{topic} ISR full after the writes")
    leader, replicas, _isr = _partition(cluster, topic)
    return acked, next(r for r in replicas if r != leader), replicas


@contextlib.contextmanager
def _leading_alone(cluster: LocalCluster, topic: str, node: int, replicas: list[int]) -> Iterator[None]:
    """Stop the other replicas cleanly (leadership moves to the last ISR member, ``node``; no
    unclean election) for the body, then start them again."""
    others = [r for r in replicas if r != node]
    try:
        for other in others:
            cluster.stop_node(other)
        wait_until(lambda: _partition(cluster, topic)[0] == node, 30, what=f"{node} leading {topic} alone")
        yield
    finally:
        for other in others:
            cluster.start_node(other)


@pytest.mark.parametrize("kind", STORAGE_KINDS)
def test_a_damaged_follower_refetches_and_serves_only_valid_batches(cluster: LocalCluster, kind: str) -> None:
    topic = f"damaged-{kind.replace('_', '-')}"
    acked, follower, replicas = _written_topic(cluster, topic)
    log_dir = Path(cluster.nodes[follower].dir) / "data"
    cluster.kill(follower)
    damage = damage_node([log_dir], kind, random.Random(f"{kind}-28"), include=lambda t: t == topic)
    assert damage, f"{kind}: nothing to damage in {log_dir}"
    print(kind, [d.what for d in damage])
    cluster.start_node(follower)
    acked += _produce(cluster, topic, RECORDS, 100)
    wait_until(lambda: _full_isr(cluster, topic), 60, what=f"follower {follower} back in the ISR of {topic}")
    with _leading_alone(cluster, topic, follower, replicas):
        got = _read_all(cluster, topic, acked[-1][0] + 1)
    assert [o for o, _v in got] == list(range(len(got))), "offsets skipped or repeated"
    assert {o: v for o, v in got if o in dict(acked)} == dict(acked)
    wait_until(lambda: _full_isr(cluster, topic), 60, what=f"{topic} ISR full again")


def test_a_false_index_entry_never_makes_a_read_skip_records(cluster: LocalCluster) -> None:
    """A bit flipped in an offset index entry of a rolled segment, on a follower stopped cleanly
    (so the load trusts every segment and checks only each index's last entry): the entry still
    increases but names an offset below the batch at its position. Led by that follower alone, a
    consumer seeking to that offset must get it, not the batch the entry points at."""
    topic = "damaged-index-entry"
    # a batch per record: an index entry every few batches, so a false one points past its offset
    acked, follower, replicas = _written_topic(cluster, topic, batch_size=64)
    partition_dir = Path(cluster.nodes[follower].dir) / "data" / f"{topic}-0"
    cluster.stop_node(follower)
    index = sorted(partition_dir.glob("*.index"))[0]
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 24, f"{index}: {len(raw)} bytes"
    rel_prev, _pos = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">i", raw, 16, rel_prev + 1)  # entry 2 now claims the offset after entry 1's
    index.write_bytes(bytes(raw))
    target = int(index.name[:20]) + rel_prev + 1
    cluster.start_node(follower)
    wait_until(lambda: _full_isr(cluster, topic), 60, what=f"follower {follower} back in the ISR of {topic}")
    with _leading_alone(cluster, topic, follower, replicas):
        with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek((topic, 0), target)
            got = wait_until(lambda: consumer.poll(200) or None, 30, what=f"records from offset {target}")
    assert got[0].offset == target, f"asked for offset {target}, got {got[0].offset} first"
    assert got[0].value == dict(acked)[target]
    wait_until(lambda: _full_isr(cluster, topic), 60, what=f"{topic} ISR full again")


def test_slow_fsync_on_the_leader_keeps_acks_all_correct(cluster: LocalCluster) -> None:
    """The test-only fsync delay (``KRAFTLOG_TEST_FAULTS``, which a local cluster sets) on the
    leader while its 16 KiB segments roll: every fsync of a rolled segment waits, holding the
    partition; every acknowledged record is still read back at its offset, and the node says the
    delay was on."""
    topic = "slow-fsync"
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, 3, configs=TOPIC_CONFIGS)], timeout_ms=30_000)
    wait_until(lambda: _full_isr(cluster, topic), 30, what=f"{topic} fully replicated")
    leader = _partition(cluster, topic)[0]
    node_log = Path(cluster.nodes[leader].log_path)
    cluster.set_fsync_delay(leader, 300)
    try:
        started = time.monotonic()
        acked = _produce(cluster, topic, 0, RECORDS)
        took_s = time.monotonic() - started
        # the first fsync after the change read it (the rolls fsync in the background: bounded wait)
        wait_until(
            lambda: '"delay_ms": 300' in node_log.read_text(encoding="utf-8") or None,
            10,
            what=f"node {leader} to log the fsync delay",
        )
    finally:
        cluster.set_fsync_delay(leader, 0)
    print(f"slow fsync: {len(acked)} records acknowledged in {took_s:.2f} s")
    assert [o for o, _ in acked] == list(range(RECORDS))
    got = _read_all(cluster, topic, RECORDS)
    assert {o: v for o, v in got if o < RECORDS} == dict(acked)
    assert len(list((Path(cluster.nodes[leader].dir) / "data" / f"{topic}-0").glob("*.log"))) >= 3
