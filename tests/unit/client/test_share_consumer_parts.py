"""The pure parts of `ShareConsumer` (issue 27): acknowledgement ranges, the implicit and explicit
modes' rules (Kafka's KafkaShareConsumer), decoding acquired records with their delivery counts
and GAPs, the share session's epoch wrap, and the share consumer's config keys."""

from __future__ import annotations

import pytest

from kraftlog.client import ShareConsumer, share_consumer_config_from_properties
from kraftlog.client._config import UnsupportedConfigError
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.share import AcknowledgeType, IllegalStateError
from kraftlog.client.share._acknowledgements import InFlightRecords, ack_ranges, parse_mode
from kraftlog.client.share._share_fetcher import decode_acquired, next_epoch
from kraftlog.common.records import ControlRecordType, build_batch, build_control_batch

A, R, J, N, G = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
    AcknowledgeType.GAP,
)
TP = TopicPartition("t", 0)


def test_ack_ranges_join_consecutive_offsets_of_one_type_in_offset_order() -> None:
    assert ack_ranges({5: A, 3: A, 4: A, 7: A, 8: R, 9: R, 10: A}) == [
        (3, 5, A),
        (7, 7, A),
        (8, 9, R),
        (10, 10, A),
    ]
    assert ack_ranges({}) == []


def test_implicit_mode_accepts_the_last_poll_at_the_next_and_refuses_acknowledge() -> None:
    f = InFlightRecords(explicit=False)
    f.delivered(1, TP, [10, 11, 12])
    with pytest.raises(IllegalStateError):
        f.acknowledge(TP, 10, R)
    assert f.before_poll() is False
    assert f.take() == {(1, TP): {10: A, 11: A, 12: A}}
    assert len(f) == 0 and f.take() == {}


def test_explicit_mode_refuses_a_poll_with_a_record_unacknowledged_and_a_second_acknowledgement() -> None:
    f = InFlightRecords(explicit=True)
    f.delivered(1, TP, [10, 11])
    f.acknowledge(TP, 10, R)
    with pytest.raises(IllegalStateError, match="explicit"):
        f.before_poll()
    with pytest.raises(IllegalStateError):
        f.acknowledge(TP, 10, A)  # already acknowledged
    with pytest.raises(IllegalStateError):
        f.acknowledge(TP, 99, A)  # never delivered
    with pytest.raises(ValueError):
        f.acknowledge(TP, 11, G)
    f.acknowledge(TP, 11, J)
    assert f.before_poll() is False
    f.accept_unacknowledged()  # explicit: changes nothing
    assert f.take() == {(1, TP): {10: R, 11: J}}


def test_renew_keeps_the_record_held_until_its_final_acknowledgement() -> None:
    f = InFlightRecords(explicit=True)
    f.delivered(2, TP, [5])
    f.acknowledge(TP, 5, N)
    assert f.before_poll() is True  # only renewed records held: this poll renews, acquires nothing
    assert f.take() == {(2, TP): {5: N}}
    assert len(f) == 1
    f.acknowledge(TP, 5, A)
    assert f.before_poll() is False
    assert f.take() == {(2, TP): {5: A}} and len(f) == 0


def test_gaps_go_with_the_next_acks_and_failed_acks_are_pending_again_per_node() -> None:
    f = InFlightRecords(explicit=False)
    other = TopicPartition("t", 1)
    f.delivered(1, TP, [1])
    f.delivered(2, other, [7])
    f.gaps(1, TP, [2, 3])
    f.accept_unacknowledged()
    assert f.nodes() == {1, 2}
    taken = f.take(1)
    assert taken == {(1, TP): {1: A, 2: G, 3: G}}
    assert f.nodes() == {2}
    f.restore(taken)
    assert f.take() == {(1, TP): {1: A, 2: G, 3: G}, (2, other): {7: A}}
    assert not f.has_pending()


def test_parse_mode_and_the_share_consumer_keys() -> None:
    assert parse_mode(" Explicit ") == "explicit"
    with pytest.raises(ValueError, match="share.acknowledgement.mode"):
        parse_mode("auto")
    kwargs, unknown = share_consumer_config_from_properties(
        {"group.id": "g", "share.acknowledgement.mode": "explicit", "max.poll.records": "7", "isolation.level": "x"}
    )
    assert kwargs == {"group_id": "g", "share_acknowledgement_mode": "explicit", "max_poll_records": 7}
    assert unknown == ["isolation.level"]  # a group config of share groups, not the consumer's
    with pytest.raises(UnsupportedConfigError):
        share_consumer_config_from_properties({"security.protocol": "SSL"})
    with pytest.raises(ValueError, match="share.acquire.mode"):
        ShareConsumer("127.0.0.1:1", group_id="g", share_acquire_mode="greedy")
    with pytest.raises(ValueError, match="group.id"):
        ShareConsumer("127.0.0.1:1", group_id="")


def test_decode_acquired_returns_only_acquired_records_with_their_counts_and_the_gaps() -> None:
    data = build_batch([(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")], timestamp_ms=1000, base_offset=10)
    data += build_control_batch(
        ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1, base_offset=13
    )
    data += build_batch([(None, b"v14")], timestamp_ms=1000, base_offset=14)
    records, gaps = decode_acquired(TP, data, [(11, 11, 3), (13, 14, 1)], value_deserializer=lambda v: v)
    assert [(r.offset, r.value, r.key, r.delivery_count) for r in records] == [
        (11, b"v1", b"k1", 3),
        (14, b"v14", None, 1),
    ]
    assert gaps == [13]  # the control record's offset: acknowledged as GAP
    assert decode_acquired(TP, data, []) == ([], [])


def test_share_session_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(2**31 - 1) == 1
