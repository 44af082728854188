"""kraftlog: metadata_log.

Re-exports the node/topic configuration API so callers write ``from metadata_log import
load_node_config``. Kept to light, standard-library-only imports: every process imports this package.
"""

from metadata_log._config import (
    NO_DEFAULT,
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    TOPIC_SYNONYMS,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Custom,
    NodeConfig,
    OneOf,
    Password,
    Range,
    Validator,
    load_node_config,
    parse_listeners,
    parse_properties,
    parse_quorum_voters,
    read_config_file,
    validate_topic_configs,
)

__all__ = [
    "NO_DEFAULT",
    "NODE_CONFIG_DEFS",
    "TOPIC_CONFIG_DEFS",
    "TOPIC_SYNONYMS",
    "ConfigDef",
    "ConfigError",
    "ConfigKey",
    "ConfigType",
    "Custom",
    "NodeConfig",
    "OneOf",
    "Password",
    "Range",
    "Validator",
    "load_node_config",
    "parse_listeners",
    "parse_properties",
    "parse_quorum_voters",
    "read_config_file",
    "validate_topic_configs",
]
