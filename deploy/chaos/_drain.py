"""How the consuming workloads of a chaos run end, and the one shape of what they report about it.

The group workload (`deploy.chaos._group_workload`) and the transactional one
(`deploy.chaos._eos_workload`) both consume a topic with one group and finish the same way, after
the producers stopped: read the topic's log end offsets; wait (bounded) until the group committed up
to them; stop the workload's threads; read the group's final committed offsets with a fresh admin
client. Ordering: the threads stop only after the wait, so the last commits land; the final
offsets are read only after they stopped, so nothing commits behind the read.

The report (`DrainOutcome`) becomes the same four keys of the run's JSON for both, named by the
workload's prefix (`drain_fields`), and the same table row (`drain_row`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kraftlog.client import Consumer, GroupAdmin
from kraftlog.deploy._cluster import wait_until
from kraftlog.deploy.chaos._security import ChaosSecurity

__all__ = [
    "DRAIN_POLL_S",
    "ConsumingWorkload",
    "DrainOutcome",
    "drain_fields",
    "drain_group",
    "drain_row",
    "drain_workload",
    "log_end_offsets",
]

_log = structlog.get_logger("deploy.chaos")

#: seconds between two looks at the workload's highest commits while draining
DRAIN_POLL_S = 0.2


@dataclass
class DrainOutcome:
    """How a consuming workload ended: whether its group committed up to the log end offsets
    (``end_offsets``, partition -> offset) within the bound, how long that took, the group's final
    committed offsets, and what went wrong (None when nothing did)."""

    drained: bool
    drain_s: float
    end_offsets: dict[int, int]
    final_committed: dict[int, int]
    error: str | None = None


def log_end_offsets(bootstrap_servers: str, topic: str, partitions: int, *, security: ChaosSecurity) -> dict[int, int]:
    """The log end offset of every partition of ``topic`` (partition -> offset)."""
    with Consumer(bootstrap_servers, request_timeout_ms=10_000, **security.client_kwargs()) as consumer:
        tps = [(topic, p) for p in range(partitions)]
        return {tp.partition: off for tp, off in consumer.end_offsets(tps, timeout_ms=30_000).items()}


def drain_group(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    group_id: str,
    *,
    highest_commits: Callable[[], dict[int, int]],
    stop: Callable[[], None],
    security: ChaosSecurity,
    timeout_s: float,
    what: str,
) -> DrainOutcome:
    """Wait up to ``timeout_s`` until ``highest_commits()`` reaches every non-empty partition's log end
    offset, call ``stop()``, then read ``group_id``'s final committed offsets of ``topic``. Errors are
    reported in the outcome (and logged as ``chaos_<what>_drain_failed`` /
    ``chaos_<what>_final_offsets_failed``), never raised: the checker shows what was not consumed."""
    started = time.monotonic()
    ends: dict[int, int] = {}
    error: str | None = None
    drained = False
    try:
        ends = log_end_offsets(bootstrap_servers, topic, partitions, security=security)

        def caught_up() -> bool:
            highest = highest_commits()
            return all(highest.get(p, -1) >= end for p, end in ends.items() if end > 0)

        try:
            wait_until(
                caught_up,
                max(0.0, started + timeout_s - time.monotonic()),
                interval_s=DRAIN_POLL_S,
                what=f"the {what} workload to commit up to {ends}",
            )
            drained = True
        except TimeoutError:  # not drained: the outcome says so
            pass
    except Exception as err:  # reported; the checker shows what was not consumed
        error = repr(err)
        _log.warning(f"chaos_{what}_drain_failed", error=error)
    drain_s = time.monotonic() - started
    stop()
    final: dict[int, int] = {}
    try:
        with GroupAdmin(bootstrap_servers, request_timeout_ms=30_000, **security.client_kwargs()) as admin:
            offsets = admin.list_offsets(group_id, [(topic, p) for p in range(partitions)])
        final = {tp.partition: off for tp, off in offsets.items()}
    except Exception as err:
        error = (error + "; " if error else "") + f"final committed offsets: {err!r}"
        _log.warning(f"chaos_{what}_final_offsets_failed", error=repr(err))
    return DrainOutcome(drained, drain_s, ends, final, error)


class ConsumingWorkload(Protocol):
    """What `drain_workload` needs of a workload: where its group consumes, its highest acknowledged
    commits (partition -> next offset) and how to stop its threads."""

    bootstrap_servers: str
    partitions: int
    group_id: str
    security: ChaosSecurity

    @property
    def consumed_topic(self) -> str: ...

    def highest_commits(self) -> dict[int, int]: ...

    def stop(self) -> None: ...


def drain_workload(workload: ConsumingWorkload, what: str, timeout_s: float) -> DrainOutcome:
    """`drain_group` for ``workload`` (the group workload, ``what="group"``, or the eos one, ``"eos"``)."""
    return drain_group(
        workload.bootstrap_servers,
        workload.consumed_topic,
        workload.partitions,
        workload.group_id,
        highest_commits=workload.highest_commits,
        stop=workload.stop,
        security=workload.security,
        timeout_s=timeout_s,
        what=what,
    )


def drain_fields(prefix: str, outcome: DrainOutcome) -> dict[str, Any]:
    """The outcome as the run's JSON keys ``<prefix>_drained``, ``<prefix>_drain_s``,
    ``<prefix>_end_offsets`` and ``<prefix>_final_committed`` (partitions as strings, in order)."""
    return {
        f"{prefix}_drained": outcome.drained,
        f"{prefix}_drain_s": round(outcome.drain_s, 3),
        f"{prefix}_end_offsets": {str(p): o for p, o in sorted(outcome.end_offsets.items())},
        f"{prefix}_final_committed": {str(p): o for p, o in sorted(outcome.final_committed.items())},
    }


def drain_row(prefix: str, result: dict[str, Any]) -> tuple[str, Any]:
    """The table row of the drain: its seconds, or NO when the group did not reach the log end."""
    return (
        f"{prefix}: drained to the log end (s)",
        result[f"{prefix}_drain_s"] if result[f"{prefix}_drained"] else "NO",
    )
