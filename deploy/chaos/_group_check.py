"""The group checker: what the consumers of the chaos run's group workload recorded, compared with
what the producers were told. Pure: no I/O, so every verdict is unit-tested.

* ``consumed_missing``: an acknowledged record (partition, sequence) that no member of the group ever
  consumed. Redeliveries are allowed (the group commits after processing: at least once), counted
  as ``consumed_duplicates`` (an offset consumed more than once) only.
* ``commit_regressions``: an acknowledged commit of a partition whose offset is below one acknowledged
  before it was sent. Commits that overlap in time are not ordered (either may land first), so only a
  commit sent after another's acknowledgement is compared with it. The run resets no offsets, so a
  committed offset that moves backwards is a fencing or durability failure of the coordinator (a
  zombie member's commit accepted, a commit acknowledged and then lost). The group's final committed
  offsets are compared with the highest acknowledged commit the same way.
* ``double_owners``: a (generation, partition) assigned to two different members. A partition held
  by one member in generation G and another in G+1 is a handover, not a double owner.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kraftlog.deploy.chaos._checker import Ack, decode_value

__all__ = [
    "AssignmentEvent",
    "CommitRecord",
    "ConsumedRecord",
    "GroupReport",
    "check_group",
    "commit_regressions",
    "consumed_missing",
    "double_owners",
    "final_commit_regressions",
]


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A member's poll returned ``value`` from ``offset`` of ``partition``."""

    member: str
    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True, slots=True)
class AssignmentEvent:
    """Member ``member_id`` (of consumer ``consumer``) in generation ``generation``: ``kind`` is
    ``assigned`` (``partitions`` is then its whole assignment), ``revoked`` or ``lost``."""

    consumer: str
    member_id: str
    generation: int
    kind: str
    partitions: tuple[int, ...]
    time_s: float


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A commit of ``offsets`` (partition -> next offset to read) sent at ``sent_s`` and
    acknowledged at ``acked_s`` by the coordinator, in ``generation`` of member ``member_id``."""

    consumer: str
    member_id: str
    generation: int
    offsets: Mapping[int, int]
    sent_s: float
    acked_s: float


@dataclass
class GroupReport:
    consumed: int = 0
    consumed_missing: int = 0
    consumed_duplicates: int = 0
    commit_regressions: int = 0
    final_commit_regressions: int = 0
    double_owners: int = 0
    generations: int = 0
    assignments: int = 0
    commits: int = 0
    missing_examples: list[str] = field(default_factory=list)
    regression_examples: list[str] = field(default_factory=list)
    double_owner_examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.consumed_missing == 0
            and self.commit_regressions == 0
            and self.final_commit_regressions == 0
            and self.double_owners == 0
        )


def consumed_missing(
    acks: Iterable[Ack], consumed: Iterable[ConsumedRecord], *, examples: int = 5
) -> tuple[int, int, list[str]]:
    """``(missing, duplicates, examples)``: acknowledged records never consumed by any member, and
    redeliveries: deliveries of a (partition, offset) beyond its first (a copy the producer wrote
    twice is the data checker's ``duplicates``, not a redelivery)."""
    seen: Counter[tuple[int, int]] = Counter()
    deliveries: Counter[tuple[int, int]] = Counter()
    for rec in consumed:
        deliveries[(rec.partition, rec.offset)] += 1
        decoded = decode_value(rec.value) if rec.value is not None else None
        if decoded is not None and decoded[0] == rec.partition:
            seen[(rec.partition, decoded[1])] += 1
    missing = 0
    shown: list[str] = []
    for ack in acks:
        if seen[(ack.partition, ack.sequence)] == 0:
            missing += 1
            if len(shown) < examples:
                shown.append(f"partition {ack.partition} sequence {ack.sequence} offset {ack.offset}")
    duplicates = sum(n - 1 for n in deliveries.values() if n > 1)
    return missing, duplicates, shown


def commit_regressions(commits: Iterable[CommitRecord], *, examples: int = 5) -> tuple[int, list[str]]:
    """Acknowledged commits of a partition below an offset acknowledged before they were sent."""
    per_partition: dict[int, list[tuple[float, float, int, str]]] = defaultdict(list)
    for c in commits:
        for partition, offset in c.offsets.items():
            per_partition[partition].append((c.sent_s, c.acked_s, offset, f"{c.member_id}@{c.generation}"))
    count = 0
    shown: list[str] = []
    for partition, items in sorted(per_partition.items()):
        by_ack = sorted(items, key=lambda i: i[1])
        best: list[tuple[float, int, str]] = []  # (acked_s, running max offset, who) in ack order
        running = -1
        who = ""
        for _sent, acked, offset, by in by_ack:
            if offset > running:
                running, who = offset, by
            best.append((acked, running, who))
        acked_times = [b[0] for b in best]
        for sent, _acked, offset, by in items:
            i = _last_before(acked_times, sent)
            if i >= 0 and offset < best[i][1]:
                count += 1
                if len(shown) < examples:
                    shown.append(
                        f"partition {partition}: {by} committed {offset} after {best[i][2]} had committed {best[i][1]}"
                    )
    return count, shown


def _last_before(times: list[float], t: float) -> int:
    """Index of the last entry of the sorted ``times`` strictly before ``t`` (-1: none)."""
    lo, hi = 0, len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def final_commit_regressions(
    commits: Iterable[CommitRecord], final: Mapping[int, int], *, examples: int = 5
) -> tuple[int, list[str]]:
    """Partitions whose final committed offset (read from the group after the run) is below the
    highest commit the coordinator acknowledged (a partition with none counts as -1)."""
    highest: dict[int, int] = {}
    for c in commits:
        for partition, offset in c.offsets.items():
            highest[partition] = max(offset, highest.get(partition, -1))
    count = 0
    shown: list[str] = []
    for partition, offset in sorted(highest.items()):
        got = final.get(partition, -1)
        if got < offset:
            count += 1
            if len(shown) < examples:
                shown.append(f"partition {partition}: final committed offset {got} below acknowledged {offset}")
    return count, shown


def double_owners(events: Iterable[AssignmentEvent], *, examples: int = 5) -> tuple[int, int, list[str]]:
    """``(double owners, generations seen, examples)``: (generation, partition) pairs assigned to two
    or more members. Assignments recorded without a known generation (< 0) are skipped."""
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    generations: set[int] = set()
    for e in events:
        if e.kind != "assigned" or e.generation < 0:
            continue
        generations.add(e.generation)
        for partition in e.partitions:
            owners[(e.generation, partition)].add(e.member_id)
    count = 0
    shown: list[str] = []
    for (generation, partition), members in sorted(owners.items()):
        if len(members) > 1:
            count += 1
            if len(shown) < examples:
                shown.append(f"generation {generation} partition {partition}: {sorted(members)}")
    return count, len(generations), shown


def check_group(
    acks: Iterable[Ack],
    consumed: Iterable[ConsumedRecord],
    commits: Iterable[CommitRecord],
    events: Iterable[AssignmentEvent],
    final_committed: Mapping[int, int],
    *,
    examples: int = 5,
) -> GroupReport:
    consumed = list(consumed)
    commits = list(commits)
    events = list(events)
    report = GroupReport(consumed=len(consumed), commits=len(commits))
    report.assignments = sum(1 for e in events if e.kind == "assigned")
    report.consumed_missing, report.consumed_duplicates, report.missing_examples = consumed_missing(
        acks, consumed, examples=examples
    )
    report.commit_regressions, report.regression_examples = commit_regressions(commits, examples=examples)
    report.final_commit_regressions, final_shown = final_commit_regressions(commits, final_committed, examples=examples)
    report.regression_examples += final_shown
    report.double_owners, report.generations, report.double_owner_examples = double_owners(events, examples=examples)
    return report
