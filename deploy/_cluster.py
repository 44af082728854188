"""A local multi-process kraftlog cluster: the one harness that integration tests, the chaos scripts
and ``kraftlog local`` all use.

Each node is a real ``kraftlog serve`` process with its own config file, data dirs and log file
under one base directory. The cluster's layout (ports, pids, cluster id) is kept in
``<base>/cluster.json`` so a later command can find and stop it. Every wait is a bounded poll.

Two networks: ``loopback`` (every node on 127.0.0.1, the default) and ``netns`` (root only: each node
in its own network namespace on a bridge, see `deploy._netns`, so the chaos runner can cut and heal
a node's links for real). A process that talks to a ``netns`` cluster calls `LocalCluster.enter_network`
first, from its main thread, before it opens any connection.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from kraftlog.common import private_directory, write_private_file
from kraftlog.common import wait_until as poll_until
from kraftlog.deploy._cluster_security import SECURITY_MODES, _ClusterSecurity
from kraftlog.deploy._node_spec import NodeSpec
from kraftlog.deploy._ports import free_port_pair
from kraftlog.storage import FAULTS_ENV, FSYNC_DELAY_FILE

__all__ = ["LocalCluster", "NodeSpec", "free_port_pair", "wait_until"]

NETWORKS = ("loopback", "netns")
_ALIVE = ("running", "paused")  # the node states of a live process (`LocalCluster.node_state`)

STATE_FILE = "cluster.json"
_RAFT_PORT_OFFSET = 1
_RAFT_KEY_FILE = "raft-identity.key"  # each controller's Raft identity (node-key mode), in its node dir


def wait_until(
    predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.05, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something truthy and return that; raise TimeoutError
    naming ``what`` (and the last error the predicate raised: the thing polled may not be up yet).
    The polling itself is common's one `wait_until`."""
    seen: dict[str, Any] = {}

    def attempt() -> bool:
        try:
            seen["value"] = predicate()
        except Exception as exc:  # the thing polled may not be up yet
            seen["error"] = exc
            return False
        return bool(seen["value"])

    if poll_until(attempt, timeout_s=timeout_s, interval_s=interval_s):
        return seen["value"]
    last_exc = seen.get("error")
    raise TimeoutError(
        f"timed out after {timeout_s:.1f}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


@dataclass
class LocalCluster(_ClusterSecurity):
    """``controllers`` controller nodes (ids 1..n) and ``brokers`` broker-only nodes (ids 101..),
    or, with ``combined``, ``controllers`` nodes that are both."""

    base_dir: Path
    controllers: int = 3
    brokers: int = 0
    combined: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)
    #: node id -> keys for that node only, over ``overrides`` (e.g. each broker's ``broker.rack``)
    node_overrides: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    cluster_id: str | None = None
    password: str | None = None
    nodes: dict[int, NodeSpec] = field(default_factory=dict)
    python: str = sys.executable
    network: str = "loopback"
    netns_prefix: str | None = None
    #: plaintext; tls (every listener TLS, no client certificates); mtls (client certificates
    #: required, Kafka's StandardAuthorizer on, the nodes and ``User:CN=admin`` super users); scram
    #: (as mtls, but the Kafka listener is SASL_SSL with SCRAM-SHA-256/512: ``User:admin``)
    security: str = "plaintext"
    #: more arguments of every node's ``kraftlog storage format`` (e.g. ``--add-scram ...``)
    format_args: tuple[str, ...] = ()
    #: ``static`` (``controller.quorum.voters``, kraft.version 0) or ``dynamic`` (KIP-853: the nodes
    #: know ``controller.quorum.bootstrap.servers``; the controllers are formatted with
    #: ``--standalone`` when there is one, else ``--initial-controllers``)
    quorum: str = "static"
    #: how many of the controllers (the lowest ids) are the initial voters (None: all of them); the
    #: others know ``controller.quorum.bootstrap.servers``, are formatted with
    #: ``--no-initial-controllers`` and start as observers (a static quorum's join it once upgraded
    #: to kraft.version 1)
    initial_controllers: int | None = None

    # ------------------------------------------------------------------ layout

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        if self.network not in NETWORKS:
            raise ValueError(f"network must be one of {NETWORKS}, not {self.network!r}")
        if self.network == "netns" and self.netns_prefix is None:
            self.netns_prefix = "kl" + secrets.token_hex(2)
        if self.quorum not in ("static", "dynamic"):
            raise ValueError(f"quorum must be static or dynamic, not {self.quorum!r}")
        self._directory_ids: dict[int, str] = {}
        if self.security not in SECURITY_MODES:
            raise ValueError(f"security must be one of {SECURITY_MODES}, not {self.security!r}")

    @property
    def netns(self) -> Any:
        """The `deploy._netns.NetnsNetwork` of a ``netns`` cluster, else None."""
        if self.network != "netns":
            return None
        from kraftlog.deploy._netns import NetnsNetwork

        return NetnsNetwork(str(self.netns_prefix))

    def _network_up(self) -> None:
        if self.netns is not None:
            self.netns.create({nid: i for i, nid in enumerate(sorted(self.nodes))})

    def enter_network(self) -> None:
        """Make this process able to reach the nodes (a ``netns`` cluster: move it into the hub).

        Call it from the main thread before opening any connection (see `deploy._netns`)."""
        if self.netns is not None:
            self._network_up()
            self.netns.enter_hub()

    def cut(self, node_id: int) -> None:
        """Drop every packet to and from the node (``netns`` clusters only)."""
        if self.netns is None:
            raise RuntimeError("network faults need a cluster started with network='netns'")
        self.netns.cut(node_id)

    def heal(self, node_id: int) -> None:
        if self.netns is None:
            raise RuntimeError("network faults need a cluster started with network='netns'")
        self.netns.heal(node_id)

    def plan(self) -> None:
        """Choose ports, write configs and format every node's dirs (``kraftlog storage format``)."""
        from kraftlog.node import new_cluster_id

        ids = {*range(1, self.controllers + 1), *range(101, 101 + self.brokers)}
        unknown = sorted(set(self.node_overrides) - ids)
        if unknown:
            raise ValueError(f"node_overrides name nodes {unknown} that this cluster does not have")
        private_directory(self.base_dir)  # it holds keys and passwords: only its owner enters it
        self.cluster_id = self.cluster_id or new_cluster_id()
        self.password = self.password or secrets.token_hex(16)
        taken: set[int] = set()
        for i in range(1, self.controllers + 1):
            roles = ["broker", "controller"] if self.combined else ["controller"]
            broker_port = free_port_pair(taken) if self.combined else None
            self.nodes[i] = NodeSpec(i, roles, free_port_pair(taken), broker_port, str(self.base_dir / f"node{i}"))
        for j in range(self.brokers):
            nid = 101 + j
            self.nodes[nid] = NodeSpec(nid, ["broker"], None, free_port_pair(taken), str(self.base_dir / f"node{nid}"))
        if self.netns is not None:
            for index, nid in enumerate(sorted(self.nodes)):
                self.nodes[nid].host = self.netns.address_of(index)
        if self.security != "plaintext":
            self._make_certificates()
        voter_keys = self._make_raft_identities()
        for spec in self.nodes.values():
            self._write_config(spec, voter_keys)
            self._format(spec)
        self.save()

    def _initial_voters(self) -> list[NodeSpec]:
        controllers = [n for n in sorted(self.nodes.values(), key=lambda n: n.node_id) if n.controller_port]
        return controllers if self.initial_controllers is None else controllers[: self.initial_controllers]

    @property
    def voters(self) -> str:
        """``controller.quorum.voters`` of a static quorum: its initial voters."""
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self._initial_voters())

    def _joins_later(self, spec: NodeSpec) -> bool:
        """A controller outside the initial voters (formatted ``--no-initial-controllers``)."""
        return bool(spec.controller_port) and spec not in self._initial_voters()

    def _make_raft_identities(self) -> list[str]:
        """Each controller's own Raft identity key (0600, in its node directory) unless the overrides
        ask for the shared password; returns the ``controller.quorum.raft.voter.keys`` entries."""
        from kraftlog.quorum.raft import generate_identity_key

        if self.overrides.get("controller.quorum.raft.authentication", "node-key") != "node-key":
            return []
        entries = []
        for spec in sorted(self.nodes.values(), key=lambda n: n.node_id):
            if spec.controller_port:
                key_file = private_directory(spec.dir) / _RAFT_KEY_FILE
                entries.append(f"{spec.node_id}@{generate_identity_key(key_file)}")
        return entries

    def raft_key_file(self, node_id: int) -> Path:
        """Controller ``node_id``'s Raft identity key (node-key mode)."""
        return Path(self.nodes[node_id].dir) / _RAFT_KEY_FILE

    def _write_config(self, spec: NodeSpec, voter_keys: list[str]) -> None:
        d = private_directory(spec.dir)
        if self.quorum == "static" and not self._joins_later(spec):  # a static voter knows only voters' keys
            initial = {f"{n.node_id}@" for n in self._initial_voters()}
            voter_keys = [k for k in voter_keys if k[: k.index("@") + 1] in initial]
        settings: dict[str, Any] = {
            "node.id": spec.node_id,
            "process.roles": spec.roles,
            **(
                {"controller.quorum.voters": self.voters}
                if self.quorum == "static" and not self._joins_later(spec)
                else {"controller.quorum.bootstrap.servers": ",".join(self.controller_addresses)}
            ),
            "controller.quorum.raft.port.offset": _RAFT_PORT_OFFSET,
            "controller.quorum.raft.password": self.password,
            **(
                {
                    "controller.quorum.raft.voter.keys": voter_keys,
                    "controller.quorum.raft.identity.key.file": str(d / _RAFT_KEY_FILE),
                }
                if voter_keys and spec.controller_port
                else {}
            ),
            "log.dirs": str(d / "data"),
            "metadata.log.dir": str(d / "metadata"),
        }
        listeners = []
        if spec.broker_port:
            listeners.append(f"BROKER://{spec.host}:{spec.broker_port}")
            listeners.append(f"{self.kafka_listener_name}://{spec.host}:{spec.kafka_port}")
        if spec.controller_port:
            listeners.append(f"CONTROLLER://{spec.host}:{spec.controller_port}")
        settings["listeners"] = ",".join(listeners)
        if self.security != "plaintext":
            settings.update(self._security_settings(spec))
        brokers = sum(1 for n in self.nodes.values() if n.broker_port)
        if 0 < brokers < 3:  # as Kafka's single-node configs: internal topics a small cluster can hold
            settings["offsets.topic.replication.factor"] = brokers
            settings["transaction.state.log.replication.factor"] = brokers
            settings["transaction.state.log.min.isr"] = min(2, brokers)
        settings.update(self.overrides)
        settings.update(self.node_overrides.get(spec.node_id, {}))
        # every node's config holds controller.quorum.raft.password (and under scram the SASL
        # passwords): 0600 from the first byte
        write_private_file(spec.config_path, tomli_w.dumps(settings), fsync=False)

    def _format(self, spec: NodeSpec) -> None:
        """``kraftlog storage format --ignore-formatted`` of the node. With this interpreter and no
        extra format arguments it runs here: a new interpreter per node cost about 1.3 s of CPU
        (imports) on a 2-core machine, paid by every cluster a test starts (issue 23's time budget).
        Another interpreter (``python``: another checkout), ``format_args`` or a dynamic quorum's
        arguments go through the command."""
        if self.python == sys.executable and not self.format_args and not self._quorum_format_args(spec):
            self._format_here(spec)
            return
        proc = subprocess.run(
            [
                self.python,
                "-m",
                "kraftlog.cli",
                "storage",
                "format",
                "-t",
                str(self.cluster_id),
                "-c",
                str(spec.config_path),
                "--ignore-formatted",
                *self._quorum_format_args(spec),
                *self.format_args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"storage format of node {spec.node_id} failed: {proc.stderr.strip()}")

    def _format_here(self, spec: NodeSpec) -> None:
        """The command's steps in this process: load and validate the node's config, then
        `format_node_dirs` with ``ignore_formatted``; a failure names the node as the command's does."""
        from kraftlog.common.config import ConfigError, load_node_config
        from kraftlog.node import NodeStartupError, format_node_dirs

        try:
            cfg = load_node_config(spec.config_path)
            format_node_dirs(cfg, str(self.cluster_id), ignore_formatted=True)
        except (ConfigError, NodeStartupError) as err:
            raise RuntimeError(f"storage format of node {spec.node_id} failed: {err}") from err

    def _quorum_format_args(self, spec: NodeSpec) -> list[str]:
        """``storage format``'s quorum arguments for ``spec`` (none for a static quorum)."""
        from kraftlog.node import new_cluster_id

        if self.quorum == "static":
            return ["--no-initial-controllers"] if self._joins_later(spec) else []
        if not spec.controller_port:
            return ["--no-initial-controllers"]
        controllers = self._initial_voters()
        if spec not in controllers:
            return ["--no-initial-controllers"]
        if len(controllers) == 1:
            return ["--standalone"]
        for n in controllers:
            self._directory_ids.setdefault(n.node_id, new_cluster_id())
        voters = ",".join(
            f"{n.node_id}@{n.host}:{n.controller_port}:{self._directory_ids[n.node_id]}" for n in controllers
        )
        return ["--initial-controllers", voters]

    def save(self) -> None:
        state = {
            "cluster_id": self.cluster_id,
            "password": self.password,
            "controllers": self.controllers,
            "brokers": self.brokers,
            "combined": self.combined,
            "network": self.network,
            "netns_prefix": self.netns_prefix,
            "security": self.security,
            "quorum": self.quorum,
            "initial_controllers": self.initial_controllers,
            "nodes": {str(k): asdict(v) for k, v in self.nodes.items()},
        }
        # it holds controller.quorum.raft.password: 0600 (issue 24)
        write_private_file(self.base_dir / STATE_FILE, json.dumps(state, indent=2), fsync=False)

    @classmethod
    def load(cls, base_dir: str | os.PathLike[str]) -> LocalCluster:
        base = Path(base_dir)
        state = json.loads((base / STATE_FILE).read_text(encoding="utf-8"))
        cluster = cls(
            base,
            controllers=state["controllers"],
            brokers=state["brokers"],
            combined=state["combined"],
            cluster_id=state["cluster_id"],
            password=state["password"],
            network=state.get("network", "loopback"),
            netns_prefix=state.get("netns_prefix"),
            security=state.get("security", "plaintext"),
            quorum=state.get("quorum", "static"),
            initial_controllers=state.get("initial_controllers"),
        )
        cluster.nodes = {int(k): NodeSpec(**v) for k, v in state["nodes"].items()}
        return cluster

    # ------------------------------------------------------------------ processes

    def start(self, *, wait: bool = True, timeout_s: float = 60.0) -> LocalCluster:
        if not self.nodes:
            self.plan()
        self._network_up()
        for nid in sorted(self.nodes):
            self.start_node(nid)
        if wait:
            self.wait_ready(timeout_s)
            self.ensure_scram_admin()
        return self

    def start_node(self, node_id: int) -> int:
        spec = self.nodes[node_id]
        # the node's log stays its owner's, like the rest of the cluster directory
        log = open(os.open(spec.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600), "ab")
        # test-only fault injection (storage.fault_dir): a local cluster is a test cluster
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{FAULTS_ENV: str(self.fault_dir(node_id))})
        prefix = self.netns.exec_prefix(node_id) if self.netns is not None else []
        proc = subprocess.Popen(
            [*prefix, self.python, "-m", "kraftlog.cli", "--log-level", "info", "serve", "-c", str(spec.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        log.close()
        self._procs[node_id] = proc
        spec.pid = proc.pid
        self.save()
        return proc.pid

    def fault_dir(self, node_id: int) -> Path:
        """The node's test-only fault control directory (``KRAFTLOG_TEST_FAULTS``, `storage.fault_dir`)."""
        return Path(self.nodes[node_id].dir) / "faults"

    def set_fsync_delay(self, node_id: int, delay_ms: int) -> None:
        """Make every segment and index fsync of the node wait ``delay_ms`` first (0: no delay),
        while it runs (it rereads the control file within 0.2 s)."""
        d = self.fault_dir(node_id)
        d.mkdir(parents=True, exist_ok=True)
        if delay_ms > 0:
            (d / FSYNC_DELAY_FILE).write_text(str(delay_ms), encoding="utf-8")
        else:
            (d / FSYNC_DELAY_FILE).unlink(missing_ok=True)

    def is_running(self, node_id: int) -> bool:
        """Whether the node's process is alive (running or paused); a zombie has exited."""
        return self.node_state(node_id) in _ALIVE

    def node_state(self, node_id: int) -> str:
        """``running``, ``paused`` (SIGSTOP), ``zombie`` (exited, not yet reaped by the process that
        started it), ``exited``, or ``not started``.

        ``os.kill(pid, 0)`` succeeds for a zombie, and for an unrelated process that reused the pid;
        /proc tells them apart: the state letter, and a command line naming this node's config.
        """
        spec = self.nodes[node_id]
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is not None:
            return "exited"  # our own child, now reaped
        pid = spec.pid
        if not pid:
            return "not started"
        state = _proc_state(pid)
        if state is None:
            return "exited"
        if state in "ZX":
            return "zombie"
        if proc is None and str(spec.config_path) not in _proc_cmdline(pid):
            return "exited"  # the pid now belongs to another process
        return "paused" if state in "Tt" else "running"

    def signal(self, node_id: int, sig: int) -> None:
        pid = self.nodes[node_id].pid
        if pid:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill(self, node_id: int) -> None:
        """kill -9, then reap."""
        self.signal(node_id, signal.SIGKILL)
        self._reap(node_id, 10)

    def pause(self, node_id: int) -> None:
        self.signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self.signal(node_id, signal.SIGCONT)

    def stop_node(self, node_id: int, timeout_s: float = 30.0) -> None:
        """SIGTERM (clean stop), escalating to SIGKILL after ``timeout_s``."""
        if not self.is_running(node_id):
            return
        self.signal(node_id, signal.SIGCONT)
        self.signal(node_id, signal.SIGTERM)
        if not self._reap(node_id, timeout_s):
            self.kill(node_id)

    def restart_node(self, node_id: int, *, clean: bool = True) -> int:
        if clean:
            self.stop_node(node_id)
        else:
            self.kill(node_id)
        return self.start_node(node_id)

    def _reap(self, node_id: int, timeout_s: float) -> bool:
        proc = self._procs.get(node_id)
        if proc is not None:
            try:
                proc.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        try:
            wait_until(lambda: not self.is_running(node_id), timeout_s, what=f"node {node_id} to exit")
            return True
        except TimeoutError:
            return False

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every node cleanly; a ``netns`` cluster also removes its namespaces."""
        if self.netns is not None:
            for nid in self.nodes:  # a cut node could not finish its controlled shutdown
                try:
                    self.netns.heal(nid)
                except Exception:
                    pass
        for nid in sorted(self.nodes, key=lambda n: (n < 100, n)):  # brokers first, then controllers
            self.stop_node(nid, timeout_s)
        if self.netns is not None:
            self.netns.destroy()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses and status

    @property
    def controller_addresses(self) -> list[str]:
        return [
            f"{n.host}:{n.controller_port}"
            for n in sorted(self.nodes.values(), key=lambda n: n.node_id)
            if n.controller_port
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(
            f"{n.host}:{n.broker_port}" for n in sorted(self.nodes.values(), key=lambda n: n.node_id) if n.broker_port
        )

    @property
    def kafka_bootstrap_servers(self) -> str:
        """The brokers' Kafka-protocol listeners, for Kafka clients (kcat -b, kafka-python, ...)."""
        return ",".join(
            f"{n.host}:{n.kafka_port}" for n in sorted(self.nodes.values(), key=lambda n: n.node_id) if n.kafka_port
        )

    def admin(self, **kwargs: Any) -> Any:
        from kraftlog.client import Admin

        return Admin(",".join(self.controller_addresses), **{**self.client_security(), **kwargs})

    def active_controller(self, timeout_s: float = 2.0) -> int | None:
        with self.admin(request_timeout_ms=int(timeout_s * 1000)) as admin:
            try:
                resp = admin.describe_quorum()
            except Exception:
                return None
            return resp.leader_id if resp.error.code == 0 and resp.leader_id >= 0 else None

    def wait_ready(self, timeout_s: float = 60.0) -> int:
        """Wait until a controller is active and answers; returns its id."""

        def ready() -> int | None:
            for nid in self.nodes:
                if not self.is_running(nid) and self.nodes[nid].pid:
                    raise RuntimeError(f"node {nid} exited: see {self.nodes[nid].log_path}")
            return self.active_controller()

        leader: int = wait_until(ready, timeout_s, interval_s=0.1, what="an active controller")
        return leader

    def wait_unfenced_brokers(self, count: int = 1, timeout_s: float = 60.0) -> None:
        """Wait until at least ``count`` brokers are registered and unfenced (ready to lead)."""
        with self.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: sum(not b.fenced for b in admin.describe_cluster().brokers) >= count,
                timeout_s,
                what=f"{count} unfenced broker(s)",
            )

    def status(self) -> dict[str, Any]:
        states = {str(k): self.node_state(k) for k in self.nodes}
        return {
            "base_dir": str(self.base_dir),
            "cluster_id": self.cluster_id,
            "network": self.network,
            "netns_hub": self.netns.hub if self.netns is not None else None,
            "bootstrap_servers": self.bootstrap_servers,
            "kafka": self.kafka_bootstrap_servers,
            "kafka_listeners": {str(k): f"{v.host}:{v.kafka_port}" for k, v in self.nodes.items() if v.kafka_port},
            "controllers": ",".join(self.controller_addresses),
            "security": self.security,
            "command_config": str(self.command_config) if self.security != "plaintext" else None,
            # what a client needs, with a password's file named instead of the password (issue 24)
            "client_security": self.client_security_shown(),
            "scram_password_file": str(self.scram_password_file) if self.security == "scram" else None,
            "pids": {str(k): v.pid for k, v in self.nodes.items()},
            "running": {k: state in _ALIVE for k, state in states.items()},
            "state": states,
        }


def _proc_state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (R, S, D, T, Z, ...), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) S ...": comm may hold spaces and parentheses, so split after the last ')'
    fields = stat[stat.rfind(")") + 1 :].split()
    return fields[0] if fields else None


def _proc_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
