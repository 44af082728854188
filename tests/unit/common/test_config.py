"""Node and topic configuration: Kafka's keys and defaults, file formats, errors, precedence."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from _hypothesis_budget import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kraftlog.common.config import (
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    ConfigError,
    NodeConfig,
    Password,
    load_node_config,
    parse_properties,
    parse_quorum_voters,
    validate_topic_configs,
)
from kraftlog.common.config._config_schema_topic import TOPIC_KEYS_WITHOUT_BROKER_DEFAULT

LONG_MAX = 2**63 - 1

BASE = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@localhost:9093",
}

TOML_TEXT = """\
node.id = 1
process.roles = ["broker", "controller"]
controller.quorum.voters = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
listeners = ["PLAINTEXT://127.0.0.1:9092", "CONTROLLER://127.0.0.1:9093"]
controller.listener.names = ["CONTROLLER"]
"log.retention.hours" = 24
num.partitions = 3
unclean.leader.election.enable = true
controller.quorum.raft.password = "s3cret"
"log.cleaner.min.cleanable.ratio" = 0.25

[log]
dirs = ["/var/lib/kraftlog/a", "/var/lib/kraftlog/b"]
segment.bytes = 104857600
"""

PROPERTIES_TEXT = """\
# Same content as TOML_TEXT, written the way Kafka's server.properties is.
node.id=1
process.roles=broker,controller
controller.quorum.voters=1@127.0.0.1:9093,\\
    2@127.0.0.1:9094,\\
    3@127.0.0.1:9095
listeners = PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names: CONTROLLER
log.retention.hours 24
! another comment style
num.partitions=3
unclean.leader.election.enable=TRUE
controller.quorum.raft.password=s3cret
log.cleaner.min.cleanable.ratio=0.25
log.dirs=/var/lib/kraftlog/a,/var/lib/kraftlog/b
log.segment.bytes=104857600
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(settings: dict[str, object]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        NodeConfig({**BASE, **settings})
    return caught.value


# --- file formats ------------------------------------------------------------------------------


def test_toml_and_properties_with_the_same_content_give_the_same_config(tmp_path: Path) -> None:
    from_toml = load_node_config(_write(tmp_path, "node.toml", TOML_TEXT))
    from_props = load_node_config(_write(tmp_path, "node.properties", PROPERTIES_TEXT))
    assert from_toml == from_props
    assert dict(from_toml.originals) == dict(from_props.originals)
    assert from_toml.node_id == 1
    assert from_toml.roles == ("broker", "controller")
    assert from_toml.log_dirs == ["/var/lib/kraftlog/a", "/var/lib/kraftlog/b"]
    assert from_toml["log.segment.bytes"] == 104_857_600
    assert from_toml["unclean.leader.election.enable"] is True
    assert from_toml["log.cleaner.min.cleanable.ratio"] == 0.25
    assert from_toml.quorum_voters == {
        1: ("127.0.0.1", 9093),
        2: ("127.0.0.1", 9094),
        3: ("127.0.0.1", 9095),
    }


def test_unknown_suffix_is_detected(tmp_path: Path) -> None:
    from_toml = load_node_config(_write(tmp_path, "node.conf", TOML_TEXT))
    from_props = load_node_config(_write(tmp_path, "server.cfg", PROPERTIES_TEXT))
    assert from_toml == from_props


def test_quoted_toml_keys_and_sections_flatten_to_dotted_names(tmp_path: Path) -> None:
    text = '"node.id" = 2\n"process.roles" = "broker"\n[controller.quorum]\nvoters = "1@h:9093"\n'
    cfg = load_node_config(_write(tmp_path, "n.toml", text))
    assert cfg.node_id == 2
    assert cfg.quorum_voters == {1: ("h", 9093)}


def test_toml_key_set_twice_through_quoting_and_a_section_fails(tmp_path: Path) -> None:
    text = 'node.id = 1\n"log.dirs" = "/a"\n[log]\ndirs = "/b"\n'
    with pytest.raises(ConfigError) as caught:
        load_node_config(_write(tmp_path, "n.toml", text))
    assert caught.value.key == "log.dirs"


def test_invalid_toml_and_missing_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_node_config(_write(tmp_path, "bad.toml", "node.id = = 1\n"))
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_node_config(tmp_path / "missing.toml")
    # A classic TOML trap with Kafka's dotted names: the error says how to fix it.
    with pytest.raises(ConfigError, match="quote those keys"):
        load_node_config(_write(tmp_path, "trap.toml", "log.retention.hours = 1\n[log]\ndirs = '/a'\n"))


def test_properties_parser_follows_java_util_properties() -> None:
    text = (
        "  a = b\\\n"
        "      c\n"
        "# comment = x\n"
        "   ! also a comment\n"
        "key\\ with\\ blanks : v\\u0041\\tz\n"
        "colon:value\n"
        "blank value\n"
        "sep==x\n"
        "empty\n"
        "trailing=\\\\\n"
        "dup=1\n"
        "dup=2\n"
    )
    assert parse_properties(text) == {
        "a": "bc",
        "key with blanks": "vA\tz",
        "colon": "value",
        "blank": "value",
        "sep": "=x",
        "empty": "",
        "trailing": "\\",
        "dup": "2",
    }


def test_properties_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("a=1,\\\n#2\n") == {"a": "1,#2"}


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "node.toml", TOML_TEXT)
    cfg = load_node_config(path, ["num.partitions=7", "log.dirs = /data/x", "log.retention.ms=1000"])
    assert cfg["num.partitions"] == 7
    assert cfg.log_dirs == ["/data/x"]
    assert cfg.topic_defaults()["retention.ms"] == 1000
    assert cfg.originals["num.partitions"] == 7


def test_overrides_alone_and_malformed_overrides() -> None:
    cfg = load_node_config(None, ["node.id=0", "process.roles=controller", "controller.quorum.voters=0@h:1"])
    assert cfg.node_id == 0 and cfg.is_controller and not cfg.is_broker
    with pytest.raises(ConfigError, match="not key=value"):
        load_node_config(None, ["node.id"])


# --- defaults ----------------------------------------------------------------------------------


def test_kafka_defaults() -> None:
    cfg = NodeConfig(BASE)
    expected = {
        "controller.quorum.election.timeout.ms": 1000,
        "controller.quorum.fetch.timeout.ms": 2000,
        "controller.quorum.request.timeout.ms": 2000,
        "log.dir": ["/tmp/kafka-logs"],
        "log.dirs": None,
        "metadata.log.max.record.bytes.between.snapshots": 20 * 1024 * 1024,
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "unclean.leader.election.enable": False,
        "replica.lag.time.max.ms": 30_000,
        "auto.create.topics.enable": True,
        "auto.leader.rebalance.enable": True,
        "leader.imbalance.check.interval.seconds": 300,
        "leader.imbalance.per.broker.percentage": 10,
        "delete.topic.enable": True,
        "broker.heartbeat.interval.ms": 2000,
        "broker.session.timeout.ms": 9000,
        "message.max.bytes": 1_048_588,
        "log.segment.bytes": 1024**3,
        "log.roll.hours": 168,
        "log.retention.hours": 168,
        "log.retention.minutes": None,
        "log.retention.ms": None,
        "log.retention.bytes": -1,
        "log.index.interval.bytes": 4096,
        "log.index.size.max.bytes": 10 * 1024 * 1024,
        "log.flush.interval.messages": LONG_MAX,
        "log.flush.interval.ms": None,
        "log.retention.check.interval.ms": 300_000,
        "log.cleaner.delete.retention.ms": 86_400_000,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 50,
        "controller.quorum.fsync": True,
        "controller.quorum.raft.password": None,
        "metrics.port": -1,
    }
    assert {key: cfg[key] for key in expected} == expected
    assert cfg.get("no.such.key") is None
    with pytest.raises(KeyError):
        cfg["no.such.key"]


def test_every_broker_log_key_names_an_existing_topic_key() -> None:
    linked = {key.topic_key for key in NODE_CONFIG_DEFS.values() if key.topic_key}
    # KIP-1191's errors.deadletterqueue.group.enable is the one topic key Kafka gives no broker default
    assert linked == set(TOPIC_CONFIG_DEFS) - TOPIC_KEYS_WITHOUT_BROKER_DEFAULT
    assert TOPIC_KEYS_WITHOUT_BROKER_DEFAULT == {"errors.deadletterqueue.group.enable"}


def test_config_is_immutable() -> None:
    cfg = NodeConfig(BASE)
    with pytest.raises(AttributeError):
        cfg.node_id = 5
    with pytest.raises(TypeError):
        cfg["num.partitions"] = 5
    with pytest.raises(TypeError):
        cfg.originals["num.partitions"] = 5
    dirs = cfg.log_dirs
    dirs.append("/elsewhere")
    assert cfg.log_dirs == ["/tmp/kafka-logs"]


def test_config_pickles_and_copies() -> None:
    cfg = NodeConfig({**BASE, "controller.quorum.raft.password": "s3cret", "log.dirs": "/a,/b"})
    restored = pickle.loads(pickle.dumps(cfg))
    assert restored == cfg
    assert dict(restored.originals) == dict(cfg.originals)
    assert copy.deepcopy(cfg) == cfg


def test_log_dirs_takes_precedence_over_log_dir() -> None:
    assert NodeConfig({**BASE, "log.dir": "/one"}).log_dirs == ["/one"]
    both = NodeConfig({**BASE, "log.dir": "/one", "log.dirs": "/a,/b"})
    assert both.log_dirs == ["/a", "/b"]
    assert both.metadata_log_dir == "/a"
    assert NodeConfig({**BASE, "metadata.log.dir": "/meta"}).metadata_log_dir == "/meta"


# --- errors ------------------------------------------------------------------------------------


def test_unknown_key_names_the_key_and_the_closest_known_one() -> None:
    err = _error({"log.segment.byte": "1024"})
    assert err.key == "log.segment.byte"
    assert str(err) == "unknown config key 'log.segment.byte' (did you mean 'log.segment.bytes'?)"


def test_membership_asks_no_suggestion_and_a_missing_key_still_gets_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """``key in config`` is a look-up: Mapping's default went through ``config[key]``, whose
    KeyError carries a "did you mean" found by difflib over every known key (~20 ms a miss), and
    every TLS listener asks for each ssl.* key whether its ``listener.name.<l>.`` form is set."""
    from kraftlog.common.config import _node_config

    config = NodeConfig.from_mapping(BASE)
    suggest = _node_config.NODE_CONFIG_DEFS.suggest
    monkeypatch.setattr(_node_config.NODE_CONFIG_DEFS, "suggest", lambda name: pytest.fail(f"suggested for {name}"))
    assert "listener.name.broker.ssl.keystore.location" not in config and 42 not in config
    assert "node.id" in config
    monkeypatch.setattr(_node_config.NODE_CONFIG_DEFS, "suggest", suggest)
    with pytest.raises(KeyError, match="did you mean 'log.segment.bytes'"):
        config["log.segment.byte"]


def test_topic_key_in_a_node_file_suggests_its_broker_synonym() -> None:
    err = _error({"retention.ms": "1000"})
    assert "did you mean 'log.retention.ms'" in str(err)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("num.partitions", "abc", "invalid value 'abc' for 'num.partitions': expected an integer >= 1"),
        ("num.partitions", "0", "expected an integer >= 1"),
        ("num.partitions", 1.5, "expected an integer >= 1"),
        ("num.partitions", True, "expected an integer >= 1"),
        ("num.partitions", "3000000000", "out of the 32-bit range"),
        ("log.retention.bytes", "1.5GB", "expected an integer"),
        ("log.retention.bytes", str(2**63), "out of the 64-bit range"),
        ("log.cleaner.min.cleanable.ratio", "half", "expected a number in [0, 1]"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "expected a number in [0, 1]"),
        ("auto.create.topics.enable", "yes", "expected true or false"),
        ("broker.rack", 7, "expected a string"),
        ("log.message.timestamp.type", "BrokerTime", "expected one of [CreateTime, LogAppendTime]"),
        ("compression.type", "brotli", "expected one of [producer, none, gzip, snappy, lz4, zstd, uncompressed]"),
        ("log.cleanup.policy", "delete,archive", "expected a comma-separated list of values from [delete, compact]"),
        ("process.roles", "broker,zookeeper", "'zookeeper' is not allowed"),
        ("listeners", "PLAINTEXT:9092", "expected a comma-separated list of NAME://host:port"),
        ("log.segment.bytes", "13", "expected an integer >= 14"),
        ("metrics.port", "70000", "expected an integer in [-1, 65535]"),
    ],
)
def test_bad_values_name_key_value_and_expectation(key: str, value: object, expected: str) -> None:
    err = _error({key: value})
    assert err.key == key
    assert err.value == value
    message = str(err)
    assert f"for {key!r}" in message
    assert repr(value) in message
    assert expected in message


def test_a_rejected_password_is_not_shown_either() -> None:
    err = _error({"sasl.scram.unknown.user.secret": "tooshort"})
    assert err.key == "sasl.scram.unknown.user.secret"
    assert "tooshort" not in str(err) and "expected at least 16 characters" in str(err)


def test_bad_password_value_never_shows_the_secret() -> None:
    err = _error({"controller.quorum.raft.password": 12345})
    assert err.key == "controller.quorum.raft.password"
    assert "12345" not in str(err)
    assert "expected a string" in str(err)


def test_password_is_hidden_in_repr_and_properties() -> None:
    cfg = NodeConfig({**BASE, "controller.quorum.raft.password": "s3cret"})
    secret = cfg["controller.quorum.raft.password"]
    assert isinstance(secret, Password)
    assert secret.value == "s3cret"
    assert "s3cret" not in repr(cfg)
    assert "s3cret" not in cfg.to_properties()
    assert "controller.quorum.raft.password=s3cret" in cfg.to_properties(mask_passwords=False)


def test_cross_key_checks() -> None:
    assert _error({"node.id": None}).key == "node.id"
    missing_id = {key: value for key, value in BASE.items() if key != "node.id"}
    with pytest.raises(ConfigError) as caught:
        NodeConfig(missing_id)
    assert caught.value.key == "node.id"

    assert _error({"node.id": "-1"}).key == "node.id"
    assert _error({"process.roles": ""}).key == "process.roles"
    assert _error({"process.roles": "broker,broker"}).key == "process.roles"

    not_a_voter = _error({"node.id": "5"})
    assert not_a_voter.key == "controller.quorum.voters"
    assert "node.id 5" in str(not_a_voter)

    broker_voter = _error({"process.roles": "broker"})
    assert broker_voter.key == "process.roles"

    assert _error({"controller.quorum.voters": ""}).key == "controller.quorum.voters"
    assert _error({"replica.fetch.wait.max.ms": "40000"}).key == "replica.fetch.wait.max.ms"
    assert _error({"log.dirs": ""}).key == "log.dirs"

    broker_only = NodeConfig({"node.id": 4, "process.roles": "broker", "controller.quorum.voters": "1@c1:9093"})
    assert broker_only.is_broker and not broker_only.is_controller


# --- precedence and topic defaults -------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "retention_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.minutes": "5", "log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_precedence(settings: dict[str, str], retention_ms: int) -> None:
    assert NodeConfig({**BASE, **settings}).topic_defaults()["retention.ms"] == retention_ms


def test_roll_and_flush_precedence() -> None:
    cfg = NodeConfig({**BASE, "log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert cfg.topic_defaults()["segment.ms"] == 7_200_000
    assert cfg.topic_defaults()["segment.jitter.ms"] == 3_600_000
    cfg = NodeConfig({**BASE, "log.roll.hours": "2", "log.roll.ms": "5000", "log.roll.jitter.ms": "7"})
    assert cfg.topic_defaults()["segment.ms"] == 5000
    assert cfg.topic_defaults()["segment.jitter.ms"] == 7
    assert NodeConfig(BASE).topic_defaults()["flush.ms"] == LONG_MAX
    assert NodeConfig({**BASE, "log.flush.scheduler.interval.ms": "9"}).topic_defaults()["flush.ms"] == 9
    both = NodeConfig({**BASE, "log.flush.scheduler.interval.ms": "9", "log.flush.interval.ms": "3"})
    assert both.topic_defaults()["flush.ms"] == 3


def test_topic_defaults_follow_broker_keys() -> None:
    defaults = NodeConfig(BASE).topic_defaults()
    assert set(defaults) == set(TOPIC_CONFIG_DEFS)
    assert defaults["segment.bytes"] == 1024**3
    assert defaults["max.message.bytes"] == 1_048_588
    assert defaults["cleanup.policy"] == ["delete"]
    assert defaults["min.cleanable.dirty.ratio"] == 0.5
    cfg = NodeConfig(
        {
            **BASE,
            "log.segment.bytes": "2048",
            "log.cleanup.policy": "compact,delete",
            "log.index.interval.bytes": "128",
            "log.index.size.max.bytes": "4096",
            "message.max.bytes": "5000",
            "log.message.timestamp.type": "LogAppendTime",
            "log.cleaner.delete.retention.ms": "10",
            "log.segment.delete.delay.ms": "11",
            "log.preallocate": "true",
            "min.insync.replicas": "2",
            "compression.type": "zstd",
            "log.flush.interval.messages": "100",
            "log.retention.bytes": "1000000",
        }
    )
    defaults = cfg.topic_defaults()
    assert defaults["segment.bytes"] == 2048
    assert defaults["cleanup.policy"] == ["compact", "delete"]
    assert defaults["index.interval.bytes"] == 128
    assert defaults["segment.index.bytes"] == 4096
    assert defaults["max.message.bytes"] == 5000
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["delete.retention.ms"] == 10
    assert defaults["file.delete.delay.ms"] == 11
    assert defaults["preallocate"] is True
    assert defaults["min.insync.replicas"] == 2
    assert defaults["compression.type"] == "zstd"
    assert defaults["flush.messages"] == 100
    assert defaults["retention.bytes"] == 1_000_000


# --- voters ------------------------------------------------------------------------------------


def test_parse_quorum_voters() -> None:
    assert parse_quorum_voters("1@host:9093,2@host:9094") == {1: ("host", 9093), 2: ("host", 9094)}
    assert parse_quorum_voters(" 3@[::1]:9093 , 4@10.0.0.4:9093 ") == {3: ("::1", 9093), 4: ("10.0.0.4", 9093)}
    assert parse_quorum_voters(["1@a:1"]) == {1: ("a", 1)}
    assert parse_quorum_voters("") == {}


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("1@host", "not id@host:port"),
        ("x@host:9093", "not id@host:port"),
        ("1@:9093", "empty host"),
        ("1@host:0", "outside 1..65535"),
        ("1@host:70000", "outside 1..65535"),
        ("1@a:1,1@b:2", "duplicate voter id 1"),
        ("1@a:1,2@a:1", "share the endpoint a:1"),
    ],
)
def test_parse_quorum_voters_errors(value: str, detail: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_quorum_voters(value)
    assert caught.value.key == "controller.quorum.voters"
    assert detail in str(caught.value)
    assert _error({"controller.quorum.voters": value}).key == "controller.quorum.voters"


# --- topic configs -----------------------------------------------------------------------------


def test_validate_topic_configs_returns_typed_values() -> None:
    assert validate_topic_configs(
        {
            "cleanup.policy": "compact",
            "retention.ms": "-1",
            "segment.bytes": "1048576",
            "min.insync.replicas": "2",
            "compression.type": "lz4",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "false",
        }
    ) == {
        "cleanup.policy": ["compact"],
        "retention.ms": -1,
        "segment.bytes": 1_048_576,
        "min.insync.replicas": 2,
        "compression.type": "lz4",
        "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": 0.1,
        "preallocate": False,
    }
    assert validate_topic_configs({}) == {}


@pytest.mark.parametrize(
    ("configs", "key", "fragment"),
    [
        ({"retention.ms": "-2"}, "retention.ms", "expected an integer >= -1"),
        ({"segment.bytes": "13"}, "segment.bytes", "expected an integer >= 14"),
        ({"cleanup.policy": "archive"}, "cleanup.policy", "[delete, compact]"),
        ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable", "true or false"),
        ({"segmnet.bytes": "1"}, "segmnet.bytes", "did you mean 'segment.bytes'"),
        ({"log.retention.ms": "1"}, "log.retention.ms", "did you mean 'retention.ms'"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms", "must not exceed"),
    ],
)
def test_validate_topic_configs_errors(configs: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs(configs)
    assert caught.value.key == key
    assert fragment in str(caught.value)


# --- round trip --------------------------------------------------------------------------------


def test_to_properties_round_trips(tmp_path: Path) -> None:
    cfg = load_node_config(_write(tmp_path, "node.toml", TOML_TEXT), ["broker.rack=rack 1: east"])
    text = cfg.to_properties(mask_passwords=False)
    again = load_node_config(_write(tmp_path, "again.properties", text))
    assert again == cfg
    assert dict(again.originals) == dict(cfg.originals)
    full = cfg.to_properties(include_defaults=True, mask_passwords=False)
    assert load_node_config(_write(tmp_path, "full.properties", full)) == cfg


# ------------------------------------------------------------------------------ keys without effect

_BROKER = {
    "node.id": 1,
    "process.roles": "broker",
    "controller.quorum.voters": "2@127.0.0.1:9093",
    "log.dirs": "/tmp/kraftlog-test",
}


def test_every_accepted_key_works_or_is_classified() -> None:
    from kraftlog.common.config import NOT_SUPPORTED, WITHOUT_EFFECT

    assert not set(WITHOUT_EFFECT) & set(NOT_SUPPORTED)
    for key in [*WITHOUT_EFFECT, *NOT_SUPPORTED]:
        NODE_CONFIG_DEFS[key]  # every classified key is one the schema defines


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("metadata.max.idle.interval.ms", "100"),
        ("metadata.max.retention.ms", "1000"),
        ("metadata.log.segment.ms", "60000"),
        ("controller.listener.names", "CTRL"),
        ("advertised.listeners", "BROKER://0.0.0.0:9092"),
    ],
)
def test_a_value_kraftlog_would_ignore_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig({**_BROKER, key: value})
    assert info.value.key == key


def test_values_kraftlog_behaves_as_are_accepted() -> None:
    for key, value in [
        ("metadata.max.idle.interval.ms", "0"),
        ("metadata.max.retention.ms", "-1"),
        ("metadata.max.idle.interval.ms", "500"),  # Kafka's default: a dumped config loads again
        ("controller.listener.names", "CONTROLLER"),
        ("listener.security.protocol.map", "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        ("advertised.listeners", "BROKER://broker-1.example:19092"),
    ]:
        NodeConfig({**_BROKER, key: value})


def test_keys_without_effect_are_reported_for_the_start_up_warning() -> None:
    from kraftlog.common.config import keys_without_effect

    cfg = NodeConfig(
        {
            **_BROKER,
            "num.network.threads": "16",
            "num.io.threads": "16",  # sizes the produce-validation pool (issue 24): has an effect
            "metadata.max.idle.interval.ms": "500",
            "log.segment.bytes": 1 << 20,
        }
    )
    reported = dict(keys_without_effect(cfg.originals))
    assert set(reported) == {"num.network.threads", "metadata.max.idle.interval.ms"}
    assert "thread pools" in reported["num.network.threads"]


def test_advertised_listeners_are_what_the_broker_registers() -> None:
    from kraftlog.broker._listeners import advertised_broker_listener, broker_listener

    cfg = NodeConfig(
        {
            **_BROKER,
            "listeners": "BROKER://0.0.0.0:9092",
            "advertised.listeners": "BROKER://broker-1.example:19092",
        }
    )
    assert broker_listener(cfg) == ("0.0.0.0", 9092)  # where it binds
    assert advertised_broker_listener(cfg) == ("broker-1.example", 19092)  # what clients are told
    plain = NodeConfig({**_BROKER, "listeners": "BROKER://127.0.0.1:9092"})
    assert advertised_broker_listener(plain) == ("127.0.0.1", 9092)


def test_the_manual_lists_every_key_without_effect_and_every_refused_one() -> None:
    from kraftlog.common.config import NOT_SUPPORTED, WITHOUT_EFFECT

    readme = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [key for key in [*WITHOUT_EFFECT, *NOT_SUPPORTED] if f"`{key}`" not in readme]
    assert missing == []


# javaproperties is the oracle of the hand-written reader and writer (the ground floor may not
# import it: see common.config._config_parse.parse_properties)
_PROPERTIES_ALPHABET = st.sampled_from(list("ab=: \t\\#!\n\r\fuU0123456789é") + ["\\u00e9", "\\u12", "\r\n"])


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_PROPERTIES_ALPHABET, max_size=40).map("".join))
def test_properties_reader_agrees_with_javaproperties(text: str) -> None:
    import javaproperties

    try:
        expected = javaproperties.loads(text)
    except javaproperties.InvalidUEscapeError:
        with pytest.raises(ConfigError):
            parse_properties(text)
        return
    # A backslash continuing into the very end of the text: java.util.Properties.load still returns
    # what the line holds, an empty key and value when nothing (its LineReader checks for an empty
    # line before dropping the backslash); javaproperties drops an empty one. We follow Java.
    assume(not text.endswith("\\"))
    assert parse_properties(text) == dict(expected)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
def test_properties_writer_is_read_back_by_javaproperties(value: str) -> None:
    import javaproperties

    cfg = NodeConfig({**_BROKER, "broker.rack": value}) if value.strip() == value and value else None
    if cfg is None:
        return
    assert javaproperties.loads(cfg.to_properties())["broker.rack"] == value


def test_topic_defaults_take_dynamic_broker_configs_key_by_key() -> None:
    """Dynamic broker configs (the cluster default, then the broker's own) override the static ones
    key by key, as Kafka's DynamicBrokerConfig; the topics' defaults follow them. A key that is not
    dynamic, or a value that does not parse, is ignored."""
    cfg = NodeConfig({**BASE, "log.retention.hours": "100", "log.segment.bytes": "4096"})
    cluster_default = {"log.retention.minutes": "600", "log.segment.bytes": "8192", "node.id": "9"}
    own = {"log.segment.bytes": "16384", "min.insync.replicas": "not-a-number"}
    defaults = cfg.topic_defaults(cluster_default, own)
    assert defaults["retention.ms"] == 600 * 60_000  # minutes (dynamic) before hours (static)
    assert defaults["segment.bytes"] == 16384  # the broker's own over the cluster default
    assert defaults["min.insync.replicas"] == 1
    assert cfg.topic_defaults()["segment.bytes"] == 4096
    assert cfg.topic_defaults({"log.retention.ms": "5000"}, {})["retention.ms"] == 5000
