"""``kraftlog chaos run --profile quorum``: faults aimed at the controller quorum under an admin
workload whose calls time out and are retried, then a checker of the metadata log itself.

Timeline (every wait is bounded):

1. the cluster is healthy (every node SERVING, an active controller every voter follows);
2. phase 1: the controllers run with ``controller.quorum.election.timeout.ms`` above
   ``controller.quorum.request.timeout.ms`` (4000 > 2000: an active controller outlives a pause of
   its standbys longer than its propose timeout); a seeded fault every few seconds, each healed
   and the quorum given until the next fault to recover;
3. half-way, a rolling restart (one controller at a time) gives the controllers back their own
   timeouts (phase 2: the cluster's configuration, e.g. election 1000 < request 2000), and the
   faults go on;
4. the workload stops, everything is healed, the cluster converges; the final image is read
   (DescribeTopics) and checked against every acknowledged admin operation;
5. every controller is restarted once more, one at a time (clean stop, start), and must come back;
6. every controller's metadata log files are compared and scanned for duplicates, every node's
   log for replay errors; the active-controller samples give ``max_no_active_controller_s``.

The report is a table, then one JSON object as the last line. ``ok`` only when the admin, log,
restart and availability checks all pass.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kraftlog.client import Admin
from kraftlog.deploy.chaos._checker import print_verdict
from kraftlog.deploy.chaos._faults import Fault
from kraftlog.deploy.chaos._health import HealthProbe, quorum_pending
from kraftlog.deploy.chaos._quorum_check import (
    FinalTopic,
    check_admin,
    diverged_controllers,
    find_duplicate_records,
    no_active_stretches,
    replay_error_lines,
    voter_rejoined,
)
from kraftlog.deploy.chaos._quorum_faults import (
    ELECTION_KEY,
    MAJORITY_KINDS,
    NETWORK_QUORUM_KINDS,
    QUORUM_FAULT_KINDS,
    REPLACE_VOTER,
    REQUEST_KEY,
    QuorumTimeouts,
    choose_quorum_fault,
    heal_quorum,
    inject_quorum,
    read_config_values,
    stop_clean,
    write_config_values,
)
from kraftlog.deploy.chaos._quorum_logs import log_sizes, metadata_dir_of, read_controller_log, scan_node_logs
from kraftlog.deploy.chaos._quorum_workload import ActiveSampler, AdminWorkload

__all__ = ["QuorumSettings", "LONG_ELECTION", "run_quorum_chaos"]

_log = structlog.get_logger("deploy.chaos")

#: phase 1's controller timeouts: election above request (see the module docstring)
LONG_ELECTION: Mapping[str, int] = {ELECTION_KEY: 4000, REQUEST_KEY: 2000}
_KEYS = (ELECTION_KEY, REQUEST_KEY)


@dataclass(frozen=True)
class QuorumSettings:
    duration_s: float
    seed: int
    interval_s: tuple[float, float] = (6.0, 12.0)
    clients: int = 5
    # an admin call's timeout: shorter than the propose timeout (controller.quorum.request.timeout.ms),
    # so a client sends its retry while the first proposal's outcome is still unknown
    call_timeout_ms: int = 1500
    converge_timeout_s: float = 60.0
    restart_timeout_s: float = 30.0  # a restarted controller must be back (and followed) within it
    stop_timeout_s: float = 20.0  # a clean stop that takes longer is a hang
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms, for the check-quorum rule
    max_no_active_s: float = 10.0
    kinds: tuple[str, ...] = QUORUM_FAULT_KINDS
    long_election: Mapping[str, int] = field(default_factory=lambda: dict(LONG_ELECTION))


@dataclass
class _FaultRecord:
    fault: Fault
    phase: int
    injected_s: float
    healed_s: float = 0.0
    recovery_s: float | None = None
    in_flight: int = 0
    error: str | None = None


@dataclass
class _Restart:
    node: int
    why: str  # "phase 2" / "final" / "phase 1"
    clean_exit: bool = True
    back: bool = False
    seconds: float = 0.0
    error: str | None = None

    @property
    def failed(self) -> bool:
        return not (self.clean_exit and self.back)


def _timeouts(values: Mapping[str, Any]) -> QuorumTimeouts:
    return QuorumTimeouts(int(values.get(ELECTION_KEY) or 1000), int(values.get(REQUEST_KEY) or 2000))


class _Run:
    """The state one run shares between its steps (target, clients, clock, records)."""

    def __init__(
        self, target: Any, settings: QuorumSettings, out: Callable[[str], None], stop: threading.Event
    ) -> None:
        self.target, self.settings, self.out, self.stop = target, settings, out, stop
        self.cluster = target.cluster
        self.controllers = target.controllers()
        self.security = target.security
        self.admin = Admin(
            target.controller_addresses,
            request_timeout_ms=5_000,
            attempt_timeout_ms=1_500,
            retry_backoff_ms=50,
            retry_backoff_max_ms=250,
            **self.security.client_kwargs(),
        )
        self.probe = HealthProbe(target.health_addresses(), security=self.security)
        self.faults: list[_FaultRecord] = []
        self.restarts: list[_Restart] = []
        self.started_s = time.monotonic()
        self.end_s = self.started_s
        # what the report needs besides the records above, filled in as the run goes
        self.skipped: dict[str, str] = {}
        self.phases: list[dict[str, Any]] = []
        self.converge_s: float | None = None
        self.missing: str | None = None
        self.final: dict[str, FinalTopic] | None = None
        self.final_error: str | None = None
        self.log_paths = {n: Path(s.log_path) for n, s in self.cluster.nodes.items()}
        self.log_start = log_sizes(self.log_paths)  # this run's lines begin there

    def config_path(self, node: int) -> Path:
        return Path(self.cluster.nodes[node].config_path)

    def pending(self, rejoined: tuple[int, int] | None = None) -> str | None:
        """None when every node serves and an active controller has every voter caught up (and,
        with ``rejoined=(node, since_ms)``, has heard from that node's new process)."""
        down = self.probe.not_serving()
        if down:
            return f"nodes not serving: {down}"
        resp = self.admin.describe_quorum()
        missing = quorum_pending(resp)
        if missing is None and rejoined is not None and not voter_rejoined(resp, *rejoined):
            return f"controller {rejoined[0]} has not fetched from the active controller since its restart"
        return missing

    def wait_converged(
        self, timeout_s: float, rejoined: tuple[int, int] | None = None
    ) -> tuple[float | None, str | None]:
        """(seconds it took, None) or (None, what was still missing)."""
        t0 = time.monotonic()
        missing: str | None = "not checked"
        while time.monotonic() - t0 < timeout_s:
            try:
                missing = self.pending(rejoined)
            except Exception as err:  # the quorum may be moving
                missing = repr(err)
            if missing is None:
                return time.monotonic() - t0, None
            time.sleep(0.1)
        return None, missing

    def active(self) -> int | None:
        try:
            resp = self.admin.describe_quorum()
        except Exception:  # a hint only: the fault still lands on a seeded controller
            return None
        return resp.leader_id if resp.error.code == 0 and resp.leader_id >= 0 else None

    def restart(self, node: int, why: str, values: Mapping[str, Any] | None) -> _Restart:
        """Clean stop (a hang counts), optional config change, start; back = the node serves and the
        active controller has it caught up, within ``restart_timeout_s``."""
        rec = _Restart(node, why)
        t0 = time.monotonic()
        try:
            if values is not None:
                write_config_values(self.config_path(node), values)
            rec.clean_exit = stop_clean(self.cluster, node, self.settings.stop_timeout_s)
            started_ms = int(time.time() * 1000)
            self.target.start(node)
            took, missing = self.wait_converged(self.settings.restart_timeout_s, rejoined=(node, started_ms))
            rec.back = took is not None
            if not rec.clean_exit:
                rec.error = f"did not exit within {self.settings.stop_timeout_s:g} s of SIGTERM (killed)"
            elif missing is not None:
                rec.error = f"not back within {self.settings.restart_timeout_s:g} s: {missing}"
        except Exception as err:
            rec.back, rec.error = False, repr(err)
        rec.seconds = time.monotonic() - t0
        self.restarts.append(rec)
        self.out(
            f"  {t0 - self.started_s:7.1f}s  restart({node}) [{why}] "
            f"{'ok' if not rec.failed else 'FAILED: ' + str(rec.error)} in {rec.seconds:.1f}s"
        )
        return rec

    def rolling_restart(self, why: str, values: Mapping[int, Mapping[str, Any]]) -> bool:
        """Standbys first, the active controller last (one failover per rolling restart). Stops at
        the first controller that does not come back (restarting the next one could only take the
        quorum down); False then."""
        active = self.active()
        for node in sorted(self.controllers, key=lambda n: (n == active, n)):
            if self.stop.is_set() or self.restart(node, why, values[node]).failed:
                return False
        return True

    def fault_round(
        self, rng: random.Random, kinds: list[str], timeouts: QuorumTimeouts, phase: int, workload: AdminWorkload
    ) -> None:
        next_at = time.monotonic() + rng.uniform(*self.settings.interval_s)
        fault = choose_quorum_fault(rng, self.controllers, self.active(), timeouts, kinds)
        if fault.kind == "pause_standbys":  # the point: admin calls in flight when the pause lands
            deadline = time.monotonic() + 2.0
            while workload.in_flight() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
        rec = _FaultRecord(fault, phase, time.monotonic(), in_flight=workload.in_flight())
        try:
            inject_quorum(self.target, fault)
            self.stop.wait(fault.hold_s)
        except Exception as err:
            rec.error = repr(err)
            _log.warning("chaos_inject_failed", fault=fault.describe(), error=repr(err))
        finally:
            try:
                heal_quorum(self.target, fault)
            except Exception as err:
                rec.error = (rec.error + "; " if rec.error else "") + repr(err)
            rec.healed_s = time.monotonic()
        self.faults.append(rec)
        while not self.stop.is_set():
            try:
                if self.pending() is None:
                    rec.recovery_s = time.monotonic() - rec.healed_s
                    break
            except Exception as err:
                _log.debug("chaos_converged_check_failed", error=repr(err))
            if time.monotonic() >= next_at:
                break
            self.stop.wait(0.1)
        recovered = f"recovered in {rec.recovery_s:.2f}s" if rec.recovery_s is not None else "not recovered yet"
        self.out(
            f"  {rec.injected_s - self.started_s:7.1f}s  {fault.describe():<46} {recovered:<22} "
            f"in flight {rec.in_flight}, acked {workload.acked()}" + (f"  error: {rec.error}" if rec.error else "")
        )
        self.stop.wait(max(0.0, next_at - time.monotonic()))

    def heal_everything(self) -> None:
        for node in sorted(self.cluster.nodes):
            for step in (self.target.resume, self.target.start):
                try:
                    step(node)
                except Exception as err:
                    _log.warning("chaos_heal_failed", node_id=node, error=repr(err))
            if self.target.partitions_unavailable() is None:
                try:
                    self.target.heal(node)
                except Exception as err:
                    _log.warning("chaos_heal_failed", node_id=node, error=repr(err))

    def final_image(self, prefix: str) -> tuple[dict[str, FinalTopic] | None, str | None]:
        try:
            resp = self.admin.describe_topics()
        except Exception as err:
            return None, repr(err)
        if resp.error.code != 0:
            return None, f"DescribeTopics: {resp.error.name} {resp.error.message}"
        topics = {}
        for t in resp.topics:
            if t.name.startswith(prefix) and t.error.code == 0:
                topics[t.name] = FinalTopic(len(t.partitions), dict(t.configs))
        return topics, None

    def close(self) -> None:
        self.admin.close()
        self.probe.close()


def run_quorum_chaos(
    target: Any,
    settings: QuorumSettings,
    *,
    out: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    original_configs: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the quorum profile against a local cluster (`LocalTarget`: it reads the nodes' files).

    ``original_configs``: each controller's own values of the two timeouts, when the caller already
    wrote phase 1's values before starting the cluster (else they are read from the configs, and a
    rolling restart applies phase 1). Returns the report (the JSON keys)."""
    stop = stop or threading.Event()
    rng = random.Random(settings.seed)
    kinds = list(settings.kinds)
    skipped: dict[str, str] = {}
    reason = target.partitions_unavailable()
    if reason is not None:
        for kind in NETWORK_QUORUM_KINDS & set(kinds):
            skipped[kind] = reason
        kinds = [k for k in kinds if k not in NETWORK_QUORUM_KINDS]
        out(f"skipping network partitions: {reason}")
    if REPLACE_VOTER in kinds and getattr(target, "voter_changes", None) is None:
        skipped[REPLACE_VOTER] = "the quorum is static (kraft.version 0): voter changes need a dynamic one"
        kinds = [k for k in kinds if k != REPLACE_VOTER]
        out(f"skipping {REPLACE_VOTER}: {skipped[REPLACE_VOTER]}")
    if not kinds:
        raise ValueError("no fault kind left to run")
    run = _Run(target, settings, out, stop)
    run.skipped = skipped
    cluster = run.cluster
    originals = {
        n: dict(original_configs[n]) if original_configs else read_config_values(run.config_path(n), _KEYS)
        for n in run.controllers
    }
    phase1 = {n: dict(settings.long_election) for n in run.controllers}
    prefix = f"q{settings.seed}-{int(time.time()) % 1_000_000:06d}"
    workload = AdminWorkload(
        target.controller_addresses,
        seed=settings.seed,
        prefix=prefix,
        clients=settings.clients,
        call_timeout_ms=settings.call_timeout_ms,
        security=run.security,
    )
    sampler = ActiveSampler(
        {n: f"{cluster.nodes[n].host}:{cluster.nodes[n].controller_port}" for n in run.controllers},
        fetch_timeout_ms=settings.fetch_timeout_ms,
        security=run.security,
    )
    sampler_started = False
    try:
        took, missing = run.wait_converged(settings.converge_timeout_s)
        if took is None:
            raise RuntimeError(f"the cluster is not healthy to start with: {missing}")
        if any(read_config_values(run.config_path(n), _KEYS) != phase1[n] for n in run.controllers):
            run.rolling_restart("phase 1", phase1)
        out(
            f"chaos run (quorum profile): seed {settings.seed}, {settings.duration_s:.0f} s, a fault every "
            f"{settings.interval_s[0]:g}-{settings.interval_s[1]:g} s, {settings.clients} admin clients "
            f"(call timeout {settings.call_timeout_ms} ms), topics {prefix}-*"
        )
        sampler.start()
        sampler_started = True
        workload.start()
        warm = time.monotonic() + 30  # the first fault lands on a workload that is getting answers
        while workload.acked() < settings.clients and time.monotonic() < warm and not stop.is_set():
            time.sleep(0.1)
        run.started_s = time.monotonic()
        half = run.started_s + settings.duration_s / 2
        for phase, until, values in ((1, half, phase1), (2, run.started_s + settings.duration_s, originals)):
            if stop.is_set():
                break
            complete = True
            if phase == 2 and values != phase1:
                complete = run.rolling_restart("phase 2", values)
            timeouts = _timeouts(values[run.controllers[0]])
            run.phases.append(
                {
                    "phase": phase,
                    "from_s": round(time.monotonic() - run.started_s, 1),
                    "election_timeout_ms": timeouts.election_ms,
                    "request_timeout_ms": timeouts.request_ms,
                    "rolling_restart_complete": complete,
                }
            )
            out(
                f"phase {phase}: controller.quorum.election.timeout.ms {timeouts.election_ms}, "
                f"controller.quorum.request.timeout.ms {timeouts.request_ms}"
            )
            while time.monotonic() < until and not stop.is_set():
                run.fault_round(rng, kinds, timeouts, phase, workload)
        workload.stop(timeout_s=settings.call_timeout_ms / 1000.0 * 2 + 10)
        run.heal_everything()
        run.converge_s, run.missing = run.wait_converged(settings.converge_timeout_s)
        run.final, run.final_error = run.final_image(prefix)
        for node in run.controllers:
            if stop.is_set():
                break
            run.restart(node, "final", None)
        run.wait_converged(settings.restart_timeout_s)  # every log caught up before they are compared
    finally:
        workload.stop(timeout_s=1)
        run.end_s = time.monotonic()
        if sampler_started:
            sampler.stop()
        for n in run.controllers:  # never leave phase 1's values in a cluster the run did not start
            if read_config_values(run.config_path(n), _KEYS) != originals[n]:
                write_config_values(run.config_path(n), originals[n])
        run.close()
    return _report(run, workload, sampler)


def _report(run: _Run, workload: AdminWorkload, sampler: ActiveSampler) -> dict[str, Any]:
    """Run every check on what the run recorded and what is on disk; print the table and the JSON."""
    settings = run.settings
    admin = check_admin(workload.snapshot(), run.final or {})
    logs = {n: read_controller_log(n, metadata_dir_of(run.config_path(n))) for n in run.controllers}
    dups = {n: find_duplicate_records(log.entries, log.snapshot_records) for n, log in logs.items()}
    divergence = diverged_controllers({n: log.raw for n, log in logs.items()})
    replay = {n: replay_error_lines(lines) for n, lines in scan_node_logs(run.log_paths, run.log_start).items()}
    samples = [(t, active is not None) for t, active in sampler.snapshot() if t >= run.started_s]
    excused = [(r.injected_s, r.healed_s) for r in run.faults if r.fault.kind in MAJORITY_KINDS]
    stretches = no_active_stretches(samples, run.end_s, excused)
    longest = max(stretches, key=lambda s: s[1] - s[0], default=(0.0, 0.0))
    max_no_active = longest[1] - longest[0]
    result: dict[str, Any] = {
        "profile": "quorum",
        "security": run.security.mode,
        "seed": settings.seed,
        "duration_s": round(settings.duration_s, 1),
        "phases": run.phases,
        "faults": len(run.faults),
        "fault_counts": {k: sum(1 for r in run.faults if r.fault.kind == k) for k in settings.kinds},
        "skipped_faults": run.skipped,
        # committed voter changes (issue 26): a replace_voter fault is a removal and an addition
        "voter_changes": getattr(getattr(run.target, "voter_changes", None), "count", 0),
        "admin_acked": admin.acked,
        "admin_in_doubt": admin.in_doubt,
        "admin_rejected": admin.rejected,
        "admin_calls": workload.calls,
        "admin_calls_timed_out": workload.timeouts,
        "admin_retries": workload.retries,
        "admin_stale_answers": workload.stale_answers,
        "admin_lost": admin.lost,
        "admin_unexplained": admin.unexplained,
        "duplicate_records": max((d.duplicates for d in dups.values()), default=0),
        "replay_errors": sum(len(lines) for lines in replay.values()),
        "replay_errors_by_node": {str(n): len(lines) for n, lines in replay.items() if lines},
        "diverged_controllers": len(divergence.diverged),
        "metadata_log_errors": {str(n): log.error for n, log in logs.items() if log.error},
        "metadata_log_end_offsets": {str(n): log.last_offset for n, log in logs.items()},
        "compared_offsets": list(divergence.compared) if divergence.compared else None,
        "restart_failures": sum(1 for r in run.restarts if r.failed and r.why == "final"),
        "phase_restart_failures": sum(1 for r in run.restarts if r.failed and r.why != "final"),
        "max_no_active_controller_s": round(max_no_active, 3),
        "max_no_active_controller_at_s": round(longest[0] - run.started_s, 1) if max_no_active else None,
        "active_controller_samples": len(samples),
        "converged": run.converge_s is not None,
        "converge_s": round(run.converge_s, 3) if run.converge_s is not None else None,
        "fault_log": [
            {
                "kind": r.fault.kind,
                "nodes": list(r.fault.nodes),
                "phase": r.phase,
                "at_s": round(r.injected_s - run.started_s, 2),
                "hold_s": r.fault.hold_s,
                "in_flight": r.in_flight,
                "error": r.error,
                "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 3),
            }
            for r in run.faults
        ],
        "restarts": [
            {
                "node": r.node,
                "why": r.why,
                "clean_exit": r.clean_exit,
                "back": r.back,
                "seconds": round(r.seconds, 2),
                "error": r.error,
            }
            for r in run.restarts
        ],
    }
    if run.final_error is not None:
        result["final_image_error"] = run.final_error
    if run.missing is not None:
        result["not_converged"] = run.missing
    worst = max(dups, key=lambda n: dups[n].duplicates, default=None)
    examples = list(admin.examples)
    if worst is not None:
        examples += [f"controller {worst}: {e}" for e in dups[worst].examples]
    examples += divergence.examples[:5]
    examples += [f"node {n}: {lines[0][:300]}" for n, lines in replay.items() if lines]
    if examples:
        result["examples"] = examples
    result["ok"] = (
        run.final_error is None
        and run.converge_s is not None
        and not result["metadata_log_errors"]
        and all(
            result[k] == 0
            for k in (
                "admin_lost",
                "admin_unexplained",
                "duplicate_records",
                "replay_errors",
                "diverged_controllers",
                "restart_failures",
                "phase_restart_failures",
            )
        )
        and max_no_active < settings.max_no_active_s
    )
    _print_table(result, run.out)
    return result


def _print_table(result: dict[str, Any], out: Callable[[str], None]) -> None:
    out("")
    rows = [
        ("admin operations acknowledged", result["admin_acked"]),
        ("admin operations in doubt (never answered)", result["admin_in_doubt"]),
        ("admin operations rejected", result["admin_rejected"]),
        ("admin calls unanswered or timed out (retried)", result["admin_calls_timed_out"]),
        ("first answers from a stale controller", result["admin_stale_answers"]),
        ("acknowledged and absent (admin_lost)", result["admin_lost"]),
        ("state no operation explains", result["admin_unexplained"]),
        ("duplicate records in the metadata log", result["duplicate_records"]),
        ("replay errors in node logs", result["replay_errors"]),
        ("controllers whose log diverged", result["diverged_controllers"]),
        ("final restarts that failed", result["restart_failures"]),
        ("phase restarts that failed", result["phase_restart_failures"]),
        ("longest time without an active controller (s)", result["max_no_active_controller_s"]),
        ("converged after the last fault (s)", result["converge_s"] if result["converged"] else "NO"),
        ("voter changes committed", result["voter_changes"]),
        ("verdict", "PASS" if result["ok"] else "FAIL"),
    ]
    print_verdict(rows, result, out, label_width=48, value_width=12, notes=result.get("examples", []))
