"""quorum: the controller (docs/architecture.md §1).

`MetadataQuorum` is the narrow seam over pysyncobj (propose records -> committed offset; committed
entries in order; leader id and epoch; leader-change callbacks); `ControllerServer` runs the
controller role of a node on it; `quorum._controller` holds the active controller's decisions as pure
``(image, request) -> (records, response)`` handlers. Imports `metadata_log` and `proto` only.
"""

from kraftlog.quorum._controller import BrokerHeartbeats, ControllerContext
from kraftlog.quorum._raft import MetadataQuorum, QuorumStatus, VoterStatus
from kraftlog.quorum._server import METADATA_PARTITION_DIR, ControllerServer

__all__ = [
    "BrokerHeartbeats",
    "ControllerContext",
    "ControllerServer",
    "METADATA_PARTITION_DIR",
    "MetadataQuorum",
    "QuorumStatus",
    "VoterStatus",
]
