"""The quorum profile's checker: pure functions over what the run recorded and what it read back.

Nothing here does I/O, so every verdict is unit-tested on synthetic inputs:

* `check_admin`: acknowledged admin operations against the final image (``admin_lost``);
* `find_duplicate_records`: a metadata log that creates a live topic or partition twice;
* `diverged_controllers`: controllers whose metadata log bytes differ on the common committed range;
* `replay_error_lines`: node log lines that say a node could not replay the metadata log;
* `has_active_controller` / `no_active_stretches`: the longest time without an active controller.

In-doubt operations (no definitive answer, e.g. every attempt timed out) may or may not have
happened: the checker widens what it accepts instead of guessing. Only an acknowledged effect that
is missing counts as lost; a state no operation explains counts as unexplained.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlog.metadata_log import LogEntry, MetadataRecord, PartitionRecord, RemoveTopicRecord, TopicRecord

__all__ = [
    "ACKED",
    "IN_DOUBT",
    "REJECTED",
    "OP_KINDS",
    "AdminOp",
    "FinalTopic",
    "AdminReport",
    "check_admin",
    "DuplicateReport",
    "find_duplicate_records",
    "DivergenceReport",
    "diverged_controllers",
    "REPLAY_ERROR_MARKERS",
    "replay_error_lines",
    "has_active_controller",
    "no_active_stretches",
    "subtract_windows",
    "voter_rejoined",
]

ACKED = "acked"  # a definitive success (or an answer that proves an earlier attempt succeeded)
REJECTED = "rejected"  # a definitive refusal, no attempt of the operation can have applied
IN_DOUBT = "in_doubt"  # no definitive answer: it may or may not have applied
OP_KINDS = ("create", "delete", "alter_config", "create_partitions")


@dataclass(frozen=True, slots=True)
class AdminOp:
    """One admin operation of the workload with its final outcome.

    ``partitions``: the partition count of a create, the new total of a create_partitions;
    ``config``: the (key, value) a create sets or an alter_config SETs."""

    client: int
    kind: str
    topic: str
    outcome: str
    partitions: int = 0
    config: tuple[str, str] | None = None
    error: str = ""
    attempts: int = 1
    started_s: float = 0.0
    ended_s: float = 0.0

    def describe(self) -> str:
        what = {
            "create": f"create({self.partitions} partitions"
            + (f", {self.config[0]}={self.config[1]}" if self.config else "")
            + ")",
            "delete": "delete",
            "alter_config": f"set {self.config[0]}={self.config[1]}" if self.config else "alter_config",
            "create_partitions": f"create_partitions(to {self.partitions})",
        }.get(self.kind, self.kind)
        return f"{what} of {self.topic} ({self.outcome}, {self.attempts} attempt(s))"


@dataclass(frozen=True, slots=True)
class FinalTopic:
    """A topic as the converged cluster describes it: partition count and dynamic configs."""

    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class AdminReport:
    acked: int = 0
    rejected: int = 0
    in_doubt: int = 0
    lost: int = 0  # an acknowledged effect missing from the final image
    unexplained: int = 0  # a state no acknowledged or in-doubt operation explains
    examples: list[str] = field(default_factory=list)


@dataclass
class _Expect:
    """What the final image may show for one topic: each aspect's possible values, and the last
    acknowledged operation that fixed it (absent: only in-doubt or no operations touched it)."""

    exists: set[bool] = field(default_factory=lambda: {False})
    partitions: set[int] = field(default_factory=set)
    configs: dict[str, set[str | None]] = field(default_factory=dict)
    acked_by: dict[str, AdminOp] = field(default_factory=dict)


def _replay_op(exp: _Expect, op: AdminOp) -> None:
    """Fold one operation into the expectation: an acknowledged one fixes the aspect, an in-doubt
    one adds its value to the possible ones, a rejected one changes nothing."""
    if op.outcome == REJECTED:
        return
    acked = op.outcome == ACKED

    def settle(aspect: str, values: set[Any], value: Any) -> None:
        if acked:
            values.clear()
            exp.acked_by[aspect] = op
        values.add(value)

    if op.kind == "create":
        settle("exists", exp.exists, True)
        settle("partitions", exp.partitions, op.partitions)
        if op.config is not None:
            settle(f"config:{op.config[0]}", exp.configs.setdefault(op.config[0], {None}), op.config[1])
    elif op.kind == "delete":
        settle("exists", exp.exists, False)
    elif op.kind == "create_partitions":
        settle("partitions", exp.partitions, op.partitions)
    elif op.kind == "alter_config" and op.config is not None:
        settle(f"config:{op.config[0]}", exp.configs.setdefault(op.config[0], {None}), op.config[1])
    else:
        raise ValueError(f"unknown admin operation kind {op.kind!r}")


def check_admin(ops: Iterable[AdminOp], final: Mapping[str, FinalTopic], *, examples: int = 8) -> AdminReport:
    """Compare the workload's operations with the final image.

    ``ops`` in the order they were issued per topic (one client owns a topic and runs its operations
    one after another); ``final`` maps every topic of the workload present at the end (topics of
    others may be in it: only topics some operation names are judged). One mismatch per aspect
    (existence, partition count, each config key) of a topic counts once.
    """
    report = AdminReport()
    expects: dict[str, _Expect] = {}
    for op in ops:
        if op.outcome == ACKED:
            report.acked += 1
        elif op.outcome == REJECTED:
            report.rejected += 1
        elif op.outcome == IN_DOUBT:
            report.in_doubt += 1
        else:
            raise ValueError(f"unknown outcome {op.outcome!r}")
        _replay_op(expects.setdefault(op.topic, _Expect()), op)

    def mismatch(topic: str, exp: _Expect, aspect: str, found: Any, allowed: Iterable[Any]) -> None:
        op = exp.acked_by.get(aspect)
        if op is not None:
            report.lost += 1
            note = f"lost: {op.describe()}"
        else:
            report.unexplained += 1
            note = f"unexplained: {topic}"
        if len(report.examples) < examples:
            shown = sorted(allowed, key=repr)
            report.examples.append(f"{note}: {aspect} is {found!r}, expected one of {shown!r}")

    for topic, exp in sorted(expects.items()):
        got = final.get(topic)
        if (got is not None) not in exp.exists:
            mismatch(topic, exp, "exists", got is not None, exp.exists)
            continue
        if got is None or True not in exp.exists:
            continue
        if exp.partitions and got.partitions not in exp.partitions:
            mismatch(topic, exp, "partitions", got.partitions, exp.partitions)
        for key in sorted(set(exp.configs) | set(got.configs)):
            allowed = exp.configs.get(key, {None})
            value = got.configs.get(key)
            if value not in allowed:
                mismatch(topic, exp, f"config:{key}", value, allowed)
    return report


# ------------------------------------------------------------------------------ the metadata log


@dataclass
class DuplicateReport:
    duplicates: int = 0
    examples: list[str] = field(default_factory=list)


def find_duplicate_records(
    entries: Iterable[LogEntry], initial: Iterable[MetadataRecord] = (), *, examples: int = 5
) -> DuplicateReport:
    """Records that create something that already exists, in log order.

    A `TopicRecord` whose name belongs to a live topic, or whose topic id was ever used (ids are
    never reused); a `PartitionRecord` for a partition its live topic already has. ``initial``: the
    records of the snapshot the log continues from (its topics are live). A duplicate is counted and
    not applied, so one bad record is one duplicate.
    """
    report = DuplicateReport()
    live_by_name: dict[str, tuple[str, int]] = {}  # name -> (topic id, offset of its TopicRecord)
    name_of: dict[str, str] = {}  # live topic id -> name
    ever: set[str] = set()
    partitions: dict[str, set[int]] = {}

    def note(text: str) -> None:
        report.duplicates += 1
        if len(report.examples) < examples:
            report.examples.append(text)

    def replay(record: MetadataRecord, offset: int) -> None:
        if isinstance(record, TopicRecord):
            held = live_by_name.get(record.name)
            if held is not None:
                note(
                    f"offset {offset}: TopicRecord {record.name!r} (id {record.topic_id}) while the topic "
                    f"is live as id {held[0]} (created at offset {held[1]})"
                )
                return
            if record.topic_id in ever:
                note(f"offset {offset}: TopicRecord {record.name!r} reuses topic id {record.topic_id}")
                return
            live_by_name[record.name] = (record.topic_id, offset)
            name_of[record.topic_id] = record.name
            ever.add(record.topic_id)
            partitions[record.topic_id] = set()
        elif isinstance(record, PartitionRecord):
            parts = partitions.get(record.topic_id)
            if parts is None:
                return  # a partition of an unknown topic is a replay error, not a duplicate
            if record.partition_id in parts:
                note(
                    f"offset {offset}: PartitionRecord {name_of.get(record.topic_id, record.topic_id)}-"
                    f"{record.partition_id} already exists"
                )
                return
            parts.add(record.partition_id)
        elif isinstance(record, RemoveTopicRecord):
            name = name_of.pop(record.topic_id, None)
            if name is not None:
                live_by_name.pop(name, None)
            partitions.pop(record.topic_id, None)

    for record in initial:
        replay(record, -1)
    for entry in entries:
        replay(entry.record, entry.offset)
    return report


@dataclass
class DivergenceReport:
    diverged: list[int] = field(default_factory=list)
    first_offset: int | None = None
    compared: tuple[int, int] | None = None  # inclusive offset range compared (None: nothing in common)
    examples: list[str] = field(default_factory=list)


def diverged_controllers(logs: Mapping[int, Mapping[int, bytes]]) -> DivergenceReport:
    """Controllers whose metadata log is not byte-identical to the majority's on the common range.

    ``logs``: controller id -> {offset: entry bytes as on disk}. The range compared runs from the
    highest first offset to the lowest last offset among them (everything on disk is committed, so
    the lowest end is the common committed end). At each offset the largest group of identical
    entries is the reference (a tie goes to the group with the lowest controller id); a controller
    outside it, or missing an offset inside the range, has diverged.
    """
    report = DivergenceReport()
    if len(logs) < 2 or any(not entries for entries in logs.values()):
        return report
    lo = max(min(entries) for entries in logs.values())
    hi = min(max(entries) for entries in logs.values())
    if lo > hi:
        return report
    report.compared = (lo, hi)
    diverged: set[int] = set()
    for offset in range(lo, hi + 1):
        groups: dict[bytes | None, list[int]] = {}
        for node in sorted(logs):
            groups.setdefault(logs[node].get(offset), []).append(node)
        if len(groups) == 1 and None not in groups:
            continue
        reference = max((g for key, g in groups.items() if key is not None), key=lambda g: (len(g), -g[0]), default=[])
        odd = [n for n in sorted(logs) if n not in reference and n not in diverged]
        if odd:
            if report.first_offset is None:
                report.first_offset = offset
            diverged.update(odd)
            report.examples.append(f"offset {offset}: controller(s) {odd} differ from {reference}")
    report.diverged = sorted(diverged)
    return report


# ------------------------------------------------------------------------------ node logs

#: what a node logs when it cannot apply the committed metadata log (any critical line counts too)
REPLAY_ERROR_MARKERS = ("MetadataReplayError", "metadata_delivery_stopped", "metadata_apply_failed")


def replay_error_lines(lines: Iterable[str]) -> list[str]:
    """The lines of a node's log that report a metadata replay failure or anything critical.

    Nodes write JSON lines off a terminal (``level`` is a key); a line that is not JSON (a library
    writing to stderr) is matched by the markers alone.
    """
    found = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        level = ""
        if text.startswith("{"):
            try:
                level = str(json.loads(text).get("level", "")).lower()
            except (ValueError, AttributeError):
                level = ""
        if level in ("critical", "fatal") or any(marker in text for marker in REPLAY_ERROR_MARKERS):
            found.append(text)
    return found


# ------------------------------------------------------------------------------ the active controller


def has_active_controller(response: Any, fetch_timeout_ms: int) -> int | None:
    """The active controller a DescribeQuorum answer shows, or None.

    Only the active controller answers DescribeQuorum without an error. It still counts only while
    a majority of the voters (itself included) answered it within ``fetch_timeout_ms`` by its own
    clock: a leader cut off from its majority is no active controller (Kafka's check-quorum makes
    it resign after ``controller.quorum.fetch.timeout.ms``).
    """
    if response is None or response.error.code != 0 or response.leader_id < 0:
        return None
    voters = {v.replica_id: v for v in response.voters}
    me = voters.get(response.leader_id)
    if me is None or me.last_fetch_timestamp_ms < 0:
        return None
    now = me.last_fetch_timestamp_ms
    fresh = sum(
        1
        for v in voters.values()
        if v.last_fetch_timestamp_ms >= 0 and now - v.last_fetch_timestamp_ms <= fetch_timeout_ms
    )
    return response.leader_id if fresh >= len(voters) // 2 + 1 else None


def voter_rejoined(response: Any, node_id: int, since_ms: int) -> bool:
    """True when a DescribeQuorum answer of the active controller shows ``node_id`` fetched from it
    and caught up at or after ``since_ms`` (wall clock of the same machine): a restarted controller
    is back only then; the answers the leader had from its previous process do not count."""
    if response is None or response.error.code != 0 or response.leader_id < 0:
        return False
    for v in response.voters:
        if v.replica_id == node_id:
            return bool(v.last_fetch_timestamp_ms >= since_ms and v.last_caught_up_timestamp_ms >= since_ms)
    return False


def subtract_windows(span: tuple[float, float], windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """``span`` minus every window: the pieces left, in order."""
    pieces = [span]
    for a, b in sorted(windows):
        out = []
        for s, e in pieces:
            if b <= s or a >= e:
                out.append((s, e))
                continue
            if a > s:
                out.append((s, a))
            if b < e:
                out.append((b, e))
        pieces = out
    return pieces


def no_active_stretches(
    samples: Sequence[tuple[float, bool]], end_s: float, excused: Sequence[tuple[float, float]] = ()
) -> list[tuple[float, float]]:
    """Stretches without an active controller, from time-ordered ``(time_s, active)`` samples.

    A stretch starts at the first sample without one and ends at the next sample with one (or at
    ``end_s``). ``excused`` windows -- while the run itself held a majority of the controllers down,
    when no quorum can have an active controller -- are cut out, so the clock restarts at the heal.
    """
    stretches: list[tuple[float, float]] = []
    start: float | None = None
    for t, active in samples:
        if not active and start is None:
            start = t
        elif active and start is not None:
            stretches.append((start, t))
            start = None
    if start is not None and end_s > start:
        stretches.append((start, end_s))
    out: list[tuple[float, float]] = []
    for span in stretches:
        out.extend(p for p in subtract_windows(span, excused) if p[1] > p[0])
    return out
