"""Topic-level config keys (Kafka's TopicConfig / LogConfig) with Kafka's names, types and defaults,
and the value types the node-level schema (`kraftlog.common.config._config_schema`) shares. See
`kraftlog.common.config`.
"""

from __future__ import annotations

from typing import Final

from kraftlog.common._config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigType,
    OneOf,
    Range,
)

_COMPRESSION_TYPES: Final = ("producer", "none", "gzip", "snappy", "lz4", "zstd", "uncompressed")
_TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES: Final = ("delete", "compact")

# ---------------------------------------------------------------------------------------------
# Topic-level keys (Kafka's TopicConfig / LogConfig)
# ---------------------------------------------------------------------------------------------

_I, _L, _D, _B, _S, _LS, _P = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)

#: topic keys Kafka's LogConfig defaults itself, with no broker key behind them
TOPIC_KEYS_WITHOUT_BROKER_DEFAULT: Final = frozenset({"errors.deadletterqueue.group.enable"})

TOPIC_CONFIG_DEFS: Final = ConfigDef("topic")
(
    TOPIC_CONFIG_DEFS.define(
        "cleanup.policy",
        _LS,
        ["delete"],
        OneOf(*_CLEANUP_POLICIES),
        "delete: drop old segments by retention; compact: keep the last record per key; both allowed.",
    )
    .define(
        "compression.type",
        _S,
        "producer",
        OneOf(*_COMPRESSION_TYPES),
        "Final codec of the stored batches; 'producer' keeps what the producer sent.",
    )
    .define(
        "delete.retention.ms",
        _L,
        86_400_000,
        Range(0),
        "How long tombstones survive compaction, so slow readers still see the delete.",
    )
    .define(
        "file.delete.delay.ms",
        _L,
        60_000,
        Range(0),
        "Delay before a deleted segment's files are removed, so in-flight reads can finish.",
    )
    .define(
        "flush.messages",
        _L,
        LONG_MAX,
        Range(1),
        "Force an fsync after this many messages; replication, not fsync, is the durability default.",
    )
    .define(
        "errors.deadletterqueue.group.enable",
        _B,
        False,
        None,
        "Whether share groups may use this topic as their dead-letter topic (KIP-1191).",
    )
    .define("flush.ms", _L, LONG_MAX, Range(0), "Force an fsync when data is older than this.")
    .define(
        "index.interval.bytes",
        _I,
        4096,
        Range(0),
        "Bytes between sparse offset-index entries: smaller means faster lookups, bigger indexes.",
    )
    .define("max.message.bytes", _I, 1_048_588, Range(0), "Largest record batch the topic accepts.")
    .define(
        "message.timestamp.type",
        _S,
        "CreateTime",
        OneOf(*_TIMESTAMP_TYPES),
        "Whether batches keep the producer's timestamp or get the broker's append time.",
    )
    .define(
        "message.timestamp.before.max.ms",
        _L,
        LONG_MAX,
        Range(0),
        "How far in the past a CreateTime timestamp may be before the batch is rejected.",
    )
    .define(
        "message.timestamp.after.max.ms",
        _L,
        3_600_000,
        Range(0),
        "How far in the future a CreateTime timestamp may be before the batch is rejected.",
    )
    .define(
        "min.cleanable.dirty.ratio",
        _D,
        0.5,
        Range(0, 1),
        "Dirty/total ratio at which the log becomes eligible for compaction.",
    )
    .define("min.compaction.lag.ms", _L, 0, Range(0), "Minimum age before a record may be compacted.")
    .define("max.compaction.lag.ms", _L, LONG_MAX, Range(1), "Maximum age before a record must be compactable.")
    .define("min.insync.replicas", _I, 1, Range(1), "Replicas that must be in sync for an acks=all write to succeed.")
    .define("preallocate", _B, False, None, "Preallocate segment files on creation.")
    .define("retention.bytes", _L, -1, None, "Maximum partition size before old segments are deleted; -1: unlimited.")
    .define(
        "retention.ms",
        _L,
        604_800_000,
        Range(-1),
        "Maximum age of a segment's newest record before deletion; -1: unlimited.",
    )
    .define("segment.bytes", _I, 1_073_741_824, Range(14), "Size at which a segment is rolled.")
    .define("segment.index.bytes", _I, 10_485_760, Range(4), "Maximum size of a segment's offset index.")
    .define("segment.jitter.ms", _L, 0, Range(0), "Random jitter subtracted from segment.ms to avoid roll storms.")
    .define("segment.ms", _L, 604_800_000, Range(1), "Age at which a segment is rolled even if not full.")
    .define(
        "unclean.leader.election.enable",
        _B,
        False,
        None,
        "Allow an out-of-sync replica to become leader, trading acknowledged data for availability.",
    )
)
