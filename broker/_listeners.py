"""The broker's listeners: which speaks gRPC, which speaks Kafka's wire protocol, and what each
advertises (registered with the controllers, told to clients)."""

from __future__ import annotations

import socket
from typing import Any

from kraftlog.common.config import parse_listeners
from kraftlog.common.security import BROKER_LISTENER, grpc_listener_name

__all__ = [
    "BROKER_LISTENER",
    "advertised_broker_listener",
    "broker_listener",
    "broker_listener_name",
    "kafka_listeners",
]


def _listeners(config: Any, key: str) -> dict[str, tuple[str, int]]:
    raw = config[key]
    if not raw:
        return {}
    listeners: dict[str, tuple[str, int]] = parse_listeners(raw if isinstance(raw, str) else ",".join(raw))
    return listeners


def _grpc_listener_name(listeners: dict[str, tuple[str, int]]) -> str | None:
    return grpc_listener_name(listeners)


def broker_listener_name(config: Any) -> str:
    """The name of the broker's gRPC listener (BROKER, or the first that is not CONTROLLER)."""
    name = _grpc_listener_name(_listeners(config, "listeners"))
    if name is None:
        raise ValueError("no broker listener in 'listeners'")
    return name


def broker_listener(config: Any, key: str = "listeners") -> tuple[str, int]:
    """The broker's gRPC address in ``key``: its BROKER listener (or the first non-controller one)."""
    listeners = _listeners(config, key)
    name = _grpc_listener_name(listeners)
    if name is None:
        raise ValueError(f"no broker listener in '{key}'")
    return listeners[name]


def kafka_listeners(config: Any) -> dict[str, tuple[tuple[str, int], tuple[str, int]]]:
    """The broker's Kafka-protocol listeners: name -> (bound address, advertised address).

    Every listener of ``listeners`` other than CONTROLLER and the gRPC one (`broker_listener`)
    speaks Kafka's wire protocol (``PLAINTEXT://:9092`` beside ``BROKER://:9091``). The advertised
    address is the ``advertised.listeners`` entry of the same name, else the bound one (an empty
    host advertises this host's name, as Kafka does)."""
    bound = _listeners(config, "listeners")
    advertised = _listeners(config, "advertised.listeners")
    grpc_name = _grpc_listener_name(bound)
    out = {}
    for name, (host, port) in bound.items():
        if name in ("CONTROLLER", grpc_name):
            continue
        adv_host, adv_port = advertised.get(name, (host or socket.getfqdn(), port))
        out[name] = ((host, port), (adv_host, adv_port))
    return out


def advertised_broker_listener(config: Any) -> tuple[str, int]:
    """The address clients and other brokers are told to use (registered with the controller):
    from ``advertised.listeners`` when set (behind NAT or in a container it differs from the bound
    one), else the bound ``listeners`` address, as Kafka does."""
    if not config["advertised.listeners"]:
        return broker_listener(config)
    return broker_listener(config, "advertised.listeners")  # hosts checked when the config loaded
