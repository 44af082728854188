"""gRPC channel options every kraftlog client of a kraftlog service uses (brokers, controllers' peers,
the client library).

gRPC's defaults suit the public internet, not a broker cluster: a connection attempt to a peer whose
packets are dropped (a cut link, a paused host) waits up to 20 s (``min_reconnect_backoff_ms`` is also
the connect timeout) and the reconnect backoff grows to 120 s, so a node could stay unreachable for
many seconds after the network healed. Kafka's clients cap the reconnect backoff at
``reconnect.backoff.max.ms`` = 1 s; these options do the same.
"""

from __future__ import annotations

__all__ = ["RECONNECT_OPTIONS"]

RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 1000),  # also the timeout of one connection attempt
    ("grpc.max_reconnect_backoff_ms", 1000),
)
