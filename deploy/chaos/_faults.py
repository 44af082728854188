"""The fault catalogue and the seeded choice of the next fault.

`choose_fault` is pure (an ``rng: random.Random`` and a view of the cluster in, a `Fault` out), so a
seed replays the same schedule against the same cluster states. `inject` and `heal` are the only
places that touch the target. Every fault hits at most a minority: one controller of three, one
broker of three (two nodes at once only as one controller plus one broker).

The storage kinds (`STORAGE_KINDS`, issue 28; chosen with ``--faults``, not part of the default
schedule) kill one broker with SIGKILL, damage its partition files while it is down
(`deploy.chaos._storage_faults`, seeded by the fault's ``seed``) and start it again at the heal.
``slow_fsync`` delays every segment and index fsync of a partition leader's broker by the fault's
``seed`` milliseconds (the test-only hook `storage.fault_dir`) until the heal. ``disk_full``
makes every write into a broker's first log dir fail with ENOSPC (the same hook: no tmpfs or loop
mount is needed): the dir goes offline and its partitions move (a broker with one dir halts, as
Kafka's does); the heal gives the space back and restarts the broker (or starts the halted one),
since a failed dir returns only with a restart, in Kafka too. The clock kinds (`CLOCK_KINDS`:
``clock_skew``, ``clock_jump``) shift any node's wall clock by the fault's ``seed`` milliseconds
(`deploy.chaos._clock_faults`) until the heal sets it right. ``delay_link`` (netns clusters)
delays what two brokers send each other, a partition leader and another broker (the coordinator of
a transaction may be either: its markers and EndTxn then arrive late), by the fault's ``seed``
milliseconds with ``tc netem``, or through a narrow HTB class where the kernel has no netem
(`deploy._netns.NetnsNetwork.slow_link`), until the heal.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kraftlog.deploy.chaos._clock_faults import CLOCK_KINDS, choose_offset_ms
from kraftlog.deploy.chaos._storage_faults import STORAGE_KINDS
from kraftlog.deploy.chaos._targets import ChaosTarget

__all__ = [
    "ALL_FAULT_KINDS",
    "CLOCK_KINDS",
    "DELAY_LINK",
    "DISK_FULL",
    "DISK_KINDS",
    "own_cluster_node_overrides",
    "FAULT_KINDS",
    "SLOW_FSYNC",
    "STORAGE_KINDS",
    "ClusterView",
    "Fault",
    "choose_fault",
    "heal",
    "inject",
]

FAULT_KINDS: tuple[str, ...] = (
    "kill_broker",  # kill -9 of a broker, restarted after the hold
    "kill_active_controller",  # kill -9 of the active controller
    "pause",  # SIGSTOP longer than the broker session timeout, then SIGCONT
    "restart",  # clean restart (SIGTERM, controlled shutdown, start)
    "kill_minority",  # kill -9 of a controller and a broker at once
    "partition_active_controller",  # the active controller's links cut, then healed
    "partition_leader",  # the links of a partition leader's broker cut, then healed
)
#: a slow_fsync fault's delay per fsync (its ``seed`` holds the one chosen)
SLOW_FSYNC_DELAYS_MS = (200, 500, 1000)
#: what two brokers send each other delayed (netem) or squeezed (HTB), then not
DELAY_LINK = "delay_link"
#: a delay_link fault's netem delay (its ``seed``) and, without netem, the HTB rate it stands for
DELAY_LINK_MS_KBIT = {100: 1024, 300: 256, 1000: 64}
#: the kinds that need a netns cluster
NETWORK_KINDS = frozenset({"partition_active_controller", "partition_leader", DELAY_LINK})
#: every segment and index fsync of a partition leader's broker delayed, then not (test-only hook)
SLOW_FSYNC = "slow_fsync"
#: a broker's first log dir full (ENOSPC, test-only hook) until the heal, which restarts it
DISK_FULL = "disk_full"
#: the kinds that touch a node's disk or its storage hooks: local clusters only
DISK_KINDS = frozenset({*STORAGE_KINDS, SLOW_FSYNC, DISK_FULL, *CLOCK_KINDS})
#: what ``--faults`` may name in the data profile: the default schedule plus the disk and clock faults
ALL_FAULT_KINDS: tuple[str, ...] = FAULT_KINDS + STORAGE_KINDS + (SLOW_FSYNC, DISK_FULL, DELAY_LINK) + CLOCK_KINDS


@dataclass(frozen=True)
class ClusterView:
    controllers: Sequence[int]
    brokers: Sequence[int]
    active_controller: int | None
    partition_leaders: Sequence[int]  # leaders of the workload's partitions (-1: none)
    session_timeout_ms: int
    pending: str | None = None  # what the cluster had not recovered yet (None: converged)


@dataclass(frozen=True)
class Fault:
    kind: str
    nodes: tuple[int, ...]
    hold_s: float
    seed: int = 0  # a storage fault's damage (which byte, which bit, where to cut)

    def describe(self) -> str:
        return f"{self.kind}({','.join(map(str, self.nodes))}) for {self.hold_s:.1f}s"


def own_cluster_node_overrides(kinds: Sequence[str], cluster_dir: str) -> dict[int, dict[str, str]]:
    """The run's own cluster's per-node settings for ``kinds``: with ``disk_full``, each broker
    (101-103) gets a second log dir, so a full first one leaves it up serving the other, as a
    Kafka JBOD broker stays up (with one dir it halts)."""
    if DISK_FULL not in kinds:
        return {}
    return {n: {"log.dirs": f"{cluster_dir}/node{n}/data,{cluster_dir}/node{n}/data2"} for n in (101, 102, 103)}


def choose_fault(rng: random.Random, view: ClusterView, kinds: Sequence[str]) -> Fault:
    """Pick the next fault among ``kinds`` (those the target supports), seeded by ``rng``."""
    kind = rng.choice(list(kinds))
    session_s = view.session_timeout_ms / 1000.0
    hold = round(rng.uniform(1.0, 4.0), 2)
    broker = rng.choice(list(view.brokers))
    controller = rng.choice(list(view.controllers))
    active = view.active_controller if view.active_controller is not None else controller
    if kind == "kill_broker":
        return Fault(kind, (broker,), hold)
    if kind == "kill_active_controller":
        return Fault(kind, (active,), hold)
    if kind == "pause":
        node = rng.choice(list(view.brokers) + list(view.controllers))
        return Fault(kind, (node,), round(session_s + rng.uniform(0.5, 2.0), 2))
    if kind == "restart":
        return Fault(kind, (rng.choice(list(view.brokers) + list(view.controllers)),), 0.0)
    if kind == "kill_minority":
        # a controller and a broker-only node: one of each quorum. On combined nodes that would be
        # two of three (a majority), so there it stays one node.
        broker_only = [b for b in view.brokers if b not in view.controllers]
        nodes = (controller, rng.choice(broker_only)) if broker_only else (controller,)
        return Fault(kind, nodes, hold)
    if kind == "partition_active_controller":
        return Fault(kind, (active,), round(rng.uniform(2.0, 5.0), 2))
    if kind in STORAGE_KINDS:
        return Fault(kind, (broker,), hold, seed=rng.randrange(2**31))
    if kind == SLOW_FSYNC:
        leaders = [n for n in view.partition_leaders if n in view.brokers]
        node = rng.choice(leaders) if leaders else broker
        return Fault(kind, (node,), round(rng.uniform(3.0, 6.0), 2), seed=rng.choice(SLOW_FSYNC_DELAYS_MS))
    if kind == DELAY_LINK:
        leaders = [n for n in view.partition_leaders if n in view.brokers]
        first = rng.choice(leaders) if leaders else broker
        second = rng.choice([b for b in view.brokers if b != first] or [first])
        return Fault(kind, (first, second), round(rng.uniform(3.0, 8.0), 2), seed=rng.choice(list(DELAY_LINK_MS_KBIT)))
    if kind in CLOCK_KINDS:
        node = rng.choice(list(view.brokers) + list(view.controllers))
        return Fault(kind, (node,), round(rng.uniform(3.0, 8.0), 2), seed=choose_offset_ms(kind, rng))
    if kind == DISK_FULL:
        leaders = [n for n in view.partition_leaders if n in view.brokers]
        return Fault(kind, (rng.choice(leaders) if leaders else broker,), round(rng.uniform(3.0, 6.0), 2))
    if kind == "partition_leader":
        leaders = [n for n in view.partition_leaders if n in view.brokers]
        return Fault(kind, (rng.choice(leaders) if leaders else broker,), round(rng.uniform(2.0, 5.0), 2))
    raise ValueError(f"unknown fault kind {kind!r}")


def inject(target: ChaosTarget, fault: Fault) -> list[str]:
    """Inject ``fault``; returns what a storage fault damaged (one line per file), else nothing."""
    damage: list[str] = []
    if fault.kind == DELAY_LINK:
        first, second = fault.nodes
        return [target.slow_link(first, second, fault.seed, DELAY_LINK_MS_KBIT.get(fault.seed, 256))]
    for node in fault.nodes:
        if fault.kind in ("kill_broker", "kill_active_controller", "kill_minority"):
            target.kill(node)
        elif fault.kind == "pause":
            target.pause(node)
        elif fault.kind == "restart":
            target.restart(node)
        elif fault.kind in NETWORK_KINDS:
            target.cut(node)
        elif fault.kind in STORAGE_KINDS:
            target.kill(node)
            damage += target.damage(node, fault.kind, fault.seed)
        elif fault.kind == SLOW_FSYNC:
            target.set_fsync_delay(node, fault.seed)
        elif fault.kind == DISK_FULL:
            target.set_no_space(node, True)
        elif fault.kind in CLOCK_KINDS:
            target.set_clock_offset(node, fault.seed)
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}")
    return damage


def heal(target: ChaosTarget, fault: Fault) -> None:
    if fault.kind == DELAY_LINK:
        first, second = fault.nodes
        target.unslow_link(first, second)
        return
    for node in fault.nodes:
        if fault.kind in ("kill_broker", "kill_active_controller", "kill_minority") or fault.kind in STORAGE_KINDS:
            target.start(node)
        elif fault.kind == "pause":
            target.resume(node)
        elif fault.kind in NETWORK_KINDS:
            target.heal(node)
        elif fault.kind == "restart":
            target.start(node)  # a no-op unless the restart left it down
        elif fault.kind == SLOW_FSYNC:
            target.set_fsync_delay(node, 0)
        elif fault.kind in CLOCK_KINDS:
            target.set_clock_offset(node, 0)
        elif fault.kind == DISK_FULL:
            target.set_no_space(node, False)
            if target.is_running(node):
                target.restart(node)  # a failed log dir comes back only with a restart (Kafka's)
            else:
                target.start(node)  # it halted: its only log dir had failed
