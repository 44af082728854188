"""The group checker of ``kraftlog chaos run --workload group`` (issue 14): pure, no cluster."""

from __future__ import annotations

import argparse

import pytest

from kraftlog.cli._chaos import add_parser, run
from kraftlog.cli._common import UserError
from kraftlog.deploy.chaos import (
    Ack,
    AssignmentEvent,
    CommitRecord,
    ConsumedRecord,
    Holding,
    check_group,
    commit_regressions,
    consumed_missing,
    double_owners,
    encode_value,
    final_commit_regressions,
    overlapping_owners,
    ownership_intervals,
)


def _consumed(partition: int, offset: int, seq: int, member: str = "m0") -> ConsumedRecord:
    return ConsumedRecord(member, partition, offset, encode_value(partition, seq))


def _commit(partition: int, offset: int, sent: float, acked: float, member: str = "a", gen: int = 1) -> CommitRecord:
    return CommitRecord("c-" + member, member, gen, {partition: offset}, sent, acked)


def _assigned(member: str, gen: int, *partitions: int) -> AssignmentEvent:
    return AssignmentEvent("c-" + member, member, gen, "assigned", tuple(partitions), 0.0)


# ------------------------------------------------------------------ consumed_missing


def test_every_acknowledged_record_consumed_once_is_clean() -> None:
    acks = [Ack(p, s, s - 1, 0.0) for p in (0, 1) for s in range(1, 4)]
    consumed = [_consumed(p, s - 1, s, member=f"m{p}") for p in (0, 1) for s in range(1, 4)]
    assert consumed_missing(acks, consumed) == (0, 0, [])


def test_missing_and_duplicates_are_counted_apart() -> None:
    acks = [Ack(0, 1, 0, 0.0), Ack(0, 2, 1, 0.0), Ack(1, 1, 0, 0.0)]
    consumed = [
        _consumed(0, 0, 1, "m0"),
        _consumed(0, 0, 1, "m1"),  # redelivered after a rebalance: at least once
        _consumed(0, 1, 2, "m1"),
        _consumed(0, 2, 3, "m1"),  # not acknowledged (its produce failed): neither missing nor duplicate
        _consumed(0, 3, 2, "m1"),  # the producer wrote sequence 2 twice: the log's duplicate, no redelivery
        ConsumedRecord("m1", 1, 1, b"foreign"),
        ConsumedRecord("m1", 1, 2, None),
        ConsumedRecord("m0", 1, 2, None),  # redelivered too
        _consumed(1, 3, 9),
    ]
    missing, duplicates, examples = consumed_missing(acks, consumed)
    assert (missing, duplicates) == (1, 2)
    assert examples == ["partition 1 sequence 1 offset 0"]


def test_a_record_consumed_from_another_partition_does_not_count() -> None:
    acks = [Ack(0, 1, 0, 0.0)]
    assert consumed_missing(acks, [ConsumedRecord("m", 1, 0, encode_value(0, 1))])[0] == 1


# ------------------------------------------------------------------ commit regressions


def test_increasing_commits_across_members_are_clean() -> None:
    commits = [
        _commit(0, 10, 1.0, 1.1, "a", 1),
        _commit(0, 20, 2.0, 2.1, "a", 1),
        _commit(0, 20, 3.0, 3.1, "b", 2),  # the new owner starts from the committed offset
        _commit(0, 35, 4.0, 4.1, "b", 2),
        _commit(1, 5, 1.0, 1.2, "c", 2),
    ]
    assert commit_regressions(commits) == (0, [])


def test_a_commit_below_an_earlier_acknowledged_one_is_a_regression() -> None:
    commits = [
        _commit(0, 20, 1.0, 1.1, "a", 1),
        _commit(0, 30, 2.0, 2.1, "b", 2),
        _commit(0, 25, 3.0, 3.1, "a", 1),  # a zombie of generation 1, accepted after the handover
        _commit(1, 7, 2.0, 2.1),
    ]
    count, examples = commit_regressions(commits)
    assert count == 1
    assert examples == ["partition 0: a@1 committed 25 after b@2 had committed 30"]


def test_overlapping_commits_are_not_ordered() -> None:
    # b's higher commit was acknowledged while a's lower one was in flight: either may land first
    commits = [_commit(0, 30, 1.0, 1.5, "b", 2), _commit(0, 20, 1.2, 2.0, "a", 1)]
    assert commit_regressions(commits)[0] == 0
    # but a commit sent after the acknowledgement is ordered after it
    assert commit_regressions([_commit(0, 30, 1.0, 1.5, "b", 2), _commit(0, 20, 1.6, 2.0, "a", 1)])[0] == 1


def test_every_later_regressing_commit_counts() -> None:
    commits = [_commit(0, 50, 0.0, 1.0), _commit(0, 10, 2.0, 2.1), _commit(0, 40, 3.0, 3.1), _commit(0, 50, 4.0, 4.1)]
    assert commit_regressions(commits)[0] == 2


def test_final_committed_offsets_below_the_highest_acknowledged_commit() -> None:
    commits = [_commit(0, 10, 0.0, 1.0), _commit(0, 30, 2.0, 3.0), _commit(1, 5, 0.0, 1.0), _commit(2, 4, 0.0, 1.0)]
    count, examples = final_commit_regressions(commits, {0: 30, 1: 4})
    assert count == 2
    assert examples == [
        "partition 1: final committed offset 4 below acknowledged 5",
        "partition 2: final committed offset -1 below acknowledged 4",
    ]
    assert final_commit_regressions(commits, {0: 31, 1: 5, 2: 4}) == (0, [])


# ------------------------------------------------------------------ double owners


def test_handover_between_generations_is_not_a_double_owner() -> None:
    events = [
        _assigned("a", 1, 0, 1, 2),
        AssignmentEvent("c-a", "a", 1, "revoked", (0, 1, 2), 1.0),
        _assigned("a", 2, 0, 1),
        _assigned("b", 2, 2),
        AssignmentEvent("c-a", "a", 2, "lost", (0, 1), 2.0),
        _assigned("b", 3, 0, 1, 2),
    ]
    assert double_owners(events) == (0, 3, [])


def test_two_members_with_one_partition_in_one_generation_count_once_per_partition() -> None:
    events = [
        _assigned("a", 4, 0, 1),
        _assigned("b", 4, 1, 2),
        _assigned("c", 4, 1),
        _assigned("c", 5, 0),
        _assigned("a", 5, 0),
        _assigned("a", 6, 1),
        AssignmentEvent("c-x", "x", -1, "assigned", (1,), 0.0),  # generation unknown: skipped
        _assigned("b", 4, 2),  # the same member twice in a generation (a cooperative second round)
    ]
    count, generations, examples = double_owners(events)
    assert (count, generations) == (2, 3)
    assert examples == ["generation 4 partition 1: ['a', 'b', 'c']", "generation 5 partition 0: ['a', 'c']"]


# ------------------------------------------------------------------ ownership intervals


def _ev(consumer: str, kind: str, at: float, *partitions: int, gen: int = 1) -> AssignmentEvent:
    return AssignmentEvent(consumer, consumer + "-id", gen, kind, tuple(partitions), at)


def test_intervals_follow_whole_and_incremental_assignments() -> None:
    events = [
        _ev("a", "assigned", 1.0, 0, 1, 2),
        _ev("a", "revoked", 2.0, 2, gen=2),  # KIP-848: one partition moves away
        _ev("a", "assigned", 2.1, 0, 1, gen=2),  # the whole assignment again: 0 and 1 go on
        _ev("a", "lost", 3.0, 0, 1, gen=2),
        _ev("a", "assigned", 4.0, 1, gen=3),
        _ev("a", "closed", 5.0, gen=-1),
        _ev("b", "assigned", 6.0, 2),  # never given up: still held at the end
    ]
    got = sorted((h.consumer, h.partition, h.start_s, h.end_s, h.ended_by) for h in ownership_intervals(events))
    assert got == [
        ("a", 0, 1.0, 3.0, "lost"),
        ("a", 1, 1.0, 3.0, "lost"),
        ("a", 1, 4.0, 5.0, "closed"),
        ("a", 2, 1.0, 2.0, "revoked"),
        ("b", 2, 6.0, float("inf"), "open"),
    ]


def test_an_assignment_that_no_longer_lists_a_partition_ends_it_as_revoked() -> None:
    holdings = ownership_intervals([_ev("a", "assigned", 1.0, 0, 1), _ev("a", "assigned", 2.0, 1)])
    assert Holding("a", "a-id", 1, 0, 1.0, 2.0, "revoked") in holdings


def test_a_revoke_after_a_handover_is_clean() -> None:
    events = [
        _ev("a", "assigned", 1.0, 0, 1),
        _ev("a", "revoked", 2.0, 1),
        _ev("b", "assigned", 2.5, 1, gen=2),
        _ev("b", "revoked", 4.0, 1, gen=2),
        _ev("a", "assigned", 4.0, 0, 1, gen=3),  # touching intervals do not overlap
    ]
    assert overlapping_owners(events) == (0, 0, [], [])


def test_an_owner_assigned_before_the_old_one_revoked_overlaps() -> None:
    events = [
        _ev("a", "assigned", 1.0, 0),
        _ev("b", "assigned", 2.0, 0, gen=2),
        _ev("a", "revoked", 3.0, 0),
        _ev("c", "assigned", 3.5, 0, gen=3),  # overlaps b (still holding): b never gave it up
    ]
    strict, lost, shown, lost_shown = overlapping_owners(events)
    assert (strict, lost, lost_shown) == (2, 0, [])
    assert shown[0] == "partition 0: a (a-id@1) 1.000-3.000 revoked and b (b-id@2) 2.000-end open"


def test_overlaps_with_a_lost_owner_are_counted_apart() -> None:
    events = [
        _ev("a", "assigned", 1.0, 0, 1),
        _ev("b", "assigned", 2.0, 0, gen=5),  # a was fenced; it hears so at its next poll
        _ev("a", "lost", 2.5, 0, 1),
        _ev("b", "revoked", 6.0, 0, gen=5),
        _ev("c", "assigned", 3.0, 1, gen=6),
        _ev("c", "revoked", 4.0, 1, gen=0),  # told "revoked" after the member was fenced: lost
        _ev("d", "assigned", 3.9, 1, gen=7),
        _ev("d", "closed", 9.0),
    ]
    strict, lost, shown, lost_shown = overlapping_owners(events)
    assert (strict, lost, shown) == (0, 2, [])
    assert lost_shown[0] == "partition 0: a (a-id@1) 1.000-2.500 lost and b (b-id@5) 2.000-6.000 revoked"


def test_overlaps_within_the_clock_resolution_are_not_ordered() -> None:
    events = [_ev("a", "assigned", 1.0, 0), _ev("a", "revoked", 2.0005, 0), _ev("b", "assigned", 2.0, 0)]
    assert overlapping_owners(events, tolerance_s=0.001)[0] == 0
    assert overlapping_owners(events, tolerance_s=0.0001)[0] == 1


def test_one_consumer_never_overlaps_itself() -> None:
    # a member thread runs one consumer at a time: a late "closed" after its next assignment is its own
    events = [_ev("a", "assigned", 1.0, 0), _ev("a", "closed", 2.0), _ev("a", "assigned", 1.5, 0, gen=2)]
    assert overlapping_owners(events)[0] == 0


# ------------------------------------------------------------------ the whole report


def test_check_group_sums_up() -> None:
    acks = [Ack(0, s, s - 1, 0.0) for s in range(1, 5)]
    consumed = [_consumed(0, s - 1, s) for s in range(1, 5)] + [_consumed(0, 3, 4, "m1")]
    commits = [_commit(0, 2, 0.0, 1.0), _commit(0, 4, 2.0, 3.0, "b", 2)]
    events = [
        _assigned("a", 1, 0),
        AssignmentEvent("c-a", "a", 1, "revoked", (0,), 0.5),
        AssignmentEvent("c-b", "b", 2, "assigned", (0,), 1.0),
    ]
    report = check_group(acks, consumed, commits, events, {0: 4})
    assert report.ok
    assert (report.consumed, report.consumed_duplicates, report.commits, report.generations) == (5, 1, 2, 2)
    assert report.assignments == 2
    bad = check_group(acks[:1] + [Ack(1, 1, 0, 0.0)], consumed, commits, [*events, _assigned("c", 2, 0)], {0: 3})
    assert not bad.ok
    assert (bad.consumed_missing, bad.final_commit_regressions, bad.double_owners) == (1, 1, 1)


def test_check_group_reports_overlaps_for_both_protocols() -> None:
    # two members in one epoch each is fine under KIP-848 (epochs are the members' own) unless they overlap
    events = [
        _ev("a", "assigned", 1.0, 0, gen=3),
        _ev("a", "revoked", 2.0, 0, gen=3),
        _ev("b", "assigned", 2.5, 0, gen=3),
        _ev("c", "assigned", 2.6, 1, gen=4),
        _ev("c", "lost", 5.0, 1, gen=4),
        _ev("b", "assigned", 3.0, 0, 1, gen=5),
    ]
    classic = check_group([], [], [], events, {})
    assert (classic.double_owners, classic.overlapping_owners, classic.lost_overlaps) == (1, 0, 1)
    assert not classic.ok
    consumer = check_group([], [], [], events, {}, protocol="consumer")
    assert (consumer.double_owners, consumer.overlapping_owners, consumer.lost_overlaps) == (0, 0, 1)
    assert consumer.ok and consumer.generations == 3
    assert consumer.lost_overlap_examples == ["partition 1: c (c-id@4) 2.600-5.000 lost and b (b-id@5) 3.000-end open"]
    events.append(_ev("d", "assigned", 4.0, 0, gen=6))
    bad = check_group([], [], [], events, {}, protocol="consumer")
    assert (bad.double_owners, bad.overlapping_owners) == (1, 1) and not bad.ok
    assert bad.double_owner_examples == bad.overlap_examples


# ------------------------------------------------------------------ the command line


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["chaos", "run", *argv])


def test_workload_option() -> None:
    assert _parse().workload == "data" and _parse().group_members == 3
    args = _parse("--workload", "group", "--group-members", "4")
    assert (args.workload, args.group_members) == ("group", 4)
    with pytest.raises(SystemExit):
        _parse("--workload", "nonsense")


def test_group_protocol_option() -> None:
    assert _parse("--workload", "group").group_protocol is None  # classic unless asked
    assert _parse("--workload", "group", "--group-protocol", "consumer").group_protocol == "consumer"
    with pytest.raises(SystemExit):
        _parse("--workload", "group", "--group-protocol", "eager")
    with pytest.raises(UserError, match="--group-protocol is the group workload's"):
        run(_parse("--group-protocol", "consumer"))
