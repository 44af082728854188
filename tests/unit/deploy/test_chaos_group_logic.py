"""The group checker of ``kraftlog chaos run --workload group`` (issue 14): pure, no cluster."""

from __future__ import annotations

import argparse

import pytest

from kraftlog.cli._chaos import add_parser
from kraftlog.deploy.chaos import (
    Ack,
    AssignmentEvent,
    CommitRecord,
    ConsumedRecord,
    check_group,
    commit_regressions,
    consumed_missing,
    double_owners,
    encode_value,
    final_commit_regressions,
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


# ------------------------------------------------------------------ the whole report


def test_check_group_sums_up() -> None:
    acks = [Ack(0, s, s - 1, 0.0) for s in range(1, 5)]
    consumed = [_consumed(0, s - 1, s) for s in range(1, 5)] + [_consumed(0, 3, 4, "m1")]
    commits = [_commit(0, 2, 0.0, 1.0), _commit(0, 4, 2.0, 3.0, "b", 2)]
    events = [_assigned("a", 1, 0), _assigned("b", 2, 0)]
    report = check_group(acks, consumed, commits, events, {0: 4})
    assert report.ok
    assert (report.consumed, report.consumed_duplicates, report.commits, report.generations) == (5, 1, 2, 2)
    assert report.assignments == 2
    bad = check_group(acks[:1] + [Ack(1, 1, 0, 0.0)], consumed, commits, [*events, _assigned("c", 2, 0)], {0: 3})
    assert not bad.ok
    assert (bad.consumed_missing, bad.final_commit_regressions, bad.double_owners) == (1, 1, 1)


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
