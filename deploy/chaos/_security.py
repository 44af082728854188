"""How every connection of a chaos run reaches a secured cluster: the one place that knows.

A chaos run opens many connections of different kinds: kraftlog's `Producer`, `Consumer`, `Admin`
and `GroupAdmin` (gRPC), kafka-python's producer and consumer (the brokers' Kafka listeners), and
raw gRPC channels for the health checks and the quorum profile's AdminService calls. On a
``--security tls|mtls`` cluster each of them must present the same identity (the cluster's
``admin`` certificate, a super user under mTLS, so the authorizer lets the run do everything it
needs). `ChaosSecurity` holds that identity once, taken from the target (a local cluster's state,
or an inventory's ``[client]`` table), and every construction site asks it: `client_kwargs` for
kraftlog's clients, `kafka_kwargs` for kafka-python, `channel` for a raw channel. No module builds
TLS settings of its own, so a connection cannot be forgotten on plaintext.

The arguments are kafka-python's (``security_protocol``, ``ssl_cafile``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_password``, ``ssl_check_hostname``), which kraftlog's clients take too.
Ordering rule: the shape is checked when the value is made (no file is read then, so a dry run of
an inventory needs no certificates on this machine); the PEM files are read at the first connection.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from kraftlog.common.security import TlsSettings
from kraftlog.proto import RECONNECT_OPTIONS

__all__ = ["CLIENT_SECURITY_KEYS", "PLAINTEXT", "SECURITY_MODES", "ChaosSecurity"]

#: what ``kraftlog chaos run --security`` offers for the run's own cluster (`deploy._cluster.LocalCluster`)
SECURITY_MODES = ("plaintext", "tls", "mtls")
#: kafka-python's (and kraftlog's clients') security arguments an inventory's ``[client]`` table may set
CLIENT_SECURITY_KEYS = (
    "security_protocol",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_check_hostname",
)
_PROTOCOLS = ("PLAINTEXT", "SSL")


def _items(kwargs: Mapping[str, Any], what: str) -> tuple[tuple[str, Any], ...]:
    """``kwargs`` checked (known keys, PLAINTEXT or SSL, certificate and key together) and frozen."""
    unknown = sorted(set(kwargs) - set(CLIENT_SECURITY_KEYS))
    if unknown:
        raise ValueError(
            f"{what}: unknown or unsupported key(s) {', '.join(unknown)} (the chaos run's clients take "
            f"{', '.join(CLIENT_SECURITY_KEYS)}; SASL is not offered)"
        )
    protocol = str(kwargs.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(f"{what}: security_protocol={kwargs['security_protocol']!r}: expected PLAINTEXT or SSL")
    ssl = sorted(k for k in kwargs if k.startswith("ssl_"))
    if protocol == "PLAINTEXT" and ssl:
        raise ValueError(f"{what}: {', '.join(ssl)} given with security_protocol PLAINTEXT: set it to SSL")
    if bool(kwargs.get("ssl_certfile")) != bool(kwargs.get("ssl_keyfile")):
        raise ValueError(f"{what}: ssl_certfile and ssl_keyfile go together (the client's certificate and its key)")
    if "ssl_check_hostname" in kwargs and not isinstance(kwargs["ssl_check_hostname"], bool):
        raise ValueError(f"{what}: ssl_check_hostname must be true or false")
    if protocol == "PLAINTEXT":
        return ()
    return tuple(sorted({**kwargs, "security_protocol": "SSL"}.items()))


@dataclass(frozen=True)
class ChaosSecurity:
    """The identity every connection of one chaos run presents. Build it with `of`.

    ``mode`` names it for the report (``plaintext``, ``tls``, ``mtls``, or a local cluster's own
    name for its security); ``client`` are the kraftlog clients' arguments (gRPC listeners);
    ``kafka`` kafka-python's (the Kafka listener), the same unless a cluster authenticates its
    Kafka listener differently."""

    mode: str = "plaintext"
    client: tuple[tuple[str, Any], ...] = ()
    kafka: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(
        cls,
        client: Mapping[str, Any],
        *,
        kafka: Mapping[str, Any] | None = None,
        mode: str | None = None,
        what: str = "client security",
    ) -> ChaosSecurity:
        """From kafka-python-style arguments (as `LocalCluster.client_security` returns them).
        ``kafka``: the Kafka listener's arguments when they differ (not checked here: kafka-python
        checks its own); ``mode``: the report's name, else plaintext, tls or mtls by what is given."""
        items = _items(client, what)
        if mode is None:
            given = dict(items)
            mode = "plaintext" if not items else ("mtls" if given.get("ssl_certfile") else "tls")
        return cls(mode, items, items if kafka is None else tuple(sorted(kafka.items())))

    @property
    def secured(self) -> bool:
        return bool(self.client)

    def client_kwargs(self) -> dict[str, Any]:
        """The arguments of a kraftlog `Producer`, `Consumer`, `Admin` or `GroupAdmin`."""
        return dict(self.client)

    def kafka_kwargs(self) -> dict[str, Any]:
        """The arguments of kafka-python's `KafkaProducer` / `KafkaConsumer`."""
        return dict(self.kafka)

    @functools.cached_property
    def _security(self) -> Any:
        """kraftlog's client security of these arguments (`kraftlog.client._security`), made
        once: the PEM files are read at the first use, as kraftlog's clients read them."""
        from kraftlog.client import client_security

        return client_security(**dict(self.client))

    @property
    def tls(self) -> TlsSettings | None:
        """The TLS settings of the raw channels (None on plaintext)."""
        tls: TlsSettings | None = self._security.tls
        return tls

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = RECONNECT_OPTIONS) -> grpc.Channel:
        """A blocking gRPC channel to ``address`` with this identity (plaintext when not secured)."""
        channel: grpc.Channel = self._security.open(address, options)
        return channel


#: a plaintext cluster: no TLS anywhere
PLAINTEXT = ChaosSecurity()
