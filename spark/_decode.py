"""Executor side, first stage: metadata log segments and snapshots decoded into (entity key, record
fields) pairs, routed so that every entity's records meet in one reduce partition.
"""

from __future__ import annotations

import dataclasses
import gc
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import structlog
from crc32c import crc32c

from kraftlog.common import crc_frame_problem
from kraftlog.metadata_log import (
    CONTROL_RECORD_TYPE_IDS,
    RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
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
    decode_entry,
)
from kraftlog.metadata_log.image import MetadataReplayError
from kraftlog.metadata_log.log_files import (
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    frame_length_problem,
    iter_frames,
    parse_segment_file_name,
    parse_snapshot_frames,
    torn_frame_header,
)

_log = structlog.get_logger(__name__)


_SUMMARY = "~"


_FLUSH_EVERY = 200_000  # values held per map task before they are handed to the shuffle


_BYTES_PER_REDUCE_PARTITION = 128 << 20


# the fields the fold reads of each record type; control records (the Raft voter set and
# kraft.version, KIP-853) fold into nothing, so none of theirs: the fast and the slow decode agree
_FIELDS: dict[int, tuple[str, ...]] = {
    tid: () if tid in CONTROL_RECORD_TYPE_IDS else tuple(f.name for f in dataclasses.fields(cls))
    for tid, cls in RECORD_TYPES.items()
}


_REGISTER, _UNREGISTER = RegisterBrokerRecord.TYPE_ID, UnregisterBrokerRecord.TYPE_ID


_FENCE, _UNFENCE = FenceBrokerRecord.TYPE_ID, UnfenceBrokerRecord.TYPE_ID


_REG_CHANGE = BrokerRegistrationChangeRecord.TYPE_ID


_TOPIC, _REMOVE_TOPIC = TopicRecord.TYPE_ID, RemoveTopicRecord.TYPE_ID


_PARTITION, _PARTITION_CHANGE = PartitionRecord.TYPE_ID, PartitionChangeRecord.TYPE_ID


_CONFIG, _PRODUCER_IDS = ConfigRecord.TYPE_ID, ProducerIdsRecord.TYPE_ID


_FEATURE, _NOOP = FeatureLevelRecord.TYPE_ID, NoOpRecord.TYPE_ID


#: what only moves the offset/epoch here: a NoOpRecord, the voter set's control records (issue 26)
_NO_KEY = frozenset({_NOOP, *CONTROL_RECORD_TYPE_IDS})


_ACL, _REMOVE_ACL = AccessControlEntryRecord.TYPE_ID, RemoveAccessControlEntryRecord.TYPE_ID


_SCRAM, _REMOVE_SCRAM = UserScramCredentialRecord.TYPE_ID, RemoveUserScramCredentialRecord.TYPE_ID


_QUOTA = ClientQuotaRecord.TYPE_ID


_BROKER_TYPES = frozenset((_REGISTER, _UNREGISTER, _FENCE, _UNFENCE, _REG_CHANGE))


_KNOWN_TYPES = frozenset(
    (
        *_BROKER_TYPES,
        _TOPIC,
        _REMOVE_TOPIC,
        _PARTITION,
        _PARTITION_CHANGE,
        _CONFIG,
        _PRODUCER_IDS,
        _FEATURE,
        *_NO_KEY,
        _ACL,
        _REMOVE_ACL,
        _SCRAM,
        _REMOVE_SCRAM,
        _QUOTA,
    )
)


_MISSING = dataclasses.MISSING


# What `PartitionRegistration.merge` reads of a PartitionChangeRecord (its attributes), as a plain
# named tuple: building the frozen dataclass for every change costs more than the merge itself.
class _Change(NamedTuple):
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None
    leader: int
    replicas: tuple[int, ...] | None
    removing_replicas: tuple[int, ...] | None
    adding_replicas: tuple[int, ...] | None
    leader_recovery_state: int
    eligible_leader_replicas: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None


assert _Change._fields == tuple(f.name for f in dataclasses.fields(PartitionChangeRecord)), "out of step"


# type id -> (supported version, ((field name, default or MISSING), ...)): what from_wire reads
_SPECS: dict[int, tuple[int, tuple[tuple[str, Any], ...]]] = {
    tid: (cls.VERSION, tuple((f.name, f.default) for f in dataclasses.fields(cls))) for tid, cls in RECORD_TYPES.items()
}


assert all(
    f.default_factory is dataclasses.MISSING for cls in RECORD_TYPES.values() for f in dataclasses.fields(cls)
), "update _SPECS"


# Sort keys of snapshot records: the order of MetadataImage.to_records.
_S_FEATURE, _S_BROKER, _S_PRODUCER_IDS, _S_TOPIC, _S_CONFIG, _S_ACL, _S_SCRAM, _S_QUOTA = 0, 1, 2, 3, 4, 5, 6, 7


def _key_part(value: Any) -> Any:
    """A record field as part of a shuffle key: strings and integers as they are, anything else
    (a malformed field of a bad record, possibly unhashable) as its repr, so the record still
    reaches its fold, which refuses it with the replay's own error."""
    return value if isinstance(value, (str, int)) else repr(value)


def _stable_hash(key: tuple[Any, ...]) -> int:
    """A hash of a key that is the same in every process (``hash(str)`` is salted per process)."""
    h = 0
    for part in key:
        if isinstance(part, str):
            v = zlib.crc32(part.encode("utf-8", "surrogatepass"))
        elif isinstance(part, int):
            v = part & 0xFFFFFFFF
        else:
            v = zlib.crc32(repr(part).encode())
        h = (h * 1_000_003 + v) & 0xFFFFFFFFFFFF
    return h


def _route(topic_partitions: int, entity_partitions: int, key: tuple[Any, ...]) -> int:
    """Shuffle partition of a key: 0 for file summaries, 1..M topic ids, M+1.. other entities."""
    kind = key[0]
    if kind == _SUMMARY:
        return 0
    if kind == "t":
        return 1 + _stable_hash(key[1:]) % topic_partitions
    return 1 + topic_partitions + _stable_hash(key) % entity_partitions


def _key_of(type_id: int, rec: Any) -> tuple[Any, ...] | None:
    if type_id == _PARTITION_CHANGE or type_id == _PARTITION:
        return ("p", rec.topic_id, rec.partition_id)
    if type_id in _BROKER_TYPES:
        return ("b", rec.broker_id)
    if type_id == _CONFIG:
        return ("c", rec.resource_type, rec.resource_name)
    if type_id == _TOPIC or type_id == _REMOVE_TOPIC:
        return ("t", rec.topic_id)
    if type_id == _PRODUCER_IDS:
        return ("i",)
    if type_id == _FEATURE:
        return ("f", rec.name)
    if type_id == _ACL or type_id == _REMOVE_ACL:
        return ("a", _key_part(rec.id))
    if type_id == _SCRAM or type_id == _REMOVE_SCRAM:
        return ("s", _key_part(rec.mechanism), _key_part(rec.name))
    if type_id == _QUOTA:
        return ("q", _key_part(rec.entity))
    if type_id in _NO_KEY:
        return None
    raise MetadataReplayError(f"cannot replay unknown record type {type(rec).__name__}")


def _fields(type_id: int, rec: Any) -> tuple[Any, ...]:
    return tuple([getattr(rec, name) for name in _FIELDS[type_id]])


def _err(position: int | None, cls: str, message: str, **extra: Any) -> tuple[Any, ...]:
    """An error found in a task, raised by the driver if it lies at or before the cut."""
    return (position if position is not None else -(1 << 62), cls, message, extra)


def _emit(groups: dict[tuple[Any, ...], list[Any]]) -> Iterator[tuple[tuple[Any, ...], list[Any]]]:
    yield from groups.items()
    groups.clear()


def _decode_partition(params: dict[str, Any], items: Iterable[tuple[str, str, bytes]]) -> Iterator[tuple[Any, Any]]:
    """Map task: decode the files of one input partition into keyed value lists plus summaries."""
    for kind, uri, data in items:
        if kind == "S":
            yield from _decode_snapshot(uri, data)
        else:
            yield from _decode_segment(params, uri, data)


def _decode_snapshot(uri: str, data: bytes) -> Iterator[tuple[Any, Any]]:
    """The base snapshot, validated like `read_snapshot`; its records get positions -n..-1."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    path = Path(name)
    summary: dict[str, Any] = {"kind": "snapshot", "file": uri, "size_bytes": len(data)}
    try:
        snapshot = parse_snapshot_frames(iter_frames(data), uri, path)
    except MetadataRecordError as err:  # MetadataLogCorruptError included
        summary["errors"] = [_err(None, type(err).__name__, str(err))]
        yield (_SUMMARY, uri), summary
        return
    records = list(snapshot.records)
    summary.update(
        offset=snapshot.offset,
        epoch=snapshot.epoch,
        timestamp_ms=snapshot.timestamp_ms,
        record_count=len(records),
        errors=[],
    )
    groups: dict[tuple[Any, ...], list[Any]] = {}
    n = len(records)
    errors = summary["errors"]
    for i, rec in enumerate(records):
        type_id = rec.TYPE_ID
        try:
            key = _key_of(type_id, rec)
        except MetadataReplayError as err:
            errors.append(_err(i - n, "MetadataReplayError", f"{uri} record {i}: {err}"))
            break
        if key is not None:
            groups.setdefault(key, []).append((i - n, type_id, _fields(type_id, rec)))
    yield (_SUMMARY, uri), summary
    yield from _emit(groups)


def _fast_entry(d: Any) -> tuple[int, int, int, int, tuple[Any, ...]] | None:
    """``(offset, epoch, timestamp_ms, type_id, fields)`` of a decoded entry map, equal to what
    `decode_entry` + the record's attributes give, without building the dataclasses; None when the
    map is anything but a well-formed entry (the caller then runs `decode_entry` for its error)."""
    if type(d) is not dict:
        return None
    try:
        record = d["record"]
        offset, epoch, timestamp_ms = int(d["offset"]), int(d["epoch"]), int(d["timestamp_ms"])
        type_id = record["type"]
        spec = _SPECS[type_id]
        if record.get("version", 0) > spec[0]:
            return None
    except (KeyError, TypeError, ValueError):
        return None
    if type_id in CONTROL_RECORD_TYPE_IDS:  # folded into nothing: its fields are never read
        return offset, epoch, timestamp_ms, type_id, ()
    if type_id == _QUOTA:
        quota = _fast_quota(record)
        return None if quota is None else (offset, epoch, timestamp_ms, type_id, quota)
    values = []
    get = record.get
    for name, default in spec[1]:
        value = get(name, default)  # a required field's default is _MISSING
        if type(value) is list:
            value = tuple(
                [BrokerEndpoint.from_wire(v) if type(v) is dict else tuple(v) if type(v) is list else v for v in value]
            )
        elif value is _MISSING:
            return None
        values.append(value)
    return offset, epoch, timestamp_ms, type_id, tuple(values)


def _fast_quota(record: dict[str, Any]) -> tuple[Any, ...] | None:
    """A ClientQuotaRecord's fields as `ClientQuotaRecord.from_wire` reads them (its entity, a list
    of ``{entity_type, entity_name}`` maps, as sorted pairs); None for anything else."""
    entity = record.get("entity")
    if type(entity) is not list or "key" not in record:
        return None
    pairs = []
    for e in entity:
        if type(e) is not dict or "entity_type" not in e:
            return None
        pairs.append((e["entity_type"], e.get("entity_name")))
    try:
        pairs.sort()
    except TypeError:
        return None
    return (tuple(pairs), record["key"], record.get("value", 0.0), bool(record.get("remove", False)))


def _slow_entry(payload: Any) -> tuple[int, int, int, int, tuple[Any, ...]]:
    entry = decode_entry(bytes(payload))  # raises MetadataRecordError exactly like read_segment
    rec = entry.record
    return entry.offset, entry.epoch, entry.timestamp_ms, rec.TYPE_ID, _fields(rec.TYPE_ID, rec)


def _key_of_fields(type_id: int, f: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """`_key_of` from a fields tuple (field order of the record dataclasses)."""
    if type_id == _PARTITION_CHANGE or type_id == _PARTITION:
        return ("p", f[1], f[0])  # partition_id, topic_id are the first two fields
    if type_id in _BROKER_TYPES:
        return ("b", f[0])
    if type_id == _CONFIG:
        return ("c", f[0], f[1])
    if type_id == _TOPIC:
        return ("t", f[1])
    if type_id == _REMOVE_TOPIC:
        return ("t", f[0])
    if type_id == _PRODUCER_IDS:
        return ("i",)
    if type_id == _FEATURE:
        return ("f", f[0])
    if type_id == _ACL or type_id == _REMOVE_ACL:
        return ("a", _key_part(f[0]))  # id is the first field of both
    if type_id == _SCRAM or type_id == _REMOVE_SCRAM:
        return ("s", _key_part(f[1]), _key_part(f[0]))  # name, mechanism are the first two of both
    if type_id == _QUOTA:
        return ("q", _key_part(f[0]))  # the entity, a tuple of (type, name) pairs
    return None  # NoOpRecord, the voter set's control records


def _decode_segment(params: dict[str, Any], uri: str, data: bytes) -> Iterator[tuple[Any, Any]]:
    """One segment, walked like `read_segment` (same framing, CRC, density and decoding rules);
    entries at or before ``skip_through`` (the base snapshot's offset) are checked but not
    emitted, and the walk stops at the first entry past the cut."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    base = parse_segment_file_name(name)
    skip_through: int = params["skip_through"]
    as_of_offset: int | None = params["as_of_offset"]
    as_of_time: int | None = params["as_of_time_ms"]
    cut_offset = as_of_offset if as_of_offset is not None else (1 << 63)
    cut_time = as_of_time if as_of_time is not None else (1 << 63)
    errors: list[Any] = []
    groups: dict[tuple[Any, ...], list[Any]] = {}
    held = count = replayed = 0
    first_offset: int | None = None
    last_offset: int | None = None
    stop: str | None = None
    torn: tuple[int, str] | None = None
    first_replayed: tuple[int, int] | None = None
    epoch_drop: tuple[int, int, int] | None = None
    first_after_time: int | None = None
    before_time: tuple[int, int, int] | None = None
    at_offset: tuple[int, int, int] | None = None
    expected = base
    prev: tuple[int, int, int] | None = None  # (offset, epoch, ts) of the previous replayed entry
    view = memoryview(data)
    end = len(view)
    pos = 0
    unpack_header = FRAME_HEADER.unpack_from
    unpackb = msgpack.unpackb
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small tuples: the cyclic GC would rescan them over and over
    try:
        while True:
            # ---- one frame, with exactly FrameIterator's rules and reasons
            if pos == end:
                break
            if end - pos < FRAME_HEADER_SIZE:
                torn = (pos, torn_frame_header(pos, end))
                break
            length, crc = unpack_header(view, pos)
            problem = frame_length_problem(pos, end, length)
            if problem is not None:
                torn = (pos, problem)
                break
            payload = view[pos + FRAME_HEADER_SIZE : pos + FRAME_HEADER_SIZE + length]
            if crc32c(payload) != crc:
                torn = (pos, crc_frame_problem(payload, crc) or "crc mismatch")
                break
            # ---- the entry
            try:
                decoded = _fast_entry(unpackb(payload, raw=False, strict_map_key=False))
            except Exception:  # msgpack raises several unrelated types
                decoded = None
            if decoded is None:
                try:
                    decoded = _slow_entry(payload)
                except MetadataRecordError as err:
                    errors.append(_err(expected, "MetadataRecordError", f"{uri} position {pos}: {err}"))
                    stop = "decode"
                    break
            offset, epoch, ts, type_id, fields = decoded
            if expected is not None and offset != expected:
                errors.append(
                    _err(
                        expected,
                        "MetadataLogGapError",
                        f"{uri} position {pos}: offset {offset} where {expected} was expected",
                        expected_offset=expected,
                        found_offset=offset,
                    )
                )
                stop = "gap"
                break
            expected = offset + 1
            pos += FRAME_HEADER_SIZE + length
            if first_offset is None:
                first_offset = offset
            count += 1
            if offset <= skip_through:
                last_offset = offset
                continue
            if offset > cut_offset:
                stop = "cut"
                break
            if ts > cut_time:
                first_after_time, before_time, stop = offset, prev, "cut"
                break
            last_offset = offset
            if prev is None:
                first_replayed = (offset, epoch)
            elif epoch < prev[1] and epoch_drop is None:
                epoch_drop = (offset, epoch, prev[1])
            prev = (offset, epoch, ts)
            if offset == as_of_offset:
                at_offset = prev
            replayed += 1
            if type_id not in _KNOWN_TYPES:
                errors.append(
                    _err(
                        offset,
                        "MetadataReplayError",
                        f"cannot replay unknown record type {RECORD_TYPES[type_id].__name__}",
                    )
                )
                stop = "decode"
                break
            key = _key_of_fields(type_id, fields)
            if key is None:
                continue
            values = groups.get(key)
            if values is None:
                groups[key] = values = []
            values.append((offset, type_id, fields))
            held += 1
            if held >= _FLUSH_EVERY:
                held = 0
                yield from _emit(groups)
    finally:
        view.release()
        if gc_was_enabled:
            gc.enable()
    summary = {
        "kind": "segment",
        "file": uri,
        "base_offset": base,
        "size_bytes": end,
        "first_offset": first_offset,
        "last_offset": last_offset,
        "count": count,
        "replayed": replayed,
        "torn": torn,
        "errors": errors,
        "stop": stop,
        "first_replayed": first_replayed,
        "epoch_drop": epoch_drop,
        "first_after_time": first_after_time,
        "before_time": before_time,
        "at_offset": at_offset,
        "last_entry": prev,
        "next_offset": expected,
    }
    yield (_SUMMARY, uri), summary
    yield from _emit(groups)


def _tag_segment(item: tuple[str, bytes]) -> tuple[str, str, bytes]:
    return "L", item[0], item[1]


def _tag_snapshot(item: tuple[str, bytes]) -> tuple[str, str, bytes]:
    return "S", item[0], item[1]
