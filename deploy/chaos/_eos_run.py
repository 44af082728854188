"""The eos workload's part of the chaos run (`deploy.chaos._runner`): create the output topic and
start the processors, read the output topic back twice at the end, and the report's figures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from kraftlog.client import Admin, NewTopic
from kraftlog.common import coordinator_partition
from kraftlog.deploy._cluster import wait_until
from kraftlog.deploy.chaos._checker import ReadRecord
from kraftlog.deploy.chaos._drain import DrainOutcome, drain_fields, drain_row
from kraftlog.deploy.chaos._eos_check import check_eos
from kraftlog.deploy.chaos._eos_workload import EosWorkload
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity
from kraftlog.deploy.chaos._workload import read_back

__all__ = ["add_eos_result", "eos_read_back", "eos_rows", "start_eos", "txn_coordinators"]

TXN_TOPIC = "__transaction_state"
#: seconds between two looks at the cluster or the processors while waiting for them
_POLL_S = 0.2

_log = structlog.get_logger("deploy.chaos")


def start_eos(
    bootstrap_servers: str,
    topic: str,
    settings: Any,
    admin: Admin,
    pending: Callable[[], str | None],
    *,
    security: ChaosSecurity = PLAINTEXT,
) -> EosWorkload:
    """Create the output topic (as many partitions as the input, RF 3, min.insync.replicas 2), start
    the processors (their clients connect with ``security``); return once they committed a
    transaction of every partition and the cluster converged again (the first transactions created
    ``__transaction_state`` and ``__consumer_offsets``)."""
    output = f"{topic}-out"
    created = admin.create_topics(
        [NewTopic(output, settings.partitions, 3, configs={"min.insync.replicas": "2"})], timeout_ms=30_000
    )
    err = created.topics[0].error
    if err.code != 0:
        raise RuntimeError(f"create topic {output}: {err.name} {err.message}")
    wait_until(
        lambda: pending() is None,
        settings.converge_timeout_s,
        interval_s=_POLL_S,
        what=f"{output} to be fully replicated",
    )
    eos = EosWorkload(
        bootstrap_servers,
        topic,
        output,
        settings.partitions,
        processors=settings.eos_processors,
        seed=settings.seed,
        security=security,
    )
    eos.start()
    try:
        wait_until(
            lambda: set(eos.highest_commits()) >= set(range(settings.partitions)),
            90,
            interval_s=_POLL_S,
            what="a committed transaction of every partition",
        )
        wait_until(
            lambda: pending() is None,
            settings.converge_timeout_s,
            interval_s=_POLL_S,
            what="__transaction_state and __consumer_offsets to be fully replicated",
        )
    except BaseException:
        eos.stop()
        raise
    return eos


def txn_coordinators(admin: Admin, transactional_ids: list[str]) -> tuple[int, ...]:
    """The brokers leading the ``__transaction_state`` partitions of ``transactional_ids`` (a hint
    for the report: empty when not known)."""
    try:
        for t in admin.describe_topics([TXN_TOPIC]).topics:
            if t.error.code == 0 and t.partitions:
                leaders = {p.partition_index: p.leader_id for p in t.partitions}
                found = {leaders.get(coordinator_partition(i, len(t.partitions)), -1) for i in transactional_ids}
                return tuple(sorted(b for b in found if b >= 0))
    except Exception as err:  # a hint only
        _log.info("chaos_txn_coordinators_unknown", error=repr(err))
    return ()


def eos_read_back(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    inputs: list[ReadRecord],
    *,
    security: ChaosSecurity = PLAINTEXT,
) -> tuple[list[ReadRecord], list[ReadRecord], list[ReadRecord]] | str:
    """The input records with the output topic read with read_committed, then read_uncommitted; or
    why the output topic could not be read (a transaction left open holds read_committed back)."""
    try:
        committed = read_back(bootstrap_servers, topic, partitions, isolation_level="read_committed", security=security)
        uncommitted = read_back(bootstrap_servers, topic, partitions, security=security)
    except Exception as err:  # the verdict fails: the report says why
        _log.warning("chaos_eos_read_back_failed", error=repr(err))
        return repr(err)
    return inputs, committed, uncommitted


def add_eos_result(
    result: dict[str, Any],
    eos: EosWorkload,
    outcome: DrainOutcome,
    reads: tuple[list[ReadRecord], list[ReadRecord], list[ReadRecord]] | str | None,
) -> None:
    """The eos figures into ``result`` (and its verdict). ``reads``: the input topic, the output
    topic read_committed and read_uncommitted (`eos_read_back`; else why they were not read)."""
    read = isinstance(reads, tuple)
    inputs, committed, uncommitted = reads if isinstance(reads, tuple) else ([], [], [])
    attempts = eos.snapshot()
    r = check_eos(inputs, attempts, committed, uncommitted)
    result.update(
        {
            "eos_processors": eos.processors,
            "eos_output_topic": eos.output_topic,
            "eos_inputs": r.inputs,
            "eos_outputs_committed": r.outputs_committed,
            "eos_outputs_in_log": r.outputs_in_log,
            "eos_violations": r.eos_violations,
            "eos_missing": r.eos_missing,
            "eos_doubled": r.eos_doubled,
            "eos_mismatched": r.eos_mismatched,
            "aborted_visible": r.aborted_visible,
            "aborted_in_log": r.aborted_in_log,
            "partial_txns": r.partial_txns,
            "txns_committed": r.txns_committed,
            "txns_aborted": r.txns_aborted,
            "txns_aborted_deliberately": sum(1 for a in attempts if a.why == "deliberate"),
            "txns_unknown": r.txns_unknown,
            "txns_unknown_committed": r.unknown_visible,
            "txn_failures": eos.txn_failures,
            "processor_restarts": eos.restarts,
            "processor_crashes": eos.crashes,
            "eos_poll_failures": eos.poll_failures,
            # a rewind's OffsetFetch (require_stable) that failed: many mean offsets left pending
            "eos_rewind_failures": eos.seek_failures,
            **drain_fields("eos", outcome),
        }
    )
    errors = [e for e in (outcome.error, None if read else f"output topic not read: {reads}") if e]
    if errors:
        result["eos_error"] = "; ".join(errors)
    if r.examples:
        result["eos_examples"] = r.examples
    result["ok"] = result["ok"] and read and r.ok


def eos_rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("eos: input records (topic A)", result["eos_inputs"]),
        ("eos: committed outputs (topic B)", result["eos_outputs_committed"]),
        ("eos: inputs missing or doubled in B", result["eos_violations"]),
        ("eos: aborted outputs visible", result["aborted_visible"]),
        ("eos: aborted outputs in the log (hidden)", result["aborted_in_log"]),
        ("eos: committed txns partly visible", result["partial_txns"]),
        (
            "eos: txns committed / aborted / unknown",
            f"{result['txns_committed']} / {result['txns_aborted']} / {result['txns_unknown']}",
        ),
        ("eos: processor restarts (crashes)", f"{result['processor_restarts']} ({result['processor_crashes']})"),
        ("eos: faults on a transaction coordinator", result["txn_coordinator_faults"]),
        drain_row("eos", result),
    ]
