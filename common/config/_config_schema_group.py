"""A group's own config keys (Kafka 4.0's GroupConfig, config resource type GROUP), set with
IncrementalAlterConfigs and kept in the metadata log as ConfigRecords of that resource type.

Each key defaults to a broker key (its synonym) and is bounded by two others, as Kafka validates
it: ``consumer.session.timeout.ms`` within ``group.consumer.min/max.session.timeout.ms``,
``consumer.heartbeat.interval.ms`` within ``group.consumer.min/max.heartbeat.interval.ms``, and the
heartbeat interval below the session timeout. Share groups' keys (KIP-932):
``share.record.lock.duration.ms`` within ``group.share.min/max.record.lock.duration.ms``,
``share.auto.offset.reset`` (``latest``, ``earliest`` or ``by_duration:<ISO-8601 duration>``) and
``share.isolation.level`` (``read_uncommitted``, ``read_committed``), the last two with Kafka's
defaults and no broker synonym; the dead-letter topic of KIP-1191,
``errors.deadletterqueue.topic.name`` (blank: none; never a name starting with ``__``) and
``errors.deadletterqueue.copy.record.enable``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from kraftlog.common._config_def import ConfigDef, ConfigError, ConfigType, Custom, OneOf, Range

__all__ = ["GROUP_CONFIG_DEFS", "GROUP_CONFIG_SYNONYMS", "group_configs", "share_group_configs"]

_CONSUMER_KEYS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")
_SHARE_KEYS = (
    "share.record.lock.duration.ms",
    "share.auto.offset.reset",
    "share.isolation.level",
    "errors.deadletterqueue.topic.name",
    "errors.deadletterqueue.copy.record.enable",
)

_RESET = re.compile(
    r"^(latest|earliest|by_duration:P(?=\d|T\d)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d{1,3})?S)?)?)$", re.IGNORECASE
)

GROUP_CONFIG_DEFS: Final = ConfigDef("group")
(
    GROUP_CONFIG_DEFS.define(
        "consumer.session.timeout.ms",
        ConfigType.INT,
        45_000,
        Range(1),
        "Session timeout of this consumer group's members (KIP-848).",
    )
    .define(
        "consumer.heartbeat.interval.ms",
        ConfigType.INT,
        5_000,
        Range(1),
        "Heartbeat interval the coordinator gives this consumer group's members (KIP-848).",
    )
    .define(
        "share.record.lock.duration.ms",
        ConfigType.INT,
        30_000,
        Range(1000, 3_600_000),
        "How long a record acquired by a member of this share group stays with it (KIP-932).",
    )
    .define(
        "share.auto.offset.reset",
        ConfigType.STRING,
        "latest",
        Custom(
            lambda v: _RESET.match(str(v).strip()) is not None, "latest, earliest or by_duration:<ISO-8601 duration>"
        ),
        "Where a share partition of this group without a start offset starts (KIP-932).",
    )
    .define(
        "share.isolation.level",
        ConfigType.STRING,
        "read_uncommitted",
        OneOf("read_uncommitted", "read_committed"),
        "Whether this share group's members see records of open and aborted transactions (KIP-932).",
    )
    .define(
        "errors.deadletterqueue.topic.name",
        ConfigType.STRING,
        "",
        Custom(lambda v: not str(v).strip().startswith("__"), "a topic name not starting with __, or blank"),
        "The dead-letter topic of this share group (KIP-1191): records rejected or at the delivery "
        "count limit are written to it; blank (the default): none.",
    )
    .define(
        "errors.deadletterqueue.copy.record.enable",
        ConfigType.BOOLEAN,
        False,
        None,
        "Whether a DLQ record of this share group carries the original key and value, or only the "
        "context headers (KIP-1191).",
    )
)
GROUP_CONFIG_DEFS.freeze()

#: group key -> (the broker key it defaults to, the broker keys of its lower and upper bounds)
GROUP_CONFIG_SYNONYMS: Final[Mapping[str, tuple[str, str, str]]] = {
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "share.record.lock.duration.ms": (
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
}


def _effective(name: str, values: Mapping[str, str], broker: Callable[[str], Any]) -> Any:
    """One group key's effective value (see `group_configs`)."""
    spec = GROUP_CONFIG_DEFS[name]
    synonym = GROUP_CONFIG_SYNONYMS.get(name)
    if synonym is None:  # no broker synonym: the group's value or Kafka's default
        return spec.parse(values[name]) if name in values else spec.default
    default_key, low_key, high_key = synonym
    if name not in values:
        return int(broker(default_key))
    value = spec.parse(values[name])
    assert isinstance(value, int)
    low, high = int(broker(low_key)), int(broker(high_key))
    if value < low:
        raise ConfigError(f"{name} must be greater than or equal to {low_key} ({low})", key=name, value=value)
    if value > high:
        raise ConfigError(f"{name} must be less than or equal to {high_key} ({high})", key=name, value=value)
    return value


def _known(values: Mapping[str, str]) -> None:
    for name in values:
        if name not in GROUP_CONFIG_DEFS:
            raise ConfigError(f"Unknown group config name: {name}", key=name)


def group_configs(values: Mapping[str, str], broker: Callable[[str], Any]) -> dict[str, Any]:
    """A consumer group's keys' effective values: the group's own (``values``, as stored) or else
    the broker's default (``broker``: a broker key's value). Raises `ConfigError` (INVALID_CONFIG)
    for an unknown key, a value of the wrong type, or one outside the broker's bounds."""
    _known(values)
    out = {name: _effective(name, values, broker) for name in _CONSUMER_KEYS}
    if out["consumer.heartbeat.interval.ms"] >= out["consumer.session.timeout.ms"]:
        raise ConfigError("consumer.heartbeat.interval.ms must be less than consumer.session.timeout.ms")
    return out


def share_group_configs(values: Mapping[str, str], broker: Callable[[str], Any]) -> dict[str, Any]:
    """A share group's keys' effective values, as `group_configs` gives a consumer group's."""
    _known(values)
    return {name: _effective(name, values, broker) for name in _SHARE_KEYS}
