"""The voter set's control records in the metadata log (issue 26): Kafka's VotersRecord and
KRaftVersionRecord round-trip through the entry codec, change nothing in the image (the tree and
the image's records leave them out), the Spark fold skips them the same way, and a controller's
snapshot starts with the last of each (`QuorumControlState`)."""

from __future__ import annotations

import msgpack
import pytest

from kraftlog.metadata_log import (
    CONTROL_RECORD_TYPE_IDS,
    KRaftVersionRecord,
    LogEntry,
    MetadataImage,
    MetadataRecordError,
    QuorumControlState,
    TopicRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    decode_entry,
    decode_record,
    encode_entry,
    encode_record,
    read_snapshot,
    write_snapshot,
)
from kraftlog.spark._decode import _fast_entry, _key_of_fields

VOTERS = VotersRecord(
    voters=(
        Voter(1, "AAAAAAAAAAAAAAAAAAAAAQ", (VoterEndpoint("CONTROLLER", "h1", 9093),)),
        Voter(4, "AAAAAAAAAAAAAAAAAAAABA", (VoterEndpoint("CONTROLLER", "h4", 9097),), 0, 1),
    )
)


def test_the_records_round_trip_and_read_as_kafkas() -> None:
    assert decode_record(encode_record(VOTERS)) == VOTERS
    assert decode_record(encode_record(KRaftVersionRecord(kraft_version=1))) == KRaftVersionRecord(1)
    wire = VOTERS.to_wire()
    assert wire["voters"][1] == {
        "voter_id": 4,
        "voter_directory_id": "AAAAAAAAAAAAAAAAAAAABA",
        "endpoints": [{"name": "CONTROLLER", "host": "h4", "port": 9097}],
        "kraft_version_min": 0,
        "kraft_version_max": 1,
    }
    assert {VotersRecord.TYPE_ID, KRaftVersionRecord.TYPE_ID} == CONTROL_RECORD_TYPE_IDS
    bad = {**wire, "voters": [{"voter_id": "one", "voter_directory_id": "x", "endpoints": []}]}
    with pytest.raises(MetadataRecordError):
        VotersRecord.from_wire(bad)


def test_replay_changes_nothing_but_the_offset() -> None:
    topic = TopicRecord("t", "AAAAAAAAAAAAAAAAAAAAAQ")
    without = MetadataImage.from_records([topic], 0, 1, 10)
    with_control = MetadataImage.from_records([topic, KRaftVersionRecord(1), VOTERS], 2, 1, 10)
    assert with_control.offset == 2
    assert list(with_control.to_records()) == list(without.to_records())  # the image leaves them out


def test_the_spark_fold_keys_them_to_nothing() -> None:
    entry = LogEntry(7, 3, 99, VOTERS)
    offset, epoch, ts, type_id, fields = _fast_entry(msgpack.unpackb(encode_entry(entry)))
    assert (offset, epoch, ts, type_id, fields) == (7, 3, 99, VotersRecord.TYPE_ID, ())
    assert _key_of_fields(type_id, fields) is None
    assert decode_entry(encode_entry(entry)) == entry


def test_the_control_state_keeps_the_last_voter_set_for_the_snapshot_header(tmp_path) -> None:
    """Issue 26: a snapshot carries the voter set as of its offset, so the log prefix holding the
    changes may go; a dynamic quorum's first voter set wrote no KRaftVersionRecord: it says 1."""
    assert QuorumControlState().to_records() == []  # a static quorum: no voter set in the log
    older = VotersRecord(voters=VOTERS.voters[:1])
    topic = TopicRecord("t", "AAAAAAAAAAAAAAAAAAAAAQ")
    state = QuorumControlState.of([older, topic, VOTERS])
    assert state.to_records() == [KRaftVersionRecord(1), VOTERS]
    upgraded = QuorumControlState.of([KRaftVersionRecord(1), older]).observe(topic)
    assert upgraded.to_records() == [KRaftVersionRecord(1), older]
    image = MetadataImage.from_records([topic], 5, 2, 10)
    path = write_snapshot(tmp_path, 5, 2, 10, [*state.to_records(), *image.to_records()])
    snap = read_snapshot(path)
    assert snap.records[:2] == (KRaftVersionRecord(1), VOTERS)
    assert QuorumControlState.of(snap.records) == QuorumControlState(KRaftVersionRecord(1), VOTERS)
    loaded = MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
    assert loaded.same_content(image)  # the image ignores them: the Spark rebuild stays equal
