"""The queue workload's history file (issue 28): JSON lines written as operations happen, read back."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kraftlog.deploy.chaos import HistoryOp, HistoryWriter, Poll, Send, read_history


def _ticks() -> object:
    now = iter(range(1000, 10**6, 10))
    return lambda: next(now)


def test_written_operations_read_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, seed=7, meta={"workload": "queue"}, clock_ns=_ticks()) as w:  # type: ignore[arg-type]
        inv = w.invoke(3, "txn", (Send(1, 40), Poll()))
        done = w.complete(inv, "ok", (Send(1, 40, 12), Poll({0: ((3, 17), (4, 18))})), rebalance=[0, 0])
        a = w.complete(w.invoke(4, "assign", (0, 1)), "ok", (0, 1))
        s = w.complete(w.invoke(4, "send", (Send(2, 41),)), "info", (Send(2, 41),), error="timed out")
    history = read_history(path)
    assert history.seed == 7 and history.meta["workload"] == "queue" and history.meta["version"] == 1
    a_inv = HistoryOp(2, 4, "invoke", "assign", (0, 1), 1020)
    s_inv = HistoryOp(4, 4, "invoke", "send", (Send(2, 41),), 1040)
    assert history.ops == [inv, done, a_inv, a, s_inv, s]
    assert done.index == 1 and done.time_ns == 1010 and done.rebalance == (0,)
    assert history.ops[-1].value == (Send(2, 41, None),) and history.ops[-1].error == "timed out"
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"history": "kraftlog-queue", "version": 1, "seed": 7, "workload": "queue"}
    assert json.loads(lines[2])["value"] == [["send", 1, [12, 40]], ["poll", {"0": [[3, 17], [4, 18]]}]]
    assert json.loads(lines[1])["value"] == [["send", 1, 40], ["poll"]]


def test_every_line_is_on_disk_when_its_operation_returns(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, seed=1, buffer_bytes=1 << 20)
    w.invoke(0, "poll", (Poll(),))
    assert len(path.read_text().splitlines()) == 2  # flushed although the buffer could hold it
    w.close()


def test_a_torn_last_line_is_dropped_and_a_bad_line_elsewhere_is_named(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, seed=1) as w:
        w.complete(w.invoke(0, "send", (Send(0, 1),)), "ok", (Send(0, 1, 0),))
    text = path.read_text()
    path.write_text(text + '{"index": 2, "process": 0, "ty')  # killed mid-line
    assert len(read_history(path).ops) == 2
    path.write_text(text.replace('"f":"send"', '"f":"frobnicate"', 1))
    with pytest.raises(ValueError, match="line 2"):
        read_history(path)
    path.write_text(text.split("\n", 1)[1])
    with pytest.raises(ValueError, match="header"):
        read_history(path)


def test_bad_types_are_refused(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl", seed=1) as w:
        with pytest.raises(ValueError):
            w.invoke(0, "dance", ())
        inv = w.invoke(0, "poll", (Poll(),))
        with pytest.raises(ValueError):
            w.complete(inv, "invoke", ())


def test_threads_share_one_writer_without_tearing_lines(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, seed=1, buffer_bytes=64) as w:

        def worker(process: int) -> None:
            for i in range(50):
                inv = w.invoke(process, "send", (Send(process, i),))
                w.complete(inv, "ok", (Send(process, i, i),))

        threads = [threading.Thread(target=worker, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ops = read_history(path).ops
    assert [op.index for op in ops] == list(range(400))
    for p in range(4):
        mine = [op for op in ops if op.process == p]
        assert [op.type for op in mine] == ["invoke", "ok"] * 50


def _saved(path: Path, *, lose_one: bool) -> Path:
    with HistoryWriter(path, seed=11) as w:
        w.complete(w.invoke(0, "send", (Send(0, 1), Send(0, 2))), "ok", (Send(0, 1, 0), Send(0, 2, 1)))
        read = ((1, 2),) if lose_one else ((0, 1), (1, 2))
        w.complete(w.invoke(1, "poll", (Poll(),)), "ok", (Poll({0: read}),))
    return path


def test_chaos_check_rechecks_a_saved_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlog.cli.__main__ import main

    clean = _saved(tmp_path / "clean.jsonl", lose_one=False)
    assert main(["chaos", "check", "--history", str(clean)]) == 0
    lines = capsys.readouterr().out.splitlines()
    result = json.loads(lines[-1])
    assert result["ok"] and result["anomalies"] == [] and result["seed"] == 11 and result["operations"] == 2
    assert any(line.startswith("lost_write") for line in lines[:-1])
    lossy = _saved(tmp_path / "lossy.jsonl", lose_one=True)
    assert main(["chaos", "check", "--history", str(lossy), "--output", "json"]) == 1
    (only,) = capsys.readouterr().out.splitlines()
    result = json.loads(only)
    assert result["anomalies"] == ["lost_write", "unseen"] and result["lost_write"] == 1
    assert result["examples"]["lost_write"]["value"] == 1
    assert main(["chaos", "check", "--history", str(tmp_path / "missing.jsonl")]) == 2


def test_queue_workload_options() -> None:
    import argparse

    from kraftlog.cli._chaos import QUEUE_OWN_CLUSTER_OVERRIDES, add_parser, run
    from kraftlog.cli._common import UserError
    from kraftlog.deploy.chaos import WORKLOADS

    def parse(*argv: str) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_parser(parser.add_subparsers(dest="command"))
        return parser.parse_args(["chaos", "run", *argv])

    assert "queue" in WORKLOADS
    args = parse("--workload", "queue", "--queue-workers", "6", "--history", "h.jsonl")
    assert (args.workload, args.queue_workers, args.history) == ("queue", 6, "h.jsonl")
    assert parse().queue_workers == 4 and parse().history is None
    with pytest.raises(UserError, match="--queue-workers must be >= 1"):
        run(parse("--workload", "queue", "--queue-workers", "0"))
    with pytest.raises(UserError, match="--workload queue belongs to the data profile"):
        run(parse("--workload", "queue", "--profile", "quorum"))
    with pytest.raises(UserError, match="--history is the queue workload's"):
        run(parse("--history", "h.jsonl"))
    # transactions and both group protocols on the run's own cluster
    assert QUEUE_OWN_CLUSTER_OVERRIDES["transaction.state.log.num.partitions"] == 6
    assert QUEUE_OWN_CLUSTER_OVERRIDES["group.consumer.session.timeout.ms"] == 6000


def test_queue_workers_cover_every_client_kind_and_record_polls_by_key() -> None:
    from types import SimpleNamespace

    from kraftlog.deploy.chaos._queue_workload import WORKER_KINDS, _poll_of

    assert {k.producer for k in WORKER_KINDS} == {"idempotent", "transactional"}
    assert {k.consumer for k in WORKER_KINDS} == {"assign", "subscribe"}
    assert {k.group_protocol for k in WORKER_KINDS if k.consumer == "subscribe"} == {"classic", "consumer"}
    assert any(k.auto_commit for k in WORKER_KINDS)
    records = [
        SimpleNamespace(topic=t, partition=p, offset=o, value=v)
        for t, p, o, v in [
            ("q", 1, 5, b"17"),
            ("other", 1, 6, b"x"),
            ("q", 0, 2, b"3"),
            ("q", 1, 7, b"18"),
        ]
    ]
    assert _poll_of(records, "q") == Poll({1: ((5, 17), (7, 18)), 0: ((2, 3),)})


def test_queue_without_transactions_runs_idempotent_workers_only(tmp_path: Path) -> None:
    from kraftlog.deploy.chaos._queue_history import HistoryWriter
    from kraftlog.deploy.chaos._queue_workload import QueueWorkload

    history = HistoryWriter(tmp_path / "h.jsonl", seed=1, meta={"workload": "queue"})
    try:
        plain = QueueWorkload("127.0.0.1:1", "t", 3, history, workers=4, seed=1, transactions=False)
        mixed = QueueWorkload("127.0.0.1:1", "t", 3, history, workers=4, seed=1)
    finally:
        history.close()
    assert {w.kind.producer for w in plain._threads} == {"idempotent"}
    assert {w.kind.consumer for w in plain._threads} == {"assign", "subscribe"}
    assert {w.kind.producer for w in mixed._threads} == {"idempotent", "transactional"}
