"""Security keys of a node (Kafka's ``ssl.*``, ``sasl.*`` and authorizer keys), their listener
prefixes, and the cross-key checks a node makes at start.

Kafka lets every ``ssl.*`` / ``sasl.*`` key be set for one listener only with the prefix
``listener.name.<listener name in lower case>.`` (``listener.name.internal.ssl.client.auth``), and
SASL's JAAS config per mechanism as ``listener.name.<listener>.<mechanism>.sasl.jaas.config``. The
prefixed value wins over the unprefixed one for that listener (`kraftlog.common.security._tls.prefixed_setting`).
A prefixed key is validated exactly as its unprefixed twin; a prefix naming a listener the node does not have, or a key
that cannot be set per listener, fails at start naming the key.
"""

from __future__ import annotations

import re
from typing import Final

from kraftlog.common._config_def import ConfigDef, ConfigError, ConfigKey, ConfigType, Custom, OneOf, Password

__all__ = [
    "LISTENER_PREFIXABLE",
    "SASL_MECHANISMS_SUPPORTED",
    "STANDARD_AUTHORIZER",
    "define_security_keys",
    "listener_prefixed_key",
    "parse_jaas_config",
]

_S, _LS, _P, _B = ConfigType.STRING, ConfigType.LIST, ConfigType.PASSWORD, ConfigType.BOOLEAN

#: Kafka's authorizer for KRaft clusters; kraftlog's authorizer behaves as it does
STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: SASL mechanisms kraftlog serves (GSSAPI and OAUTHBEARER are refused at start)
SASL_MECHANISMS_SUPPORTED: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
_SASL_MECHANISMS_KNOWN: Final = (*SASL_MECHANISMS_SUPPORTED, "GSSAPI", "OAUTHBEARER")
_TLS_PROTOCOLS: Final = ("TLSv1.2", "TLSv1.3")


def define_security_keys(defs: ConfigDef) -> None:
    """Add the security keys, with Kafka's names, types and defaults, to the node schema."""
    (
        defs.define("ssl.protocol", _S, "TLSv1.3", OneOf(*_TLS_PROTOCOLS), "Newest TLS version offered.")
        .define(
            "ssl.enabled.protocols",
            _LS,
            list(_TLS_PROTOCOLS),
            OneOf(*_TLS_PROTOCOLS),
            "TLS versions a listener or client accepts.",
        )
        .define("ssl.cipher.suites", _LS, [], None, "TLS 1.2 cipher suites (OpenSSL names); empty: the defaults.")
        .define(
            "ssl.keystore.type",
            _S,
            "JKS",
            OneOf("JKS", "PKCS12", "PEM"),
            "Format of the key store; kraftlog reads PEM (KIP-651) and refuses the others at start.",
        )
        .define("ssl.keystore.location", _S, None, None, "PEM file holding the private key and certificate chain.")
        .define("ssl.keystore.password", _P, None, None, "Key store password (not used with PEM; refused).")
        .define("ssl.key.password", _P, None, None, "Password of an encrypted PEM private key.")
        .define("ssl.keystore.certificate.chain", _P, None, None, "PEM certificate chain, inline (KIP-651).")
        .define("ssl.keystore.key", _P, None, None, "PEM private key, inline (KIP-651).")
        .define(
            "ssl.truststore.type",
            _S,
            "JKS",
            OneOf("JKS", "PKCS12", "PEM"),
            "Format of the trust store; kraftlog reads PEM (KIP-651) and refuses the others at start.",
        )
        .define("ssl.truststore.location", _S, None, None, "PEM file of the trusted CA certificates.")
        .define("ssl.truststore.password", _P, None, None, "Trust store password (not used with PEM; refused).")
        .define("ssl.truststore.certificates", _P, None, None, "PEM trusted CA certificates, inline (KIP-651).")
        .define(
            "ssl.client.auth",
            _S,
            "none",
            OneOf("required", "requested", "none"),
            "Whether a TLS listener asks clients for a certificate (mutual TLS).",
        )
        .define(
            "ssl.endpoint.identification.algorithm",
            _S,
            "https",
            OneOf("https", ""),
            "https: a TLS client checks the server's host name against its certificate; empty: it does not.",
        )
        .define(
            "ssl.principal.mapping.rules",
            _S,
            "DEFAULT",
            None,
            "Rules mapping a client certificate's subject to a principal name (RULE:pattern/replacement/[LU],...).",
        )
        .define("ssl.keymanager.algorithm", _S, "SunX509", None, "Java key manager algorithm (accepted, no effect).")
        .define("ssl.trustmanager.algorithm", _S, "PKIX", None, "Java trust manager algorithm (accepted, no effect).")
        .define("ssl.secure.random.implementation", _S, None, None, "Java SecureRandom (accepted, no effect).")
        .define("ssl.engine.factory.class", _S, None, None, "A custom Java SSL engine factory (not supported).")
        # --- SASL
        .define(
            "sasl.enabled.mechanisms",
            _LS,
            ["GSSAPI"],
            OneOf(*_SASL_MECHANISMS_KNOWN),
            "SASL mechanisms a SASL listener offers; kraftlog serves SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN.",
        )
        .define(
            "sasl.mechanism.inter.broker.protocol",
            _S,
            "GSSAPI",
            OneOf(*_SASL_MECHANISMS_KNOWN),
            "SASL mechanism brokers use with each other on a SASL inter-broker listener.",
        )
        .define(
            "sasl.mechanism.controller.protocol",
            _S,
            "GSSAPI",
            OneOf(*_SASL_MECHANISMS_KNOWN),
            "SASL mechanism brokers and controllers use towards a SASL controller listener.",
        )
        .define(
            "sasl.jaas.config",
            _P,
            None,
            None,
            "JAAS login of this node as a SASL client (a ScramLoginModule or PlainLoginModule with its password).",
        )
        .define(
            "sasl.scram.unknown.user.secret",
            _P,
            None,
            Custom(
                lambda v: v is None or len(v.value if isinstance(v, Password) else str(v)) >= 16,
                "at least 16 characters",
            ),
            "kraftlog: the cluster-wide secret that keys the made-up SCRAM salt of unknown user names, so "
            "that every node answers an unknown name with the same salt, as for a real user; the same on "
            "every node and never given to clients. Unset: derived from controller.quorum.raft.password.",
            kraftlog_only=True,
        )
        .define(
            "security.inter.broker.protocol",
            _S,
            "PLAINTEXT",
            OneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
            "Protocol between brokers when inter.broker.listener.name is not set.",
        )
        .define(
            "connections.max.reauth.ms",
            ConfigType.LONG,
            0,
            None,
            "When positive, the longest a SASL session lives (KIP-368): its lifetime is told to clients "
            "in SaslAuthenticate v1+ (and to kraftlog's gRPC clients), a connection that is not "
            "re-authenticated within it is closed at its next request, and a gRPC session token is refused "
            "after it. 0: sessions last as long as their connection. May be prefixed with the listener "
            "prefix and the mechanism in lower case (listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms).",
        )
        .define(
            "principal.builder.class",
            _S,
            None,
            None,
            "A custom principal builder (not supported: principals are User:<certificate subject or SASL name>).",
        )
        # --- authorization
        .define(
            "authorizer.class.name",
            _S,
            "",
            OneOf("", STANDARD_AUTHORIZER),
            "Empty: no authorization. Kafka's StandardAuthorizer: ACLs from the metadata log.",
        )
        .define(
            "super.users",
            _S,
            None,
            None,
            "Principals allowed everything, separated by ';' (User:admin;User:CN=broker1).",
        )
        .define(
            "allow.everyone.if.no.acl.found",
            _B,
            False,
            None,
            "With an authorizer: allow an operation on a resource that has no ACL at all.",
        )
    )


#: unprefixed keys that may also be set for one listener with ``listener.name.<listener>.``
LISTENER_PREFIXABLE: Final = frozenset(
    {
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.endpoint.identification.algorithm",
        "ssl.principal.mapping.rules",
        "sasl.enabled.mechanisms",
        "sasl.server.max.receive.size",
        "max.connections",
        "connections.max.reauth.ms",
    }
)

_PREFIXED = re.compile(r"^listener\.name\.([a-z0-9_-]+)\.(.+)$")


def listener_prefixed_key(defs: ConfigDef, name: str) -> tuple[str, ConfigKey] | None:
    """For ``listener.name.<listener>.<key>``: (the listener name in upper case, the definition of
    the key it sets); None when ``name`` is no listener-prefixed key. A prefix on a key that cannot
    be set per listener raises `ConfigError` naming it."""
    match = _PREFIXED.match(name)
    if match is None:
        return None
    listener, rest = match.group(1), match.group(2)
    if rest in LISTENER_PREFIXABLE:
        return listener.upper(), defs[rest]
    mechanism, _, tail = rest.partition(".")
    if tail in ("sasl.jaas.config", "connections.max.reauth.ms") and mechanism.upper() in _SASL_MECHANISMS_KNOWN:
        return listener.upper(), defs[tail]
    raise ConfigError(
        f"'{name}' sets {rest!r} for listener {listener.upper()}, but only ssl.*, sasl.enabled.mechanisms, "
        "sasl.server.max.receive.size, max.connections, [<mechanism>.]connections.max.reauth.ms and "
        "<mechanism>.sasl.jaas.config can be set per listener",
        key=name,
    )


_JAAS = re.compile(r"^\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_LOGIN_MODULES: Final = {
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
}


def parse_jaas_config(value: Password | str, key: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """Parse one JAAS login entry (``<LoginModule> required username="alice" password="...";``) into
    (``"SCRAM"`` or ``"PLAIN"``, its options). Kafka's two password login modules are the ones
    kraftlog knows; anything else raises `ConfigError` naming ``key`` (never echoing the value, which
    holds a password)."""
    text = value.value if isinstance(value, Password) else value
    match = _JAAS.match(text)
    if match is None:
        raise ConfigError(f"'{key}' is not a JAAS login entry '<LoginModule> required key=\"value\" ...;'", key=key)
    module, flag, rest = match.groups()
    kind = _LOGIN_MODULES.get(module)
    if kind is None:
        known = ", ".join(sorted(_LOGIN_MODULES))
        raise ConfigError(f"'{key}' names login module {module!r}; kraftlog knows {known}", key=key)
    if flag != "required":
        raise ConfigError(f"'{key}': the login module must be 'required', not {flag!r}", key=key)
    options: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        option = _JAAS_OPTION.match(rest, pos)
        if option is None:
            raise ConfigError(f"'{key}': cannot read the options after {module}", key=key)
        name, quoted, bare = option.groups()
        options[name] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        pos = option.end()
        while pos < len(rest) and rest[pos].isspace():
            pos += 1
    return kind, options
