"""The history of the queue workload (issue 28): one JSON line per operation invocation and per
completion, written as they happen, after Jepsen's Kafka test (``jepsen.tests.kafka``).

The first line is a header ``{"history": "kraftlog-queue", "version": 1, "seed": S, ...}``; every
other line is one operation::

    {"index": 7, "process": 2, "type": "ok", "f": "txn", "time_ns": 81234,
     "value": [["send", 1, [12, 40]], ["poll", {"0": [[3, 17], [4, 18]]}]]}

* ``type``: ``invoke`` when the operation starts; ``ok`` (it happened), ``fail`` (it certainly did
  not: an aborted transaction, a send the broker refused) or ``info`` (unknown: a timeout, a crash)
  when it ends. A process runs one operation at a time: its completion follows its invocation.
* ``f``: ``send``, ``poll``, ``txn`` (micro-operations in a list), ``assign`` and ``subscribe``
  (``value``: the keys asked for), ``crash`` (the process's clients were dropped).
* micro-operations: ``["send", key, value]`` on invocation, ``["send", key, [offset, value]]`` on
  completion (the offset the broker assigned, ``null`` when unknown); ``["poll"]`` on invocation,
  ``["poll", {key: [[offset, value], ...]}]`` on completion. A key is a partition of the workload's
  topic (its number); values are integers unique over the run.
* ``rebalance``: keys whose assignment changed while the operation ran (a group rebalance), or
  whose position the worker moved back to the group's committed offset after aborting the
  operation's transaction, so the checker does not expect that consumer's reads of them to be
  contiguous.
* ``time_ns``: ``time.monotonic_ns()`` of the writing process, for people (the checker orders by
  ``index``).

A run killed mid-line leaves a torn last line; `read_history` drops it (and only it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "HISTORY_FORMAT",
    "OP_FUNCTIONS",
    "OP_TYPES",
    "History",
    "HistoryOp",
    "HistoryWriter",
    "Mop",
    "Poll",
    "Send",
    "decode_op",
    "encode_op",
    "read_history",
]

HISTORY_FORMAT = "kraftlog-queue"
_VERSION = 1
OP_TYPES = ("invoke", "ok", "fail", "info")
OP_FUNCTIONS = ("send", "poll", "txn", "assign", "subscribe", "crash")
#: what a write may hold in memory before it reaches the file; every operation is flushed anyway
_DEFAULT_BUFFER_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Send:
    """A send of ``value`` to ``key``; ``offset`` is the broker's answer (None: not known)."""

    key: int
    value: int
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class Poll:
    """One consumer poll; ``reads`` is None on invocation, else key -> ``(offset, value)`` pairs in
    the order the consumer returned them."""

    reads: Mapping[int, Sequence[tuple[int, int]]] | None = None


Mop = Send | Poll


@dataclass(frozen=True, slots=True)
class HistoryOp:
    index: int
    process: int
    type: str
    f: str
    value: Any  # tuple[Mop, ...] for send/poll/txn; tuple[int, ...] of keys for assign/subscribe; None
    time_ns: int = 0
    rebalance: tuple[int, ...] = ()
    error: str | None = None

    @property
    def mops(self) -> tuple[Mop, ...]:
        return tuple(self.value) if self.f in ("send", "poll", "txn") and self.value else ()


@dataclass
class History:
    meta: dict[str, Any] = field(default_factory=dict)
    ops: list[HistoryOp] = field(default_factory=list)

    @property
    def seed(self) -> int | None:
        seed = self.meta.get("seed")
        return int(seed) if seed is not None else None


def _encode_mop(mop: Mop, *, completed: bool) -> list[Any]:
    if isinstance(mop, Send):
        return ["send", mop.key, [mop.offset, mop.value]] if completed else ["send", mop.key, mop.value]
    if mop.reads is None:
        return ["poll"]
    return ["poll", {str(k): [[o, v] for o, v in pairs] for k, pairs in mop.reads.items()}]


def _decode_mop(raw: Any) -> Mop:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"not a micro-operation: {raw!r}")
    if raw[0] == "send" and len(raw) == 3:
        body = raw[2]
        if isinstance(body, list):
            offset, value = body
            return Send(int(raw[1]), int(value), None if offset is None else int(offset))
        return Send(int(raw[1]), int(body))
    if raw[0] == "poll" and len(raw) in (1, 2):
        if len(raw) == 1 or raw[1] is None:
            return Poll()
        return Poll({int(k): tuple((int(o), int(v)) for o, v in pairs) for k, pairs in raw[1].items()})
    raise ValueError(f"not a micro-operation: {raw!r}")


def encode_op(op: HistoryOp) -> dict[str, Any]:
    """The JSON object of one history line."""
    out: dict[str, Any] = {"index": op.index, "process": op.process, "type": op.type, "f": op.f, "time_ns": op.time_ns}
    if op.f in ("send", "poll", "txn"):
        out["value"] = [_encode_mop(m, completed=op.type != "invoke") for m in op.value or ()]
    else:
        out["value"] = None if op.value is None else list(op.value)
    if op.rebalance:
        out["rebalance"] = list(op.rebalance)
    if op.error is not None:
        out["error"] = op.error
    return out


def decode_op(obj: Mapping[str, Any]) -> HistoryOp:
    op_type, f = obj["type"], obj["f"]
    if op_type not in OP_TYPES or f not in OP_FUNCTIONS:
        raise ValueError(f"unknown operation type {op_type!r} or function {f!r}")
    raw = obj.get("value")
    value: Any
    if f in ("send", "poll", "txn"):
        value = tuple(_decode_mop(m) for m in raw or ())
    else:
        value = None if raw is None else tuple(int(k) for k in raw)
    return HistoryOp(
        index=int(obj["index"]),
        process=int(obj["process"]),
        type=op_type,
        f=f,
        value=value,
        time_ns=int(obj.get("time_ns", 0)),
        rebalance=tuple(int(k) for k in obj.get("rebalance", ())),
        error=obj.get("error"),
    )


def read_history(path: str | Path) -> History:
    """The header and operations of a history file. A torn last line (the writer was killed while
    writing it) is dropped; any other line that is not an operation raises ValueError naming it."""
    history = History()
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    torn_tail = lines[-1] != ""  # a complete file ends with a newline
    body = lines if torn_tail else lines[:-1]
    for number, line in enumerate(body, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if number == 1 and obj.get("history") == HISTORY_FORMAT:
                history.meta = dict(obj)
                continue
            history.ops.append(decode_op(obj))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            if torn_tail and number == len(body):
                break
            raise ValueError(f"{path}: line {number} is not a queue history line: {err}") from None
    if not history.meta:
        raise ValueError(f"{path}: no '{HISTORY_FORMAT}' header line")
    return history


class HistoryWriter:
    """Appends a history to a file as operations happen; threads of one run share it.

    Each line is written and flushed under one lock, so lines never interleave, the file's order is
    the ``index`` order, and a killed run loses at most the line being written. ``buffer_bytes``
    bounds what a line may hold in memory before it reaches the file.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        seed: int,
        meta: Mapping[str, Any] | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        buffer_bytes: int = _DEFAULT_BUFFER_BYTES,
    ) -> None:
        self.path = Path(path)
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._next_index = 0
        self._file: TextIO = self.path.open("w", encoding="utf-8", buffering=max(1, buffer_bytes))
        self._write({"history": HISTORY_FORMAT, "version": _VERSION, "seed": seed, **(meta or {})})

    def _write(self, obj: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self._file.flush()

    def _append(
        self, process: int, op_type: str, f: str, value: Any, rebalance: Sequence[int], error: str | None
    ) -> HistoryOp:
        with self._lock:
            op = HistoryOp(
                index=self._next_index,
                process=process,
                type=op_type,
                f=f,
                value=value,
                time_ns=self._clock_ns(),
                rebalance=tuple(sorted(set(rebalance))),
                error=error,
            )
            self._next_index += 1
            self._write(encode_op(op))
            return op

    def invoke(self, process: int, f: str, value: Any) -> HistoryOp:
        if f not in OP_FUNCTIONS:
            raise ValueError(f"unknown operation function {f!r}")
        return self._append(process, "invoke", f, value, (), None)

    def complete(
        self,
        invocation: HistoryOp,
        op_type: str,
        value: Any,
        *,
        rebalance: Sequence[int] = (),
        error: str | None = None,
    ) -> HistoryOp:
        """The completion of ``invocation`` (same process and function): ok, fail or info."""
        if op_type not in ("ok", "fail", "info"):
            raise ValueError(f"a completion is ok, fail or info, not {op_type!r}")
        return self._append(invocation.process, op_type, invocation.f, value, rebalance, error)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
