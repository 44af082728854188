"""The producer's partitioner returns Kafka's partition for a key (issue 4 §6).

Checked against kafka-python's murmur2 (an independent port of the Java client's ``Utils.murmur2``)
over many random keys, against hash values from Kafka's own Java unit test (``UtilsTest.testMurmur2``),
and against partitions computed by the Java ``DefaultPartitioner`` for 1000 partitions (as quoted by
kafka-python's compatibility test). Sticky partitioning (KIP-480) is checked for its rules.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KpPartitioner
from kafka.partitioner.default import murmur2 as kp_murmur2

from kraftlog.client import DefaultPartitioner, murmur2, partition_for_key
from kraftlog.client.producer._partitioner import to_positive

# UtilsTest.testMurmur2 in Apache Kafka (signed Java ints).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# Partitions the Java client picks among 1000 partitions.
JAVA_PARTITIONS_OF_1000 = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742}


def _kp_partition(key: bytes, n: int) -> int:
    return (kp_murmur2(key) & 0x7FFFFFFF) % n


@pytest.mark.parametrize("key,value", JAVA_MURMUR2.items())
def test_murmur2_matches_kafkas_java_unit_test(key: bytes, value: int) -> None:
    assert murmur2(key) == value


@pytest.mark.parametrize("key,partition", JAVA_PARTITIONS_OF_1000.items())
def test_partition_matches_the_java_client(key: bytes, partition: int) -> None:
    assert partition_for_key(key, 1000) == partition


def test_many_random_keys_agree_with_kafka_python() -> None:
    rng = random.Random(4)
    for _ in range(20_000):
        key = rng.randbytes(rng.randrange(0, 64))
        n = rng.randrange(1, 500)
        assert murmur2(key) & 0xFFFFFFFF == kp_murmur2(key)
        assert partition_for_key(key, n) == _kp_partition(key, n)


@settings(max_examples=examples(500), deadline=None)
@given(key=st.binary(max_size=200), n=st.integers(1, 10_000))
def test_property_agrees_with_kafka_python(key: bytes, n: int) -> None:
    assert partition_for_key(key, n) == _kp_partition(key, n)
    assert -(2**31) <= murmur2(key) < 2**31


def test_kafka_pythons_partitioner_object_agrees_for_keyed_records() -> None:
    class Cluster:
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return set(range(12))

        def available_partitions_for_topic(self, topic):
            return set(range(12))

    kp = KpPartitioner()
    ours = DefaultPartitioner()
    for i in range(2000):
        key = f"user-{i}".encode()
        assert ours.partition("t", key, 12, list(range(12))) == kp.partition("t", key, key, None, None, Cluster())


def test_string_keys_as_the_java_string_serializer_sends_them() -> None:
    # StringSerializer writes UTF-8: the same bytes give the same partition
    for text in ["order-1", "ünïcödé", "日本語", ""]:
        assert partition_for_key(text.encode("utf-8"), 16) == _kp_partition(text.encode("utf-8"), 16)


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5
    with pytest.raises(ValueError):
        partition_for_key(b"x", 0)


# ------------------------------------------------------------------------------ sticky (KIP-480)


def test_no_key_sticks_until_a_new_batch() -> None:
    p = DefaultPartitioner(random.Random(1))
    avail = list(range(8))
    first = p.partition("t", None, 8, avail)
    assert all(p.partition("t", None, 8, avail) == first for _ in range(100))
    p.on_new_batch("t", 8, avail, first)
    second = p.partition("t", None, 8, avail)
    assert second != first
    assert all(p.partition("t", None, 8, avail) == second for _ in range(100))


def test_new_batch_on_another_partition_does_not_move_the_sticky_one() -> None:
    p = DefaultPartitioner(random.Random(2))
    avail = list(range(4))
    sticky = p.partition("t", None, 4, avail)
    p.on_new_batch("t", 4, avail, (sticky + 1) % 4)
    assert p.partition("t", None, 4, avail) == sticky


def test_sticky_only_picks_available_partitions_and_spreads_over_them() -> None:
    p = DefaultPartitioner(random.Random(3))
    avail = [1, 4, 6]
    seen = Counter()
    current = p.partition("t", None, 8, avail)
    for _ in range(3000):
        seen[current] += 1
        p.on_new_batch("t", 8, avail, current)
        nxt = p.partition("t", None, 8, avail)
        assert nxt != current
        current = nxt
    assert set(seen) == set(avail)
    assert min(seen.values()) > 700


def test_sticky_with_one_or_no_available_partition() -> None:
    p = DefaultPartitioner(random.Random(5))
    assert p.partition("t", None, 5, [3]) == 3
    p.on_new_batch("t", 5, [3], 3)
    assert p.partition("t", None, 5, [3]) == 3
    q = DefaultPartitioner(random.Random(6))
    assert 0 <= q.partition("u", None, 5, []) < 5


def test_topics_are_independent_and_keys_ignore_stickiness() -> None:
    p = DefaultPartitioner(random.Random(7))
    a = p.partition("a", None, 50, list(range(50)))
    b = p.partition("b", None, 50, list(range(50)))
    p.on_new_batch("a", 50, list(range(50)), a)
    assert p.partition("b", None, 50, list(range(50))) == b
    assert p.partition("a", b"key", 50, list(range(50))) == partition_for_key(b"key", 50)


def test_shrunk_partition_count_resets_the_sticky_partition() -> None:
    p = DefaultPartitioner(random.Random(8))
    for _ in range(20):
        p.on_new_batch("t", 10, list(range(10)), p.partition("t", None, 10, list(range(10))))
    assert p.partition("t", None, 2, [0, 1]) in (0, 1)
