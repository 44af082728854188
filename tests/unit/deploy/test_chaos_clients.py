"""``kraftlog chaos run --client`` (issue 16): the CLI offers exactly the clients the workload knows,
and an inventory names brokers' Kafka listeners or --client kafka-python is refused plainly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kraftlog.cli._chaos import CLIENTS as CLI_CLIENTS
from kraftlog.deploy.chaos._kafka_clients import CLIENTS
from kraftlog.deploy.chaos._targets import SystemdTarget, load_inventory


def test_the_cli_offers_the_workload_clients() -> None:
    assert CLI_CLIENTS == CLIENTS


def test_an_inventory_names_the_kafka_listeners(tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(
        '[[node]]\nid = 1\nrole = "controller"\nhost = "c1"\nport = 9093\n'
        '[[node]]\nid = 101\nrole = "broker"\nhost = "b1"\nport = 9091\nkafka_port = 9092\n'
        '[[node]]\nid = 102\nrole = "broker"\nhost = "b2"\nport = 9091\n'
    )
    nodes = load_inventory(path)
    assert [n.kafka_port for n in nodes] == [None, 9092, None]
    target = SystemdTarget(nodes, runner=lambda argv: None)
    with pytest.raises(ValueError, match=r"no kafka_port for broker\(s\) \[102\]"):
        _ = target.kafka_bootstrap_servers
    target.nodes[102] = dataclasses.replace(target.nodes[102], kafka_port=9092)
    assert target.kafka_bootstrap_servers == "b1:9092,b2:9092"
