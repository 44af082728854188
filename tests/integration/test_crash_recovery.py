"""Crash safety of `storage.Log`: SIGKILL of a writer process, torn segment files, flipped bytes,
and damaged index files.

After every damage the log is reopened and must: end at a whole valid batch, keep every batch
before the damage byte for byte, hold indexes that agree with the data, and serve a read of every
offset below its log end.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kraftlog.storage import (
    MAX_TIMESTAMP,
    Log,
    LogConfig,
    OffsetIndex,
    RecordBatchBuilder,
    TimeIndex,
    iter_batches,
)

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WRITER = HERE / "_crash_writer.py"
# the writer's config (kept in step with _crash_writer.WRITER_CONFIG)
WRITER_CONFIG = {"segment_bytes": 32 * 1024, "index_interval_bytes": 1024}


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


# ============================================================================ shared checks


def check_log(log: Log) -> list:
    """The invariants every recovered log must satisfy; returns its batches."""
    batches = log.batches()
    prev_last = log.log_start_offset - 1
    for b in batches:
        assert b.is_valid(), b
        assert b.base_offset > prev_last
        b.records()  # decodes
        prev_last = b.last_offset
    assert prev_last + 1 == log.log_end_offset
    for seg in log.segments:
        seg.sanity_check()
        # every byte of the file is a whole batch: the log ends at a batch boundary
        assert sum(loc.size for loc in seg.batches_from(0)) == seg.size
        assert os.path.getsize(seg.log_path) == seg.size
        # index entries point at batch starts and name that batch's last offset
        starts = {loc.position: loc.last_offset for loc in seg.batches_from(0)}
        for off, pos in seg.offset_index.items():
            assert starts.get(pos) == off, (seg, off, pos)
    for off in range(log.log_start_offset, log.log_end_offset):
        info = log.read(off, 1)
        first = next(b for _p, b in iter_batches(info.records))
        assert first.base_offset <= off <= first.last_offset, off
    # the epoch cache agrees with the batches
    derived = []
    for b in batches:
        if b.partition_leader_epoch >= 0 and (not derived or b.partition_leader_epoch > derived[-1][0]):
            derived.append((b.partition_leader_epoch, b.base_offset))
    assert log.epoch_cache.entries == derived
    return batches


def index_items_on_disk(seg) -> tuple[list, list]:
    oi = OffsetIndex(seg.offset_index.path, seg.base_offset, 1 << 20)
    ti = TimeIndex(seg.time_index.path, seg.base_offset, 1 << 20)
    return oi.items(), ti.items()


# ============================================================================ (a) SIGKILL


@pytest.mark.parametrize("acks_before_kill,seed", [(150, 1), (400, 2), (700, 3)])
def test_sigkill_during_appends(tmp_path: Path, acks_before_kill: int, seed: int) -> None:
    d = tmp_path / "crash-0"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(d), str(seed), "60"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acks: list[tuple[int, int]] = []
    reached = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ACK":
                acks.append((int(parts[1]), int(parts[2])))
                if len(acks) >= acks_before_kill:
                    reached.set()
        reached.set()  # EOF: the writer died or finished

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert reached.wait(timeout=30), "writer too slow"
        assert proc.poll() is None, f"writer exited early with {proc.returncode}"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    t.join(timeout=10)
    assert not t.is_alive()
    assert len(acks) >= acks_before_kill
    last_seq, last_offset = acks[-1]
    assert [s for s, _o in acks] == list(range(len(acks)))

    log = Log(d, LogConfig(**WRITER_CONFIG), recovery_point=0, had_clean_shutdown=False, clock_ms=FakeClock(2**40))
    # the page cache survives a process kill: every acknowledged append is there
    assert log.log_end_offset >= last_offset + 1
    assert len(log.segments) > 1
    batches = check_log(log)
    # what survived is a prefix of what was written: dense offsets, appends in order, no gap
    assert batches[0].base_offset == 0
    seqs = []
    for b in batches:
        for r in b.records():
            key = bytes(r.key)
            assert r.value is not None and r.value.startswith(key)
            seq = int(key.split(b"-")[0])
            if not seqs or seqs[-1] != seq:
                seqs.append(seq)
    assert seqs == list(range(len(seqs)))
    assert seqs[-1] >= last_seq
    assert log.recovery_point == log.log_end_offset
    leo = log.log_end_offset
    b = RecordBatchBuilder()
    b.append(2**40, b"after", b"crash")
    assert log.append_as_leader(b.build(), 99).first_offset == leo
    log.close()


# ============================================================================ good multi-segment log


def _batch(ts_list: list[int], tag: int) -> bytes:
    b = RecordBatchBuilder()
    for i, ts in enumerate(ts_list):
        b.append(ts, f"key-{tag}-{i}".encode(), f"value-{tag}-{i}".encode() * (1 + tag % 5))
    return b.build()


GOOD_CONFIG = {"segment_bytes": 3000, "index_interval_bytes": 200}


@pytest.fixture(scope="module")
def good_log(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A cleanly closed log of ~120 batches over several segments and epochs, and its layout."""
    d = tmp_path_factory.mktemp("good") / "good-0"
    rng = random.Random(1234)
    clock = FakeClock()
    log = Log(d, LogConfig(**GOOD_CONFIG), clock_ms=clock)
    for i in range(120):
        n = rng.randrange(1, 5)
        log.append_as_leader(_batch([NOW - 100_000 + 100 * i + j for j in range(n)], i), i // 25)
    # fill a fresh active segment with small batches (the byte-flip test damages it)
    log.roll()
    i = 120
    while True:
        nxt = _batch([NOW - 50_000 + 100 * i], i * 5)
        if log.active_segment.size + len(nxt) > GOOD_CONFIG["segment_bytes"]:
            break
        log.append_as_leader(nxt, 5)
        i += 1
    segs = []
    for seg in log.segments:
        segs.append(
            {
                "base": seg.base_offset,
                "name": seg.log_path.name,
                "size": seg.size,
                "batches": list(seg.batches_from(0)),
                "offset_index": seg.offset_index.items(),
                "time_index": seg.time_index.items(),
            }
        )
    all_bytes = [b.to_bytes() for b in log.batches()]
    leo = log.log_end_offset
    log.close()
    assert len(segs) >= 5
    return {"dir": d, "segments": segs, "batches": all_bytes, "leo": leo}


def _copy(good: dict, dest: Path) -> Path:
    d = dest / "good-0"
    shutil.copytree(good["dir"], d)
    return d


def _expected_after_cut(seg: dict, cut: int) -> int:
    """The log end after recovery when ``seg``'s file is cut to ``cut`` bytes."""
    leo = seg["base"]
    for loc in seg["batches"]:
        if loc.position + loc.size <= cut:
            leo = loc.last_offset + 1
    return leo


def _check_prefix(log: Log, good: dict) -> None:
    got = [b.to_bytes() for b in log.batches()]
    assert got == good["batches"][: len(got)]
    for seg in log.segments:
        info = next(s for s in good["segments"] if s["base"] == seg.base_offset)
        want_oi = [e for e in info["offset_index"] if e[0] < log.log_end_offset]
        want_ti = [e for e in info["time_index"] if e[1] < log.log_end_offset]
        assert seg.offset_index.items() == want_oi, seg
        assert seg.time_index.items() == want_ti, seg
        assert index_items_on_disk(seg) == (want_oi, want_ti), seg


# ============================================================================ (b) torn segments


def _cut_and_reopen(good: dict, dest: Path, seg_idx: int, cut: int) -> tuple[Log, int]:
    d = _copy(good, dest)
    seg = good["segments"][seg_idx]
    os.truncate(d / seg["name"], cut)
    log = Log(d, LogConfig(**GOOD_CONFIG), recovery_point=0, had_clean_shutdown=False, clock_ms=FakeClock())
    return log, _expected_after_cut(seg, cut)


def test_truncated_last_segment_recovers_to_last_whole_batch(good_log: dict, tmp_path: Path) -> None:
    rng = random.Random(99)
    last = len(good_log["segments"]) - 1
    seg = good_log["segments"][last]
    cuts = {0, seg["size"], seg["batches"][1].position, seg["batches"][-1].position + 11}
    cuts |= {rng.randrange(0, seg["size"]) for _ in range(16)}
    for k, cut in enumerate(sorted(cuts)):
        log, want = _cut_and_reopen(good_log, tmp_path / f"t{k}", last, cut)
        try:
            assert log.log_end_offset == want, f"cut at byte {cut}"
            assert len(log.segments) == len(good_log["segments"])
            assert log.active_segment.size <= cut
            check_log(log)
            _check_prefix(log, good_log)
            assert log.recovery_point == want
        finally:
            log.close()


def test_truncated_middle_segment_drops_later_segments(good_log: dict, tmp_path: Path) -> None:
    rng = random.Random(7)
    n = len(good_log["segments"])
    trials = 0
    for seg_idx in range(0, n - 1):
        seg = good_log["segments"][seg_idx]
        # cut strictly inside a batch (a cut on a batch boundary leaves a valid, shorter segment)
        picks = {0, len(seg["batches"]) - 1} | {rng.randrange(len(seg["batches"])) for _ in range(2)}
        for j in sorted(picks):
            loc = seg["batches"][j]
            cut = loc.position + rng.randrange(1, loc.size)
            log, want = _cut_and_reopen(good_log, tmp_path / f"m{trials}", seg_idx, cut)
            trials += 1
            try:
                assert want == loc.base_offset
                assert log.log_end_offset == want, f"segment {seg_idx} cut at byte {cut}"
                assert [s.base_offset for s in log.segments] == [s["base"] for s in good_log["segments"][: seg_idx + 1]]
                names = {p.name for p in log.dir.iterdir()}
                for later in good_log["segments"][seg_idx + 1 :]:
                    stem = later["name"][:-4]
                    assert not {stem + ".log", stem + ".index", stem + ".timeindex"} & names
                check_log(log)
                _check_prefix(log, good_log)
                # appends continue at the new log end, in the truncated segment
                nxt = log.append_as_leader(_batch([NOW], 999), 50).first_offset
                assert nxt == want
                check_log(log)
            finally:
                log.close()
    assert trials >= 10


# ============================================================================ (c) flipped bytes


def _flip_positions(loc, rng: random.Random) -> int:
    """A byte of the batch that its checks cover: batchLength, magic, CRC, attributes .. end.
    (baseOffset and partitionLeaderEpoch are outside the CRC by design of the format.)"""
    while True:
        rel = rng.randrange(8, loc.size)
        if not 12 <= rel < 16:
            return loc.position + rel


def test_flipped_bytes_in_active_segment(good_log: dict, tmp_path: Path) -> None:
    rng = random.Random(2024)
    active = good_log["segments"][-1]
    assert len(active["batches"]) >= 5
    for k in range(24):
        d = _copy(good_log, tmp_path / f"f{k}")
        data = bytearray((d / active["name"]).read_bytes())
        hit = sorted(rng.sample(range(len(active["batches"])), rng.randrange(1, 3)))
        for j in hit:
            pos = _flip_positions(active["batches"][j], rng)
            data[pos] ^= rng.randrange(1, 256)
        (d / active["name"]).write_bytes(bytes(data))
        first_bad = active["batches"][hit[0]]
        rp = 0 if k % 3 == 0 else active["base"]
        log = Log(d, LogConfig(**GOOD_CONFIG), recovery_point=rp, had_clean_shutdown=False, clock_ms=FakeClock())
        try:
            assert log.log_end_offset == first_bad.base_offset, (k, hit)
            assert log.active_segment.size == first_bad.position
            check_log(log)
            _check_prefix(log, good_log)
        finally:
            log.close()


def test_flipped_byte_in_old_segment_below_recovery_point_with_crash(good_log: dict, tmp_path: Path) -> None:
    # recovery from 0 finds damage in the first segment: everything after it goes
    d = _copy(good_log, tmp_path)
    seg = good_log["segments"][0]
    loc = seg["batches"][3]
    data = bytearray((d / seg["name"]).read_bytes())
    data[loc.position + 40] ^= 0xFF
    (d / seg["name"]).write_bytes(bytes(data))
    log = Log(d, LogConfig(**GOOD_CONFIG), recovery_point=0, had_clean_shutdown=False, clock_ms=FakeClock())
    assert log.log_end_offset == loc.base_offset
    assert len(log.segments) == 1
    check_log(log)
    log.close()


# ============================================================================ (d) damaged indexes


@pytest.fixture(scope="module")
def index_log(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A cleanly closed log whose old segments have dense indexes and non-monotonic timestamps
    (a batch early in each segment carries the segment's largest timestamp)."""
    d = tmp_path_factory.mktemp("idx") / "idx-0"
    log = Log(d, LogConfig(segment_bytes=1500, index_interval_bytes=0), clock_ms=FakeClock())
    for i in range(60):
        ts = NOW - 100_000 + 100 * i
        if i % 10 == 2:
            ts = NOW - 1000 + i  # the segment's max, early in it
        log.append_as_leader(_batch([ts, ts], i), 0)
    assert len(log.segments) >= 3
    old = log.segments[0]
    info = {
        "dir": d,
        "leo": log.log_end_offset,
        "old": old.log_path.name[:20],
        "offset_index": old.offset_index.items(),
        "time_index": old.time_index.items(),
        "max_ts": old.max_timestamp_so_far,
        "records": [(r.offset, r.timestamp_ms) for b in log.batches() for r in b.records()],
        "max": log.offset_for_timestamp(MAX_TIMESTAMP),
    }
    assert len(info["offset_index"]) >= 4 and len(info["time_index"]) >= 2
    log.close()
    return info


def _damage_and_reopen(index_log: dict, dest: Path, damage) -> Log:
    d = dest / "idx-0"
    shutil.copytree(index_log["dir"], d)
    damage(d, index_log["old"])
    return Log(
        d,
        LogConfig(segment_bytes=1500, index_interval_bytes=0),
        recovery_point=index_log["leo"],
        had_clean_shutdown=True,
        clock_ms=FakeClock(),
    )


def _check_index_log(log: Log, index_log: dict) -> None:
    assert log.log_end_offset == index_log["leo"]
    check_log(log)
    records = index_log["records"]
    for target in sorted({ts + dt for _o, ts in records for dt in (-1, 0, 1)}):
        want = next(((ts, o) for o, ts in records if ts >= target), None)
        res = log.offset_for_timestamp(target)
        assert (None if res is None else (res.timestamp, res.offset)) == want, target
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == index_log["max"]


def _check_rebuilt(log: Log, index_log: dict) -> None:
    old = log.segments[0]
    assert old.offset_index.items() == index_log["offset_index"]
    assert old.time_index.items() == index_log["time_index"]
    assert old.max_timestamp_so_far == index_log["max_ts"]
    assert index_items_on_disk(old) == (index_log["offset_index"], index_log["time_index"])


def _unlink(suffix: str):
    def damage(d: Path, stem: str) -> None:
        (d / f"{stem}{suffix}").unlink()

    return damage


def _append(suffix: str, junk: bytes):
    def damage(d: Path, stem: str) -> None:
        with open(d / f"{stem}{suffix}", "ab") as fh:
            fh.write(junk)

    return damage


def _overwrite_last_offset_entry(rel_offset: int, position: int):
    def damage(d: Path, stem: str) -> None:
        p = d / f"{stem}.index"
        data = bytearray(p.read_bytes())
        struct.pack_into(">ii", data, len(data) - 8, rel_offset, position)
        p.write_bytes(bytes(data))

    return damage


def _time_entry_past_end(d: Path, stem: str) -> None:
    p = d / f"{stem}.timeindex"
    data = bytearray(p.read_bytes())
    (ts, _rel) = struct.unpack_from(">qi", data, len(data) - 12)
    struct.pack_into(">qi", data, len(data) - 12, ts, 10_000)
    p.write_bytes(bytes(data))


def _index_entry_wrong_batch(d: Path, stem: str) -> None:
    p = d / f"{stem}.index"
    data = bytearray(p.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, len(data) - 8)
    struct.pack_into(">ii", data, len(data) - 8, rel + 1, pos)  # names an offset its batch lacks
    p.write_bytes(bytes(data))


INDEX_DAMAGE = [
    ("missing_index", _unlink(".index")),
    ("missing_timeindex", _unlink(".timeindex")),
    ("torn_index", _append(".index", b"\x00\x00\x01")),
    ("torn_timeindex", _append(".timeindex", b"\x00" * 5)),
    ("index_entry_past_log", _overwrite_last_offset_entry(1, 10**6)),
    ("index_entry_wrong_batch", _index_entry_wrong_batch),
    ("timeindex_entry_past_end", _time_entry_past_end),
]


@pytest.mark.parametrize("name,damage", INDEX_DAMAGE, ids=[n for n, _d in INDEX_DAMAGE])
def test_damaged_index_of_old_segment_lookups_work(index_log: dict, tmp_path: Path, name, damage) -> None:
    """After a clean shutdown the log opens, and reads and ListOffsets answer correctly."""
    log = _damage_and_reopen(index_log, tmp_path, damage)
    try:
        _check_index_log(log, index_log)
    finally:
        log.close()


@pytest.mark.parametrize("name,damage", INDEX_DAMAGE, ids=[n for n, _d in INDEX_DAMAGE])
def test_damaged_index_of_old_segment_is_rebuilt(index_log: dict, tmp_path: Path, name, damage) -> None:
    """The damaged index is rebuilt to what the segment's data implies (as Kafka's LogLoader does on
    a missing file or a CorruptIndexException), in memory and on disk."""
    log = _damage_and_reopen(index_log, tmp_path, damage)
    try:
        _check_rebuilt(log, index_log)
    finally:
        log.close()


# ============================================================================ checkpoints past the data


def test_checkpointed_offsets_past_recovered_end(good_log: dict, tmp_path: Path) -> None:
    # the checkpoints were written from memory, but the tail of the data did not survive
    last = good_log["segments"][-1]
    cut = last["batches"][2].position + 5
    d = _copy(good_log, tmp_path / "hw")
    os.truncate(d / last["name"], cut)
    want = _expected_after_cut(last, cut)
    log = Log(
        d,
        LogConfig(**GOOD_CONFIG),
        recovery_point=last["base"],
        high_watermark=good_log["leo"],
        log_start_offset=10,
        had_clean_shutdown=False,
        clock_ms=FakeClock(),
    )
    assert log.log_end_offset == want
    assert log.high_watermark == want, "the HW never exceeds the log end"
    assert log.log_start_offset == 10
    check_log(log)
    log.close()
    # a log start checkpoint past everything that survived: the log restarts empty there
    d2 = _copy(good_log, tmp_path / "start")
    os.truncate(d2 / last["name"], cut)
    log = Log(
        d2,
        LogConfig(**GOOD_CONFIG),
        recovery_point=0,
        log_start_offset=want + 7,
        had_clean_shutdown=False,
        clock_ms=FakeClock(),
    )
    assert (log.log_start_offset, log.log_end_offset) == (want + 7, want + 7)
    assert [s.base_offset for s in log.segments] == [want + 7]
    assert log.epoch_cache.entries == []
    assert log.append_as_leader(_batch([NOW], 1), 9).first_offset == want + 7
    log.close()


# ============================================================================ large segment


def test_recovery_of_segment_larger_than_scan_chunk(tmp_path: Path) -> None:
    """Recovery reads a segment in 8 MiB chunks: batches across a chunk boundary must be handled."""
    rng = random.Random(5)
    d = tmp_path / "src" / "big-0"
    log = Log(d, LogConfig(), clock_ms=FakeClock())
    for i in range(30):
        b = RecordBatchBuilder()
        for j in range(3):
            b.append(NOW + i, f"big-{i}-{j}".encode(), rng.randbytes(rng.randrange(90_000, 110_000)))
        log.append_as_leader(b.build(), i // 10)
    seg = log.segments[0]
    locs = list(seg.batches_from(0))
    chunk = 8 * 1024 * 1024
    straddler = next(loc for loc in locs if loc.position < chunk < loc.position + loc.size)
    everything = [b.to_bytes() for b in log.batches()]
    leo = log.log_end_offset
    name = seg.log_path.name
    log.close()
    assert seg.size > chunk + 500_000

    def reopen(damage) -> Log:
        dest = tmp_path / f"case{len(list(tmp_path.iterdir()))}" / "big-0"
        shutil.copytree(d, dest)
        damage(dest / name)
        return Log(dest, LogConfig(), recovery_point=0, had_clean_shutdown=False, clock_ms=FakeClock())

    # intact: everything back
    again = reopen(lambda p: None)
    assert again.log_end_offset == leo
    assert [b.to_bytes() for b in again.batches()] == everything
    check_log(again)
    again.close()
    # torn tail past the chunk boundary
    last = locs[-1]
    again = reopen(lambda p: os.truncate(p, last.position + 1000))
    assert again.log_end_offset == last.base_offset
    assert [b.to_bytes() for b in again.batches()] == everything[:-1]
    check_log(again)
    again.close()

    # a flipped byte inside the batch that straddles the chunk boundary
    def flip(p: Path) -> None:
        with open(p, "r+b") as fh:
            fh.seek(chunk + 10)
            byte = fh.read(1)
            fh.seek(chunk + 10)
            fh.write(bytes([byte[0] ^ 0x5A]))

    again = reopen(flip)
    k = locs.index(straddler)
    assert again.log_end_offset == straddler.base_offset
    assert [b.to_bytes() for b in again.batches()] == everything[:k]
    check_log(again)
    again.close()
