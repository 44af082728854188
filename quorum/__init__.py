"""quorum: the controller (docs/architecture.md §1).

`MetadataQuorum` is the narrow seam over pysyncobj (propose records -> committed offset; committed
entries in order; leader id and epoch; leader-change callbacks); `ControllerServer` runs the
controller role of a node on it (its gRPC services see it as a `ControllerCore`); `quorum.raft`
holds the seam's machinery and `quorum.controller` the active controller's decisions as pure
``(image, request) -> (records, response)`` handlers. Imports `metadata_log` and `proto` only.
"""

from kraftlog.quorum._bootstrap import BOOTSTRAP_FILE, read_bootstrap_records, write_bootstrap_records
from kraftlog.quorum._controller_services import ControllerCore
from kraftlog.quorum._dynamic_voters import (
    BOOTSTRAP_VOTERS_FILE,
    BootstrapVoters,
    DynamicVoter,
    DynamicVoterError,
    check_voter_directory,
    parse_dynamic_voters,
    read_bootstrap_voters,
    write_bootstrap_voters,
)
from kraftlog.quorum._server import METADATA_PARTITION_DIR, ControllerServer, MetadataReplayFailure
from kraftlog.quorum._voter_changes import LeaderView, check_add_voter, check_remove_voter, check_update_voter
from kraftlog.quorum.controller import BrokerHeartbeats, ControllerContext
from kraftlog.quorum.raft import MetadataQuorum, QuorumStatus, VoterStatus

__all__ = [
    "BOOTSTRAP_FILE",
    "BOOTSTRAP_VOTERS_FILE",
    "BootstrapVoters",
    "DynamicVoter",
    "DynamicVoterError",
    "LeaderView",
    "check_add_voter",
    "check_remove_voter",
    "check_update_voter",
    "check_voter_directory",
    "parse_dynamic_voters",
    "read_bootstrap_voters",
    "write_bootstrap_voters",
    "BrokerHeartbeats",
    "ControllerContext",
    "ControllerCore",
    "ControllerServer",
    "METADATA_PARTITION_DIR",
    "MetadataQuorum",
    "MetadataReplayFailure",
    "QuorumStatus",
    "VoterStatus",
    "read_bootstrap_records",
    "write_bootstrap_records",
]
