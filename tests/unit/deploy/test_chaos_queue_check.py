"""The queue workload's checker (issue 28): hand-made histories holding each anomaly class, a clean
one, and a property: a history of a correct in-memory queue has no anomaly that fails a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlog.deploy.chaos import QUEUE_ALLOWED, QUEUE_ANOMALIES, HistoryOp, Poll, Send, check_queue


class _H:
    """A history under construction: each `op` is an invocation and its completion."""

    def __init__(self) -> None:
        self.ops: list[HistoryOp] = []

    def op(
        self,
        process: int,
        f: str,
        value: Sequence[Any],
        op_type: str = "ok",
        *,
        rebalance: Sequence[int] = (),
    ) -> HistoryOp:
        invoked: Any = value
        if f in ("send", "poll", "txn"):
            invoked = tuple(Send(m.key, m.value) if isinstance(m, Send) else Poll() for m in value)
        self.ops.append(HistoryOp(len(self.ops), process, "invoke", f, tuple(invoked)))
        done = HistoryOp(len(self.ops), process, op_type, f, tuple(value), rebalance=tuple(rebalance))
        self.ops.append(done)
        return done

    def send(self, process: int, *sends: tuple[int, int, int | None], op_type: str = "ok") -> HistoryOp:
        return self.op(process, "send", [Send(k, v, o) for k, v, o in sends], op_type)

    def poll(self, process: int, reads: Mapping[int, Sequence[tuple[int, int]]], **kw: Any) -> HistoryOp:
        return self.op(process, "poll", [Poll({k: tuple(p) for k, p in reads.items()})], **kw)

    def check(self) -> Any:
        return check_queue(self.ops)


def _three_sent() -> _H:
    h = _H()
    h.send(0, (0, 1, 0), (0, 2, 1), (0, 3, 2))
    return h


def test_a_clean_history_is_clean() -> None:
    h = _three_sent()
    h.op(1, "txn", [Send(1, 10, 0), Poll({0: ((0, 1), (1, 2))})])
    h.poll(2, {0: [(0, 1)]})
    h.poll(2, {0: [(1, 2), (2, 3)], 1: [(0, 10)]})
    r = h.check()
    assert r.ok and r.anomalies == [] and not any(r.counts.values()), r.to_json()
    assert (r.operations, r.transactions) == (4, 1)
    out = r.to_json()
    assert set(QUEUE_ANOMALIES) | {"operations", "transactions", "anomalies", "allowed", "examples"} == set(out)


def test_lost_write_below_what_was_read() -> None:
    h = _three_sent()
    h.poll(1, {0: [(2, 3)]})  # reads offset 2 but nobody ever reads 0 and 1
    r = h.check()
    assert r.anomalies == ["lost_write", "unseen"] and r.counts["lost_write"] == 2 and r.counts["unseen"] == 2
    assert r.examples["lost_write"] == {
        "key": 0,
        "value": 1,
        "offset": 0,
        "writer": {"index": 1, "process": 0, "type": "ok", "f": "send"},
        "highest_read_offset": 2,
    }


def test_an_unknown_send_not_seen_is_not_lost_but_one_seen_elsewhere_is_committed() -> None:
    h = _H()
    h.send(0, (0, 1, 0), op_type="info")  # unknown, never read: may not have happened
    h.send(0, (0, 2, 1))
    h.send(3, (1, 7, 0), (1, 8, 1), op_type="info")  # unknown, but 8 was read: it committed
    h.poll(1, {0: [(1, 2)], 1: [(1, 8)]})
    r = h.check()
    assert r.counts["lost_write"] == 1 and r.examples["lost_write"]["value"] == 7
    assert r.counts["unseen"] == 0  # unseen counts ok sends only


def test_unseen() -> None:
    h = _H()
    h.send(0, (0, 1, 0), (1, 5, 0))
    h.poll(1, {1: [(0, 5)]})
    r = h.check()
    assert r.anomalies == ["unseen"] and r.examples["unseen"] == {
        "key": 0,
        "value": 1,
        "offset": 0,
        "writer": {"index": 1, "process": 0, "type": "ok", "f": "send"},
    }


def test_duplicate() -> None:
    h = _H()
    h.send(0, (0, 1, 0))
    h.poll(1, {0: [(0, 1)]})
    h.poll(2, {0: [(3, 1)]})
    r = h.check()
    assert r.anomalies == ["duplicate"] and r.examples["duplicate"] == {"key": 0, "value": 1, "offsets": [0, 3]}


def test_inconsistent_offsets() -> None:
    h = _H()
    h.send(0, (0, 1, 0))
    h.send(1, (0, 2, 0))
    h.poll(2, {0: [(0, 1)]})
    h.poll(3, {0: [(0, 2)]})
    r = h.check()
    assert r.anomalies == ["inconsistent_offsets"]
    assert r.examples["inconsistent_offsets"] == {"key": 0, "offset": 0, "values": [1, 2]}


def test_poll_skip_between_one_process_polls() -> None:
    h = _three_sent()
    h.poll(1, {0: [(0, 1)]})
    h.poll(1, {0: [(2, 3)]})
    h.poll(2, {0: [(0, 1), (1, 2), (2, 3)]})
    r = h.check()
    assert r.anomalies == ["poll_skip"]
    example = r.examples["poll_skip"]
    assert (example["key"], example["values"], example["delta"], example["skipped"]) == (0, [1, 3], 2, [2])
    assert [o["index"] for o in example["ops"]] == [3, 5]


def test_nonmonotonic_poll() -> None:
    h = _three_sent()
    h.poll(1, {0: [(0, 1), (1, 2)]})
    h.poll(1, {0: [(1, 2), (2, 3)]})
    r = h.check()
    assert r.anomalies == ["nonmonotonic_poll"] and r.examples["nonmonotonic_poll"]["delta"] == 0


def test_rebalance_assign_and_crash_excuse_a_jump() -> None:
    h = _three_sent()
    h.poll(1, {0: [(0, 1), (1, 2)]})
    h.poll(1, {0: [(0, 1)]}, rebalance=[0])  # the group moved partition 0: back to the committed offset
    h.op(1, "assign", [1])
    h.op(1, "assign", [0, 1])
    h.poll(1, {0: [(2, 3)]})  # key 0 was dropped by the first assign
    h.op(1, "crash", [])
    h.poll(1, {0: [(0, 1)]})
    r = h.check()
    assert r.ok and r.counts["poll_skip"] == r.counts["nonmonotonic_poll"] == 0, r.to_json()
    # a failed assign changes nothing
    h.op(1, "assign", [1], "fail")
    h.poll(1, {0: [(0, 1)]})
    assert h.check().anomalies == ["nonmonotonic_poll"]


def test_a_rewind_recorded_on_a_failed_send_excuses_the_reread() -> None:
    """A transactional consumer whose send-only transaction was aborted is sought back to its
    group's committed offsets (the 30-minute queue soak, seed 20262801: a failed ``send`` op, then a
    poll reading offset 1107 of key 1 again). The workload names the sought keys in the failed
    op's ``rebalance``, whatever the op's ``f``; without them the re-read is nonmonotonic."""
    h = _three_sent()
    h.poll(1, {0: [(0, 1), (1, 2)]})
    h.send(1, (1, 10, None), op_type="fail")
    h.poll(1, {0: [(1, 2), (2, 3)]})
    assert h.check().anomalies == ["nonmonotonic_poll"]
    h = _three_sent()
    h.poll(1, {0: [(0, 1), (1, 2)]})
    h.op(1, "send", [Send(1, 10, None)], "fail", rebalance=[0])
    h.poll(1, {0: [(1, 2), (2, 3)]})
    r = h.check()
    assert r.ok and r.counts["nonmonotonic_poll"] == 0, r.to_json()


def test_int_poll_skip_and_int_nonmonotonic_poll() -> None:
    h = _three_sent()
    h.op(1, "txn", [Poll({0: ((0, 1),)}), Poll({0: ((2, 3),)})])
    h.poll(2, {0: [(0, 1), (1, 2), (2, 3)]})
    r = h.check()
    assert r.anomalies == ["int_poll_skip"]
    assert r.examples["int_poll_skip"]["skipped"] == [2] and r.examples["int_poll_skip"]["op"]["index"] == 3
    h = _three_sent()
    h.poll(1, {0: [(1, 2), (0, 1), (1, 2), (2, 3)]})
    r = h.check()
    assert r.anomalies == ["int_nonmonotonic_poll"] and r.examples["int_nonmonotonic_poll"]["values"] == [2, 1]
    h = _three_sent()
    h.poll(1, {0: [(1, 2), (0, 1), (1, 2), (2, 3)]}, rebalance=[0])
    assert h.check().ok


def test_int_send_skip_and_g0_are_reported_and_allowed() -> None:
    h = _H()
    h.send(0, (0, 1, 0), (0, 3, 2))  # another producer's record landed between these two
    h.send(1, (0, 2, 1))
    h.poll(2, {0: [(0, 1), (1, 2), (2, 3)]})
    r = h.check()
    assert r.counts["int_send_skip"] == 1 and r.examples["int_send_skip"]["skipped"] == [2]
    assert r.counts["g0"] == 1  # 1 -> 2 -> 3: each send op writes right after the other
    assert r.ok and QUEUE_ALLOWED == {"int_send_skip", "g0"}
    strict = check_queue(h.ops, allowed=frozenset())
    assert strict.anomalies == ["int_send_skip", "g0"] and not strict.ok


def test_int_nonmonotonic_send() -> None:
    h = _H()
    h.send(0, (0, 1, 1), (0, 2, 0))
    h.poll(1, {0: [(0, 2), (1, 1)]})
    r = h.check()
    assert r.anomalies == ["int_nonmonotonic_send"] and r.examples["int_nonmonotonic_send"]["delta"] == -1


def test_aborted_read_and_g1a() -> None:
    h = _H()
    h.op(0, "txn", [Send(0, 5, 0)], "fail")  # aborted
    h.send(1, (0, 6, 2))
    h.poll(2, {0: [(0, 5), (2, 6)]})
    r = h.check()
    assert r.anomalies == ["aborted_read"]
    assert r.examples["aborted_read"] == {
        "key": 0,
        "value": 5,
        "writer": {"index": 1, "process": 0, "type": "fail", "f": "txn"},
        "reader": {"index": 5, "process": 2, "type": "ok", "f": "poll"},
    }
    h.op(3, "txn", [Poll({0: ((0, 5),)}), Send(1, 9, 0)])  # a committed transaction reads it too
    h.poll(2, {1: [(0, 9)]})
    r = h.check()
    assert r.anomalies == ["aborted_read", "g1a"] and r.counts["aborted_read"] == 2 and r.counts["g1a"] == 1
    assert r.examples["g1a"]["reader"] == {"index": 7, "process": 3, "type": "ok", "f": "txn"}


def test_g0_write_cycle() -> None:
    h = _H()
    h.op(0, "txn", [Send(0, 1, 0), Send(1, 4, 1)])
    h.op(1, "txn", [Send(0, 2, 1), Send(1, 3, 0)])
    h.poll(2, {0: [(0, 1), (1, 2)], 1: [(0, 3), (1, 4)]})
    r = h.check()
    assert r.ok and r.counts["g0"] == 1 and r.counts["g1c"] == 0
    steps = r.examples["g0"]["cycle"]
    assert [(s["from"]["index"], s["to"]["index"], s["rel"]) for s in steps] in (
        [(1, 3, "ww"), (3, 1, "ww")],
        [(3, 1, "ww"), (1, 3, "ww")],
    )


def test_g1c_circular_information_flow() -> None:
    h = _H()
    h.op(0, "txn", [Send(0, 1, 0), Poll({1: ((0, 2),)})])
    h.op(1, "txn", [Send(1, 2, 0), Poll({0: ((0, 1),)})])
    r = h.check()
    assert r.anomalies == ["g1c"] and r.counts["g1c"] == 1
    steps = r.examples["g1c"]["cycle"]
    assert len(steps) == 2 and {s["rel"] for s in steps} == {"wr"} and {s["key"] for s in steps} == {0, 1}


def test_g1c_reports_the_shortest_cycle_of_a_component() -> None:
    h = _H()
    # a: sends 1 to k0, reads k2's 3. b: reads 1, sends 2 to k1. c: reads 2, sends 3 to k2 (a 3-cycle);
    # d and a also read each other's writes (a 2-cycle inside the same component)
    h.op(0, "txn", [Send(0, 1, 0), Poll({2: ((0, 3),), 3: ((0, 4),)})])
    h.op(1, "txn", [Poll({0: ((0, 1),)}), Send(1, 2, 0)])
    h.op(2, "txn", [Poll({1: ((0, 2),)}), Send(2, 3, 0)])
    h.op(3, "txn", [Poll({0: ((0, 1),)}), Send(3, 4, 0)])
    r = h.check()
    assert r.counts["g1c"] == 1 and len(r.examples["g1c"]["cycle"]) == 2


# -- the property: a correct in-memory queue (read_committed, transactions, assign, crashes) ---------

_KEYS = 3


class _Queue:
    """Partitions with transactional records and markers; consumers read committed data up to the
    last stable offset, in order, skipping aborted records and markers."""

    def __init__(self) -> None:
        self.logs: dict[int, list[tuple[int | None, int | None]]] = {k: [] for k in range(_KEYS)}  # (value, txn)
        self.state: dict[int, str] = {}  # txn -> open / committed / aborted

    def append(self, key: int, value: int | None, txn: int | None) -> int:
        self.logs[key].append((value, txn))
        return len(self.logs[key]) - 1

    def end(self, txn: int, keys: set[int], outcome: str) -> None:
        self.state[txn] = outcome
        for key in keys:
            self.append(key, None, None)  # the marker

    def read(self, key: int, position: int, limit: int) -> tuple[list[tuple[int, int]], int]:
        out: list[tuple[int, int]] = []
        log = self.logs[key]
        while position < len(log) and len(out) < limit:
            value, txn = log[position]
            if txn is not None and self.state[txn] == "open":
                break  # the last stable offset
            if value is not None and (txn is None or self.state[txn] == "committed"):
                out.append((position, value))
            position += 1
        return out, position


_VALUES = iter(range(1, 10**9))  # unique over every history of the session: a value names one send


def _micro_op(
    draw: Any, queue: _Queue, txn: int, invoked: list[Any], done: list[Any], keys: set[int], poll: Any
) -> None:
    if draw(st.booleans()):
        k, v = draw(st.integers(0, _KEYS - 1)), next(_VALUES)
        invoked.append(Send(k, v))
        done.append(Send(k, v, queue.append(k, v, txn)))
        keys.add(k)
    else:
        invoked.append(Poll())
        done.append(poll(draw(st.integers(1, 4))))


def _model_history(draw: Any) -> list[HistoryOp]:
    queue, ops = _Queue(), []
    next_value, next_txn, next_process = _VALUES, iter(range(10**6)), iter(range(100, 10**6))
    processes: dict[int, dict[str, Any]] = {p: {"pos": {}, "open": None} for p in range(3)}

    def record(process: int, f: str, invoked: Any, op_type: str, value: Any) -> None:
        ops.append(HistoryOp(len(ops), process, "invoke", f, invoked))
        ops.append(HistoryOp(len(ops), process, op_type, f, value))

    def poll(state: dict[str, Any], limit: int) -> Poll:
        reads = {}
        for key in sorted(state["pos"]):
            pairs, state["pos"][key] = queue.read(key, state["pos"][key], limit)
            if pairs:
                reads[key] = tuple(pairs)
        return Poll(reads)

    for _ in range(draw(st.integers(1, 40))):
        p = draw(st.sampled_from(sorted(processes)))
        state = processes[p]
        if state["open"] is not None and draw(st.booleans()):  # one more micro-operation of the open one
            txn, invoked, done, keys, before = state["open"]
            _micro_op(draw, queue, txn, invoked, done, keys, lambda limit: poll(state, limit))
            continue
        if state["open"] is not None:  # end the open transaction: commit, abort, or unknown
            txn, invoked, done, keys, before = state["open"]
            outcome = draw(st.sampled_from(["committed", "aborted"]))
            queue.end(txn, keys, outcome)
            op_type = draw(st.sampled_from(["ok", "info"])) if outcome == "committed" else "fail"
            state["open"] = None
            if op_type == "fail":
                state["pos"] = before  # seek back to the committed offsets
            ops.append(HistoryOp(len(ops), p, "invoke", "txn", tuple(invoked)))
            ops.append(HistoryOp(len(ops), p, op_type, "txn", tuple(done)))
            if op_type == "info":  # Jepsen's way: an indefinite operation crashes its process
                del processes[p]
                processes[next(next_process)] = {"pos": {}, "open": None}
            continue
        action = draw(st.sampled_from(["send", "poll", "txn", "assign"]))
        if action == "send":
            sends = [(draw(st.integers(0, _KEYS - 1)), next(next_value)) for _ in range(draw(st.integers(1, 3)))]
            done = tuple(Send(k, v, queue.append(k, v, None)) for k, v in sends)
            record(p, "send", tuple(Send(k, v) for k, v in sends), "ok", done)
        elif action == "poll":
            record(p, "poll", (Poll(),), "ok", (poll(state, draw(st.integers(1, 4))),))
        elif action == "assign":
            keys = sorted(draw(st.sets(st.integers(0, _KEYS - 1))))
            state["pos"] = {k: state["pos"].get(k, 0) for k in keys}
            record(p, "assign", tuple(keys), "ok", tuple(keys))
        else:
            txn = next(next_txn)
            queue.state[txn] = "open"
            before, done, invoked, keys = dict(state["pos"]), [], [], set()
            for _ in range(draw(st.integers(1, 3))):
                _micro_op(draw, queue, txn, invoked, done, keys, lambda limit: poll(state, limit))
            state["open"] = (txn, invoked, done, keys, before)
    for p, state in list(processes.items()):  # end every transaction, then read everything back
        if state["open"] is not None:
            txn, invoked, done, keys, _ = state["open"]
            queue.end(txn, keys, "committed")
            ops.append(HistoryOp(len(ops), p, "invoke", "txn", tuple(invoked)))
            ops.append(HistoryOp(len(ops), p, "ok", "txn", tuple(done)))
    final = {"pos": dict.fromkeys(range(_KEYS), 0), "open": None}
    record(999, "assign", tuple(range(_KEYS)), "ok", tuple(range(_KEYS)))
    record(999, "poll", (Poll(),), "ok", (poll(final, 10**6),))
    return ops


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_correct_queue_has_no_anomaly(data: st.DataObject) -> None:
    ops = _model_history(data.draw)
    r = check_queue(ops)
    assert r.ok, r.to_json()
    assert r.operations == sum(1 for op in ops if op.type != "invoke" and op.f in ("send", "poll", "txn"))
