"""Where the chaos runner's faults land: a local cluster (`deploy._cluster.LocalCluster`) or a
systemd cluster on real hosts, reached over ssh.

Both speak the same small protocol, so the fault schedule and the checker do not care which one
they attack. Each also says how a client reaches it (`security`, a `ChaosSecurity`): a local
cluster's from its state (``kraftlog local start --security``), an inventory's from its optional
``[client]`` table of kafka-python's security arguments (paths to the CA, the client certificate
and its key on the machine that runs the chaos command).

Network partitions need a ``netns`` local cluster (links really cut) or, on systemd hosts, iptables
rules tagged with a comment so healing removes exactly what the run added. Storage faults damage a
stopped node's files (`deploy.chaos._storage_faults`): a local cluster's only (the run reads and
writes them directly).
"""

from __future__ import annotations

import random
import shlex
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from kraftlog.deploy.chaos._clock_faults import set_clock_offset
from kraftlog.deploy.chaos._security import CLIENT_SECURITY_KEYS, PLAINTEXT, ChaosSecurity
from kraftlog.deploy.chaos._storage_faults import damage_node, set_no_space
from kraftlog.deploy.chaos._voter_faults import VoterChanges

__all__ = ["ChaosTarget", "LocalTarget", "SystemdNode", "SystemdTarget", "load_inventory", "load_inventory_security"]

_log = structlog.get_logger("deploy.chaos")


class ChaosTarget(Protocol):
    """The operations a fault needs. Node ids are Kafka's ``node.id``."""

    def controllers(self) -> list[int]: ...
    def brokers(self) -> list[int]: ...
    @property
    def bootstrap_servers(self) -> str: ...
    @property
    def kafka_bootstrap_servers(self) -> str: ...
    @property
    def controller_addresses(self) -> str: ...
    @property
    def security(self) -> ChaosSecurity: ...
    def partitions_unavailable(self) -> str | None: ...
    def storage_unavailable(self) -> str | None: ...
    def damage(self, node_id: int, kind: str, seed: int) -> list[str]: ...
    def set_fsync_delay(self, node_id: int, delay_ms: int) -> None: ...
    def set_no_space(self, node_id: int, full: bool) -> None: ...
    def set_clock_offset(self, node_id: int, offset_ms: int) -> None: ...
    def slow_link(self, first: int, second: int, delay_ms: int, rate_kbit: int) -> str: ...
    def unslow_link(self, first: int, second: int) -> None: ...
    def kill(self, node_id: int) -> None: ...
    def start(self, node_id: int) -> None: ...
    def pause(self, node_id: int) -> None: ...
    def resume(self, node_id: int) -> None: ...
    def restart(self, node_id: int) -> None: ...
    def cut(self, node_id: int) -> None: ...
    def heal(self, node_id: int) -> None: ...
    def is_running(self, node_id: int) -> bool: ...
    def health_addresses(self) -> dict[int, list[str]]: ...


class LocalTarget:
    """A cluster started by ``kraftlog local start`` or by the runner itself. Its clients connect
    as the cluster's ``admin`` (a super user under mTLS): gRPC with `LocalCluster.client_security`,
    the Kafka listener with ``kafka_client_security`` where the cluster has one (a listener that
    authenticates otherwise than by certificate), else the same."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        #: the voter changes of a dynamic quorum (KIP-853); None for a static one
        self.voter_changes = VoterChanges(cluster) if getattr(cluster, "quorum", "static") == "dynamic" else None
        kafka = getattr(cluster, "kafka_client_security", None)
        self._security = ChaosSecurity.of(
            cluster.client_security(),
            kafka=kafka() if kafka is not None else None,
            mode=cluster.security,
            what=f"the cluster in {cluster.base_dir}",
        )

    @property
    def security(self) -> ChaosSecurity:
        return self._security

    def controllers(self) -> list[int]:
        return sorted(n for n, s in self.cluster.nodes.items() if "controller" in s.roles)

    def brokers(self) -> list[int]:
        return sorted(n for n, s in self.cluster.nodes.items() if "broker" in s.roles)

    @property
    def bootstrap_servers(self) -> str:
        return str(self.cluster.bootstrap_servers)

    @property
    def kafka_bootstrap_servers(self) -> str:
        return str(self.cluster.kafka_bootstrap_servers)

    @property
    def controller_addresses(self) -> str:
        return ",".join(self.cluster.controller_addresses)

    def partitions_unavailable(self) -> str | None:
        if self.cluster.network != "netns":
            from kraftlog.deploy._netns import unavailable_reason

            why = unavailable_reason()
            return (
                "the cluster runs on loopback (start it with --network netns)"
                if why is None
                else f"the cluster runs on loopback: {why}"
            )
        return None

    def storage_unavailable(self) -> str | None:
        return None

    def damage(self, node_id: int, kind: str, seed: int) -> list[str]:
        """Damage the stopped node's partitions of every topic but the internal ones (``__...``),
        in every directory of its ``log.dirs``; one line per file damaged."""
        if self.cluster.is_running(node_id):
            raise RuntimeError(f"node {node_id} is running: storage faults damage a stopped node")
        paths = self._log_dirs(node_id)
        done = damage_node(paths, kind, random.Random(seed), include=lambda topic: not topic.startswith("__"))
        _log.info("chaos_storage_damage", node_id=node_id, kind=kind, files=len(done))
        return [f"{d.file}: {d.what}" for d in done]

    def set_fsync_delay(self, node_id: int, delay_ms: int) -> None:
        self.cluster.set_fsync_delay(node_id, delay_ms)

    def set_no_space(self, node_id: int, full: bool) -> None:
        """The node's first log dir full (every write ENOSPC) or not (`set_no_space`)."""
        set_no_space(self.cluster.fault_dir(node_id), self._log_dirs(node_id)[:1] if full else [])

    def set_clock_offset(self, node_id: int, offset_ms: int) -> None:
        """Shift the node's wall clock (`deploy.chaos._clock_faults`); 0 sets it right."""
        set_clock_offset(self.cluster.fault_dir(node_id), offset_ms)

    def slow_link(self, first: int, second: int, delay_ms: int, rate_kbit: int) -> str:
        """Delay what the two nodes send each other, both ways (`NetnsNetwork.slow_link`);
        returns how (netem, or HTB without it)."""
        netns = self.cluster.netns
        if netns is None:
            raise RuntimeError("delay_link needs a cluster started with network='netns'")
        nodes = self.cluster.nodes
        netns.slow_link(second, nodes[first].host, delay_ms, rate_kbit)
        how = str(netns.slow_link(first, nodes[second].host, delay_ms, rate_kbit))
        return f"{first}<->{second}: {how}"

    def unslow_link(self, first: int, second: int) -> None:
        netns = self.cluster.netns
        if netns is not None:
            netns.unslow(first)
            netns.unslow(second)

    def _log_dirs(self, node_id: int) -> list[Path]:
        config = tomllib.loads(Path(self.cluster.nodes[node_id].config_path).read_text(encoding="utf-8"))
        dirs = config.get("log.dirs", [])
        return [Path(d) for d in (dirs.split(",") if isinstance(dirs, str) else dirs)]

    def kill(self, node_id: int) -> None:
        self.cluster.kill(node_id)

    def start(self, node_id: int) -> None:
        if not self.cluster.is_running(node_id):
            self.cluster.start_node(node_id)

    def pause(self, node_id: int) -> None:
        self.cluster.pause(node_id)

    def resume(self, node_id: int) -> None:
        self.cluster.resume(node_id)

    def restart(self, node_id: int) -> None:
        self.cluster.restart_node(node_id, clean=True)

    def cut(self, node_id: int) -> None:
        self.cluster.cut(node_id)

    def heal(self, node_id: int) -> None:
        self.cluster.heal(node_id)

    def is_running(self, node_id: int) -> bool:
        return bool(self.cluster.is_running(node_id))

    def health_addresses(self) -> dict[int, list[str]]:
        """Every gRPC listener of every node (a combined node has a controller and a broker one)."""
        return {
            n: [f"{s.host}:{port}" for port in (s.controller_port, s.broker_port) if port]
            for n, s in self.cluster.nodes.items()
        }


@dataclass(frozen=True)
class SystemdNode:
    node_id: int
    role: str  # "controller" or "broker" (the unit kraftlog-<role>@<id>.service)
    host: str  # address the other nodes and clients use
    port: int  # the node's gRPC listener
    ssh: str  # ssh destination, e.g. "admin@10.0.0.11"
    kafka_port: int | None = None  # a broker's Kafka-protocol listener, for --client kafka-python

    @property
    def unit(self) -> str:
        return f"kraftlog-{self.role}@{self.node_id}.service"


def load_inventory(path: str | Path) -> list[SystemdNode]:
    """Read an inventory TOML: ``[[node]]`` tables with ``id``, ``role``, ``host``, ``port``, ``ssh``
    and, for brokers, ``kafka_port`` (their Kafka-protocol listener); the ``[client]`` table is
    `load_inventory_security`'s. Any other top-level key is refused."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    stray = sorted(set(data) - {"node", "client"})
    if stray:
        raise ValueError(f"{path}: unknown top-level key(s) {stray} (an inventory has [[node]] and [client])")
    nodes = []
    for i, entry in enumerate(data.get("node", [])):
        unknown = set(entry) - {"id", "role", "host", "port", "ssh", "kafka_port"}
        if unknown:
            raise ValueError(f"{path}: node #{i + 1}: unknown key(s) {sorted(unknown)}")
        if entry.get("role") not in ("controller", "broker"):
            raise ValueError(f"{path}: node #{i + 1}: role must be 'controller' or 'broker'")
        nodes.append(
            SystemdNode(
                int(entry["id"]),
                entry["role"],
                str(entry["host"]),
                int(entry["port"]),
                str(entry.get("ssh", entry["host"])),
                int(entry["kafka_port"]) if "kafka_port" in entry else None,
            )
        )
    if not nodes:
        raise ValueError(f"{path}: no [[node]] entries")
    return nodes


def load_inventory_security(path: str | Path) -> ChaosSecurity:
    """How the run's clients reach an inventory's cluster: its ``[client]`` table, kafka-python's
    arguments (``security_protocol = "SSL"``, ``ssl_cafile``, ``ssl_certfile`` and
    ``ssl_keyfile`` for mTLS, ``ssl_password``, ``ssl_check_hostname``), paths on the machine
    that runs the chaos command; plaintext without one. Under mTLS the certificate's principal
    needs every permission the run uses: make it a super user. The files are read at the first
    connection, not here (a dry run needs none)."""
    table = tomllib.loads(Path(path).read_text(encoding="utf-8")).get("client", {})
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [client] must be a table of {', '.join(CLIENT_SECURITY_KEYS)}")
    return ChaosSecurity.of(table, what=f"{path}: [client]")


Runner = Callable[[list[str]], None]


def _ssh_runner(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: {proc.stderr.strip() or proc.returncode}")


class SystemdTarget:
    """Faults on systemd hosts: ``systemctl kill -s KILL|STOP|CONT``, ``systemctl restart``, and
    iptables DROP rules tagged ``kraftlog-chaos`` for partitions. ``runner`` executes one argv (ssh
    by default; a dry run prints instead)."""

    TAG = "kraftlog-chaos"

    def __init__(
        self, nodes: list[SystemdNode], runner: Runner = _ssh_runner, *, security: ChaosSecurity = PLAINTEXT
    ) -> None:
        self.nodes = {n.node_id: n for n in nodes}
        self._run = runner
        self._stopped: set[int] = set()
        self._security = security

    @property
    def security(self) -> ChaosSecurity:
        """From the inventory's ``[client]`` table (`load_inventory_security`)."""
        return self._security

    def _remote(self, node_id: int, *command: str) -> None:
        node = self.nodes[node_id]
        argv = ["ssh", "-o", "BatchMode=yes", node.ssh, "sudo", *command]
        _log.info("chaos_remote", node_id=node_id, command=shlex.join(command))
        self._run(argv)

    def controllers(self) -> list[int]:
        return sorted(n for n, s in self.nodes.items() if s.role == "controller")

    def brokers(self) -> list[int]:
        return sorted(n for n, s in self.nodes.items() if s.role == "broker")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.nodes[n].host}:{self.nodes[n].port}" for n in self.brokers())

    @property
    def kafka_bootstrap_servers(self) -> str:
        missing = [n for n in self.brokers() if self.nodes[n].kafka_port is None]
        if missing:
            raise ValueError(f"the inventory names no kafka_port for broker(s) {missing}")
        return ",".join(f"{self.nodes[n].host}:{self.nodes[n].kafka_port}" for n in self.brokers())

    @property
    def controller_addresses(self) -> str:
        return ",".join(f"{self.nodes[n].host}:{self.nodes[n].port}" for n in self.controllers())

    def partitions_unavailable(self) -> str | None:
        return None

    def storage_unavailable(self) -> str | None:
        return "storage faults damage a local cluster's files (--dir, or the run's own cluster)"

    def damage(self, node_id: int, kind: str, seed: int) -> list[str]:
        raise RuntimeError(self.storage_unavailable())

    def set_fsync_delay(self, node_id: int, delay_ms: int) -> None:
        raise RuntimeError(self.storage_unavailable())

    def set_no_space(self, node_id: int, full: bool) -> None:
        raise RuntimeError(self.storage_unavailable())

    def set_clock_offset(self, node_id: int, offset_ms: int) -> None:
        raise RuntimeError(self.storage_unavailable())

    def slow_link(self, first: int, second: int, delay_ms: int, rate_kbit: int) -> str:
        raise RuntimeError("delay_link needs a local netns cluster")

    def unslow_link(self, first: int, second: int) -> None:
        raise RuntimeError("delay_link needs a local netns cluster")

    def kill(self, node_id: int) -> None:
        self._remote(node_id, "systemctl", "kill", "--signal=SIGKILL", self.nodes[node_id].unit)
        self._stopped.add(node_id)

    def start(self, node_id: int) -> None:
        self._remote(node_id, "systemctl", "start", self.nodes[node_id].unit)
        self._stopped.discard(node_id)

    def pause(self, node_id: int) -> None:
        self._remote(node_id, "systemctl", "kill", "--signal=SIGSTOP", self.nodes[node_id].unit)

    def resume(self, node_id: int) -> None:
        self._remote(node_id, "systemctl", "kill", "--signal=SIGCONT", self.nodes[node_id].unit)

    def restart(self, node_id: int) -> None:
        self._remote(node_id, "systemctl", "restart", self.nodes[node_id].unit)

    def _peers(self, node_id: int) -> list[str]:
        me = self.nodes[node_id].host
        return sorted({n.host for n in self.nodes.values() if n.host != me})

    def cut(self, node_id: int) -> None:
        for peer in self._peers(node_id):
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                self._remote(
                    node_id, "iptables", "-I", chain, flag, peer, "-j", "DROP", "-m", "comment", "--comment", self.TAG
                )

    def heal(self, node_id: int) -> None:
        for peer in self._peers(node_id):
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                self._remote(
                    node_id, "iptables", "-D", chain, flag, peer, "-j", "DROP", "-m", "comment", "--comment", self.TAG
                )

    def is_running(self, node_id: int) -> bool:
        return node_id not in self._stopped

    def health_addresses(self) -> dict[int, list[str]]:
        return {n: [f"{s.host}:{s.port}"] for n, s in self.nodes.items()}
