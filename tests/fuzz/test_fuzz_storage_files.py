"""Fuzz the partition storage's small files: ``.index`` and ``.timeindex`` (alone and under a `Log`
that must notice a damaged one and rebuild it), the offset checkpoints, ``leader-epoch-checkpoint``,
``partition.metadata`` and ``meta.properties``.

Property: a reader returns or raises the storage error for the file (`IndexCorruptError` for
indexes, `KafkaStorageError` for the others); never another exception. A log opened over a damaged
index still reads back exactly the batches that were written.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, any_bytes, bounded_call, mutated
from hypothesis import example, given
from hypothesis import strategies as st

from kraftlog.storage import (
    IndexCorruptError,
    KafkaStorageError,
    Log,
    LogConfig,
    OffsetIndex,
    StorageError,
    TimeIndex,
    build_batch,
    read_meta_properties,
)
from kraftlog.storage._checkpoint import OffsetCheckpointFile, write_checkpoint_lines
from kraftlog.storage._epoch_cache import LeaderEpochCache
from kraftlog.storage._log_manager import META_PROPERTIES_FILE, MetaProperties, write_meta_properties

pytestmark = pytest.mark.timeout(TIMEOUT)

NOW = 1_700_000_000_000
BASE = 100

# ------------------------------------------------------------------ indexes alone


@st.composite
def offset_index_files(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 8))
    offs = sorted(set(draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))))
    poss = sorted(set(draw(st.lists(st.integers(0, 100_000), min_size=len(offs), max_size=len(offs)))))
    return b"".join(struct.pack(">ii", o, p) for o, p in zip(offs, poss, strict=False))


@st.composite
def time_index_files(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 8))
    ts = sorted(set(draw(st.lists(st.integers(0, 2**45), min_size=n, max_size=n))))
    offs = sorted(set(draw(st.lists(st.integers(0, 1000), min_size=len(ts), max_size=len(ts)))))
    return b"".join(struct.pack(">qi", t, o) for t, o in zip(ts, offs, strict=False))


def _exercise_index(cls: type[OffsetIndex] | type[TimeIndex], raw: bytes, probes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{BASE:020d}{'.index' if cls is OffsetIndex else '.timeindex'}"
        path.write_bytes(raw)
        try:
            idx = cls(path, BASE, 10 * 1024 * 1024)
        except IndexCorruptError:
            return
        try:
            idx.sanity_check(5000 if cls is OffsetIndex else BASE + 2000)
        except IndexCorruptError:
            pass
        for p in probes:  # lookups answer from whatever was loaded, never raise
            idx.lookup(p)
            if isinstance(idx, OffsetIndex):
                idx.lookup_position(p)
        idx.truncate_to(probes[0] if probes else BASE)


_probes = st.lists(st.integers(-(2**40), 2**46), max_size=4)


@FUZZ
@given(any_bytes | mutated(offset_index_files()), _probes)
def test_offset_index_file(raw: bytes, probes: list[int]) -> None:
    _exercise_index(OffsetIndex, raw, probes)


@FUZZ
@given(any_bytes | mutated(time_index_files()), _probes)
def test_time_index_file(raw: bytes, probes: list[int]) -> None:
    _exercise_index(TimeIndex, raw, probes)


# ------------------------------------------------------------------ indexes under a log


def _fill_log(directory: Path, sizes: list[int]) -> None:
    """A log of one batch per size (ascending timestamps), every batch indexed; closed cleanly."""
    log = Log(directory, LogConfig(index_interval_bytes=0), clock_ms=lambda: NOW)
    for i, size in enumerate(sizes):
        log.append_as_leader(build_batch([(b"k%d" % i, b"v" * size)], timestamp_ms=NOW - 1000 + i), 0)
    log.close()


def _read_all(log: Log) -> list[tuple[int, int, bytes]]:
    log.update_high_watermark(log.log_end_offset)
    return [(b.base_offset, b.max_timestamp, bytes(r.value or b"")) for b in log.batches() for r in b.records()]


_ENTRY_SIZE = {".index": 8, ".timeindex": 12}


@st.composite
def _damaged_tail(draw: st.DrawFn, raw: bytes, entry_size: int) -> bytes:
    """``raw`` with its last entry (or a torn write after it) damaged: what a crash or a bad sector
    at the end of an index leaves."""
    keep = max(len(raw) - entry_size, 0)
    return raw[:keep] + draw(mutated(raw[keep:]))


def _open(d: Path) -> Log:
    return Log(d, LogConfig(index_interval_bytes=0), had_clean_shutdown=True, clock_ms=lambda: NOW)


def _snapshot_reads(log: Log, n: int) -> tuple[list[tuple[int, int, bytes]], list[object]]:
    return _read_all(log), [log.offset_for_timestamp(NOW - 1000 + i) for i in range(n)]


@FUZZ
@given(st.lists(st.integers(0, 300), min_size=1, max_size=12), st.sampled_from((".index", ".timeindex")), st.data())
def test_log_reads_the_same_over_a_damaged_index_tail(sizes: list[int], suffix: str, data: st.DataObject) -> None:
    """The last entry is what the load checks against the log (as Kafka's sanity check does, and
    more): damage there is found and the index rebuilt, so every read answers as before."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        _fill_log(d, sizes)
        log = _open(d)
        expected = _snapshot_reads(log, len(sizes))
        log.close()
        index = d / f"{0:020d}{suffix}"
        index.write_bytes(data.draw(_damaged_tail(index.read_bytes(), _ENTRY_SIZE[suffix])))
        log = _open(d)
        try:
            assert _snapshot_reads(log, len(sizes)) == expected
        finally:
            log.close()


def test_time_index_last_entry_with_a_wrong_timestamp_is_rebuilt(tmp_path: Path) -> None:
    """Found by the fuzzer: one bit flipped in the timestamp of the last time-index entry passed the
    load's checks, and `offset_for_timestamp` then skipped offset 0."""
    d = tmp_path / "t-0"
    _fill_log(d, [0, 0])
    log = _open(d)
    expected = _snapshot_reads(log, 2)
    log.close()
    index = d / f"{0:020d}.timeindex"
    raw = bytearray(index.read_bytes())
    assert raw == struct.pack(">qi", NOW - 999, 1)
    raw[2] ^= 1
    index.write_bytes(raw)
    log = _open(d)
    try:
        assert _snapshot_reads(log, 2) == expected
    finally:
        log.close()


@FUZZ
@given(st.lists(st.integers(0, 300), min_size=1, max_size=12), st.sampled_from((".index", ".timeindex")), st.data())
def test_log_opens_over_any_damaged_index(sizes: list[int], suffix: str, data: st.DataObject) -> None:
    """Damage in the middle of an index is not looked for at a clean open (Kafka does not either:
    it would cost a read per entry); the log still opens and answers or raises a storage error."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        _fill_log(d, sizes)
        index = d / f"{0:020d}{suffix}"
        index.write_bytes(data.draw(mutated(index.read_bytes())))
        try:
            log = _open(d)
        except StorageError:
            return
        try:
            _snapshot_reads(log, len(sizes))
        except StorageError:
            pass
        finally:
            log.close()


# ------------------------------------------------------------------ checkpoint files


def _text_or_bytes(valid: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return valid.map(str.encode) | st.text(max_size=200).map(str.encode) | any_bytes | mutated(valid.map(str.encode))


def _checkpoint_text(entries: list[str]) -> str:
    return f"0\n{len(entries)}\n" + "".join(f"{e}\n" for e in entries)


_topic = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=8)
offset_checkpoints = st.lists(st.tuples(_topic, st.integers(0, 100), st.integers(0, 2**62)), max_size=4).map(
    lambda es: _checkpoint_text([f"{t} {p} {o}" for t, p, o in es])
)
epoch_checkpoints = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 2**40)), max_size=4).map(
    lambda es: _checkpoint_text([f"{e} {o}" for e, o in sorted(es)])
)


@FUZZ
@given(_text_or_bytes(offset_checkpoints))
@example(b"0\n1\n\xff 0 0\n")  # not UTF-8: UnicodeDecodeError escaped
def test_offset_checkpoint_file(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recovery-point-offset-checkpoint"
        path.write_bytes(raw)
        try:
            out = OffsetCheckpointFile(path).read()
        except KafkaStorageError:
            return
        assert all(isinstance(p, int) and isinstance(o, int) for (_t, p), o in out.items())


@FUZZ
@given(_text_or_bytes(epoch_checkpoints))
@example(b"0\n1\nx 0\n")  # int("x"): ValueError escaped
@example(b"0\n2\n5 10\n3 20\n")  # epochs out of order: the cache must stay monotonic
def test_leader_epoch_checkpoint_file(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "leader-epoch-checkpoint"
        path.write_bytes(raw)
        try:
            cache = LeaderEpochCache(path)
        except KafkaStorageError:
            return
        epochs = [e for e, _s in cache.entries]
        starts = [s for _e, s in cache.entries]
        # the lookups bisect both columns: both must strictly increase, as Kafka's cache keeps them
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
        assert all(e >= 0 and s >= 0 for e, s in cache.entries)


@FUZZ
@given(_text_or_bytes(st.uuids().map(lambda u: f"version: 0\ntopic_id: {u}\n")))
@example(b"version: 0\ntopic_id: \xff\n")  # not UTF-8
def test_partition_metadata_file(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Log(Path(tmp) / "t-0", LogConfig())
        try:
            (log.dir / "partition.metadata").write_bytes(raw)
            try:
                topic_id = log.read_partition_metadata()
            except KafkaStorageError:
                return
            assert topic_id is not None and topic_id.strip() == topic_id and topic_id
        finally:
            log.close()


def _meta_properties_text(meta: MetaProperties) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        write_meta_properties(Path(tmp), meta)
        return (Path(tmp) / META_PROPERTIES_FILE).read_text()


meta_properties = st.builds(MetaProperties, _topic, st.integers(0, 2**31 - 1), st.none() | _topic, st.just(1)).map(
    _meta_properties_text
)


@FUZZ
@given(_text_or_bytes(meta_properties))
@example(b"version=1\ncluster.id=\xff\nnode.id=1\n")  # not UTF-8
def test_meta_properties_file(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / META_PROPERTIES_FILE).write_bytes(raw)
        try:
            meta = read_meta_properties(Path(tmp))
        except KafkaStorageError:
            return
        assert meta is not None and isinstance(meta.node_id, int)


def test_checkpoint_with_a_huge_declared_count_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    write_checkpoint_lines(path, ["t 0 5"])
    path.write_text(path.read_text().replace("\n1\n", f"\n{2**62}\n", 1))
    _result, error = bounded_call(lambda: OffsetCheckpointFile(path).read())
    assert isinstance(error, KafkaStorageError)
