"""Fuzz the metadata log's file readers: segments (`read_segment`, `read_log_dir`, the writer's
open), snapshots (`read_snapshot`) and the frame walk (`iter_frames`).

Property: a reader returns or raises `MetadataRecordError` (its subclasses `MetadataLogCorruptError`
and `MetadataLogGapError` included); nothing else, no hang, memory bounded by the file. Frames are
CRC-checked, so byte mutations of a file can only ever shorten what is read: whatever a reader
returns from a mutated file is a prefix of what was written. Payload mutations are framed again with
a correct CRC to reach the decoders behind the CRC.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, any_bytes, bounded_call, mutated
from _metadata_strategies import msgpack_values, records
from hypothesis import given
from hypothesis import strategies as st

from kraftlog.metadata_log._records import LogEntry, MetadataRecord, MetadataRecordError, encode_entry, encode_record
from kraftlog.metadata_log.log_files import (
    MetadataLogWriter,
    Snapshot,
    encode_frame,
    iter_frames,
    read_log_dir,
    read_segment,
    read_snapshot,
    segment_file_name,
    snapshot_file_name,
    write_snapshot,
)

pytestmark = pytest.mark.timeout(TIMEOUT)

# ------------------------------------------------------------------ valid files


@st.composite
def entry_runs(draw: st.DrawFn, max_size: int = 6) -> list[LogEntry]:
    """Dense entries from a random base offset, as the writer stores them."""
    base = draw(st.integers(0, 1000))
    recs = draw(st.lists(records, min_size=1, max_size=max_size))
    return [LogEntry(base + i, draw(st.integers(0, 5)), 1_700_000_000_000 + i, r) for i, r in enumerate(recs)]


def _write_log(directory: Path, entries: list[LogEntry], segment_bytes: int = 1 << 20) -> None:
    # an empty log starts at 0: create the first segment at the run's base offset
    (directory / segment_file_name(entries[0].offset)).touch()
    with MetadataLogWriter(directory, segment_bytes=segment_bytes, fsync=False) as writer:
        writer.append(entries)


def _segment_bytes(entries: list[LogEntry]) -> bytes:
    return b"".join(encode_frame(encode_entry(e)) for e in entries)


def _snapshot_payloads(offset: int, epoch: int, recs: list[MetadataRecord]) -> list[bytes]:
    header = {
        "kind": "snapshot_header",
        "version": 0,
        "last_contained_offset": offset,
        "epoch": epoch,
        "timestamp_ms": 1,
        "record_count": len(recs),
    }
    footer = {"kind": "snapshot_footer", "record_count": len(recs)}
    return [msgpack.packb(header), *(encode_record(r) for r in recs), msgpack.packb(footer)]


# ------------------------------------------------------------------ checks


def _read_segment_file(path: Path, written: list[LogEntry], *, crc_protected: bool) -> None:
    try:
        result = read_segment(path)
    except MetadataRecordError:
        return
    got = list(result.entries)
    assert result.valid_bytes <= result.size_bytes
    if got:
        assert [e.offset for e in got] == list(range(got[0].offset, got[0].offset + len(got)))
    if crc_protected:
        assert got == written[: len(got)]


def _read_dir(directory: Path, from_offset: int = 0) -> list[LogEntry] | None:
    try:
        return list(read_log_dir(directory, from_offset))
    except MetadataRecordError:
        return None


@FUZZ
@given(entry_runs(), st.data())
def test_segment_file_mutated(written: list[LogEntry], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _write_log(d, written)
        path = d / segment_file_name(written[0].offset)
        path.write_bytes(data.draw(mutated(path.read_bytes())))
        _read_segment_file(path, written, crc_protected=True)
        got = _read_dir(d, written[0].offset)
        if got is not None:
            assert got == written[: len(got)]
        try:
            writer = MetadataLogWriter(d, segment_bytes=1 << 20, fsync=False)
        except MetadataRecordError:
            return
        with writer:
            assert written[0].offset <= writer.next_offset <= written[-1].offset + 1


@FUZZ
@given(entry_runs(), st.data())
def test_segment_payload_mutated_with_valid_crc(written: list[LogEntry], data: st.DataObject) -> None:
    payloads = [encode_entry(e) for e in written]
    i = data.draw(st.integers(0, len(payloads) - 1))
    payloads[i] = data.draw(mutated(payloads[i]) | msgpack_values.map(msgpack.packb))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / segment_file_name(written[0].offset)
        path.write_bytes(b"".join(encode_frame(p) for p in payloads if p))
        _read_segment_file(path, written, crc_protected=False)
        _read_dir(Path(tmp), written[0].offset)


@FUZZ
@given(st.lists(entry_runs(max_size=3), min_size=2, max_size=3), st.data())
def test_log_dir_with_a_mutated_segment(runs: list[list[LogEntry]], data: st.DataObject) -> None:
    # consecutive segments; one of them is mutated, renamed, removed or left alone
    written: list[LogEntry] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        paths = []
        for run in runs:
            base = written[-1].offset + 1 if written else run[0].offset
            seg = [LogEntry(base + i, e.epoch, e.timestamp_ms, e.record) for i, e in enumerate(run)]
            paths.append(d / segment_file_name(base))
            paths[-1].write_bytes(_segment_bytes(seg))
            written += seg
        victim = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(("mutate", "remove", "rename", "none")))
        if action == "mutate":
            victim.write_bytes(data.draw(mutated(victim.read_bytes())))
        elif action == "remove":
            victim.unlink()
        elif action == "rename":
            victim.rename(d / segment_file_name(data.draw(st.integers(0, written[-1].offset + 2))))
        got = _read_dir(d, written[0].offset)
        if got is not None and action in ("mutate", "none"):
            assert got == written[: len(got)]
        if action == "none":
            assert got == written


@FUZZ
@given(any_bytes)
def test_segment_random_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / segment_file_name(0)
        path.write_bytes(raw)
        _read_segment_file(path, [], crc_protected=True)
        _read_dir(Path(tmp))


@FUZZ
@given(
    any_bytes
    | mutated(st.lists(any_bytes.filter(bool), max_size=4).map(lambda ps: b"".join(encode_frame(p) for p in ps)))
)
def test_iter_frames_never_raises(raw: bytes) -> None:
    frames = iter_frames(raw)
    total = 0
    for position, payload in frames:
        assert position == total
        total += 8 + len(payload)
    assert frames.valid_bytes == total
    assert (frames.bad_frame is None) == (total == len(raw))


def _read_snapshot_file(path: Path) -> Snapshot | None:
    try:
        snap = read_snapshot(path)
    except MetadataRecordError:
        return None
    assert isinstance(snap, Snapshot)
    return snap


@FUZZ
@given(st.integers(0, 2**40), st.integers(0, 2**20), st.lists(records, max_size=5), st.data())
def test_snapshot_file_mutated(offset: int, epoch: int, recs: list[MetadataRecord], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_snapshot(tmp, offset, epoch, 7, recs)
        path.write_bytes(data.draw(mutated(path.read_bytes())))
        snap = _read_snapshot_file(path)
        if snap is not None:  # CRCs and the footer: a snapshot read back is the one written
            assert snap == Snapshot(offset, epoch, 7, tuple(recs))


@st.composite
def _odd_snapshot_payloads(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    offset, epoch = draw(st.integers(0, 1000)), draw(st.integers(0, 10))
    payloads = _snapshot_payloads(offset, epoch, draw(st.lists(records, max_size=4)))
    how = draw(st.sampled_from(("mutate", "replace", "map_value", "drop", "insert")))
    i = draw(st.integers(0, len(payloads) - 1))
    if how == "mutate":
        payloads[i] = draw(mutated(payloads[i]))
    elif how == "replace":
        payloads[i] = msgpack.packb(draw(msgpack_values))
    elif how == "map_value":  # one header or footer field set to anything
        d: dict[str, Any] = msgpack.unpackb(payloads[draw(st.sampled_from((0, -1)))])
        d[draw(st.sampled_from(sorted(d)))] = draw(msgpack_values)
        payloads[i] = msgpack.packb(d)
    elif how == "drop":
        del payloads[i]
    else:
        payloads.insert(i, draw(st.sampled_from(payloads)))
    return snapshot_file_name(offset, epoch), [p for p in payloads if p]


@FUZZ
@given(_odd_snapshot_payloads())
def test_snapshot_frames_with_valid_crc(case: tuple[str, list[bytes]]) -> None:
    name, payloads = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(b"".join(encode_frame(p) for p in payloads))
        _read_snapshot_file(path)


@FUZZ
@given(any_bytes)
def test_snapshot_random_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / snapshot_file_name(0, 0)
        path.write_bytes(raw)
        _read_snapshot_file(path)


def test_huge_frame_length_is_refused_from_the_file_size(tmp_path: Path) -> None:
    """A frame header claiming 4 GiB in a 40-byte file: read as a torn tail, nothing allocated."""
    seg = tmp_path / segment_file_name(0)
    seg.write_bytes(struct.pack(">II", 0xFFFFFFFF, 0) + b"\x00" * 32)
    result, error = bounded_call(lambda: read_segment(seg))
    assert error is None and result.entries == () and result.torn_at == 0
    snap = tmp_path / snapshot_file_name(0, 0)
    snap.write_bytes(seg.read_bytes())
    _result, error = bounded_call(lambda: read_snapshot(snap))
    assert isinstance(error, MetadataRecordError)
    _result, error = bounded_call(lambda: list(iter_frames(seg.read_bytes())))
    assert error is None
