"""How a client reaches a secured cluster: TLS settings from kafka-python's arguments or from Kafka's
client properties (``--command-config``).

Every client of this package (`Producer`, `Consumer`, `Admin`, the group and transaction admins)
takes ``security_protocol`` and kafka-python's ``ssl_cafile`` / ``ssl_certfile`` /
``ssl_keyfile`` / ``ssl_password`` / ``ssl_check_hostname``, or a ready `TlsSettings` as ``tls``;
`tls_from_properties` reads Kafka's client keys (``security.protocol``, ``ssl.truststore.*``,
``ssl.keystore.*`` in PEM, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``, and
``sasl.mechanism`` / ``sasl.jaas.config``), as Kafka's tools read a ``--command-config`` file. On a
SASL listener the channel logs in once over SaslService and sends its session with every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from kraftlog.client._transport import Transport
from kraftlog.common.security import (
    LISTENER_PREFIXABLE,
    SASL_MECHANISMS_SUPPORTED,
    SaslLogin,
    TlsSettings,
    parse_jaas_config,
)
from kraftlog.proto import open_channel

__all__ = ["ClientSecurity", "client_security", "security_from_properties"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _protocol(value: str, key: str) -> str:
    protocol = value.strip().upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(f"{key}={value!r}: expected one of {', '.join(_PROTOCOLS)}")
    return protocol


@dataclass(frozen=True)
class ClientSecurity:
    """How this client's channels reach the cluster: TLS settings and a SASL login (both optional)."""

    tls: TlsSettings | None = None
    sasl: SaslLogin | None = field(default=None, repr=False)

    def open(self, address: str, options: Sequence[tuple[str, Any]]) -> grpc.Channel:
        """A blocking channel to ``address``: TLS and/or logged in over SASL as configured."""
        return open_channel(address, options=options, tls=self.tls, sasl=self.sasl)


def client_security(
    security_protocol: str = "PLAINTEXT",
    *,
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: str | None = None,
    ssl_check_hostname: bool = True,
    sasl_mechanism: str | None = None,
    sasl_plain_username: str | None = None,
    sasl_plain_password: str | None = None,
    tls: TlsSettings | None = None,
    security: ClientSecurity | None = None,
    transport: Transport | None = None,
) -> Transport:
    """The security of a client built with kafka-python's arguments (or a ready ``security``,
    e.g. read from a ``--command-config`` file by `security_from_properties`), or ``transport``
    itself when one is given (a `MockTransport` in unit tests: no network, so no security).

    ``ssl_certfile`` / ``ssl_keyfile`` are the client's certificate chain and private key (PEM) for
    mutual TLS; ``ssl_cafile`` the CAs to trust (the system's when None). SASL_PLAINTEXT and
    SASL_SSL log in with ``sasl_mechanism`` (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN) as
    ``sasl_plain_username`` / ``sasl_plain_password`` (kafka-python uses those names for SCRAM too)."""
    if transport is not None:
        return transport
    if security is not None:
        return security
    protocol = _protocol(security_protocol, "security_protocol")
    given = [
        k for k, v in (("ssl_cafile", ssl_cafile), ("ssl_certfile", ssl_certfile), ("ssl_keyfile", ssl_keyfile)) if v
    ]
    sasl_given = [
        k
        for k, v in (
            ("sasl_mechanism", sasl_mechanism),
            ("sasl_plain_username", sasl_plain_username),
            ("sasl_plain_password", sasl_plain_password),
        )
        if v is not None
    ]
    uses_tls = protocol in ("SSL", "SASL_SSL")
    if not uses_tls and (given or tls is not None):
        raise ValueError(f"{', '.join(given) or 'tls'} given with security_protocol={protocol}: use SSL or SASL_SSL")
    if not protocol.startswith("SASL") and sasl_given:
        raise ValueError(
            f"{', '.join(sasl_given)} given with security_protocol={protocol}: use SASL_PLAINTEXT or SASL_SSL"
        )
    settings = None
    if uses_tls:
        if tls is not None and given:
            raise ValueError(f"give either tls or {', '.join(given)}, not both")
        if bool(ssl_certfile) != bool(ssl_keyfile):
            raise ValueError("ssl_certfile and ssl_keyfile go together (the client's certificate and its key)")
        settings = tls or TlsSettings(
            keystore_certificate_chain=Path(ssl_certfile).read_text() if ssl_certfile else None,
            keystore_key=Path(ssl_keyfile).read_text() if ssl_keyfile else None,
            key_password=ssl_password,
            truststore_location=ssl_cafile,
            endpoint_identification_algorithm="https" if ssl_check_hostname else "",
        )
    login = None
    if protocol.startswith("SASL"):
        mechanism = (sasl_mechanism or "").upper()
        if mechanism not in SASL_MECHANISMS_SUPPORTED:
            raise ValueError(
                f"sasl_mechanism={sasl_mechanism!r}: expected one of {', '.join(SASL_MECHANISMS_SUPPORTED)}"
            )
        if mechanism == "PLAIN" and protocol != "SASL_SSL":
            raise ValueError("SASL/PLAIN sends the password: use it with security_protocol=SASL_SSL only")
        if not sasl_plain_username or sasl_plain_password is None:
            raise ValueError(f"security_protocol={protocol} needs sasl_plain_username and sasl_plain_password")
        login = SaslLogin(mechanism, sasl_plain_username, sasl_plain_password)
    return ClientSecurity(settings, login)


def security_from_properties(properties: Mapping[str, str]) -> ClientSecurity:
    """The security of Kafka client properties (a ``--command-config`` file): ``security.protocol``,
    the ``ssl.*`` keys, ``sasl.mechanism`` and ``sasl.jaas.config`` (Kafka's ScramLoginModule or
    PlainLoginModule with username and password). Unknown ``ssl.*`` / ``sasl.*`` keys are refused."""
    protocol = _protocol(properties.get("security.protocol", "PLAINTEXT"), "security.protocol")
    unknown = sorted(
        k
        for k in properties
        if (k.startswith("ssl.") and k not in LISTENER_PREFIXABLE)
        or (k.startswith("sasl.") and k not in ("sasl.mechanism", "sasl.jaas.config"))
    )
    if unknown:
        raise ValueError(f"unknown or unsupported setting(s) {', '.join(unknown)}")
    tls_keys = sorted(k for k in properties if k.startswith("ssl."))
    if protocol not in ("SSL", "SASL_SSL") and tls_keys:
        raise ValueError(f"{', '.join(tls_keys)} set with security.protocol={protocol}: set security.protocol=SSL")
    tls = TlsSettings.from_config(dict(properties)) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL"):
        if any(k.startswith("sasl.") for k in properties):
            raise ValueError(f"sasl.* set with security.protocol={protocol}: use SASL_PLAINTEXT or SASL_SSL")
        return ClientSecurity(tls)
    jaas = properties.get("sasl.jaas.config")
    if jaas is None:
        raise ValueError(f"security.protocol={protocol} needs sasl.jaas.config (username and password)")
    _kind, options = parse_jaas_config(jaas)
    if "username" not in options or "password" not in options:
        raise ValueError("sasl.jaas.config needs username and password options")
    security = client_security(
        protocol,
        sasl_mechanism=properties.get("sasl.mechanism", "GSSAPI"),
        sasl_plain_username=options["username"],
        sasl_plain_password=options["password"],
    )
    assert isinstance(security, ClientSecurity)  # no transport was given
    return ClientSecurity(tls, security.sasl)
