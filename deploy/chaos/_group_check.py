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
  by one member in generation G and another in G+1 is a handover, not a double owner. This is the
  classic protocol's check: under KIP-848 (``group.protocol=consumer``) there is no group-wide
  generation (a member's "generation" is its own epoch), so `check_group` reports
  ``overlapping_owners`` there instead.
* ``overlapping_owners``: both protocols. From each consumer's listener events a partition is held
  from the ``assigned`` event that gave it (time t1) until the ``revoked`` or ``lost`` event that
  took it (t2), or the consumer's ``closed`` event; two different consumers must never hold one
  partition over intervals that overlap by more than the clock's resolution. The overlap is counted
  by how the *earlier* holder's interval ended: by a revoke (the member let go and said so before
  the coordinator could hand the partition on), by the consumer closing, or not at all: a failure;
  by ``lost``: ``lost_overlaps``, informational. A member fenced after its session expired (or its
  rebalance timeout) hears ``on_partitions_lost`` only at its next poll, after the coordinator may
  already have handed its partitions on; Kafka allows that window. A revoke told while the member
  was no longer in the group (its generation or epoch <= 0 at that moment, e.g. a consumer closed
  after its membership was reset but before the poll that would have told it "lost") counts as
  lost too: Kafka's consumer tells ``on_partitions_lost`` there (``onLeavePrepare``).
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
    "Holding",
    "ownership_intervals",
    "overlapping_owners",
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
    """Member ``member_id`` (of consumer ``consumer``) in generation ``generation`` (the classic
    protocol's generation, or the member's epoch under KIP-848): ``kind`` is ``assigned``
    (``partitions`` is then its whole assignment), ``revoked``, ``lost``, or ``closed`` (the
    consumer closed; it ends whatever it still held). ``consumer`` names one member thread, which
    runs one consumer at a time."""

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
    overlapping_owners: int = 0
    lost_overlaps: int = 0
    generations: int = 0
    assignments: int = 0
    commits: int = 0
    missing_examples: list[str] = field(default_factory=list)
    regression_examples: list[str] = field(default_factory=list)
    double_owner_examples: list[str] = field(default_factory=list)
    overlap_examples: list[str] = field(default_factory=list)
    lost_overlap_examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.consumed_missing == 0
            and self.commit_regressions == 0
            and self.final_commit_regressions == 0
            and self.double_owners == 0
            and self.overlapping_owners == 0
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


@dataclass(frozen=True, slots=True)
class Holding:
    """``consumer`` held ``partition`` from ``start_s`` to ``end_s`` (inf: still at the end);
    ``ended_by`` is ``revoked``, ``lost``, ``closed`` or ``open``; ``member_id`` and ``generation``
    are those of the assignment that began it."""

    consumer: str
    member_id: str
    generation: int
    partition: int
    start_s: float
    end_s: float
    ended_by: str

    def describe(self) -> str:
        end = "end" if self.end_s == float("inf") else f"{self.end_s:.3f}"
        return f"{self.consumer} ({self.member_id}@{self.generation}) {self.start_s:.3f}-{end} {self.ended_by}"


def ownership_intervals(events: Iterable[AssignmentEvent]) -> list[Holding]:
    """Each consumer's holdings, from its events in time order. An ``assigned`` event (the whole
    assignment) starts the partitions not held yet and ends, as revoked, any held ones it no longer
    lists; ``revoked``/``lost`` end what they name (a revoke while the member was out of the group,
    generation <= 0, ends as lost, as Kafka would have told it); ``closed`` ends everything."""
    by_consumer: dict[str, list[AssignmentEvent]] = defaultdict(list)
    for e in events:
        by_consumer[e.consumer].append(e)
    out: list[Holding] = []
    for consumer, evs in by_consumer.items():
        held: dict[int, AssignmentEvent] = {}  # partition -> the assignment that began its holding
        for e in sorted(evs, key=lambda ev: ev.time_s):
            ended: list[tuple[int, str]] = []
            if e.kind == "assigned":
                ended = [(p, "revoked") for p in sorted(set(held) - set(e.partitions))]
            elif e.kind in ("revoked", "lost"):
                how = "lost" if e.kind == "lost" or e.generation <= 0 else "revoked"
                ended = [(p, how) for p in e.partitions if p in held]
            elif e.kind == "closed":
                ended = [(p, "closed") for p in sorted(held)]
            for p, how in ended:
                began = held.pop(p)
                out.append(Holding(consumer, began.member_id, began.generation, p, began.time_s, e.time_s, how))
            if e.kind == "assigned":
                for p in e.partitions:
                    held.setdefault(p, e)
        for p, began in sorted(held.items()):
            out.append(Holding(consumer, began.member_id, began.generation, p, began.time_s, float("inf"), "open"))
    return out


def overlapping_owners(
    events: Iterable[AssignmentEvent], *, tolerance_s: float = 0.0, examples: int = 5
) -> tuple[int, int, list[str], list[str]]:
    """``(overlapping, lost_overlaps, examples, lost examples)``: pairs of holdings of one partition
    by two different consumers that overlap by more than ``tolerance_s`` (the clock's resolution),
    split by how the earlier holding ended: ``lost`` is Kafka's allowed window (informational),
    anything else a failure."""
    per_partition: dict[int, list[Holding]] = defaultdict(list)
    for h in ownership_intervals(events):
        per_partition[h.partition].append(h)
    strict = lost = 0
    shown: list[str] = []
    lost_shown: list[str] = []
    for partition, holdings in sorted(per_partition.items()):
        holdings.sort(key=lambda h: (h.start_s, h.end_s))
        for j, later in enumerate(holdings):
            for earlier in holdings[:j]:
                if earlier.consumer == later.consumer:
                    continue
                overlap = min(earlier.end_s, later.end_s) - later.start_s
                if overlap <= tolerance_s:
                    continue
                text = f"partition {partition}: {earlier.describe()} and {later.describe()}"
                if earlier.ended_by == "lost":
                    lost += 1
                    if len(lost_shown) < examples:
                        lost_shown.append(text)
                else:
                    strict += 1
                    if len(shown) < examples:
                        shown.append(text)
    return strict, lost, shown, lost_shown


def check_group(
    acks: Iterable[Ack],
    consumed: Iterable[ConsumedRecord],
    commits: Iterable[CommitRecord],
    events: Iterable[AssignmentEvent],
    final_committed: Mapping[int, int],
    *,
    protocol: str = "classic",
    tolerance_s: float = 0.0,
    examples: int = 5,
) -> GroupReport:
    """Every figure of the group run. ``protocol`` is the members' ``group.protocol``: under
    ``consumer`` (KIP-848) ``double_owners`` is ``overlapping_owners`` (no group-wide generation)
    and ``generations`` counts the member epochs seen."""
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
    (
        report.overlapping_owners,
        report.lost_overlaps,
        report.overlap_examples,
        report.lost_overlap_examples,
    ) = overlapping_owners(events, tolerance_s=tolerance_s, examples=examples)
    if protocol == "consumer":
        report.double_owners, report.double_owner_examples = report.overlapping_owners, list(report.overlap_examples)
    return report
