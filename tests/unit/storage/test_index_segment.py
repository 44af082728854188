"""Boundaries of the sparse offset/time indexes and of segment rolling (storage._index, _segment).

Index lookups are checked on both sides of every entry; the log's roll rules (segment.bytes,
segment.ms with and without batch timestamps, segment.jitter.ms, a full offset or time index) are
checked at the exact byte / millisecond where they switch, with an injected clock.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest

from kraftlog.storage import (
    IndexCorruptError,
    Log,
    LogConfig,
    OffsetIndex,
    TimeIndex,
    build_batch,
)

NOW = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def one_record(ts: int, value_size: int = 40) -> bytes:
    return build_batch([(b"key", b"v" * value_size)], timestamp_ms=ts)


def open_log(tmp_path: Path, clock: FakeClock | None = None, **cfg: object) -> Log:
    return Log(tmp_path / "topic-0", LogConfig(**cfg), clock_ms=clock or FakeClock())


# ============================================================================ OffsetIndex


def make_offset_index(tmp_path: Path, max_entries: int = 4) -> OffsetIndex:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_entries * 8)
    idx.append(103, 50)
    idx.append(107, 120)
    idx.append(110, 300)
    return idx


def test_offset_index_lookup_below_on_between_and_past_entries(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    # below the first entry: the segment start
    assert idx.lookup(0) == (100, 0)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(102) == (100, 0)
    # exactly on entries
    assert idx.lookup(103) == (103, 50)
    assert idx.lookup(107) == (107, 120)
    assert idx.lookup(110) == (110, 300)
    # between entries: the floor entry
    assert idx.lookup(104) == (103, 50)
    assert idx.lookup(106) == (103, 50)
    assert idx.lookup(109) == (107, 120)
    # past the last entry
    assert idx.lookup(111) == (110, 300)
    assert idx.lookup(10**12) == (110, 300)
    assert idx.last_offset == 110


def test_offset_index_lookup_position(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    assert idx.lookup_position(0) == (100, 0)
    assert idx.lookup_position(49) == (100, 0)
    assert idx.lookup_position(50) == (103, 50)
    assert idx.lookup_position(299) == (107, 120)
    assert idx.lookup_position(10**9) == (110, 300)


def test_offset_index_ignores_non_increasing_entries(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.append(110, 400)  # same offset
    idx.append(115, 300)  # same position
    idx.append(105, 500)  # offset going back
    assert idx.items() == [(103, 50), (107, 120), (110, 300)]


def test_offset_index_truncate_to(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.flush()
    idx.truncate_to(111)  # nothing at or past 111
    assert idx.entries == 3
    idx.truncate_to(108)  # drops 110 only
    assert idx.items() == [(103, 50), (107, 120)]
    idx.truncate_to(107)  # drops the entry for exactly 107
    assert idx.items() == [(103, 50)]
    assert idx.path.stat().st_size == 8
    assert idx.lookup(200) == (103, 50)
    idx.truncate_to(0)
    assert idx.entries == 0
    assert idx.lookup(200) == (100, 0)
    assert idx.path.stat().st_size == 0


def test_offset_index_flush_and_reload_in_kafka_format(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.flush()
    raw = idx.path.read_bytes()
    assert raw == struct.pack(">iiiiii", 3, 50, 7, 120, 10, 300)  # relative offsets
    again = OffsetIndex(idx.path, 100, 32)
    assert again.items() == [(103, 50), (107, 120), (110, 300)]
    assert again.lookup(108) == (107, 120)


def test_offset_index_is_full_at_max_entries(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 4 * 8 + 7)  # 4 entries fit
    assert idx.max_entries == 4
    for i in range(4):
        assert not idx.is_full
        idx.append(i + 1, (i + 1) * 10)
    assert idx.is_full
    idx.truncate_to(4)
    assert not idx.is_full


@pytest.mark.parametrize("extra", [1, 3, 7])
def test_torn_offset_index_raises(tmp_path: Path, extra: int) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00" * extra)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, 0, 1024)


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.sanity_check(301)
    with pytest.raises(IndexCorruptError):
        idx.sanity_check(300)  # last entry's position is at the log end


# ============================================================================ TimeIndex


def make_time_index(tmp_path: Path, max_entries: int = 4) -> TimeIndex:
    idx = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, max_entries * 12)
    idx.maybe_append(1000, 103)
    idx.maybe_append(2000, 107)
    idx.maybe_append(1500, 109)  # timestamp not growing: ignored
    idx.maybe_append(3000, 110)
    return idx


def test_time_index_lookup_below_on_between_and_past_entries(tmp_path: Path) -> None:
    idx = make_time_index(tmp_path)
    assert idx.items() == [(1000, 103), (2000, 107), (3000, 110)]
    assert idx.lookup(0) == (-1, 100)
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1000) == (1000, 103)
    assert idx.lookup(1999) == (1000, 103)
    assert idx.lookup(2000) == (2000, 107)
    assert idx.lookup(2500) == (2000, 107)
    assert idx.lookup(3000) == (3000, 110)
    assert idx.lookup(10**15) == (3000, 110)
    assert idx.last_entry == (3000, 110)


def test_time_index_truncate_flush_reload(tmp_path: Path) -> None:
    idx = make_time_index(tmp_path)
    idx.flush()
    assert idx.path.read_bytes() == struct.pack(">qiqiqi", 1000, 3, 2000, 7, 3000, 10)
    idx.truncate_to(108)
    assert idx.items() == [(1000, 103), (2000, 107)]
    idx.truncate_to(107)
    assert idx.items() == [(1000, 103)]
    assert idx.lookup(5000) == (1000, 103)
    again = TimeIndex(idx.path, 100, 48)
    assert again.items() == [(1000, 103)]


def test_time_index_is_full_and_torn(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 2 * 12)
    assert idx.max_entries == 2
    idx.maybe_append(10, 1)
    assert not idx.is_full
    idx.maybe_append(20, 2)
    assert idx.is_full
    torn = tmp_path / "00000000000000000050.timeindex"
    torn.write_bytes(struct.pack(">qi", 10, 1) + b"\x01\x02")
    with pytest.raises(IndexCorruptError):
        TimeIndex(torn, 50, 1024)


def test_time_index_sanity_check(tmp_path: Path) -> None:
    idx = make_time_index(tmp_path)
    idx.sanity_check(111)
    with pytest.raises(IndexCorruptError):
        idx.sanity_check(110)  # an entry names an offset at the log end


# ============================================================================ index interval


def _batch_positions(seg) -> dict[int, tuple[int, int]]:  # position -> (last_offset, size)
    return {loc.position: (loc.last_offset, loc.size) for loc in seg.batches_from(0)}


def test_index_interval_zero_indexes_every_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=0)
    for i in range(20):
        log.append_as_leader(build_batch([(b"k", b"x" * (i + 1))] * 2, timestamp_ms=NOW + i), 0)
    seg = log.active_segment
    locs = list(seg.batches_from(0))
    entries = seg.offset_index.items()
    # Kafka adds an entry once more than index.interval.bytes were written since the last one: with
    # 0 that is every batch after the first (the first one sits at position 0, the lookup default)
    assert entries == [(loc.last_offset, loc.position) for loc in locs[1:]]
    # the time index follows the growing max timestamp at the same points
    assert seg.time_index.items() == [(NOW + i, 2 * i + 1) for i in range(1, 20)]


def test_index_interval_large_only_after_that_many_bytes(tmp_path: Path) -> None:
    rng = random.Random(7)
    interval = 1000
    log = open_log(tmp_path, index_interval_bytes=interval)
    for i in range(150):
        log.append_as_leader(one_record(NOW + i, rng.randrange(1, 300)), 0)
    seg = log.active_segment
    positions = _batch_positions(seg)
    entries = seg.offset_index.items()
    assert len(entries) >= 5
    prev_pos = 0
    for off, pos in entries:
        assert pos in positions, "an index entry must point at a batch start"
        assert positions[pos][0] == off, "the entry names the last offset of the batch it points at"
        gap = pos - prev_pos
        # more than `interval` bytes since the previous entry ...
        assert gap > interval
        # ... and no later than the first batch after that many bytes
        batch_before = max(p for p in positions if p < pos)
        assert batch_before - prev_pos <= interval
        prev_pos = pos
    # nothing is left unindexed for more than interval + one batch
    last_pos = max(positions)
    assert last_pos - prev_pos <= interval + positions[last_pos][1]


def test_index_lookup_finds_every_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=150)
    for i in range(60):
        log.append_as_leader(build_batch([(b"k", b"v" * 30)] * 3, timestamp_ms=NOW + i), 0)
    seg = log.active_segment
    for off in range(log.log_end_offset):
        loc = seg.find_batch(off)
        assert loc is not None and loc.base_offset <= off <= loc.last_offset
    assert seg.find_batch(log.log_end_offset) is None
    seg.sanity_check()


# ============================================================================ roll rules


def _single_size(ts: int = NOW) -> int:
    return len(one_record(ts))


def test_file_names_are_zero_padded_base_offsets(tmp_path: Path) -> None:
    size = _single_size()
    log = open_log(tmp_path, segment_bytes=size * 3)
    for _i in range(10):
        log.append_as_leader(one_record(NOW), 0)
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 3, 6, 9]
    log.close()
    names = sorted(
        p.name for p in (tmp_path / "topic-0").iterdir() if re.fullmatch(r"\d{20}\.(log|index|timeindex)", p.name)
    )
    expected = sorted(f"{b:020d}.{sfx}" for b in bases for sfx in ("log", "index", "timeindex"))
    assert names == expected
    assert f"{9:020d}.log" == "00000000000000000009.log"


def test_roll_on_segment_bytes_exact_fit_does_not_roll(tmp_path: Path) -> None:
    size = _single_size()
    log = open_log(tmp_path, segment_bytes=size * 3)
    for _ in range(3):
        log.append_as_leader(one_record(NOW), 0)
    assert len(log.segments) == 1
    assert log.active_segment.size == size * 3  # exactly segment.bytes: no roll
    log.append_as_leader(one_record(NOW), 0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert [s.size for s in log.segments] == [size * 3, size]


def test_roll_on_segment_bytes_one_byte_short(tmp_path: Path) -> None:
    size = _single_size()
    log = open_log(tmp_path, segment_bytes=size * 3 - 1)
    for _ in range(3):
        log.append_as_leader(one_record(NOW), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_segment_bytes_multi_batch_append_stays_together(tmp_path: Path) -> None:
    size = _single_size()
    log = open_log(tmp_path, segment_bytes=size * 4)
    log.append_as_leader(one_record(NOW), 0)
    log.append_as_leader(one_record(NOW) * 3, 0)  # 1 + 3 = 4 batches: fits exactly
    assert len(log.segments) == 1
    log.append_as_leader(one_record(NOW) * 2, 0)
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert log.segments[1].size == 2 * size


def test_roll_on_segment_ms_uses_first_batch_timestamp(tmp_path: Path) -> None:
    clock = FakeClock(NOW + 10_000)
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(one_record(NOW), 0)
    log.append_as_leader(one_record(NOW + 600), 0)
    log.append_as_leader(one_record(NOW + 1000), 0)  # exactly segment.ms after the first: no roll
    assert len(log.segments) == 1
    log.append_as_leader(one_record(NOW + 1001), 0)  # only 1 ms after the previous batch
    assert [s.base_offset for s in log.segments] == [0, 3]
    # the new segment measures from its own first batch
    log.append_as_leader(one_record(NOW + 2001), 0)
    assert len(log.segments) == 2
    log.append_as_leader(one_record(NOW + 2002), 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_roll_on_segment_ms_ignores_wall_clock_when_batches_have_timestamps(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(one_record(NOW), 0)
    clock.now += 50_000  # the broker clock moves, the batch timestamps do not
    log.append_as_leader(one_record(NOW + 10), 0)
    assert len(log.segments) == 1


def test_roll_on_segment_ms_with_jitter(tmp_path: Path) -> None:
    clock = FakeClock(NOW + 10_000)
    log = open_log(tmp_path, clock, segment_ms=1000, segment_jitter_ms=300)
    log.append_as_leader(one_record(NOW), 0)
    log.append_as_leader(one_record(NOW + 700), 0)  # segment.ms - jitter: never rolls
    assert len(log.segments) == 1
    log.append_as_leader(one_record(NOW + 1001), 0)  # past segment.ms: always rolls
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_segment_ms_without_timestamps_uses_clock(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(one_record(-1), 0)  # NO_TIMESTAMP
    clock.now += 1000
    log.append_as_leader(one_record(-1), 0)
    assert len(log.segments) == 1
    clock.now += 1
    log.append_as_leader(one_record(-1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_offset_index_is_full(tmp_path: Path) -> None:
    # 24 bytes: 3 offset entries (8 bytes), 2 time entries (12 bytes); constant timestamps keep the
    # time index at one entry so the offset index is what fills
    log = open_log(tmp_path, segment_index_bytes=24, index_interval_bytes=0)
    for _ in range(10):
        log.append_as_leader(one_record(NOW), 0)
    segs = log.segments
    # batches 1, 2, 3 get entries (the first sits at position 0), then the index is full
    assert [s.base_offset for s in segs] == [0, 4, 8]
    assert segs[0].offset_index.entries == 3 and segs[0].offset_index.is_full
    assert segs[0].time_index.entries == 1
    for s in segs:
        s.sanity_check()


def test_roll_when_time_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_index_bytes=24, index_interval_bytes=0)
    for i in range(9):
        log.append_as_leader(one_record(NOW + i), 0)
    segs = log.segments
    assert segs[0].time_index.entries == 2 and segs[0].time_index.is_full
    assert not segs[0].offset_index.is_full
    assert [s.base_offset for s in segs] == [0, 3, 6]
