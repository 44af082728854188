"""The queue workload's checker (issue 28): a pure function of a history (`deploy.chaos._queue_history`)
that reports every anomaly class by name with a minimal example, after Jepsen's Kafka checker
(``jepsen.tests.kafka``; the definitions are its, re-stated here).

Classes (each counts cases; ``examples`` holds one per class found, the first in history order, the
shortest for cycles):

* ``inconsistent_offsets``: two values seen at one offset of a key (sends and polls disagree).
* ``duplicate``: one value at more than one offset of a key.
* ``lost_write``: a value that must have committed, sent to a key at an index at or below the
  highest index some ``ok`` poll read of that key, that no ``ok`` poll ever read.
* ``unseen``: a value sent by an ``ok`` operation that no ``ok`` poll read by the end.
* ``poll_skip`` / ``nonmonotonic_poll``: one process's consecutive ``ok`` polls of a key: the first
  value of the later one is more than one index after (skip) or not after (nonmonotonic) the last
  value of the earlier one. An ``assign``/``subscribe`` keeps only the keys it names, a ``crash``
  forgets all, and a key in an operation's ``rebalance`` is not compared (a rebalance, or the
  rewind after an aborted transaction, moves the consumer to the committed offset), whatever the
  operation's ``f``.
* ``int_poll_skip`` / ``int_nonmonotonic_poll``: the same between consecutive reads of a key within
  one operation (keys rebalanced during it excepted).
* ``int_send_skip`` / ``int_nonmonotonic_send``: consecutive sends of one operation to a key that
  land more than one index apart, or out of order.
* ``aborted_read``: a poll (of any outcome: a consumer must return committed data only) returned a
  value whose send failed (an aborted transaction, a refused send).
* ``g1a``: Elle's G1a over the transactions: a committed (``ok``) ``txn`` read a failed one's write.
* ``g0``: a cycle of write-write edges: T1 -> T2 when T2 sent the value right after T1's in a key's
  version order (ok operations and info ones that must have committed).
* ``g1c``: a cycle of write-read edges: T1 -> T2 when an ok T2 polled a value T1 sent (circular
  information flow). As Jepsen's checker does by default, ww edges are not part of it: Kafka does
  not isolate the writes of concurrent transactions, so ww+wr cycles are normal there.

``int_send_skip`` and ``g0`` are reported but do not fail a run (`QUEUE_ALLOWED`): concurrent producers'
records interleave in a partition, and with them the sends of concurrent transactions, in Kafka's
model (Jepsen's ``allowed-error-types``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import networkx as nx

from kraftlog.deploy.chaos._queue_history import HistoryOp
from kraftlog.deploy.chaos._queue_orders import QueueAnalysis, analyse, consecutive, op_ref

__all__ = ["QUEUE_ALLOWED", "QUEUE_ANOMALIES", "QueueReport", "check_queue", "queue_rows"]

QUEUE_ANOMALIES = (
    "lost_write",
    "duplicate",
    "inconsistent_offsets",
    "poll_skip",
    "int_poll_skip",
    "nonmonotonic_poll",
    "int_nonmonotonic_poll",
    "int_send_skip",
    "int_nonmonotonic_send",
    "unseen",
    "aborted_read",
    "g0",
    "g1a",
    "g1c",
)
QUEUE_ALLOWED = frozenset({"int_send_skip", "g0"})
#: edges tried per strongly connected component when looking for its shortest cycle
_CYCLE_EDGE_TRIES = 64

Case = dict[str, Any]


@dataclass
class QueueReport:
    operations: int = 0
    transactions: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUEUE_ANOMALIES, 0))
    examples: dict[str, Case] = field(default_factory=dict)
    allowed: frozenset[str] = QUEUE_ALLOWED

    @property
    def anomalies(self) -> list[str]:
        """The classes found that fail a run."""
        return [name for name in QUEUE_ANOMALIES if self.counts[name] and name not in self.allowed]

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def add(self, name: str, cases: Sequence[Case], *, pick: Callable[[Sequence[Case]], Case] | None = None) -> None:
        self.counts[name] = len(cases)
        if cases:
            self.examples[name] = pick(cases) if pick else cases[0]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.counts,
            "operations": self.operations,
            "transactions": self.transactions,
            "anomalies": self.anomalies,
            "allowed": sorted(self.allowed),
            "examples": self.examples,
        }


def _order_cases(a: QueueAnalysis) -> tuple[list[Case], list[Case]]:
    inconsistent, duplicates = [], []
    for key in sorted(a.orders):
        order = a.orders[key]
        for offset in sorted(order.log):
            values = order.log[offset]
            if len(values) > 1:
                inconsistent.append({"key": key, "offset": offset, "values": sorted(values)})
        at: dict[int, list[int]] = {}
        for offset in sorted(order.log):
            for value in order.log[offset]:
                at.setdefault(value, []).append(offset)
        duplicates += [{"key": key, "value": v, "offsets": o} for v, o in sorted(at.items()) if len(o) > 1]
    return inconsistent, duplicates


def _lost_writes(a: QueueAnalysis) -> list[Case]:
    cases = []
    for key in sorted(a.ok_reads):
        read, order = a.ok_reads[key], a.order(key)
        bound = max((order.by_value[v] for v in read if v in order.by_value), default=-1)
        for value, last in sorted(order.last_index.items(), key=lambda item: item[1]):
            if last > bound or value in read:
                continue
            writer = a.writer_of.get((key, value))
            if writer is None or not a.must_have_committed(writer):
                continue
            cases.append(
                {
                    "key": key,
                    "value": value,
                    "offset": order.offsets[order.by_value[value]],
                    "writer": op_ref(writer),
                    "highest_read_offset": order.offsets[bound],
                }
            )
    return cases


def _unseen(a: QueueAnalysis) -> list[Case]:
    cases = []
    for op in a.rw:
        if op.type != "ok":
            continue
        for key, pairs in a.writes.get(op.index, {}).items():
            cases += [
                {"key": key, "value": v, "offset": o, "writer": op_ref(op)}
                for o, v in pairs
                if v not in a.ok_reads.get(key, ())
            ]
    return cases


def _aborted_reads(a: QueueAnalysis) -> tuple[list[Case], list[Case]]:
    aborted, g1a = [], []
    for reader in a.rw:
        for key, values in a.read_values(reader).items():
            for value in dict.fromkeys(values):
                writer = a.writer_of.get((key, value))
                if writer is None or writer.type != "fail":
                    continue
                case = {"key": key, "value": value, "writer": op_ref(writer), "reader": op_ref(reader)}
                aborted.append(case)
                if reader.type == "ok" and reader.f == "txn":
                    g1a.append(case)
    return aborted, g1a


def _step(a: QueueAnalysis, key: int, v1: int, v2: int, **where: Any) -> tuple[str, Case] | None:
    """A skip or nonmonotonic case for v1 followed by v2 in ``key``, or None when in order."""
    delta = a.order(key).delta(v1, v2)
    if delta is None or delta == 1:
        return None
    case: Case = {"key": key, "values": [v1, v2], "delta": delta, **where}
    if delta > 1:
        case["skipped"] = a.order(key).between(v1, v2)
        return "skip", case
    return "nonmonotonic", case


def _poll_steps(a: QueueAnalysis) -> dict[str, list[Case]]:
    found: dict[str, list[Case]] = {"skip": [], "nonmonotonic": [], "int_skip": [], "int_nonmonotonic": []}
    last: dict[int, dict[int, tuple[HistoryOp, int]]] = {}  # process -> key -> (op, last value read)
    for op in a.ops:
        seen = last.setdefault(op.process, {})
        if op.f in ("assign", "subscribe") and op.type in ("ok", "info"):
            keep = set(op.value or ())
            last[op.process] = {k: v for k, v in seen.items() if k in keep}
            continue
        if op.f == "crash":
            seen.clear()
            continue
        if op.f not in ("poll", "txn"):
            for key in op.rebalance:  # a consumer sought back after an aborted send-only transaction
                seen.pop(key, None)
            continue
        for key, values in a.read_values(op).items():
            if key in op.rebalance or not values:
                continue
            for v1, v2 in consecutive(values):
                if step := _step(a, key, v1, v2, op=op_ref(op)):
                    found["int_" + step[0]].append(step[1])
            if key in seen:
                previous, v0 = seen[key]
                if step := _step(a, key, v0, values[0], ops=[op_ref(previous), op_ref(op)]):
                    found[step[0]].append(step[1])
        for key in op.rebalance:
            seen.pop(key, None)
        if op.type == "ok":
            for key, values in a.read_values(op).items():
                if values:
                    seen[key] = (op, values[-1])
    return found


def _send_steps(a: QueueAnalysis) -> tuple[list[Case], list[Case]]:
    skips: list[Case] = []
    backwards: list[Case] = []
    for op in a.rw:
        for key, values in a.write_values(op).items():
            for v1, v2 in consecutive(values):
                if step := _step(a, key, v1, v2, op=op_ref(op)):
                    (skips if step[0] == "skip" else backwards).append(step[1])
    return skips, backwards


def _graphs(a: QueueAnalysis) -> tuple[nx.DiGraph, nx.DiGraph]:
    """The write-write and the write-read dependency graphs over operations (nodes: op indexes)."""
    nodes = {op.index: op for op in a.rw if a.must_have_committed(op)}
    ww_edges: dict[tuple[int, int], Case] = {}
    for key, order in sorted(a.orders.items()):
        for v1, v2 in consecutive(order.by_index):
            w1, w2 = a.writer_of.get((key, v1)), a.writer_of.get((key, v2))
            if w1 is None or w2 is None or w1.index == w2.index or w1.index not in nodes or w2.index not in nodes:
                continue
            ww_edges.setdefault((w1.index, w2.index), {"key": key, "values": [v1, v2]})
    wr_edges: dict[tuple[int, int], Case] = {}
    for reader in nodes.values():
        if reader.type != "ok":
            continue
        for key, values in a.read_values(reader).items():
            for value in values:
                writer = a.writer_of.get((key, value))
                if writer is None or writer.index == reader.index or writer.index not in nodes:
                    continue
                wr_edges.setdefault((writer.index, reader.index), {"key": key, "value": value})
    graphs = []
    for edges in (ww_edges, wr_edges):
        g = nx.DiGraph()
        g.add_edges_from((x, y, why) for (x, y), why in edges.items())
        for index in g.nodes:
            g.nodes[index]["op"] = nodes[index]
        graphs.append(g)
    return graphs[0], graphs[1]


def _cycles(g: nx.DiGraph, rel: str) -> list[Case]:
    """One case per strongly connected component with a cycle: its shortest cycle found, as steps."""
    cases = []
    for component in nx.strongly_connected_components(g):
        if len(component) < 2:
            continue
        sub = g.subgraph(component)
        best: list[int] | None = None
        for a, b in islice(sub.edges, _CYCLE_EDGE_TRIES):
            path = nx.shortest_path(sub, b, a)  # b ... a: with the edge a -> b, a cycle
            if best is None or len(path) + 1 < len(best):
                best = [a, *path]
        assert best is not None
        steps = [
            {"from": op_ref(g.nodes[x]["op"]), "to": op_ref(g.nodes[y]["op"]), "rel": rel, **g.edges[x, y]}
            for x, y in consecutive(best)
        ]
        cases.append({"cycle": steps})
    cases.sort(key=lambda case: len(case["cycle"]))
    return cases


def check_queue(history: Iterable[HistoryOp], *, allowed: frozenset[str] = QUEUE_ALLOWED) -> QueueReport:
    """Every anomaly class of a queue history, with a minimal example each (see the module doc)."""
    a = analyse(history)
    report = QueueReport(allowed=allowed)
    report.operations = len(a.rw)
    report.transactions = sum(1 for op in a.rw if op.f == "txn")
    inconsistent, duplicates = _order_cases(a)
    report.add("inconsistent_offsets", inconsistent)
    report.add("duplicate", duplicates)
    report.add("lost_write", _lost_writes(a))
    report.add("unseen", _unseen(a))
    aborted, g1a = _aborted_reads(a)
    report.add("aborted_read", aborted)
    report.add("g1a", g1a)
    polls = _poll_steps(a)
    smallest = _smallest_delta
    report.add("poll_skip", polls["skip"], pick=smallest)
    report.add("nonmonotonic_poll", polls["nonmonotonic"], pick=smallest)
    report.add("int_poll_skip", polls["int_skip"], pick=smallest)
    report.add("int_nonmonotonic_poll", polls["int_nonmonotonic"], pick=smallest)
    send_skips, send_backwards = _send_steps(a)
    report.add("int_send_skip", send_skips, pick=smallest)
    report.add("int_nonmonotonic_send", send_backwards, pick=smallest)
    ww, wr = _graphs(a)
    report.add("g0", _cycles(ww, "ww"))
    report.add("g1c", _cycles(wr, "wr"))
    return report


def _smallest_delta(cases: Sequence[Case]) -> Case:
    return min(cases, key=lambda case: abs(case["delta"]))


def queue_rows(report: QueueReport) -> list[tuple[str, Any]]:
    """The checker's table rows: the counts, then every class (allowed ones say so)."""
    rows: list[tuple[str, Any]] = [("operations", report.operations), ("transactions", report.transactions)]
    for name in QUEUE_ANOMALIES:
        label = f"{name} (allowed)" if name in report.allowed else name
        rows.append((label, report.counts[name]))
    return rows
