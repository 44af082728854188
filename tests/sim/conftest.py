"""The seeded simulation (``make sim``): real brokers in one process on simulated time. No socket is
opened beyond the event loop's own wake-up pair; the harness package sits next to the tests."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    """Thousands of runs: log only what is fatal (replay one seed outside pytest to see its logs)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    yield
    structlog.reset_defaults()
