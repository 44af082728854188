"""Which of Kafka's node config keys kraftlog accepts without giving them an effect, and what it does
with a value set for one: an option that is accepted either works or says so.

* `WITHOUT_EFFECT`: keys that tune machinery kraftlog does not have (thread pools, socket buffers,
  the cleaner's fixed buffers) or that belong to features not built yet (share groups). A value
  set for one is accepted, because a Kafka config file carries them, and
  logged once at start as a warning naming the key and the reason.
* `NOT_SUPPORTED`: keys whose value would change what the user gets if kraftlog ignored it. A node
  whose config sets one to anything but the value kraftlog behaves as refuses to start, naming the
  key (`ConfigError`); the value it behaves as is accepted.

docs/configuration.md lists both. Keys in neither table work as Kafka documents them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from kraftlog.common._config_def import ConfigError
from kraftlog.common.config._config_schema import NODE_CONFIG_DEFS
from kraftlog.common.config._config_schema_inert import INERT_NOT_SUPPORTED, INERT_WITHOUT_EFFECT
from kraftlog.common.security import listener_prefixed_key

__all__ = ["NOT_SUPPORTED", "WITHOUT_EFFECT", "check_supported", "keys_without_effect"]

_NO_POOLS = "requests are served by one asyncio server (gRPC or Kafka) per listener, not by thread pools"
_CLEANER_BUFFERS = "the log cleaner's offset map grows with the data instead of living in fixed buffers"

WITHOUT_EFFECT: Final[Mapping[str, str]] = {
    "background.threads": _NO_POOLS,
    "num.network.threads": _NO_POOLS,
    "queued.max.requests": _NO_POOLS,
    "socket.send.buffer.bytes": "the gRPC and Kafka listeners leave their sockets' buffers to gRPC and the OS",
    "socket.receive.buffer.bytes": "the gRPC and Kafka listeners leave their sockets' buffers to gRPC and the OS",
    "num.recovery.threads.per.data.dir": "logs are recovered one after another at start",
    "num.replica.fetchers": "a follower runs one fetch stream per leader broker",
    "replica.socket.timeout.ms": "a follower's fetch is bounded by replica.fetch.wait.max.ms and the request timeout",
    "log.cleaner.dedupe.buffer.size": _CLEANER_BUFFERS,
    "log.cleaner.io.buffer.size": _CLEANER_BUFFERS,
    "log.cleaner.io.buffer.load.factor": _CLEANER_BUFFERS,
    "log.flush.start.offset.checkpoint.interval.ms": (
        "log start offsets are checkpointed with the recovery points, every log.flush.offset.checkpoint.interval.ms"
    ),
    "controller.quorum.append.linger.ms": "the active controller commits what one event-loop turn produced at once",
    "controller.quorum.election.backoff.max.ms": "elections back off by the randomized election timeout",
    "initial.broker.registration.timeout.ms": "a starting broker keeps trying to register until it is stopped",
    "ssl.keymanager.algorithm": "TLS keys are read from PEM (KIP-651) by OpenSSL, not by a Java key manager",
    "ssl.trustmanager.algorithm": "TLS trust is checked by OpenSSL against the PEM trust store",
    "ssl.secure.random.implementation": "TLS randomness comes from OpenSSL",
    **INERT_WITHOUT_EFFECT,
}


def _only(*accepted: object) -> Callable[[object], bool]:
    return lambda value: value in accepted


#: key -> (what kraftlog does instead, whether a value is one kraftlog behaves as)
NOT_SUPPORTED: Final[Mapping[str, tuple[str, Callable[[object], bool]]]] = {
    "metadata.log.segment.ms": (
        "metadata log segments roll by size only (metadata.log.segment.bytes)",
        _only(None),
    ),
    "metadata.max.retention.ms": (
        "metadata snapshots and segments are kept by size only (metadata.max.retention.bytes); -1 is accepted",
        _only(-1),
    ),
    "metadata.max.idle.interval.ms": (
        "the active controller appends no idle no-op records (brokers learn the committed offset from "
        "heartbeat answers); 0 is accepted",
        _only(0),
    ),
    "ssl.engine.factory.class": ("TLS is OpenSSL's, configured by the ssl.* keys", _only(None)),
    "principal.builder.class": (
        "principals are User:<certificate subject after ssl.principal.mapping.rules> or User:<SASL name>",
        _only(None, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ),
    "controller.listener.names": (
        "the controller listener is the one named CONTROLLER",
        lambda value: value is None or value == ["CONTROLLER"],
    ),
    **INERT_NOT_SUPPORTED,
}


def check_supported(values: Mapping[str, object], explicit: Mapping[str, object]) -> None:
    """Refuse an explicitly set key whose value kraftlog would not honour (`ConfigError` names it).

    Kafka's default value is let through (with the start-up warning of `keys_without_effect`): a
    config dump that includes defaults must load again, and it changes nothing kraftlog does."""
    for key, (instead, accepted) in NOT_SUPPORTED.items():
        if key in explicit and not accepted(values[key]) and values[key] != _default(key):
            raise ConfigError(f"'{key}' = {values[key]!r} is not supported: {instead}", key=key, value=values[key])
    for entry in _items(values.get("advertised.listeners")):
        host = str(entry).split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            raise ConfigError(
                f"'advertised.listeners' entry {entry!r} must name a host clients can reach",
                key="advertised.listeners",
                value=values["advertised.listeners"],
            )
    ordered_names = [str(item).split("://", 1)[0].upper() for item in _items(values.get("listeners"))]
    listener_names = set(ordered_names)
    for key in explicit:
        found = listener_prefixed_key(NODE_CONFIG_DEFS, key)
        if found is not None and found[0] not in listener_names:
            raise ConfigError(
                f"'{key}' is set for listener {found[0]}, which is not in 'listeners'", key=key, value=explicit[key]
            )
    super_users = values.get("super.users")
    if isinstance(super_users, str):
        from kraftlog.common.security import parse_super_users

        try:
            parse_super_users(super_users)
        except ValueError as err:
            raise ConfigError(str(err), key="super.users", value=super_users) from None
    from kraftlog.common.security import grpc_listener_name

    broker_grpc = grpc_listener_name(ordered_names)
    grpc_names = {"CONTROLLER", broker_grpc}  # CONTROLLER: the voters' gRPC addresses
    _check_inter_broker(values, explicit, broker_grpc)
    for name in sorted(listener_names | {"CONTROLLER"}):
        _check_listener_security(values, name, grpc=name in grpc_names)


def _check_inter_broker(values: Mapping[str, object], explicit: Mapping[str, object], grpc_name: str | None) -> None:
    """Brokers replicate over their gRPC listener: the inter-broker keys must name it, or be unset."""
    from kraftlog.common.security import listener_protocol

    named = values.get("inter.broker.listener.name")
    if named is not None and grpc_name is not None and str(named).upper() != grpc_name:
        raise ConfigError(
            f"'inter.broker.listener.name' = {named!r}: brokers reach each other over their gRPC listener "
            f"({grpc_name}); name it or leave the key unset",
            key="inter.broker.listener.name",
            value=named,
        )
    if "security.inter.broker.protocol" in explicit and grpc_name is not None:
        protocol = listener_protocol(values, grpc_name)
        if values["security.inter.broker.protocol"] != protocol:
            raise ConfigError(
                f"'security.inter.broker.protocol' = {values['security.inter.broker.protocol']!r} but the brokers' "
                f"gRPC listener {grpc_name}, which they replicate over, is {protocol}",
                key="security.inter.broker.protocol",
                value=values["security.inter.broker.protocol"],
            )


def _check_listener_security(values: Mapping[str, object], name: str, *, grpc: bool) -> None:
    """A secured listener's keys must make sense now, not at its first connection."""
    from kraftlog.common.security import ListenerSecurity

    security = ListenerSecurity.from_config(values, name)
    if grpc and security.tls is not None:
        from kraftlog.common.security import grpc_unsupported_keys

        refused = grpc_unsupported_keys(security.tls, server=True)
        if refused:
            prefixed = f"listener.name.{name.lower()}.{refused[0]}"
            raise ConfigError(
                f"gRPC listener {name} cannot honour {', '.join(refused)} as set (grpc's credentials take "
                "certificates and required-or-no client auth only): keep the defaults on the gRPC listeners, "
                "or set them for the Kafka listeners with listener.name.<listener>.",
                key=prefixed if prefixed in values else refused[0],
            )
    if grpc and security.uses_sasl:
        security.node_login(values)  # the nodes log in to their own gRPC listeners: with what?


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def keys_without_effect(explicit: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(key, why)`` for each explicitly set key that kraftlog accepts without effect, for the one
    warning a node logs at start: those of `WITHOUT_EFFECT`, and those of `NOT_SUPPORTED` set to
    Kafka's default."""
    out = []
    for key in sorted(explicit):
        if key in WITHOUT_EFFECT:
            out.append((key, WITHOUT_EFFECT[key]))
        elif key in NOT_SUPPORTED:
            instead, accepted = NOT_SUPPORTED[key]
            if not accepted(explicit[key]):
                out.append((key, instead))
    return out


def _default(key: str) -> object:
    return NODE_CONFIG_DEFS[key].default
