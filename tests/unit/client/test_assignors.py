"""The classic assignors give Kafka's Java assignments (issue 14).

The scenarios and their expected assignments are those Kafka documents for ``RangeAssignor`` and
``RoundRobinAssignor`` (javadoc examples) and those its own assignor tests expect, including the
rack-aware range cases: brokers on racks ``a, b, c, ...`` in turn, partition *i* of the *k*-th
partition overall on brokers ``k+i .. k+i+rf-1`` (mod brokers), consumers ``consumer0..n``.
"""

from __future__ import annotations

import pytest

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.assignors._assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
    partitions_without_racks,
    sorted_members,
)
from kraftlog.common import coordinator_partition, java_abs, java_string_hash, java_string_key

RACKS = ["a", "b", "c", "d", "e", "f"]


def tps(text: str) -> list[TopicPartition]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, _, p = item.rpartition("-")
        out.append(TopicPartition(topic, int(p)))
    return out


def racks(n: int) -> list[str | None]:
    return [RACKS[i % len(RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def layout(counts: dict[str, int], rf: int, broker_racks: list[str | None]) -> dict[str, list[frozenset[str]]]:
    """Replica racks per partition, laid out as Kafka's assignor tests lay them out."""
    out, next_index = {}, 0
    for topic, n in counts.items():
        out[topic] = [
            frozenset(r for j in range(rf) if (r := broker_racks[(i + j + next_index) % len(broker_racks)]) is not None)
            for i in range(n)
        ]
        next_index += n
    return out


def verify(
    counts: dict[str, int],
    rf: int,
    broker_racks: list[str | None],
    consumer_racks: list[str | None],
    consumer_topics: list[list[str]],
    expected: list[str],
    mismatched: int = -1,
) -> None:
    partitions = layout(counts, rf, broker_racks)
    subs = {
        f"consumer{i}": Subscription(topics, rack_id=rack)
        for i, (topics, rack) in enumerate(zip(consumer_topics, consumer_racks, strict=True))
    }
    got = RangeAssignor().assign(partitions, subs)
    assert {m: sorted(v) for m, v in got.items()} == {f"consumer{i}": sorted(tps(e)) for i, e in enumerate(expected)}
    if mismatched >= 0:
        off_rack = [
            tp
            for i, rack in enumerate(consumer_racks)
            if rack is not None
            for tp in got[f"consumer{i}"]
            if rack not in partitions[tp.topic][tp.partition]
        ]
        assert len(off_rack) == mismatched, off_rack


def verify_non_rack_aware(counts: dict[str, int], consumer_topics: list[list[str]], expected: list[str]) -> None:
    verify(counts, 3, null_racks(3), racks(3), consumer_topics, expected)
    verify(counts, 3, racks(3), null_racks(3), consumer_topics, expected)
    verify(counts, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify(counts, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify(counts, 3, racks(3), ["d", "e", "f"], consumer_topics, expected)
    verify(counts, 3, racks(3), [None, "e", "f"], consumer_topics, expected)


# ============================================================================== Java semantics


def test_java_string_hash_and_order() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_abs(-(2**31)) == 0
    assert coordinator_partition("polygenelubricants", 50) == 0
    # UTF-16 order: a character beyond U+FFFF (a surrogate pair, 0xD83D...) sorts below U+FF21
    assert sorted(["\uff21", "\U0001f600"], key=java_string_key) == ["\U0001f600", "\uff21"]
    assert sorted(["\uff21", "\U0001f600"]) == ["\uff21", "\U0001f600"]  # Python's order differs


def test_group_coordinator_partition_is_kafkas() -> None:
    # abs("my-group".hashCode()) % 50, hashCode computed by hand: s[0]*31^(n-1) + ... + s[n-1]
    h = 0
    for ch in "my-group":
        h = (31 * h + ord(ch)) % 2**32
    h = h - 2**32 if h >= 2**31 else h
    assert coordinator_partition("my-group", 50) == abs(h) % 50
    with pytest.raises(ValueError):
        coordinator_partition("g", 0)


def test_member_order_puts_static_members_first() -> None:
    subs = {
        "a": Subscription(["t"]),
        "b": Subscription(["t"], group_instance_id="y"),
        "c": Subscription(["t"], group_instance_id="x"),
    }
    assert sorted_members(subs) == ["c", "b", "a"]
    subs = {m: Subscription(["t"], group_instance_id=i) for m, i in (("a", "y"), ("b", "z"), ("c", "x"))}
    assert sorted_members(subs) == ["c", "a", "b"]


# ===================================================================================== range


def test_range_javadoc_example() -> None:
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    got = RangeAssignor().assign(partitions_without_racks({"t0": 3, "t1": 3}), subs)
    assert got == {"C0": tps("t0-0, t0-1, t1-0, t1-1"), "C1": tps("t0-2, t1-2")}


def test_range_basics() -> None:
    a = RangeAssignor()
    assert a.assign({}, {"c": Subscription([])}) == {"c": []}
    assert a.assign({}, {"c": Subscription(["missing"])}) == {"c": []}
    only = a.assign(partitions_without_racks({"t": 3, "other": 3}), {"c": Subscription(["t"])})
    assert only == {"c": tps("t-0, t-1, t-2")}
    two = a.assign(partitions_without_racks({"t": 1}), {"c1": Subscription(["t"]), "c2": Subscription(["t"])})
    assert two == {"c1": tps("t-0"), "c2": []}
    mixed = a.assign(
        partitions_without_racks({"topic1": 3, "topic2": 2}),
        {
            "consumer1": Subscription(["topic1"]),
            "consumer2": Subscription(["topic1", "topic2"]),
            "consumer3": Subscription(["topic1"]),
        },
    )
    assert mixed == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-0, topic2-1"),
        "consumer3": tps("topic1-2"),
    }


def test_range_static_members_keep_their_partitions_when_member_ids_change() -> None:
    counts = partitions_without_racks({"topic1": 5, "topic2": 5})
    before = {
        "consumer1": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
        "consumer2": Subscription(["topic1", "topic2"], group_instance_id="instance2"),
        "consumer3": Subscription(["topic1", "topic2"], group_instance_id="instance3"),
    }
    after = {
        "consumer5": before["consumer1"],
        "consumer4": before["consumer2"],
        "consumer0": before["consumer3"],
    }
    a = RangeAssignor()
    by_instance = {before[m].group_instance_id: v for m, v in a.assign(counts, before).items()}
    again = {after[m].group_instance_id: v for m, v in a.assign(counts, after).items()}
    assert (
        by_instance
        == again
        == {
            "instance1": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
            "instance2": tps("topic1-2, topic1-3, topic2-2, topic2-3"),
            "instance3": tps("topic1-4, topic2-4"),
        }
    )


def test_range_rack_aware_uniform_subscription() -> None:
    topics = {"t1": 6, "t2": 7, "t3": 2}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics] * 3
    verify_non_rack_aware(
        topics,
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
    )
    verify(
        topics,
        1,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"],
        0,
    )
    verify(
        topics,
        2,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"],
        1,
    )
    verify(
        topics,
        3,
        racks(2),
        racks(3),
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
        4,
    )


def test_range_rack_aware_non_equal_subscription() -> None:
    topics = {"t1": 6, "t2": 7, "t3": 2}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics, all_topics, ["t1", "t3"]]
    verify_non_rack_aware(
        topics,
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
    )
    verify(
        topics,
        1,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"],
        2,
    )
    verify(
        topics,
        2,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"],
        0,
    )
    verify(
        topics,
        3,
        racks(2),
        racks(3),
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
        2,
    )


def test_range_rack_aware_prefers_co_partitioning() -> None:
    topics = {"t1": 5, "t2": 5, "t3": 5}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics] * 3
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    verify_non_rack_aware(topics, consumer_topics, plain)
    verify(topics, 1, racks(3), racks(3), consumer_topics, plain, 10)
    verify(topics, 2, racks(3), racks(3), consumer_topics, plain, 5)
    verify(topics, 3, racks(2), racks(3), consumer_topics, plain, 3)


def test_range_rack_aware_uniform_partitions_non_equal_subscription() -> None:
    topics = {"t1": 5, "t2": 5, "t3": 5}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics, all_topics, ["t1", "t3"]]
    verify_non_rack_aware(
        topics,
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
    )
    verify(
        topics,
        1,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"],
        9,
    )
    verify(
        topics,
        2,
        racks(3),
        racks(3),
        consumer_topics,
        ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"],
        0,
    )
    verify(
        topics,
        3,
        racks(2),
        racks(3),
        consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
        2,
    )


def test_range_rack_aware_co_partitioned_groups() -> None:
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    consumer_topics = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    consumer_racks: list[str | None] = ["a", "b", "b", "a"]
    plain = ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"]
    verify(topics, 3, racks(2), consumer_racks, consumer_topics, plain)
    verify(topics, 2, racks(2), consumer_racks, consumer_topics, plain, 0)
    verify(
        topics,
        1,
        racks(2),
        consumer_racks,
        consumer_topics,
        ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"],
        0,
    )
    all_topics = ["t1", "t2", "t3", "t4"]
    consumer_topics = [all_topics] * 4
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"]
    verify(topics, 3, racks(2), consumer_racks, consumer_topics, plain)
    verify(topics, 2, racks(2), consumer_racks, consumer_topics, plain, 0)
    verify(
        topics,
        1,
        racks(2),
        consumer_racks,
        consumer_topics,
        ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"],
        0,
    )
    verify(
        topics,
        1,
        racks(3),
        consumer_racks,
        consumer_topics,
        ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"],
        6,
    )


def test_range_co_partitioned_without_broker_racks() -> None:
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    topic_list = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
    verify(
        topics,
        3,
        null_racks(3),
        ["a", "b", "c"],
        [topic_list] * 3,
        [
            "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
            "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
            "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
        ],
    )


# ================================================================================ roundrobin


def test_roundrobin_javadoc_examples() -> None:
    a = RoundRobinAssignor()
    same = a.assign(
        partitions_without_racks({"t0": 3, "t1": 3}),
        {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])},
    )
    assert same == {"C0": tps("t0-0, t0-2, t1-1"), "C1": tps("t0-1, t1-0, t1-2")}
    differing = a.assign(
        partitions_without_racks({"t0": 1, "t1": 2, "t2": 3}),
        {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]), "C2": Subscription(["t0", "t1", "t2"])},
    )
    assert differing == {"C0": tps("t0-0"), "C1": tps("t1-0"), "C2": tps("t1-1, t2-0, t2-1, t2-2")}


def test_roundrobin_mixed_topics_and_static_members() -> None:
    a = RoundRobinAssignor()
    mixed = a.assign(
        partitions_without_racks({"topic1": 3, "topic2": 2}),
        {
            "consumer1": Subscription(["topic1"]),
            "consumer2": Subscription(["topic1", "topic2"]),
            "consumer3": Subscription(["topic1"]),
        },
    )
    assert mixed == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-0, topic2-1"),
        "consumer3": tps("topic1-2"),
    }
    six = partitions_without_racks({"topic1": 3, "topic2": 3})
    static = a.assign(
        six,
        {
            "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"], group_instance_id="instance2"),
        },
    )
    assert static == {
        "consumer-b": tps("topic1-0, topic1-2, topic2-1"),
        "consumer-a": tps("topic1-1, topic2-0, topic2-2"),
    }
    one_static = a.assign(
        six,
        {
            "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"]),
        },
    )
    assert one_static == static
    persistent = {
        f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}") for i in (1, 2, 3)
    }
    for dynamic in ("consumer4", "consumer5"):
        got = a.assign(six, {**persistent, dynamic: Subscription(["topic1", "topic2"])})
        assert got == {
            "consumer1": tps("topic1-0, topic2-1"),
            "consumer2": tps("topic1-1, topic2-2"),
            "consumer3": tps("topic1-2"),
            dynamic: tps("topic2-0"),
        }


def test_roundrobin_static_members_after_member_ids_change() -> None:
    a = RoundRobinAssignor()
    counts = partitions_without_racks({"topic1": 5, "topic2": 5})
    expected = {
        "instance1": tps("topic1-0, topic1-3, topic2-1, topic2-4"),
        "instance2": tps("topic1-1, topic1-4, topic2-2"),
        "instance3": tps("topic1-2, topic2-0, topic2-3"),
    }
    for ids in (("consumer1", "consumer2", "consumer3"), ("consumer9", "consumer0", "consumer5")):
        subs = {m: Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}") for i, m in enumerate(ids, 1)}
        got = a.assign(counts, subs)
        assert {subs[m].group_instance_id: v for m, v in got.items()} == expected


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_every_partition_once_and_only_to_subscribers(assignor: RangeAssignor | RoundRobinAssignor) -> None:
    import random

    rng = random.Random(7)
    for _ in range(200):
        topics = {f"t{i}": rng.randint(0, 9) for i in range(rng.randint(1, 5))}
        subs = {
            f"m{j}": Subscription(
                rng.sample(sorted(topics), rng.randint(0, len(topics))), rack_id=rng.choice([None, "a", "b"])
            )
            for j in range(rng.randint(1, 6))
        }
        broker_racks = [rng.choice(["a", "b", "c"]) for _ in range(4)]
        got = assignor.assign(layout(topics, 2, broker_racks), subs)
        owned = [tp for v in got.values() for tp in v]
        assert len(owned) == len(set(owned))
        wanted = {
            TopicPartition(t, p)
            for t, n in topics.items()
            for p in range(n)
            if any(t in s.topics for s in subs.values())
        }
        assert set(owned) == wanted
        for m, v in got.items():
            assert all(tp.topic in subs[m].topics for tp in v)
