"""Tests of `storage.LogManager`: checkpoint files in Kafka's format, the clean-shutdown marker,
restart with and without it, several log dirs, deletion, topic ids and meta.properties.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.storage import (
    CLEAN_SHUTDOWN_FILE,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogConfig,
    LogManager,
    MetaProperties,
    OffsetCheckpointFile,
    build_batch,
    read_meta_properties,
    write_meta_properties,
)

NOW = 1_700_000_000_000
CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint")


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 2, ts: int = NOW) -> bytes:
    return build_batch([(f"k{i}".encode(), b"value" * 4) for i in range(n)], timestamp_ms=ts)


def parse_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Parse Kafka's offset checkpoint by hand: ``0\\n<count>\\n<topic> <partition> <offset>\\n...``."""
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.split("\n")[:-1]
    assert lines[0] == "0"
    count = int(lines[1])
    assert len(lines) == count + 2
    out = {}
    for line in lines[2:]:
        topic, part, off = line.split(" ")
        out[(topic, int(part))] = int(off)
    return out


def new_manager(dirs: list[Path], clock: FakeClock | None = None, **cfg: object) -> LogManager:
    lm = LogManager(dirs, LogConfig(**cfg), clock_ms=clock or FakeClock())
    lm.startup()
    return lm


def fill(lm: LogManager, spec: dict[tuple[str, int], int]) -> None:
    for (topic, part), n in spec.items():
        log = lm.get_or_create_log(topic, part)
        for _ in range(n):
            log.append_as_leader(batch(), 0)


def test_startup_on_empty_dirs_writes_empty_checkpoints(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    lm = new_manager([d])
    assert lm.had_clean_shutdown == {d: False}
    for name in CHECKPOINTS:
        assert (d / name).read_text() == "0\n0\n"
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()


def test_shutdown_writes_checkpoints_and_marker(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    lm = new_manager([d])
    fill(lm, {("orders", 0): 3, ("orders", 1): 5, ("my-topic", 2): 1})
    lm.get_log("orders", 0).update_high_watermark(4)
    lm.get_log("orders", 1).update_high_watermark(10)
    lm.get_log("orders", 1).maybe_increment_log_start_offset(6)
    lm.shutdown()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    assert parse_checkpoint(d / "recovery-point-offset-checkpoint") == {
        ("orders", 0): 6,
        ("orders", 1): 10,
        ("my-topic", 2): 2,
    }
    assert parse_checkpoint(d / "replication-offset-checkpoint") == {
        ("orders", 0): 4,
        ("orders", 1): 10,
        ("my-topic", 2): 0,
    }
    starts = parse_checkpoint(d / "log-start-offset-checkpoint")
    assert starts.get(("orders", 1)) == 6
    assert starts.get(("orders", 0), 0) == 0 and starts.get(("my-topic", 2), 0) == 0
    # exact text for one file: Kafka's format
    text = (d / "replication-offset-checkpoint").read_text()
    assert text.startswith("0\n3\n")
    assert "orders 1 10\n" in text and "my-topic 2 0\n" in text
    # and the reader of the package agrees
    assert OffsetCheckpointFile(d / "replication-offset-checkpoint").read()[("orders", 1)] == 10


def test_restart_after_clean_shutdown_keeps_everything(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    cfg = dict(segment_bytes=len(batch()) * 3)
    lm = new_manager([d], **cfg)
    fill(lm, {("t", 0): 10, ("t", 1): 4})
    lm.get_log("t", 0).update_high_watermark(14)
    lm.get_log("t", 0).maybe_increment_log_start_offset(7)
    lm.get_log("t", 1).update_high_watermark(5)
    before = {
        tp: (
            log.log_end_offset,
            log.log_start_offset,
            log.high_watermark,
            [b.to_bytes() for b in log.batches()],
            log.epoch_cache.entries,
        )
        for tp, log in lm.all_logs().items()
    }
    lm.shutdown()
    lm2 = new_manager([d], **cfg)
    assert lm2.had_clean_shutdown == {d: True}
    assert not (d / CLEAN_SHUTDOWN_FILE).exists(), "the marker is removed once the logs are loaded"
    after = {
        tp: (
            log.log_end_offset,
            log.log_start_offset,
            log.high_watermark,
            [b.to_bytes() for b in log.batches()],
            log.epoch_cache.entries,
        )
        for tp, log in lm2.all_logs().items()
    }
    assert after == before
    assert before[("t", 0)][:3] == (20, 7, 14)
    for log in lm2.all_logs().values():
        assert log.recovery_point == log.log_end_offset
    # appends continue where they stopped
    assert lm2.get_log("t", 1).append_as_leader(batch(), 1).first_offset == 8
    lm2.shutdown()


def test_restart_without_marker_recovers(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    cfg = dict(segment_bytes=len(batch()) * 4)
    lm = new_manager([d], **cfg)
    fill(lm, {("t", 0): 10, ("u", 0): 3})
    t0 = lm.get_log("t", 0)
    t0.update_high_watermark(12)
    t0.flush(8)
    lm.checkpoint()
    good = {
        tp: (log.log_end_offset, [b.to_bytes() for b in log.batches()], log.active_segment.size)
        for tp, log in lm.all_logs().items()
    }
    # crash: nothing closed cleanly, and a torn write at the end of each active segment
    for log in lm.all_logs().values():
        path = log.active_segment.log_path
        log.close_without_flush()
        with open(path, "ab") as fh:
            fh.write(batch(3)[:50])
    lm2 = new_manager([d], **cfg)
    assert lm2.had_clean_shutdown == {d: False}
    for tp, (leo, batches, active_size) in good.items():
        log = lm2.get_log(*tp)
        assert log.log_end_offset == leo
        assert [b.to_bytes() for b in log.batches()] == batches
        assert log.active_segment.size == active_size  # the torn tail is cut off
        assert log.active_segment.log_path.stat().st_size == active_size
        assert log.recovery_point == leo
        assert log.append_as_leader(batch(), 0).first_offset == leo
    assert lm2.get_log("t", 0).high_watermark == 12
    for log in lm2.all_logs().values():
        for seg in log.segments:
            seg.sanity_check()
    lm2.shutdown()


def test_partitions_spread_over_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    lm = new_manager(dirs)
    fill(lm, {("t", p): 1 for p in range(6)})
    fill(lm, {("u", 0): 1})
    per_dir = {d: sorted(p.name for p in d.iterdir() if p.is_dir()) for d in dirs}
    assert sorted(len(v) for v in per_dir.values()) == [2, 2, 3]
    assert sorted(n for v in per_dir.values() for n in v) == sorted([f"t-{p}" for p in range(6)] + ["u-0"])
    lm.shutdown()
    for d in dirs:
        on_disk = {(n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])) for n in per_dir[d]}
        assert set(parse_checkpoint(d / "recovery-point-offset-checkpoint")) == on_disk
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    lm2 = new_manager(dirs)
    assert set(lm2.all_logs()) == {("t", p) for p in range(6)} | {("u", 0)}
    for _tp, log in lm2.all_logs().items():
        assert log.log_end_offset == 2
        assert log.dir.parent in dirs
    # a new partition goes to a dir with the fewest partitions
    new = lm2.get_or_create_log("v", 0)
    assert len([p for p in new.dir.parent.iterdir() if p.is_dir()]) == 3
    lm2.shutdown()


def test_delete_log_removes_directory(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    lm = new_manager([d])
    fill(lm, {("t", 0): 3, ("t", 1): 3})
    path = lm.get_log("t", 0).dir
    assert lm.delete_log("t", 0)
    assert not path.exists()
    assert not any(p.name.startswith("t-0") for p in d.iterdir())
    assert lm.get_log("t", 0) is None
    assert not lm.delete_log("t", 0)
    lm.checkpoint()
    assert set(parse_checkpoint(d / "recovery-point-offset-checkpoint")) == {("t", 1)}
    # a re-created partition starts empty
    assert lm.get_or_create_log("t", 0).log_end_offset == 0
    lm.shutdown()


def test_interrupted_delete_is_finished_at_startup(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    stale = d / "t-0.0123456789abcdef-delete"
    stale.mkdir(parents=True)
    (stale / f"{0:020d}.log").write_bytes(batch())
    lm = new_manager([d])
    assert not stale.exists()
    assert lm.all_logs() == {}
    lm.shutdown()


def test_topic_id_in_partition_metadata(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    lm = new_manager([d])
    log = lm.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert (log.dir / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    assert lm.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA") is log
    with pytest.raises(InconsistentTopicIdError) as err:
        lm.get_or_create_log("t", 0, topic_id="BBBBBBBBBBBBBBBBBBBBBB")
    assert err.value.error_name == "INCONSISTENT_TOPIC_ID"
    lm.shutdown()
    lm2 = new_manager([d])
    assert lm2.get_log("t", 0).read_partition_metadata() == "AAAAAAAAAAAAAAAAAAAAAA"
    with pytest.raises(InconsistentTopicIdError):
        lm2.get_or_create_log("t", 0, topic_id="CCCCCCCCCCCCCCCCCCCCCC")
    assert lm2.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA").dir == log.dir
    lm2.shutdown()


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    assert read_meta_properties(d) is None
    meta = MetaProperties(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3, directory_id="dir-uuid-1")
    write_meta_properties(d, meta)
    text = (d / "meta.properties").read_text()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert sorted(lines) == sorted(
        ["version=1", "cluster.id=MkU3OEVBNTcwNTJENDM2Qg", "node.id=3", "directory.id=dir-uuid-1"]
    )
    assert read_meta_properties(d) == meta
    write_meta_properties(d, MetaProperties(cluster_id="c2", node_id=4))
    assert read_meta_properties(d) == MetaProperties(cluster_id="c2", node_id=4)
    (d / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(KafkaStorageError):
        read_meta_properties(d)


def test_meta_properties_does_not_make_a_partition(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    write_meta_properties(d, MetaProperties(cluster_id="c", node_id=1))
    lm = new_manager([d])
    assert lm.all_logs() == {}
    lm.shutdown()
    assert read_meta_properties(d) == MetaProperties(cluster_id="c", node_id=1)


def test_periodic_work_with_fake_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    d = tmp_path / "d1"
    one = batch(ts=NOW - 100_000)
    lm = new_manager([d], clock, flush_ms=1000, retention_ms=50_000, segment_bytes=len(one) * 2)
    log = lm.get_or_create_log("t", 0)
    for _ in range(6):
        log.append_as_leader(batch(ts=NOW - 100_000), 0)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    log.append_as_leader(batch(ts=NOW), 0)
    assert lm.flush_dirty_logs() == 0
    clock.now += 1000
    assert lm.flush_dirty_logs() == 1
    assert log.recovery_point == log.log_end_offset
    log.update_high_watermark(log.log_end_offset)
    assert lm.cleanup_logs() == 3
    assert log.log_start_offset == 12
    lm.checkpoint()
    assert parse_checkpoint(d / "log-start-offset-checkpoint") == {("t", 0): 12}
    lm.shutdown()


def test_cleaner_checkpoint_survives_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    d = tmp_path / "d1"
    cfg = dict(cleanup_policy=frozenset({"compact"}), segment_bytes=len(batch()) * 3)
    lm = new_manager([d], clock, **cfg)
    log = lm.get_or_create_log("c", 0)
    for _ in range(10):
        log.append_as_leader(batch(), 0)  # the same two keys over and over
    log.update_high_watermark(log.log_end_offset)
    stats = lm.clean_compacted_logs()
    assert len(stats) == 1 and stats[0].end_offset == log.active_segment.base_offset
    end = stats[0].end_offset
    assert lm.clean_compacted_logs() == []  # nothing dirty any more
    lm.shutdown()
    assert parse_checkpoint(d / "cleaner-offset-checkpoint") == {("c", 0): end}
    lm2 = new_manager([d], clock, **cfg)
    log2 = lm2.get_log("c", 0)
    assert log2.cleaner_checkpoint == end
    assert lm2.clean_compacted_logs() == []
    keys = [(r.offset, r.key) for b in log2.batches() for r in b.records() if r.offset < end]
    assert sorted(k for _o, k in keys) == [b"k0", b"k1"]
    lm2.shutdown()


def test_the_clean_shutdown_marker_names_the_broker_epoch(tmp_path: Path) -> None:
    """Issue 26 (KIP-966): the next registration reports the epoch a clean stop wrote in every dir;
    a dir without the marker (an unclean stop) or an epoch-less marker gives -1."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = new_manager(dirs)  # starts the manager
    assert lm.previous_broker_epoch == -1  # first start: no marker
    lm.shutdown(broker_epoch=42)
    again = new_manager(dirs)
    assert again.previous_broker_epoch == 42
    again.shutdown()  # epoch unknown: an empty marker, as before
    third = new_manager(dirs)
    assert third.previous_broker_epoch == -1
    third.shutdown(broker_epoch=7)
    (dirs[1] / ".kafka_cleanshutdown").unlink()  # one dir was not shut down cleanly
    fourth = new_manager(dirs)
    assert fourth.previous_broker_epoch == -1
