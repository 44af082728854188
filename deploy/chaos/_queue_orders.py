"""What a queue history says about each key's log (issue 28): the values each operation sent and
polled, who wrote each value, and the version order of every key, built from the offsets the
history saw. Pure; `deploy.chaos._queue_check` draws the anomalies from it.

The version order follows Jepsen's Kafka checker (``jepsen.tests.kafka/version-orders``): a key's
log maps each offset to the values seen there, from the sends of operations that must have
committed (``ok``, or ``info`` with one of their values polled by an ``ok`` operation) and from
every poll, whatever its operation's outcome (a consumer must only ever return committed data).
Offsets are not contiguous (transaction markers take offsets no consumer sees), so the order is
*dense*: index i is the i-th offset that holds a value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlog.deploy.chaos._queue_history import HistoryOp, Poll, Send

__all__ = ["KeyOrder", "QueueAnalysis", "analyse", "consecutive", "op_ref"]

_RW = ("send", "poll", "txn")


def op_ref(op: HistoryOp) -> dict[str, Any]:
    """How an example names an operation: enough to find its line in the history."""
    return {"index": op.index, "process": op.process, "type": op.type, "f": op.f}


def _writes(op: HistoryOp) -> dict[int, list[tuple[int | None, int]]]:
    out: dict[int, list[tuple[int | None, int]]] = defaultdict(list)
    for mop in op.mops:
        if isinstance(mop, Send):
            out[mop.key].append((mop.offset, mop.value))
    return dict(out)


def _reads(op: HistoryOp) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for mop in op.mops:
        if isinstance(mop, Poll) and mop.reads:
            for key, pairs in mop.reads.items():
                out[key].extend(pairs)
    return dict(out)


@dataclass
class KeyOrder:
    """One key's log as the history saw it."""

    log: dict[int, set[int]] = field(default_factory=dict)  # offset -> values seen there
    by_index: list[int] = field(default_factory=list)  # dense index -> value (the smallest, on conflict)
    offsets: list[int] = field(default_factory=list)  # dense index -> offset
    by_value: dict[int, int] = field(default_factory=dict)  # value -> its first dense index
    last_index: dict[int, int] = field(default_factory=dict)  # value -> its last dense index

    def finish(self) -> None:
        for index, offset in enumerate(sorted(self.log)):
            values = self.log[offset]
            self.offsets.append(offset)
            self.by_index.append(min(values))
            for value in values:
                self.by_value.setdefault(value, index)
                self.last_index[value] = index

    def delta(self, v1: int, v2: int) -> int | None:
        """How far v2 is after v1 in this key's order (1: next; None: one of them is unplaced)."""
        i1, i2 = self.by_value.get(v1), self.by_value.get(v2)
        return None if i1 is None or i2 is None else i2 - i1

    def between(self, v1: int, v2: int, *, limit: int = 10) -> list[int]:
        """The values strictly between v1 and v2 in the order (the ones a skip jumped over)."""
        i1, i2 = self.by_value[v1], self.by_value[v2]
        return self.by_index[i1 + 1 : min(i2, i1 + 1 + limit)]


@dataclass
class QueueAnalysis:
    """The indexes every check reads, built once per history."""

    ops: list[HistoryOp]  # every completion, in history order
    rw: list[HistoryOp]  # completions of send, poll and txn
    writes: dict[int, dict[int, list[tuple[int | None, int]]]]  # op index -> key -> (offset, value)
    reads: dict[int, dict[int, list[tuple[int, int]]]]  # op index -> key -> (offset, value)
    writer_of: dict[tuple[int, int], HistoryOp]  # (key, value) -> the completion that sent it
    ok_reads: dict[int, set[int]]  # key -> values some ok operation polled
    orders: dict[int, KeyOrder]
    values_read: dict[int, dict[int, list[int]]] = field(default_factory=dict)  # op index -> key -> values

    def read_values(self, op: HistoryOp) -> dict[int, list[int]]:
        return self.values_read.get(op.index, {})

    def write_values(self, op: HistoryOp) -> dict[int, list[int]]:
        return {k: [v for _, v in pairs] for k, pairs in self.writes.get(op.index, {}).items()}

    def must_have_committed(self, op: HistoryOp) -> bool:
        """ok, or info with a value an ok operation polled (Jepsen's ``must-have-committed?``)."""
        if op.type == "ok":
            return True
        if op.type != "info":
            return False
        written = self.writes.get(op.index, {})
        return any(v in self.ok_reads.get(k, ()) for k, pairs in written.items() for _, v in pairs)

    def order(self, key: int) -> KeyOrder:
        return self.orders.get(key) or KeyOrder()


def analyse(history: Iterable[HistoryOp]) -> QueueAnalysis:
    ops = [op for op in history if op.type != "invoke"]
    rw = [op for op in ops if op.f in _RW]
    writes = {op.index: w for op in rw if (w := _writes(op))}
    reads = {op.index: r for op in rw if (r := _reads(op))}
    writer_of: dict[tuple[int, int], HistoryOp] = {}
    ok_reads: dict[int, set[int]] = defaultdict(set)
    for op in rw:
        for key, pairs in writes.get(op.index, {}).items():
            for _, value in pairs:
                writer_of[(key, value)] = op
        if op.type == "ok":
            for key, rpairs in reads.get(op.index, {}).items():
                ok_reads[key].update(v for _, v in rpairs)
    values_read = {i: {k: [v for _, v in pairs] for k, pairs in r.items()} for i, r in reads.items()}
    analysis = QueueAnalysis(ops, rw, writes, reads, writer_of, dict(ok_reads), {}, values_read)
    orders: dict[int, KeyOrder] = defaultdict(KeyOrder)
    for op in rw:
        if analysis.must_have_committed(op):
            for key, wpairs in writes.get(op.index, {}).items():
                for offset, value in wpairs:
                    if offset is not None:
                        orders[key].log.setdefault(offset, set()).add(value)
        for key, rpairs in reads.get(op.index, {}).items():
            for offset, value in rpairs:
                orders[key].log.setdefault(offset, set()).add(value)
    for order in orders.values():
        order.finish()
    analysis.orders = dict(orders)
    return analysis


def consecutive(values: Sequence[int]) -> Iterable[tuple[int, int]]:
    return zip(values, values[1:], strict=False)
