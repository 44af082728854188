"""gRPC channel options every kraftlog client of a kraftlog service uses (brokers, controllers' peers,
the client library).

gRPC's defaults suit the public internet, not a broker cluster: a connection attempt to a peer whose
packets are dropped (a cut link, a paused host) waits up to 20 s (``min_reconnect_backoff_ms`` is also
the connect timeout) and the reconnect backoff grows to 120 s, so a node could stay unreachable for
many seconds after the network healed. Kafka's clients cap the reconnect backoff at
``reconnect.backoff.max.ms`` = 1 s; these options do the same.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import grpc

from kraftlog.common._tls import TlsSettings, grpc_channel_credentials

__all__ = ["RECONNECT_OPTIONS", "channel_credentials", "open_aio_channel", "open_channel"]

RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 1000),  # also the timeout of one connection attempt
    ("grpc.max_reconnect_backoff_ms", 1000),
)


@functools.lru_cache(maxsize=16)
def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    """gRPC channel credentials of ``tls`` (trust store, and the client's key and chain for mutual
    TLS); read once per settings, since the PEM files are read and a key may be decrypted."""
    creds = grpc_channel_credentials(tls)
    return grpc.ssl_channel_credentials(
        root_certificates=creds.root_certificates_pem,
        private_key=creds.private_key_pem,
        certificate_chain=creds.certificate_chain_pem,
    )


def open_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), tls: TlsSettings | None = None
) -> grpc.Channel:
    """A blocking channel to a kraftlog node: TLS when ``tls`` is given, else plaintext."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, channel_credentials(tls), options=list(options))


def open_aio_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), tls: TlsSettings | None = None
) -> grpc.aio.Channel:
    """An asyncio channel to a kraftlog node: TLS when ``tls`` is given, else plaintext."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=list(options))
