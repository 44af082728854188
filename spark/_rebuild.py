"""The driver: find the cut, run the two stages, check and write the snapshot (`rebuild_snapshot`)."""

from __future__ import annotations

import heapq
import math
import os
import struct
import time
from functools import partial
from pathlib import Path
from typing import Any

from kraftlog.metadata_log import MetadataRecordError
from kraftlog.metadata_log.log_files import (
    MetadataLogCorruptError,
    MetadataLogGapError,
    check_snapshot_header,
    iter_frames,
    parse_segment_file_name,
    snapshot_file_name,
    snapshot_header_map,
    write_snapshot_payloads,
)
from kraftlog.spark._decode import (
    _BYTES_PER_REDUCE_PARTITION,
    _decode_partition,
    _err,
    _log,
    _route,
    _tag_segment,
    _tag_snapshot,
)
from kraftlog.spark._fold import _collect_summaries, _fold_entities, _fold_topics
from kraftlog.spark._session import _Hadoop, _metadata_package_zip
from kraftlog.spark._types import _ERROR_CLASSES, RebuildResult, SnapshotRebuildError, TornTail, format_time_ms


def _snapshot_header(prefix: bytes, name: str) -> dict[str, Any]:
    if len(prefix) < 8:
        raise MetadataLogCorruptError(f"{name}: not a snapshot (no header frame)")
    length, _crc = struct.unpack_from(">II", prefix, 0)
    frames = iter_frames(prefix[: 8 + length])
    for position, payload in frames:
        return check_snapshot_header(Path(name), snapshot_header_map(Path(name), position, payload))
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
        (base_offset, uri, size)
        for uri, name, size in listed
        if (base_offset := parse_segment_file_name(name)) is not None
    )
    if not segments and base is None:
        raise SnapshotRebuildError(f"{log_path}: no metadata log segments ({{offset:020d}}.log) there")
    wanted: list[tuple[int, str, int]] = []
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
