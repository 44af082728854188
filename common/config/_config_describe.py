"""What DescribeConfigs says about a key besides its value: Kafka's config type, its documentation,
and its synonyms, the layers its value could come from, in the order Kafka lists them.

Kafka answers a config with every place it is set, highest precedence first: the topic's own
dynamic config (``DYNAMIC_TOPIC_CONFIG``, Kafka's TOPIC_CONFIG), this broker's dynamic config
(``DYNAMIC_BROKER_CONFIG``), the cluster-wide dynamic default (``DYNAMIC_DEFAULT_BROKER_CONFIG``),
the static ``server.properties`` (``STATIC_BROKER_CONFIG``), and the key's default
(``DEFAULT_CONFIG``). Within a layer the broker keys come in precedence order (``log.retention.ms``,
``log.retention.minutes``, ``log.retention.hours``), each with its own value in its own unit. The
first synonym is where the value comes from, so it is also the entry's source. The schema
(`NODE_CONFIG_DEFS`, `TOPIC_CONFIG_DEFS`, `GROUP_CONFIG_DEFS`) is the one source of the types and
documentation; the controller and the CLI both read them from here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kraftlog.common._config_def import NO_DEFAULT, ConfigKey, ConfigType, Password
from kraftlog.common.config._config_schema import DYNAMIC_BROKER_KEYS, NODE_CONFIG_DEFS, TOPIC_SYNONYMS
from kraftlog.common.config._node_config import NodeConfig

__all__ = [
    "CONFIG_SOURCE_IDS",
    "CONFIG_TYPE_IDS",
    "ConfigSynonym",
    "DescribedConfig",
    "broker_key_synonyms",
    "describe_broker_configs",
    "config_type_name",
    "layered_synonyms",
    "node_defaults",
]

#: Kafka's DescribeConfigsResponse ConfigSource ids, by the names kraftlog's admin API uses
#: (Kafka calls id 1 TOPIC_CONFIG).
CONFIG_SOURCE_IDS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "UNKNOWN": 0,
        "DYNAMIC_TOPIC_CONFIG": 1,
        "DYNAMIC_BROKER_CONFIG": 2,
        "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
        "STATIC_BROKER_CONFIG": 4,
        "DEFAULT_CONFIG": 5,
        "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
        "CLIENT_METRICS_CONFIG": 7,
        "GROUP_CONFIG": 8,
    }
)

#: Kafka's DescribeConfigsResponse ConfigType ids (v3+), by name.
CONFIG_TYPE_IDS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "UNKNOWN": 0,
        "BOOLEAN": 1,
        "STRING": 2,
        "INT": 3,
        "SHORT": 4,
        "LONG": 5,
        "DOUBLE": 6,
        "LIST": 7,
        "CLASS": 8,
        "PASSWORD": 9,
    }
)


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One place a config's value could come from: a key, its value there (None when the key is
    sensitive or has no value), and the layer (a `CONFIG_SOURCE_IDS` name)."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One entry of a DescribeConfigs answer: the value (None: null, as for a sensitive key), its
    source (the first synonym's layer, DEFAULT_CONFIG when there is none), the synonyms, Kafka's
    type name and the schema's documentation ("" when the schema has none)."""

    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: str
    documentation: str

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


def config_type_name(key: ConfigKey | None) -> str:
    """Kafka's ConfigType name of a schema key (``LONG``, ``LIST``, ``PASSWORD``...); ``UNKNOWN``
    for a key the schema does not know. kraftlog's `ConfigType` names are Kafka's."""
    if key is None:
        return "UNKNOWN"
    name = key.type.name
    return name if name in CONFIG_TYPE_IDS else "UNKNOWN"


def broker_key_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that set one broker key's value, highest precedence first, as Kafka's
    ``DynamicBrokerConfig.brokerConfigSynonyms``: ``log.retention.ms``, ``.minutes`` and
    ``.hours`` are one group, as are ``log.roll.ms`` / ``.hours``, ``log.roll.jitter.ms`` /
    ``.hours`` and ``log.flush.interval.ms`` / ``log.flush.scheduler.interval.ms``; any other key
    stands alone. A caller drops the synonyms listed before ``name`` itself (Kafka's rule: the
    hours key of a broker shows no milliseconds key)."""
    for group in TOPIC_SYNONYMS.values():
        if name in group and len(group) > 1:
            return group
    return (name,)


def layered_synonyms(
    names: Sequence[str],
    layers: Sequence[tuple[str, Mapping[str, object]]],
    *,
    sensitive: bool,
) -> list[ConfigSynonym]:
    """Every (layer, key) pair where one of ``names`` is set, layer by layer in the order given and
    within a layer in the order of ``names``: Kafka's synonym order. A layer is its source name
    and the values set there (dynamic configs as stored, static values as parsed, defaults); a
    value of None is not set. Values are rendered as their key's schema renders them; a sensitive
    key's values are None."""
    out: list[ConfigSynonym] = []
    for source, values in layers:
        for name in names:
            if name not in values or values[name] is None:
                continue
            out.append(ConfigSynonym(name, None if sensitive else _render(name, values[name]), source))
    return out


def node_defaults(names: Sequence[str]) -> dict[str, object]:
    """The schema defaults of the broker keys ``names`` that have one (Kafka's
    ``staticDefaultConfigs``: a key whose default is null is in no layer)."""
    out: dict[str, object] = {}
    for name in names:
        key = NODE_CONFIG_DEFS.key_for(name)
        if key is not None and key.default is not NO_DEFAULT and key.default is not None:
            out[name] = key.default
    return out


def _render(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    key = NODE_CONFIG_DEFS.key_for(name)
    if key is not None:
        return key.format(value)
    if isinstance(value, Password):
        return Password.HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: the broker keys that can change without a restart: those that default a topic key


def describe_broker_configs(
    config: NodeConfig,
    own: Mapping[str, str],
    cluster_default: Mapping[str, str],
    wanted: Collection[str] = (),
) -> list[DescribedConfig]:
    """A broker's configs, by name: every schema key and every dynamic key (``wanted``: only
    those; empty: all). ``own`` is the broker's dynamic config (empty for the cluster-wide default
    resource), ``cluster_default`` the dynamic default, ``config`` the node config whose static
    values and defaults are the last two layers: the broker's own, when the broker answers.

    The value is the broker's dynamic one, else the dynamic default, else the node config's; the
    source is the first synonym's. Read-only unless the key can be changed dynamically (Kafka's
    rule); every PASSWORD-typed key is sensitive, with no value anywhere. A key's synonyms start at
    the key itself (Kafka drops those before it: ``log.retention.hours`` shows no
    ``log.retention.ms``)."""
    entries = []
    for key in sorted(set(own) | set(cluster_default) | set(NODE_CONFIG_DEFS)):
        if wanted and key not in wanted:
            continue
        definition = NODE_CONFIG_DEFS.key_for(key)
        sensitive = "password" in key or (definition is not None and definition.type is ConfigType.PASSWORD)
        names = broker_key_synonyms(key)
        layers: list[tuple[str, Mapping[str, object]]] = [
            ("DYNAMIC_BROKER_CONFIG", own),
            ("DYNAMIC_DEFAULT_BROKER_CONFIG", cluster_default),
            ("STATIC_BROKER_CONFIG", config.originals),
            ("DEFAULT_CONFIG", node_defaults(names)),
        ]
        listed = layered_synonyms(names, layers, sensitive=sensitive)
        own_at = next((i for i, s in enumerate(listed) if s.name == key), len(listed))
        synonyms = tuple(listed[own_at:])
        value: str | None
        if key in own:
            value = own[key]
        elif key in cluster_default:
            value = cluster_default[key]
        else:
            typed = config.get(key)
            value = None if typed is None else _render(key, typed)
        entries.append(
            DescribedConfig(
                name=key,
                value=None if sensitive else value,
                source=synonyms[0].source if synonyms else "DEFAULT_CONFIG",
                read_only=key not in DYNAMIC_BROKER_KEYS,
                is_sensitive=sensitive,
                synonyms=synonyms,
                config_type=config_type_name(definition),
                documentation=definition.doc if definition is not None else "",
            )
        )
    return entries
