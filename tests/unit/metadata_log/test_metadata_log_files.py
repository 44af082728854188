"""Tests of the metadata log's on-disk format in `metadata_log.log_files`.

Corruption tests cut or flip bytes of real files written by the writer; positions come from
`iter_frames`, so the tests depend only on the documented frame layout.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import crc32c
import msgpack
import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

import kraftlog.metadata_log.log_files as lf
from kraftlog.metadata_log import KRaftVersionRecord, Voter, VoterEndpoint, VotersRecord
from kraftlog.metadata_log._records import (
    NO_LEADER,
    RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    FencingChange,
    LogEntry,
    MetadataRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    encode_entry,
    encode_record,
)
from kraftlog.metadata_log.log_files import (
    FRAME_HEADER_SIZE,
    MetadataLogCorruptError,
    MetadataLogGapError,
    MetadataLogWriter,
    SegmentReadResult,
    Snapshot,
    SnapshotPolicy,
    delete_covered_segments,
    encode_frame,
    iter_frames,
    latest_snapshot,
    list_segments,
    list_snapshots,
    oldest_available_offset,
    read_log_dir,
    read_metadata_file,
    read_segment,
    read_snapshot,
    segment_file_name,
    should_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from kraftlog.metadata_log.log_files._snapshots import write_snapshot_payloads

TOPIC_ID = "b5cUNJ2bQ0qGx5Hq8W0FJw"

ALL_RECORDS: list[MetadataRecord] = [
    RegisterBrokerRecord(
        1,
        "inc-1",
        10,
        (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092), BrokerEndpoint("SSL", "h", 9093, "SSL")),
        rack="r1",
        fenced=True,
        log_dirs=("/a", "/b"),
    ),
    UnregisterBrokerRecord(2, 11),
    TopicRecord("orders", TOPIC_ID),
    PartitionRecord(0, TOPIC_ID, (1, 2, 3), (1, 2), 1, leader_epoch=4, partition_epoch=5, adding_replicas=(3,)),
    ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
    ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.hours", None),
    PartitionChangeRecord(0, TOPIC_ID, isr=(1,), leader=NO_LEADER),
    PartitionChangeRecord(1, TOPIC_ID),
    FenceBrokerRecord(1, 10),
    UnfenceBrokerRecord(1, 10),
    RemoveTopicRecord(TOPIC_ID),
    FeatureLevelRecord("metadata.version", 3),
    ProducerIdsRecord(1, 10, 2000),
    BrokerRegistrationChangeRecord(1, 10, fenced=FencingChange.UNFENCE, in_controlled_shutdown=1),
    NoOpRecord(),
    UserScramCredentialRecord("alice", 2, b"\x00salt\xff", bytes(range(64)), b"\xfe" * 64, 4096),
    AccessControlEntryRecord("5f0c6d3e-8a1b-4c2d-9e3f-001122334455", 2, "orders", 4, "User:*", "*", 4, 2),
    RemoveAccessControlEntryRecord("5f0c6d3e-8a1b-4c2d-9e3f-001122334455"),
    RemoveUserScramCredentialRecord("alice", 2),
    ClientQuotaRecord(entity=(("client-id", None), ("user", "alice")), key="producer_byte_rate", value=1048576.0),
    KRaftVersionRecord(kraft_version=1),
    VotersRecord(
        voters=(
            Voter(1, "AAAAAAAAAAAAAAAAAAAAAQ", (VoterEndpoint("CONTROLLER", "h1", 9093),)),
            Voter(2, "AAAAAAAAAAAAAAAAAAAAAg", (VoterEndpoint("CONTROLLER", "h2", 9093),), 0, 1),
        )
    ),
]


def entries_of(records: list[MetadataRecord], start: int = 0, epoch: int = 1) -> list[LogEntry]:
    return [LogEntry(start + i, epoch, 1_700_000_000_000 + i, r) for i, r in enumerate(records)]


def make_entries(start: int, count: int, epoch: int = 1) -> list[LogEntry]:
    return entries_of([ALL_RECORDS[(start + i) % len(ALL_RECORDS)] for i in range(count)], start, epoch)


def uniform_entries(start: int, count: int) -> list[LogEntry]:
    """Entries whose frames all have the same size (offsets < 128 stay msgpack fixints)."""
    assert start + count <= 128
    return [
        LogEntry(i, 1, 1_700_000_000_000, TopicRecord(f"topic-{i:04d}", TOPIC_ID)) for i in range(start, start + count)
    ]


def frame_size(entry: LogEntry) -> int:
    return FRAME_HEADER_SIZE + len(encode_entry(entry))


def seg_path(d: Path, base: int) -> Path:
    return d / segment_file_name(base)


def frames_of(path: Path) -> list[tuple[int, bytes]]:
    return list(iter_frames(path.read_bytes()))


# --------------------------------------------------------------------------------------------- frames


def test_frame_layout_is_length_crc_payload() -> None:
    payload = b"\x81\xa1a\x01"
    frame = encode_frame(payload)
    assert frame[:4] == struct.pack(">I", len(payload))
    assert frame[4:8] == struct.pack(">I", crc32c.crc32c(payload))
    assert frame[8:] == payload
    with pytest.raises(ValueError):
        encode_frame(b"")


def test_iter_frames_positions_and_bad_frame() -> None:
    a, b = encode_frame(b"first"), encode_frame(b"second")
    frames = iter_frames(a + b)
    assert list(frames) == [(0, b"first"), (len(a), b"second")]
    assert frames.bad_frame is None and frames.valid_bytes == len(a) + len(b)

    torn = iter_frames(a + b[:5])
    assert list(torn) == [(0, b"first")]
    assert torn.bad_frame is not None and torn.bad_frame.position == len(a)
    assert "header" in torn.bad_frame.reason and torn.valid_bytes == len(a)

    past_end = iter_frames(a + b[:-1])
    assert list(past_end) == [(0, b"first")]
    assert past_end.bad_frame is not None and "past the end" in past_end.bad_frame.reason

    flipped = bytearray(a + b)
    flipped[-1] ^= 0x01
    bad = iter_frames(bytes(flipped))
    assert list(bad) == [(0, b"first")]
    assert bad.bad_frame is not None and bad.bad_frame.position == len(a)
    assert "crc" in bad.bad_frame.reason


def test_zero_filled_tail_is_not_a_frame() -> None:
    """CRC-32C of nothing is 0, so zeros would look like valid empty frames without the length rule."""
    frames = iter_frames(encode_frame(b"x") + bytes(64))
    assert list(frames) == [(0, b"x")]
    assert frames.bad_frame is not None and frames.bad_frame.reason == "zero-length frame"


# --------------------------------------------------------------------------------------------- segments


def test_every_record_type_round_trips_through_segments(tmp_path: Path) -> None:
    assert {type(r) for r in ALL_RECORDS} == set(RECORD_TYPES.values())
    entries = entries_of(ALL_RECORDS, epoch=7)
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.append(entries) == len(entries)
        assert (w.last_offset, w.next_offset) == (len(entries) - 1, len(entries))
    assert list(read_log_dir(tmp_path)) == entries
    result = read_segment(seg_path(tmp_path, 0))
    assert isinstance(result, SegmentReadResult)
    assert result.entries == tuple(entries)
    assert result.torn_at is None and result.error is None
    assert result.valid_bytes == result.size_bytes == seg_path(tmp_path, 0).stat().st_size
    assert result.last_offset == len(entries) - 1
    assert read_metadata_file(seg_path(tmp_path, 0)) == result
    # the payload is the documented msgpack entry map
    _pos, payload = frames_of(seg_path(tmp_path, 0))[0]
    assert msgpack.unpackb(payload) == entries[0].to_wire()


def test_read_log_dir_from_offset_across_segments(tmp_path: Path) -> None:
    entries = make_entries(0, 20)
    with MetadataLogWriter(tmp_path, segment_bytes=3 * frame_size(entries[0]) + 30, fsync=False) as w:
        w.append(entries)
    assert len(list_segments(tmp_path)) > 3
    for start in (0, 1, 5, 19):
        assert list(read_log_dir(tmp_path, start)) == entries[start:]
    assert list(read_log_dir(tmp_path, 20)) == []
    assert list(read_log_dir(tmp_path, 1000)) == []


def test_append_is_idempotent_by_offset(tmp_path: Path) -> None:
    entries = make_entries(0, 15)
    path = seg_path(tmp_path, 0)
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.append(entries[:10]) == 10
        size = path.stat().st_size
        assert w.append(entries[:10]) == 0
        assert w.append(entries[3:7]) == 0
        assert path.stat().st_size == size
        assert w.append(entries[5:15]) == 5  # overlapping range: only 10..14 are new
        size = path.stat().st_size
    # a restart replays the whole journal: nothing is written twice
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == 15
        assert w.append(entries) == 0
    assert path.stat().st_size == size
    assert list(read_log_dir(tmp_path)) == entries


def test_gap_raises_and_writes_nothing(tmp_path: Path) -> None:
    entries = make_entries(0, 8)
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append(entries[:5])
        size = seg_path(tmp_path, 0).stat().st_size
        with pytest.raises(MetadataLogGapError) as err:
            w.append([entries[6]])
        assert (err.value.expected_offset, err.value.found_offset) == (5, 6)
        with pytest.raises(MetadataLogGapError):
            w.append([entries[5], entries[7]])  # gap inside one call: nothing of the call is written
        with pytest.raises(ValueError):
            w.append([entries[5], entries[5]])
        assert seg_path(tmp_path, 0).stat().st_size == size
        assert w.next_offset == 5
        assert w.append(entries[5:]) == 3
    assert list(read_log_dir(tmp_path)) == entries


def test_rolls_at_segment_bytes(tmp_path: Path) -> None:
    entries = make_entries(0, 30)
    sizes = [frame_size(e) for e in entries]
    limit = max(sizes) * 2
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        for i in range(0, 30, 4):  # several calls, rolling inside calls too
            w.append(entries[i : i + 4])
        assert w.active_segment == list_segments(tmp_path)[-1].path
    segments = list_segments(tmp_path)
    assert len(segments) >= 6
    expected_base = 0
    for seg in segments:
        assert seg.base_offset == expected_base
        result = read_segment(seg.path)
        size = seg.path.stat().st_size
        assert size <= limit
        expected_base = result.next_offset
        if seg is not segments[-1]:
            # rolled only because the next frame would not fit
            assert size + sizes[expected_base] > limit
    assert expected_base == 30
    assert list(read_log_dir(tmp_path)) == entries


def test_frame_larger_than_segment_bytes_gets_its_own_segment(tmp_path: Path) -> None:
    big = LogEntry(1, 1, 0, ConfigRecord(ConfigResourceType.TOPIC, "t", "k", "v" * 500))
    small = make_entries(0, 1)[0]
    with MetadataLogWriter(tmp_path, segment_bytes=200, fsync=False) as w:
        w.append([small, big, make_entries(2, 1)[0]])
    assert [s.base_offset for s in list_segments(tmp_path)] == [0, 1, 2]
    assert [e.offset for e in read_log_dir(tmp_path)] == [0, 1, 2]


def test_reopen_continues_in_last_segment(tmp_path: Path) -> None:
    entries = make_entries(0, 12)
    limit = 4 * max(frame_size(e) for e in entries)
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        w.append(entries[:6])
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        assert (w.last_offset, w.next_offset) == (5, 6)
        w.append(entries[6:])
    assert list(read_log_dir(tmp_path)) == entries


def test_torn_tail_at_every_byte_of_last_frame(tmp_path: Path) -> None:
    entries = make_entries(0, 4)
    src = tmp_path / "src"
    with MetadataLogWriter(src, segment_bytes=1 << 20, fsync=False) as w:
        w.append(entries)
    full = seg_path(src, 0).read_bytes()
    last_start = frames_of(seg_path(src, 0))[-1][0]
    for cut in range(last_start + 1, len(full)):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        seg_path(d, 0).write_bytes(full[:cut])

        result = read_segment(seg_path(d, 0))
        assert result.torn_at == last_start and result.valid_bytes == last_start
        assert result.error and result.entries == tuple(entries[:3])

        torn: list[tuple[Path, int]] = []
        with capture_logs() as logs:
            got = list(read_log_dir(d, on_torn=lambda p, bad: torn.append((p, bad.position))))
        assert got == entries[:3]
        assert torn == [(seg_path(d, 0), last_start)]
        assert any(e["event"] == "metadata_log_torn_tail" and e["position"] == last_start for e in logs)

        with capture_logs() as logs:
            w = MetadataLogWriter(d, segment_bytes=1 << 20, fsync=False)
        assert (w.last_offset, w.next_offset) == (2, 3)
        assert seg_path(d, 0).stat().st_size == last_start
        warning = [e for e in logs if e["event"] == "metadata_log_tail_truncated"]
        assert warning and warning[0]["position"] == last_start and warning[0]["file"] == str(seg_path(d, 0))
        w.append(entries)  # the replayed journal writes the lost entry again
        w.close()
        assert seg_path(d, 0).read_bytes() == full


def test_flipped_payload_byte_is_detected(tmp_path: Path) -> None:
    entries = make_entries(0, 5)
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append(entries)
    path = seg_path(tmp_path, 0)
    positions = [pos for pos, _ in frames_of(path)]
    data = bytearray(path.read_bytes())
    data[positions[2] + FRAME_HEADER_SIZE + 3] ^= 0x40
    path.write_bytes(bytes(data))

    result = read_segment(path)
    assert result.torn_at == positions[2]
    assert result.error is not None and "crc" in result.error
    assert result.entries == tuple(entries[:2])
    assert list(read_log_dir(tmp_path)) == entries[:2]

    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == 2
    assert path.stat().st_size == positions[2]


def test_corrupt_last_segment_truncated_only_there(tmp_path: Path) -> None:
    """A crash during a roll leaves an empty or torn newest segment; older segments stay."""
    entries = make_entries(0, 10)
    limit = 3 * max(frame_size(e) for e in entries)
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        w.append(entries)
    segments = list_segments(tmp_path)
    last = segments[-1]
    last.path.write_bytes(last.path.read_bytes()[:3])
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        assert w.next_offset == last.base_offset
        assert last.path.stat().st_size == 0
        w.append(entries)
    assert list(read_log_dir(tmp_path)) == entries


def test_crc_valid_but_wrong_offset_is_not_truncated(tmp_path: Path) -> None:
    entries = make_entries(0, 3)
    path = seg_path(tmp_path, 0)
    path.write_bytes(b"".join(encode_frame(encode_entry(e)) for e in (entries[0], entries[2])))
    with pytest.raises(MetadataLogGapError):
        read_segment(path)
    with pytest.raises(MetadataLogGapError):
        list(read_log_dir(tmp_path))
    with pytest.raises(MetadataLogGapError):
        MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False)
    assert path.stat().st_size > 0  # valid data is never dropped automatically


def test_crc_valid_undecodable_payload_raises(tmp_path: Path) -> None:
    path = seg_path(tmp_path, 0)
    path.write_bytes(
        encode_frame(msgpack.packb({"offset": 0, "epoch": 1, "timestamp_ms": 0, "record": {"type": 999, "version": 0}}))
    )
    with pytest.raises(MetadataRecordError, match="position 0"):
        read_segment(path)
    # the writer only needs offsets, so it opens a log holding record types it does not know
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == 1


def test_gap_between_segments_is_reported(tmp_path: Path) -> None:
    entries = make_entries(0, 12)
    limit = 3 * max(frame_size(e) for e in entries)
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        w.append(entries)
    segments = list_segments(tmp_path)
    missing = segments[1]
    missing.path.unlink()
    it = read_log_dir(tmp_path)
    got = []
    with pytest.raises(MetadataLogGapError) as err:
        for e in it:
            got.append(e)
    assert got == entries[: missing.base_offset]
    assert err.value.expected_offset == missing.base_offset
    assert err.value.found_offset == segments[2].base_offset


def test_overlapping_segments_raise(tmp_path: Path) -> None:
    entries = make_entries(0, 4)
    seg_path(tmp_path, 0).write_bytes(b"".join(encode_frame(encode_entry(e)) for e in entries[:3]))
    seg_path(tmp_path, 2).write_bytes(b"".join(encode_frame(encode_entry(e)) for e in entries[2:]))
    with pytest.raises(MetadataLogCorruptError, match="overlapping"):
        list(read_log_dir(tmp_path))


def test_truncate_after(tmp_path: Path) -> None:
    entries = make_entries(0, 20)
    limit = 4 * max(frame_size(e) for e in entries)
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=True) as w:
        w.append(entries)
        bases = [s.base_offset for s in list_segments(tmp_path)]
        w.truncate_after(bases[2])  # first offset of a segment
        assert w.next_offset == bases[2] + 1
        assert list(read_log_dir(tmp_path)) == entries[: bases[2] + 1]
        w.truncate_after(bases[2] - 1)  # exactly the end of the previous segment
        assert [s.base_offset for s in list_segments(tmp_path)] == bases[:2]
        assert w.next_offset == bases[2]
        w.truncate_after(100)  # past the end: nothing
        assert w.next_offset == bases[2]
        w.append(entries)
        assert list(read_log_dir(tmp_path)) == entries
        w.truncate_after(-1)
        assert (w.last_offset, w.next_offset) == (-1, 0)
        assert list(read_log_dir(tmp_path)) == []
        w.append(entries[:3])
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
        assert w.next_offset == 3


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append(make_entries(0, 5))
        w.truncate_fully_and_start_at(100)
        assert w.next_offset == 100
        w.append(make_entries(100, 2))
    assert [s.base_offset for s in list_segments(tmp_path)] == [100]
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == 102
    assert [e.offset for e in read_log_dir(tmp_path, 100)] == [100, 101]
    with pytest.raises(MetadataLogGapError):
        list(read_log_dir(tmp_path))


def test_empty_directory_starts_after_latest_snapshot(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 41, 3, 0, ALL_RECORDS[:2])
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert (w.last_offset, w.next_offset) == (41, 42)
        assert w.append(make_entries(0, 42)) == 0  # covered by the snapshot
        w.append(make_entries(42, 2))
    assert oldest_available_offset(tmp_path) == 42
    assert [e.offset for e in read_log_dir(tmp_path, 42)] == [42, 43]


def test_closed_writer_refuses(tmp_path: Path) -> None:
    w = MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False)
    w.close()
    w.close()
    assert w.closed
    with pytest.raises(ValueError):
        w.append(make_entries(0, 1))
    with pytest.raises(ValueError):
        MetadataLogWriter(tmp_path, segment_bytes=4, fsync=False)


# --------------------------------------------------------------------------------------------- fsync


class FsyncCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real = os.fsync

        def fsync(fd: int) -> None:
            self.calls.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else str(fd))
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


def test_fsync_before_append_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = tmp_path.resolve()
    counter = FsyncCounter(monkeypatch)
    entries = make_entries(0, 10)
    limit = 3 * max(frame_size(e) for e in entries)
    w = MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=True)
    assert counter.calls  # the new empty segment's directory entry
    counter.calls.clear()
    w.append(entries[:1])
    assert counter.calls == [str(seg_path(tmp_path, 0))]
    counter.calls.clear()
    w.append(entries[:1])  # nothing new: nothing to persist
    assert counter.calls == []
    w.append(entries[1:])  # rolls: old segments, directory and the active one
    assert str(tmp_path) in counter.calls
    assert counter.calls[-1] == str(w.active_segment)
    for seg in list_segments(tmp_path)[:-1]:
        assert str(seg.path) in counter.calls
    w.close()

    counter.calls.clear()
    with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w2:
        w2.append(make_entries(10, 5))
    assert counter.calls == []


def test_snapshot_is_fsynced_then_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = tmp_path.resolve()
    counter = FsyncCounter(monkeypatch)
    path = write_snapshot(tmp_path, 5, 1, 0, ALL_RECORDS)
    assert counter.calls == [str(path) + ".part", str(tmp_path)]  # file before rename, then directory


# --------------------------------------------------------------------------------------------- snapshots


def test_every_record_type_round_trips_through_snapshots(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 123, 4, 1_700_000_000_000, ALL_RECORDS)
    assert path.name == "00000000000000000123-0000000004.checkpoint" == snapshot_file_name(123, 4)
    snap = read_snapshot(path)
    assert snap == Snapshot(123, 4, 1_700_000_000_000, tuple(ALL_RECORDS))
    assert read_metadata_file(path) == snap
    assert not list(tmp_path.glob("*.part"))
    # documented layout: header, one bare record per frame, footer
    payloads = [p for _, p in frames_of(path)]
    assert msgpack.unpackb(payloads[0]) == {
        "kind": "snapshot_header",
        "version": 0,
        "last_contained_offset": 123,
        "epoch": 4,
        "timestamp_ms": 1_700_000_000_000,
        "record_count": len(ALL_RECORDS),
    }
    assert payloads[1:-1] == [encode_record(r) for r in ALL_RECORDS]
    assert msgpack.unpackb(payloads[-1]) == {"kind": "snapshot_footer", "record_count": len(ALL_RECORDS)}


def test_empty_snapshot_round_trips(tmp_path: Path) -> None:
    assert read_snapshot(write_snapshot(tmp_path, 0, 0, 5, [])) == Snapshot(0, 0, 5, ())


def test_partial_snapshot_raises_at_every_cut(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 9, 2, 0, ALL_RECORDS[:4])
    full = path.read_bytes()
    for cut in range(len(full)):
        path.write_bytes(full[:cut])
        with pytest.raises(MetadataLogCorruptError):
            read_snapshot(path)


def test_missing_footer_raises(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 9, 2, 0, ALL_RECORDS[:4])
    frames = frames_of(path)
    path.write_bytes(path.read_bytes()[: frames[-1][0]])  # whole frames, footer dropped
    with pytest.raises(MetadataLogCorruptError, match="footer missing"):
        read_snapshot(path)


def test_snapshot_corruptions_raise(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 9, 2, 0, ALL_RECORDS[:4])
    full = path.read_bytes()
    frames = frames_of(path)

    flipped = bytearray(full)
    flipped[frames[2][0] + FRAME_HEADER_SIZE + 1] ^= 0x01
    path.write_bytes(bytes(flipped))
    with pytest.raises(MetadataLogCorruptError, match="crc"):
        read_snapshot(path)

    path.write_bytes(full + encode_frame(encode_record(NoOpRecord())))
    with pytest.raises(MetadataLogCorruptError, match="after the snapshot footer"):
        read_snapshot(path)

    wrong_count = full[: frames[-1][0]] + encode_frame(msgpack.packb({"kind": "snapshot_footer", "record_count": 3}))
    path.write_bytes(wrong_count)
    with pytest.raises(MetadataLogCorruptError, match="record count"):
        read_snapshot(path)

    no_header = b"".join(encode_frame(p) for _, p in frames[1:])
    path.write_bytes(no_header)
    with pytest.raises(MetadataLogCorruptError, match="header"):
        read_snapshot(path)

    renamed = tmp_path / snapshot_file_name(10, 2)
    renamed.write_bytes(full)
    with pytest.raises(MetadataLogCorruptError, match="file name"):
        read_snapshot(renamed)

    header = msgpack.unpackb(frames[0][1])
    header["version"] = 1
    path.write_bytes(encode_frame(msgpack.packb(header)) + full[frames[1][0] :])
    with pytest.raises(MetadataRecordError, match="newer"):
        read_snapshot(path)


def test_part_leftovers_are_ignored_and_removed(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 5, 1, 0, ALL_RECORDS[:2])
    leftover = tmp_path / (snapshot_file_name(50, 1) + ".part")
    leftover.write_bytes(b"\x00\x00\x00\x10garbage")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [s.offset for s in list_snapshots(tmp_path)] == [5]
    latest = latest_snapshot(tmp_path)
    assert latest is not None and latest.offset == 5
    with pytest.raises(MetadataLogCorruptError):
        read_metadata_file(leftover)
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False):
        pass
    assert not leftover.exists()
    # a stale .part of the same name is replaced by a new write
    stale = tmp_path / (snapshot_file_name(7, 1) + ".part")
    stale.write_bytes(b"junk" * 100)
    path = write_snapshot(tmp_path, 7, 1, 0, ALL_RECORDS[:1])
    assert not stale.exists() and read_snapshot(path).records == tuple(ALL_RECORDS[:1])
    with pytest.raises(ValueError):
        read_metadata_file(tmp_path / "notes.txt")


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_segments_and_snapshots_are_private(tmp_path: Path) -> None:
    """They may hold SCRAM credentials (UserScramCredentialRecord): mode 0600 whatever the umask."""
    old_umask = os.umask(0o002)
    try:
        entries = make_entries(0, 2 * len(ALL_RECORDS))
        limit = 3 * max(frame_size(e) for e in entries)
        with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False) as w:
            w.append(entries)
        segments = [s.path for s in list_segments(tmp_path)]
        assert len(segments) > 2 and {_mode(p) for p in segments} == {0o600}
        snapshot = write_snapshot(tmp_path / "snaps", 5, 1, 0, ALL_RECORDS)
        assert _mode(snapshot) == 0o600
        # a leftover .part of another mode is tightened before the snapshot is written into it
        stale = tmp_path / "snaps" / (snapshot_file_name(6, 1) + ".part")
        stale.write_bytes(b"junk")
        stale.chmod(0o644)
        assert _mode(write_snapshot(tmp_path / "snaps", 6, 1, 0, ALL_RECORDS)) == 0o600
        # the Spark job's writer
        copied = write_snapshot_payloads(
            tmp_path / "spark.checkpoint", 5, 1, 0, [encode_record(r) for r in ALL_RECORDS]
        )
        assert _mode(copied) == 0o600 and copied.read_bytes() == snapshot.read_bytes()
        # an active segment an older version wrote 0644 is tightened when the writer reopens it
        segments[-1].chmod(0o644)
        with MetadataLogWriter(tmp_path, segment_bytes=limit, fsync=False):
            pass
        assert _mode(segments[-1]) == 0o600
    finally:
        os.umask(old_umask)


def test_list_and_latest_snapshots_sorted(tmp_path: Path) -> None:
    assert latest_snapshot(tmp_path) is None
    for offset, epoch in [(20, 1), (3, 1), (20, 2), (100, 2)]:
        write_snapshot(tmp_path, offset, epoch, 0, [])
    assert [(s.offset, s.epoch) for s in list_snapshots(tmp_path)] == [(3, 1), (20, 1), (20, 2), (100, 2)]
    latest = latest_snapshot(tmp_path)
    assert latest is not None and (latest.offset, latest.epoch) == (100, 2)
    assert read_snapshot(latest.path).offset == 100


# --------------------------------------------------------------------------------------------- retention


def test_should_snapshot() -> None:
    assert not should_snapshot(0)
    assert not should_snapshot(20 * 1024 * 1024 - 1)
    assert should_snapshot(20 * 1024 * 1024)
    policy = SnapshotPolicy(max_record_bytes_between_snapshots=100, max_retention_bytes=-1)
    assert policy.should_snapshot(100) and not policy.should_snapshot(99)
    assert SnapshotPolicy().max_retention_bytes == 100 * 1024 * 1024


def _build_log(d: Path, count: int, per_segment: int = 4) -> tuple[list[LogEntry], list[int]]:
    entries = uniform_entries(0, count)
    limit = per_segment * max(frame_size(e) for e in entries)
    with MetadataLogWriter(d, segment_bytes=limit, fsync=False) as w:
        w.append(entries)
    return entries, [s.base_offset for s in list_segments(d)]


def test_retention_deletes_only_covered_segments(tmp_path: Path) -> None:
    entries, bases = _build_log(tmp_path, 40)
    assert bases == list(range(0, 40, 4))
    # no snapshot on disk: nothing is covered, whatever the caller says
    assert delete_covered_segments(tmp_path, 39, 0).deleted_segments == ()
    snap_offset = bases[4] + 1  # inside the fifth segment
    write_snapshot(tmp_path, snap_offset, 1, 0, [])
    result = delete_covered_segments(tmp_path, snap_offset, 0)
    assert [p.name for p in result.deleted_segments] == [segment_file_name(b) for b in bases[:4]]
    assert oldest_available_offset(tmp_path) == bases[4]
    assert list(read_log_dir(tmp_path, bases[4])) == entries[bases[4] :]
    with pytest.raises(MetadataLogGapError) as err:
        list(read_log_dir(tmp_path))
    assert err.value.found_offset == bases[4]
    # a caller offset beyond the latest snapshot file is capped at it
    assert delete_covered_segments(tmp_path, 10_000, 0).deleted_segments == ()


def test_retention_respects_max_bytes(tmp_path: Path) -> None:
    _entries, bases = _build_log(tmp_path, 40)
    sizes = [seg_path(tmp_path, b).stat().st_size for b in bases]
    write_snapshot(tmp_path, 39, 1, 0, [])
    # unlimited: nothing deleted
    assert delete_covered_segments(tmp_path, 39, -1) == lf.RetentionResult((), ())
    # under the limit: nothing deleted
    assert delete_covered_segments(tmp_path, 39, sum(sizes)).deleted_segments == ()
    # just over: the oldest goes, and only until the total fits
    limit = sum(sizes) - sizes[0] - 1
    result = delete_covered_segments(tmp_path, 39, limit)
    assert [p.name for p in result.deleted_segments] == [segment_file_name(b) for b in bases[:2]]
    remaining = sum(s.path.stat().st_size for s in list_segments(tmp_path))
    assert remaining <= limit
    # even with no room at all the newest segment stays (it records the log end)
    delete_covered_segments(tmp_path, 39, 0)
    assert [s.base_offset for s in list_segments(tmp_path)] == [bases[-1]]
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == 40


def test_retention_never_deletes_past_snapshot_and_cleans_old_snapshots(tmp_path: Path) -> None:
    _entries, bases = _build_log(tmp_path, 40)
    old1 = write_snapshot(tmp_path, 1, 1, 0, [])
    old2 = write_snapshot(tmp_path, bases[2] - 1, 1, 0, [])
    old3 = write_snapshot(tmp_path, bases[3], 1, 0, [])
    latest = write_snapshot(tmp_path, bases[3] + 1, 2, 0, [])
    # the caller asks for less than the latest snapshot: that is the limit
    result = delete_covered_segments(tmp_path, bases[2] - 1, 0)
    assert [p.name for p in result.deleted_segments] == [segment_file_name(b) for b in bases[:2]]
    assert oldest_available_offset(tmp_path) == bases[2]
    # old1 cannot be followed by the log any more; old2 (= oldest base - 1) still can
    assert result.deleted_snapshots == (old1,)
    result = delete_covered_segments(tmp_path, bases[3] + 1, 0)
    assert [p.name for p in result.deleted_segments] == [segment_file_name(bases[2])]
    assert set(result.deleted_snapshots) == {old2}
    assert {s.path for s in list_snapshots(tmp_path)} == {old3, latest}
    # every offset after the snapshot is still in the segments
    assert oldest_available_offset(tmp_path) <= bases[3] + 2
    assert SnapshotPolicy(max_retention_bytes=0).clean(tmp_path, bases[3] + 1).deleted_segments == ()


def test_oldest_available_offset_without_segments(tmp_path: Path) -> None:
    assert oldest_available_offset(tmp_path) == 0
    assert oldest_available_offset(tmp_path / "missing") == 0
    write_snapshot(tmp_path, 77, 1, 0, [])
    assert oldest_available_offset(tmp_path) == 78
    with pytest.raises(MetadataLogGapError):
        list(read_log_dir(tmp_path))
    assert list(read_log_dir(tmp_path, 78)) == []


# --------------------------------------------------------------------------------------------- property


_ids = st.integers(min_value=-1, max_value=2**31 - 1)
_names = st.text(min_size=0, max_size=20)
_int_tuples = st.lists(st.integers(min_value=0, max_value=1000), max_size=5).map(tuple)
_endpoints = st.builds(BrokerEndpoint, _names, _names, st.integers(min_value=0, max_value=65535), _names)
_records = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        _ids,
        _names,
        _ids,
        st.lists(_endpoints, max_size=3).map(tuple),
        st.none() | _names,
        st.booleans(),
        st.booleans(),
        st.lists(_names, max_size=3).map(tuple),
    ),
    st.builds(UnregisterBrokerRecord, _ids, _ids),
    st.builds(TopicRecord, _names, _names),
    st.builds(
        PartitionRecord,
        _ids,
        _names,
        _int_tuples,
        _int_tuples,
        _ids,
        _ids,
        _ids,
        _int_tuples,
        _int_tuples,
        st.sampled_from([0, 1]),
    ),
    st.builds(ConfigRecord, st.sampled_from([2, 4, 8]), _names, _names, st.none() | _names),
    st.builds(PartitionChangeRecord, _ids, _names, st.none() | _int_tuples, _ids, st.none() | _int_tuples),
    st.builds(FenceBrokerRecord, _ids, _ids),
    st.builds(UnfenceBrokerRecord, _ids, _ids),
    st.builds(RemoveTopicRecord, _names),
    st.builds(FeatureLevelRecord, _names, st.integers(min_value=0, max_value=100)),
    st.builds(ProducerIdsRecord, _ids, _ids, st.integers(min_value=0, max_value=2**63 - 1)),
    st.builds(BrokerRegistrationChangeRecord, _ids, _ids, st.sampled_from([-1, 0, 1]), st.sampled_from([0, 1])),
    st.just(NoOpRecord()),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.tuples(_records, st.integers(min_value=0, max_value=2**31), st.integers(min_value=0, max_value=2**62)),
        max_size=40,
    ),
    start=st.integers(min_value=0, max_value=10**12),
    segment_bytes=st.integers(min_value=40, max_value=4000),
    split=st.integers(min_value=0, max_value=40),
)
def test_random_entries_round_trip(
    records: list[tuple[MetadataRecord, int, int]], start: int, segment_bytes: int, split: int
) -> None:
    entries = [LogEntry(start + i, epoch, ts, r) for i, (r, epoch, ts) in enumerate(records)]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        with MetadataLogWriter(d, segment_bytes=segment_bytes, fsync=False) as w:
            w.truncate_fully_and_start_at(start)
            w.append(entries[:split])
        with MetadataLogWriter(d, segment_bytes=segment_bytes, fsync=False) as w:
            w.append(entries)  # replay: overlap skipped
            assert w.next_offset == start + len(entries)
        assert list(read_log_dir(d, start)) == entries
        for seg in list_segments(d)[:-1]:
            assert seg.path.stat().st_size <= segment_bytes or len(read_segment(seg.path).entries) == 1
        snap = write_snapshot(d, start + len(entries), 3, 42, [r for r, _, _ in records])
        assert read_snapshot(snap).records == tuple(r for r, _, _ in records)
