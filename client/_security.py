"""How a client reaches a secured cluster: TLS settings from kafka-python's arguments or from Kafka's
client properties (``--command-config``).

Every client of this package (`Producer`, `Consumer`, `Admin`, the group and transaction admins)
takes ``security_protocol`` and kafka-python's ``ssl_cafile`` / ``ssl_certfile`` /
``ssl_keyfile`` / ``ssl_password`` / ``ssl_check_hostname``, or a ready `TlsSettings` as ``tls``;
`tls_from_properties` reads Kafka's client keys (``security.protocol``, ``ssl.truststore.*``,
``ssl.keystore.*`` in PEM, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``), as
Kafka's tools read a ``--command-config`` file. SASL is not offered yet: ``SASL_*`` protocols are
refused naming the setting, never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kraftlog.common._config_schema_security import LISTENER_PREFIXABLE
from kraftlog.common._tls import TlsSettings

from ._config import UnsupportedConfigError

__all__ = ["client_tls", "tls_from_properties"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _protocol(value: str, key: str) -> str:
    protocol = value.strip().upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(f"{key}={value!r}: expected one of {', '.join(_PROTOCOLS)}")
    if protocol.startswith("SASL"):
        raise UnsupportedConfigError(f"{key}={value} is not supported yet: kraftlog's client has no SASL; use SSL")
    return protocol


def client_tls(
    security_protocol: str = "PLAINTEXT",
    *,
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: str | None = None,
    ssl_check_hostname: bool = True,
    tls: TlsSettings | None = None,
) -> TlsSettings | None:
    """The TLS settings of a client built with kafka-python's arguments (None: plaintext).

    ``ssl_certfile`` / ``ssl_keyfile`` are the client's certificate chain and private key (PEM) for
    mutual TLS; ``ssl_cafile`` the CAs to trust (the system's when None)."""
    protocol = _protocol(security_protocol, "security_protocol")
    given = [
        k for k, v in (("ssl_cafile", ssl_cafile), ("ssl_certfile", ssl_certfile), ("ssl_keyfile", ssl_keyfile)) if v
    ]
    if protocol == "PLAINTEXT":
        if given or tls is not None:
            raise ValueError(f"{', '.join(given) or 'tls'} given with security_protocol=PLAINTEXT: use SSL")
        return None
    if tls is not None:
        if given:
            raise ValueError(f"give either tls or {', '.join(given)}, not both")
        return tls
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise ValueError("ssl_certfile and ssl_keyfile go together (the client's certificate and its key)")
    return TlsSettings(
        keystore_certificate_chain=Path(ssl_certfile).read_text() if ssl_certfile else None,
        keystore_key=Path(ssl_keyfile).read_text() if ssl_keyfile else None,
        key_password=ssl_password,
        truststore_location=ssl_cafile,
        endpoint_identification_algorithm="https" if ssl_check_hostname else "",
    )


def tls_from_properties(properties: Mapping[str, str]) -> TlsSettings | None:
    """The TLS settings of Kafka client properties (a ``--command-config`` file); None for
    PLAINTEXT. Unknown ``ssl.*`` keys are refused by `TlsSettings`, keys of other features are
    left to the caller."""
    protocol = _protocol(properties.get("security.protocol", "PLAINTEXT"), "security.protocol")
    if protocol == "PLAINTEXT":
        stray = sorted(k for k in properties if k.startswith("ssl."))
        if stray:
            raise ValueError(f"{', '.join(stray)} set with security.protocol=PLAINTEXT: set security.protocol=SSL")
        return None
    unknown = sorted(k for k in properties if k.startswith("ssl.") and k not in LISTENER_PREFIXABLE)
    if unknown:
        raise ValueError(f"unknown TLS setting(s) {', '.join(unknown)}")
    return TlsSettings.from_config(dict(properties))
