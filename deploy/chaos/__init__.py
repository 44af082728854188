"""Chaos scripts: seeded faults (kill -9, SIGSTOP/SIGCONT, clean restarts, minority kills, network
partitions) against a local or systemd cluster under an acks=all workload, then a checker.

Run them with ``kraftlog chaos run`` (see ``kraftlog chaos run --help``).
"""

from deploy.chaos._checker import Ack, CheckReport, ReadRecord, check, decode_value, encode_value, longest_gaps
from deploy.chaos._faults import FAULT_KINDS, ClusterView, Fault, choose_fault, heal, inject
from deploy.chaos._health import QUORUM_STALE_MS, HealthProbe, quorum_pending
from deploy.chaos._runner import ChaosSettings, FaultRecord, converged, run_chaos
from deploy.chaos._targets import ChaosTarget, LocalTarget, SystemdNode, SystemdTarget, load_inventory
from deploy.chaos._workload import Workload, read_back

__all__ = [
    "Ack", "CheckReport", "ReadRecord", "check", "decode_value", "encode_value", "longest_gaps",
    "FAULT_KINDS", "ClusterView", "Fault", "choose_fault", "heal", "inject",
    "QUORUM_STALE_MS", "HealthProbe", "quorum_pending",
    "ChaosSettings", "FaultRecord", "converged", "run_chaos",
    "ChaosTarget", "LocalTarget", "SystemdNode", "SystemdTarget", "load_inventory",
    "Workload", "read_back",
]
