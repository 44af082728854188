"""The share workload's part of the chaos run (`deploy.chaos._runner`, issue 27): set the share
group's configs and start its members; at the end let them accept everything acknowledged, stop
them and check their logs (`deploy.chaos._share_check`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kraftlog.client import Admin
from kraftlog.deploy._cluster import wait_until
from kraftlog.deploy.chaos._checker import Ack
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity
from kraftlog.deploy.chaos._share_check import check_share
from kraftlog.deploy.chaos._share_workload import DELIVERY_LIMIT, ShareWorkload, set_group_configs

__all__ = ["ShareRun", "add_share_result", "share_result_rows", "start_share"]

_POLL_S = 0.2


class ShareRun:
    """The workload and how it ended (`finish`, once the producers stopped)."""

    def __init__(self, workload: ShareWorkload) -> None:
        self.workload = workload
        self.drained = False
        self.drain_s = 0.0
        self.finished = False

    def finish(self, acks: Iterable[Ack], timeout_s: float = 30.0) -> None:
        if self.finished:
            return
        self.finished = True
        self.drained, self.drain_s = self.workload.finish(((a.partition, a.offset) for a in acks), timeout_s)

    def stop(self) -> None:
        self.finished = True
        self.workload.stop(timeout_s=10)


def start_share(
    bootstrap_servers: str,
    kafka_bootstrap_servers: str,
    topic: str,
    settings: Any,
    admin: Admin,
    pending: Callable[[], str | None],
    *,
    security: ChaosSecurity = PLAINTEXT,
) -> ShareRun:
    """Set the group to read from the start, start ``settings.share_members`` kraftlog and
    ``settings.share_kafka_members`` confluent-kafka members; return once every member had records
    and the cluster converged again (the first share fetches created ``__share_group_state``)."""
    group_id = f"{topic}-share"
    set_group_configs(admin, group_id, {"share.auto.offset.reset": "earliest"})
    workload = ShareWorkload(
        bootstrap_servers,
        kafka_bootstrap_servers,
        topic,
        ours=settings.share_members,
        theirs=settings.share_kafka_members,
        seed=settings.seed,
        group_id=group_id,
        security=security,
    )
    run = ShareRun(workload)
    workload.start()
    try:
        wait_until(
            lambda: workload.consumers_with_records() >= workload.members(),
            90,
            interval_s=_POLL_S,
            what="every share consumer's first records",
        )
        wait_until(
            lambda: pending() is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what="__share_group_state and __consumer_offsets to be fully replicated",
        )
    except BaseException:
        run.stop()
        raise
    return run


def add_share_result(result: dict[str, Any], run: ShareRun, acks: list[Ack]) -> None:
    """The checker's verdict and the workload's own figures, into the run's JSON."""
    w = run.workload
    lock_ms = w.lock_ms or 0  # unknown: no hold of another member can be proved, none is counted
    report = check_share(acks, w.snapshot(), lock_ms=lock_ms, delivery_limit=DELIVERY_LIMIT)
    # a record lost from the log was never accepted either: the share verdict's "lost" includes the
    # produce check's, which stays as "lost_produce" (taken before the share verdict replaces it)
    result["lost_produce"] = result["lost"]
    result.update(report.to_json())
    result["share_members"] = dict(w.clients)
    if w.theirs_skipped:
        result["share_kafka_members_skipped"] = w.theirs_skipped
    result["share_lock_ms"] = lock_ms
    result["share_delivery_limit"] = DELIVERY_LIMIT
    result["share_drained"] = run.drained
    result["share_drain_s"] = round(run.drain_s, 3)
    result["share_poll_failures"] = w.poll_failures
    result["share_commit_failures"] = w.commit_failures
    result["share_consumers_replaced"] = w.replaced
    for kind, shown in report.examples.items():
        result[f"share_{kind}_examples"] = shown
    result["ok"] = result["ok"] and report.ok and run.drained


def share_result_rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("share: deliveries (redeliveries)", f"{result['share_deliveries']} ({result['redeliveries']})"),
        ("share: acknowledged produce never accepted", result["lost"]),
        ("share: accepts of unknown outcome (in doubt)", result["accept_in_doubt"]),
        ("share: records held by two consumers at once", result["double_acquired"]),
        ("share: deliveries past the delivery limit", result["over_delivery_limit"]),
        ("share: members (kraftlog, confluent-kafka)", str(result["share_members"])),
    ]
