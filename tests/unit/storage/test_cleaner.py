"""Tests of log compaction (`storage.clean_log`) and of the crash-safe segment swap it relies on.

Time is an injected fake clock: the tombstone delete horizon (delete.retention.ms from the first
clean), min.compaction.lag.ms and max.compaction.lag.ms are driven by moving ``clock.now``.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path

import pytest

from kraftlog.storage import Log, LogConfig, LogSegment, RecordBatchBuilder, clean_log

NOW = 1_700_000_000_000
COMPACT = frozenset({"compact"})


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Model:
    """A compacted log plus what was written to it: offset -> (key, value)."""

    def __init__(self, path: Path, clock: FakeClock, **cfg: object) -> None:
        cfg.setdefault("cleanup_policy", COMPACT)
        cfg.setdefault("segment_bytes", 1 << 20)
        self.clock = clock
        self.log = Log(path, LogConfig(**cfg), clock_ms=clock)
        self.written: dict[int, tuple[bytes, bytes | None]] = {}

    def append(self, records: list[tuple[bytes, bytes | None]], ts: int | None = None) -> None:
        b = RecordBatchBuilder()
        for key, value in records:
            b.append(self.clock.now if ts is None else ts, key, value)
        info = self.log.append_as_leader(b.build(), 0)
        for off, rec in zip(range(info.first_offset, info.last_offset + 1), records, strict=False):
            self.written[off] = rec

    def put(self, key: str, value: str | None = "auto", ts: int | None = None) -> int:
        off = self.log.log_end_offset
        v = f"{key}@{off}".encode() if value == "auto" else (None if value is None else value.encode())
        self.append([(key.encode(), v)], ts)
        return off

    def seal(self) -> None:
        """Roll, and let everything so far be committed (HW = LEO)."""
        self.log.roll()
        self.log.update_high_watermark(self.log.log_end_offset)


def records(log: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    return {r.offset: (r.key, r.value) for b in log.batches() for r in b.records()}


def seg_digest(seg: LogSegment) -> str:
    return hashlib.sha1(seg.log_path.read_bytes()).hexdigest()


def latest_per_key(written: dict[int, tuple[bytes, bytes | None]], end: int) -> set[int]:
    last: dict[bytes, int] = {}
    for off in sorted(written):
        if off < end:
            last[written[off][0]] = off
    return set(last.values())


def check_consistent(log: Log) -> None:
    for b in log.batches():
        assert b.is_valid()
    for seg in log.segments:
        seg.sanity_check()
    offsets = sorted(records(log))
    assert offsets == sorted(set(offsets))
    # every offset is readable: the first batch returned is the first one ending at or after it
    all_batches = log.batches()
    for off in range(log.log_start_offset, log.log_end_offset):
        info = log.read(off, 1)
        expected = next(b for b in all_batches if b.last_offset >= off)
        assert info.first_batch_offset == expected.base_offset, off


def build_random(tmp_path: Path, clock: FakeClock, seed: int = 3, segments: int = 5, **cfg: object) -> Model:
    rng = random.Random(seed)
    m = Model(tmp_path / "compacted-0", clock, **cfg)
    for s in range(segments):
        for _ in range(8):
            n = rng.randrange(1, 4)
            m.append([(f"k{rng.randrange(8)}".encode(), f"v{s}-{rng.random():.6f}".encode()) for _ in range(n)])
        m.seal()
    for _ in range(4):  # active segment
        m.append([(f"k{rng.randrange(8)}".encode(), b"active")])
    m.log.update_high_watermark(m.log.log_end_offset)
    return m


# ============================================================================ basic compaction


def test_latest_value_per_key_kept_offsets_unchanged(tmp_path: Path) -> None:
    clock = FakeClock()
    m = build_random(tmp_path, clock)
    log = m.log
    active_before = seg_digest(log.active_segment)
    leo = log.log_end_offset
    end = log.active_segment.base_offset
    stats = clean_log(log, clock.now, force=True)
    assert stats is not None and stats.end_offset == end
    after = records(log)
    expected_cleaned = latest_per_key(m.written, end)
    assert {o for o in after if o < end} == expected_cleaned
    assert len(expected_cleaned) <= 8
    for off, rec in after.items():
        assert rec == m.written[off], "a kept record keeps its offset, key and value"
    assert {o for o in after if o >= end} == {o for o in m.written if o >= end}
    assert seg_digest(log.active_segment) == active_before, "the active segment is never cleaned"
    assert log.log_end_offset == leo
    assert stats.records_retained == len(expected_cleaned)
    check_consistent(log)
    # appends continue after the log end
    assert log.append_as_leader(_one(b"k1", b"new"), 0).first_offset == leo


def _one(key: bytes, value: bytes | None, ts: int = NOW) -> bytes:
    b = RecordBatchBuilder()
    b.append(ts, key, value)
    return b.build()


def test_cleaned_log_survives_reopen_and_recovery(tmp_path: Path) -> None:
    clock = FakeClock()
    m = build_random(tmp_path, clock, seed=5)
    clean_log(m.log, clock.now, force=True)
    expected = records(m.log)
    leo = m.log.log_end_offset
    m.log.close()
    for clean in (True, False):
        again = Log(
            m.log.dir, m.log.config, had_clean_shutdown=clean, recovery_point=leo if clean else 0, clock_ms=clock
        )
        assert records(again) == expected
        assert again.log_end_offset == leo
        check_consistent(again)
        again.close()


def test_second_clean_removes_keys_superseded_in_new_dirty_segments(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock)
    a0 = m.put("a")
    b0 = m.put("b")
    m.seal()
    m.put("c")
    m.seal()
    clean_log(m.log, clock.now, force=True)
    assert set(records(m.log)) == {a0, b0, 2}
    a1 = m.put("a")  # a newer value for a key of the already clean part
    m.seal()
    m.put("z")
    stats = clean_log(m.log, clock.now, force=True)
    assert stats.first_dirty_offset == 3
    assert set(records(m.log)) == {b0, 2, a1, 4}
    check_consistent(m.log)


def test_single_segment_log_is_not_cleaned(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock)
    for _ in range(5):
        m.put("same")
    m.log.update_high_watermark(m.log.log_end_offset)
    digest = seg_digest(m.log.active_segment)
    assert clean_log(m.log, clock.now, force=True) is None
    assert seg_digest(m.log.active_segment) == digest
    assert len(records(m.log)) == 5


def test_active_segment_never_cleaned_even_if_all_duplicates(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock)
    for _ in range(6):
        m.put("x")
    m.seal()
    for _ in range(6):
        m.put("x")
    m.log.update_high_watermark(m.log.log_end_offset)
    digest = seg_digest(m.log.active_segment)
    clean_log(m.log, clock.now, force=True)
    assert seg_digest(m.log.active_segment) == digest
    assert sorted(records(m.log)) == [5] + list(range(6, 12))


# ============================================================================ tombstones


def test_tombstone_kept_until_delete_retention_after_first_clean(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock, delete_retention_ms=10_000)
    old = clock.now - 30 * 24 * 3600 * 1000  # records are old: the horizon counts from the clean
    m.put("a", ts=old)
    m.put("b", ts=old)
    tomb = m.put("a", None, ts=old)
    m.put("c", ts=old)
    m.seal()
    m.put("filler0")
    m.seal()
    t_first = clock.now
    clean_log(m.log, clock.now, force=True)
    recs = records(m.log)
    assert 0 not in recs, "the value the tombstone deletes is gone"
    assert recs[tomb] == (b"a", None), "the tombstone itself stays"
    tomb_batch = next(b for b in m.log.batches() if b.base_offset <= tomb <= b.last_offset)
    assert tomb_batch.has_delete_horizon
    assert tomb_batch.delete_horizon_ms == t_first + 10_000
    assert tomb_batch.is_valid()
    assert [r.timestamp_ms for r in tomb_batch.records()] == [old], "record timestamps are kept"

    # before the horizon: a later clean keeps it
    clock.now = t_first + 9_999
    m.put("filler1")
    m.seal()
    assert clean_log(m.log, clock.now, force=True) is not None
    assert records(m.log)[tomb] == (b"a", None)
    b = next(b for b in m.log.batches() if b.base_offset <= tomb <= b.last_offset)
    assert b.delete_horizon_ms == t_first + 10_000, "the horizon is set once"

    # past the horizon: removed on the next clean
    clock.now = t_first + 10_001
    m.put("filler2")
    m.seal()
    stats = clean_log(m.log, clock.now, force=True)
    assert stats.tombstones_removed == 1
    recs = records(m.log)
    assert tomb not in recs
    assert {k for k, _v in recs.values()} == {b"b", b"c", b"filler0", b"filler1", b"filler2"}
    check_consistent(m.log)


def test_tombstone_for_key_rewritten_later_is_dropped_with_old_values(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock, delete_retention_ms=10_000)
    m.put("a")
    m.put("a", None)
    a2 = m.put("a")
    m.seal()
    m.put("z")
    m.seal()
    clean_log(m.log, clock.now, force=True)
    assert {o for o, (k, _v) in records(m.log).items() if k == b"a"} == {a2}


# ============================================================================ what may be cleaned


def test_nothing_at_or_above_high_watermark_is_cleaned(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock)
    for _ in range(4):
        for _ in range(4):
            m.put("x")
        m.log.roll()
    m.put("x")
    bases = [s.base_offset for s in m.log.segments]
    assert bases == [0, 4, 8, 12, 16]
    m.log.update_high_watermark(10)  # inside the third segment
    untouched = {s.base_offset: seg_digest(s) for s in m.log.segments[2:]}
    stats = clean_log(m.log, clock.now, force=True)
    assert stats.end_offset == 8
    for s in m.log.segments:
        if s.base_offset in untouched:
            assert seg_digest(s) == untouched[s.base_offset]
    assert sorted(records(m.log)) == [7] + list(range(8, 17))
    # the HW at a segment boundary lets that segment be cleaned too
    m.log.update_high_watermark(12)
    stats = clean_log(m.log, clock.now, force=True)
    assert stats.end_offset == 12
    assert sorted(records(m.log)) == [11, 12, 13, 14, 15, 16]
    m.log.update_high_watermark(0)
    assert clean_log(m.log, clock.now, force=True) is None


def test_min_compaction_lag(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock, min_compaction_lag_ms=5000)
    for age in (20_000, 10_000, 1_000):
        for _ in range(3):
            m.put("x", ts=clock.now - age)
        m.seal()
    m.put("y")
    digest_young = seg_digest(m.log.segments[2])
    stats = clean_log(m.log, clock.now, force=True)
    assert stats.end_offset == 6, "the segment younger than the lag stops the cleanable range"
    assert seg_digest(m.log.segments[-2]) == digest_young
    assert sorted(records(m.log)) == [5, 6, 7, 8, 9]
    clock.now += 4_000  # the young segment is now exactly 5 s old: cleanable
    m.seal()  # rolls the segment holding y@9, which is only 4 s old: not cleanable
    stats = clean_log(m.log, clock.now, force=True)
    assert stats is not None and stats.end_offset == 9
    assert sorted(o for o, (k, _v) in records(m.log).items() if k == b"x") == [8]


def test_min_cleanable_dirty_ratio(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock, min_cleanable_dirty_ratio=0.5)
    for i in range(40):
        m.put(f"key{i}")  # all distinct: cleaning keeps everything
    m.seal()
    m.put("tail")
    assert clean_log(m.log, clock.now) is not None  # everything is dirty: ratio 1
    clean_bytes = m.log.segments[0].size
    for _ in range(3):
        m.put("key0")
    m.seal()
    m.put("tail2")
    assert [s.base_offset for s in m.log.segments] == [0, 40, 44]
    dirty_bytes = m.log.segments[1].size
    assert dirty_bytes / (clean_bytes + dirty_bytes) < 0.5
    digests = [seg_digest(s) for s in m.log.segments]
    assert clean_log(m.log, clock.now) is None
    assert [seg_digest(s) for s in m.log.segments] == digests
    stats = clean_log(m.log, clock.now, force=True)
    assert stats is not None
    assert 0 not in records(m.log)


def test_max_compaction_lag_forces_clean(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "c-0", clock, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=60_000)
    for i in range(40):
        m.put(f"key{i}")
    m.seal()
    m.put("tail")
    clean_log(m.log, clock.now, force=True)
    m.put("key0", ts=clock.now)
    m.seal()
    assert clean_log(m.log, clock.now) is None
    clock.now += 60_001
    assert clean_log(m.log, clock.now) is not None
    assert 0 not in records(m.log)


# ============================================================================ crash-safe swap


def _build_for_swap(path: Path, clock: FakeClock) -> Model:
    """Three rolled segments (one cleaner group) whose last records have unique keys, plus an
    active segment."""
    m = Model(path, clock)
    for s in range(3):
        for i in range(6):
            m.put(f"k{i % 3}")
        m.put(f"unique{s}")
        m.log.roll()
    m.put("k0")
    m.log.update_high_watermark(m.log.log_end_offset)
    return m


def _reference(tmp_path: Path, clock: FakeClock) -> tuple[dict, list[int], Path]:
    ref = _build_for_swap(tmp_path / "ref" / "s-0", clock)
    clean_log(ref.log, clock.now, force=True)
    out = records(ref.log), [s.base_offset for s in ref.log.segments]
    ref.log.close()
    return out[0], out[1], ref.log.dir


def test_crash_between_swap_rename_and_final_rename(tmp_path: Path, monkeypatch) -> None:
    clock = FakeClock()
    expected, expected_bases, _ref = _reference(tmp_path, clock)
    m = _build_for_swap(tmp_path / "s-0", clock)
    original = LogSegment.rename_all

    class Crash(Exception):
        pass

    def crashing(self, suffix_from: str, suffix_to: str) -> None:
        if suffix_from == ".swap" and suffix_to == "":
            raise Crash()
        original(self, suffix_from, suffix_to)

    monkeypatch.setattr(LogSegment, "rename_all", crashing)
    with pytest.raises(Crash):
        clean_log(m.log, clock.now, force=True)
    monkeypatch.setattr(LogSegment, "rename_all", original)
    m.log.close_without_flush()
    names = {p.name for p in m.log.dir.iterdir()}
    assert f"{0:020d}.log.swap" in names  # the state the crash left
    again = Log(m.log.dir, m.log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=clock)
    assert records(again) == expected
    assert [s.base_offset for s in again.segments] == expected_bases
    assert not any(p.name.endswith((".swap", ".cleaned")) for p in again.dir.iterdir())
    check_consistent(again)


@pytest.mark.parametrize("old_present", [True, False], ids=["old_segments_present", "old_deleted"])
@pytest.mark.parametrize("with_indexes", [True, False], ids=["full_swap_set", "log_swap_only"])
def test_swap_files_completed_at_load(tmp_path: Path, old_present: bool, with_indexes: bool) -> None:
    clock = FakeClock()
    expected, expected_bases, ref_dir = _reference(tmp_path, clock)
    m = _build_for_swap(tmp_path / "s-0", clock)
    group = [s.base_offset for s in m.log.segments[:-1]]
    m.log.close()
    d = m.log.dir
    suffixes = (".log", ".index", ".timeindex") if with_indexes else (".log",)
    for sfx in suffixes:
        shutil.copyfile(ref_dir / f"{0:020d}{sfx}", d / f"{0:020d}{sfx}.swap")
    if not old_present:
        for base in group:
            for sfx in (".log", ".index", ".timeindex"):
                (d / f"{base:020d}{sfx}").unlink()
    again = Log(d, m.log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=clock)
    assert records(again) == expected
    assert [s.base_offset for s in again.segments] == expected_bases
    assert not any(p.name.endswith(".swap") for p in d.iterdir())
    check_consistent(again)


def test_stray_cleaned_and_deleted_files_removed_at_load(tmp_path: Path) -> None:
    clock = FakeClock()
    m = _build_for_swap(tmp_path / "s-0", clock)
    expected = records(m.log)
    m.log.close()
    d = m.log.dir
    for name in (
        f"{0:020d}.log.cleaned",
        f"{0:020d}.index.cleaned",
        f"{0:020d}.timeindex.cleaned",
        f"{7:020d}.log.deleted",
        f"{7:020d}.index.deleted",
    ):
        (d / name).write_bytes(b"\x00garbage" * 10)
    for clean in (True, False):
        again = Log(d, m.log.config, had_clean_shutdown=clean, recovery_point=0, clock_ms=clock)
        assert records(again) == expected
        assert not any(p.name.endswith((".cleaned", ".deleted")) for p in d.iterdir())
        check_consistent(again)
        again.close()


def test_crash_between_log_and_index_final_renames(tmp_path: Path, monkeypatch) -> None:
    """`rename_all(".swap", "")` renames the .log first, then the indexes: a crash in between leaves
    ``.index.swap``/``.timeindex.swap`` with no ``.log.swap``. Like Kafka's loader (which deletes
    index swap files and rebuilds), the next load must leave no ``.swap`` file behind and give the
    segment a correct index."""
    import os

    clock = FakeClock()
    expected, expected_bases, ref_dir = _reference(tmp_path, clock)
    ref_log = Log(
        ref_dir,
        LogConfig(cleanup_policy=COMPACT, segment_bytes=1 << 20),
        had_clean_shutdown=True,
        recovery_point=10**9,
        clock_ms=clock,
    )
    ref_index = ref_log.segments[0].offset_index.items()
    ref_log.close()
    m = _build_for_swap(tmp_path / "s-0", clock)
    real_replace = os.replace

    class Crash(Exception):
        pass

    def crashing(src, dst) -> None:
        if str(src).endswith(".index.swap"):
            raise Crash()
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing)
    with pytest.raises(Crash):
        clean_log(m.log, clock.now, force=True)
    monkeypatch.setattr(os, "replace", real_replace)
    m.log.close_without_flush()
    names = {p.name for p in m.log.dir.iterdir()}
    assert f"{0:020d}.log" in names and f"{0:020d}.index.swap" in names  # the state the crash left
    again = Log(m.log.dir, m.log.config, had_clean_shutdown=False, recovery_point=0, clock_ms=clock)
    assert records(again) == expected
    assert [s.base_offset for s in again.segments] == expected_bases
    assert again.segments[0].offset_index.items() == ref_index
    check_consistent(again)
    leftovers = sorted(p.name for p in again.dir.iterdir() if ".swap" in p.name)
    assert leftovers == [], "stray index swap files are never removed"


def _txn(m: Model, pid: int, key: str, value: str) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    b.append(m.clock.now, key.encode(), value.encode())
    return m.log.append_as_leader(b.build(), 0).first_offset


def _marker(m: Model, pid: int, commit: bool) -> None:
    from kraftlog.common.records import ControlRecordType
    from kraftlog.storage import AppendOrigin, build_control_batch

    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_control_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=m.clock.now)
    m.log.append_as_leader(batch, 0, origin=AppendOrigin.COORDINATOR)


def test_an_aborted_value_never_hides_the_committed_one(tmp_path: Path) -> None:
    """Found in review: the cleaner took an aborted transaction's value as the key's latest and
    dropped the committed one before it (read_committed readers lost the key)."""
    clock = FakeClock()
    m = Model(tmp_path / "t-0", clock)
    m.put("K")  # 0: committed (no transaction)
    _txn(m, 9, "K", "aborted")  # 1
    _marker(m, 9, commit=False)  # 2
    m.seal()
    m.put("other")
    m.seal()
    clean_log(m.log, clock.now, force=True)
    kept = records(m.log)
    assert kept[0] == (b"K", b"K@0")  # the committed value stays
    assert 1 not in kept  # the aborted record is gone
    assert 2 in kept  # the marker is kept


def test_an_open_transaction_is_not_cleaned(tmp_path: Path) -> None:
    clock = FakeClock()
    m = Model(tmp_path / "t-0", clock)
    m.put("K")  # 0
    _txn(m, 9, "K", "open")  # 1: still open: its outcome is unknown
    m.seal()
    m.put("K")  # 2
    m.seal()
    assert m.log.last_stable_offset == 1
    clean_log(m.log, clock.now, force=True)
    kept = records(m.log)
    assert kept[0] == (b"K", b"K@0") and kept[1] == (b"K", b"open")  # nothing at or past the LSO was cleaned
