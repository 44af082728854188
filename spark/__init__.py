"""The Spark job that rebuilds a metadata snapshot from metadata log segments (docs/architecture.md §2, §6).

``rebuild_snapshot(spark, log_path, out)`` reads the segment files of a metadata log (any path Spark
reads: a local directory, ``hdfs://``, ``s3a://``), optionally on top of a base snapshot, folds every
record up to a cut (the end of the log, ``as_of_offset`` or ``as_of_time_ms``) and writes the snapshot
a controller would write at that offset: same header, same records, same order, byte for byte.

This package imports pyspark lazily (`require_pyspark` first: pyspark is the ``[spark]`` extra); only
``kraftlog snapshot rebuild`` imports it. Its modules follow the job: `_decode` and `_fold` run on the
executors, `_session` and `_rebuild` on the driver, `_types` is what both report.

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
   (Remove)AccessControlEntryRecord                ``("a", acl_id)``
   (Remove)UserScramCredentialRecord               ``("s", mechanism, user)``
   NoOpRecord, VotersRecord, KRaftVersionRecord    none (they only move the offset/epoch)
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
   (`PartitionRegistration.merge`/`validate`, `BrokerRegistration`, `next_acl`,
   `next_scram_credential`, ...). A partition belongs to the
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

from kraftlog.spark._rebuild import (
    rebuild_snapshot,
)
from kraftlog.spark._session import (
    environment_archive,
    spark_session,
)
from kraftlog.spark._types import (
    SPARK_EXTRA,
    RebuildResult,
    SnapshotRebuildError,
    SparkNotInstalledError,
    TornTail,
    format_time_ms,
    parse_time_ms,
    require_pyspark,
)

__all__ = [
    "RebuildResult",
    "TornTail",
    "SnapshotRebuildError",
    "SparkNotInstalledError",
    "require_pyspark",
    "rebuild_snapshot",
    "spark_session",
    "environment_archive",
    "parse_time_ms",
    "SPARK_EXTRA",
    "format_time_ms",
]
