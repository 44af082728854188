"""Kafka 4.0 keys kraftlog has no machinery for (issue 25): a Kafka config file that sets them loads
(on main ``sasl.kerberos.service.name`` failed the start as an unknown key); values that would
change what the user gets are refused naming the key, Kafka's default is accepted."""

from __future__ import annotations

import pytest

from kraftlog.common.config import NOT_SUPPORTED, WITHOUT_EFFECT, ConfigError, NodeConfig, keys_without_effect

_BROKER = {
    "node.id": "3",
    "process.roles": "broker",
    "controller.quorum.voters": "2@127.0.0.1:9093",
    "log.dirs": "/tmp/kraftlog-test",
}

# what a Kafka 4.0 server.properties of a SCRAM/Kerberos shop typically carries
_KAFKA_FILE = {
    "sasl.kerberos.service.name": "kafka",
    "sasl.kerberos.principal.to.local.rules": "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//,DEFAULT",
    "sasl.kerberos.ticket.renew.window.factor": "0.9",
    "sasl.login.refresh.buffer.seconds": "120",
    "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
    "fetch.purgatory.purge.interval.requests": "100",
    "group.coordinator.threads": "8",
    "password.encoder.secret": "s3cret",
    "metrics.num.samples": "3",
    "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter",
    "eligible.leader.replicas.enable": "false",
    "offsets.topic.compression.codec": "0",
    "log.local.retention.ms": "-2",
    "controller.socket.timeout.ms": "30000",
    "ssl.allow.dn.changes": "false",
}


def test_a_kafka_file_with_these_keys_loads_and_the_inert_ones_are_reported() -> None:
    cfg = NodeConfig({**_BROKER, **_KAFKA_FILE})
    assert cfg["sasl.kerberos.service.name"] == "kafka"
    assert cfg["sasl.kerberos.ticket.renew.window.factor"] == 0.9
    reported = dict(keys_without_effect(cfg.originals))
    assert "sasl.kerberos.service.name" in reported and "GSSAPI" in reported["sasl.kerberos.service.name"]
    assert "fetch.purgatory.purge.interval.requests" in reported
    assert "eligible.leader.replicas.enable" not in reported  # set to what kraftlog behaves as


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("create.topic.policy.class.name", "com.example.Policy"),
        ("alter.config.policy.class.name", "com.example.Policy"),
        ("sasl.server.callback.handler.class", "com.example.Handler"),
        ("metric.reporters", "com.example.Reporter"),
        ("delegation.token.secret.key", "key"),
        ("remote.log.storage.system.enable", "true"),
        ("eligible.leader.replicas.enable", "true"),
        ("unstable.api.versions.enable", "true"),
        ("offsets.topic.compression.codec", "1"),
        ("ssl.provider", "SunJSSE"),
        ("replica.selector.class", "com.example.ClosestReplicaSelector"),  # RackAwareReplicaSelector is served
        ("log.local.retention.ms", "3600000"),
    ],
)
def test_a_value_that_would_silently_mislead_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig({**_BROKER, key: value})
    assert info.value.key == key


def test_a_bad_value_of_an_inert_key_is_still_a_bad_value() -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig({**_BROKER, "sasl.kerberos.min.time.before.relogin": "soon"})
    assert info.value.key == "sasl.kerberos.min.time.before.relogin"


def test_the_tables_stay_apart() -> None:
    assert not set(WITHOUT_EFFECT) & set(NOT_SUPPORTED)
    assert {"sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd"} <= set(WITHOUT_EFFECT)
