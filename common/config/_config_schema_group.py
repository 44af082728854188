"""A group's own config keys (Kafka 4.0's GroupConfig, config resource type GROUP), set with
IncrementalAlterConfigs and kept in the metadata log as ConfigRecords of that resource type.

Each key defaults to a broker key (its synonym) and is bounded by two others, as Kafka validates
it: ``consumer.session.timeout.ms`` within ``group.consumer.min/max.session.timeout.ms``,
``consumer.heartbeat.interval.ms`` within ``group.consumer.min/max.heartbeat.interval.ms``, and the
heartbeat interval below the session timeout. The share-group keys come with share groups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kraftlog.common._config_def import ConfigDef, ConfigError, ConfigType, Range

__all__ = ["GROUP_CONFIG_DEFS", "GROUP_CONFIG_SYNONYMS", "group_configs"]

GROUP_CONFIG_DEFS: Final = ConfigDef("group")
(
    GROUP_CONFIG_DEFS.define(
        "consumer.session.timeout.ms",
        ConfigType.INT,
        45_000,
        Range(1),
        "Session timeout of this consumer group's members (KIP-848).",
    ).define(
        "consumer.heartbeat.interval.ms",
        ConfigType.INT,
        5_000,
        Range(1),
        "Heartbeat interval the coordinator gives this consumer group's members (KIP-848).",
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
}


def group_configs(values: Mapping[str, str], broker: Callable[[str], Any]) -> dict[str, int]:
    """Every group key's effective value: the group's own (``values``, as stored) or else the
    broker's default (``broker``: a broker key's value). Raises `ConfigError` (INVALID_CONFIG)
    for an unknown key, a value of the wrong type, or one outside the broker's bounds."""
    out: dict[str, int] = {}
    for name in values:
        if name not in GROUP_CONFIG_DEFS:
            raise ConfigError(f"Unknown group config name: {name}", key=name)
    for name, (default_key, low_key, high_key) in GROUP_CONFIG_SYNONYMS.items():
        if name not in values:
            out[name] = int(broker(default_key))
            continue
        value = GROUP_CONFIG_DEFS[name].parse(values[name])
        assert isinstance(value, int)
        low, high = int(broker(low_key)), int(broker(high_key))
        if value < low:
            raise ConfigError(f"{name} must be greater than or equal to {low_key} ({low})", key=name, value=value)
        if value > high:
            raise ConfigError(f"{name} must be less than or equal to {high_key} ({high})", key=name, value=value)
        out[name] = value
    if out["consumer.heartbeat.interval.ms"] >= out["consumer.session.timeout.ms"]:
        raise ConfigError("consumer.heartbeat.interval.ms must be less than consumer.session.timeout.ms")
    return out
