"""``bootstrap.servers``: the one parser of a list of ``host:port`` addresses.

Why one: the producer, the consumer, the admin client and every CLI command take the same option;
three parsers accepted three slightly different languages (one took port 0, one split list items on
commas and one did not). Rules, as Kafka's ``ClientUtils.parseAndValidateAddresses``: entries are
separated by commas (a list's items are split too), blanks are dropped, each entry is ``host:port``
with a port in 1..65535, an IPv6 host is written in brackets (``[::1]:9092``), and at least one
entry is required.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["parse_bootstrap_servers"]


def parse_bootstrap_servers(value: str | Sequence[str]) -> list[str]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", "h2:9092"]`` -> ``["h1:9092", "h2:9092"]``.

    Raises ValueError naming the first entry that is not ``host:port``.
    """
    items = value.split(",") if isinstance(value, str) else [s for v in value for s in str(v).split(",")]
    out: list[str] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:  # an IPv6 address must be bracketed, or its last group reads as a port
            host = ""
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append(item)
    if not out:
        raise ValueError("no bootstrap servers given")
    return out
