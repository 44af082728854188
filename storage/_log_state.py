"""The state every part of `kraftlog.storage.Log` shares, declared once for the type checker.

`Log` is its class plus three mixins (recovery, reads, retention), split along its seams; each
mixin reads the log's fields and calls a few of its methods. They inherit this class so that those
fields and methods have types. It holds annotations only: `Log.__init__` sets the fields, and the
methods are the ones `Log` and its mixins define (the MRO finds those before anything here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._config import LogConfig
from ._epoch_cache import LeaderEpochCache
from ._producer_state import ProducerStateManager
from ._segment import LogSegment
from ._validator import VerifiedRanges


class _LogState:
    dir: Path
    topic: str
    partition: int
    config: LogConfig
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    _clock_ms: Callable[[], int]
    _lock: threading.RLock
    _bound: Any  # structlog's bound logger
    _segments: list[LogSegment]
    _bases: list[int]
    _log_start_offset: int
    _log_end_offset: int
    _recovery_point: int
    _high_watermark: int
    _structure_version: int
    _closed: bool
    _verified: VerifiedRanges
    _unverified_end: int
    _reported_corrupt: set[int]

    if TYPE_CHECKING:

        @property
        def active_segment(self) -> LogSegment: ...

        def _ensure_open(self) -> None: ...

        def _roll_locked(self, new_base: int) -> LogSegment: ...

        def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment: ...

        def _add_segment(self, seg: LogSegment) -> None: ...

        def _truncate_fully_locked(self, offset: int) -> None: ...

        def _rebuild_producer_state(self) -> None: ...
