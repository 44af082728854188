"""TLS for every listener and client, configured with Kafka's ``ssl.*`` keys, and the principal of
a TLS client (``User:<certificate subject>`` after ``ssl.principal.mapping.rules``).

Key material is PEM only (KIP-651): inline (``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``, ``ssl.truststore.certificates``) or files (``ssl.keystore.location``, one PEM
file holding the private key and its chain, as Kafka's PEM key store file; ``ssl.truststore.location``).
JKS and PKCS12 stores are refused naming ``ssl.*.type``. Every config mistake raises `TlsConfigError`
(INVALID_CONFIG, a ValueError) naming the key.

Two consumers: `server_context` / `client_context` give `ssl.SSLContext`s for the Kafka-protocol
listener and clients (stdlib ``ssl``); `grpc_server_credentials` / `grpc_channel_credentials` give
the PEM bytes ``grpc.ssl_server_credentials`` / ``grpc.ssl_channel_credentials`` take (grpc is not
imported here). gRPC's Python API cannot *request* a client certificate without requiring it, pin
TLS versions or cipher suites, or skip the host name check: those settings raise for gRPC instead of
being silently widened (`GRPC_SUPPORTS_REQUESTED`, `grpc_unsupported_keys`).

The principal side (subject DN as Java renders it, ``ssl.principal.mapping.rules``) lives in
`kraftlog.common.security._tls_principal` and is re-exported here.

An inline private key never touches the disk: it is handed to OpenSSL through an anonymous memory
file (``memfd``) where the platform has one, else a 0600 file in a 0700 directory deleted at once.
``cryptography`` is imported only by the gRPC functions that must decrypt a key.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from kraftlog.common._config_def import Password
from kraftlog.common.security._tls_principal import (
    ANONYMOUS_PRINCIPAL,
    NoMatchingRuleError,
    SslPrincipalMapper,
    TlsConfigError,
    certificate_subject,
    peer_principal,
    principal_from_certificate,
)

__all__ = [
    "ANONYMOUS_PRINCIPAL",
    "GRPC_SUPPORTS_REQUESTED",
    "GrpcChannelCredentials",
    "GrpcServerCredentials",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "TlsConfigError",
    "TlsSettings",
    "certificate_subject",
    "client_context",
    "grpc_channel_credentials",
    "grpc_server_credentials",
    "grpc_unsupported_keys",
    "listener_prefix",
    "peer_principal",
    "prefixed_setting",
    "principal_from_certificate",
    "server_context",
]

#: grpc's Python server credentials either require a client certificate or do not ask for one
GRPC_SUPPORTS_REQUESTED: Final = False

_CLIENT_AUTH: Final = ("required", "requested", "none")
_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_DEFAULT_PROTOCOLS: Final = ("TLSv1.2", "TLSv1.3")
#: TLS 1.3 suites (IANA names); OpenSSL enables the first three and Python cannot change that set
_TLS13_DEFAULT: Final = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"})
_TLS13_SUITES: Final = _TLS13_DEFAULT | {"TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
#: Kafka (Java) names TLS 1.2 suites by their IANA names; OpenSSL has its own
_IANA_TO_OPENSSL: Final = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def listener_prefix(listener_name: str) -> str:
    """Kafka's per-listener prefix: ``listener.name.<listener name in lower case>.``."""
    return f"listener.name.{listener_name.lower()}."


def prefixed_setting(config: Mapping[str, object], key: str, prefix: str = "") -> object:
    """``prefix + key`` when the config sets it, else ``key`` (None when neither is set).

    Kafka's precedence, key by key: a listener's ``listener.name.<l>.ssl.client.auth`` wins over
    ``ssl.client.auth`` for that listener and leaves every other key to its node-wide value.
    """
    if prefix and prefix + key in config:
        return config[prefix + key]
    return config.get(key)


def _text(value: object, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Password):
        return value.value
    raise TlsConfigError(f"'{key}' must be a string, not {type(value).__name__}", key=key)


def _names(value: object, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple) and all(isinstance(part, str) for part in value):
        return tuple(part.strip() for part in value if part.strip())
    raise TlsConfigError(f"'{key}' must be a comma-separated list", key=key)


@dataclass(frozen=True)
class TlsSettings:
    """Kafka's ``ssl.*`` values for one listener (or one client), validated on construction.

    Inline PEM texts and passwords are plain ``str`` here and hidden from ``repr``. The key store
    type defaults to PEM (Kafka's default is JKS, which kraftlog cannot read); a JKS or PKCS12 type
    is refused only when key material is actually given, as Kafka only reads the store then.
    """

    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = field(default=None, repr=False)
    keystore_key: str | None = field(default=None, repr=False)
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_certificates: str | None = field(default=None, repr=False)
    truststore_password: str | None = field(default=None, repr=False)
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"
    protocol: str = "TLSv1.3"
    enabled_protocols: tuple[str, ...] = _DEFAULT_PROTOCOLS
    cipher_suites: tuple[str, ...] = ()
    principal_mapping_rules: str = "DEFAULT"

    def __post_init__(self) -> None:
        auth = self.client_auth.lower()
        if auth not in _CLIENT_AUTH:
            raise TlsConfigError(
                f"ssl.client.auth={self.client_auth!r}: expected one of {', '.join(_CLIENT_AUTH)}",
                key="ssl.client.auth",
            )
        object.__setattr__(self, "client_auth", auth)
        endpoint = self.endpoint_identification_algorithm.lower()
        if endpoint not in ("https", ""):
            raise TlsConfigError(
                f"ssl.endpoint.identification.algorithm={self.endpoint_identification_algorithm!r}: "
                "expected 'https' (check the server's host name) or '' (do not)",
                key="ssl.endpoint.identification.algorithm",
            )
        object.__setattr__(self, "endpoint_identification_algorithm", endpoint)
        self._check_store("keystore", self.keystore_location, self.keystore_key or self.keystore_certificate_chain)
        if self.keystore_key and not self.keystore_certificate_chain:
            raise TlsConfigError(
                "ssl.keystore.key is set but ssl.keystore.certificate.chain is not",
                key="ssl.keystore.certificate.chain",
            )
        if self.keystore_certificate_chain and not self.keystore_key:
            raise TlsConfigError(
                "ssl.keystore.certificate.chain is set but ssl.keystore.key is not", key="ssl.keystore.key"
            )
        self._check_store("truststore", self.truststore_location, self.truststore_certificates)
        if self.protocol not in _VERSIONS:
            raise TlsConfigError(f"ssl.protocol={self.protocol!r}: expected TLSv1.2 or TLSv1.3", key="ssl.protocol")
        if not self.enabled_protocols or any(name not in _VERSIONS for name in self.enabled_protocols):
            raise TlsConfigError(
                f"ssl.enabled.protocols={','.join(self.enabled_protocols)!r}: kraftlog offers TLSv1.2 and TLSv1.3",
                key="ssl.enabled.protocols",
            )
        for suite in self.cipher_suites:
            if suite.startswith("TLS_") and suite not in _IANA_TO_OPENSSL and suite not in _TLS13_SUITES:
                raise TlsConfigError(f"ssl.cipher.suites: unknown cipher suite {suite!r}", key="ssl.cipher.suites")
        tls13 = {suite for suite in self.cipher_suites if suite in _TLS13_SUITES}
        if tls13 and tls13 != _TLS13_DEFAULT:
            raise TlsConfigError(
                "ssl.cipher.suites: the TLS 1.3 suites cannot be narrowed here; list all of "
                f"{', '.join(sorted(_TLS13_DEFAULT))} or none (then TLS 1.3 is off)",
                key="ssl.cipher.suites",
            )
        SslPrincipalMapper.from_rules(self.principal_mapping_rules)  # raises naming the key

    def _check_store(self, store: str, location: str | None, inline: str | None) -> None:
        store_type = self.keystore_type if store == "keystore" else self.truststore_type
        password = self.keystore_password if store == "keystore" else self.truststore_password
        if store == "truststore":
            inline_key = "ssl.truststore.certificates"
        else:
            inline_key = "ssl.keystore.key" if self.keystore_key else "ssl.keystore.certificate.chain"
        if location and inline:
            raise TlsConfigError(
                f"both ssl.{store}.location and {inline_key} are set: give one", key=f"ssl.{store}.location"
            )
        if (location or inline) and store_type.upper() != "PEM":
            raise TlsConfigError(
                f"ssl.{store}.type={store_type}: kraftlog reads PEM key material only (KIP-651); "
                f"set ssl.{store}.type=PEM",
                key=f"ssl.{store}.type",
            )
        if password is not None:
            raise TlsConfigError(
                f"ssl.{store}.password cannot be used with PEM (only ssl.key.password, for an encrypted key)",
                key=f"ssl.{store}.password",
            )

    @classmethod
    def from_config(cls, config: Mapping[str, object], prefix: str = "") -> TlsSettings:
        """Read Kafka's keys from a node or client config; ``prefix`` (``listener.name.ssl.``)
        values win over unprefixed ones key by key (`prefixed_setting`). Unset keys take Kafka's
        defaults (PEM for the store types). An error's ``key`` carries the prefix when the
        listener's own value is at fault."""
        try:
            return cls._from_config(config, prefix)
        except TlsConfigError as err:
            if prefix and err.key is not None and prefix + err.key in config:
                err.key = prefix + err.key  # the listener's own value is the culprit: name it
            raise

    @classmethod
    def _from_config(cls, config: Mapping[str, object], prefix: str) -> TlsSettings:
        def text(key: str) -> str | None:
            return _text(prefixed_setting(config, key, prefix), key)

        def names(key: str) -> tuple[str, ...] | None:
            return _names(prefixed_setting(config, key, prefix), key)

        defaults = cls()
        endpoint = text("ssl.endpoint.identification.algorithm")
        protocols = names("ssl.enabled.protocols")
        return cls(
            keystore_type=text("ssl.keystore.type") or "PEM",
            keystore_location=text("ssl.keystore.location") or None,
            keystore_certificate_chain=text("ssl.keystore.certificate.chain") or None,
            keystore_key=text("ssl.keystore.key") or None,
            keystore_password=text("ssl.keystore.password"),
            key_password=text("ssl.key.password"),
            truststore_type=text("ssl.truststore.type") or "PEM",
            truststore_location=text("ssl.truststore.location") or None,
            truststore_certificates=text("ssl.truststore.certificates") or None,
            truststore_password=text("ssl.truststore.password"),
            client_auth=text("ssl.client.auth") or "none",
            endpoint_identification_algorithm=defaults.endpoint_identification_algorithm
            if endpoint is None
            else endpoint,
            protocol=text("ssl.protocol") or defaults.protocol,
            enabled_protocols=defaults.enabled_protocols if protocols is None else protocols,
            cipher_suites=names("ssl.cipher.suites") or (),
            principal_mapping_rules=text("ssl.principal.mapping.rules") or "DEFAULT",
        )

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    @property
    def principal_mapper(self) -> SslPrincipalMapper:
        return SslPrincipalMapper.from_rules(self.principal_mapping_rules)

    @property
    def _keystore_key_name(self) -> str:
        return "ssl.keystore.location" if self.keystore_location else "ssl.keystore.key"

    @property
    def _truststore_key_name(self) -> str:
        return "ssl.truststore.location" if self.truststore_location else "ssl.truststore.certificates"


# --- PEM handling


def _pem_blocks(text: str, key: str) -> list[tuple[str, str]]:
    """(label, canonical PEM) of each block, tolerating the whitespace a .properties continuation
    leaves inside inline PEM (as Kafka's PemParser does). A block with RFC 1421 headers (legacy
    encrypted keys) is kept verbatim."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), match.group(2)
        if ":" in body:
            blocks.append((label, match.group(0) + "\n"))
            continue
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except binascii.Error as err:
            raise TlsConfigError(f"'{key}': a PEM {label} block is not base64", key=key) from err
        encoded = base64.b64encode(der).decode("ascii")
        lines = "\n".join(encoded[i : i + 64] for i in range(0, len(encoded), 64))
        blocks.append((label, f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"))
    return blocks


def _read(path: str, key: str) -> str:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise TlsConfigError(f"'{key}': cannot read {path}: {err}", key=key) from err


def _certificates(text: str, key: str) -> str:
    certs = [pem for label, pem in _pem_blocks(text, key) if label == "CERTIFICATE"]
    if not certs:
        raise TlsConfigError(f"'{key}': at least one PEM CERTIFICATE expected, none found", key=key)
    return "".join(certs)


def _keystore_pem(settings: TlsSettings) -> tuple[str, str]:
    """(private key PEM, certificate chain PEM) of the key store, inline or from its file."""
    key_name = settings._keystore_key_name
    if settings.keystore_location:
        text = _read(settings.keystore_location, key_name)
        chain = _certificates(text, key_name)
    else:
        assert settings.keystore_key is not None and settings.keystore_certificate_chain is not None
        text = settings.keystore_key
        chain = _certificates(settings.keystore_certificate_chain, "ssl.keystore.certificate.chain")
    keys = [pem for label, pem in _pem_blocks(text, key_name) if label.endswith("PRIVATE KEY")]
    if len(keys) != 1:
        raise TlsConfigError(f"'{key_name}': expected one PEM private key, found {len(keys)}", key=key_name)
    return keys[0], chain


def _truststore_pem(settings: TlsSettings) -> str:
    key_name = settings._truststore_key_name
    if settings.truststore_location:
        return _certificates(_read(settings.truststore_location, key_name), key_name)
    assert settings.truststore_certificates is not None
    return _certificates(settings.truststore_certificates, key_name)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can read ``data`` from: an anonymous memory file where there is one, else a
    0600 file in a fresh 0700 directory, removed on exit."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("kraftlog-keystore", os.MFD_CLOEXEC)
        try:
            _write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="kraftlog-tls-")
    try:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    key_pem, chain_pem = _keystore_pem(settings)
    key_name = settings._keystore_key_name

    def password() -> str:
        if settings.key_password is None:
            raise TlsConfigError(f"'{key_name}': the private key is encrypted; set ssl.key.password", key=key_name)
        return settings.key_password

    with _private_file((key_pem + chain_pem).encode("ascii")) as path:
        try:
            context.load_cert_chain(path, password=password)
        except (ssl.SSLError, OSError) as err:
            raise TlsConfigError(
                f"'{key_name}': the private key does not load (wrong ssl.key.password?) or does not match "
                "the first certificate of the chain",
                key=key_name,
            ) from err


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings, purpose: ssl.Purpose) -> None:
    if not settings.has_truststore:
        context.load_default_certs(purpose)
        return
    try:
        context.load_verify_locations(cadata=_truststore_pem(settings))
    except ssl.SSLError as err:
        key_name = settings._truststore_key_name
        raise TlsConfigError(f"'{key_name}': the trusted certificates do not load", key=key_name) from err


def _configure(context: ssl.SSLContext, settings: TlsSettings, *, client: bool) -> None:
    """TLS versions and cipher suites. Versions span ``ssl.enabled.protocols``; a client also
    stays at or below ``ssl.protocol`` (Kafka's documented client behaviour). A cipher list without
    TLS 1.3 suites turns TLS 1.3 off, one with only TLS 1.3 suites turns TLS 1.2 off, as Java's
    enabled-suites filter does."""
    enabled = sorted(_VERSIONS[name] for name in settings.enabled_protocols)
    low, high = enabled[0], enabled[-1]
    if client:
        high = min(high, _VERSIONS[settings.protocol])
    if settings.cipher_suites:
        tls12 = [_IANA_TO_OPENSSL.get(suite, suite) for suite in settings.cipher_suites if suite not in _TLS13_SUITES]
        if not any(suite in _TLS13_SUITES for suite in settings.cipher_suites):
            high = min(high, ssl.TLSVersion.TLSv1_2)
        if tls12:
            try:
                context.set_ciphers(":".join(tls12))
            except ssl.SSLError as err:
                raise TlsConfigError(
                    f"ssl.cipher.suites: none of {', '.join(tls12)} is available", key="ssl.cipher.suites"
                ) from err
        else:
            low = max(low, ssl.TLSVersion.TLSv1_3)
    if low > high:
        key = "ssl.cipher.suites" if settings.cipher_suites else "ssl.protocol"
        raise TlsConfigError("ssl.enabled.protocols, ssl.protocol and ssl.cipher.suites leave no TLS version", key=key)
    context.minimum_version, context.maximum_version = low, high


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context of a TLS listener: its certificate, and for ``ssl.client.auth`` required or
    requested the trusted CAs a client certificate must chain to (the system's CAs when no trust
    store is set, as Kafka falls back to the JVM's)."""
    if not settings.has_keystore:
        raise TlsConfigError(
            "a TLS listener needs a certificate: set ssl.keystore.location, or ssl.keystore.certificate.chain "
            "and ssl.keystore.key",
            key="ssl.keystore.location",
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(context, settings, client=False)
    _load_keystore(context, settings)
    if settings.client_auth != "none":
        _load_truststore(context, settings, ssl.Purpose.CLIENT_AUTH)
        context.verify_mode = ssl.CERT_REQUIRED if settings.client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context of a TLS client: trusted CAs (system ones when no trust store is set), the host
    name check unless ``ssl.endpoint.identification.algorithm`` is empty, and the client's own
    certificate for mutual TLS when a key store is set. Pass ``server_hostname`` when wrapping."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _configure(context, settings, client=True)
    _load_truststore(context, settings, ssl.Purpose.SERVER_AUTH)
    context.check_hostname = settings.endpoint_identification_algorithm == "https"
    if settings.has_keystore:
        _load_keystore(context, settings)
    return context


# --- gRPC


class GrpcServerCredentials(NamedTuple):
    """The arguments of ``grpc.ssl_server_credentials([(key, chain)], root, require_client_auth)``."""

    private_key_pem: bytes
    certificate_chain_pem: bytes
    root_certificates_pem: bytes | None
    require_client_auth: bool


class GrpcChannelCredentials(NamedTuple):
    """The arguments of ``grpc.ssl_channel_credentials(root, private_key, certificate_chain)``."""

    root_certificates_pem: bytes | None
    private_key_pem: bytes | None
    certificate_chain_pem: bytes | None


def grpc_unsupported_keys(settings: TlsSettings, *, server: bool) -> tuple[str, ...]:
    """Keys whose values gRPC's Python credentials cannot honour (they would be silently widened):
    pinned TLS versions or cipher suites, ``requested`` client auth on a server, no host name check
    on a client."""
    keys = []
    if set(settings.enabled_protocols) != set(_DEFAULT_PROTOCOLS):
        keys.append("ssl.enabled.protocols")
    if not server and settings.protocol != "TLSv1.3":
        keys.append("ssl.protocol")
    if settings.cipher_suites:
        keys.append("ssl.cipher.suites")
    if server and settings.client_auth == "requested":
        keys.append("ssl.client.auth")
    if not server and settings.endpoint_identification_algorithm == "":
        keys.append("ssl.endpoint.identification.algorithm")
    return tuple(keys)


def _refuse_for_grpc(settings: TlsSettings, *, server: bool) -> None:
    keys = grpc_unsupported_keys(settings, server=server)
    if keys:
        raise TlsConfigError(
            f"gRPC cannot honour {', '.join(keys)} as set (its Python credentials take only certificates and "
            "required-or-no client auth); use the defaults on a gRPC listener",
            key=keys[0],
        )


def _plain_key(settings: TlsSettings) -> tuple[bytes, bytes]:
    """(unencrypted PKCS#8 private key, chain): grpc takes no key password. The pair is first
    loaded into a throw-away SSLContext so a key that does not match fails here, naming the key."""
    _load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings)
    key_pem, chain_pem = _keystore_pem(settings)
    if "ENCRYPTED" in key_pem or "Proc-Type:" in key_pem or settings.key_password is not None:
        from cryptography.hazmat.primitives import serialization

        password = settings.key_password.encode("utf-8") if settings.key_password is not None else None
        key = serialization.load_pem_private_key(key_pem.encode("ascii"), password=password)
        plain = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return plain, chain_pem.encode("ascii")
    return key_pem.encode("ascii"), chain_pem.encode("ascii")


def grpc_server_credentials(settings: TlsSettings) -> GrpcServerCredentials:
    """PEM bytes for ``grpc.ssl_server_credentials``. ``requested`` client auth, pinned versions
    or suites raise `TlsConfigError` (see `grpc_unsupported_keys`); ``required`` needs a trust
    store, since grpc has no system-CA fallback for client certificates."""
    _refuse_for_grpc(settings, server=True)
    if not settings.has_keystore:
        raise TlsConfigError("a gRPC TLS listener needs a certificate: set ssl.keystore.*", key="ssl.keystore.location")
    key, chain = _plain_key(settings)
    required = settings.client_auth == "required"
    if required and not settings.has_truststore:
        raise TlsConfigError(
            "ssl.client.auth=required on a gRPC listener needs ssl.truststore.location or ssl.truststore.certificates",
            key="ssl.truststore.location",
        )
    roots = _truststore_pem(settings).encode("ascii") if settings.has_truststore and required else None
    return GrpcServerCredentials(key, chain, roots, required)


def grpc_channel_credentials(settings: TlsSettings) -> GrpcChannelCredentials:
    """PEM bytes for ``grpc.ssl_channel_credentials``: the trust store (None: grpc's own roots)
    and, for mutual TLS, the client's unencrypted key and chain."""
    _refuse_for_grpc(settings, server=False)
    roots = _truststore_pem(settings).encode("ascii") if settings.has_truststore else None
    if not settings.has_keystore:
        return GrpcChannelCredentials(roots, None, None)
    key, chain = _plain_key(settings)
    return GrpcChannelCredentials(roots, key, chain)
