"""The sticky and cooperative-sticky assignors (issue 14): Kafka's expectations and its invariants.

Exact expectations are those Kafka's own assignor tests state; the randomized tests hold every
assignment to what Kafka's tests verify of any: valid (each subscribed partition once, only to a
subscriber), balanced (sizes within one when subscriptions are equal), sticky (a member keeps what
it owned up to its quota), and, for cooperative-sticky, nothing handed over before it is revoked.
"""

from __future__ import annotations

import random

import pytest

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.assignors._assignors import Subscription, partitions_without_racks
from kraftlog.client.assignors._sticky import (
    CooperativeStickyAssignor,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kraftlog.client.assignors._sticky_common import MemberData
from kraftlog.common import java_string_hash
from kraftlog.common._java import JavaHashTable, java_hashmap_order


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


# ======================================================================== Java's hash order


@pytest.mark.parametrize(
    ("inserted", "java_order"),
    [  # printed by java.util.HashMap.keySet() after these puts (OpenJDK 17)
        (
            "m-763-x,m-884,m-525,m-918-x,m-93-x,m-502,m-292,m-32,m-170-x,m-209-x",
            "m-918-x,m-93-x,m-884,m-502,m-170-x,m-525,m-32,m-763-x,m-292,m-209-x",
        ),
        (
            "m-226,m-243-x,m-30-x,m-387,m-730,m-430,m-217,m-212,m-713,m-379-x,m-823,m-975,m-807-x,m-157,"
            "m-193,m-558,m-160-x,m-713,m-261-x,m-897-x,m-552,m-94-x,m-798",
            "m-897-x,m-730,m-975,m-226,m-798,m-430,m-212,m-157,m-387,m-552,m-160-x,m-713,m-823,m-217,"
            "m-558,m-261-x,m-94-x,m-243-x,m-807-x,m-379-x,m-30-x,m-193",
        ),
        ("m-795,m-679-x,m-228-x,m-323,m-332-x,m-923-x", "m-323,m-795,m-679-x,m-923-x,m-228-x,m-332-x"),
    ],
)
def test_hash_order_is_javas(inserted: str, java_order: str) -> None:
    assert java_hashmap_order(inserted.split(","), java_string_hash) == java_order.split(",")


def test_hash_table_keeps_order_through_removals_and_resizes() -> None:
    table = JavaHashTable(java_string_hash, [f"k{i}" for i in range(40)])
    for i in range(0, 40, 3):
        table.remove(f"k{i}")
    table.add("k0")
    keys = list(table)
    assert sorted(keys) == sorted({f"k{i}" for i in range(40) if i % 3} | {"k0"})
    assert len(table) == len(keys) and "k0" in table and "k3" not in table


# ============================================================================== user data


def test_sticky_user_data_round_trip_and_bytes() -> None:
    data = encode_sticky_user_data([tp("t", 0), tp("t", 2)], 5)
    # [1 topic] "t" [2 partitions] 0 2, generation 5: INT32 counts, INT16 string length, big-endian
    assert data == bytes.fromhex("0000000100017400000002000000000000000200000005")
    assert decode_sticky_user_data(data) == MemberData([tp("t", 0), tp("t", 2)], 5)
    v0 = encode_sticky_user_data([tp("t", 1)], None)
    assert decode_sticky_user_data(v0) == MemberData([tp("t", 1)], None)
    assert decode_sticky_user_data(b"\x00\x01") == MemberData([], -1)  # unreadable: Java's fallback
    assert decode_sticky_user_data(None) is None and decode_sticky_user_data(b"") is None


# ============================================================================ exact cases


def _v2(topics: list[str], owned: list[TopicPartition], generation: int) -> Subscription:
    return Subscription(topics, owned_partitions=owned, generation_id=generation)


@pytest.mark.parametrize("assignor", [StickyAssignor, CooperativeStickyAssignor])
def test_partition_claimed_twice_in_one_generation_goes_to_neither(assignor: type) -> None:
    owned = {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 0), tp("topic", 2)],
        "consumer3": [],
    }
    subs = {  # as a v2+ subscription carries it: owned partitions, generation and the sticky user data
        m: Subscription(["topic"], encode_sticky_user_data(o, 1), o, generation_id=1) for m, o in owned.items()
    }
    # topic-0 goes to consumer3, except with cooperative-sticky: both claimants must revoke it first
    taker = [tp("topic", 0)] if assignor is StickyAssignor else []
    got = assignor().assign(partitions_without_racks({"topic": 3}), subs)
    assert got == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": taker}
    got = assignor().assign(partitions_without_racks({"topic": 4}), subs)
    assert got == {
        "consumer1": [tp("topic", 1), tp("topic", 3)],
        "consumer2": [tp("topic", 2)],
        "consumer3": taker,
    }


def test_cooperative_withholds_partitions_until_revoked() -> None:
    parts = partitions_without_racks({"t": 6})
    first = {"a": _v2(["t"], [tp("t", p) for p in range(6)], 3)}
    subs = {**first, "b": _v2(["t"], [], -1)}
    round1 = CooperativeStickyAssignor().assign(parts, subs)
    assert round1["a"] == [tp("t", p) for p in range(3)] and round1["b"] == []
    subs = {"a": _v2(["t"], round1["a"], 4), "b": _v2(["t"], [], 4)}
    round2 = CooperativeStickyAssignor().assign(parts, subs)
    assert round2 == {"a": [tp("t", p) for p in range(3)], "b": [tp("t", p) for p in range(3, 6)]}


# ============================================================================= invariants


def _random_group(rng: random.Random, equal: bool) -> tuple[dict[str, list[frozenset[str]]], dict[str, Subscription]]:
    topics = {f"t{i}": rng.randint(1, 9) for i in range(rng.randint(1, 4))}
    names = sorted(topics)
    common = rng.sample(names, rng.randint(1, len(names)))
    subs = {}
    for j in range(rng.randint(1, 7)):
        chosen = common if equal else rng.sample(names, rng.randint(1, len(names)))
        subs[f"consumer-{j}-{rng.getrandbits(16):04x}"] = Subscription(chosen)
    return partitions_without_racks(topics), subs


def _check_valid(parts: dict[str, list[frozenset[str]]], subs: dict[str, Subscription], got: dict) -> None:
    owned = [p for v in got.values() for p in v]
    assert len(owned) == len(set(owned))
    wanted = {
        tp(t, p) for t, racks in parts.items() for p in range(len(racks)) if any(t in s.topics for s in subs.values())
    }
    assert set(owned) == wanted
    for member, v in got.items():
        assert all(p.topic in subs[member].topics for p in v)


@pytest.mark.parametrize("equal", [True, False])
def test_sticky_rounds_stay_valid_balanced_and_sticky(equal: bool) -> None:
    rng = random.Random(11 if equal else 12)
    for _ in range(60):
        parts, subs = _random_group(rng, equal)
        got = StickyAssignor().assign(parts, subs)
        _check_valid(parts, subs, got)
        if equal:
            sizes = [len(v) for v in got.values()]
            assert max(sizes) - min(sizes) <= 1
        # next generation: one member leaves, a new one joins; everyone reports what it had
        leaving = rng.choice(sorted(subs))
        history = {m: encode_sticky_user_data(got[m], 1) for m in subs if m != leaving}
        nxt = {m: Subscription(subs[m].topics, user_data=history[m]) for m in history}
        nxt["newcomer"] = Subscription(subs[leaving].topics)
        again = StickyAssignor().assign(parts, nxt)
        _check_valid(parts, nxt, again)
        if equal:
            total = sum(len(v) for v in parts.values())
            quota = total // len(nxt)
            for m in history:  # a stayer keeps at least min(owned, floor quota) of what it owned
                assert len(set(again[m]) & set(got[m])) >= min(len(got[m]), quota)


def test_cooperative_rounds_converge_without_double_ownership() -> None:
    rng = random.Random(5)
    for _ in range(40):
        parts, subs = _random_group(rng, rng.random() < 0.5)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in subs}
        generation = 1
        for _round in range(4):  # members revoke what they lost, then rejoin with what they kept
            current = {m: _v2(subs[m].topics, owned[m], generation) for m in subs}
            got = CooperativeStickyAssignor().assign(parts, current)
            for m, v in got.items():
                for p in v:  # never assigned while another member still owns it
                    assert all(p not in owned[o] for o in subs if o != m)
            owned = {m: list(v) for m, v in got.items()}
            generation += 1
        _check_valid(parts, subs, owned)


# ============================================================ where Java fails, this does not


@pytest.mark.parametrize("assignor", [StickyAssignor, CooperativeStickyAssignor])
def test_previous_owner_that_cannot_take_back_is_passed_over(assignor: type) -> None:
    """Java throws NullPointerException here (m1 owned t0-0 in an older generation, then switched
    to t1 and was set aside): the rebalance must still produce a valid assignment."""
    parts = partitions_without_racks({"t0": 2, "t1": 1})
    subs = {
        "m0": _v2(["t0"], [tp("t0", 0), tp("t0", 1)], 2),
        "m1": _v2(["t1"], [tp("t0", 0)], 1),
        "m2": _v2(["t0"], [], 1),
    }
    if assignor is StickyAssignor:
        subs = {
            m: Subscription(s.topics, encode_sticky_user_data(s.owned_partitions, s.generation_id))
            for m, s in subs.items()
        }
    got = assignor().assign(parts, subs)
    if assignor is StickyAssignor:
        _check_valid(parts, subs, got)
    else:  # cooperative-sticky may withhold what changes owner, but never doubles or strays
        held = [p for v in got.values() for p in v]
        assert len(held) == len(set(held))
        assert all(p.topic in subs[m].topics for m, v in got.items() for p in v)
    assert got["m1"] == [tp("t1", 0)]
    assert all(p.topic == "t0" for m in ("m0", "m2") for p in got[m])


@pytest.mark.parametrize("owned", [[tp("a", 3), tp("b", 0)], [tp("a", -1), tp("a", 0)]])
def test_owned_partitions_past_the_topic_are_ignored(owned: list[TopicPartition]) -> None:
    """Java gave b-0 to two members (and a nonexistent a-3 to one), or failed, on these."""
    parts = partitions_without_racks({"a": 2, "b": 2, "c": 1})
    subs = {"m1": _v2(["a", "b", "c"], owned, 4), "m2": _v2(["a", "b"], [tp("a", 0)], 4)}
    for subscriptions in (subs, {m: _v2(["a", "b", "c"], s.owned_partitions, 4) for m, s in subs.items()}):
        _check_valid(parts, subscriptions, StickyAssignor().assign(parts, subscriptions))


def test_subscription_topics_must_not_be_one_string() -> None:
    with pytest.raises(TypeError):
        Subscription("ab")
