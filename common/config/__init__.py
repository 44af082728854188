"""Node and topic configuration with Kafka's key names, types, defaults and validation rules.

Operators arrive with Kafka habits and Kafka files, so every key that exists in Kafka keeps Kafka's
name, type and default (docs/architecture.md §6) and a typo fails loudly at start-up instead of silently
falling back to a default. The same schema machinery validates topic-level configs for CreateTopics
and IncrementalAlterConfigs, and links each broker-level ``log.*`` key to the topic-level key it is
the default for, so ``NodeConfig.topic_defaults()`` resolves them with Kafka's precedence
(``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours`` and so on).

Files may be TOML or Java ``.properties``; ``--override key=value`` strings are applied last.

Why in the ground floor: the schema is read by every layer above it: storage takes its topic-level
defaults from it (`LogConfig`), the controller validates topic configs and answers DescribeConfigs
with node-level defaults and synonyms, brokers and controllers load their node config, and the CLI
and the launcher validate files before anything starts. Only a layer below all of them can hold it
once. ``ConfigError`` is Kafka's INVALID_CONFIG from the one error tree (`kraftlog.common.errors`),
and a ``ValueError`` as well, since a bad value is what it reports. The machinery is in
`_config_def`, the keys in `_config_schema`, file and address parsing in `_config_parse`,
`NodeConfig` and its loader in `_node_config`.
"""

from __future__ import annotations

from kraftlog.common._config_def import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Custom,
    OneOf,
    Password,
    Range,
    Validator,
)
from kraftlog.common.config._config_addresses import parse_listeners, parse_quorum_voters
from kraftlog.common.config._config_describe import (
    CONFIG_SOURCE_IDS,
    CONFIG_TYPE_IDS,
    ConfigSynonym,
    DescribedConfig,
    broker_key_synonyms,
    config_type_name,
    describe_broker_configs,
    layered_synonyms,
    node_defaults,
)
from kraftlog.common.config._config_parse import (
    parse_properties,
    read_config_file,
)
from kraftlog.common.config._config_schema import (
    DYNAMIC_BROKER_KEYS,
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    TOPIC_SYNONYMS,
)
from kraftlog.common.config._config_schema_connections import parse_ip_overrides
from kraftlog.common.config._config_schema_group import (
    GROUP_CONFIG_DEFS,
    GROUP_CONFIG_SYNONYMS,
    group_configs,
    share_group_configs,
)
from kraftlog.common.config._config_schema_inert import DYNAMIC_WITHOUT_EFFECT
from kraftlog.common.config._config_support import NOT_SUPPORTED, WITHOUT_EFFECT, keys_without_effect
from kraftlog.common.config._node_config import NodeConfig, load_node_config, validate_topic_configs

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "ConfigError",
    "ConfigType",
    "ConfigKey",
    "ConfigDef",
    "Validator",
    "Range",
    "OneOf",
    "Custom",
    "Password",
    "NO_DEFAULT",
    "NODE_CONFIG_DEFS",
    "NOT_SUPPORTED",
    "WITHOUT_EFFECT",
    "DYNAMIC_WITHOUT_EFFECT",
    "keys_without_effect",
    "TOPIC_CONFIG_DEFS",
    "TOPIC_SYNONYMS",
    "DYNAMIC_BROKER_KEYS",
    "GROUP_CONFIG_DEFS",
    "GROUP_CONFIG_SYNONYMS",
    "group_configs",
    "share_group_configs",
    "CONFIG_SOURCE_IDS",
    "CONFIG_TYPE_IDS",
    "ConfigSynonym",
    "DescribedConfig",
    "broker_key_synonyms",
    "describe_broker_configs",
    "config_type_name",
    "layered_synonyms",
    "node_defaults",
    "NodeConfig",
    "load_node_config",
    "read_config_file",
    "parse_properties",
    "parse_quorum_voters",
    "parse_listeners",
    "parse_ip_overrides",
    "validate_topic_configs",
]
