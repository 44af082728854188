"""Recovery after a power loss that left a rolled segment without its tail while the next segment
survived (issue 28, the ``lose_unsynced`` storage fault): a rolled segment is fsynced in the
background, after the next one started, so the two reach the disk in either order.

The recovered log must not claim the offsets of the hole: it keeps what comes before it and
drops the later segments (the replica refetches them from the leader). A compacted log has
legitimate holes between segments and keeps them.
"""

from __future__ import annotations

import os
from pathlib import Path

from kraftlog.common.records import iter_batches
from kraftlog.storage import Log, LogConfig, build_batch

NOW = 1_700_000_000_000
CONFIG = {"segment_bytes": 4096, "index_interval_bytes": 256}


def _clock() -> int:
    return NOW


def _written_log(directory: Path, **cfg: object) -> Log:
    log = Log(directory, LogConfig(**{**CONFIG, **cfg}), clock_ms=_clock)
    for i in range(120):
        log.append_as_leader(build_batch([(f"k{i % 7}".encode(), b"v" * 90)], timestamp_ms=NOW), 0)
    assert len(log.segments) >= 3
    return log


def _cut_first_segment_in_half(log: Log) -> tuple[int, int]:
    """The first segment loses its second half of batches; returns (offset where it now ends,
    base of the second segment)."""
    first = log.segments[0]
    batches = [(pos, b) for pos, b in iter_batches(first.log_path.read_bytes())]
    keep_pos, keep_batch = batches[len(batches) // 2]
    second_base = log.segments[1].base_offset
    log.close_without_flush()
    os.truncate(first.log_path, keep_pos)
    return keep_batch.base_offset, second_base


def test_a_rolled_segment_cut_short_drops_the_segments_after_its_hole(tmp_path: Path) -> None:
    log = _written_log(tmp_path / "t-0")
    ends_at, second_base = _cut_first_segment_in_half(log)
    assert ends_at < second_base
    again = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=_clock)
    assert again.log_end_offset == ends_at  # no hole claimed: the replica refetches from ends_at
    assert [s.base_offset for s in again.segments] == [0]
    offsets = [b.base_offset for b in again.batches()]
    assert offsets == list(range(ends_at))
    assert not list(log.dir.glob(f"{second_base:020d}.*log"))
    again.close()


def test_an_empty_rolled_segment_leaves_the_log_at_its_base(tmp_path: Path) -> None:
    log = _written_log(tmp_path / "t-0")
    second = log.segments[1]
    third_base = log.segments[2].base_offset
    log.close_without_flush()
    os.truncate(second.log_path, 0)
    again = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=_clock)
    assert again.log_end_offset == second.base_offset < third_base
    assert [b.base_offset for b in again.batches()] == list(range(second.base_offset))
    again.close()


def test_below_the_recovery_point_the_segments_are_trusted(tmp_path: Path) -> None:
    """Only recovered segments are checked: what the recovery point covers was fsynced."""
    log = _written_log(tmp_path / "t-0")
    end = log.log_end_offset
    log.close_without_flush()
    again = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=end, clock_ms=_clock)
    assert again.log_end_offset == end
    again.close()


def test_a_compacted_log_keeps_its_segments_after_a_gap(tmp_path: Path) -> None:
    log = _written_log(tmp_path / "t-0", cleanup_policy=frozenset({"compact"}))
    segments = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    _cut_first_segment_in_half(log)
    again = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=_clock)
    assert [s.base_offset for s in again.segments] == segments
    assert again.log_end_offset == end
    again.close()
