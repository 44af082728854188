"""What a data, group, eos or queue chaos run prints and records of its faults: `FaultRecord` (one
injected fault, its heal and the outage it caused), `attribute_gaps` (which fault each window
without an acknowledgement counts towards), the line printed per fault and the final table.
`run_chaos` (`_runner`) fills the records and calls these.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftlog.deploy.chaos._checker import print_verdict
from kraftlog.deploy.chaos._drain import drain_row
from kraftlog.deploy.chaos._eos_run import eos_rows
from kraftlog.deploy.chaos._faults import Fault
from kraftlog.deploy.chaos._queue_run import queue_result_rows
from kraftlog.deploy.chaos._share_run import share_result_rows

__all__ = ["FaultRecord", "attribute_gaps", "client_name", "print_table", "report_fault"]


@dataclass
class FaultRecord:
    fault: Fault
    injected_s: float
    healed_s: float
    outage_s: float = 0.0
    outage_at_s: float = 0.0  # when that longest gap began, from the run's start
    outage_partition: int = -1
    recovery_s: float | None = None  # from the heal until every partition was led with a full ISR again
    pending_at_injection: str | None = None  # the cluster had not recovered from the previous fault
    group_coordinator: int | None = None  # group workload: the broker coordinating the group then
    txn_coordinators: tuple[int, ...] = ()  # eos workload: the brokers coordinating the processors' transactions
    error: str | None = None
    damage: list[str] = field(default_factory=list)  # storage faults: each file damaged, and how


def report_fault(out: Callable[[str], None], rec: FaultRecord, started: float, acknowledged: int) -> None:
    recovered = f"recovered in {rec.recovery_s:.2f}s" if rec.recovery_s is not None else "not recovered yet"
    degraded = f"  (injected before recovery: {rec.pending_at_injection})" if rec.pending_at_injection else ""
    out(
        f"  {rec.injected_s - started:7.1f}s  {rec.fault.describe():<44} {recovered:<22} "
        f"acknowledged {acknowledged}{degraded}"
    )


def attribute_gaps(faults: list[FaultRecord], ack_times: dict[int, list[float]], start: float, end: float) -> None:
    """Each window without an acknowledgement (per partition) counts towards the fault last injected
    before the window ended: the fault the workload was recovering from when it resumed."""
    injected = [rec.injected_s for rec in faults]
    for partition, times in ack_times.items():
        points = [start, *sorted(t for t in times if start <= t <= end), end]
        for a, b in zip(points, points[1:], strict=False):
            i = bisect.bisect_right(injected, b) - 1
            if i >= 0 and b - a > faults[i].outage_s:
                faults[i].outage_s = b - a
                faults[i].outage_at_s = a - start
                faults[i].outage_partition = partition


def client_name(client: str) -> str:
    return "kraftlog (gRPC)" if client == "kraftlog" else f"{client} (Kafka listener)"


def print_table(
    result: dict[str, Any], faults: list[FaultRecord], started_s: float, out: Callable[[str], None]
) -> None:
    """The run's table: each fault with the longest produce gap it caused, then the checker's rows."""
    out("")
    out(f"{'at (s)':>8}  {'fault':<48}{'longest produce gap (s)':>24}  {'from (s), partition'}")
    for rec in faults:
        note = f"  error: {rec.error}" if rec.error else ""
        out(
            f"{rec.injected_s - started_s:>8.1f}  {rec.fault.describe():<48}{rec.outage_s:>24.2f}  "
            f"{rec.outage_at_s:.1f}, {rec.outage_partition}{note}"
        )
    out("")
    rows = [
        ("producer and consumer", client_name(result["client"])),
        ("connections (security)", result["security"]),
        ("records acknowledged", result["acknowledged"]),
        ("records lost", result.get("lost_produce", result["lost"])),
        ("acknowledged offset rewritten", result["offset_mismatches"]),
        ("duplicates (idempotent producer: must be 0)", result["duplicates"]),
        ("reordered within a partition", result["reordered"]),
        ("produce requests failed (unacknowledged)", result["produce_failures"]),
        ("longest window without a produce (s)", result["max_outage_s"]),
    ]
    if result["workload"] == "group":
        rows += [
            ("group: records consumed", result["consumed"]),
            ("group: acknowledged, never consumed", result["consumed_missing"]),
            ("group: offsets consumed again (redelivered)", result["consumed_duplicates"]),
            ("group: commits acknowledged (failed)", f"{result['commits']} ({result['commit_failures']})"),
            ("group: committed offset moved backwards", result["commit_regressions"]),
            ("group: protocol", result["group_protocol"]),
            (
                "group: partition owned twice in a generation"
                if result["group_protocol"] == "classic"
                else "group: partition owned twice (= overlapping)",
                result["double_owners"],
            ),
            ("group: owners overlapping in time", result["overlapping_owners"]),
            ("group: overlaps with a lost owner (allowed)", result["lost_overlaps"]),
            ("group: faults on the group's coordinator", result["coordinator_faults"]),
            (
                "group: generations (member restarts)"
                if result["group_protocol"] == "classic"
                else "group: member epochs seen (member restarts)",
                f"{result['group_generations']} ({result['member_restarts']})",
            ),
            drain_row("group", result),
        ]
    if result["workload"] == "eos":
        rows += eos_rows(result)
    if result["workload"] == "queue":
        rows += queue_result_rows(result)
    if result["workload"] == "share":
        rows += share_result_rows(result)
    rows += [
        ("converged after the last fault (s)", result["converge_s"] if result["converged"] else "NO"),
        ("verdict", "PASS" if result["ok"] else "FAIL"),
    ]
    print_verdict(rows, result, out, label_width=44, value_width=14)
