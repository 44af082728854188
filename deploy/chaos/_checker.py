"""The chaos checker: compares what the workload was told (acknowledged records) with what a reader
finds in the log after every fault is healed. Pure: no I/O, so every verdict is unit-tested.

Each record's value is ``"<partition>:<sequence>"``; one producer thread per partition sends its
sequence numbers in increasing order with one request in flight, so within a partition the log must
hold them in increasing order (Kafka's per-partition ordering). The workload's producer is idempotent
(issue 15): the leader writes a retried batch once, so a duplicate fails the run as a lost record does.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Ack", "CheckReport", "ReadRecord", "check", "decode_value", "encode_value", "longest_gaps"]


@dataclass(frozen=True, slots=True)
class Ack:
    """The producer was told ``sequence`` is stored at ``offset`` of ``partition`` at ``time_s``."""

    partition: int
    sequence: int
    offset: int
    time_s: float


@dataclass(frozen=True, slots=True)
class ReadRecord:
    partition: int
    offset: int
    value: bytes


def encode_value(partition: int, sequence: int) -> bytes:
    return f"{partition}:{sequence}".encode()


def decode_value(value: bytes) -> tuple[int, int] | None:
    """``(partition, sequence)`` of a workload record, None for anything else."""
    try:
        p, s = value.decode().split(":")
        return int(p), int(s)
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None


@dataclass
class CheckReport:
    acknowledged: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    offset_mismatches: int = 0
    read: int = 0
    unacknowledged_present: int = 0
    foreign: int = 0
    lost_examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing acknowledged lost (a record moved to another offset is lost from that offset) and
        nothing written twice (the idempotent producer's promise)."""
        return self.lost == 0 and self.duplicates == 0


def check(acks: Iterable[Ack], records: Iterable[ReadRecord], *, examples: int = 5) -> CheckReport:
    """Every acknowledged record must be read back, at its acknowledged offset, in order.

    * lost: acknowledged, never read (anywhere in its partition);
    * offset_mismatches: read, but the acknowledged offset holds something else (the log was
      truncated and rewritten under an acknowledged write: also a loss of that offset);
    * duplicates: extra copies of a sequence number (producer retries);
    * reordered: reads whose sequence is lower than one read earlier in the same partition
      (duplicates of the immediately preceding record excluded).
    """
    report = CheckReport()
    by_offset: dict[tuple[int, int], bytes] = {}
    seen: Counter[tuple[int, int]] = Counter()
    last_seq: dict[int, int] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        report.read += 1
        by_offset[(rec.partition, rec.offset)] = rec.value
        decoded = decode_value(rec.value)
        if decoded is None or decoded[0] != rec.partition:
            report.foreign += 1
            continue
        key = (rec.partition, decoded[1])
        seen[key] += 1
        if seen[key] > 1:
            report.duplicates += 1
            continue
        previous = last_seq.get(rec.partition)
        if previous is not None and decoded[1] < previous:
            report.reordered += 1
        last_seq[rec.partition] = max(decoded[1], previous if previous is not None else decoded[1])
    acked_keys: set[tuple[int, int]] = set()
    for ack in acks:
        report.acknowledged += 1
        key = (ack.partition, ack.sequence)
        acked_keys.add(key)
        if seen[key] == 0:
            report.lost += 1
            if len(report.lost_examples) < examples:
                report.lost_examples.append(f"partition {ack.partition} sequence {ack.sequence} offset {ack.offset}")
        elif by_offset.get((ack.partition, ack.offset)) != encode_value(ack.partition, ack.sequence):
            report.offset_mismatches += 1
    report.unacknowledged_present = sum(1 for key in seen if key not in acked_keys)
    return report


def longest_gaps(
    ack_times: Mapping[int, Sequence[float]], start_s: float, end_s: float
) -> dict[int, tuple[float, float]]:
    """Per partition, the longest window ``(from_s, to_s)`` in ``[start_s, end_s]`` without an ack."""
    out: dict[int, tuple[float, float]] = {}
    for partition, times in ack_times.items():
        points = [start_s, *sorted(t for t in times if start_s <= t <= end_s), end_s]
        best = (start_s, start_s)
        for a, b in zip(points, points[1:], strict=False):
            if b - a > best[1] - best[0]:
                best = (a, b)
        out[partition] = best
    return out


def print_verdict(
    rows: Sequence[tuple[str, Any]],
    result: Mapping[str, Any],
    out: Callable[[str], None],
    *,
    label_width: int,
    value_width: int,
    notes: Sequence[str] = (),
) -> None:
    """The end of every chaos run's report: the checker's rows, the faults it skipped and why, any
    notes, then the JSON object of ``result`` as the very last line (scripts read that line)."""
    for label, value in rows:
        out(f"{label:<{label_width}}{value!s:>{value_width}}")
    for kind, why in result["skipped_faults"].items():
        out(f"skipped {kind}: {why}")
    for note in notes:
        out(f"  {note}")
    out(json.dumps(result, sort_keys=True))
