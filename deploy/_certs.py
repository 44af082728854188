"""Throw-away certificates for ``kraftlog local start --security tls|mtls|scram``: a CA of its own,
and node and client certificates it signs, written as the PEM files Kafka's ``ssl.*`` keys read.

Not a PKI: keys are ECDSA P-256 (fast to make, accepted by OpenSSL, Java and grpc), certificates
live days, and there is no revocation. What it does take care of is the key files: each is created
with mode 0600 before a byte is written (``O_CREAT | O_EXCL`` under a temporary name, then renamed),
so no umask and no moment leaves a private key readable by others.

Files per certificate ``<name>``, all in one directory (created 0700):

* ``<name>.crt``          the certificate followed by the CA's (``ssl.keystore.certificate.chain``)
* ``<name>.key``          its PKCS#8 private key, 0600 (``ssl.keystore.key``)
* ``<name>.keystore.pem`` key and chain in one file, 0600 (``ssl.keystore.location``, type PEM)
* ``ca.crt`` / ``ca.key``  the CA (``ssl.truststore.location``; the CA key, 0600, signs more later)
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kraftlog.common import atomic_write, private_directory, write_private_file

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CertificateAuthority",
    "IssuedCertificate",
    "load_ca",
    "load_issued",
    "make_ca",
    "make_certificate",
]

CA_CERT_FILE: Final = "ca.crt"
CA_KEY_FILE: Final = "ca.key"
#: a certificate is valid from a little before "now", so a peer whose clock lags still accepts it
_CLOCK_SKEW: Final = dt.timedelta(minutes=5)
_DEFAULT_VALIDITY: Final = dt.timedelta(days=30)
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA that can sign: its certificate, where it was written, and its private key."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)
    certificate_path: Path
    key_path: Path

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class IssuedCertificate:
    """A node or client certificate signed by the CA, and its files."""

    name: str
    certificate: x509.Certificate
    certificate_path: Path
    key_path: Path
    keystore_path: Path
    ca_path: Path

    def ssl_config(self, prefix: str = "", *, key_password: str | None = None) -> dict[str, str]:
        """Kafka's keys that use these files (key store by location, trust store = the CA);
        ``prefix`` such as ``listener.name.ssl.`` scopes them to one listener."""
        config = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_path),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
        }
        if key_password is not None:
            config["ssl.key.password"] = key_password
        return {prefix + key: value for key, value in config.items()}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode("utf-8")) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _now(now: dt.datetime | None) -> dt.datetime:
    return now if now is not None else dt.datetime.now(dt.UTC)


def make_ca(
    directory: str | os.PathLike[str],
    common_name: str = "kraftlog throw-away CA",
    *,
    validity: dt.timedelta = _DEFAULT_VALIDITY,
    now: dt.datetime | None = None,
) -> CertificateAuthority:
    """Create a self-signed CA valid from ``now`` (minus five minutes of clock skew) for
    ``validity``, and write ``ca.crt`` and ``ca.key`` (0600) into ``directory``."""
    folder = private_directory(directory)
    start = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(start + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = folder / CA_KEY_FILE, folder / CA_CERT_FILE
    write_private_file(key_path, _key_pem(key, None))
    atomic_write(cert_path, certificate.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return CertificateAuthority(certificate, key, cert_path, key_path)


def load_ca(directory: str | os.PathLike[str]) -> CertificateAuthority:
    """The CA an earlier `make_ca` wrote into ``directory`` (to sign certificates for new nodes)."""
    folder = Path(directory)
    certificate = x509.load_pem_x509_certificate((folder / CA_CERT_FILE).read_bytes())
    key = serialization.load_pem_private_key((folder / CA_KEY_FILE).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{folder / CA_KEY_FILE} is not an EC private key")
    return CertificateAuthority(certificate, key, folder / CA_CERT_FILE, folder / CA_KEY_FILE)


def _alternative_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def make_certificate(
    ca: CertificateAuthority,
    directory: str | os.PathLike[str],
    name: str,
    hosts: Sequence[str] = (),
    client: bool = False,
    *,
    validity: dt.timedelta = _DEFAULT_VALIDITY,
    now: dt.datetime | None = None,
    key_password: str | None = None,
) -> IssuedCertificate:
    """Issue a certificate with subject ``CN=<name>`` (the principal ``User:CN=<name>``).

    ``hosts`` (DNS names and IP addresses) go into subjectAltName, which clients check the host
    name against; a node certificate (``client`` False) needs them and serves both TLS server and
    client auth (a broker is a client of other nodes); a client certificate serves client auth
    only. ``key_password`` encrypts the key files (PKCS#8), as ``ssl.key.password`` expects.
    """
    if not _SAFE_NAME.fullmatch(name):
        raise ValueError(f"certificate name {name!r} must be letters, digits, '.', '_' or '-' (a file name)")
    if not client and not hosts:
        raise ValueError(f"node certificate {name!r} needs at least one host name or address")
    folder = private_directory(directory)
    start = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = (
        [ExtendedKeyUsageOID.CLIENT_AUTH]
        if client
        else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(start + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(_alternative_names(hosts)), critical=False)
    certificate = builder.sign(ca.private_key, hashes.SHA256())
    chain = certificate.public_bytes(serialization.Encoding.PEM) + ca.certificate_pem
    key_pem = _key_pem(key, key_password)
    paths = folder / f"{name}.crt", folder / f"{name}.key", folder / f"{name}.keystore.pem"
    write_private_file(paths[1], key_pem)
    write_private_file(paths[2], key_pem + chain)
    atomic_write(paths[0], chain, mode=0o644)  # a certificate chain is public
    return IssuedCertificate(name, certificate, paths[0], paths[1], paths[2], ca.certificate_path)


def load_issued(directory: str | os.PathLike[str], name: str) -> IssuedCertificate:
    """The certificate `make_certificate` issued as ``name`` into ``directory`` (its files)."""
    folder = Path(directory)
    paths = folder / f"{name}.crt", folder / f"{name}.key", folder / f"{name}.keystore.pem"
    certificate = x509.load_pem_x509_certificate(paths[0].read_bytes())
    return IssuedCertificate(name, certificate, paths[0], paths[1], paths[2], folder / CA_CERT_FILE)
