"""The Spark snapshot job against in-process replay: byte-identical snapshots at the same offset.

Every test compares the file `rebuild_snapshot` writes with the one `write_snapshot` writes for the
image that `MetadataDelta` replay builds from the same files (`_reference.replay_snapshot`), i.e.
what a controller would have written at that offset.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from _loggen import START_MS, LogGenerator, generate_log
from _reference import replay_image, replay_snapshot

from kraftlog.metadata_log import (
    NO_LEADER,
    RECORD_TYPES,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LogEntry,
    MetadataLogGapError,
    MetadataLogWriter,
    MetadataRecordError,
    MetadataReplayError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    list_segments,
    read_log_dir,
    read_segment,
    read_snapshot,
)
from kraftlog.metadata_log.log_files import encode_frame
from kraftlog.spark import SnapshotRebuildError, rebuild_snapshot


def _same_as_replay(spark, log_dir: Path, tmp_path: Path, name: str, **cut) -> tuple[object, Path]:
    base = cut.get("base_snapshot")
    out = tmp_path / f"{name}.checkpoint"
    result = rebuild_snapshot(spark, str(log_dir), out, **cut)
    ref = replay_snapshot(log_dir, tmp_path / f"{name}-ref", **cut)
    assert result.path == out
    assert out.read_bytes() == ref.read_bytes(), f"{name}: Spark snapshot differs from replay"
    snap = read_snapshot(out)
    assert (snap.offset, snap.epoch) == (result.offset, result.epoch)
    if base is None:
        assert ref.name.startswith(f"{result.offset:020d}-{result.epoch:010d}")
    return result, out


# ---------------------------------------------------------------------------------------- big log


def test_big_log_covers_every_record_type_and_edge_case(big_log) -> None:
    types: Counter[str] = Counter()
    names: dict[str, set[str]] = {}
    registrations: Counter[int] = Counter()
    partial = Counter()
    config_deletes = feature_zero = 0
    for e in read_log_dir(big_log.directory):
        r = e.record
        types[type(r).__name__] += 1
        if isinstance(r, TopicRecord):
            names.setdefault(r.name, set()).add(r.topic_id)
        elif isinstance(r, RegisterBrokerRecord):
            registrations[r.broker_id] += 1
        elif isinstance(r, PartitionChangeRecord):
            set_fields = tuple(
                f
                for f in ("isr", "leader", "replicas", "adding_replicas", "removing_replicas", "leader_recovery_state")
                if getattr(r, f) not in (None, -2, -1) or (f == "leader" and r.leader == NO_LEADER)
            )
            partial[set_fields] += 1
        elif isinstance(r, ConfigRecord) and r.value is None:
            config_deletes += 1
        elif isinstance(r, FeatureLevelRecord) and r.feature_level == 0:
            feature_zero += 1
    assert set(types) == {cls.__name__ for cls in RECORD_TYPES.values()}
    assert sum(types.values()) == big_log.last_offset + 1 >= 300_000
    assert sum(1 for ids in names.values() if len(ids) > 1) > 50  # deleted and re-created names
    assert max(registrations.values()) > 5  # re-registrations, new epochs
    assert partial[("isr",)] and partial[("leader",)] and partial[()] and partial[("leader_recovery_state",)]
    assert any("adding_replicas" in k for k in partial) and config_deletes > 100 and feature_zero > 10
    assert types["ProducerIdsRecord"] > 1000 and types["NoOpRecord"] > 100


def test_big_log_snapshot_is_byte_identical_to_replay(spark, big_log, tmp_path: Path) -> None:
    result, out = _same_as_replay(spark, big_log.directory, tmp_path, "end")
    assert result.offset == big_log.last_offset and result.entries_replayed == big_log.last_offset + 1
    assert result.files_read == len(list_segments(big_log.directory)) > 10
    assert result.torn_tails == ()
    image = replay_image(big_log.directory)
    assert result.record_count == len(image.to_records())
    assert image.topics.partition_count > 500 and len(image.configs.resources) > 50


def test_big_log_as_of_offset_and_as_of_time(spark, big_log, tmp_path: Path) -> None:
    result, _ = _same_as_replay(spark, big_log.directory, tmp_path, "offset", as_of_offset=123_457)
    assert result.offset == 123_457
    middle = (big_log.first_timestamp_ms + big_log.last_timestamp_ms) // 2 + 7
    result, _ = _same_as_replay(spark, big_log.directory, tmp_path, "time", as_of_time_ms=middle)
    entries = {
        e.offset: e for e in read_log_dir(big_log.directory, from_offset=result.offset) if e.offset <= result.offset + 1
    }
    assert entries[result.offset].timestamp_ms <= middle < entries[result.offset + 1].timestamp_ms
    assert result.timestamp_ms == entries[result.offset].timestamp_ms


# ---------------------------------------------------------------------------------------- cuts


def test_cuts_at_segment_boundaries_and_ends(spark, small_log, tmp_path: Path) -> None:
    segments = list_segments(small_log.directory)
    assert len(segments) > 5
    boundary = segments[3].base_offset
    for n in (0, boundary - 1, boundary, small_log.last_offset):
        result, _ = _same_as_replay(spark, small_log.directory, tmp_path, f"at{n}", as_of_offset=n)
        assert result.offset == n
    with pytest.raises(SnapshotRebuildError, match="ends at offset"):
        rebuild_snapshot(spark, str(small_log.directory), tmp_path / "x", as_of_offset=small_log.last_offset + 5)
    with pytest.raises(SnapshotRebuildError, match="no metadata log entry at or before"):
        rebuild_snapshot(spark, str(small_log.directory), tmp_path / "x", as_of_time_ms=START_MS - 1)
    result, _ = _same_as_replay(spark, small_log.directory, tmp_path, "late", as_of_time_ms=START_MS * 2)
    assert result.offset == small_log.last_offset
    assert not (tmp_path / "x").exists()


def test_parent_dir_and_glob_are_accepted(spark, small_log, tmp_path: Path) -> None:
    ref = replay_snapshot(small_log.directory, tmp_path / "ref")
    rebuild_snapshot(spark, str(small_log.directory.parent), tmp_path / "a.checkpoint")
    rebuild_snapshot(spark, f"file://{small_log.directory}/*.log", tmp_path / "b.checkpoint")
    out_dir = tmp_path / "into"
    out_dir.mkdir()
    result = rebuild_snapshot(spark, str(small_log.directory), out_dir)
    assert result.path.name == ref.name
    for f in (tmp_path / "a.checkpoint", tmp_path / "b.checkpoint", result.path):
        assert f.read_bytes() == ref.read_bytes()


def test_base_snapshot_plus_later_segments(spark, tmp_path: Path) -> None:
    d = tmp_path / "log" / "__cluster_metadata-0"
    gen = LogGenerator(seed=23, topic_names=60, max_live_partitions=400)
    generate_log(d, 30_000, generator=gen, segment_bytes=512 << 10)
    snap_offset = 17_321
    base = replay_snapshot(d, tmp_path / "base", as_of_offset=snap_offset)  # what a controller wrote
    full_ref = replay_snapshot(d, tmp_path / "full-ref")
    # retention: drop every segment the snapshot covers entirely, as the controller does
    segs = list_segments(d)
    dropped = 0
    for seg, nxt in zip(segs, segs[1:], strict=False):
        if nxt.base_offset - 1 <= snap_offset:
            seg.path.unlink()
            dropped += 1
    assert dropped >= 3 and list_segments(d)[0].base_offset <= snap_offset + 1
    result, out = _same_as_replay(spark, d, tmp_path, "based", base_snapshot=str(base))
    assert out.read_bytes() == full_ref.read_bytes()
    assert result.first_offset == snap_offset + 1
    assert result.entries_replayed == 30_000 - snap_offset - 1
    _same_as_replay(spark, d, tmp_path, "based-offset", base_snapshot=str(base), as_of_offset=25_000)
    _same_as_replay(spark, d, tmp_path, "based-at-base", base_snapshot=str(base), as_of_offset=snap_offset)
    mid_ts = read_snapshot(full_ref).timestamp_ms - 5_000
    _same_as_replay(spark, d, tmp_path, "based-time", base_snapshot=str(base), as_of_time_ms=mid_ts)
    with pytest.raises(SnapshotRebuildError, match="before the base snapshot"):
        rebuild_snapshot(spark, str(d), tmp_path / "x", base_snapshot=str(base), as_of_offset=100)
    # without the snapshot the remaining segments do not start at 0: refused, naming the gap
    with pytest.raises(MetadataLogGapError, match=r"offsets 0 to \d+ are missing"):
        rebuild_snapshot(spark, str(d), tmp_path / "x")


# ---------------------------------------------------------------------------------------- damage


def test_torn_tail_of_newest_segment_is_reported(spark, log_copy: Path, tmp_path: Path) -> None:
    last = list_segments(log_copy)[-1].path
    size = last.stat().st_size
    os.truncate(last, size - 7)  # a crash in the middle of the last frame
    seg = read_segment(last)
    assert seg.torn_at is not None
    result, _ = _same_as_replay(spark, log_copy, tmp_path, "torn")
    assert [(Path(t.file).name, t.position) for t in result.torn_tails] == [(last.name, seg.torn_at)]
    assert "torn frame" in result.torn_tails[0].reason
    assert result.offset == seg.last_offset


def test_corrupt_tail_of_middle_segment_followed_by_dense_log_is_reported(
    spark, log_copy: Path, tmp_path: Path
) -> None:
    middle = list_segments(log_copy)[2].path
    size = middle.stat().st_size
    with open(middle, "ab") as fh:  # a preallocated, zero-filled tail
        fh.write(b"\0" * 100)
    result, _ = _same_as_replay(spark, log_copy, tmp_path, "zeros")
    assert [(Path(t.file).name, t.position, t.reason) for t in result.torn_tails] == [
        (middle.name, size, "zero-length frame")
    ]


def test_corrupt_frame_losing_entries_is_a_gap(spark, log_copy: Path, tmp_path: Path) -> None:
    segs = list_segments(log_copy)
    middle = segs[2].path
    seg = read_segment(middle)
    data = bytearray(middle.read_bytes())
    # flip a byte in the payload of the last frame: its CRC fails, so that entry is lost
    data[-2] ^= 0xFF
    middle.write_bytes(bytes(data))
    lost = seg.last_offset
    with pytest.raises(MetadataLogGapError) as info:
        rebuild_snapshot(spark, str(log_copy), tmp_path / "x.checkpoint")
    assert f"offsets {lost} to {lost} are missing" in str(info.value)
    assert "refusing to write a snapshot past a gap" in str(info.value)
    assert info.value.expected_offset == lost
    assert not (tmp_path / "x.checkpoint").exists()
    result, _ = _same_as_replay(spark, log_copy, tmp_path, "before", as_of_offset=lost - 1)
    assert [Path(t.file).name for t in result.torn_tails] == [middle.name]


def test_missing_segment_is_refused_with_the_gap_named(spark, log_copy: Path, tmp_path: Path) -> None:
    segs = list_segments(log_copy)
    gone, nxt = segs[3], segs[4]
    gone.path.unlink()
    with pytest.raises(MetadataLogGapError, match=rf"offsets {gone.base_offset} to {nxt.base_offset - 1} are missing"):
        rebuild_snapshot(spark, str(log_copy), tmp_path / "x.checkpoint")
    with pytest.raises(MetadataLogGapError, match="the cut lies past a gap"):
        rebuild_snapshot(spark, str(log_copy), tmp_path / "x.checkpoint", as_of_offset=nxt.base_offset + 3)
    with pytest.raises(MetadataLogGapError, match="the cut lies past a gap"):
        rebuild_snapshot(spark, str(log_copy), tmp_path / "x.checkpoint", as_of_time_ms=START_MS * 2)
    _same_as_replay(spark, log_copy, tmp_path, "before-gap", as_of_offset=gone.base_offset - 1)


def test_undecodable_frame_names_file_and_position(spark, log_copy: Path, tmp_path: Path) -> None:
    last = list_segments(log_copy)[-1].path
    seg = read_segment(last)
    with open(last, "ab") as fh:
        fh.write(encode_frame(b"\xc1 not msgpack"))  # CRC-valid, undecodable: corruption, not a tear
    with pytest.raises(MetadataRecordError, match=rf"{last.name} position {seg.valid_bytes}"):
        rebuild_snapshot(spark, str(log_copy), tmp_path / "x.checkpoint")
    _same_as_replay(spark, log_copy, tmp_path, "before-bad", as_of_offset=seg.last_offset)


# ---------------------------------------------------------------------------------------- semantics


def _write(d: Path, records: list, *, start_epoch: int = 3, start_ms: int = START_MS) -> None:
    entries = []
    epoch = start_epoch
    for i, rec in enumerate(records):
        if isinstance(rec, NoOpRecord):
            epoch += 1
        entries.append(LogEntry(i, epoch, start_ms + i * 10, rec))
    with MetadataLogWriter(d, segment_bytes=600, fsync=False) as w:  # many tiny segments
        w.append(entries)


def _broker(bid: int, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=bid,
        incarnation_id=f"inc-{bid}-{epoch}",
        broker_epoch=epoch,
        endpoints=(BrokerEndpoint("BROKER", "h", 9000 + bid),),
        rack="r1",
    )


EDGE_CASES = [
    FeatureLevelRecord(name="metadata.version", feature_level=7),
    FeatureLevelRecord(name="group.version", feature_level=1),
    _broker(1, 10),
    _broker(2, 11),
    _broker(3, 12),
    _broker(4, 13),
    UnfenceBrokerRecord(broker_id=1, broker_epoch=10),
    UnfenceBrokerRecord(broker_id=2, broker_epoch=11),
    TopicRecord(name="orders", topic_id="id-orders-1"),
    PartitionRecord(partition_id=0, topic_id="id-orders-1", replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
    PartitionRecord(partition_id=1, topic_id="id-orders-1", replicas=(2, 3, 1), isr=(2, 3), leader=2),
    ConfigRecord(2, "orders", "retention.ms", "1000"),
    ConfigRecord(2, "orders", "cleanup.policy", "compact"),
    TopicRecord(name="logs", topic_id="id-logs"),
    PartitionRecord(partition_id=0, topic_id="id-logs", replicas=(3, 4), isr=(3, 4), leader=3),
    ConfigRecord(2, "logs", "segment.bytes", "1024"),
    PartitionChangeRecord(partition_id=0, topic_id="id-orders-1", isr=(1, 2)),  # ISR only
    PartitionChangeRecord(partition_id=0, topic_id="id-orders-1", leader=2),  # leader only
    PartitionChangeRecord(partition_id=0, topic_id="id-orders-1"),  # nothing set
    PartitionChangeRecord(partition_id=1, topic_id="id-orders-1", leader=NO_LEADER),  # no leader
    PartitionChangeRecord(
        partition_id=1, topic_id="id-orders-1", replicas=(2, 3, 1, 4), adding_replicas=(4,), removing_replicas=(1,)
    ),  # reassignment
    PartitionChangeRecord(partition_id=1, topic_id="id-orders-1", leader_recovery_state=1),
    NoOpRecord(),  # new epoch
    FenceBrokerRecord(broker_id=2, broker_epoch=11),
    _broker(2, 20),  # re-registration with a new epoch
    BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=20, fenced=-1, in_controlled_shutdown=1),
    BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=12, fenced=0, in_controlled_shutdown=0),
    UnregisterBrokerRecord(broker_id=4, broker_epoch=13),
    ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
    ProducerIdsRecord(broker_id=2, broker_epoch=20, next_producer_id=2000),
    ConfigRecord(4, "", "log.retention.hours", "24"),  # cluster default
    ConfigRecord(4, "1", "num.io.threads", "16"),
    ConfigRecord(4, "1", "num.io.threads", None),  # config delete: resource disappears
    ConfigRecord(4, "7", "never.set", None),  # delete of an unset key: nothing
    ConfigRecord(2, "orders", "retention.ms", None),
    RemoveTopicRecord(topic_id="id-orders-1"),  # partitions and topic configs go too
    TopicRecord(name="orders", topic_id="id-orders-2"),  # same name, new id
    PartitionRecord(partition_id=0, topic_id="id-orders-2", replicas=(3,), isr=(3,), leader=3),
    ConfigRecord(2, "orders", "min.insync.replicas", "1"),
    FeatureLevelRecord(name="group.version", feature_level=0),  # level 0 removes the feature
    NoOpRecord(),
    PartitionChangeRecord(partition_id=0, topic_id="id-logs", isr=(4,), leader=4),
    RemoveTopicRecord(topic_id="id-logs"),
    TopicRecord(name="logs", topic_id="id-logs-2"),
    PartitionRecord(partition_id=0, topic_id="id-logs-2", replicas=(1,), isr=(1,), leader=1),
    PartitionRecord(partition_id=1, topic_id="id-logs-2", replicas=(2,), isr=(2,), leader=2),
    RemoveTopicRecord(topic_id="id-logs-2"),
    TopicRecord(name="logs", topic_id="id-logs-3"),
    PartitionRecord(partition_id=1, topic_id="id-logs-3", replicas=(2, 3), isr=(2, 3), leader=3),
]


def test_edge_cases_fold_like_replay(spark, tmp_path: Path) -> None:
    d = tmp_path / "edge" / "__cluster_metadata-0"
    _write(d, EDGE_CASES)
    assert len(list_segments(d)) > 10
    for n in range(5, len(EDGE_CASES), 6):
        _same_as_replay(spark, d, tmp_path, f"edge{n}", as_of_offset=n)
    result, out = _same_as_replay(spark, d, tmp_path, "edge-end")
    image = replay_image(d)
    orders = image.topics.by_name["orders"]
    assert orders.topic_id == "id-orders-2" and list(orders.partitions) == [0]
    assert dict(image.configs.topic_config("orders")) == {"min.insync.replicas": "1"}
    assert image.topics.by_name["logs"].topic_id == "id-logs-3"
    assert list(image.topics.by_name["logs"].partitions) == [1]
    assert image.configs.topic_config("logs") == {}
    assert image.cluster.brokers[2].broker_epoch == 20 and image.cluster.brokers[2].in_controlled_shutdown
    assert 4 not in image.cluster.brokers and dict(image.features.levels) == {"metadata.version": 7}
    assert image.producer_ids.next_producer_id == 2000
    assert result.epoch == 5


@pytest.mark.parametrize(
    "bad, message",
    [
        (FenceBrokerRecord(broker_id=1, broker_epoch=99), "cannot fence broker 1 at epoch 99"),
        (
            PartitionChangeRecord(partition_id=5, topic_id="id-orders-1", isr=(1,)),
            "cannot change unknown partition 5 of topic id-orders-1",
        ),
        (PartitionChangeRecord(partition_id=0, topic_id="id-orders-1", leader=9), "leader 9 is not a replica"),
        (TopicRecord(name="orders", topic_id="id-other"), "topic name 'orders' is taken by topic id id-orders-1"),
        (RemoveTopicRecord(topic_id="nope"), "unknown topic id nope"),
        (ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=5), "goes back"),
    ],
)
def test_record_replay_rejects_is_rejected_at_the_same_offset(spark, tmp_path: Path, bad, message) -> None:
    records = EDGE_CASES[:30] + [bad] + EDGE_CASES[30:]
    d = tmp_path / "bad" / "__cluster_metadata-0"
    _write(d, records)
    with pytest.raises(MetadataReplayError) as in_process:
        replay_image(d)
    assert message in str(in_process.value)
    with pytest.raises(MetadataReplayError) as spark_error:
        rebuild_snapshot(spark, str(d), tmp_path / "x.checkpoint")
    assert str(spark_error.value) == f"offset 30: {in_process.value}"
    _same_as_replay(spark, d, tmp_path, "before-error", as_of_offset=29)  # the cut is before it


def test_epoch_going_back_is_rejected(spark, tmp_path: Path) -> None:
    d = tmp_path / "epochs" / "__cluster_metadata-0"
    entries = [LogEntry(i, 5 if i < 20 else 4, START_MS + i, _broker(i + 1, i)) for i in range(30)]
    with MetadataLogWriter(d, segment_bytes=400, fsync=False) as w:
        w.append(entries)
    with pytest.raises(MetadataReplayError, match="entry at offset 20 has epoch 4 < epoch 5") as err:
        rebuild_snapshot(spark, str(d), tmp_path / "x.checkpoint")
    with pytest.raises(MetadataReplayError) as in_process:
        replay_image(d)
    assert str(err.value) == f"offset 20: {in_process.value}"
    _same_as_replay(spark, d, tmp_path, "ok", as_of_offset=19)
