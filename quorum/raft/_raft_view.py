"""The seam's snapshot of pysyncobj's state, refreshed on its thread and read on the loop (see
`quorum.raft`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _View:
    """pysyncobj's state as last observed on its own thread (read lock-free by the loop)."""

    leader_id: int | None = None
    term: int = 0
    raft_leader: bool = False
    has_quorum: bool = False
    ready: bool = False
    commit_index: int = 0
    last_applied: int = 0
    progress: Mapping[int, tuple[int, int, int]] = field(default_factory=dict)
    #: on the leader, per observer id: (raft match index, last fetch ms, last caught-up ms, directory id)
    observer_progress: Mapping[int, tuple[int, int, int, str | None]] = field(default_factory=dict)
    connected: tuple[int, ...] = ()
    last_index: int = 0
    #: ``clock()`` when pysyncobj's thread took this view
    observed_at: float = float("-inf")
    #: ``clock()`` of the latest moment a majority (this leader included) had answered; -inf if never
    majority_contact_at: float = float("-inf")
