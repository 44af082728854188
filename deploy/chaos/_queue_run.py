"""The queue workload's part of the chaos run (`deploy.chaos._runner`, issue 28): create its topic,
open the history and start the workers; at the end stop them, read every key back into the
history (final reads) and check the history alone (`deploy.chaos._queue_check`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlog.client import Admin, NewTopic
from kraftlog.deploy._cluster import wait_until
from kraftlog.deploy.chaos._queue_check import check_queue, queue_rows
from kraftlog.deploy.chaos._queue_history import HistoryWriter, read_history
from kraftlog.deploy.chaos._queue_workload import QueueWorkload
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity

__all__ = ["QueueRun", "add_queue_result", "queue_result_rows", "start_queue"]

#: seconds between two looks at the cluster or the workers while waiting for them
_POLL_S = 0.2


@dataclass
class QueueRun:
    workload: QueueWorkload
    history: HistoryWriter
    final_reads_done: bool = False
    finished: bool = False

    def finish(self, timeout_s: float = 60.0) -> None:
        """Stop the workers (each ends its transaction), then the final reads; close the history."""
        if self.finished:
            return
        self.finished = True
        try:
            self.workload.stop()
            self.final_reads_done = self.workload.final_reads(timeout_s)
        finally:
            self.history.close()


def start_queue(
    bootstrap_servers: str,
    topic: str,
    settings: Any,
    admin: Admin,
    pending: Callable[[], str | None],
    *,
    security: ChaosSecurity = PLAINTEXT,
) -> QueueRun:
    """Create the queue topic (``settings.partitions`` partitions: the history's keys, RF 3,
    min.insync.replicas 2), open the history at ``settings.history_path`` and start the workers;
    return once they sent and polled and the cluster converged again (the first transactions and
    group commits created ``__transaction_state`` and ``__consumer_offsets``)."""
    queue_topic = f"{topic}-queue"
    created = admin.create_topics(
        [NewTopic(queue_topic, settings.partitions, 3, configs={"min.insync.replicas": "2"})], timeout_ms=30_000
    )
    err = created.topics[0].error
    if err.code != 0:
        raise RuntimeError(f"create topic {queue_topic}: {err.name} {err.message}")
    wait_until(
        lambda: pending() is None, settings.converge_timeout_s, interval_s=_POLL_S, what=f"{queue_topic} replicated"
    )
    meta = {
        "workload": "queue",
        "topic": queue_topic,
        "keys": settings.partitions,
        "workers": settings.queue_workers,
        "transactions": settings.queue_transactions,
    }
    history = HistoryWriter(Path(settings.history_path), seed=settings.seed, meta=meta)
    workload = QueueWorkload(
        bootstrap_servers,
        queue_topic,
        settings.partitions,
        history,
        workers=settings.queue_workers,
        seed=settings.seed,
        security=security,
        transactions=settings.queue_transactions,
    )
    run = QueueRun(workload, history)
    workload.start()
    try:
        wait_until(
            lambda: workload.counts["send_ok"] > 0 and workload.counts["poll_ok"] > 0,
            90,
            interval_s=_POLL_S,
            what="the queue workers' first send and poll",
        )
        wait_until(
            lambda: pending() is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what="__transaction_state and __consumer_offsets to be fully replicated",
        )
    except BaseException:
        run.finish(timeout_s=5)
        raise
    return run


def add_queue_result(result: dict[str, Any], run: QueueRun) -> None:
    """The checker's verdict on the history file (read back: the file is what a re-check sees)."""
    path = run.history.path
    report = check_queue(read_history(path).ops)
    found = report.to_json()
    examples, anomalies = found.pop("examples"), found.pop("anomalies")
    found.pop("allowed")
    result.update(found)
    result["queue_anomalies"] = anomalies
    result["queue_allowed"] = sorted(report.allowed)
    if examples:
        result["queue_examples"] = examples
    result["history"] = str(path)
    result["history_bytes"] = path.stat().st_size
    result["queue_workers"] = run.workload.workers
    result["queue_final_reads"] = run.final_reads_done
    result["queue_ops"] = dict(sorted(run.workload.counts.items()))
    result["ok"] = result["ok"] and report.ok and run.final_reads_done


def queue_result_rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    from kraftlog.deploy.chaos._queue_check import QueueReport

    report = QueueReport(operations=result["operations"], transactions=result["transactions"])
    report.allowed = frozenset(result["queue_allowed"])
    for name in report.counts:
        report.counts[name] = result[name]
    rows = [(f"queue: {label}", value) for label, value in queue_rows(report)]
    rows.append(("queue: final reads reached the end", "yes" if result["queue_final_reads"] else "NO"))
    rows.append(("queue: history", result["history"]))
    return rows
