"""Tests of replica placement (`metadata_log._placement`): Kafka's AdminUtils algorithm.

Fixed expectations come from the seed notes (§2.3.5.3) and from Kafka's own published test cases;
the rest are properties (distinct replicas, even leaders and replicas, rack spread) checked with
hypothesis over broker counts, replication factors and partition counts.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.metadata_log._placement import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementError,
    RackAwareMode,
    assign_replicas,
    assign_replicas_rack_aware,
    assign_replicas_rack_unaware,
    expand_assignment,
    placement_brokers,
    rack_alternated_broker_list,
)
from kraftlog.metadata_log.image import BrokerRegistration, ClusterImage

# ---- fixed examples


def test_seed_worked_example() -> None:
    # seed 002 §2.3.5.3: brokers [1,2,3,4], partition 0, 4 replicas, start index 2, shift 2
    assert assign_replicas([1, 2, 3, 4], 1, 4, start_index=2, replica_shift=2) == {0: [3, 2, 4, 1]}
    assert assign_replicas_rack_unaware([4, 3, 2, 1], 1, 4, start_index=2, replica_shift=2) == {0: [3, 2, 4, 1]}


def test_kafka_rack_unaware_reference_assignment() -> None:
    # Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas(range(5), 10, 3, start_index=0) == expected


def test_kafka_rack_alternated_list_and_rack_aware_reference_assignment() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(racks, 7, 3, start_index=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_alternated_list_interleaves_uneven_racks() -> None:
    assert rack_alternated_broker_list({0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}) == [0, 3, 4, 1, 5, 2]


def test_start_index_alone_fixes_the_shift_like_kafka() -> None:
    assert assign_replicas(range(4), 8, 3, start_index=1) == assign_replicas(
        range(4), 8, 3, start_index=1, replica_shift=1
    )


def test_shift_grows_every_n_partitions() -> None:
    got = assign_replicas(range(3), 6, 2, start_index=0, replica_shift=0)
    # partitions 0..2: follower right after the leader; 3..5: two places after
    assert got == {0: [0, 1], 1: [1, 2], 2: [2, 0], 3: [0, 2], 4: [1, 0], 5: [2, 1]}


def test_random_start_comes_from_the_injected_rng_only() -> None:
    a = assign_replicas(range(5), 10, 3, random.Random(7))
    b = assign_replicas(range(5), 10, 3, random.Random(7))
    assert a == b
    rng = random.Random(7)
    start, shift = rng.randrange(5), rng.randrange(5)
    assert a == assign_replicas(range(5), 10, 3, start_index=start, replica_shift=shift)
    with pytest.raises(ValueError, match="rng"):
        assign_replicas(range(5), 10, 3)


def test_start_partition_id_numbers_from_there_and_bumps_the_shift_only_from_there() -> None:
    # Kafka's loop: the shift grows at each multiple of n it visits, starting at start_partition_id
    whole = assign_replicas(range(4), 10, 2, start_index=3)
    tail = assign_replicas(range(4), 4, 2, start_index=3, start_partition_id=6)
    assert sorted(tail) == [6, 7, 8, 9]
    assert tail != {p: whole[p] for p in range(6, 10)}  # the bump at partition 4 was not visited
    # passing the shift partition 5 had (3 + 1) continues the walk exactly
    tail = assign_replicas(range(4), 4, 2, start_index=3, replica_shift=4, start_partition_id=6)
    assert tail == {p: whole[p] for p in range(6, 10)}


def test_single_broker() -> None:
    assert assign_replicas([7], 3, 1, random.Random(0)) == {0: [7], 1: [7], 2: [7]}
    assert assign_replicas({7: "r"}, 2, 1, random.Random(0)) == {0: [7], 1: [7]}


# ---- errors


def test_errors_carry_kafka_codes() -> None:
    with pytest.raises(InvalidReplicationFactorError) as err:
        assign_replicas(range(3), 1, 4, random.Random(0))
    assert (err.value.error_code, err.value.error_name) == (38, "INVALID_REPLICATION_FACTOR")
    assert "larger than available brokers: 3" in str(err.value)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(range(3), 1, 0, random.Random(0))
    with pytest.raises(InvalidPartitionsError) as err2:
        assign_replicas(range(3), 0, 1, random.Random(0))
    assert (err2.value.error_code, err2.value.error_name) == (37, "INVALID_PARTITIONS")
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([], 1, 1, random.Random(0))
    assert issubclass(InvalidPartitionsError, PlacementError)
    assert issubclass(PlacementError, ValueError)


def test_mixed_racks_refused_unless_rack_awareness_is_relaxed() -> None:
    brokers = {0: "a", 1: None, 2: "b"}
    with pytest.raises(InvalidReplicaAssignmentError, match="Not all brokers have rack"):
        assign_replicas(brokers, 3, 2, start_index=0)
    assert InvalidReplicaAssignmentError.error_code == 39
    unaware = assign_replicas(range(3), 3, 2, start_index=0)
    assert assign_replicas(brokers, 3, 2, start_index=0, rack_aware_mode=RackAwareMode.SAFE) == unaware
    assert assign_replicas(brokers, 3, 2, start_index=0, rack_aware_mode=RackAwareMode.DISABLED) == unaware
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_replicas_rack_aware(brokers, 3, 2, start_index=0, replica_shift=0)


def test_disabled_mode_ignores_racks() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert assign_replicas(racks, 4, 2, start_index=0, rack_aware_mode=RackAwareMode.DISABLED) == assign_replicas(
        range(4), 4, 2, start_index=0
    )


def test_placement_brokers_skips_fenced_and_shutting_down() -> None:
    def reg(b: int, fenced: bool = False, shutdown: bool = False) -> BrokerRegistration:
        return BrokerRegistration(b, f"i{b}", 1, rack=f"r{b % 2}", fenced=fenced, in_controlled_shutdown=shutdown)

    cluster = ClusterImage({0: reg(0), 1: reg(1, fenced=True), 2: reg(2, shutdown=True), 3: reg(3)})
    assert placement_brokers(cluster) == {0: "r0", 3: "r1"}
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(placement_brokers(cluster), 1, 3, random.Random(0))
    # registrations are accepted directly as well
    assert assign_replicas([reg(0), reg(3)], 2, 2, start_index=0) == {0: [0, 3], 1: [3, 0]}


# ---- expansion


def test_expand_continues_as_kafka_add_partitions_not_as_placing_all_at_once() -> None:
    # Kafka's addPartitions: start index = position of partition 0's leader in the id-sorted
    # brokers, the replica shift fixed to that same index, numbering from the existing count. With
    # more partitions than brokers the shift differs from what one walk over all 6 would have had
    # (that walk bumps it at partition 3): p4 = [1, 2, 0], not [1, 0, 2].
    existing = assign_replicas([0, 1, 2], 4, 3, start_index=0)
    assert expand_assignment(existing, 6, [0, 1, 2]) == {4: [1, 2, 0], 5: [2, 0, 1]}
    assert assign_replicas([0, 1, 2], 6, 3, start_index=0)[4] == [1, 0, 2]


def test_expand_rack_aware_takes_the_index_in_the_id_sorted_list() -> None:
    # Kafka finds partition 0's leader (2) in the id-sorted list (index 2) and walks the rack-
    # alternated list [0, 2, 1, 3] from that index: p2 leads on broker 0, p3 on broker 2.
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert expand_assignment({0: [2, 1], 1: [1, 3]}, 4, racks) == {2: [0, 3], 3: [2, 0]}


@pytest.mark.parametrize("num_brokers", [2, 3, 4, 5])
def test_expand_is_the_fixed_start_walk_from_partition_zero(num_brokers: int) -> None:
    brokers = [100 + b for b in range(num_brokers)]
    rf = min(3, num_brokers)
    for start in range(num_brokers):
        existing = assign_replicas(brokers, 7, rf, start_index=start)
        got = expand_assignment(existing, 10, brokers, random.Random(99))
        leader_index = brokers.index(existing[0][0])
        assert got == assign_replicas(brokers, 3, rf, start_index=leader_index, start_partition_id=7)


def test_expand_when_partition_zero_leader_is_gone_uses_next_larger_id() -> None:
    got = expand_assignment({0: [2, 0], 1: [3, 1]}, 4, [0, 1, 3, 4])
    assert got == assign_replicas([0, 1, 3, 4], 2, 2, start_index=2, start_partition_id=2)
    got = expand_assignment({0: [9, 0]}, 2, [0, 1, 3])  # no larger id: wrap to index 0
    assert got == assign_replicas([0, 1, 3], 1, 2, start_index=0, start_partition_id=1)


def test_expand_errors() -> None:
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        expand_assignment({0: [0], 1: [1]}, 2, range(3))
    with pytest.raises(InvalidReplicaAssignmentError):
        expand_assignment({1: [0]}, 3, range(3))
    with pytest.raises(InvalidReplicationFactorError):
        expand_assignment({0: [0, 1, 2]}, 2, range(2))


# ---- properties


@st.composite
def placements(draw: st.DrawFn) -> tuple[int, int, int, int, int]:
    n = draw(st.integers(1, 9))
    rf = draw(st.integers(1, n))
    k = draw(st.integers(1, 4))
    start = draw(st.integers(0, n - 1))
    shift = draw(st.integers(0, n - 1))
    return n, rf, k, start, shift


@settings(max_examples=examples(150), deadline=None)
@given(placements(), st.integers(0, 3))
def test_rack_unaware_properties(case: tuple[int, int, int, int, int], offset: int) -> None:
    n, rf, k, start, shift = case
    brokers = [10 + 3 * i for i in range(n)]
    got = assign_replicas(brokers, n * k, rf, start_index=start, replica_shift=shift)
    assert sorted(got) == list(range(n * k))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {k} and len(leaders) == n  # exactly even for n*k partitions
    per_broker = Counter(b for r in got.values() for b in r)
    assert set(per_broker.values()) == {k * rf}
    # any partition count: leaders differ by at most one
    partial = assign_replicas(brokers, n * k + offset, rf, start_index=start, replica_shift=shift)
    counts = Counter(r[0] for r in partial.values())
    assert max(counts.values()) - min(counts.get(b, 0) for b in brokers) <= 1


@st.composite
def rack_cases(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int, int]:
    num_racks = draw(st.integers(1, 4))
    n = draw(st.integers(num_racks, 10))
    racks = {b: f"rack{draw(st.integers(0, num_racks - 1))}" for b in range(n)}
    for r in range(num_racks):  # every rack has at least one broker
        racks[r] = f"rack{r}"
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 3 * n))
    start = draw(st.integers(0, n - 1))
    shift = draw(st.integers(0, n - 1))
    return racks, rf, partitions, start, shift


@settings(max_examples=examples(150), deadline=None)
@given(rack_cases())
def test_rack_aware_properties(case: tuple[dict[int, str], int, int, int, int]) -> None:
    racks, rf, partitions, start, shift = case
    num_racks = len(set(racks.values()))
    got = assign_replicas(racks, partitions, rf, start_index=start, replica_shift=shift)
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        # distinct racks while possible; the first min(rf, racks) replicas cover distinct racks
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)
        assert len({racks[b] for b in replicas[:num_racks]}) == min(rf, num_racks)
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in racks) <= 1


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 100))
def test_rack_aware_balanced_racks_spread_evenly(num_racks: int, per_rack: int, seed: int) -> None:
    racks = {b: f"r{b % num_racks}" for b in range(num_racks * per_rack)}
    n = len(racks)
    rf = min(num_racks, n)
    got = assign_replicas(racks, 2 * n, rf, random.Random(seed))
    assert set(Counter(r[0] for r in got.values()).values()) == {2}
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == rf


@settings(max_examples=examples(80), deadline=None)
@given(placements(), st.integers(1, 12), st.integers(1, 12))
def test_expand_is_kafkas_fixed_start_walk(case: tuple[int, int, int, int, int], have: int, more: int) -> None:
    n, rf, _k, start, _shift = case
    brokers = list(range(0, 2 * n, 2))
    whole = assign_replicas(brokers, have + more, rf, start_index=start)
    got = expand_assignment({p: whole[p] for p in range(have)}, have + more, brokers)
    assert got == assign_replicas(brokers, more, rf, start_index=start, start_partition_id=have)
    if have <= n:  # the walk over all partitions made no shift bump below `have`: the same result
        assert got == {p: whole[p] for p in range(have, have + more)}
