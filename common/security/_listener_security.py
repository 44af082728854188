"""How one listener is secured, read from a node's config with Kafka's keys (one place for the gRPC
and the Kafka-protocol listeners, and for the node's own connections to other nodes' listeners).

``listener.security.protocol.map`` gives each listener name its protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL; a name the map does not list is PLAINTEXT, as kraftlog's BROKER and
CONTROLLER names always were). A TLS protocol reads the ``ssl.*`` keys, each
``listener.name.<listener>.``-prefixed value winning over the node-wide one (`TlsSettings`); a SASL
protocol offers ``sasl.enabled.mechanisms`` (kraftlog serves SCRAM-SHA-256, SCRAM-SHA-512 and
PLAIN) and reads the JAAS entries of ``listener.name.<listener>.<mechanism>.sasl.jaas.config``: a
ScramLoginModule's username/password are the node's own credentials towards that listener; a
PlainLoginModule's ``user_<name>="password"`` options are the PLAIN users it accepts (Kafka's way).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kraftlog.common._config_def import ConfigError, Password
from kraftlog.common.security._config_schema_security import SASL_MECHANISMS_SUPPORTED, parse_jaas_config
from kraftlog.common.security._scram import scram_unknown_user_key
from kraftlog.common.security._tls import TlsSettings, listener_prefix

__all__ = [
    "BROKER_LISTENER",
    "SECURITY_PROTOCOLS",
    "ListenerSecurity",
    "SaslLogin",
    "grpc_listener_name",
    "listener_protocol",
    "scram_secret_of",
]

#: the name of a broker's gRPC listener (without one, the first listener that is not CONTROLLER)
BROKER_LISTENER: Final = "BROKER"


def grpc_listener_name(names: Iterable[str]) -> str | None:
    """Which of a node's listener names is its broker gRPC listener: BROKER, else the first that is
    not CONTROLLER (the others speak Kafka's protocol; CONTROLLER is the controllers' gRPC)."""
    names = list(names)
    if BROKER_LISTENER in names:
        return BROKER_LISTENER
    return next((name for name in names if name != "CONTROLLER"), None)


SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def scram_secret_of(config: Mapping[str, object]) -> str | None:
    """The cluster-wide secret keying unknown users' SCRAM salts: ``sasl.scram.unknown.user.secret``,
    else ``controller.quorum.raft.password`` (every controller has it, the same on each, and no client
    ever sees it), else None (a per-process key: unknown names then get another salt on each node)."""
    for key in ("sasl.scram.unknown.user.secret", "controller.quorum.raft.password"):
        value = config.get(key)
        if isinstance(value, Password):
            return value.value
        if isinstance(value, str) and value:
            return value
    return None


def listener_protocol(config: Mapping[str, object], listener: str) -> str:
    """The security protocol of ``listener`` in ``listener.security.protocol.map``."""
    items = config.get("listener.security.protocol.map") or []
    assert isinstance(items, list)
    for item in items:
        name, _, protocol = str(item).partition(":")
        if name.strip().upper() == listener.upper():
            return protocol.strip().upper()
    return "PLAINTEXT"


@dataclass(frozen=True)
class SaslLogin:
    """A node's own SASL credentials (from a JAAS entry): what it logs in with as a client."""

    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ListenerSecurity:
    """The security of one listener: protocol, TLS settings, SASL mechanisms and logins."""

    name: str
    protocol: str = "PLAINTEXT"
    tls: TlsSettings | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    logins: Mapping[str, SaslLogin] = field(default_factory=dict, repr=False)
    #: keys the made-up SCRAM salt of unknown names (`scram_secret_of`): the same on every node
    scram_unknown_user_key: bytes = field(default_factory=lambda: scram_unknown_user_key(None), repr=False)
    #: ``connections.max.reauth.ms`` per mechanism (KIP-368; absent or 0: sessions never expire)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    #: ``sasl.server.max.receive.size``: the largest SASL message taken before authentication
    sasl_max_receive_bytes: int = 524_288

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, config: Mapping[str, object], listener: str) -> ListenerSecurity:
        """Read and check ``listener``'s security; `ConfigError` names the key at fault."""
        protocol = listener_protocol(config, listener)
        prefix = listener_prefix(listener)
        tls = TlsSettings.from_config(config, prefix) if protocol in ("SSL", "SASL_SSL") else None
        if tls is not None and not tls.has_keystore:
            raise ConfigError(
                f"listener {listener} is {protocol} but has no key store: set ssl.keystore.location or "
                f"ssl.keystore.certificate.chain and ssl.keystore.key (optionally prefixed {prefix})",
                key=f"{prefix}ssl.keystore.location",
            )
        unknown_key = scram_unknown_user_key(scram_secret_of(config))
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return cls(listener, protocol, tls, scram_unknown_user_key=unknown_key)
        key = f"{prefix}sasl.enabled.mechanisms"
        mechanisms = config.get(key, config.get("sasl.enabled.mechanisms"))
        assert isinstance(mechanisms, list)
        unsupported = [m for m in mechanisms if m not in SASL_MECHANISMS_SUPPORTED]
        if unsupported or not mechanisms:
            raise ConfigError(
                f"listener {listener} is {protocol} with sasl.enabled.mechanisms {mechanisms}: kraftlog serves "
                f"{', '.join(SASL_MECHANISMS_SUPPORTED)} (set sasl.enabled.mechanisms or {key})",
                key=key if key in config else "sasl.enabled.mechanisms",
            )
        if "PLAIN" in mechanisms and protocol != "SASL_SSL":
            raise ConfigError(
                f"listener {listener}: SASL/PLAIN sends passwords, so kraftlog offers it only over TLS (SASL_SSL)",
                key=key if key in config else "sasl.enabled.mechanisms",
            )
        plain_users: dict[str, str] = {}
        logins: dict[str, SaslLogin] = {}
        for mechanism in mechanisms:
            jaas_key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
            value = config.get(jaas_key)
            if value is None:
                if mechanism == "PLAIN":
                    raise ConfigError(
                        f"listener {listener} offers PLAIN but '{jaas_key}' lists no users (user_<name>=\"...\")",
                        key=jaas_key,
                    )
                continue
            assert isinstance(value, Password)
            kind, options = parse_jaas_config(value, jaas_key)
            if (kind == "PLAIN") != (mechanism == "PLAIN"):
                raise ConfigError(f"'{jaas_key}' names the login module of another mechanism", key=jaas_key)
            if kind == "PLAIN":
                plain_users.update({k[5:]: v for k, v in options.items() if k.startswith("user_") and k[5:]})
            if "username" in options and "password" in options:
                logins[mechanism] = SaslLogin(mechanism, options["username"], options["password"])
        reauth = {m: _max_reauth_ms(config, prefix, m) for m in mechanisms}
        cap_key = f"{prefix}sasl.server.max.receive.size"
        cap = config.get(cap_key, config.get("sasl.server.max.receive.size", 524_288))
        assert isinstance(cap, int)
        return cls(
            listener,
            protocol,
            tls,
            tuple(mechanisms),
            plain_users,
            logins,
            unknown_key,
            reauth,
            sasl_max_receive_bytes=cap,
        )

    def reauth_ms(self, mechanism: str) -> int:
        """``connections.max.reauth.ms`` of ``mechanism`` on this listener (0: no re-authentication)."""
        return self.max_reauth_ms.get(mechanism, 0)

    def node_login(self, config: Mapping[str, object]) -> SaslLogin | None:
        """The login a node uses towards this listener of other nodes (None: not SASL): the JAAS
        username/password of the mechanism ``sasl.mechanism.controller.protocol`` (CONTROLLER)
        or ``sasl.mechanism.inter.broker.protocol`` (the brokers' listener) names, as Kafka's
        inter-broker client does. `ConfigError` names the key when there is none."""
        if not self.uses_sasl:
            return None
        key = (
            "sasl.mechanism.controller.protocol"
            if self.name == "CONTROLLER"
            else "sasl.mechanism.inter.broker.protocol"
        )
        mechanism = str(config.get(key))
        if mechanism not in self.sasl_mechanisms:
            raise ConfigError(
                f"listener {self.name} offers {', '.join(self.sasl_mechanisms)} but {key} is {mechanism}",
                key=key,
            )
        login = self.logins.get(mechanism)
        fallback = config.get("sasl.jaas.config")  # the node-wide login, when no listener has its own
        if login is None and isinstance(fallback, Password):
            kind, options = parse_jaas_config(fallback, "sasl.jaas.config")
            if kind == ("PLAIN" if mechanism == "PLAIN" else "SCRAM") and {"username", "password"} <= options.keys():
                login = SaslLogin(mechanism, options["username"], options["password"])
        if login is None:
            jaas_key = f"listener.name.{self.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
            raise ConfigError(
                f"the nodes log in to listener {self.name} with {mechanism}: set username and password in "
                f"'{jaas_key}' (or sasl.jaas.config)",
                key=jaas_key,
            )
        return login

    def verify_plain(self, username: str, password: str) -> bool:
        """SASL/PLAIN: the password of ``user_<username>`` in the listener's JAAS entry."""
        expected = self.plain_users.get(username)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


def _max_reauth_ms(config: Mapping[str, object], prefix: str, mechanism: str) -> int:
    """Kafka's lookup of ``connections.max.reauth.ms`` for one mechanism of a listener:
    ``listener.name.<l>.<mechanism>.``, then ``listener.name.<l>.``, then the node's key."""
    for key in (f"{prefix}{mechanism.lower()}.connections.max.reauth.ms", f"{prefix}connections.max.reauth.ms"):
        if key in config:
            return int(str(config[key]))
    return int(str(config.get("connections.max.reauth.ms", 0)))
