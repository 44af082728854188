"""Throw-away certificates (kraftlog.deploy._certs): what is written, with which permissions, and
that kraftlog's TLS contexts built from the files authenticate each other (over a socketpair)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from test_tls import handshake

from kraftlog.common.security._tls import TlsSettings, client_context, peer_principal, server_context
from kraftlog.deploy import _certs
from kraftlog.deploy._certs import load_ca, make_ca, make_certificate

NOW = dt.datetime(2030, 6, 1, 12, 0, tzinfo=dt.UTC)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_permissions_even_under_an_open_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        ca = make_ca(tmp_path / "pki", now=NOW)
        node = make_certificate(ca, tmp_path / "pki", "node1", ["localhost", "127.0.0.1", "::1"], now=NOW)
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "pki") == 0o700
    assert _mode(ca.key_path) == _mode(node.key_path) == _mode(node.keystore_path) == 0o600
    assert _mode(ca.certificate_path) == _mode(node.certificate_path) == 0o644
    assert sorted(p.name for p in (tmp_path / "pki").iterdir()) == [
        "ca.crt",
        "ca.key",
        "node1.crt",
        "node1.key",
        "node1.keystore.pem",
    ]
    keystore = node.keystore_path.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----") and keystore.count("BEGIN CERTIFICATE") == 2
    assert node.certificate_path.read_text().count("BEGIN CERTIFICATE") == 2  # leaf, then the CA
    assert "PRIVATE" not in node.certificate_path.read_text()


def test_key_files_are_0600_before_the_first_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modes: list[tuple[int, bytes]] = []
    real_write = os.write

    def spying_write(fd: int, data: bytes | memoryview) -> int:
        modes.append((stat.S_IMODE(os.fstat(fd).st_mode), bytes(data[:30])))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spying_write)
    previous = os.umask(0)
    try:
        ca = make_ca(tmp_path, now=NOW)
        make_certificate(ca, tmp_path, "client", client=True, now=NOW)
    finally:
        os.umask(previous)
    key_writes = [mode for mode, head in modes if b"PRIVATE KEY" in head]
    assert len(key_writes) == 3 and set(key_writes) == {0o600}  # ca.key, client.key, client.keystore.pem
    assert not list(tmp_path.glob(".*.tmp"))


def test_certificate_contents(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, "test CA", validity=dt.timedelta(days=2), now=NOW)
    node = make_certificate(ca, tmp_path, "node1", ["broker1.example", "10.0.0.7"], now=NOW)
    client = make_certificate(ca, tmp_path, "alice", client=True, now=NOW)
    assert ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(ca.certificate.public_key(), ec.EllipticCurvePublicKey)
    leaf = node.certificate
    assert leaf.issuer == ca.certificate.subject
    assert leaf.not_valid_before_utc == NOW - dt.timedelta(minutes=5)
    assert leaf.not_valid_after_utc == NOW + dt.timedelta(days=30)
    assert ca.certificate.not_valid_after_utc == NOW + dt.timedelta(days=2)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["broker1.example"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7")]
    usages = list(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert usages == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    client_usages = list(client.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert client_usages == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not client.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


@pytest.mark.parametrize(
    ("name", "hosts", "client"), [("../evil", ["h"], False), (".hidden", ["h"], False), ("node", [], False)]
)
def test_bad_names_and_hostless_nodes_are_refused(tmp_path: Path, name: str, hosts: list[str], client: bool) -> None:
    ca = make_ca(tmp_path, now=NOW)
    with pytest.raises(ValueError):
        make_certificate(ca, tmp_path, name, hosts, client)


def test_load_ca_signs_more_certificates(tmp_path: Path) -> None:
    made = make_ca(tmp_path)
    loaded = load_ca(tmp_path)
    assert loaded.certificate == made.certificate
    later = make_certificate(loaded, tmp_path, "node9", ["localhost"])
    later.certificate.verify_directly_issued_by(made.certificate)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, _certs.IssuedCertificate]:
    root = tmp_path_factory.mktemp("certs")
    ca = make_ca(root / "a")
    other = make_ca(root / "b", "other CA")
    return {
        "node": make_certificate(ca, root / "a", "node1", ["localhost", "127.0.0.1"]),
        "client": make_certificate(ca, root / "a", "client", client=True),
        "foreign": make_certificate(other, root / "b", "client", client=True),
    }


def _server(pki: dict[str, _certs.IssuedCertificate], client_auth: str) -> ssl.SSLContext:
    return server_context(TlsSettings.from_config({**pki["node"].ssl_config(), "ssl.client.auth": client_auth}))


def _client(pki: dict[str, _certs.IssuedCertificate], who: str | None) -> ssl.SSLContext:
    config = {"ssl.truststore.location": str(pki["node"].ca_path)}
    if who is not None:
        config = {**pki[who].ssl_config(), **config}
    return client_context(TlsSettings.from_config(config))


def test_tls_handshake_with_the_generated_files(pki: dict[str, _certs.IssuedCertificate]) -> None:
    server, client = handshake(_server(pki, "none"), _client(pki, None), "127.0.0.1")
    assert server.version() == client.version() == "TLSv1.3"
    assert peer_principal(server) == "User:ANONYMOUS"


def test_mutual_tls_gives_the_clients_principal(pki: dict[str, _certs.IssuedCertificate]) -> None:
    server, _ = handshake(_server(pki, "required"), _client(pki, "client"))
    assert peer_principal(server) == "User:CN=client"


def test_a_client_certificate_of_another_ca_is_refused(pki: dict[str, _certs.IssuedCertificate]) -> None:
    with pytest.raises(ssl.SSLError):
        handshake(_server(pki, "required"), _client(pki, "foreign"))
    with pytest.raises(ssl.SSLError):
        handshake(_server(pki, "requested"), _client(pki, "foreign"))


def test_required_client_auth_without_a_certificate_is_refused(pki: dict[str, _certs.IssuedCertificate]) -> None:
    with pytest.raises(ssl.SSLError, match="(?i)certificate"):
        handshake(_server(pki, "required"), _client(pki, None))
