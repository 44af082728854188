"""The node-level keys of the partition log (``log.*``, Kafka's LogConfig defaults), each naming the
topic-level key it defaults (`kraftlog.common.config._config_schema_topic`). Part of the node
schema (`kraftlog.common.config._config_schema`).
"""

from __future__ import annotations

import sys

from kraftlog.common._config_def import (
    _MS_PER_HOUR,
    _MS_PER_MINUTE,
    LONG_MAX,
    ConfigDef,
    OneOf,
    Range,
)
from kraftlog.common.config._config_schema_topic import (
    _B,
    _CLEANUP_POLICIES,
    _D,
    _I,
    _L,
    _LS,
    _S,
    _TIMESTAMP_TYPES,
)

__all__ = ["define_log_keys"]


def define_log_keys(defs: ConfigDef) -> None:
    """Add the ``log.*`` keys, with Kafka's names, types and defaults; the order of the keys that
    default one topic key is their precedence order (``log.roll.ms`` before ``log.roll.hours``)."""
    (
        defs.define("log.segment.bytes", _I, 1_073_741_824, Range(14), "Segment size.", topic_key="segment.bytes")
        .define(
            "log.roll.ms", _L, None, None, "Segment roll age in ms; overrides log.roll.hours.", topic_key="segment.ms"
        )
        .define(
            "log.roll.hours",
            _I,
            168,
            Range(1),
            "Segment roll age in hours.",
            topic_key="segment.ms",
            topic_unit_ms=_MS_PER_HOUR,
        )
        .define(
            "log.roll.jitter.ms",
            _L,
            None,
            None,
            "Roll jitter in ms; overrides log.roll.jitter.hours.",
            topic_key="segment.jitter.ms",
        )
        .define(
            "log.roll.jitter.hours",
            _I,
            0,
            Range(0),
            "Roll jitter in hours.",
            topic_key="segment.jitter.ms",
            topic_unit_ms=_MS_PER_HOUR,
        )
        .define(
            "log.retention.ms",
            _L,
            None,
            None,
            "Retention in ms (-1: unlimited); overrides log.retention.minutes and hours.",
            topic_key="retention.ms",
        )
        .define(
            "log.retention.minutes",
            _I,
            None,
            None,
            "Retention in minutes; overrides log.retention.hours.",
            topic_key="retention.ms",
            topic_unit_ms=_MS_PER_MINUTE,
        )
        .define(
            "log.retention.hours",
            _I,
            168,
            None,
            "Retention in hours.",
            topic_key="retention.ms",
            topic_unit_ms=_MS_PER_HOUR,
        )
        .define(
            "log.retention.bytes", _L, -1, None, "Partition size limit; -1: unlimited.", topic_key="retention.bytes"
        )
        .define("log.retention.check.interval.ms", _L, 300_000, Range(1), "How often retention is enforced.")
        .define(
            "log.cleanup.policy",
            _LS,
            ["delete"],
            OneOf(*_CLEANUP_POLICIES),
            "Default cleanup policy.",
            topic_key="cleanup.policy",
        )
        .define("log.cleaner.enable", _B, True, None, "Run the log cleaner (needed by compacted topics).")
        .define("log.cleaner.threads", _I, 1, Range(0), "Log cleaner threads.")
        .define("log.cleaner.backoff.ms", _L, 15_000, Range(0), "Sleep of the cleaner when there is nothing to clean.")
        .define("log.cleaner.dedupe.buffer.size", _L, 134_217_728, None, "Memory for deduplication, all threads.")
        .define("log.cleaner.io.buffer.size", _I, 524_288, Range(0), "I/O buffer memory of the cleaner, all threads.")
        .define("log.cleaner.io.buffer.load.factor", _D, 0.9, None, "Load factor of the dedupe buffer.")
        .define("log.cleaner.io.max.bytes.per.second", _D, sys.float_info.max, None, "Cleaner I/O throttle.")
        .define(
            "log.cleaner.min.cleanable.ratio",
            _D,
            0.5,
            Range(0, 1),
            "Default dirty ratio for compaction.",
            topic_key="min.cleanable.dirty.ratio",
        )
        .define(
            "log.cleaner.delete.retention.ms",
            _L,
            86_400_000,
            Range(0),
            "Default tombstone retention.",
            topic_key="delete.retention.ms",
        )
        .define(
            "log.cleaner.min.compaction.lag.ms",
            _L,
            0,
            Range(0),
            "Default minimum compaction lag.",
            topic_key="min.compaction.lag.ms",
        )
        .define(
            "log.cleaner.max.compaction.lag.ms",
            _L,
            LONG_MAX,
            Range(1),
            "Default maximum compaction lag.",
            topic_key="max.compaction.lag.ms",
        )
        .define(
            "log.index.interval.bytes",
            _I,
            4096,
            Range(0),
            "Default sparse index interval.",
            topic_key="index.interval.bytes",
        )
        .define(
            "log.index.size.max.bytes",
            _I,
            10_485_760,
            Range(4),
            "Default maximum offset index size.",
            topic_key="segment.index.bytes",
        )
        .define(
            "log.flush.interval.messages",
            _L,
            LONG_MAX,
            Range(1),
            "Default fsync interval in messages.",
            topic_key="flush.messages",
        )
        .define(
            "log.flush.interval.ms",
            _L,
            None,
            None,
            "Default fsync interval in ms; overrides the scheduler interval.",
            topic_key="flush.ms",
        )
        .define(
            "log.flush.scheduler.interval.ms",
            _L,
            LONG_MAX,
            None,
            "How often the flusher looks for logs to fsync.",
            topic_key="flush.ms",
        )
        .define(
            "log.flush.offset.checkpoint.interval.ms", _I, 60_000, Range(0), "How often the recovery point is saved."
        )
        .define(
            "log.flush.start.offset.checkpoint.interval.ms",
            _I,
            60_000,
            Range(0),
            "How often log start offsets are saved.",
        )
        .define(
            "log.segment.delete.delay.ms",
            _L,
            60_000,
            Range(0),
            "Default delay before segment files are deleted.",
            topic_key="file.delete.delay.ms",
        )
        .define("log.preallocate", _B, False, None, "Default for preallocating segment files.", topic_key="preallocate")
        .define(
            "log.message.timestamp.type",
            _S,
            "CreateTime",
            OneOf(*_TIMESTAMP_TYPES),
            "Default timestamp type.",
            topic_key="message.timestamp.type",
        )
        .define(
            "log.message.timestamp.before.max.ms",
            _L,
            LONG_MAX,
            Range(0),
            "Default past-timestamp tolerance.",
            topic_key="message.timestamp.before.max.ms",
        )
        .define(
            "log.message.timestamp.after.max.ms",
            _L,
            3_600_000,
            Range(0),
            "Default future-timestamp tolerance.",
            topic_key="message.timestamp.after.max.ms",
        )
    )
