"""The Spark job that rebuilds a metadata snapshot from metadata log segments (DESIGN.md §3).

``rebuild_snapshot(spark, log_path, out)`` reads the segment files of a metadata log (any path Spark
reads: a local directory, ``hdfs://``, ``s3a://``), optionally on top of a base snapshot, folds every
record up to a cut (the end of the log, ``as_of_offset`` or ``as_of_time_ms``) and writes the snapshot
a controller would write at that offset: same header, same records, same order, byte for byte.

This module imports pyspark lazily (`require_pyspark` first: pyspark is the ``[spark]`` extra) and is
not imported by ``metadata_log/__init__.py``.

How the fold is distributed
===========================

1. **Decode** (map stage, ``sc.binaryFiles`` so any Hadoop filesystem works; one task per segment
   file, small files share one): each segment is walked frame by frame with `read_segment`'s rules
   (CRC, dense offsets from the file name, the same torn-tail reasons, strict record decoding: the
   fields are read without building the dataclasses, and anything unusual goes through
   `decode_entry` for its exact error). Every record is keyed by the entity it changes and grouped
   per key inside the task (a map-side combine, so the shuffle moves one list per key and file):

   ==============================================  ====================================
   record                                          key
   ==============================================  ====================================
   Register/Unregister/Fence/Unfence/RegChange     ``("b", broker_id)``
   TopicRecord, RemoveTopicRecord                  ``("t", topic_id)``
   PartitionRecord, PartitionChangeRecord          ``("p", topic_id, partition_id)``
   ConfigRecord                                    ``("c", resource_type, resource_name)``
   ProducerIdsRecord                               ``("i",)``
   FeatureLevelRecord                              ``("f", name)``
   NoOpRecord                                      none (it only moves the offset/epoch)
   ==============================================  ====================================

   A value is ``(position, type_id, fields)``: the log offset of the entry (base-snapshot records get
   negative positions in file order, so they sort before every log entry). Each file also yields one
   small summary (offset range, torn tail, decode errors, epochs, the entries around the cut), routed
   to shuffle partition 0.

2. **Cut** (driver, from the summaries only): the files must form one dense offset range starting
   right after the base snapshot (or at 0). Torn tails are reported with file and position; a gap
   (or an undecodable frame, or overlapping segments) before the cut refuses the job with an error
   naming the missing offsets. The cut's offset, epoch and timestamp become the snapshot header.

3. **Topics** (shuffle partitions ``1..M``): each topic id's creations and removals are folded in
   offset order into its incarnations ``[(created_at, removed_at or None, name)]``. The driver checks
   that no two incarnations of one name overlap (replay's "topic name is taken") and broadcasts the
   table: it is the join that carries ``RemoveTopicRecord``'s cross-entity effects.

4. **Entities** (shuffle partitions ``M+1..M+N``): each key's values are merged from every file,
   sorted by position, cut, and folded with the same classes and rules as `MetadataDelta.replay`
   (`PartitionRegistration.merge`/`validate`, `BrokerRegistration`, ...). A partition belongs to the
   incarnation of its topic id that was live when it was written and survives only if that
   incarnation is live at the cut (a removal drops it; a new id under the same name starts empty).
   Topic configs get the removals of their topic name as tombstones with their offsets, so a
   ``RemoveTopicRecord`` clears them exactly when replay would. Each partition of the job returns
   its snapshot records already encoded, sorted by the snapshot order of `MetadataImage.to_records`.

5. **Write** (driver): a k-way merge of the sorted record lists, framed by `write_snapshot_payloads`
   exactly like `write_snapshot`.

Steps 1-4 are three Spark jobs over one shuffle (``sc.runJob`` on partition 0, then ``1..M``, then
the rest), so the files are read and decoded once. The unit of decode parallelism is a segment file,
held in memory by its task (``metadata.log.segment.bytes``, 1 GiB by default, at most); the fold's
is a key, and a key's values from all files are held by one task.

Replay errors (stale broker epochs, changes to unknown partitions, invalid partition states,
producer ids going back, ...) are collected with their offsets; the job raises the one at the lowest
offset, which is the error in-process replay would have stopped at. Nothing is written then.
"""

from __future__ import annotations

import dataclasses
import gc
import heapq
import math
import os
import re
import struct
import time
import zlib
from collections import namedtuple
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import msgpack
import structlog
from crc32c import crc32c

from kraftlog.common import METADATA_PARTITION_DIR
from kraftlog.metadata_log._image import BrokerRegistration, MetadataReplayError, PartitionRegistration
from kraftlog.metadata_log._log_frames import (
    _FRAME_HEADER,
    FRAME_HEADER_SIZE,
    MetadataLogCorruptError,
    MetadataLogGapError,
    _crc_problem,
    _frame_problem,
    _torn_header,
    iter_frames,
)
from kraftlog.metadata_log._log_names import parse_segment_file_name, snapshot_file_name
from kraftlog.metadata_log._records import (
    RECORD_TYPES,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    FencingChange,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_entry,
    encode_record,
)
from kraftlog.metadata_log._snapshots import (
    _check_header,
    _snapshot_map,
    parse_snapshot_frames,
    write_snapshot_payloads,
)

__all__ = [
    "METADATA_PARTITION_DIR",
    "RebuildResult",
    "TornTail",
    "SnapshotRebuildError",
    "SparkNotInstalledError",
    "require_pyspark",
    "rebuild_snapshot",
    "spark_session",
    "parse_time_ms",
]


_log = structlog.get_logger(__name__)

_SUMMARY = "~"
_FLUSH_EVERY = 200_000  # values held per map task before they are handed to the shuffle
_BYTES_PER_REDUCE_PARTITION = 128 << 20
_FIELDS: dict[int, tuple[str, ...]] = {
    tid: tuple(f.name for f in dataclasses.fields(cls)) for tid, cls in RECORD_TYPES.items()
}

_REGISTER, _UNREGISTER = RegisterBrokerRecord.TYPE_ID, UnregisterBrokerRecord.TYPE_ID
_FENCE, _UNFENCE = FenceBrokerRecord.TYPE_ID, UnfenceBrokerRecord.TYPE_ID
_REG_CHANGE = BrokerRegistrationChangeRecord.TYPE_ID
_TOPIC, _REMOVE_TOPIC = TopicRecord.TYPE_ID, RemoveTopicRecord.TYPE_ID
_PARTITION, _PARTITION_CHANGE = PartitionRecord.TYPE_ID, PartitionChangeRecord.TYPE_ID
_CONFIG, _PRODUCER_IDS = ConfigRecord.TYPE_ID, ProducerIdsRecord.TYPE_ID
_FEATURE, _NOOP = FeatureLevelRecord.TYPE_ID, NoOpRecord.TYPE_ID
_BROKER_TYPES = frozenset((_REGISTER, _UNREGISTER, _FENCE, _UNFENCE, _REG_CHANGE))
_KNOWN_TYPES = frozenset(
    (*_BROKER_TYPES, _TOPIC, _REMOVE_TOPIC, _PARTITION, _PARTITION_CHANGE, _CONFIG, _PRODUCER_IDS, _FEATURE, _NOOP)
)
_MISSING = dataclasses.MISSING
# What `PartitionRegistration.merge` reads of a PartitionChangeRecord (its attributes), as a plain
# named tuple: building the frozen dataclass for every change costs more than the merge itself.
_Change = namedtuple("_Change", [f.name for f in dataclasses.fields(PartitionChangeRecord)])  # type: ignore[misc]
# type id -> (supported version, ((field name, default or MISSING), ...)): what from_wire reads
_SPECS: dict[int, tuple[int, tuple[tuple[str, Any], ...]]] = {
    tid: (cls.VERSION, tuple((f.name, f.default) for f in dataclasses.fields(cls))) for tid, cls in RECORD_TYPES.items()
}
assert all(
    f.default_factory is dataclasses.MISSING for cls in RECORD_TYPES.values() for f in dataclasses.fields(cls)
), "update _SPECS"

# Sort keys of snapshot records: the order of MetadataImage.to_records.
_S_FEATURE, _S_BROKER, _S_PRODUCER_IDS, _S_TOPIC, _S_CONFIG = 0, 1, 2, 3, 4

_ERROR_CLASSES: dict[str, type[Exception]] = {
    "MetadataRecordError": MetadataRecordError,
    "MetadataLogCorruptError": MetadataLogCorruptError,
    "MetadataReplayError": MetadataReplayError,
}


class SnapshotRebuildError(ValueError):
    """The job cannot produce a snapshot with these inputs (no entries before the cut, a cut past
    the end of the log, a base snapshot the log does not continue, ...)."""


SPARK_EXTRA = "pip install 'kraftlog[spark]'"


class SparkNotInstalledError(ImportError):
    """pyspark is not installed. Spark is the ``[spark]`` extra (a broker or controller host needs
    neither pyspark nor a JRE), so only the snapshot job needs it, and it names the install command."""


def require_pyspark() -> None:
    """Import pyspark or raise `SparkNotInstalledError`; call it before any ``from pyspark ...``."""
    try:
        import pyspark  # noqa: F401 - only whether it imports
    except ImportError as err:
        raise SparkNotInstalledError(
            f"the Spark snapshot job needs pyspark, which kraftlog installs as an extra: {SPARK_EXTRA} "
            f"(and a Java runtime); {err}"
        ) from err


@dataclass(frozen=True, slots=True)
class TornTail:
    """A segment whose valid part ends before its end: where and why."""

    file: str
    position: int
    reason: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class RebuildResult:
    path: Path
    offset: int
    epoch: int
    timestamp_ms: int
    record_count: int
    entries_replayed: int
    first_offset: int | None
    files_read: int
    torn_tails: tuple[TornTail, ...]
    base_snapshot: str | None
    cut_reason: str
    seconds: float
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds per job step


# ================================================================================ worker side
#
# Pure functions shipped to the executors by reference (this module must be importable there:
# `rebuild_snapshot` ships the metadata_log package with the job when the master is not local).


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
    if type_id == _NOOP:
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
    values = []
    get = record.get
    for name, default in spec[1]:
        value = get(name, default)  # a required field's default is _MISSING
        if type(value) is list:
            value = tuple([BrokerEndpoint.from_wire(v) if type(v) is dict else v for v in value])
        elif value is _MISSING:
            return None
        values.append(value)
    return offset, epoch, timestamp_ms, type_id, tuple(values)


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
    return None  # NoOpRecord


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
    unpack_header = _FRAME_HEADER.unpack_from
    unpackb = msgpack.unpackb
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small tuples: the cyclic GC would rescan them over and over
    try:
        while True:
            # ---- one frame, with exactly FrameIterator's rules and reasons
            if pos == end:
                break
            if end - pos < FRAME_HEADER_SIZE:
                torn = (pos, _torn_header(pos, end))
                break
            length, crc = unpack_header(view, pos)
            problem = _frame_problem(pos, end, length)
            if problem is not None:
                torn = (pos, problem)
                break
            payload = view[pos + FRAME_HEADER_SIZE : pos + FRAME_HEADER_SIZE + length]
            if crc32c(payload) != crc:
                torn = (pos, _crc_problem(payload, crc) or "crc mismatch")
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


def _merge_values(items: Iterable[tuple[Any, list[Any]]]) -> dict[Any, list[Any]]:
    """Reduce side: the value lists of each key from every file, in one offset-sorted list."""
    merged: dict[Any, list[Any]] = {}
    for key, values in items:
        have = merged.get(key)
        if have is None:
            merged[key] = values
        else:
            have.extend(values)
    return merged


def _by_position(value: tuple[Any, ...]) -> int:
    return value[0]


def _collect_summaries(items: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    for _key, summary in items:
        yield summary


# ---------------------------------------------------------------- topics


def _fold_topics(cut: int, items: Iterable[tuple[Any, list[Any]]]) -> Iterator[dict[str, Any]]:
    """Per topic id: its incarnations up to the cut, and the TopicRecord of the live one."""
    lifecycle: dict[str, list[list[Any]]] = {}
    out: list[tuple[tuple[Any, ...], bytes]] = []
    errors: list[tuple[Any, ...]] = []
    for key, values in _merge_values(items).items():
        topic_id = key[1]
        values.sort(key=_by_position)
        incarnations: list[list[Any]] = []
        live = False
        for position, type_id, fields in values:
            if position > cut:
                break
            if type_id == _TOPIC:
                name = fields[0]
                if live:
                    errors.append(_err(position, "MetadataReplayError", f"topic id {topic_id} already exists"))
                    break
                incarnations.append([position, None, name])
                live = True
            else:  # RemoveTopicRecord
                if not live:
                    errors.append(
                        _err(position, "MetadataReplayError", f"cannot remove topic: unknown topic id {topic_id}")
                    )
                    break
                incarnations[-1][1] = position
                live = False
        if incarnations:
            lifecycle[topic_id] = incarnations
        if live:
            name = incarnations[-1][2]
            out.append(((_S_TOPIC, name, -1), encode_record(TopicRecord(name=name, topic_id=topic_id))))
    out.sort(key=lambda item: item[0])
    yield {"lifecycle": lifecycle, "records": out, "errors": errors}


# ---------------------------------------------------------------- entities


def _fold_entities(
    cut: int, lifecycle_bc: Any, tombstones_bc: Any, items: Iterable[tuple[Any, list[Any]]]
) -> Iterator[dict[str, Any]]:
    lifecycle: dict[str, list[list[Any]]] = lifecycle_bc.value
    tombstones: dict[str, list[int]] = tombstones_bc.value
    out: list[tuple[tuple[Any, ...], bytes]] = []
    errors: list[tuple[Any, ...]] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        merged = _merge_values(items)
        for key, values in merged.items():
            values.sort(key=_by_position)
            kind = key[0]
            if kind == "p":
                _fold_partition(key, values, cut, lifecycle, out, errors)
            elif kind == "b":
                _fold_broker(key, values, cut, out, errors)
            elif kind == "c":
                _fold_config(key, values, cut, tombstones, out)
            elif kind == "i":
                _fold_producer_ids(values, cut, out, errors)
            elif kind == "f":
                _fold_feature(key, values, cut, out, errors)
            else:  # pragma: no cover - keys are made by _key_of
                raise AssertionError(f"unexpected key {key!r}")
        merged.clear()
    finally:
        if gc_was_enabled:
            gc.enable()
    out.sort(key=lambda item: item[0])
    yield {"records": out, "errors": errors}


def _incarnation(incarnations: list[list[Any]], position: int) -> int | None:
    """Index of the incarnation of a topic id that is live at ``position`` (None: not live)."""
    for i in range(len(incarnations) - 1, -1, -1):
        created, removed, _name = incarnations[i]
        if created < position:
            return i if removed is None or position < removed else None
    return None


def _fold_partition(
    key: tuple[Any, ...],
    values: list[Any],
    cut: int,
    lifecycle: dict[str, list[list[Any]]],
    out: list[Any],
    errors: list[Any],
) -> None:
    _, topic_id, partition_id = key
    incarnations = lifecycle.get(topic_id, [])
    state: PartitionRegistration | None = None
    current: int | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        which = _incarnation(incarnations, position)
        is_create = type_id == _PARTITION
        if which is None:
            what = "create" if is_create else "change"
            errors.append(
                _err(
                    position,
                    "MetadataReplayError",
                    f"cannot {what} partition {partition_id}: unknown topic id {topic_id}",
                )
            )
            return
        if which != current:
            state, current = None, which
        try:
            if is_create:
                if partition_id < 0:
                    raise MetadataReplayError(f"negative partition id {partition_id}")
                reg = PartitionRegistration.from_record(PartitionRecord(*fields))
            else:
                if state is None:
                    raise MetadataReplayError(f"cannot change unknown partition {partition_id} of topic {topic_id}")
                reg = state.merge(_Change._make(fields))
            reg.validate()
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
        state = reg
    if state is None or current != len(incarnations) - 1 or incarnations[-1][1] is not None:
        return  # never written, or its topic was removed (and maybe re-created under a new id)
    name = incarnations[-1][2]
    out.append(((_S_TOPIC, name, partition_id), encode_record(state.to_record(topic_id, partition_id))))


def _broker_at_epoch(
    reg: BrokerRegistration | None, broker_id: int, broker_epoch: int, what: str
) -> BrokerRegistration:
    if reg is None:
        raise MetadataReplayError(f"cannot {what} broker {broker_id}: it is not registered")
    if reg.broker_epoch != broker_epoch:
        raise MetadataReplayError(
            f"cannot {what} broker {broker_id} at epoch {broker_epoch}: its registration has epoch {reg.broker_epoch}"
        )
    return reg


def _fold_broker(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    broker_id = key[1]
    reg: BrokerRegistration | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        try:
            if type_id == _REGISTER:
                reg = BrokerRegistration.from_record(RegisterBrokerRecord(*fields))
            elif type_id == _UNREGISTER:
                _broker_at_epoch(reg, broker_id, fields[1], "unregister")
                reg = None
            elif type_id == _FENCE:
                reg = replace(_broker_at_epoch(reg, broker_id, fields[1], "fence"), fenced=True)
            elif type_id == _UNFENCE:
                reg = replace(_broker_at_epoch(reg, broker_id, fields[1], "unfence"), fenced=False)
            else:
                rec = BrokerRegistrationChangeRecord(*fields)
                current = _broker_at_epoch(reg, broker_id, rec.broker_epoch, "change")
                if rec.fenced == FencingChange.FENCE:
                    fenced = True
                elif rec.fenced == FencingChange.UNFENCE:
                    fenced = False
                elif rec.fenced == FencingChange.NONE:
                    fenced = current.fenced
                else:
                    raise MetadataReplayError(f"unknown fencing change {rec.fenced}")
                if rec.in_controlled_shutdown == 1:
                    shutting_down = True
                elif rec.in_controlled_shutdown == 0:
                    shutting_down = current.in_controlled_shutdown
                else:
                    raise MetadataReplayError(f"unknown controlled-shutdown change {rec.in_controlled_shutdown}")
                reg = replace(current, fenced=fenced, in_controlled_shutdown=shutting_down)
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if reg is not None:
        out.append(((_S_BROKER, broker_id), encode_record(reg.to_record())))


def _fold_config(
    key: tuple[Any, ...], values: list[Any], cut: int, tombstones: dict[str, list[int]], out: list[Any]
) -> None:
    _, resource_type, resource_name = key
    removals = tombstones.get(resource_name, ()) if resource_type == ConfigResourceType.TOPIC else ()
    current: dict[str, str] = {}
    r = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        while r < len(removals) and removals[r] < position:
            current.clear()  # the topic of this name was removed: its configs went with it
            r += 1
        name, value = fields[2], fields[3]
        if value is None:
            current.pop(name, None)
        else:
            current[name] = value
    while r < len(removals) and removals[r] <= cut:
        current.clear()
        r += 1
    for name in sorted(current):
        out.append(
            (
                (_S_CONFIG, resource_type, resource_name, name),
                encode_record(
                    ConfigRecord(
                        resource_type=resource_type, resource_name=resource_name, name=name, value=current[name]
                    )
                ),
            )
        )


def _fold_producer_ids(values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    current = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        next_id = fields[2]
        if next_id < current:
            errors.append(_err(position, "MetadataReplayError", f"next producer id {next_id} goes back from {current}"))
            return
        current = next_id
    if current > 0:
        out.append(
            (
                (_S_PRODUCER_IDS,),
                encode_record(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=current)),
            )
        )


def _fold_feature(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    name = key[1]
    level = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        if fields[1] < 0:
            errors.append(_err(position, "MetadataReplayError", f"negative level {fields[1]} for feature {name!r}"))
            return
        level = fields[1]
    if level != 0:
        out.append(((_S_FEATURE, name), encode_record(FeatureLevelRecord(name=name, feature_level=level))))


# ================================================================================ driver side


def parse_time_ms(text: str) -> int:
    """``--as-of-time``: ISO 8601 (``2024-05-01T03:00:00Z``, ``2024-05-01 03:00+02:00``; a time
    without an offset is UTC) or milliseconds since the epoch."""
    s = text.strip()
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError as err:
        raise ValueError(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T03:00:00Z) nor milliseconds since the epoch"
        ) from err
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def format_time_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _quiet_log4j_options() -> str:
    """JVM options that make the driver log errors only (no start-up warnings on a CLI's stderr)."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"kraftlog-spark-log4j2-{uid}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(_QUIET_LOG4J)
        os.replace(tmp, path)
    return f"-Dlog4j.configurationFile=file:{path}"


def spark_session(
    master: str = "local[*]",
    app_name: str = "kraftlog-snapshot-rebuild",
    conf: dict[str, str] | None = None,
    *,
    quiet: bool = True,
) -> Any:
    """A SparkSession for the job (the CLI's and the benchmark's; tests bring their own).

    ``quiet``: the driver JVM logs errors only (unless ``conf`` sets its own
    ``spark.driver.extraJavaOptions``). An already running session is returned as it is.
    """
    import sys

    require_pyspark()
    from pyspark.sql import SparkSession

    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.python.worker.reuse": "true",
    }
    if quiet:
        defaults["spark.driver.extraJavaOptions"] = _quiet_log4j_options()
    if master.startswith("local"):
        # The executors are this process's JVM: run their Python workers with this interpreter (the
        # venv that has msgpack and crc32c), not whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Hadoop:
    """The driver's view of the input through Hadoop's FileSystem API (any scheme Spark reads)."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.jvm = sc._jvm
        self.conf = sc._jsc.hadoopConfiguration()

    def _path(self, text: str) -> tuple[Any, Any]:
        p = self.jvm.org.apache.hadoop.fs.Path(text)
        return p, p.getFileSystem(self.conf)

    def list_files(self, text: str) -> list[tuple[str, str, int]]:
        """``(uri, name, size)`` of the files ``text`` names: a dir (or the dir holding
        ``__cluster_metadata-0/``), a file, or a glob."""
        p, fs = self._path(text)
        statuses = fs.globStatus(p)
        if statuses is None or len(statuses) == 0:
            raise FileNotFoundError(f"{text}: no such file or directory")
        if len(statuses) == 1 and statuses[0].isDirectory():
            d = statuses[0].getPath()
            sub = self.jvm.org.apache.hadoop.fs.Path(d, METADATA_PARTITION_DIR)
            if fs.exists(sub) and fs.getFileStatus(sub).isDirectory():
                d = sub
            statuses = fs.listStatus(d)
        out = []
        for st in statuses:
            if st.isFile():
                path = st.getPath()
                out.append((path.toString(), path.getName(), int(st.getLen())))
        return out

    def read_prefix(self, text: str, limit: int = 1 << 20) -> bytes:
        """The first bytes of a file (its snapshot header frame)."""
        p, fs = self._path(text)
        size = int(fs.getFileStatus(p).getLen())
        n = min(size, limit)
        stream = fs.open(p)
        try:
            return bytes(stream.readNBytes(n))  # byte[] comes back to Python as bytes
        finally:
            stream.close()

    def qualify(self, text: str) -> str:
        p, fs = self._path(text)
        return fs.makeQualified(p).toString()


def _snapshot_header(prefix: bytes, name: str) -> dict[str, Any]:
    if len(prefix) < 8:
        raise MetadataLogCorruptError(f"{name}: not a snapshot (no header frame)")
    length, _crc = struct.unpack_from(">II", prefix, 0)
    frames = iter_frames(prefix[: 8 + length])
    for position, payload in frames:
        return _check_header(Path(name), _snapshot_map(Path(name), position, payload))
    raise MetadataLogCorruptError(f"{name}: invalid snapshot header frame")


def _raise(error: tuple[Any, ...]) -> None:
    _position, cls_name, message, extra = error
    if cls_name == "MetadataLogGapError":
        raise MetadataLogGapError(
            message, expected_offset=extra["expected_offset"], found_offset=extra.get("found_offset")
        )
    if cls_name == "MetadataReplayError" and _position >= 0:
        message = f"offset {_position}: {message}"
    raise _ERROR_CLASSES.get(cls_name, MetadataRecordError)(message)


def _metadata_package_zip(tmp_dir: Path) -> Path:
    """kraftlog.metadata_log as a zip for executors that do not have kraftlog installed: the
    namespace root ``kraftlog/__init__.py``, the package and the ground floor it imports
    (``kraftlog.common``), under the names they are imported by."""
    import zipfile

    import kraftlog
    import kraftlog.common

    packages = {
        "metadata_log": Path(__file__).resolve().parent,
        "common": Path(kraftlog.common.__file__).resolve().parent,
    }
    target = tmp_dir / "kraftlog_metadata_log.zip"
    with zipfile.ZipFile(target, "w") as zf:
        zf.write(Path(kraftlog.__file__).resolve(), "kraftlog/__init__.py")
        for name, pkg in packages.items():
            for f in sorted(pkg.glob("*.py")):
                zf.write(f, f"kraftlog/{name}/{f.name}")
    return target


def rebuild_snapshot(
    spark: Any,
    log_path: str,
    out: str | os.PathLike[str],
    *,
    base_snapshot: str | None = None,
    as_of_offset: int | None = None,
    as_of_time_ms: int | None = None,
    partitions: int | None = None,
) -> RebuildResult:
    """Rebuild the metadata snapshot at the cut from the segments under ``log_path``; see the
    module docstring. ``out`` is a file path, or an existing directory to write the snapshot into
    under its canonical name. Raises `MetadataLogGapError` when offsets before the cut are missing,
    `MetadataRecordError`/`MetadataLogCorruptError` for undecodable data before the cut,
    `MetadataReplayError` for a record replay would reject, `SnapshotRebuildError` for a cut the
    inputs cannot serve; writes nothing in those cases.
    """
    if as_of_offset is not None and as_of_time_ms is not None:
        raise ValueError("give as_of_offset or as_of_time_ms, not both")
    started = time.monotonic()
    sc = spark.sparkContext if hasattr(spark, "sparkContext") else spark
    hadoop = _Hadoop(sc)
    log = _log.bind(log=log_path, base_snapshot=base_snapshot)

    if not sc.master.startswith("local"):
        import tempfile

        sc.addPyFile(str(_metadata_package_zip(Path(tempfile.mkdtemp(prefix="kraftlog-spark-")))))

    # ---- the base snapshot's header: which offsets the segments must supply
    base: dict[str, Any] | None = None
    skip_through = -1
    if base_snapshot is not None:
        files = hadoop.list_files(base_snapshot)
        if len(files) != 1:
            raise SnapshotRebuildError(f"--base-snapshot {base_snapshot}: expected one file, found {len(files)}")
        base_uri, base_name, _ = files[0]
        header = _snapshot_header(hadoop.read_prefix(base_uri), base_name)
        base = {
            "uri": base_uri,
            "offset": header["last_contained_offset"],
            "epoch": header["epoch"],
            "timestamp_ms": header["timestamp_ms"],
        }
        skip_through = base["offset"]
        if as_of_offset is not None and as_of_offset < skip_through:
            raise SnapshotRebuildError(
                f"--as-of-offset {as_of_offset} is before the base snapshot's offset {skip_through}"
            )
        if as_of_time_ms is not None and base["timestamp_ms"] > as_of_time_ms:
            raise SnapshotRebuildError(
                f"the base snapshot (offset {skip_through}) was taken at {format_time_ms(base['timestamp_ms'])}, "
                f"after --as-of-time {format_time_ms(as_of_time_ms)}: use an older snapshot"
            )

    # ---- which segment files to read (names give base offsets; skip what cannot matter)
    listed = hadoop.list_files(log_path)
    segments = sorted(
        (
            (parse_segment_file_name(name), uri, size)
            for uri, name, size in listed
            if parse_segment_file_name(name) is not None
        ),
        key=lambda s: s[0],
    )
    if not segments and base is None:
        raise SnapshotRebuildError(f"{log_path}: no metadata log segments ({{offset:020d}}.log) there")
    wanted = []
    for i, (seg_base, uri, size) in enumerate(segments):
        next_base = segments[i + 1][0] if i + 1 < len(segments) else None
        if next_base is not None and next_base - 1 <= skip_through:
            continue  # every entry is already in the base snapshot
        if as_of_offset is not None and seg_base > as_of_offset and wanted:
            break  # past the cut
        wanted.append((seg_base, uri, size))
    total_bytes = sum(size for _, _, size in wanted)

    default_parallelism = max(1, sc.defaultParallelism)
    topic_parts = max(1, min(default_parallelism, 8))
    entity_parts = partitions or max(2 * default_parallelism, math.ceil(total_bytes / _BYTES_PER_REDUCE_PARTITION))
    params = {"skip_through": skip_through, "as_of_offset": as_of_offset, "as_of_time_ms": as_of_time_ms}

    inputs = None
    if wanted:
        # binaryFiles packs files into a split until it reaches total / minPartitions bytes: asking
        # for two splits per file gives every segment its own task (small files still share one,
        # down to spark.files.openCostInBytes), so the decode spreads evenly over the executors.
        inputs = sc.binaryFiles(
            ",".join(uri for _, uri, _ in wanted), minPartitions=max(default_parallelism, 2 * len(wanted))
        ).map(_tag_segment)
    if base is not None:
        snap_rdd = sc.binaryFiles(base["uri"]).map(_tag_snapshot)
        inputs = snap_rdd if inputs is None else inputs.union(snap_rdd)
    assert inputs is not None
    decoded = inputs.mapPartitions(partial(_decode_partition, params))
    n_parts = 1 + topic_parts + entity_parts
    shuffled = decoded.partitionBy(n_parts, partial(_route, topic_parts, entity_parts))

    # Job 1: every file decoded into the shuffle; only the summaries come back.
    phases: dict[str, float] = {"setup": time.monotonic() - started}
    mark = time.monotonic()
    summaries = sc.runJob(shuffled, _collect_summaries, [0])
    phases["decode_and_shuffle"] = time.monotonic() - mark
    snapshot_summary = next((s for s in summaries if s["kind"] == "snapshot"), None)
    seg_summaries = sorted((s for s in summaries if s["kind"] == "segment"), key=lambda s: s["base_offset"])
    if snapshot_summary is not None:
        for error in snapshot_summary["errors"]:
            _raise(error)
        if (snapshot_summary["offset"], snapshot_summary["epoch"]) != (base["offset"], base["epoch"]):  # type: ignore[index]
            raise MetadataLogCorruptError(f"{base_snapshot}: header changed while the job ran")
    cut, cut_epoch, cut_ts, cut_reason, first_offset, torn, epoch_errors = _find_cut(
        seg_summaries, base, as_of_offset, as_of_time_ms, log_path
    )
    for t in torn:
        log.warning(
            "metadata_log_torn_tail", file=t.file, position=t.position, reason=t.reason, size_bytes=t.size_bytes
        )
    errors: list[tuple[Any, ...]] = list(epoch_errors)
    for s in seg_summaries:
        errors += [e for e in s["errors"] if e[0] <= cut and e[1] == "MetadataReplayError"]

    # Job 2: topic incarnations (the table that carries RemoveTopicRecord to partitions and configs).
    mark = time.monotonic()
    topic_results = sc.runJob(shuffled, partial(_fold_topics, cut), list(range(1, 1 + topic_parts)))
    lifecycle: dict[str, list[list[Any]]] = {}
    topic_records: list[Any] = []
    for res in topic_results:
        lifecycle.update(res["lifecycle"])
        errors += res["errors"]
        topic_records.append(res["records"])
    errors += _name_errors(lifecycle)
    tombstones: dict[str, list[int]] = {}
    for incarnations in lifecycle.values():
        for _created, removed, name in incarnations:
            if removed is not None:
                tombstones.setdefault(name, []).append(removed)
    for removals in tombstones.values():
        removals.sort()

    phases["topics"] = time.monotonic() - mark
    # Job 3: every other entity, folded per key.
    mark = time.monotonic()
    lifecycle_bc = sc.broadcast(lifecycle)
    tombstones_bc = sc.broadcast(tombstones)
    try:
        entity_results = sc.runJob(
            shuffled, partial(_fold_entities, cut, lifecycle_bc, tombstones_bc), list(range(1 + topic_parts, n_parts))
        )
    finally:
        lifecycle_bc.unpersist()
        tombstones_bc.unpersist()
    phases["entities"] = time.monotonic() - mark
    mark = time.monotonic()
    runs = topic_records + [res["records"] for res in entity_results]
    for res in entity_results:
        errors += res["errors"]
    errors = [e for e in errors if e[0] <= cut]
    if errors:
        _raise(min(errors, key=lambda e: e[0]))

    payloads = [payload for _key, payload in heapq.merge(*runs, key=lambda item: item[0])]
    target = Path(out)
    if target.is_dir():
        target = target / snapshot_file_name(cut, cut_epoch)
    target.parent.mkdir(parents=True, exist_ok=True)
    path = write_snapshot_payloads(target, cut, cut_epoch, cut_ts, payloads)
    phases["write"] = time.monotonic() - mark
    replayed = 0 if first_offset is None else cut - first_offset + 1
    result = RebuildResult(
        path=path,
        offset=cut,
        epoch=cut_epoch,
        timestamp_ms=cut_ts,
        record_count=len(payloads),
        entries_replayed=max(0, replayed),
        first_offset=first_offset,
        files_read=len(wanted) + (1 if base else 0),
        torn_tails=tuple(torn),
        base_snapshot=base_snapshot,
        cut_reason=cut_reason,
        seconds=time.monotonic() - started,
        phases=phases,
    )
    log.info(
        "metadata_snapshot_rebuilt",
        file=str(path),
        offset=cut,
        epoch=cut_epoch,
        records=len(payloads),
        entries=result.entries_replayed,
        files=result.files_read,
        seconds=round(result.seconds, 3),
    )
    return result


def _find_cut(
    summaries: list[dict[str, Any]],
    base: dict[str, Any] | None,
    as_of_offset: int | None,
    as_of_time_ms: int | None,
    log_path: str,
) -> tuple[int, int, int, str, int | None, list[TornTail], list[Any]]:
    """Walk the files in offset order: the dense range after the base snapshot, where it stops and
    why, and the cut with its epoch and timestamp. Raises when the cut would lie past a gap.

    Returns ``(cut, epoch, timestamp_ms, reason, first replayed offset, torn tails, epoch errors)``.
    """
    start = base["offset"] + 1 if base is not None else 0
    epoch = base["epoch"] if base is not None else -1
    expected = start  # the next offset the dense range needs
    previous_next: int | None = None  # next offset after the previous file used
    last: tuple[int, int, int] | None = None  # last entry (offset, epoch, ts) replayed so far
    torn: list[TornTail] = []
    epoch_errors: list[Any] = []
    stop_error: tuple[Any, ...] | None = None  # what ends the dense range early
    cut_entry: tuple[int, int, int] | None = None
    cut_reason = "end of log"
    for s in summaries:
        seg_base = s["base_offset"]
        if s["next_offset"] <= expected and s["stop"] is None and previous_next is None:
            continue  # entirely at or before the base snapshot (or an empty segment there)
        if seg_base > expected:
            stop_error = _err(
                expected,
                "MetadataLogGapError",
                f"{s['file']}: segment starts at {seg_base}, offsets {expected} to "
                f"{seg_base - 1} are missing"
                + (
                    " (a log that does not start at 0 needs a --base-snapshot)"
                    if previous_next is None and base is None
                    else ""
                ),
                expected_offset=expected,
                found_offset=seg_base,
            )
            break
        if previous_next is not None and seg_base < previous_next:
            stop_error = _err(
                expected,
                "MetadataLogCorruptError",
                f"{s['file']}: segment starts at {seg_base}, overlapping the previous "
                f"segment which ends at {previous_next - 1}",
            )
            break
        first = s["first_replayed"]
        if first is not None:
            if first[1] < epoch:
                epoch_errors.append(
                    _err(
                        first[0],
                        "MetadataReplayError",
                        f"entry at offset {first[0]} has epoch {first[1]} < epoch {epoch}",
                    )
                )
            drop = s["epoch_drop"]
            if drop is not None:
                epoch_errors.append(
                    _err(
                        drop[0],
                        "MetadataReplayError",
                        f"entry at offset {drop[0]} has epoch {drop[1]} < epoch {drop[2]}",
                    )
                )
            last = s["last_entry"]
            epoch = last[1]
        if s["stop"] == "cut":
            if as_of_offset is not None:
                cut_entry = s["at_offset"] or last
                cut_reason = f"offset {as_of_offset}"
            else:
                cut_entry = s["before_time"] or last
                cut_reason = f"last entry at or before {format_time_ms(as_of_time_ms)}"  # type: ignore[arg-type]
            break
        if s["stop"] is not None:  # an in-file gap or an undecodable frame
            stop_error = s["errors"][-1]
            break
        if s["torn"] is not None:
            torn.append(TornTail(s["file"], s["torn"][0], s["torn"][1], s["size_bytes"]))
        previous_next = s["next_offset"]
        expected = max(expected, s["next_offset"])
    end = last[0] if last is not None else start - 1
    if cut_entry is None:
        if stop_error is not None and (as_of_offset is None or as_of_offset > end):
            what = (
                "refusing to write a snapshot past a gap in offsets"
                if as_of_offset is None and as_of_time_ms is None
                else "the cut lies past a gap in offsets"
            )
            hint = f"; the log is readable up to offset {end} (--as-of-offset {end} works)" if end >= start else ""
            _, cls_name, message, extra = stop_error
            _raise((stop_error[0], cls_name, f"{what}: {message}{hint}", extra))
        if as_of_offset is not None:
            if as_of_offset > end:
                raise SnapshotRebuildError(
                    f"the metadata log in {log_path} ends at offset {end}, before --as-of-offset {as_of_offset}"
                )
            cut_reason = f"offset {as_of_offset}"
        elif as_of_time_ms is not None:
            cut_reason = f"last entry at or before {format_time_ms(as_of_time_ms)} (end of log)"
        cut_entry = last
    if cut_entry is None:
        if base is None:
            if as_of_time_ms is not None:
                raise SnapshotRebuildError(
                    f"no metadata log entry at or before {format_time_ms(as_of_time_ms)} in {log_path}"
                )
            raise SnapshotRebuildError(f"the metadata log in {log_path} has no entries")
        return (base["offset"], base["epoch"], base["timestamp_ms"], "base snapshot (no later entry)", None, torn, [])
    cut = cut_entry[0]
    return (cut, cut_entry[1], cut_entry[2], cut_reason, start, torn, [e for e in epoch_errors if e[0] <= cut])


def _name_errors(lifecycle: dict[str, list[list[Any]]]) -> list[Any]:
    """Replay's "topic name is taken": two incarnations of one name must not overlap."""
    by_name: dict[str, list[tuple[int, int | None, str]]] = {}
    for topic_id, incarnations in lifecycle.items():
        for created, removed, name in incarnations:
            by_name.setdefault(name, []).append((created, removed, topic_id))
    errors = []
    for name, spans in by_name.items():
        if len(spans) < 2:
            continue
        spans.sort(key=lambda s: s[0])
        for (_c0, r0, id0), (c1, _r1, _id1) in zip(spans, spans[1:], strict=False):
            if r0 is None or r0 > c1:
                errors.append(_err(c1, "MetadataReplayError", f"topic name {name!r} is taken by topic id {id0}"))
                break
    return errors
