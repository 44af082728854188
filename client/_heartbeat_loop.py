"""The heartbeat thread's loop that the KIP-848 consumer and the share consumer (KIP-932) share: one
beat when it is due or when woken early, the delay the beat returns until the next, and a backoff
after a beat that raised, so the thread outlives any one failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

__all__ = ["run_heartbeats"]

_log = structlog.get_logger(__name__)


def run_heartbeats(
    beat: Callable[[], float],
    stop: threading.Event,
    wake: threading.Event,
    retry_backoff_s: float,
    *,
    failed_event: str,
    group_id: str,
) -> None:
    """Call ``beat`` (which returns the seconds until the next beat) until ``stop`` is set; ``wake``
    brings the next beat forward. The wake flag is cleared before the beat, so a wake that comes
    during a beat causes one more."""
    next_beat = 0.0
    while not stop.is_set():
        wake.wait(max(0.0, next_beat - time.monotonic()))
        if stop.is_set():
            return
        wake.clear()
        try:
            delay = beat()
        except Exception as err:  # noqa: BLE001 - the thread must outlive any one failure
            _log.warning(failed_event, group=group_id, error=repr(err))
            delay = retry_backoff_s
        next_beat = time.monotonic() + delay
