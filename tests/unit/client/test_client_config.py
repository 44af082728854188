"""The clients' properties on common's ConfigDef: one place for defaults, one way to parse."""

from __future__ import annotations

import inspect

import pytest

from kraftlog.client import (
    Consumer,
    Producer,
    ShareConsumer,
    UnsupportedConfigError,
    consumer_config_from_properties,
    producer_config_from_properties,
)
from kraftlog.client._config import CONSUMER_CONFIG, PRODUCER_CONFIG, SHARE_CONSUMER_CONFIG, ClientConfig
from kraftlog.common.config import NO_DEFAULT, ConfigError


@pytest.mark.parametrize(
    ("config", "cls"),
    [(PRODUCER_CONFIG, Producer), (CONSUMER_CONFIG, Consumer), (SHARE_CONSUMER_CONFIG, ShareConsumer)],
)
def test_constructor_defaults_are_the_config_defaults(config: ClientConfig, cls: type) -> None:
    params = inspect.signature(cls.__init__).parameters
    for key, definition in config.definitions.items():
        keyword = config.keyword(key)
        assert keyword in params, f"{key} maps to {keyword}, which {cls.__name__} does not take"
        if definition.default is not NO_DEFAULT:
            assert params[keyword].default == definition.default, key


def test_kafka_defaults_kept() -> None:
    assert PRODUCER_CONFIG.default("acks") == "all"
    assert PRODUCER_CONFIG.default("linger.ms") == 5
    assert PRODUCER_CONFIG.default("enable.idempotence") is None  # on whenever acks, retries allow
    assert CONSUMER_CONFIG.default("auto.offset.reset") == "latest"
    assert CONSUMER_CONFIG.default("client.id") == "kraftlog-consumer"
    with pytest.raises(KeyError):
        PRODUCER_CONFIG.default("bootstrap.servers")


@pytest.mark.parametrize("parse", [producer_config_from_properties, consumer_config_from_properties])
def test_booleans_parse_one_way(parse: object) -> None:
    assert callable(parse)
    config, _ = parse({"allow.auto.create.topics": " FALSE "})
    assert config == {"allow_auto_topic_creation": False}
    with pytest.raises(ConfigError, match="allow.auto.create.topics.*true or false"):
        parse({"allow.auto.create.topics": "yes"})


def test_values_parse_and_errors_name_the_key() -> None:
    config, unknown = producer_config_from_properties(
        {"retries": "3", "transactional.id": " ", "enable.idempotence": "true", "x": "1"}
    )
    assert config == {"retries": 3, "transactional_id": None, "enable_idempotence": True}
    assert unknown == ["x"]
    with pytest.raises(ValueError, match="'batch.size'"):
        producer_config_from_properties({"batch.size": "big"})
    config, _ = consumer_config_from_properties({"group.id": "g", "session.timeout.ms": "45000", "check.crcs": "true"})
    assert config == {"group_id": "g", "session_timeout_ms": 45000, "check_crcs": True}


def test_refusals_name_the_key_and_ignored_keys_pass_silently() -> None:
    with pytest.raises(UnsupportedConfigError, match="partitioner.ignore.keys=true is not supported yet"):
        producer_config_from_properties({"partitioner.ignore.keys": "true"})
    with pytest.raises(UnsupportedConfigError, match="value.deserializer"):
        consumer_config_from_properties({"value.deserializer": "x.LongDeserializer"})
    assert producer_config_from_properties({"client.id": "p", "send.buffer.bytes": "1"}) == ({}, [])
    assert consumer_config_from_properties({"receive.buffer.bytes": "1"}) == ({}, [])
