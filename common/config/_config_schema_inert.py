"""Kafka 4.0 node keys that tune or plug in machinery kraftlog does not have (issue 25): a Kafka
config file that sets them loads, instead of failing as unknown keys.

Two kinds, each with Kafka's name, type and default, and the reason `_config_support` reports:

* `INERT_WITHOUT_EFFECT`: nothing the user gets changes when kraftlog ignores them: Kerberos and
  OAUTHBEARER tuning (GSSAPI and OAUTHBEARER are refused in ``sasl.enabled.mechanisms``, so these
  keys have nothing to tune), purgatory purge intervals, thread counts and socket buffers, the
  password encoder of dynamic configs, JMX-style metric sampling. Accepted with the start-up warning.
* `INERT_NOT_SUPPORTED`: a value other than Kafka's default would change what the user gets
  (a Java plug-in class, delegation tokens, tiered storage, ELR by key (it is a feature version),
  unstable APIs, a compressed ``__consumer_offsets``), so kraftlog refuses such a value at start,
  naming the key, rather than silently not doing it; Kafka's default is accepted.

Part of the node schema (`kraftlog.common.config._config_schema`); docs/configuration.md lists
every key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from kraftlog.common._config_def import ConfigDef, ConfigType
from kraftlog.common.config._config_schema_topic import _B, _D, _I, _L, _LS, _P, _S

__all__ = ["DYNAMIC_WITHOUT_EFFECT", "INERT_NOT_SUPPORTED", "INERT_WITHOUT_EFFECT", "define_inert_keys"]

_KERBEROS = "GSSAPI is not served (sasl.enabled.mechanisms refuses it), so there is no Kerberos login to tune"
_OAUTH = "OAUTHBEARER is not served (sasl.enabled.mechanisms refuses it), so there is no token login to tune"
_PURGATORY = "the purgatories drop a completed operation from its watch lists at once, not by a purge interval"
_NO_POOLS = "requests are served by one asyncio server (gRPC or Kafka) per listener, not by thread pools"
_PASSWORDS = "kraftlog keeps no encoded passwords in dynamic configs (SCRAM credentials are salted hashes)"
_SAMPLING = "metrics are Prometheus counters and gauges read at each scrape, not sampled in windows"
_TOKENS = "kraftlog has no delegation tokens (KIP-48)"
_PLUGIN = "kraftlog loads no Java classes"
_GRPC_DEADLINES = (
    "calls between nodes are gRPC calls with deadlines of their own (controller.quorum.request.timeout.ms)"
)
_GRPC_CONNECT = "connections between nodes are gRPC channels, which reconnect with gRPC's back-off"
_NO_RELOAD = "the ssl.* material is read at start and never reloaded, so there is no change to allow"

#: key -> (type, Kafka 4.0's default, why it has no effect)
_WITHOUT_EFFECT: Final[Mapping[str, tuple[ConfigType, object, str]]] = {
    "sasl.kerberos.kinit.cmd": (_S, "/usr/bin/kinit", _KERBEROS),
    "sasl.kerberos.min.time.before.relogin": (_L, 60_000, _KERBEROS),
    "sasl.kerberos.principal.to.local.rules": (_LS, ["DEFAULT"], _KERBEROS),
    "sasl.kerberos.service.name": (_S, None, _KERBEROS),
    "sasl.kerberos.ticket.renew.jitter": (_D, 0.05, _KERBEROS),
    "sasl.kerberos.ticket.renew.window.factor": (_D, 0.8, _KERBEROS),
    "sasl.login.refresh.buffer.seconds": (_I, 300, _OAUTH),
    "sasl.login.refresh.min.period.seconds": (_I, 60, _OAUTH),
    "sasl.login.refresh.window.factor": (_D, 0.8, _OAUTH),
    "sasl.login.refresh.window.jitter": (_D, 0.05, _OAUTH),
    "sasl.login.connect.timeout.ms": (_I, None, _OAUTH),
    "sasl.login.read.timeout.ms": (_I, None, _OAUTH),
    "sasl.login.retry.backoff.max.ms": (_L, 10_000, _OAUTH),
    "sasl.login.retry.backoff.ms": (_L, 100, _OAUTH),
    "sasl.oauthbearer.clock.skew.seconds": (_I, 30, _OAUTH),
    "sasl.oauthbearer.expected.audience": (_LS, None, _OAUTH),
    "sasl.oauthbearer.expected.issuer": (_S, None, _OAUTH),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_L, 3_600_000, _OAUTH),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (_L, 10_000, _OAUTH),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (_L, 100, _OAUTH),
    "sasl.oauthbearer.jwks.endpoint.url": (_S, None, _OAUTH),
    "sasl.oauthbearer.scope.claim.name": (_S, "scope", _OAUTH),
    "sasl.oauthbearer.sub.claim.name": (_S, "sub", _OAUTH),
    "sasl.oauthbearer.token.endpoint.url": (_S, None, _OAUTH),
    "fetch.purgatory.purge.interval.requests": (_I, 1000, _PURGATORY),
    "producer.purgatory.purge.interval.requests": (_I, 1000, _PURGATORY),
    "delete.records.purgatory.purge.interval.requests": (_I, 1, _PURGATORY),
    "num.replica.alter.log.dirs.threads": (_I, None, "partitions are not moved between log dirs of one broker"),
    "group.coordinator.threads": (_I, 4, "the coordinators run on the broker's event loop, not in thread pools"),
    "share.coordinator.threads": (_I, 1, "the share coordinator runs on the event loop, as every coordinator"),
    "replica.socket.receive.buffer.bytes": (_I, 65_536, "followers fetch over gRPC, which sizes its sockets' buffers"),
    "transaction.state.log.load.buffer.size": (_I, 5_242_880, "a coordinator loads its partition batch by batch"),
    "password.encoder.secret": (_P, None, _PASSWORDS),
    "password.encoder.old.secret": (_P, None, _PASSWORDS),
    "password.encoder.keyfactory.algorithm": (_S, None, _PASSWORDS),
    "password.encoder.cipher.algorithm": (_S, "AES/CBC/PKCS5Padding", _PASSWORDS),
    "password.encoder.key.length": (_I, 128, _PASSWORDS),
    "password.encoder.iterations": (_I, 4096, _PASSWORDS),
    "delegation.token.expiry.time.ms": (_L, 86_400_000, _TOKENS),
    "delegation.token.max.lifetime.ms": (_L, 604_800_000, _TOKENS),
    "delegation.token.expiry.check.interval.ms": (_L, 3_600_000, _TOKENS),
    "metrics.num.samples": (_I, 2, _SAMPLING),
    "metrics.sample.window.ms": (_L, 30_000, _SAMPLING),
    "metrics.recording.level": (_S, "INFO", _SAMPLING),
    "kafka.metrics.polling.interval.secs": (_I, 10, _SAMPLING),
    "telemetry.max.bytes": (_I, 1_048_576, "kraftlog takes no client telemetry (KIP-714)"),
    "controller.socket.timeout.ms": (_I, 30_000, _GRPC_DEADLINES),
    "socket.connection.setup.timeout.ms": (_L, 10_000, _GRPC_CONNECT),
    "socket.connection.setup.timeout.max.ms": (_L, 30_000, _GRPC_CONNECT),
    "ssl.allow.dn.changes": (_B, False, _NO_RELOAD),
    "ssl.allow.san.changes": (_B, False, _NO_RELOAD),
}


def _only(*accepted: object) -> Callable[[object], bool]:
    return lambda value: value in accepted


def _no_class(value: object) -> bool:
    return value in (None, "", [])


#: key -> (type, Kafka 4.0's default, what kraftlog does instead, whether a value is one it behaves as)
_NOT_SUPPORTED: Final[Mapping[str, tuple[ConfigType, object, str, Callable[[object], bool]]]] = {
    "alter.config.policy.class.name": (_S, None, f"{_PLUGIN}: config changes are checked by its schema", _no_class),
    "create.topic.policy.class.name": (_S, None, f"{_PLUGIN}: topics are checked by its own rules", _no_class),
    "sasl.server.callback.handler.class": (_S, None, f"{_PLUGIN}: SASL is checked by SCRAM/PLAIN", _no_class),
    "sasl.client.callback.handler.class": (_S, None, _PLUGIN, _no_class),
    "sasl.login.callback.handler.class": (_S, None, _PLUGIN, _no_class),
    "sasl.login.class": (_S, None, _PLUGIN, _no_class),
    "security.providers": (_S, None, f"{_PLUGIN}: TLS and SCRAM are OpenSSL's and Python's", _no_class),
    "kafka.metrics.reporters": (_LS, [], f"{_PLUGIN}: metrics are served at metrics.port", _no_class),
    "metric.reporters": (
        _LS,
        ["org.apache.kafka.common.metrics.JmxReporter"],
        f"{_PLUGIN}: metrics are served at metrics.port (JMX's default is accepted)",
        lambda value: _no_class(value) or value == ["org.apache.kafka.common.metrics.JmxReporter"],
    ),
    "delegation.token.secret.key": (_P, None, f"{_TOKENS}; a secret key would enable them", _only(None)),
    "remote.log.storage.system.enable": (_B, False, "kraftlog has no tiered storage (KIP-405)", _only(False)),
    "eligible.leader.replicas.enable": (
        _B,
        False,
        "ELR (KIP-966) is the feature eligible.leader.replicas.version, set with kraftlog features upgrade as in"
        " Kafka 4, not this 3.x broker key",
        _only(False),
    ),
    "unstable.api.versions.enable": (_B, False, "only stable API versions are served", _only(False)),
    "unstable.feature.versions.enable": (_B, False, "only stable feature versions are served", _only(False)),
    "offsets.topic.compression.codec": (_I, 0, "__consumer_offsets batches are written uncompressed", _only(0)),
    "ssl.provider": (_S, None, "TLS is OpenSSL's, configured by the ssl.* keys", _only(None)),
    "log.local.retention.ms": (_L, -2, "kraftlog has no tiered storage (KIP-405); -2 is accepted", _only(-2)),
    "log.local.retention.bytes": (_L, -2, "kraftlog has no tiered storage (KIP-405); -2 is accepted", _only(-2)),
    "queued.max.request.bytes": (
        _L,
        -1,
        "request memory is bounded per connection and by produce.validation.max.bytes, not by one pool",
        _only(-1),
    ),
}

INERT_WITHOUT_EFFECT: Final[Mapping[str, str]] = {key: why for key, (_t, _d, why) in _WITHOUT_EFFECT.items()}

#: The keys of `INERT_WITHOUT_EFFECT` that Kafka 4.0 reconfigures on a running broker (the SASL keys of
#: DynamicListenerConfig): AlterConfigs / IncrementalAlterConfigs on a BROKER resource accept them, as
#: Kafka does (librdkafka's 0081 sets ``sasl.kerberos.min.time.before.relogin``), and they stay without
#: effect. Kafka's other reconfigurable SASL keys (``sasl.enabled.mechanisms``, ``sasl.jaas.config``)
#: would change what kraftlog serves, so they remain static here.
DYNAMIC_WITHOUT_EFFECT: Final[frozenset[str]] = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
    }
)
INERT_NOT_SUPPORTED: Final[Mapping[str, tuple[str, Callable[[object], bool]]]] = {
    key: (instead, accepted) for key, (_t, _d, instead, accepted) in _NOT_SUPPORTED.items()
}


def define_inert_keys(defs: ConfigDef) -> None:
    """Add the keys of both tables to the node schema, with Kafka's types and defaults."""
    for key, (type_, default, why) in _WITHOUT_EFFECT.items():
        defs.define(key, type_, default, None, f"Accepted without effect: {why}.")
    for key, (type_, default, instead, _accepted) in _NOT_SUPPORTED.items():
        defs.define(key, type_, default, None, f"Only Kafka's default is accepted: {instead}.")
