"""TLS on the controller Raft port (issue 26): each controller proves who it is with its certificate.

When the cluster runs TLS (the CONTROLLER listener is SSL or SASL_SSL), every Raft connection is
TLS with certificates required on both sides, verified against the listener's trust store, and the
peer's certificate must name the voter the Raft handshake authenticated: its subject CN (or a DNS
subjectAltName) is ``node-<id>``, as the project's CA issues node certificates
(`kraftlog.deploy._certs`). So a node holding its own certificate cannot pose as another voter (its
CN names itself), and a certificate from a foreign CA fails the TLS handshake. The node-key
handshake (`quorum.raft._identity`) still runs inside TLS and binds the directory id; without TLS
the per-node key stays the whole check.

TLS runs over ``ssl.SSLObject`` and memory BIOs, not ``SSLSocket``: pysyncobj's poller sees the
plain file descriptor, so no decrypted bytes ever hide in an OpenSSL buffer where the poller cannot
signal them (measured on this machine: a mutual TLS 1.3 handshake costs about 8 ms of CPU for both
sides, a 200-byte Raft frame about 9 us, a 64 KiB one about 150 us -- well under a Raft tick).

Limits: a connection is still pending (the transport's ``max_unauthenticated`` and handshake
deadline) until both the TLS and the Raft handshakes are done; during the TLS handshake it reads
4 KiB at a time and OpenSSL bounds what one handshake message may hold, so an unauthenticated
peer costs at most that buffer and one handshake's CPU on the tick thread.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Final

__all__ = ["RaftTls", "TlsLayer", "certificate_node_ids", "node_certificate_name"]

_CHUNK: Final = 65536


def node_certificate_name(node_id: int) -> str:
    """The CN (or DNS SAN) a controller's certificate carries: ``node-<id>``."""
    return f"node-{node_id}"


def certificate_node_ids(cert: dict[str, object]) -> frozenset[int]:
    """The node ids a verified peer certificate (``SSLObject.getpeercert()``) names: its subject
    CNs and DNS subjectAltNames of the form ``node-<id>``."""
    names: list[str] = []
    for rdn in cert.get("subject", ()) or ():  # type: ignore[attr-defined]
        for key, value in rdn:
            if key == "commonName":
                names.append(value)
    for kind, value in cert.get("subjectAltName", ()) or ():  # type: ignore[attr-defined]
        if kind == "DNS":
            names.append(value)
    ids: set[int] = set()
    for name in names:
        prefix, _, digits = name.partition("-")
        if prefix == "node" and digits.isdigit() and digits == str(int(digits)):
            ids.add(int(digits))
    return frozenset(ids)


@dataclass(frozen=True, slots=True)
class RaftTls:
    """The contexts of a TLS Raft port: a server one (client certificates required) and a client
    one (its own certificate offered; the peer is identified by its node id, not its host name)."""

    server: ssl.SSLContext
    client: ssl.SSLContext

    def __post_init__(self) -> None:
        self.server.verify_mode = ssl.CERT_REQUIRED
        self.client.check_hostname = False
        self.client.verify_mode = ssl.CERT_REQUIRED

    def layer(self, *, server_side: bool) -> TlsLayer:
        return TlsLayer(self.server if server_side else self.client, server_side=server_side)


class TlsLayer:
    """One connection's TLS state: ciphertext in (`feed`), plaintext out; plaintext in (`write`),
    ciphertext out (`outgoing`). Plaintext written before the handshake ends is held and sent
    after it. Raises ``ssl.SSLError`` on a failed handshake (a foreign CA, no certificate)."""

    def __init__(self, context: ssl.SSLContext, *, server_side: bool) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side)
        self._held = bytearray()
        self.established = False

    def start(self) -> None:
        """Begin the handshake (the client's first flight goes to `outgoing`)."""
        self._handshake()

    def _handshake(self) -> None:
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            return
        self.established = True
        if self._held:
            held, self._held = bytes(self._held), bytearray()
            self._obj.write(held)

    def feed(self, data: bytes) -> bytes:
        """Ciphertext received; returns the plaintext it completes (may be empty)."""
        self._in.write(data)
        if not self.established:
            self._handshake()
            if not self.established:
                return b""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._obj.read(_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def write(self, data: bytes) -> None:
        if self.established:
            self._obj.write(data)
        else:
            self._held += data

    def outgoing(self) -> bytes:
        return self._out.read()

    def peer_node_ids(self) -> frozenset[int]:
        """The node ids the verified peer certificate names (empty before the handshake)."""
        if not self.established:
            return frozenset()
        cert = self._obj.getpeercert()
        return certificate_node_ids(dict(cert)) if cert else frozenset()
