"""TLS settings, contexts, gRPC credentials and principals (kraftlog.common.security._tls).

Handshakes run over `socket.socketpair()` in one thread (non-blocking, pumped in turn): no port,
no network. Certificates come from kraftlog's throw-away CA (deploy/_certs.py). The subject
rendering cases were checked against Java's X500Principal.getName(), and the principal mapping
cases against Kafka's SslPrincipalMapper, so ACLs written for Kafka name the same principals.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from kraftlog.common._config_def import ConfigError, Password
from kraftlog.common.security._tls import (
    _IANA_TO_OPENSSL,
    ANONYMOUS_PRINCIPAL,
    GRPC_SUPPORTS_REQUESTED,
    NoMatchingRuleError,
    SslPrincipalMapper,
    TlsConfigError,
    TlsSettings,
    certificate_subject,
    client_context,
    grpc_channel_credentials,
    grpc_server_credentials,
    grpc_unsupported_keys,
    listener_prefix,
    peer_principal,
    prefixed_setting,
    principal_from_certificate,
    server_context,
)
from kraftlog.deploy._certs import CertificateAuthority, IssuedCertificate, make_ca, make_certificate


def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str | None = "localhost"
) -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    """Complete a TLS handshake between the two contexts over a socketpair, in this thread.

    Raises the ssl.SSLError of whichever side refuses first.
    """
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    server_side = server.wrap_socket(left, server_side=True, do_handshake_on_connect=False)
    client_side = client.wrap_socket(right, server_hostname=server_hostname, do_handshake_on_connect=False)
    pending = [client_side, server_side]
    for _ in range(100):
        for side in list(pending):
            try:
                side.do_handshake()
                pending.remove(side)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
        if not pending:
            break
    assert not pending, "handshake did not finish"
    # TLS 1.3 checks the client certificate after the client finished: a round trip tells
    client_side.sendall(b"ping")
    for _ in range(100):
        try:
            assert server_side.recv(4) == b"ping"
            break
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            try:
                client_side.recv(1)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
    return server_side, client_side


class Pki:
    def __init__(self, root: Path) -> None:
        self.ca: CertificateAuthority = make_ca(root / "ca")
        self.node: IssuedCertificate = make_certificate(self.ca, root / "ca", "node1", ["localhost", "127.0.0.1"])
        self.client: IssuedCertificate = make_certificate(self.ca, root / "ca", "client", client=True)
        self.locked: IssuedCertificate = make_certificate(
            self.ca, root / "ca", "locked", ["localhost"], key_password="s3cret"
        )
        self.other_ca = make_ca(root / "other", "another CA")
        self.stranger = make_certificate(self.other_ca, root / "other", "stranger", ["localhost"])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def _server(pki: Pki, client_auth: str = "none", extra: dict[str, object] | None = None) -> TlsSettings:
    return TlsSettings.from_config({**pki.node.ssl_config(), "ssl.client.auth": client_auth, **(extra or {})})


def _client(pki: Pki, cert: IssuedCertificate | None = None, extra: dict[str, object] | None = None) -> TlsSettings:
    config: dict[str, object] = {"ssl.truststore.location": str(pki.ca.certificate_path), **(extra or {})}
    if cert is not None:
        config.update(cert.ssl_config())
    return TlsSettings.from_config(config)


# --- settings


def test_defaults_are_kafkas() -> None:
    settings = TlsSettings.from_config({})
    assert settings.client_auth == "none"
    assert settings.endpoint_identification_algorithm == "https"
    assert settings.protocol == "TLSv1.3" and settings.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert settings.cipher_suites == () and settings.principal_mapping_rules == "DEFAULT"
    assert not settings.has_keystore and not settings.has_truststore


def test_listener_prefix_wins_key_by_key() -> None:
    config = {
        "ssl.client.auth": "none",
        "listener.name.internal.ssl.client.auth": "required",
        "ssl.enabled.protocols": "TLSv1.2, TLSv1.3",
        "listener.name.external.ssl.enabled.protocols": ["TLSv1.3"],
    }
    prefix = listener_prefix("INTERNAL")
    assert prefix == "listener.name.internal."
    assert prefixed_setting(config, "ssl.client.auth", prefix) == "required"
    assert prefixed_setting(config, "ssl.client.auth") == "none"
    assert prefixed_setting(config, "ssl.keystore.location", prefix) is None
    internal = TlsSettings.from_config(config, prefix)
    assert internal.client_auth == "required" and internal.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    external = TlsSettings.from_config(config, listener_prefix("EXTERNAL"))
    assert external.client_auth == "none" and external.enabled_protocols == ("TLSv1.3",)


def test_password_values_and_case_insensitive_client_auth(pki: Pki) -> None:
    chain = pki.node.certificate_path.read_text()
    key = pki.node.key_path.read_text()
    settings = TlsSettings.from_config(
        {
            "ssl.keystore.certificate.chain": Password(chain),
            "ssl.keystore.key": Password(key),
            "ssl.key.password": Password("hunter2"),
            "ssl.client.auth": "REQUESTED",
        }
    )
    assert settings.keystore_key == key and settings.key_password == "hunter2"
    assert settings.client_auth == "requested"
    shown = repr(settings)
    assert "PRIVATE KEY" not in shown and "hunter2" not in shown and "BEGIN CERTIFICATE" not in shown


@pytest.mark.parametrize(
    ("config", "key", "words"),
    [
        (
            {"ssl.keystore.location": "/k.pem", "ssl.keystore.key": "K", "ssl.keystore.certificate.chain": "C"},
            "ssl.keystore.location",
            ["ssl.keystore.location", "ssl.keystore.key"],
        ),
        (
            {"ssl.truststore.location": "/t.pem", "ssl.truststore.certificates": "T"},
            "ssl.truststore.location",
            ["ssl.truststore.location", "ssl.truststore.certificates"],
        ),
        ({"ssl.keystore.key": "K"}, "ssl.keystore.certificate.chain", ["ssl.keystore.certificate.chain"]),
        ({"ssl.keystore.certificate.chain": "C"}, "ssl.keystore.key", ["ssl.keystore.key"]),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", ["required", "requested", "none"]),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "ssl.keystore.type", ["JKS", "PEM"]),
        ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"}, "ssl.truststore.type", ["PKCS12"]),
        ({"ssl.keystore.location": "/k.pem", "ssl.keystore.password": "x"}, "ssl.keystore.password", ["PEM"]),
        ({"ssl.truststore.password": "x"}, "ssl.truststore.password", ["PEM"]),
        ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols", ["TLSv1.1"]),
        ({"ssl.enabled.protocols": ""}, "ssl.enabled.protocols", []),
        ({"ssl.protocol": "SSLv3"}, "ssl.protocol", ["SSLv3"]),
        ({"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm", ["ldaps"]),
        ({"ssl.cipher.suites": "TLS_MADE_UP_SUITE"}, "ssl.cipher.suites", ["TLS_MADE_UP_SUITE"]),
        ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites", ["TLS 1.3"]),
        ({"ssl.principal.mapping.rules": "RULE:broken"}, "ssl.principal.mapping.rules", ["RULE:broken"]),
        ({"ssl.client.auth": 3}, "ssl.client.auth", ["string"]),
    ],
)
def test_invalid_settings_name_the_key(config: dict[str, object], key: str, words: list[str]) -> None:
    with pytest.raises(TlsConfigError) as caught:
        TlsSettings.from_config(config)
    assert caught.value.key == key
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ConfigError)
    for word in words:
        assert word in str(caught.value)


def test_jks_type_without_material_is_harmless() -> None:
    """Kafka's node schema defaults the store types to JKS; they only matter when a store is set."""
    settings = TlsSettings.from_config({"ssl.keystore.type": "JKS", "ssl.truststore.type": "JKS"})
    assert not settings.has_keystore


# --- contexts and handshakes


def test_server_needs_a_certificate() -> None:
    with pytest.raises(TlsConfigError, match="needs a certificate") as caught:
        server_context(TlsSettings())
    assert caught.value.key == "ssl.keystore.location"


def test_tls_handshake_from_files_checks_the_host_name(pki: Pki) -> None:
    server, client = handshake(server_context(_server(pki)), client_context(_client(pki)))
    assert client.version() == "TLSv1.3"
    assert peer_principal(server) == ANONYMOUS_PRINCIPAL
    peer = client.getpeercert()
    assert peer is not None and peer["subject"] == ((("commonName", "node1"),),)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(server_context(_server(pki)), client_context(_client(pki)), "node2.example")
    no_check = client_context(_client(pki, extra={"ssl.endpoint.identification.algorithm": ""}))
    handshake(server_context(_server(pki)), no_check, "node2.example")


def test_client_refuses_a_server_of_another_ca(pki: Pki) -> None:
    impostor = TlsSettings.from_config(pki.stranger.ssl_config())
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(impostor), client_context(_client(pki)))


def test_inline_pem_even_with_properties_whitespace(pki: Pki) -> None:
    """A .properties value continued over lines with '\\' arrives with spaces for newlines."""

    def flattened(path: Path) -> str:
        return " ".join(path.read_text().split("\n"))

    server = TlsSettings(
        keystore_certificate_chain=flattened(pki.node.certificate_path),
        keystore_key=flattened(pki.node.key_path),
        truststore_certificates=flattened(pki.ca.certificate_path),
        client_auth="required",
    )
    client = TlsSettings(
        keystore_certificate_chain=pki.client.certificate_path.read_text(),
        keystore_key=pki.client.key_path.read_text(),
        truststore_certificates=pki.ca.certificate_path.read_text(),
    )
    server_side, _ = handshake(server_context(server), client_context(client))
    assert peer_principal(server_side) == "User:CN=client"


def test_encrypted_key_needs_its_password(pki: Pki) -> None:
    config = pki.locked.ssl_config()
    with pytest.raises(TlsConfigError, match="ssl.key.password") as caught:
        server_context(TlsSettings.from_config(config))
    assert caught.value.key == "ssl.keystore.location"
    with pytest.raises(TlsConfigError, match="wrong ssl.key.password"):
        server_context(TlsSettings.from_config({**config, "ssl.key.password": "nope"}))
    unlocked = server_context(TlsSettings.from_config({**config, "ssl.key.password": "s3cret"}))
    handshake(unlocked, client_context(_client(pki)))


def test_key_that_does_not_match_the_chain_is_refused(pki: Pki) -> None:
    mismatched = TlsSettings(
        keystore_certificate_chain=pki.node.certificate_path.read_text(),
        keystore_key=pki.client.key_path.read_text(),
    )
    with pytest.raises(TlsConfigError, match="does not match") as caught:
        server_context(mismatched)
    assert caught.value.key == "ssl.keystore.key"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        (TlsSettings(keystore_location="/nonexistent/k.pem"), "ssl.keystore.location"),
        (
            TlsSettings(keystore_certificate_chain="no pem here", keystore_key="nor here"),
            "ssl.keystore.certificate.chain",
        ),
    ],
)
def test_unreadable_key_material_names_the_key(settings: TlsSettings, key: str) -> None:
    with pytest.raises(TlsConfigError) as caught:
        server_context(settings)
    assert caught.value.key == key


def test_truststore_without_certificates_is_refused() -> None:
    with pytest.raises(TlsConfigError, match="CERTIFICATE") as caught:
        client_context(
            TlsSettings(truststore_certificates="-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
        )
    assert caught.value.key == "ssl.truststore.certificates"


def test_mutual_tls_principal_and_mapping_rules(pki: Pki) -> None:
    rules = "RULE:^CN=([a-z]+)$/$1-svc/U,DEFAULT"
    server_side, _ = handshake(
        server_context(_server(pki, "required", extra={"ssl.principal.mapping.rules": rules})),
        client_context(_client(pki, pki.client)),
    )
    der = server_side.getpeercert(binary_form=True)
    assert principal_from_certificate(der) == "User:CN=client"
    assert peer_principal(
        server_side, _server(pki, "required", extra={"ssl.principal.mapping.rules": rules}).principal_mapper
    ) == ("User:CLIENT-SVC")


def test_required_client_auth_refuses_no_certificate_and_other_cas(pki: Pki) -> None:
    with pytest.raises(ssl.SSLError):
        handshake(server_context(_server(pki, "required")), client_context(_client(pki)))
    with pytest.raises(ssl.SSLError):
        handshake(server_context(_server(pki, "required")), client_context(_client(pki, pki.stranger)))


def test_requested_client_auth_is_optional(pki: Pki) -> None:
    anonymous, _ = handshake(server_context(_server(pki, "requested")), client_context(_client(pki)))
    assert peer_principal(anonymous) == ANONYMOUS_PRINCIPAL
    known, _ = handshake(server_context(_server(pki, "requested")), client_context(_client(pki, pki.client)))
    assert peer_principal(known) == "User:CN=client"


def test_tls12_only_and_client_protocol_cap(pki: Pki) -> None:
    old, _ = handshake(
        server_context(_server(pki, extra={"ssl.enabled.protocols": "TLSv1.2"})), client_context(_client(pki))
    )
    assert old.version() == "TLSv1.2"
    capped = client_context(_client(pki, extra={"ssl.protocol": "TLSv1.2"}))
    assert capped.maximum_version == ssl.TLSVersion.TLSv1_2
    _, client = handshake(server_context(_server(pki)), capped)
    assert client.version() == "TLSv1.2"
    with pytest.raises(TlsConfigError, match="no TLS version"):
        client_context(_client(pki, extra={"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}))


def test_cipher_suites_by_kafkas_names(pki: Pki) -> None:
    suite = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    settings = _server(pki, extra={"ssl.cipher.suites": suite})
    context = server_context(settings)
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed: 1.3 off
    server_side, _ = handshake(context, client_context(_client(pki)))
    cipher = server_side.cipher()
    assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    tls13 = ["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"]
    only13 = server_context(_server(pki, extra={"ssl.cipher.suites": tls13}))
    _, client_side = handshake(only13, client_context(_client(pki)))
    assert client_side.version() == "TLSv1.3"
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_every_mapped_cipher_suite_is_known_to_openssl() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for iana, openssl_name in _IANA_TO_OPENSSL.items():
        context.set_ciphers(openssl_name)
        names = {cipher["name"] for cipher in context.get_ciphers()}
        assert openssl_name in names, iana


# --- gRPC


def test_grpc_server_credentials(pki: Pki) -> None:
    assert GRPC_SUPPORTS_REQUESTED is False
    plain = grpc_server_credentials(_server(pki))
    assert plain.private_key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert plain.certificate_chain_pem.count(b"BEGIN CERTIFICATE") == 2
    assert plain.root_certificates_pem is None and plain.require_client_auth is False
    mutual = grpc_server_credentials(_server(pki, "required"))
    assert mutual.require_client_auth is True
    assert mutual.root_certificates_pem == pki.ca.certificate_path.read_bytes()
    key, chain, roots, required = mutual
    assert (key, chain, roots, required) == tuple(mutual)


def test_grpc_gets_an_unencrypted_key(pki: Pki) -> None:
    credentials = grpc_server_credentials(
        TlsSettings.from_config({**pki.locked.ssl_config(), "ssl.key.password": "s3cret"})
    )
    key = serialization.load_pem_private_key(credentials.private_key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"ssl.client.auth": "requested"}, "ssl.client.auth"),
        ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, "ssl.enabled.protocols"),
    ],
)
def test_grpc_refuses_what_it_cannot_honour(pki: Pki, extra: dict[str, str], key: str) -> None:
    settings = _server(pki, extra=dict(extra))
    assert key in grpc_unsupported_keys(settings, server=True)
    with pytest.raises(TlsConfigError) as caught:
        grpc_server_credentials(settings)
    assert caught.value.key == key


def test_grpc_required_client_auth_needs_a_truststore(pki: Pki) -> None:
    settings = TlsSettings(keystore_location=str(pki.node.keystore_path), client_auth="required")
    with pytest.raises(TlsConfigError, match="truststore"):
        grpc_server_credentials(settings)


def test_grpc_channel_credentials(pki: Pki) -> None:
    anonymous = grpc_channel_credentials(_client(pki))
    assert anonymous == (pki.ca.certificate_path.read_bytes(), None, None)
    mutual = grpc_channel_credentials(_client(pki, pki.client))
    assert mutual.private_key_pem is not None and b"PRIVATE KEY" in mutual.private_key_pem
    assert mutual.certificate_chain_pem == pki.client.certificate_path.read_bytes()
    assert grpc_channel_credentials(TlsSettings()).root_certificates_pem is None
    with pytest.raises(TlsConfigError) as caught:
        grpc_channel_credentials(_client(pki, extra={"ssl.endpoint.identification.algorithm": ""}))
    assert caught.value.key == "ssl.endpoint.identification.algorithm"


# --- subject rendering (expected strings as Java's X500Principal.getName() prints them)

_A = x509.NameAttribute


def _certificate(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(x509.Name([_A(NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.DER)
    )


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (
            x509.Name(
                [
                    _A(NameOID.COUNTRY_NAME, "US"),
                    _A(NameOID.ORGANIZATION_NAME, "kraftlog"),
                    _A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                    _A(NameOID.COMMON_NAME, "client"),
                ]
            ),
            "CN=client,OU=eng,O=kraftlog,C=US",
        ),
        (
            x509.Name(
                [_A(NameOID.ORGANIZATION_NAME, 'a,b+c=d<e>f;g"h\\i#j'), _A(NameOID.COMMON_NAME, " lead and trail  ")]
            ),
            'CN=\\ lead and trail\\ \\ ,O=a\\,b\\+c\\=d\\<e\\>f\\;g\\"h\\\\i\\#j',
        ),
        (x509.Name([_A(NameOID.COMMON_NAME, "#hash first")]), "CN=\\#hash first"),
        (
            x509.Name([_A(NameOID.EMAIL_ADDRESS, "a@b.c"), _A(NameOID.COMMON_NAME, "x")]),
            "CN=x,1.2.840.113549.1.9.1=#16056140622e63",
        ),
        (x509.Name.from_rfc4514_string("CN=a+UID=b,DC=example,DC=com"), "CN=a+UID=b,DC=example,DC=com"),
        (
            x509.Name(
                [
                    _A(NameOID.SERIAL_NUMBER, "1234"),
                    _A(NameOID.TITLE, "boss"),
                    _A(NameOID.STREET_ADDRESS, "Main St"),
                    _A(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                    _A(NameOID.LOCALITY_NAME, "SF"),
                ]
            ),
            "L=SF,ST=CA,STREET=Main St,2.5.4.12=#0c04626f7373,2.5.4.5=#130431323334",
        ),
        (x509.Name([_A(NameOID.COMMON_NAME, "Jos\u00e9 \u00fc\u4e2d")]), "CN=Jos\u00e9 \u00fc\u4e2d"),
        (x509.Name([_A(NameOID.COMMON_NAME, "bmp", _type=_ASN1Type.BMPString)]), "CN=bmp"),
        (
            x509.Name(
                [
                    _A(NameOID.COMMON_NAME, "pr int", _type=_ASN1Type.PrintableString),
                    _A(NameOID.ORGANIZATION_NAME, "t61", _type=_ASN1Type.T61String),
                ]
            ),
            "O=t61,CN=pr int",
        ),
        (x509.Name([_A(NameOID.COMMON_NAME, "u", _type=_ASN1Type.UniversalString)]), "CN=#1c0400000075"),
        (x509.Name([]), ""),
        (x509.Name([_A(NameOID.COMMON_NAME, "   ")]), "CN=\\ \\ \\ "),
        (x509.Name([_A(NameOID.COMMON_NAME, "a\rb\x01c\x00d\r")]), "CN=a\rb\x01c\\00d\\\r"),
    ],
)
def test_subject_as_java_renders_it(subject: x509.Name, expected: str) -> None:
    der = _certificate(subject)
    assert certificate_subject(der) == expected
    pem = ssl.DER_cert_to_PEM_cert(der).encode()
    assert certificate_subject(b"junk before\n" + pem) == expected


def test_principal_of_a_certificate() -> None:
    der = _certificate(x509.Name([_A(NameOID.ORGANIZATION_NAME, "kraftlog"), _A(NameOID.COMMON_NAME, "alice")]))
    assert principal_from_certificate(der) == "User:CN=alice,O=kraftlog"
    assert principal_from_certificate(der, "RULE:^CN=(.*?),O=kraftlog$/$1/") == "User:alice"
    assert principal_from_certificate(None) == principal_from_certificate(b"") == "User:ANONYMOUS"
    with pytest.raises(NoMatchingRuleError, match="No rules apply to CN=alice,O=kraftlog") as caught:
        principal_from_certificate(der, "RULE:^CN=bob$/bob/")
    assert caught.value.error_code == -1  # Kafka's KafkaException: UNKNOWN_SERVER_ERROR
    with pytest.raises(ValueError):
        certificate_subject(b"\x30\x03\x02\x01")


# --- ssl.principal.mapping.rules (outcomes checked against Kafka's SslPrincipalMapper)

_DOC_RULES = """RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,
DEFAULT"""


def test_kafka_documentation_example() -> None:
    mapper = SslPrincipalMapper.from_rules(_DOC_RULES)
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    assert mapper.name("O=no common name") == "O=no common name"


@pytest.mark.parametrize(
    ("rules", "name", "expected"),
    [
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US",
            "DUKE@SME",
        ),
        ("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT", "CN=Smith\\, Ann,OU=ops,DC=example", "Smith\\, Ann"),
        ("RULE:^CN=(.*)$/$5-$1/", "CN=a", "$5-a"),  # no group 5: literal
        ("RULE:^(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)$/$123|$12|$1$0/", "abcdefghijkl", "l3|l|aabcdefghijkl"),
        ("RULE:^CN=(.*)$/$01/", "CN=a", "a"),
        ("RULE:(.*)/x$1/", "abc", "xabcx"),  # replaced at every match, as Java's replaceAll
        ("RULE:^CN=(?<user>[a-z]+)$/${user}@x/", "CN=bob", "bob@x"),
        ("RULE:^CN=(.*)$/\\$1/", "CN=a", "$1"),
        ("RULE:^CN=(\\w+)$/$1/U", "CN=ab_c", "AB_C"),
        ("RULE:^(?i)cn=(.*),o=(.*)$/$2/U", "cn=a,O=b", "B"),
        ("RULE:^CN=([a-z]+),.*$/$1/, RULE:^O=(.*)$/org-$1/L", "O=ABC", "org-abc"),
        ("RULE:\\/\\\\\\(\\)/\\/\\//", "/\\()", "//"),
    ],
)
def test_rule_outcomes(rules: str, name: str, expected: str) -> None:
    assert SslPrincipalMapper.from_rules(rules).name(name) == expected


@pytest.mark.parametrize(
    ("rules", "name"),
    [
        ("RULE:^CN=(\\w+)$/$1/", "CN=\u00e9t\u00e9"),  # \w is ASCII, as in Java
        ("", "CN=a"),
        (",   , , ", "CN=a"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=x"),
    ],
)
def test_no_rule_applies(rules: str, name: str) -> None:
    with pytest.raises(NoMatchingRuleError):
        SslPrincipalMapper.from_rules(rules).name(name)


@pytest.mark.parametrize(
    ("rules", "parsed"),
    [
        ("", []),
        ("DEFAULT", ["DEFAULT"]),
        ("RULE://", ["RULE:/"]),
        ("RULE:/.*/L", ["RULE:/.*/L"]),
        ("  RULE:// ,  DEFAULT  ", ["RULE:/", "DEFAULT"]),
        ("  RULE:   /     / ,  DEFAULT  ", ["RULE:   /     ", "DEFAULT"]),
        (
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
            ["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1", "DEFAULT"],
        ),
        (",,RULE://,,,DEFAULT,,", ["RULE:/", "DEFAULT"]),
        (_DOC_RULES, [line.rstrip(",").rstrip("/") if line != "DEFAULT" else line for line in _DOC_RULES.splitlines()]),
        ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,DEFAULT", ["RULE:,RULE:,/,RULE:,\\//U", "RULE:,/RULE:,", "DEFAULT"]),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, parsed: list[str]) -> None:
    assert list(SslPrincipalMapper.from_rules(rules).rules) == parsed


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:^CN=(.*$/$1/",  # not a regular expression
        "RULE:^CN=.*$/$1/",  # a group the pattern does not have
        "RULE:^CN=(.*)$/$/",
        "RULE:^CN=(.*)$/${nope}/",
    ],
)
def test_invalid_rules_are_config_errors(rules: str) -> None:
    with pytest.raises(TlsConfigError) as caught:
        SslPrincipalMapper.from_rules(rules)
    assert caught.value.key == "ssl.principal.mapping.rules"


def test_an_error_in_a_listeners_own_value_names_the_prefixed_key() -> None:
    prefix = listener_prefix("SSL")
    with pytest.raises(TlsConfigError) as caught:
        TlsSettings.from_config({"ssl.client.auth": "none", prefix + "ssl.client.auth": "maybe"}, prefix)
    assert caught.value.key == "listener.name.ssl.ssl.client.auth"
    with pytest.raises(TlsConfigError) as caught:
        TlsSettings.from_config({"ssl.client.auth": "maybe"}, prefix)
    assert caught.value.key == "ssl.client.auth"
