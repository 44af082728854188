"""DescribeConfigs' config types, documentation and synonyms (issue 25): the synonyms in Kafka's order
(dynamic topic, dynamic broker, dynamic default broker, static broker, default), each key with its
own value, the first naming the entry's source; types and documentation from the schema."""

from __future__ import annotations

from typing import Any

from kraftlog.common.config import (
    GROUP_CONFIG_DEFS,
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    broker_key_synonyms,
    config_type_name,
    layered_synonyms,
    node_defaults,
)
from kraftlog.common.config._config_describe import ConfigSynonym
from tests.unit.quorum.test_controller import BROKER, SET, TOPIC, cluster

GROUP = 32


def synonyms(entry: Any) -> list[tuple[str, str | None, str]]:
    return [(s.name, s.value if s.has_value else None, s.source) for s in entry.synonyms]


def by_name(result: Any) -> dict[str, Any]:
    assert result.error.name == "NONE"
    return {c.name: c for c in result.configs}


def test_a_topic_key_lists_every_layer_in_kafkas_order() -> None:
    h = cluster(2, {"log.retention.hours": 100})
    h.create("t", 1, 1, configs={"retention.ms": "123456"})
    h.alter_configs(
        (BROKER, "", [("log.retention.minutes", SET, "600")]),
        (BROKER, "1", [("log.retention.ms", SET, "7000000")]),
    )
    e = by_name(h.describe_configs(TOPIC, "t", ["retention.ms"], synonyms=True, broker_id=1))["retention.ms"]
    assert (e.value, e.source, e.is_default, e.config_type) == ("123456", "DYNAMIC_TOPIC_CONFIG", False, "LONG")
    assert synonyms(e) == [
        ("retention.ms", "123456", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.ms", "7000000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.minutes", "600", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    # asked through broker 2, broker 1's own config is in no layer
    e = by_name(h.describe_configs(TOPIC, "t", ["retention.ms"], synonyms=True, broker_id=2))["retention.ms"]
    assert [s[0] for s in synonyms(e)] == [
        "retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.retention.hours",
    ]


def test_the_first_synonym_is_the_source_and_gives_the_value_in_the_topic_unit() -> None:
    h = cluster(2, {"log.retention.hours": 100})
    h.create("t", 1, 1)
    e = by_name(h.describe_configs(TOPIC, "t", ["retention.ms"], synonyms=True, broker_id=1))["retention.ms"]
    assert (e.value, e.source) == (str(100 * 3_600_000), "STATIC_BROKER_CONFIG")
    h.alter_configs((BROKER, "1", [("log.retention.minutes", SET, "5")]))
    e = by_name(h.describe_configs(TOPIC, "t", ["retention.ms"], synonyms=True, broker_id=1))["retention.ms"]
    assert (e.value, e.source, e.is_default) == ("300000", "DYNAMIC_BROKER_CONFIG", False)
    assert synonyms(e)[0] == ("log.retention.minutes", "5", "DYNAMIC_BROKER_CONFIG")
    # unset everywhere: the default layer alone; a key without a broker synonym has none
    segment = by_name(h.describe_configs(TOPIC, "t", ["segment.bytes"], synonyms=True))["segment.bytes"]
    assert (segment.source, segment.is_default, synonyms(segment)) == (
        "DEFAULT_CONFIG",
        True,
        [("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")],
    )


def test_synonyms_and_documentation_only_when_asked() -> None:
    h = cluster(1)
    h.create("t", 1, 1, configs={"cleanup.policy": "compact"})
    plain = by_name(h.describe_configs(TOPIC, "t"))
    assert all(not c.synonyms and not c.HasField("documentation") for c in plain.values())
    assert plain["cleanup.policy"].config_type == "LIST"  # the type is always there (v3+)
    full = by_name(h.describe_configs(TOPIC, "t", synonyms=True, documentation=True))
    for name, entry in full.items():
        assert entry.documentation == TOPIC_CONFIG_DEFS[name].doc and entry.documentation, name
        assert entry.config_type == TOPIC_CONFIG_DEFS[name].type.name, name
        assert entry.synonyms and entry.synonyms[0].source == entry.source, name


def test_a_broker_key_starts_its_synonyms_at_itself() -> None:
    h = cluster(1, {"log.retention.hours": 100, "num.io.threads": 16})
    h.alter_configs((BROKER, "1", [("log.retention.ms", SET, "7000000")]))
    e = by_name(h.describe_configs(BROKER, "1", synonyms=True, documentation=True))
    assert (e["log.retention.ms"].value, e["log.retention.ms"].source) == ("7000000", "DYNAMIC_BROKER_CONFIG")
    assert synonyms(e["log.retention.ms"]) == [
        ("log.retention.ms", "7000000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert synonyms(e["log.retention.hours"]) == [
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert (e["log.retention.hours"].value, e["log.retention.hours"].source) == ("100", "STATIC_BROKER_CONFIG")
    io = e["num.io.threads"]
    assert (io.value, io.source, io.read_only, io.config_type) == ("16", "STATIC_BROKER_CONFIG", True, "INT")
    assert synonyms(io) == [("num.io.threads", "16", "STATIC_BROKER_CONFIG"), ("num.io.threads", "8", "DEFAULT_CONFIG")]
    assert io.documentation == NODE_CONFIG_DEFS["num.io.threads"].doc
    assert not e["log.retention.ms"].read_only  # dynamically updatable


def test_a_sensitive_broker_key_hides_every_synonym_value() -> None:
    h = cluster(1, {"ssl.key.password": "k3y"})
    e = by_name(h.describe_configs(BROKER, "1", ["ssl.key.password"], synonyms=True))["ssl.key.password"]
    assert (e.is_sensitive, e.has_value, e.config_type, e.source) == (True, False, "PASSWORD", "STATIC_BROKER_CONFIG")
    assert synonyms(e) == [("ssl.key.password", None, "STATIC_BROKER_CONFIG")]
    assert "k3y" not in str(e)


def test_a_group_key_has_one_synonym_naming_itself() -> None:
    h = cluster(1)
    h.alter_configs((GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")]))
    e = by_name(h.describe_configs(GROUP, "g", synonyms=True, documentation=True))
    assert synonyms(e["consumer.session.timeout.ms"]) == [("consumer.session.timeout.ms", "50000", "GROUP_CONFIG")]
    assert synonyms(e["consumer.heartbeat.interval.ms"]) == [
        ("consumer.heartbeat.interval.ms", "5000", "DEFAULT_CONFIG")
    ]
    assert e["consumer.session.timeout.ms"].config_type == "INT"
    assert e["consumer.session.timeout.ms"].documentation == GROUP_CONFIG_DEFS["consumer.session.timeout.ms"].doc


def test_the_describe_helpers() -> None:
    assert broker_key_synonyms("log.retention.hours") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert broker_key_synonyms("log.roll.hours") == ("log.roll.ms", "log.roll.hours")
    assert broker_key_synonyms("num.io.threads") == ("num.io.threads",)
    assert config_type_name(NODE_CONFIG_DEFS["log.dirs"]) == "LIST"
    assert config_type_name(None) == "UNKNOWN"
    assert node_defaults(["log.retention.ms", "log.retention.hours"]) == {"log.retention.hours": 168}
    layers = [("STATIC_BROKER_CONFIG", {"b": 2, "a": True}), ("DEFAULT_CONFIG", {"a": None, "b": 3})]
    assert layered_synonyms(["a", "b"], layers, sensitive=False) == [
        ConfigSynonym("a", "true", "STATIC_BROKER_CONFIG"),
        ConfigSynonym("b", "2", "STATIC_BROKER_CONFIG"),
        ConfigSynonym("b", "3", "DEFAULT_CONFIG"),
    ]
    assert layered_synonyms(["b"], layers, sensitive=True) == [
        ConfigSynonym("b", None, "STATIC_BROKER_CONFIG"),
        ConfigSynonym("b", None, "DEFAULT_CONFIG"),
    ]
