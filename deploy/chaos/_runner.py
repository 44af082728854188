"""The chaos run: a seeded schedule of faults against a target while the workload runs, then heal,
wait for convergence, read everything back and check it.

Ordering: every fault is healed before the next one is chosen (so at most a minority is ever down),
and the checker reads back only after the cluster converged, so a "lost" record is really gone, not
merely unreachable. The report's last line is one JSON object. Every connection of the run (admin,
health probe, workloads, checker) uses the target's `ChaosSecurity` (``target.security``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from kraftlog.client import Admin, NewTopic
from kraftlog.common import coordinator_partition
from kraftlog.deploy._cluster import wait_until
from kraftlog.deploy.chaos._checker import check, longest_gaps
from kraftlog.deploy.chaos._drain import DrainOutcome, drain_fields
from kraftlog.deploy.chaos._eos_run import add_eos_result, eos_read_back, start_eos, txn_coordinators
from kraftlog.deploy.chaos._eos_workload import EosWorkload
from kraftlog.deploy.chaos._faults import (
    CLOCK_KINDS,
    DISK_FULL,
    DISK_KINDS,
    FAULT_KINDS,
    NETWORK_KINDS,
    STORAGE_KINDS,
    ClusterView,
    choose_fault,
    heal,
    inject,
)
from kraftlog.deploy.chaos._group_check import check_group
from kraftlog.deploy.chaos._group_workload import GROUP_PROTOCOLS, GroupWorkload
from kraftlog.deploy.chaos._health import HealthProbe, quorum_pending
from kraftlog.deploy.chaos._queue_run import QueueRun, add_queue_result, start_queue
from kraftlog.deploy.chaos._report import FaultRecord, attribute_gaps, print_table, report_fault
from kraftlog.deploy.chaos._share_run import ShareRun, add_share_result, start_share
from kraftlog.deploy.chaos._targets import ChaosTarget
from kraftlog.deploy.chaos._workload import Workload, read_back

__all__ = ["ChaosSettings", "FaultRecord", "run_chaos", "converged", "WORKLOADS"]

#: data: acks=all producers only; group: also consumer members of one group (`deploy.chaos._group_workload`);
#: eos: also transactional read-process-write processors from the topic to a second one (`deploy.chaos._eos_workload`);
#: queue: also Jepsen's queue workload on a topic of its own, checked from its history (`deploy.chaos._queue_workload`);
#: share: also share consumers of one share group, kraftlog's and confluent-kafka's (`deploy.chaos._share_workload`)
WORKLOADS = ("data", "group", "eos", "queue", "share")

_log = structlog.get_logger("deploy.chaos")
STORAGE_KINDS_SET = frozenset(STORAGE_KINDS)
#: faults held until the cluster converged: each takes a broker's replicas out (damaged, or in a
#: full log dir, then restarted), a minority only while every other replica is whole and in the ISR
HELD_KINDS = STORAGE_KINDS_SET | {DISK_FULL}

OFFSETS_TOPIC = "__consumer_offsets"
#: the workload topic's segments when storage faults run: small enough to roll within a short run,
#: so the damaged node has rolled segments (with offset index files) as well as an active one
STORAGE_TOPIC_CONFIGS = {"segment.bytes": "16384", "index.interval.bytes": "512"}
#: seconds between two looks at the cluster or the workload while the run waits for them
_POLL_S = 0.2


@dataclass(frozen=True)
class ChaosSettings:
    duration_s: float
    seed: int
    interval_s: tuple[float, float] = (5.0, 10.0)
    partitions: int = 3
    session_timeout_ms: int = 9_000
    converge_timeout_s: float = 60.0
    records_per_s_per_partition: float = 50.0
    kinds: tuple[str, ...] = FAULT_KINDS
    workload: str = "data"
    group_members: int = 3
    group_protocol: str = "classic"  # the group workload's members: classic or consumer (KIP-848)
    eos_processors: int = 2
    client: str = "kraftlog"  # the data workload's producer and consumer: kraftlog or kafka-python
    queue_workers: int = 4
    queue_transactions: bool = True  # False: the queue workload's idempotent workers only
    history_path: str = "queue-history.jsonl"  # the queue workload's history (JSON lines)
    share_members: int = 2  # the share workload's kraftlog ShareConsumers
    share_kafka_members: int = 2  # and confluent-kafka's


@dataclass
class _Run:
    faults: list[FaultRecord] = field(default_factory=list)
    started_s: float = 0.0
    #: held faults not injected: the cluster had not converged within the wait (fault, why)
    held_skipped: list[tuple[str, str]] = field(default_factory=list)


def converged(admin: Admin, brokers: list[int], probe: HealthProbe | None = None, quorum: Any = None) -> str | None:
    """None when every broker is registered and unfenced, every node's health service says SERVING
    (``probe``), every controller answers the active one and has caught up, and every partition is
    led with a full ISR; otherwise what is still missing (for the log). See `deploy.chaos._health`
    for why the metadata alone is not enough. ``quorum``: a DescribeQuorum answer the caller already
    has (else one is asked for)."""
    cluster = admin.describe_cluster()
    if cluster.error.code != 0:
        return f"describe cluster: {cluster.error.name}"
    live = {b.broker_id for b in cluster.brokers if not b.fenced}
    if not set(brokers) <= live:
        return f"brokers not unfenced: {sorted(set(brokers) - live)}"
    if probe is not None:
        down = probe.not_serving()
        if down:
            return f"nodes not serving: {down}"
    pending = quorum_pending(quorum if quorum is not None else admin.describe_quorum())
    if pending is not None:
        return pending
    topics = admin.describe_topics()
    for topic in topics.topics:
        if topic.error.code != 0:
            return f"topic {topic.name}: {topic.error.name}"
        for p in topic.partitions:
            if p.leader_id < 0:
                return f"{topic.name}-{p.partition_index} has no leader"
            if set(p.isr) != set(p.replicas):
                return f"{topic.name}-{p.partition_index} ISR {list(p.isr)} of {list(p.replicas)}"
    return None


def _view(
    admin: Admin, target: ChaosTarget, topic: str, session_timeout_ms: int, probe: HealthProbe | None
) -> ClusterView:
    active: int | None = None
    leaders: list[int] = []
    pending: str | None = "unknown"
    try:
        quorum = admin.describe_quorum()
        if quorum.error.code == 0 and quorum.leader_id >= 0:
            active = quorum.leader_id
        pending = converged(admin, target.brokers(), probe, quorum)
        for t in admin.describe_topics([topic]).topics:
            leaders = [p.leader_id for p in t.partitions]
    except Exception as err:  # a view is a hint; a fault still lands without it
        _log.info("chaos_view_failed", error=repr(err))
    return ClusterView(target.controllers(), target.brokers(), active, leaders, session_timeout_ms, pending)


def run_chaos(
    target: ChaosTarget,
    settings: ChaosSettings,
    *,
    out: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the schedule; returns the report (the JSON keys). ``out`` receives the table lines."""
    rng = random.Random(settings.seed)
    stop = stop or threading.Event()
    kinds = list(settings.kinds)
    skipped: dict[str, str] = {}
    reason = target.partitions_unavailable()
    if reason is not None:
        for kind in NETWORK_KINDS & set(kinds):
            skipped[kind] = reason
        kinds = [k for k in kinds if k not in NETWORK_KINDS]
        out(f"skipping network partitions: {reason}")
    reason = target.storage_unavailable() if DISK_KINDS & set(kinds) else None
    if reason is not None:
        for kind in DISK_KINDS & set(kinds):
            skipped[kind] = reason
        kinds = [k for k in kinds if k not in DISK_KINDS]
        out(f"skipping storage faults: {reason}")
    if not kinds:
        raise ValueError("no fault kind left to run")
    if settings.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {settings.workload!r}; one of {', '.join(WORKLOADS)}")
    if settings.group_protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"unknown group protocol {settings.group_protocol!r}; one of {', '.join(GROUP_PROTOCOLS)}")
    brokers = target.brokers()
    security = target.security
    admin = Admin(
        target.controller_addresses,
        request_timeout_ms=5_000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=250,
        **security.client_kwargs(),
    )
    topic = f"chaos-{settings.seed}-{int(time.time())}"
    probe = HealthProbe(target.health_addresses(), security=security)
    run = _Run()
    group: GroupWorkload | None = None
    outcome: DrainOutcome | None = None
    eos: EosWorkload | None = None
    eos_outcome: DrainOutcome | None = None
    eos_reads: Any = None
    queue: QueueRun | None = None
    share: ShareRun | None = None
    try:
        wait_until(
            lambda: converged(admin, brokers, probe) is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what="a healthy cluster to start",
        )
        configs = {"min.insync.replicas": "2"}
        if STORAGE_KINDS_SET & set(kinds):
            configs.update(STORAGE_TOPIC_CONFIGS)
        created = admin.create_topics([NewTopic(topic, settings.partitions, 3, configs=configs)], timeout_ms=30_000)
        err = created.topics[0].error
        if err.code != 0:
            raise RuntimeError(f"create topic {topic}: {err.name} {err.message}")
        wait_until(
            lambda: converged(admin, brokers, probe) is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what=f"{topic} to be fully replicated",
        )
        workload = Workload(
            target.bootstrap_servers,
            topic,
            settings.partitions,
            records_per_s_per_partition=settings.records_per_s_per_partition,
            client=settings.client,
            kafka_bootstrap_servers=target.kafka_bootstrap_servers if settings.client != "kraftlog" else "",
            security=security,
        )
        workload.start()
        wait_until(
            lambda: all(workload.ack_times()[p] for p in range(settings.partitions)),
            60,
            interval_s=_POLL_S,
            what="the first acknowledgement of every partition",
        )
        if settings.workload == "group":
            group = _start_group(target, topic, settings, admin, brokers, probe)
        if settings.workload == "eos":
            eos = start_eos(
                target.bootstrap_servers,
                topic,
                settings,
                admin,
                lambda: converged(admin, brokers, probe),
                security=security,
            )
        if settings.workload == "queue":
            queue = start_queue(
                target.bootstrap_servers,
                topic,
                settings,
                admin,
                lambda: converged(admin, brokers, probe),
                security=security,
            )
        if settings.workload == "share":
            share = start_share(
                target.bootstrap_servers,
                target.kafka_bootstrap_servers,
                topic,
                settings,
                admin,
                lambda: converged(admin, brokers, probe),
                security=security,
            )
        started = run.started_s = time.monotonic()
        out(
            f"chaos run: seed {settings.seed}, {settings.duration_s:.0f} s, a fault every "
            f"{settings.interval_s[0]:g}-{settings.interval_s[1]:g} s, topic {topic} "
            f"({settings.partitions} partitions, RF 3, min.insync.replicas 2, acks=all)"
        )
        while time.monotonic() - started < settings.duration_s and not stop.is_set():
            next_at = time.monotonic() + rng.uniform(*settings.interval_s)
            view = _view(admin, target, topic, settings.session_timeout_ms, probe)
            fault = choose_fault(rng, view, kinds)
            if fault.kind in HELD_KINDS and view.pending is not None:
                # a storage fault damages the node's replica of every partition it holds: a minority
                # only while every other replica is whole and in the ISR, so it waits for that
                _recovery_s(
                    lambda: converged(admin, brokers, probe),
                    time.monotonic(),
                    time.monotonic() + settings.converge_timeout_s,
                    stop,
                )
                view = _view(admin, target, topic, settings.session_timeout_ms, probe)
                if view.pending is not None:
                    # still not converged: the damage could take the last whole replica of a
                    # partition (its only ISR member), a majority's fault, beyond the nemesis model
                    # (Kafka without ELR loses acknowledged records to it, as seed 20262804 did)
                    run.held_skipped.append((fault.describe(), view.pending))
                    elapsed_s = time.monotonic() - started
                    out(f"{elapsed_s:>9.1f}s  {fault.describe()} skipped: not converged ({view.pending})")
                    stop.wait(max(0.0, next_at - time.monotonic()))
                    continue
            record = FaultRecord(fault, time.monotonic(), 0.0, pending_at_injection=view.pending)
            if group is not None:
                record.group_coordinator = _group_coordinator(admin, group.group_id)
            if eos is not None:
                record.group_coordinator = _group_coordinator(admin, eos.group_id)
                record.txn_coordinators = txn_coordinators(admin, eos.transactional_ids())
            try:
                record.damage = inject(target, fault)
                stop.wait(fault.hold_s)
            except Exception as err:
                record.error = repr(err)
                _log.warning("chaos_inject_failed", fault=fault.describe(), error=repr(err))
            finally:
                heal(target, fault)
                record.healed_s = time.monotonic()
            run.faults.append(record)
            if time.monotonic() - started >= settings.duration_s:
                report_fault(out, record, started, workload.acknowledged())
                break
            record.recovery_s = _recovery_s(lambda: converged(admin, brokers, probe), record.healed_s, next_at, stop)
            report_fault(out, record, started, workload.acknowledged())
            stop.wait(max(0.0, next_at - time.monotonic()))
        last_heal = run.faults[-1].healed_s if run.faults else time.monotonic()
        for node in target.controllers() + target.brokers():  # belt and braces: nothing left faulted
            target.resume(node)
            target.start(node)
        converge_deadline = last_heal + settings.converge_timeout_s
        converge_s: float | None = None
        pending: str | None = "not checked"
        while time.monotonic() < converge_deadline:
            try:
                pending = converged(admin, brokers, probe)
            except Exception as err:
                pending = repr(err)
            if pending is None:
                converge_s = time.monotonic() - last_heal
                break
            time.sleep(0.1)
        # a few acknowledgements after convergence show the workload recovered too
        after = time.monotonic()
        try:
            wait_until(
                lambda: all(any(t > after for t in ts) for ts in workload.ack_times().values()),
                30,
                interval_s=_POLL_S,
                what="acknowledgements after convergence",
            )
        except TimeoutError as err:
            _log.warning("chaos_no_acks_after_convergence", error=str(err))
        ended = time.monotonic()
        workload.stop()
        if group is not None:
            outcome = group.finish()
        if eos is not None:
            eos_outcome = eos.finish()
        if queue is not None:
            queue.finish()
        if share is not None:
            share.finish(workload.acks)
        ack_times = workload.ack_times()
        gaps = longest_gaps(ack_times, started, ended)
        attribute_gaps(run.faults, ack_times, started, ended)
        records = read_back(target.bootstrap_servers, topic, settings.partitions, security=security)
        report = check(workload.acks, records)
        if eos is not None:
            eos_reads = eos_read_back(
                target.bootstrap_servers, eos.output_topic, settings.partitions, records, security=security
            )
    finally:
        if group is not None:
            group.stop()
        if eos is not None:
            eos.stop()
        if queue is not None:
            queue.finish(timeout_s=5)
        if share is not None:
            share.stop()
        admin.close()
        probe.close()
    max_outage = max((b - a for a, b in gaps.values()), default=0.0)
    result: dict[str, Any] = {
        "seed": settings.seed,
        "duration_s": round(settings.duration_s, 1),
        "faults": len(run.faults),
        "fault_counts": {k: sum(1 for r in run.faults if r.fault.kind == k) for k in settings.kinds},
        "skipped_faults": skipped,
        "held_faults_skipped": len(run.held_skipped),
        "acknowledged": report.acknowledged,
        "lost": report.lost,
        "offset_mismatches": report.offset_mismatches,
        "duplicates": report.duplicates,
        "reordered": report.reordered,
        "read": report.read,
        "consumed_while_running": workload.consumed,
        "produce_failures": workload.failures,
        "max_outage_s": round(max_outage, 3),
        "max_outage_per_fault_s": round(max((r.outage_s for r in run.faults), default=0.0), 3),
        "max_recovery_s": round(max((r.recovery_s for r in run.faults if r.recovery_s is not None), default=0.0), 3),
        "faults_injected_before_recovery": sum(1 for r in run.faults if r.pending_at_injection),
        "damaged_files": {
            k: sum(len(r.damage) for r in run.faults if r.fault.kind == k) for k in settings.kinds if k in STORAGE_KINDS
        },
        "fault_log": [
            {
                "kind": r.fault.kind,
                "nodes": list(r.fault.nodes),
                "at_s": round(r.injected_s - run.started_s, 2),
                "hold_s": r.fault.hold_s,
                "outage_s": round(r.outage_s, 3),
                "error": r.error,
                "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 3),
                "injected_before_recovery": r.pending_at_injection,
                **({"damaged_files": len(r.damage), "damage": r.damage[:4]} if r.fault.kind in STORAGE_KINDS else {}),
                **({"how": r.damage[0]} if r.fault.kind == "delay_link" and r.damage else {}),
                **({"offset_ms": r.fault.seed} if r.fault.kind in CLOCK_KINDS else {}),
            }
            for r in run.faults
        ],
        "converged": converge_s is not None,
        "converge_s": round(converge_s, 3) if converge_s is not None else None,
        "ok": report.ok and report.offset_mismatches == 0 and converge_s is not None,
    }
    if converge_s is None:
        result["not_converged"] = pending
    result["workload"] = settings.workload
    result["client"] = settings.client
    result["security"] = security.mode
    if group is not None and outcome is not None:
        _add_group_result(result, group, outcome, workload.acks)
        result["coordinator_faults"] = sum(1 for r in run.faults if r.group_coordinator in r.fault.nodes)
        for entry, r in zip(result["fault_log"], run.faults, strict=True):
            entry["group_coordinator"] = r.group_coordinator
    if eos is not None and eos_outcome is not None:
        add_eos_result(result, eos, eos_outcome, eos_reads)
        result["coordinator_faults"] = sum(1 for r in run.faults if r.group_coordinator in r.fault.nodes)
        result["txn_coordinator_faults"] = sum(1 for r in run.faults if set(r.txn_coordinators) & set(r.fault.nodes))
        for entry, r in zip(result["fault_log"], run.faults, strict=True):
            entry["group_coordinator"] = r.group_coordinator
            entry["txn_coordinators"] = list(r.txn_coordinators)
    if queue is not None:
        add_queue_result(result, queue)
    if share is not None:
        add_share_result(result, share, workload.acks)
    if report.lost_examples:
        result["lost_examples"] = report.lost_examples
    print_table(result, run.faults, run.started_s, out)
    return result


def _recovery_s(
    pending: Callable[[], str | None], healed_s: float, until_s: float, stop: threading.Event
) -> float | None:
    """Seconds from the heal until the cluster converged (``pending()`` is None), if it did before
    ``until_s``."""
    while not stop.is_set():
        try:
            if pending() is None:
                return time.monotonic() - healed_s
        except Exception as err:  # not converged: the controller may be moving
            _log.debug("chaos_converged_check_failed", error=repr(err))
        if time.monotonic() >= until_s:
            return None
        stop.wait(0.1)
    return None


def _start_group(
    target: ChaosTarget, topic: str, settings: ChaosSettings, admin: Admin, brokers: list[int], probe: HealthProbe
) -> GroupWorkload:
    """Start the group's members; return once the group consumes every partition and the cluster
    converged again (the first FindCoordinator created ``__consumer_offsets``)."""
    group = GroupWorkload(
        target.bootstrap_servers,
        topic,
        settings.partitions,
        members=settings.group_members,
        seed=settings.seed,
        protocol=settings.group_protocol,
        security=target.security,
    )
    group.start()
    try:
        wait_until(
            lambda: group.consumed_partitions() >= set(range(settings.partitions)),
            90,
            interval_s=_POLL_S,
            what="the group consuming every partition",
        )
        wait_until(
            lambda: converged(admin, brokers, probe) is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what="__consumer_offsets to be fully replicated",
        )
    except BaseException:
        group.stop()
        raise
    return group


def _group_coordinator(admin: Admin, group_id: str) -> int | None:
    """The broker leading the group's ``__consumer_offsets`` partition (None when not known)."""
    try:
        for t in admin.describe_topics([OFFSETS_TOPIC]).topics:
            if t.error.code == 0 and t.partitions:
                index = coordinator_partition(group_id, len(t.partitions))
                leaders = {p.partition_index: p.leader_id for p in t.partitions}
                leader = leaders.get(index, -1)
                return leader if leader >= 0 else None
    except Exception as err:  # a hint for the report only
        _log.info("chaos_group_coordinator_unknown", error=repr(err))
    return None


def _add_group_result(result: dict[str, Any], group: GroupWorkload, outcome: DrainOutcome, acks: list[Any]) -> None:
    consumed, commits, events = group.snapshot()
    final = dict(outcome.final_committed)
    # the events' times are time.monotonic() of this process: overlaps within its resolution are not ordered
    resolution = time.get_clock_info("monotonic").resolution
    g = check_group(acks, consumed, commits, events, final, protocol=group.protocol, tolerance_s=resolution)
    result.update(
        {
            "group_protocol": group.protocol,
            "group_members": group.members,
            "consumed": g.consumed,
            "consumed_missing": g.consumed_missing,
            "consumed_duplicates": g.consumed_duplicates,
            "commits": g.commits,
            "commit_failures": group.commit_failures,
            "commit_regressions": g.commit_regressions + g.final_commit_regressions,
            "final_commit_regressions": g.final_commit_regressions,
            "double_owners": g.double_owners,
            "overlapping_owners": g.overlapping_owners,
            "lost_overlaps": g.lost_overlaps,
            "group_generations": g.generations,
            "group_rebalances": max(0, g.generations - 1),
            "group_assignments": g.assignments,
            "member_restarts": group.restarts,
            "group_poll_failures": group.poll_failures,
            **drain_fields("group", outcome),
        }
    )
    if outcome.error:
        result["group_error"] = outcome.error
    for key, shown in (
        ("consumed_missing_examples", g.missing_examples),
        ("commit_regression_examples", g.regression_examples),
        ("double_owner_examples", g.double_owner_examples),
        ("overlapping_owner_examples", g.overlap_examples),
        ("lost_overlap_examples", g.lost_overlap_examples),
    ):
        if shown:
            result[key] = shown
    result["ok"] = result["ok"] and g.ok
