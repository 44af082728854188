"""The node keys of share groups' delivery (KIP-932) and of the share coordinator, with Kafka 4.x's
names, defaults and validation (ShareGroupConfig, ShareCoordinatorConfig): the acquisition lock
duration and its bounds, the delivery count limit, the in-flight records per share partition, the
share sessions a broker keeps, the ``__share_group_state`` topic's shape and write timeout, and the
dead-letter topics' name prefix and auto-creation (KIP-1191).
Part of the node schema, `kraftlog.common.config._config_schema`; `check_share_keys` makes
Kafka's cross-key checks at start.
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftlog.common._config_def import ConfigDef, ConfigError, ConfigType, Range
from kraftlog.common.config._config_schema_topic import _I

__all__ = ["check_share_keys", "define_share_keys"]

_KEYS: tuple[tuple[str, int, Range, str], ...] = (
    (
        "group.share.record.lock.duration.ms",
        30_000,
        Range(1000, 3_600_000),
        "How long a record acquired by a share consumer stays with it before it is released.",
    ),
    (
        "group.share.min.record.lock.duration.ms",
        15_000,
        Range(1000, 30_000),
        "The smallest record lock duration a share group may use.",
    ),
    (
        "group.share.max.record.lock.duration.ms",
        60_000,
        Range(30_000, 3_600_000),
        "The largest record lock duration a share group may use.",
    ),
    (
        "group.share.delivery.count.limit",
        5,
        Range(2, 10),
        "The most delivery attempts of a record to a share group; a record at the limit is archived.",
    ),
    (
        "group.share.partition.max.record.locks",
        2000,
        Range(100, 10_000),
        "The most records in flight (between the start and end offsets) in one share partition.",
    ),
    (
        "group.share.max.share.sessions",
        2000,
        Range(1),
        "The most share sessions (ShareFetch sessions) a broker keeps; another is refused "
        "with SHARE_SESSION_LIMIT_REACHED.",
    ),
    (
        "share.coordinator.state.topic.num.partitions",
        50,
        Range(1),
        "Partitions of __share_group_state (should not change after deployment).",
    ),
    (
        "share.coordinator.state.topic.replication.factor",
        3,
        Range(1),
        "Replication factor of __share_group_state.",
    ),
    ("share.coordinator.state.topic.min.isr", 2, Range(1), "min.insync.replicas of __share_group_state."),
    (
        "share.coordinator.state.topic.segment.bytes",
        104_857_600,
        Range(1),
        "Segment size of __share_group_state.",
    ),
    (
        "share.coordinator.snapshot.update.records.per.snapshot",
        500,
        Range(0, 500),
        "ShareUpdate records the share coordinator writes for a share partition between two ShareSnapshots.",
    ),
    (
        "share.coordinator.write.timeout.ms",
        5000,
        Range(1),
        "How long the share coordinator waits for a write to __share_group_state to be replicated.",
    ),
    (
        "share.coordinator.load.buffer.size",
        5_242_880,
        Range(1),
        "Bytes read at a time when the share coordinator loads a partition of __share_group_state.",
    ),
)


def define_share_keys(defs: ConfigDef) -> None:
    """Add share groups' delivery keys and the share coordinator's keys to the node schema."""
    for key, default, validator, doc in _KEYS:
        defs.define(key, _I, default, validator, doc)
    defs.define(
        "errors.deadletterqueue.topic.name.prefix",
        ConfigType.STRING,
        "dlq.",
        None,
        "The prefix a share group's dead-letter topic must start with (KIP-1191); blank: any name.",
    )
    defs.define(
        "errors.deadletterqueue.auto.create.topics.enable",
        ConfigType.BOOLEAN,
        False,
        None,
        "Whether a share group's missing dead-letter topic is created at its first DLQ write (KIP-1191).",
    )


def check_share_keys(values: Mapping[str, object]) -> None:
    """Kafka's start-up checks of the record lock duration against its bounds (ConfigError naming the key)."""
    lock, low, high = (
        values["group.share.record.lock.duration.ms"],
        values["group.share.min.record.lock.duration.ms"],
        values["group.share.max.record.lock.duration.ms"],
    )
    assert isinstance(lock, int) and isinstance(low, int) and isinstance(high, int)
    if lock < low:
        raise ConfigError(
            "group.share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
            key="group.share.record.lock.duration.ms",
            value=lock,
        )
    if high < lock:
        raise ConfigError(
            "group.share.max.record.lock.duration.ms must be greater than or equal to "
            "group.share.record.lock.duration.ms",
            key="group.share.max.record.lock.duration.ms",
            value=high,
        )
