"""The config schema (`common.config`) is the one table of Kafka's topic defaults: storage's
`LogConfig` reads its defaults from it, and every key the controller accepts reaches the log."""

from __future__ import annotations

from kraftlog import storage
from kraftlog.common import config as common_config

VOTERS = {"node.id": 1, "process.roles": "broker,controller", "controller.quorum.voters": "1@127.0.0.1:9093"}


def test_default_topic_config_equals_log_config_defaults() -> None:
    cfg = common_config.NodeConfig.from_mapping(VOTERS)
    assert storage.LogConfig.from_properties(cfg.topic_defaults()) == storage.LogConfig()


def test_broker_log_keys_reach_the_log_config() -> None:
    cfg = common_config.NodeConfig.from_mapping(
        {
            **VOTERS,
            "log.segment.bytes": "1048576",
            "log.retention.hours": "1",
            "log.index.interval.bytes": "128",
            "log.cleanup.policy": "compact",
            "log.message.timestamp.type": "LogAppendTime",
        }
    )
    lc = storage.LogConfig.from_properties(cfg.topic_defaults())
    assert lc.segment_bytes == 1048576
    assert lc.retention_ms == 3_600_000
    assert lc.index_interval_bytes == 128
    assert lc.compact and not lc.delete
    assert lc.message_timestamp_type == storage.TimestampType.LOG_APPEND_TIME


def test_every_topic_key_is_understood_by_storage() -> None:
    validated = common_config.validate_topic_configs({"segment.bytes": "2048", "retention.ms": "-1"})
    lc = storage.LogConfig.from_properties(validated)
    assert lc.segment_bytes == 2048 and lc.retention_ms == -1
    # every key the controller accepts is accepted (or knowingly ignored) by storage
    defaults = common_config.NodeConfig.from_mapping(VOTERS).topic_defaults()
    for key in common_config.TOPIC_CONFIG_DEFS:
        assert key in defaults, key
        storage.LogConfig.from_properties({key: defaults[key]})
