"""Addresses in config values (quorum voters, listeners), parsed with the schema's error messages.

Apart from `_config_parse` because a bad value is reported as the schema's key would report it
(`ConfigError` naming the key), and the schema itself is built from `_config_parse`'s checks: the
parsers below sit on top of both, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlog.common.config._config_parse import _as_items, _listeners, _voters
from kraftlog.common.config._config_schema import NODE_CONFIG_DEFS

__all__ = ["parse_listeners", "parse_quorum_voters"]


def parse_quorum_voters(value: str | Sequence[str]) -> dict[int, tuple[str, int]]:
    """Parse ``controller.quorum.voters`` (``"1@host:9093,2@host:9094"``) into id -> (host, port).

    IPv6 hosts are written in brackets (``1@[::1]:9093``) and returned without them. Raises
    ``ConfigError`` naming ``controller.quorum.voters`` on a malformed entry, a duplicate id or two
    voters sharing one endpoint: each of those would split or stall the Raft quorum.
    """
    try:
        return _voters(_as_items(value))
    except ValueError as exc:
        key = NODE_CONFIG_DEFS["controller.quorum.voters"]
        raise key._invalid(value, str(exc)) from None


def parse_listeners(value: str | Sequence[str]) -> dict[str, tuple[str, int]]:
    """Parse ``listeners``-style values (``"PLAINTEXT://:9092,CONTROLLER://host:9093"``).

    Returns listener name -> (host, port); an empty host means "all interfaces", as in Kafka.
    """
    try:
        return _listeners(_as_items(value))
    except ValueError as exc:
        key = NODE_CONFIG_DEFS["listeners"]
        raise key._invalid(value, str(exc)) from None
