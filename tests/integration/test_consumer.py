"""Tests of `client.Consumer` against the in-process fake cluster of ``test_producer.py``.

Record data is written with `storage`'s batch builder (an independent encoder) straight into the
fake partitions, so these tests do not depend on the producer.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kraftlog.client import (
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    TopicPartition,
    consumer_config_from_properties,
)
from kraftlog.common import errors as kerr
from kraftlog.common.records import ControlRecordType, Header, RecordBatchBuilder, build_control_batch
from kraftlog.common.records.compression import CompressionType

from .test_producer import FakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TS = 1_700_000_000_000
TP = ("t", 0)


@pytest.fixture
def cluster():
    c = FakeCluster(brokers=2)
    yield c
    c.close()


def make_consumer(cluster: FakeCluster, **config: Any) -> Consumer:
    config.setdefault("retry_backoff_ms", 20)
    config.setdefault("fetch_max_wait_ms", 100)
    config.setdefault("request_timeout_ms", 5000)
    config.setdefault("default_api_timeout_ms", 5000)
    return Consumer(cluster.bootstrap, **config)


def write(
    cluster: FakeCluster,
    topic: str,
    partition: int,
    n: int,
    *,
    start: int = 0,
    ts: int = TS,
    codec: CompressionType = CompressionType.NONE,
    **builder: Any,
) -> None:
    """One batch of ``n`` records ``k<i>``/``v<i>`` (timestamps ts + 10*i) at the partition's end."""
    b = RecordBatchBuilder(compression=codec, **builder)
    for i in range(start, start + n):
        b.append(ts + 10 * i, b"k%d" % i, b"v%d" % i, [Header("h", b"%d" % i)])
    cluster.append(topic, partition, b.build())


def poll_until(consumer: Consumer, n: int, timeout_s: float = 10) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        out.extend(consumer.poll(200))
    return out


def test_poll_from_the_beginning_returns_every_field(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 5)
    write(cluster, "t", 0, 5, start=5)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        records = poll_until(consumer, 10)
        assert consumer.position(TP) == 10
        assert consumer.highwater(TP) == 10
    assert [r.offset for r in records] == list(range(10))
    r = records[3]
    assert (r.topic, r.partition, r.key, r.value, r.timestamp, r.headers, r.timestamp_type) == (
        "t",
        0,
        b"k3",
        b"v3",
        TS + 30,
        [("h", b"3")],
        0,
    )
    assert r.leader_epoch == 0


def test_default_latest_only_sees_new_records(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 5)
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        assert consumer.position(TP) == 5
        assert consumer.poll(100) == []
        write(cluster, "t", 0, 3, start=5)
        assert [r.offset for r in poll_until(consumer, 3)] == [5, 6, 7]


def test_seek_into_the_middle_of_a_batch_skips_earlier_records(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 10)
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 6)
        records = poll_until(consumer, 4)
        assert [r.offset for r in records] == [6, 7, 8, 9]
        consumer.seek(TP, 2)  # back again
        assert [r.offset for r in poll_until(consumer, 8)] == list(range(2, 10))
        with pytest.raises(ValueError):
            consumer.seek(TP, -1)
        with pytest.raises(ValueError):
            consumer.seek(("other", 0), 1)


def test_seek_to_beginning_and_end_are_lazy(cluster) -> None:
    cluster.create_topic("t", 2)
    for p in (0, 1):
        write(cluster, "t", p, 4)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        consumer.seek_to_end()
        lists_before = cluster.count("ListOffsets")
        assert consumer.position(("t", 0)) == 4 and consumer.position(("t", 1)) == 4
        assert cluster.count("ListOffsets") > lists_before
        consumer.seek_to_beginning(("t", 1))
        assert {(r.partition, r.offset) for r in poll_until(consumer, 4)} == {(1, i) for i in range(4)}
        assert consumer.beginning_offsets([("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
        assert consumer.end_offsets([("t", 0)]) == {TopicPartition("t", 0): 4}


def test_offsets_for_times_and_seek_to_timestamp(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 10)  # timestamps TS, TS+10, ... TS+90
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        found = consumer.offsets_for_times({TP: TS + 35})
        assert found == {TP: OffsetAndTimestamp(4, TS + 40, 0)}
        assert consumer.offsets_for_times({TP: TS + 1000}) == {TP: None}
        consumer.seek_to_timestamp(TP, TS + 71)
        assert [r.offset for r in poll_until(consumer, 2)] == [8, 9]
        consumer.seek_to_timestamp(TP, TS + 10_000)
        assert consumer.position(TP) == 10
        with pytest.raises(ValueError):
            consumer.offsets_for_times({TP: -5})


@pytest.mark.parametrize("reset,expected", [("earliest", [3, 4, 5]), ("latest", [6])])
def test_out_of_range_resets_per_policy(cluster, reset: str, expected: list[int]) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 6)
    cluster.partition("t").log_start = 3
    with make_consumer(cluster, auto_offset_reset=reset) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 100)
        if reset == "latest":
            deadline = time.monotonic() + 5
            while consumer.position(TP) != 6 and time.monotonic() < deadline:
                consumer.poll(50)
            write(cluster, "t", 0, 1, start=6)
        records = poll_until(consumer, len(expected))
        assert [r.offset for r in records] == expected


def test_out_of_range_with_no_reset_policy_raises(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 3)
    with make_consumer(cluster, auto_offset_reset="none") as consumer:
        consumer.assign([TP])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.poll(100)
        with pytest.raises(NoOffsetForPartitionError):
            consumer.position(TP)
        consumer.seek(TP, 50)
        with pytest.raises(kerr.OffsetOutOfRangeError) as info:
            for _ in range(50):
                consumer.poll(100)
        assert info.value.partitions == {TopicPartition("t", 0): 50}


def test_not_leader_hint_moves_the_fetch_to_the_new_leader(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    write(cluster, "t", 0, 3)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        assert len(poll_until(consumer, 3)) == 3
        cluster.freeze_metadata()  # only the hint can tell the consumer where to go
        cluster.move_leader("t", 0, 2)
        write(cluster, "t", 0, 2, start=3)
        records = poll_until(consumer, 2)
    assert [r.offset for r in records] == [3, 4]
    assert records[0].leader_epoch == 1
    assert cluster.count("Fetch", 2) >= 1


def test_not_leader_without_hint_refreshes_metadata(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    cluster.hints = False
    write(cluster, "t", 0, 1)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        poll_until(consumer, 1)
        cluster.move_leader("t", 0, 2)
        write(cluster, "t", 0, 1, start=1)
        assert [r.offset for r in poll_until(consumer, 1)] == [1]


def test_retriable_fetch_errors_back_off_and_recover(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 2)
    cluster.fetch_errors[("t", 0)] = [kerr.KafkaStorageError, kerr.UnknownLeaderEpochError]
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        assert [r.offset for r in poll_until(consumer, 2)] == [0, 1]


def test_non_retriable_fetch_error_is_raised(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 2)
    cluster.fetch_errors[("t", 0)] = [kerr.TopicAuthorizationFailedError]
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        with pytest.raises(kerr.TopicAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(100)


def test_one_fetch_per_broker_carries_all_its_partitions(cluster) -> None:
    cluster.create_topic("t", 4, leaders=[1, 2])
    for p in range(4):
        write(cluster, "t", p, 3)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", p) for p in range(4)])
        records = poll_until(consumer, 12)
    assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(4) for o in range(3)]
    first = cluster.requests("Fetch", 1)[0]
    assert sorted(fp.partition for fp in first.topics[0].partitions) == [0, 2]
    assert first.replica_id == -1 and first.max_wait_ms == 100 and first.min_bytes == 1
    assert all(fp.partition_max_bytes == 1_048_576 for fp in first.topics[0].partitions)


def test_max_poll_records_and_order_within_a_partition(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 25)
    with make_consumer(cluster, auto_offset_reset="earliest", max_poll_records=10) as consumer:
        consumer.assign([TP])
        sizes, offsets = [], []
        while len(offsets) < 25:
            batch = consumer.poll(500)
            sizes.append(len(batch))
            offsets.extend(r.offset for r in batch)
            assert consumer.position(TP) == (offsets[-1] + 1 if offsets else 0)
    assert max(sizes) == 10 and offsets == list(range(25))


def test_long_poll_returns_when_data_arrives(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_consumer(cluster, fetch_max_wait_ms=5000) as consumer:
        consumer.assign([TP])
        assert consumer.position(TP) == 0
        threading.Timer(0.3, lambda: write(cluster, "t", 0, 1)).start()
        start = time.monotonic()
        records = consumer.poll(5000)
        elapsed = time.monotonic() - start
    assert [r.offset for r in records] == [0]
    assert 0.2 < elapsed < 3


def test_poll_timeout_with_no_data(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        start = time.monotonic()
        assert consumer.poll(300) == []
        assert 0.25 < time.monotonic() - start < 2


@pytest.mark.parametrize("codec", list(CompressionType))
def test_compressed_batches(cluster, codec: CompressionType) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 20, codec=codec)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 5)
        assert [r.value for r in poll_until(consumer, 15)] == [b"v%d" % i for i in range(5, 20)]


def test_corrupt_batch_is_reported(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 2)
    p = cluster.partition("t")
    base, raw = p.batches[0]
    p.batches[0] = (base, raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        with pytest.raises(kerr.CorruptMessageError):
            for _ in range(20):
                consumer.poll(100)
    with make_consumer(cluster, auto_offset_reset="earliest", check_crcs=False) as consumer:
        consumer.assign([TP])
        assert len(poll_until(consumer, 2)) == 2


def test_read_committed_drops_aborted_transactions_and_control_batches(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 2)  # offsets 0-1: plain
    write(
        cluster, "t", 0, 2, start=2, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )  # 2-3: aborted below
    write(
        cluster, "t", 0, 2, start=4, producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True
    )  # 4-5: committed below
    cluster.append(
        "t",
        0,
        build_control_batch(
            ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp_ms=TS
        ),
    )  # 6
    cluster.append(
        "t",
        0,
        build_control_batch(
            ControlRecordType.COMMIT, producer_id=8, producer_epoch=0, coordinator_epoch=0, timestamp_ms=TS
        ),
    )  # 7
    write(cluster, "t", 0, 1, start=8)  # 8
    cluster.partition("t").aborted = [(7, 2)]
    for level, expected in ((1, [0, 1, 4, 5, 8]), (0, [0, 1, 2, 3, 4, 5, 8])):
        with make_consumer(cluster, auto_offset_reset="earliest", isolation_level=level) as consumer:
            consumer.assign([TP])
            records = poll_until(consumer, len(expected))
            assert [r.offset for r in records] == expected
            assert consumer.position(TP) == 9


def test_pause_and_resume(cluster) -> None:
    cluster.create_topic("t", 2)
    write(cluster, "t", 0, 2)
    write(cluster, "t", 1, 2)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        consumer.pause(("t", 1))
        assert consumer.paused() == {("t", 1)}
        records = poll_until(consumer, 2, timeout_s=1)
        assert {r.partition for r in records} == {0}
        assert consumer.poll(200) == []
        consumer.resume(("t", 1))
        assert {r.partition for r in poll_until(consumer, 2)} == {1}


def test_assign_keeps_positions_and_unassigned_partitions_are_refused(cluster) -> None:
    cluster.create_topic("t", 2)
    write(cluster, "t", 0, 3)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        poll_until(consumer, 3)
        consumer.assign([("t", 0), ("t", 1)])
        assert consumer.assignment() == {("t", 0), ("t", 1)}
        assert consumer.position(("t", 0)) == 3
        consumer.assign([])
        assert consumer.poll(50) == []
        with pytest.raises(ValueError):
            consumer.position(("t", 0))


def test_deserializers(cluster) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 1)
    with make_consumer(
        cluster,
        auto_offset_reset="earliest",
        key_deserializer=lambda b: b.decode(),
        value_deserializer=lambda b: b.decode().upper(),
    ) as consumer:
        consumer.assign([TP])
        (r,) = poll_until(consumer, 1)
    assert (r.key, r.value) == ("k0", "V0")


def test_unknown_partition_lookups_time_out(cluster) -> None:
    # 2 s, not 300 ms: the timeout must leave room for at least one Metadata answer on a loaded
    # 2-core machine, or the last error is DEADLINE_EXCEEDED instead of the one under test
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        with pytest.raises(kerr.RequestTimedOutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            consumer.beginning_offsets([("nope", 0)], timeout_ms=2000)


def test_lookup_timeout_keeps_the_error_that_explains_it(cluster) -> None:
    # Slow Metadata answers: the last refresh before the deadline is cut short by the lookup's own
    # deadline. Its DEADLINE_EXCEEDED says nothing about the partition and must not hide the
    # UNKNOWN_TOPIC_OR_PARTITION the earlier, complete answers gave (CI run of 10b8617 hit this).
    cluster.metadata_delay = 0.3
    with make_consumer(cluster, auto_offset_reset="earliest", retry_backoff_ms=50) as consumer:
        with pytest.raises(kerr.RequestTimedOutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            consumer.beginning_offsets([("nope", 0)], timeout_ms=1000)


def test_closed_consumer_refuses_poll(cluster) -> None:
    consumer = make_consumer(cluster)
    consumer.close()
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.poll(0)


def test_consumer_config_from_properties() -> None:
    config, unknown = consumer_config_from_properties(
        {"fetch.min.bytes": "10", "auto.offset.reset": "earliest", "x.y": "z", "client.id": "c", "check.crcs": "false"}
    )
    assert config == {"fetch_min_bytes": 10, "auto_offset_reset": "earliest", "check_crcs": False, "client_id": "c"}
    assert unknown == ["x.y"]
    with pytest.raises(ValueError):
        Consumer("127.0.0.1:1", auto_offset_reset="smallest")
    with pytest.raises(ValueError):
        Consumer("127.0.0.1:1", isolation_level="serializable")


def test_list_offsets_follows_a_moved_leader(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    write(cluster, "t", 0, 4)
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        assert consumer.position(TP) == 4
        cluster.move_leader("t", 0, 2)
        consumer.seek_to_beginning(TP)
        assert consumer.position(TP) == 0
        assert consumer.end_offsets([TP]) == {TP: 4}
    assert cluster.count("ListOffsets", 2) >= 2


def test_settings_of_missing_features_are_refused_not_ignored() -> None:
    """Issue 12: a setting of a missing feature is refused with an error naming it; the values that
    keep Kafka's meaning without it pass. (Consumer groups exist since issue 14: group.id with auto
    commit is accepted; read_committed since issue 15.)"""
    from kraftlog.client import UnsupportedConfigError

    refused = [
        {"security.protocol": "SSL"},
        {"value.deserializer": "org.apache.kafka.common.serialization.IntegerDeserializer"},
    ]
    for props in refused:
        with pytest.raises(UnsupportedConfigError) as info:
            config, _unknown = consumer_config_from_properties(props)
            Consumer("127.0.0.1:1", **config)
        assert any(key in str(info.value) for key in props), info.value
        assert "not supported yet" in str(info.value)
    committed = Consumer("127.0.0.1:1", isolation_level="read_committed")
    assert committed.isolation_level == 1
    committed.close()
    grouped = Consumer("127.0.0.1:1", group_id="g")
    assert grouped.enable_auto_commit  # Kafka's default with a group
    grouped.close()
    with pytest.raises(ValueError, match="without a group.id"):
        Consumer("127.0.0.1:1", enable_auto_commit=True)
    accepted = {
        "isolation.level": "read_uncommitted",
        "group.id": "g",
        "enable.auto.commit": "false",
        "security.protocol": "PLAINTEXT",
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    config, unknown = consumer_config_from_properties(accepted)
    assert not unknown
    Consumer("127.0.0.1:1", **config).close()


# ------------------------------------------------------------------------------ KIP-320


def _consume_ten_then_unclean_election(cluster, consumer) -> None:
    """Broker 1 leads epoch 0 with offsets 0-9, all consumed; then broker 2 is elected uncleanly
    with only 0-5 and writes six new records in epoch 1 (offsets 6-11)."""
    cluster.create_topic("t", 1, leaders=[1])
    write(cluster, "t", 0, 6)
    write(cluster, "t", 0, 4, start=6)
    consumer.assign([TP])
    consumer.seek(TP, 0)
    assert [r.offset for r in poll_until(consumer, 10)] == list(range(10))
    assert consumer.position(TP) == 10
    with cluster.cond:
        cluster.partition("t").truncate(6)
    cluster.move_leader("t", 0, 2)
    b = RecordBatchBuilder()
    for i in range(6):
        b.append(TS, b"k", b"new%d" % i)
    cluster.append("t", 0, b.build())


def test_truncation_with_no_reset_policy_raises_log_truncation_error(cluster) -> None:
    """KIP-320: after the leader change the consumer asks the new leader where epoch 0 ends (6),
    finds its position (10) past it and raises, naming the divergent offset, instead of fetching
    on at 10 and silently skipping the new records 6-9."""
    from kraftlog.client import LogTruncationError

    with make_consumer(cluster, auto_offset_reset="none") as consumer:
        _consume_ten_then_unclean_election(cluster, consumer)
        deadline = time.monotonic() + 10
        with pytest.raises(LogTruncationError) as info:
            while time.monotonic() < deadline:
                assert consumer.poll(200) == []
        err = info.value
        assert isinstance(err, kerr.OffsetOutOfRangeError)
        assert err.partitions == {TP: 10} and err.divergent_offsets == {TP: 6}
        with pytest.raises(LogTruncationError):  # until the application moves the position
            consumer.poll(100)
        consumer.seek(TP, err.divergent_offsets[TP])
        assert [r.value for r in poll_until(consumer, 6)] == [b"new%d" % i for i in range(6)]
    assert cluster.count("OffsetForLeaderEpoch", 2) >= 1


def test_truncation_with_a_reset_policy_resumes_at_the_divergent_offset(cluster) -> None:
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        _consume_ten_then_unclean_election(cluster, consumer)
        records = poll_until(consumer, 6)
        assert [(r.offset, r.value) for r in records] == [(6 + i, b"new%d" % i) for i in range(6)]
        assert consumer.position(TP) == 12


def test_leader_change_without_truncation_validates_and_goes_on(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    write(cluster, "t", 0, 4)
    with make_consumer(cluster, auto_offset_reset="none") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        assert len(poll_until(consumer, 4)) == 4
        cluster.move_leader("t", 0, 2)  # a clean election: the new leader has everything
        write(cluster, "t", 0, 2, start=4)
        assert [r.offset for r in poll_until(consumer, 2)] == [4, 5]
    assert cluster.count("OffsetForLeaderEpoch") >= 1


def test_positions_without_an_epoch_need_no_validation(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    write(cluster, "t", 0, 4)
    with make_consumer(cluster) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 2)
        cluster.move_leader("t", 0, 2)
        assert [r.offset for r in poll_until(consumer, 2)] == [2, 3]
    assert cluster.count("OffsetForLeaderEpoch") == 0


def test_validation_rule() -> None:
    from kraftlog.client.consumer._positions import ValidationAnswer, judge_validation

    assert judge_validation(10, 0, 10) == ValidationAnswer(True)
    assert judge_validation(10, 0, 12) == ValidationAnswer(True)
    assert judge_validation(10, 0, 6) == ValidationAnswer(False, 6, 0)
    assert judge_validation(10, -1, -1) == ValidationAnswer(False)  # the leader knows no such epoch
