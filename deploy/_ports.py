"""The ports a `LocalCluster` gives its nodes (kept apart from the cluster so the choice, and why it
is made below the kernel's ephemeral range, reads on its own)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port_pair"]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


#: the lowest port `free_port_pair` draws from; below it are well-known and registered services
_LOWEST_CHOSEN_PORT = 10_000


def _ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux's default when unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999


def free_port_pair(taken: set[int], rng: random.Random | None = None) -> int:
    """A port p such that p and p + 1 are free (gRPC and Raft of one controller).

    Drawn at random from below the kernel's ephemeral range: a port found free there can be taken
    between this check and the node's bind only by another listener, never by the local end of some
    outgoing connection (which a port asked of the kernel with ``bind(0)`` could be: a client
    connecting meanwhile got it, and the node failed to start with EADDRINUSE). Random, so two test
    runs on one machine rarely try the same ports."""
    rng = rng or random.SystemRandom()
    ephemeral_low, _ = _ephemeral_port_range()
    highest = ephemeral_low - 2
    if highest - _LOWEST_CHOSEN_PORT < 1_000:
        raise RuntimeError(
            f"too few ports below the ephemeral range ({ephemeral_low}): widen "
            "/proc/sys/net/ipv4/ip_local_port_range's lower bound"
        )
    for _ in range(500):
        port = rng.randint(_LOWEST_CHOSEN_PORT, highest)
        if port not in taken and port + 1 not in taken and _port_free(port) and _port_free(port + 1):
            taken.update((port, port + 1))
            return port
    raise RuntimeError("no free pair of ports on 127.0.0.1")
