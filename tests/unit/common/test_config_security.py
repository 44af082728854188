"""Security keys of a node config: Kafka's names and defaults, listener prefixes, JAAS entries."""

from __future__ import annotations

import pytest

from kraftlog.common._config_def import ConfigError, Password
from kraftlog.common.config import NodeConfig, load_node_config
from kraftlog.common.security._config_schema_security import parse_jaas_config
from kraftlog.common.security._tls import listener_prefix, prefixed_setting

_BROKER = {
    "node.id": 1,
    "process.roles": "broker",
    "controller.quorum.voters": "0@127.0.0.1:9093",
    "listeners": "BROKER://:9091,PLAINTEXT://:9092",
}


def test_security_keys_have_kafkas_defaults() -> None:
    cfg = NodeConfig(_BROKER)
    assert cfg["ssl.client.auth"] == "none"
    assert cfg["ssl.keystore.type"] == "JKS"
    assert cfg["ssl.endpoint.identification.algorithm"] == "https"
    assert cfg["ssl.enabled.protocols"] == ["TLSv1.2", "TLSv1.3"]
    assert cfg["sasl.enabled.mechanisms"] == ["GSSAPI"]
    assert cfg["authorizer.class.name"] == ""
    assert cfg["allow.everyone.if.no.acl.found"] is False


def test_a_listener_prefix_wins_for_its_listener_only() -> None:
    cfg = NodeConfig({**_BROKER, "ssl.client.auth": "requested", "listener.name.plaintext.ssl.client.auth": "required"})
    assert prefixed_setting(cfg, "ssl.client.auth", listener_prefix("PLAINTEXT")) == "required"
    assert prefixed_setting(cfg, "ssl.client.auth", listener_prefix("BROKER")) == "requested"


def test_a_prefixed_key_is_validated_as_its_unprefixed_twin() -> None:
    with pytest.raises(ConfigError, match="listener.name.plaintext.ssl.client.auth") as err:
        NodeConfig({**_BROKER, "listener.name.plaintext.ssl.client.auth": "sometimes"})
    assert err.value.key == "listener.name.plaintext.ssl.client.auth"


def test_a_prefix_for_an_unknown_listener_or_key_fails_at_start() -> None:
    with pytest.raises(ConfigError, match="not in 'listeners'"):
        NodeConfig({**_BROKER, "listener.name.external.ssl.client.auth": "required"})
    with pytest.raises(ConfigError, match="only ssl"):
        NodeConfig({**_BROKER, "listener.name.plaintext.log.dirs": "/tmp/x"})


def test_a_prefixed_jaas_config_is_a_secret_in_dumps(tmp_path) -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret";'
    cfg = NodeConfig({**_BROKER, "listener.name.plaintext.scram-sha-256.sasl.jaas.config": jaas})
    value = cfg["listener.name.plaintext.scram-sha-256.sasl.jaas.config"]
    assert isinstance(value, Password)
    dumped = cfg.to_properties()
    assert "s3cret" not in dumped and "scram-sha-256.sasl.jaas.config=[hidden]" in dumped
    path = tmp_path / "node.properties"
    path.write_text(cfg.to_properties(mask_passwords=False))
    again = load_node_config(path)
    assert again["listener.name.plaintext.scram-sha-256.sasl.jaas.config"] == value


def test_jaas_entries_of_kafkas_password_login_modules_parse() -> None:
    kind, options = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p w\\"x";'
    )
    assert kind == "SCRAM" and options == {"username": "alice", "password": 'p w"x'}
    kind, options = parse_jaas_config(
        Password('org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b" username=bob ;')
    )
    assert kind == "PLAIN" and options == {"user_bob": "b", "username": "bob"}


@pytest.mark.parametrize(
    "text",
    [
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
        'org.apache.kafka.common.security.scram.ScramLoginModule optional username="a";',
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a"',
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" !!;',
    ],
)
def test_other_jaas_entries_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_jaas_config(Password(text), key="sasl.jaas.config")
    assert err.value.key == "sasl.jaas.config"
    assert 'username="a"' not in str(err.value)


def test_keys_kraftlog_does_not_honour_are_refused() -> None:
    # connections.max.reauth.ms was refused here until re-authentication was built (issue 25)
    assert NodeConfig({**_BROKER, "connections.max.reauth.ms": 60000})["connections.max.reauth.ms"] == 60000
    with pytest.raises(ConfigError, match="ssl.engine.factory.class"):
        NodeConfig({**_BROKER, "ssl.engine.factory.class": "com.example.Engine"})


def test_the_nodes_need_a_login_for_their_own_sasl_grpc_listeners() -> None:
    sasl = {
        **_BROKER,
        "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        NodeConfig(sasl)  # Kafka's default GSSAPI is not offered
    with pytest.raises(ConfigError) as err:
        NodeConfig({**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    assert err.value.key == "listener.name.broker.scram-sha-512.sasl.jaas.config"
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="node" password="p";'
    NodeConfig(
        {
            **sasl,
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.broker.scram-sha-512.sasl.jaas.config": jaas,
        }
    )


def test_plain_needs_tls_and_its_users() -> None:
    plain = {
        **_BROKER,
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
    }
    with pytest.raises(ConfigError, match="only over TLS"):
        NodeConfig(plain)


def test_the_inter_broker_keys_must_name_the_grpc_listener() -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig({**_BROKER, "inter.broker.listener.name": "PLAINTEXT"})
    assert err.value.key == "inter.broker.listener.name"
    NodeConfig({**_BROKER, "inter.broker.listener.name": "BROKER"})
    with pytest.raises(ConfigError) as err:
        NodeConfig({**_BROKER, "security.inter.broker.protocol": "SSL"})
    assert err.value.key == "security.inter.broker.protocol"


def test_tls_settings_grpc_cannot_honour_are_refused_on_grpc_listeners_only() -> None:
    tls = {
        **_BROKER,
        "listener.security.protocol.map": "BROKER:SSL,PLAINTEXT:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/kraftlog/tls/node.keystore.pem",
    }
    with pytest.raises(ConfigError) as err:
        NodeConfig({**tls, "ssl.client.auth": "requested"})
    assert err.value.key == "ssl.client.auth"
    NodeConfig({**tls, "listener.name.plaintext.ssl.client.auth": "requested"})  # a Kafka listener may
