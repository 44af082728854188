"""Per-partition log settings (Kafka's topic-level configs) with Kafka's defaults.

The config schema (`kraftlog.common.config`) resolves broker defaults (``log.segment.bytes`` ...)
and topic overrides into topic-level keys; `LogConfig.from_properties` turns those into this typed,
immutable value. Every field's default is read from the schema's topic key (`_default`), so the two
cannot disagree: there is one table of Kafka's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kraftlog.common.config import TOPIC_CONFIG_DEFS
from kraftlog.common.records import TimestampType
from kraftlog.storage._errors import InvalidConfigError

__all__ = ["LogConfig", "LONG_MAX"]

LONG_MAX = 2**63 - 1


def _default(key: str) -> Any:
    """Kafka's default of a topic-level key, from the one schema."""
    return TOPIC_CONFIG_DEFS[key].default


_KEY_TO_FIELD = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "compression.type": "compression_type",
    "preallocate": "preallocate",
}
# Topic-level keys that belong to replication (or to share groups), not to the log: accepted and
# ignored here.
_NOT_LOG_KEYS = frozenset(
    {
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "message.downconversion.enable",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
        "errors.deadletterqueue.group.enable",  # KIP-1191: read by share-partition leaders, not the log
    }
)
_COMPRESSION_TYPES = frozenset({"producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    cleanup_policy: frozenset[str] = field(default_factory=lambda: frozenset(_default("cleanup.policy")))
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: TimestampType = (
        TimestampType.LOG_APPEND_TIME
        if _default("message.timestamp.type") == "LogAppendTime"
        else TimestampType.CREATE_TIME
    )
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    compression_type: str = _default("compression.type")
    preallocate: bool = _default("preallocate")

    def __post_init__(self) -> None:
        def need(cond: bool, key: str, value: Any, expected: str) -> None:
            if not cond:
                raise InvalidConfigError(f"invalid value {value!r} for {key!r}: expected {expected}")

        need(self.segment_bytes >= 14, "segment.bytes", self.segment_bytes, "an integer >= 14")
        need(self.segment_ms >= 1, "segment.ms", self.segment_ms, "an integer >= 1")
        need(self.segment_jitter_ms >= 0, "segment.jitter.ms", self.segment_jitter_ms, "an integer >= 0")
        need(self.segment_index_bytes >= 8, "segment.index.bytes", self.segment_index_bytes, "an integer >= 8")
        need(self.index_interval_bytes >= 0, "index.interval.bytes", self.index_interval_bytes, "an integer >= 0")
        need(self.retention_ms >= -1, "retention.ms", self.retention_ms, "an integer >= -1")
        need(self.retention_bytes >= -1, "retention.bytes", self.retention_bytes, "an integer >= -1")
        need(
            bool(self.cleanup_policy) and self.cleanup_policy <= {"delete", "compact"},
            "cleanup.policy",
            ",".join(sorted(self.cleanup_policy)),
            "a list of delete, compact",
        )
        need(self.delete_retention_ms >= 0, "delete.retention.ms", self.delete_retention_ms, "an integer >= 0")
        need(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", self.min_compaction_lag_ms, "an integer >= 0")
        need(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", self.max_compaction_lag_ms, "an integer >= 1")
        need(
            0.0 <= self.min_cleanable_dirty_ratio <= 1.0,
            "min.cleanable.dirty.ratio",
            self.min_cleanable_dirty_ratio,
            "a number in [0, 1]",
        )
        need(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", self.file_delete_delay_ms, "an integer >= 0")
        need(self.flush_messages >= 1, "flush.messages", self.flush_messages, "an integer >= 1")
        need(self.flush_ms >= 0, "flush.ms", self.flush_ms, "an integer >= 0")
        need(self.max_message_bytes >= 0, "max.message.bytes", self.max_message_bytes, "an integer >= 0")
        need(
            self.message_timestamp_before_max_ms >= 0,
            "message.timestamp.before.max.ms",
            self.message_timestamp_before_max_ms,
            "an integer >= 0",
        )
        need(
            self.message_timestamp_after_max_ms >= 0,
            "message.timestamp.after.max.ms",
            self.message_timestamp_after_max_ms,
            "an integer >= 0",
        )
        need(
            self.compression_type in _COMPRESSION_TYPES,
            "compression.type",
            self.compression_type,
            "one of " + ", ".join(sorted(_COMPRESSION_TYPES)),
        )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from topic-level keys (``segment.bytes`` ...); values may be strings or typed.

        An unknown key or a bad value raises `InvalidConfigError` naming the key.
        """
        base = base or cls()
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, raw in props.items():
            if key in _NOT_LOG_KEYS:
                continue
            name = _KEY_TO_FIELD.get(key)
            if name is None:
                raise InvalidConfigError(f"unknown topic config {key!r}")
            changes[name] = _parse(key, raw, types[name])
        return replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        out = {}
        for key, name in _KEY_TO_FIELD.items():
            value = getattr(self, name)
            if isinstance(value, frozenset):
                out[key] = ",".join(sorted(value))
            elif isinstance(value, TimestampType):
                out[key] = "LogAppendTime" if value == TimestampType.LOG_APPEND_TIME else "CreateTime"
            elif isinstance(value, bool):
                out[key] = str(value).lower()
            else:
                out[key] = str(value)
        return out


def _parse(key: str, raw: Any, type_name: Any) -> Any:
    if key == "cleanup.policy":  # a list, or its comma-separated text
        items = raw if isinstance(raw, (list, tuple, set, frozenset)) else str(raw).split(",")
        return frozenset(str(i).strip().lower() for i in items if str(i).strip())
    text = str(raw).strip()
    try:
        if key == "message.timestamp.type":
            if text == "CreateTime":
                return TimestampType.CREATE_TIME
            if text == "LogAppendTime":
                return TimestampType.LOG_APPEND_TIME
            raise ValueError(text)
        if key == "compression.type":
            return str(text).lower()
        if key == "preallocate":
            if isinstance(raw, bool):
                return raw
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise ValueError(text)
        if key == "min.cleanable.dirty.ratio":
            return float(text)
        if isinstance(raw, bool):
            raise ValueError(raw)
        return int(text)
    except (TypeError, ValueError) as err:
        expected = {
            "message.timestamp.type": "CreateTime or LogAppendTime",
            "preallocate": "true or false",
            "min.cleanable.dirty.ratio": "a number in [0, 1]",
        }.get(key, "an integer")
        raise InvalidConfigError(f"invalid value {raw!r} for {key!r}: expected {expected}") from err
