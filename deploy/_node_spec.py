"""One node of a local cluster as the launcher records it (`LocalCluster`, its security half and the
chaos inventory read it): its own module so that those parts need not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["NodeSpec"]


@dataclass
class NodeSpec:
    node_id: int
    roles: list[str]
    controller_port: int | None
    broker_port: int | None
    dir: str
    pid: int | None = None
    host: str = "127.0.0.1"

    @property
    def config_path(self) -> Path:
        return Path(self.dir) / "node.toml"

    @property
    def kafka_port(self) -> int | None:
        """The broker's Kafka-protocol listener (PLAINTEXT): the second port of its pair."""
        return self.broker_port + 1 if self.broker_port else None

    @property
    def log_path(self) -> Path:
        return Path(self.dir) / "node.log"
