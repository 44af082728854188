"""``kraftlog snapshot``: build metadata snapshots offline with Spark, and compare snapshots.

* ``rebuild --log PATH --out FILE [--base-snapshot FILE] [--as-of-offset N | --as-of-time TIME]
  [--master URL]`` runs a Spark job: it reads the metadata log segments
  under PATH (a controller's ``metadata.log.dir``, its ``__cluster_metadata-0`` dir, a glob, or an
  archive of segments; any path Spark reads: local, ``hdfs://``, ``s3a://`` when configured),
  folds every record up to the cut and writes the snapshot a controller would have written at that
  offset, byte for byte. Without a cut the snapshot is at the end of the log. ``--as-of-time``
  answers "what did the cluster look like at 03:00": the cut is the last entry stamped at or
  before that time (ISO 8601; a time without an offset is UTC; or milliseconds since the epoch).
  Look at the result with ``kraftlog metadata tree --snapshot FILE``. Torn segment tails are
  reported with file and position; a gap in offsets before the cut stops the job (nothing is
  written) and names the missing offsets. ``--master`` takes any Spark master (default
  ``local[*]``) and ``--conf KEY=VALUE`` any Spark setting; on a cluster the job ships kraftlog's own
  code and, packed from this virtual environment, its dependencies (``--environment-archive``).
  Spark is an extra:
  ``pip install 'kraftlog[spark]'`` (and a Java runtime); without it ``rebuild`` says so and exits 1.

* ``diff A B`` tells where two snapshots disagree, entity by entity (features, brokers, producer
  ids, topics, partitions, configs): added (only in B), removed (only in A) or changed (field by
  field). Exit status 0 when they agree, 1 when they differ, e.g. to audit a live controller's
  snapshot against one rebuilt from archived segments. ``--ignore-provenance`` compares only the
  image, not the header's offset, epoch and timestamp.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    add_output_option,
    described,
    non_negative_int,
    print_json,
    print_table,
    report_failure,
    topic_id_text,
)
from kraftlog.common import errors as kerr

__all__ = ["add_parser", "run", "Difference", "diff_images", "diff_snapshots"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "snapshot",
        help="rebuild metadata snapshots from log segments with Spark; diff two snapshots",
        **described(__doc__),
    )
    sub = parser.add_subparsers(dest="snapshot_command", metavar="ACTION")
    sub.required = True

    rebuild = sub.add_parser(
        "rebuild",
        help="fold metadata log segments into a snapshot with Spark",
        description="Rebuild the metadata snapshot at a cut from metadata log segments with Spark; "
        "the file is byte-identical to the snapshot a controller writes at that offset.",
    )
    rebuild.add_argument(
        "--log",
        required=True,
        metavar="PATH",
        help="metadata log segments: a metadata.log.dir, its __cluster_metadata-0 dir, "
        "a glob, or any Spark-readable path (hdfs://, s3a://)",
    )
    rebuild.add_argument(
        "--base-snapshot", default=None, metavar="FILE", help="start from this snapshot; the segments must continue it"
    )
    rebuild.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the snapshot file to write (an existing directory: written there as "
        "{offset:020d}-{epoch:010d}.checkpoint)",
    )
    cut = rebuild.add_mutually_exclusive_group()
    cut.add_argument(
        "--as-of-offset",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="the image as of log offset N (inclusive)",
    )
    cut.add_argument(
        "--as-of-time",
        default=None,
        metavar="TIME",
        help="the image as of the last entry stamped at or before TIME (ISO 8601, UTC "
        "unless an offset is given, e.g. 2024-05-01T03:00:00Z; or epoch milliseconds)",
    )
    rebuild.add_argument(
        "--master",
        default="local[*]",
        metavar="URL",
        help="Spark master (default: local[*]; spark://, yarn, k8s:// ... work unchanged)",
    )
    rebuild.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, repeatable (e.g. spark.hadoop.fs.s3a.endpoint=...)",
    )
    rebuild.add_argument(
        "--environment-archive",
        default="auto",
        metavar="auto|none|FILE",
        help="how executors of a non-local master get kraftlog's Python dependencies: auto (default) packs "
        "this virtual environment and ships it with spark.archives; FILE ships that packed environment "
        "(venv-pack or conda-pack); none ships nothing",
    )
    rebuild.add_argument(
        "--partitions",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="shuffle partitions of the fold (default: from the input size)",
    )
    add_output_option(rebuild)

    diff = sub.add_parser(
        "diff",
        help="where two snapshots disagree (exit 1 when they do)",
        description="Compare two snapshot files entity by entity.",
    )
    diff.add_argument("a", metavar="A", help="first snapshot (.checkpoint)")
    diff.add_argument("b", metavar="B", help="second snapshot (.checkpoint)")
    diff.add_argument(
        "--ignore-provenance",
        action="store_true",
        help="compare the images only, not the headers' offset, epoch and timestamp",
    )
    add_output_option(diff)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.snapshot_command == "rebuild":
        return _rebuild(args)
    if args.snapshot_command == "diff":
        return _diff(args)
    raise UserError(f"unknown snapshot action {args.snapshot_command!r}")


# ============================================================================== rebuild


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


@contextmanager
def _stage_progress(sc: Any) -> Iterator[None]:
    """Spark's stages as a progress bar on stderr (a terminal only): the running stage's name and
    its tasks done out of all, polled from the status tracker by a daemon thread. Stages can finish
    between two polls (a small log, a warm session): at the end the last stage that ran is shown
    with its final counts, so the bar always says what Spark did."""
    from kraftlog.common import progress

    with progress("starting Spark") as shown:
        if not shown.enabled:
            yield
            return
        stop = threading.Event()
        tracker = sc.statusTracker()
        seen: set[int] = set()

        def show(stage_id: int) -> bool:
            info = tracker.getStageInfo(stage_id)
            if info is None:
                return False
            seen.add(stage_id)
            shown.update(
                description=f"stage {stage_id} ({info.name.split(' at ')[0]})",
                completed=info.numCompletedTasks,
                total=info.numTasks,
            )
            return True

        def poll() -> None:
            while not stop.wait(0.1):
                for stage_id in tracker.getActiveStageIds():
                    if show(stage_id):
                        break

        known = set(tracker.getJobIdsForGroup(None) or ())
        thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            ran = [j for j in (tracker.getJobIdsForGroup(None) or ()) if j not in known]
            stages = [s for j in sorted(ran) if (job := tracker.getJobInfo(j)) is not None for s in job.stageIds]
            if stages and max(stages) not in seen:
                show(max(stages))


def _rebuild(args: argparse.Namespace) -> int:
    from kraftlog import metadata_log
    from kraftlog import spark as _spark

    as_of_time_ms = None
    if args.as_of_time is not None:
        try:
            as_of_time_ms = _spark.parse_time_ms(args.as_of_time)
        except ValueError as err:
            raise UserError(f"--as-of-time: {err}") from err
    conf = _spark_conf(args.conf)
    if "://" in args.out:
        raise UserError(f"--out {args.out}: the snapshot is written by the driver to a local file")
    out = Path(args.out)
    if not out.is_dir() and not out.parent.exists():
        raise UserError(f"--out {out}: directory {out.parent} does not exist")
    try:
        _spark.require_pyspark()
    except _spark.SparkNotInstalledError as err:
        print(f"kraftlog snapshot: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    from pyspark import SparkContext

    owned = SparkContext._active_spark_context is None  # an embedding program's session is not ours to stop
    try:
        spark = _spark.spark_session(args.master, conf=conf, environment=args.environment_archive)
    except _spark.SnapshotRebuildError as err:
        raise UserError(str(err)) from err
    except Exception as err:  # no Java, a bad master URL, ...
        print(f"kraftlog snapshot: error: cannot start Spark ({args.master}): {err}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        with _stage_progress(spark.sparkContext):
            result = _spark.rebuild_snapshot(
                spark,
                args.log,
                out,
                base_snapshot=args.base_snapshot,
                as_of_offset=args.as_of_offset,
                as_of_time_ms=as_of_time_ms,
                partitions=args.partitions or None,
            )
    except FileNotFoundError as err:
        raise UserError(str(err)) from err
    except (metadata_log.MetadataRecordError, metadata_log.MetadataReplayError, _spark.SnapshotRebuildError) as err:
        # gaps, corrupt frames, records replay rejects: nothing was written
        report_failure(args.command, str(err), kerr.CorruptMessageError, as_json=args.output == "json")
        return EXIT_FAILURE
    finally:
        if owned:
            spark.stop()
    for t in result.torn_tails:
        print(
            f"kraftlog snapshot: warning: torn tail in {t.file} at position {t.position}: {t.reason} "
            f"({t.size_bytes - t.position} bytes ignored)",
            file=sys.stderr,
        )
    if args.output == "json":
        print_json(
            {
                "file": str(result.path),
                "offset": result.offset,
                "epoch": result.epoch,
                "timestamp_ms": result.timestamp_ms,
                "time": _spark.format_time_ms(result.timestamp_ms),
                "records": result.record_count,
                "entries_replayed": result.entries_replayed,
                "first_offset": result.first_offset,
                "files_read": result.files_read,
                "base_snapshot": result.base_snapshot,
                "cut": result.cut_reason,
                "torn_tails": [{"file": t.file, "position": t.position, "reason": t.reason} for t in result.torn_tails],
                "seconds": round(result.seconds, 3),
            }
        )
        return EXIT_OK
    print(f"Wrote {result.path}")
    print(
        f"  offset {result.offset}  epoch {result.epoch}  "
        f"timestamp {result.timestamp_ms} ({_spark.format_time_ms(result.timestamp_ms)})"
    )
    print(f"  cut: {result.cut_reason}")
    base = f" on top of {result.base_snapshot}" if result.base_snapshot else ""
    print(
        f"  {result.record_count} records from {result.entries_replayed} log entries{base}, "
        f"{result.files_read} files, {result.seconds:.1f} s"
    )
    print(f"  view it: kraftlog metadata tree --snapshot {result.path}")
    return EXIT_OK


# ============================================================================== diff


@dataclass(frozen=True)
class Difference:
    """One entity on which two snapshots disagree."""

    change: str  # "added" (only in B), "removed" (only in A), "changed"
    kind: str  # header, feature, broker, producer_ids, topic, partition, config, acl, ..., client_quota
    entity: str  # e.g. "orders-3", "broker 2", "topic:orders retention.ms"
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (in A, in B)

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "kind": self.kind,
            "entity": self.entity,
            "fields": {k: {"a": _plain(a), "b": _plain(b)} for k, (a, b) in self.fields.items()},
        }


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "to_wire"):
        return value.to_wire()
    return value


def _field_diff(a: Any, b: Any, names: list[str]) -> dict[str, tuple[Any, Any]]:
    return {n: (getattr(a, n), getattr(b, n)) for n in names if getattr(a, n) != getattr(b, n)}


_CONFIG_TYPES = {2: "topic", 4: "broker", 8: "broker_logger"}


def _resource_text(resource: tuple[int, str]) -> str:
    rtype, name = resource
    label = _CONFIG_TYPES.get(rtype, f"type{rtype}")
    return f"{label}:{name if name or rtype != 4 else '<default>'}"


def diff_images(a: Any, b: Any) -> list[Difference]:
    """Every entity on which images ``a`` and ``b`` disagree, in snapshot order."""
    out: list[Difference] = []
    # features
    fa, fb = a.features.levels, b.features.levels
    for name in sorted(set(fa) | set(fb)):
        if name not in fb:
            out.append(Difference("removed", "feature", name, {"level": (fa[name], None)}))
        elif name not in fa:
            out.append(Difference("added", "feature", name, {"level": (None, fb[name])}))
        elif fa[name] != fb[name]:
            out.append(Difference("changed", "feature", name, {"level": (fa[name], fb[name])}))
    # brokers
    ba, bb = a.cluster.brokers, b.cluster.brokers
    broker_fields = [
        "incarnation_id",
        "broker_epoch",
        "endpoints",
        "rack",
        "fenced",
        "in_controlled_shutdown",
        "log_dirs",
    ]
    for bid in sorted(set(ba) | set(bb)):
        if bid not in bb:
            out.append(Difference("removed", "broker", f"broker {bid}", {"broker_epoch": (ba[bid].broker_epoch, None)}))
        elif bid not in ba:
            out.append(Difference("added", "broker", f"broker {bid}", {"broker_epoch": (None, bb[bid].broker_epoch)}))
        else:
            changed = _field_diff(ba[bid], bb[bid], broker_fields)
            if changed:
                out.append(Difference("changed", "broker", f"broker {bid}", changed))
    # producer ids
    pa, pb = a.producer_ids.next_producer_id, b.producer_ids.next_producer_id
    if pa != pb:
        out.append(Difference("changed", "producer_ids", "next producer id", {"next_producer_id": (pa, pb)}))
    # topics and partitions
    ta, tb = a.topics.by_name, b.topics.by_name
    part_fields = [
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "removing_replicas",
        "adding_replicas",
        "leader_recovery_state",
    ]
    for name in sorted(set(ta) | set(tb)):
        x, y = ta.get(name), tb.get(name)
        if y is None:
            out.append(
                Difference(
                    "removed",
                    "topic",
                    name,
                    {"topic_id": (topic_id_text(x.topic_id), None), "partitions": (x.partition_count, None)},
                )
            )
            continue
        if x is None:
            out.append(
                Difference(
                    "added",
                    "topic",
                    name,
                    {"topic_id": (None, topic_id_text(y.topic_id)), "partitions": (None, y.partition_count)},
                )
            )
            continue
        if x.topic_id != y.topic_id:
            ids = (topic_id_text(x.topic_id), topic_id_text(y.topic_id))
            out.append(Difference("changed", "topic", name, {"topic_id": ids}))
        for pid in sorted(set(x.partitions) | set(y.partitions)):
            p, q = x.partitions.get(pid), y.partitions.get(pid)
            entity = f"{name}-{pid}"
            if q is None:
                out.append(Difference("removed", "partition", entity, {"leader": (p.leader, None)}))
            elif p is None:
                out.append(Difference("added", "partition", entity, {"leader": (None, q.leader)}))
            else:
                changed = _field_diff(p, q, part_fields)
                if changed:
                    out.append(Difference("changed", "partition", entity, changed))
    # configs
    ca, cb = a.configs.resources, b.configs.resources
    for resource in sorted(set(ca) | set(cb)):
        va, vb = ca.get(resource, {}), cb.get(resource, {})
        for key in sorted(set(va) | set(vb)):
            entity = f"{_resource_text(resource)} {key}"
            if key not in vb:
                out.append(Difference("removed", "config", entity, {"value": (va[key], None)}))
            elif key not in va:
                out.append(Difference("added", "config", entity, {"value": (None, vb[key])}))
            elif va[key] != vb[key]:
                out.append(Difference("changed", "config", entity, {"value": (va[key], vb[key])}))
    # ACLs (by binding: ids are handles, not content) and SCRAM credentials (iterations only, and
    # a marker when the secret keys differ: they are never shown)
    acls_a, acls_b = set(a.acls.acls.values()), set(b.acls.acls.values())
    for binding in sorted(acls_a ^ acls_b, key=lambda acl: acl.sort_key()):
        entity = (
            f"{binding.resource_type.display_name}:{binding.resource_name} ({binding.pattern_type.name}) "
            f"{binding.principal}@{binding.host} {binding.permission_type.name} {binding.operation.display_name}"
        )
        kind = "removed" if binding in acls_a else "added"
        out.append(Difference(kind, "acl", entity, {}))
    sa, sb = a.scram.mechanisms, b.scram.mechanisms
    for mechanism in sorted(set(sa) | set(sb)):
        ua, ub = sa.get(mechanism, {}), sb.get(mechanism, {})
        for user in sorted(set(ua) | set(ub)):
            x, y = ua.get(user), ub.get(user)
            entity = f"{user} {mechanism.mechanism_name}"
            if y is None:
                out.append(Difference("removed", "scram_credential", entity, {"iterations": (x.iterations, None)}))
            elif x is None:
                out.append(Difference("added", "scram_credential", entity, {"iterations": (None, y.iterations)}))
            elif x != y:
                changed = {"iterations": (x.iterations, y.iterations), "keys": ("[hidden]", "[hidden, changed]")}
                out.append(Difference("changed", "scram_credential", entity, changed))
    # client quotas, one difference per entity and key
    qa, qb = a.quotas.entities, b.quotas.entities
    for quota_entity in sorted(set(qa) | set(qb), key=lambda e: [(t, "" if n is None else "\x01" + n) for t, n in e]):
        va, vb = qa.get(quota_entity, {}), qb.get(quota_entity, {})
        text = ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in quota_entity)
        for key in sorted(set(va) | set(vb)):
            entity = f"{text} {key}"
            if key not in vb:
                out.append(Difference("removed", "client_quota", entity, {"value": (va[key], None)}))
            elif key not in va:
                out.append(Difference("added", "client_quota", entity, {"value": (None, vb[key])}))
            elif va[key] != vb[key]:
                out.append(Difference("changed", "client_quota", entity, {"value": (va[key], vb[key])}))
    return out


def diff_snapshots(a: Any, b: Any, *, ignore_provenance: bool = False) -> list[Difference]:
    """Differences between two `Snapshot`s: the header (unless ignored), then the images."""
    from kraftlog.metadata_log import MetadataImage

    out: list[Difference] = []
    if not ignore_provenance:
        header = {
            n: (getattr(a, n), getattr(b, n))
            for n in ("offset", "epoch", "timestamp_ms")
            if getattr(a, n) != getattr(b, n)
        }
        if header:
            out.append(Difference("changed", "header", "provenance", header))
    image_a = MetadataImage.from_records(a.records, a.offset, a.epoch, a.timestamp_ms)
    image_b = MetadataImage.from_records(b.records, b.offset, b.epoch, b.timestamp_ms)
    return out + diff_images(image_a, image_b)


def _value_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "[" + ",".join(_value_text(v) for v in value) + "]"
    if hasattr(value, "host") and hasattr(value, "port"):
        return f"{value.name}://{value.host}:{value.port}"
    return str(value)


def _diff(args: argparse.Namespace) -> int:
    from kraftlog import metadata_log

    snaps = []
    for text in (args.a, args.b):
        p = Path(text)
        if not p.is_file():
            raise UserError(f"{p}: no such file")
        try:
            snaps.append(metadata_log.read_snapshot(p))
        except (metadata_log.MetadataRecordError, OSError) as err:
            print(f"kraftlog snapshot: error: cannot read {p}: {err}", file=sys.stderr)
            return EXIT_FAILURE
    a, b = snaps
    try:
        diffs = diff_snapshots(a, b, ignore_provenance=args.ignore_provenance)
    except metadata_log.MetadataReplayError as err:
        print(f"kraftlog snapshot: error: a snapshot does not replay: {err}", file=sys.stderr)
        return EXIT_FAILURE
    counts = {c: sum(1 for d in diffs if d.change == c) for c in ("added", "removed", "changed")}
    if args.output == "json":
        print_json(
            {
                "a": {
                    "file": args.a,
                    "offset": a.offset,
                    "epoch": a.epoch,
                    "timestamp_ms": a.timestamp_ms,
                    "records": len(a.records),
                },
                "b": {
                    "file": args.b,
                    "offset": b.offset,
                    "epoch": b.epoch,
                    "timestamp_ms": b.timestamp_ms,
                    "records": len(b.records),
                },
                "identical": not diffs,
                "counts": counts,
                "differences": [d.to_json() for d in diffs],
            }
        )
        return EXIT_FAILURE if diffs else EXIT_OK
    print(f"A: {args.a}  offset {a.offset} epoch {a.epoch} timestamp {a.timestamp_ms} records {len(a.records)}")
    print(f"B: {args.b}  offset {b.offset} epoch {b.epoch} timestamp {b.timestamp_ms} records {len(b.records)}")
    if not diffs:
        print("The snapshots agree" + (" (images only)" if args.ignore_provenance else "") + ".")
        return EXIT_OK
    rows = []
    for d in diffs:
        detail = ", ".join(f"{k}: {_value_text(x)} -> {_value_text(y)}" for k, (x, y) in d.fields.items())
        rows.append([d.change, d.kind, d.entity, detail])
    print_table(["CHANGE", "KIND", "ENTITY", "A -> B"], rows)
    print(
        f"The snapshots differ: {counts['changed']} changed, {counts['added']} added (only in B), "
        f"{counts['removed']} removed (only in A)."
    )
    return EXIT_FAILURE
