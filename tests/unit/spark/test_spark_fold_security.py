"""The Spark snapshot job's decode and fold stages (`spark._decode`, `spark._fold`) on ACL and SCRAM
records, run in this process without Spark: the shuffle is simulated with the job's own routing, and
the snapshot payloads must be byte-identical to what an in-process replay writes."""

from __future__ import annotations

import heapq
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    ConfigRecord,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataLogWriter,
    MetadataRecord,
    MetadataReplayError,
    NoOpRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
    encode_record,
    list_segments,
    write_snapshot,
)
from kraftlog.spark._decode import _decode_partition, _route
from kraftlog.spark._fold import _fold_entities, _fold_topics

TOPIC_PARTS, ENTITY_PARTS = 2, 3


def _acl(acl_id: str, name: str, permission: int = 3) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, 2, name, 3, "User:alice", "*", 3, permission)


def _scram(user: str, mechanism: int, tag: bytes) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, mechanism, b"salt" + tag, b"\x00stored" + tag, b"\xffserver" + tag, 4096)


def _records() -> list[MetadataRecord]:
    return [
        NoOpRecord(),
        TopicRecord("orders", "id-orders"),
        ConfigRecord(2, "orders", "retention.ms", "1000"),
        _acl("acl-3", "orders"),
        _acl("acl-1", "payments", permission=2),
        _scram("alice", 1, b"a1"),
        _scram("bob", 2, b"b1"),
        _acl("acl-2", "ord"),
        RemoveAccessControlEntryRecord("acl-1"),
        _scram("alice", 1, b"a2"),  # replaces
        _scram("alice", 2, b"a3"),
        RemoveUserScramCredentialRecord("bob", 2),
        _acl("acl-1", "payments-again"),  # an id removed before may come back
        _scram("bob", 1, b"b2"),
    ]


def _write_log(directory: Path, records: list[MetadataRecord], start: int = 0) -> list[LogEntry]:
    entries = [LogEntry(start + i, 1, 1_700_000_000_000 + i, r) for i, r in enumerate(records)]
    with MetadataLogWriter(directory, segment_bytes=300, fsync=False) as w:
        w.append(entries)
    return entries


def _replay(image: MetadataImage, entries: list[LogEntry]) -> MetadataImage:
    delta = MetadataDelta(image)
    for e in entries:
        delta.replay(e)
    return delta.apply()


def _spark_fold(
    directory: Path, cut: int, skip_through: int = -1, snapshot: Path | None = None
) -> tuple[list[bytes], list[Any]]:
    """What `rebuild_snapshot` computes, minus Spark: decode, route, fold topics, fold entities,
    merge. Returns the snapshot payloads and the errors at or before the cut."""
    items: list[tuple[str, str, bytes]] = [("L", str(s.path), s.path.read_bytes()) for s in list_segments(directory)]
    if snapshot is not None:
        items.append(("S", str(snapshot), snapshot.read_bytes()))
    params = {"skip_through": skip_through, "as_of_offset": None, "as_of_time_ms": None}
    shuffled: dict[int, list[tuple[Any, Any]]] = {}
    for key, value in _decode_partition(params, items):
        shuffled.setdefault(_route(TOPIC_PARTS, ENTITY_PARTS, key), []).append((key, value))
    errors: list[Any] = []
    for summary in (v for _k, v in shuffled.get(0, [])):
        errors += summary["errors"]
    lifecycle: dict[str, Any] = {}
    runs = []
    for p in range(1, 1 + TOPIC_PARTS):
        for res in _fold_topics(cut, shuffled.get(p, [])):
            lifecycle.update(res["lifecycle"])
            errors += res["errors"]
            runs.append(res["records"])
    tombstones: dict[str, list[int]] = {}
    for incarnations in lifecycle.values():
        for _created, removed, name in incarnations:
            if removed is not None:
                tombstones.setdefault(name, []).append(removed)
    for p in range(1 + TOPIC_PARTS, 1 + TOPIC_PARTS + ENTITY_PARTS):
        for res in _fold_entities(
            cut, SimpleNamespace(value=lifecycle), SimpleNamespace(value=tombstones), shuffled.get(p, [])
        ):
            errors += res["errors"]
            runs.append(res["records"])
    payloads = [payload for _key, payload in heapq.merge(*runs, key=lambda item: item[0])]
    return payloads, [e for e in errors if e[0] <= cut]


def test_acl_and_scram_fold_equals_in_process_replay(tmp_path: Path) -> None:
    entries = _write_log(tmp_path, _records())
    assert len(list_segments(tmp_path)) > 2  # entities spread over several segments
    image = _replay(MetadataImage.EMPTY, entries)
    payloads, errors = _spark_fold(tmp_path, cut=entries[-1].offset)
    assert errors == []
    assert payloads == [encode_record(r) for r in image.to_records()]
    assert sorted(image.acls.acls) == ["acl-1", "acl-2", "acl-3"] and image.scram.users() == ["alice", "bob"]


def test_fold_from_a_base_snapshot(tmp_path: Path) -> None:
    log = tmp_path / "log"
    first = _write_log(log, _records()[:8])
    base = _replay(MetadataImage.EMPTY, first)
    snap = write_snapshot(tmp_path / "snap", base.offset, base.epoch, base.timestamp_ms, base.to_records())
    rest = [
        RemoveAccessControlEntryRecord("acl-3"),  # created before the snapshot
        RemoveUserScramCredentialRecord("alice", 1),
        _acl("acl-9", "zzz"),
    ]
    more = [LogEntry(base.offset + 1 + i, 2, 1_800_000_000_000 + i, r) for i, r in enumerate(rest)]
    with MetadataLogWriter(log, segment_bytes=300, fsync=False) as w:
        w.append(more)
    image = _replay(base, more)
    payloads, errors = _spark_fold(log, cut=more[-1].offset, skip_through=base.offset, snapshot=snap)
    assert errors == []
    assert payloads == [encode_record(r) for r in image.to_records()]
    assert "acl-3" not in image.acls.acls and image.scram.describe("alice") == []


def test_fold_reports_what_replay_refuses(tmp_path: Path) -> None:
    records = _records() + [RemoveAccessControlEntryRecord("acl-404")]
    entries = _write_log(tmp_path, records)
    bad = entries[-1]
    try:
        _replay(MetadataImage.EMPTY, entries)
    except MetadataReplayError as err:
        replay_message = str(err)
    else:  # pragma: no cover - the record must be refused
        raise AssertionError("replay accepted a removal of an unknown ACL")
    _payloads, errors = _spark_fold(tmp_path, cut=bad.offset)
    assert [(e[0], e[1], e[2]) for e in errors] == [(bad.offset, "MetadataReplayError", replay_message)]

    # an unknown SCRAM mechanism and a malformed (unhashable) id reach their folds too
    for bad_record in (
        UserScramCredentialRecord("carol", 7, b"s", b"k", b"v", 4096),
        RemoveAccessControlEntryRecord({"not": "an id"}),  # type: ignore[arg-type]
    ):
        d = tmp_path / f"bad-{bad_record.TYPE_ID}"
        bad_entries = _write_log(d, [_acl("acl-1", "x"), bad_record])
        delta = MetadataDelta(MetadataImage.EMPTY)
        delta.replay(bad_entries[0])
        try:
            delta.replay(bad_entries[1])
        except MetadataReplayError as err:
            replay_message = str(err)
        _payloads, errors = _spark_fold(d, cut=1)
        assert [(e[0], e[1], e[2]) for e in errors] == [(1, "MetadataReplayError", replay_message)], errors
