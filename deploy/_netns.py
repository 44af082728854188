"""Network namespaces for a local cluster whose links can really be cut and healed.

Each node runs in its own namespace with one veth whose other end sits on a bridge inside a *hub*
namespace; the processes that talk to the cluster (the chaos runner, ``kraftlog local --network
netns``) move themselves into the hub. Every namespace, link and address is created by this module
inside namespaces it created itself -- the machine's own namespace is never touched -- and
`NetnsNetwork.destroy` removes them all.

Cutting node N sets its veth on the hub side down: every packet to and from N is dropped (other
nodes, clients), exactly like a pulled cable; healing sets it up again. Needs root and iproute2;
`unavailable_reason` says why not when either is missing, so callers skip only the faults that need it.

Slowing the link between two nodes (`slow_link`, the chaos fault ``delay_link``) shapes what each
sends to the other on its own ``eth0``: with ``tc netem`` a fixed delay; on a kernel without netem
(``CONFIG_NET_SCH_NETEM`` unset, as on the machines this project's CI runs on, which cannot load
modules) a narrow HTB class instead, so the messages queue behind each other and arrive late when
the link is busy (replication between them), not by a fixed delay. `slow_link` says which it used.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import structlog

__all__ = ["NetnsError", "NetnsNetwork", "enter_namespace", "unavailable_reason"]

_log = structlog.get_logger("deploy.netns")

_CLONE_NEWNET = 0x40000000
_NETNS_DIR = Path("/run/netns")


class NetnsError(RuntimeError):
    """An ``ip`` command failed, or namespaces cannot be used on this machine."""


def _ip(*args: str) -> None:
    try:
        proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NetnsError(f"ip {' '.join(args)}: {err}") from err
    if proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {proc.stderr.strip() or f'exit code {proc.returncode}'}")


def _tc(namespace: str, *args: str) -> None:
    try:
        proc = subprocess.run(["tc", "-n", namespace, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NetnsError(f"tc {' '.join(args)}: {err}") from err
    if proc.returncode != 0:
        raise NetnsError(f"tc {' '.join(args)}: {proc.stderr.strip() or f'exit code {proc.returncode}'}")


def unavailable_reason() -> str | None:
    """None when this process can create network namespaces, else why not (for the run's report)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (the ip command) is not installed"
    probe = f"klprobe{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
    except NetnsError as err:
        return f"cannot create a network namespace: {err}"
    try:
        _ip("netns", "del", probe)
    except NetnsError:
        pass
    return None


def enter_namespace(name: str) -> None:
    """Move the calling thread into the named network namespace (``ip netns`` naming).

    Call it from the main thread before any other thread exists (before the first gRPC channel):
    threads inherit the namespace of the thread that creates them, so everything the process does
    afterwards happens inside ``name``.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(_NETNS_DIR / name, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


def current_namespace_is(name: str) -> bool:
    try:
        return os.stat(_NETNS_DIR / name).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


@dataclass
class NetnsNetwork:
    """A hub namespace with a bridge, and one namespace per node on it.

    ``prefix`` keeps names unique per run and short enough for Linux's 15-character link names.
    """

    prefix: str
    subnet: str = "10.213.0"

    @property
    def hub(self) -> str:
        return f"{self.prefix}-hub"

    def namespace_of(self, node_id: int) -> str:
        return f"{self.prefix}-n{node_id}"

    def address_of(self, index: int) -> str:
        """The node's address: ``subnet.(10 + index)``; the hub's bridge is ``subnet.1``."""
        if not 0 <= index < 240:
            raise ValueError(f"node index {index} out of range")
        return f"{self.subnet}.{10 + index}"

    def _veth(self, node_id: int) -> str:
        return f"{self.prefix}v{node_id}"

    def exists(self) -> bool:
        return (_NETNS_DIR / self.hub).exists()

    def create(self, nodes: dict[int, int]) -> None:
        """Create the hub and one namespace per node (``node_id -> index``); idempotent per node."""
        if not self.exists():
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "set", "lo", "up")
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "addr", "add", f"{self.subnet}.1/24", "dev", "br0")
            _ip("-n", self.hub, "link", "set", "br0", "up")
        for node_id, index in sorted(nodes.items()):
            ns = self.namespace_of(node_id)
            if (_NETNS_DIR / ns).exists():
                continue
            veth = self._veth(node_id)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.hub, "link", "set", veth, "master", "br0")
            _ip("-n", self.hub, "link", "set", veth, "up")
            _ip("-n", ns, "addr", "add", f"{self.address_of(index)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        _log.info("netns_created", hub=self.hub, nodes=sorted(nodes))

    def destroy(self) -> None:
        """Delete every namespace of this network (their links and addresses go with them)."""
        for entry in sorted(_NETNS_DIR.glob(f"{self.prefix}-*")) if _NETNS_DIR.exists() else []:
            try:
                _ip("netns", "del", entry.name)
            except NetnsError as err:
                _log.warning("netns_delete_failed", namespace=entry.name, error=str(err))
        _log.info("netns_destroyed", prefix=self.prefix)

    def exec_prefix(self, node_id: int) -> list[str]:
        """Command prefix that runs a program inside the node's namespace (same pid: ip execs it)."""
        return ["ip", "netns", "exec", self.namespace_of(node_id)]

    def cut(self, node_id: int) -> None:
        """Drop every packet to and from the node (its cable pulled)."""
        _ip("-n", self.hub, "link", "set", self._veth(node_id), "down")

    def heal(self, node_id: int) -> None:
        _ip("-n", self.hub, "link", "set", self._veth(node_id), "up")

    def slow_link(self, node_id: int, peer_address: str, delay_ms: int, rate_kbit: int) -> str:
        """Delay what ``node_id`` sends to ``peer_address`` (call it for both ends): netem's
        ``delay_ms`` when the kernel has netem, else an HTB class of ``rate_kbit``; returns which."""
        ns = self.namespace_of(node_id)
        self.unslow(node_id)
        try:
            _tc(ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio", "bands", "4")
            _tc(ns, "qdisc", "add", "dev", "eth0", "parent", "1:4", "handle", "40:", "netem", "delay", f"{delay_ms}ms")
            how = f"netem delay {delay_ms}ms"
            flow = "1:4"
        except NetnsError as err:
            if "unknown" not in str(err).lower():
                raise
            self.unslow(node_id)
            # unclassified traffic (default 0) leaves unshaped; only the peer's goes through 1:10
            _tc(ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb")
            rate = f"{rate_kbit}kbit"
            _tc(ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate)
            how = f"htb {rate} (no netem in this kernel)"
            flow = "1:10"
        _tc(
            ns,
            "filter",
            "add",
            "dev",
            "eth0",
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "u32",
            "match",
            "ip",
            "dst",
            f"{peer_address}/32",
            "flowid",
            flow,
        )
        _log.info("netns_link_slowed", node_id=node_id, peer=peer_address, how=how)
        return how

    def unslow(self, node_id: int) -> None:
        """Remove what `slow_link` added to the node's ``eth0`` (nothing there: a no-op)."""
        try:
            _tc(self.namespace_of(node_id), "qdisc", "del", "dev", "eth0", "root")
        except NetnsError as err:
            _log.debug("netns_unslow_nothing", node_id=node_id, error=str(err))

    def enter_hub(self) -> None:
        """Move this process into the hub, from where every node is reachable (see `enter_namespace`)."""
        if not current_namespace_is(self.hub):
            enter_namespace(self.hub)
