"""Clock faults (issue 28): a node's wall clock set ahead of or behind the others', or made to
jump, through the house clock's test-only hook (`kraftlog.common.CLOCK_OFFSET_FILE` in the node's
``KRAFTLOG_TEST_FAULTS`` directory; the node rereads it within 0.2 s). Monotonic time is left
alone, as a real clock step leaves it.

Kinds:

- ``clock_skew``: the node's wall clock runs a few seconds off (ahead or behind, up to a broker
  session) for the hold, then is set right: timestamps it assigns (LogAppendTime, the time index,
  group and transaction expiry, the controller's broker heartbeat ages) disagree with the others'.
- ``clock_jump``: the node's wall clock jumps minutes to hours forward or back for the hold, then
  jumps back: every wall-clock timer on the node (sessions, locks, transaction timeouts, ISR lag)
  sees a huge step. Both stay below the default retention (7 days), so no record is old enough to
  delete; what they may do is expire sessions, locks and transactions early or late, which must
  cost retries, never records.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from kraftlog.common import CLOCK_OFFSET_FILE

__all__ = ["CLOCK_KINDS", "choose_offset_ms", "set_clock_offset"]

CLOCK_KINDS: tuple[str, ...] = ("clock_skew", "clock_jump")
_SKEWS_MS = (500, 2_000, 5_000, 12_000)
_JUMPS_MS = (600_000, 3_600_000, 7_200_000)


def choose_offset_ms(kind: str, rng: random.Random) -> int:
    """The seeded offset of a clock fault: its size from the kind's list, its sign at random."""
    sizes = _SKEWS_MS if kind == "clock_skew" else _JUMPS_MS
    return rng.choice(sizes) * rng.choice((1, -1))


def set_clock_offset(fault_dir: Path, offset_ms: int) -> None:
    """Shift a running node's wall clock by ``offset_ms`` (0: its true time again)."""
    fault_dir.mkdir(parents=True, exist_ok=True)
    path = fault_dir / CLOCK_OFFSET_FILE
    if offset_ms:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(str(offset_ms), encoding="utf-8")
        os.replace(tmp, path)
    else:
        path.unlink(missing_ok=True)
