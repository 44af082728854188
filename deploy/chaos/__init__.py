"""Chaos scripts: seeded faults (kill -9, SIGSTOP/SIGCONT, clean restarts, minority kills, network
partitions) against a local or systemd cluster under an acks=all workload (with ``--workload group``
also consumer members of one group, checked by `deploy.chaos._group_check`; with ``--workload eos``
transactional read-process-write processors, checked by `deploy.chaos._eos_check`; both end by one
drain, `deploy.chaos._drain`; with ``--workload queue`` Jepsen's queue workload, `deploy.chaos._queue_workload`,
whose history, `deploy.chaos._queue_history`, is checked alone by `deploy.chaos._queue_check`; with ``--workload
share`` share consumers of both clients, `deploy.chaos._share_workload`, checked by `deploy.chaos._share_check`),
then a checker; and the
quorum profile (`deploy.chaos._quorum_runner`): controller-quorum faults under an admin workload whose
calls time out and are retried, then checks of the metadata log itself. Storage faults damage a stopped
broker's files (`deploy.chaos._storage_faults`) when ``--faults`` names them.

Every connection a run opens goes through the target's `ChaosSecurity` (`deploy.chaos._security`),
so a ``--security tls|mtls`` cluster is attacked the same way as a plaintext one.

Run them with ``kraftlog chaos run`` (see ``kraftlog chaos run --help``).
"""

from kraftlog.deploy.chaos._checker import Ack, CheckReport, ReadRecord, check, decode_value, encode_value, longest_gaps
from kraftlog.deploy.chaos._drain import (
    ConsumingWorkload,
    DrainOutcome,
    drain_fields,
    drain_group,
    drain_row,
    drain_workload,
    log_end_offsets,
)
from kraftlog.deploy.chaos._eos_check import EosReport, TxnAttempt, check_eos, decode_output, encode_output
from kraftlog.deploy.chaos._eos_workload import EosOutcome, EosWorkload
from kraftlog.deploy.chaos._faults import (
    ALL_FAULT_KINDS,
    DISK_KINDS,
    FAULT_KINDS,
    SLOW_FSYNC,
    STORAGE_KINDS,
    ClusterView,
    Fault,
    choose_fault,
    heal,
    inject,
    own_cluster_node_overrides,
)
from kraftlog.deploy.chaos._group_check import (
    AssignmentEvent,
    CommitRecord,
    ConsumedRecord,
    GroupReport,
    Holding,
    check_group,
    commit_regressions,
    consumed_missing,
    double_owners,
    final_commit_regressions,
    overlapping_owners,
    ownership_intervals,
)
from kraftlog.deploy.chaos._group_workload import CONSUMER_PROTOCOL_BROKER_KEYS, GroupOutcome, GroupWorkload
from kraftlog.deploy.chaos._health import QUORUM_STALE_MS, HealthProbe, quorum_pending
from kraftlog.deploy.chaos._queue_check import QUEUE_ALLOWED, QUEUE_ANOMALIES, QueueReport, check_queue, queue_rows
from kraftlog.deploy.chaos._queue_history import History, HistoryOp, HistoryWriter, Poll, Send, read_history
from kraftlog.deploy.chaos._quorum_check import (
    AdminOp,
    FinalTopic,
    check_admin,
    diverged_controllers,
    find_duplicate_records,
    has_active_controller,
    no_active_stretches,
    replay_error_lines,
)
from kraftlog.deploy.chaos._quorum_faults import (
    QUORUM_FAULT_KINDS,
    REPLACE_VOTER,
    QuorumTimeouts,
    choose_quorum_fault,
    read_config_values,
    write_config_values,
)
from kraftlog.deploy.chaos._quorum_runner import LONG_ELECTION, QuorumSettings, run_quorum_chaos
from kraftlog.deploy.chaos._report import FaultRecord
from kraftlog.deploy.chaos._runner import WORKLOADS, ChaosSettings, converged, run_chaos
from kraftlog.deploy.chaos._security import PLAINTEXT, SECURITY_MODES, ChaosSecurity
from kraftlog.deploy.chaos._share_check import Delivery, ShareReport, check_share
from kraftlog.deploy.chaos._share_workload import SHARE_BROKER_KEYS, ShareWorkload
from kraftlog.deploy.chaos._targets import (
    ChaosTarget,
    LocalTarget,
    SystemdNode,
    SystemdTarget,
    load_inventory,
    load_inventory_security,
)
from kraftlog.deploy.chaos._voter_faults import VoterChanges
from kraftlog.deploy.chaos._workload import Workload, read_back

__all__ = [
    "ALL_FAULT_KINDS",
    "own_cluster_node_overrides",
    "QUEUE_ALLOWED",
    "SHARE_BROKER_KEYS",
    "Delivery",
    "ShareReport",
    "ShareWorkload",
    "check_share",
    "QUEUE_ANOMALIES",
    "Ack",
    "AdminOp",
    "AssignmentEvent",
    "CONSUMER_PROTOCOL_BROKER_KEYS",
    "ChaosSecurity",
    "ChaosSettings",
    "ChaosTarget",
    "CheckReport",
    "ClusterView",
    "DISK_KINDS",
    "CommitRecord",
    "ConsumedRecord",
    "ConsumingWorkload",
    "DrainOutcome",
    "EosOutcome",
    "EosReport",
    "EosWorkload",
    "FAULT_KINDS",
    "Fault",
    "FaultRecord",
    "FinalTopic",
    "GroupOutcome",
    "GroupReport",
    "GroupWorkload",
    "HealthProbe",
    "History",
    "HistoryOp",
    "HistoryWriter",
    "Holding",
    "LONG_ELECTION",
    "LocalTarget",
    "PLAINTEXT",
    "Poll",
    "QUORUM_FAULT_KINDS",
    "REPLACE_VOTER",
    "VoterChanges",
    "QUORUM_STALE_MS",
    "QueueReport",
    "QuorumSettings",
    "QuorumTimeouts",
    "ReadRecord",
    "SECURITY_MODES",
    "SLOW_FSYNC",
    "STORAGE_KINDS",
    "Send",
    "SystemdNode",
    "SystemdTarget",
    "TxnAttempt",
    "WORKLOADS",
    "Workload",
    "check",
    "check_admin",
    "check_eos",
    "check_group",
    "check_queue",
    "choose_fault",
    "choose_quorum_fault",
    "commit_regressions",
    "consumed_missing",
    "converged",
    "decode_output",
    "decode_value",
    "diverged_controllers",
    "double_owners",
    "drain_fields",
    "drain_group",
    "drain_row",
    "drain_workload",
    "encode_output",
    "encode_value",
    "final_commit_regressions",
    "find_duplicate_records",
    "has_active_controller",
    "heal",
    "inject",
    "load_inventory",
    "load_inventory_security",
    "log_end_offsets",
    "longest_gaps",
    "no_active_stretches",
    "overlapping_owners",
    "ownership_intervals",
    "queue_rows",
    "quorum_pending",
    "read_back",
    "read_config_values",
    "read_history",
    "replay_error_lines",
    "run_chaos",
    "run_quorum_chaos",
    "write_config_values",
]
