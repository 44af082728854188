"""File and directory names on disk, spelled once (Kafka's names wherever Kafka has one).

Why here: the broker's log manager, the metadata log, the controller, the offline CLI tools and the
chaos checker all open the same files; a name defined in each of them can drift, and a tool that
looks for ``.checkpoint`` while the writer makes ``.snapshot`` finds nothing without an error.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "INDEX_SUFFIX",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "METADATA_PARTITION_DIR",
    "META_PROPERTIES_FILE",
    "PARTIAL_SUFFIX",
    "RAFT_DIR",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SNAPSHOT_SUFFIX",
    "TIME_INDEX_SUFFIX",
]

#: Every data directory (log.dirs and metadata.log.dir) carries one; written by `storage format`.
META_PROPERTIES_FILE: Final = "meta.properties"

# --- the metadata log, under metadata.log.dir
#: The metadata log's partition directory, as Kafka names it (topic __cluster_metadata, partition 0).
METADATA_PARTITION_DIR: Final = "__cluster_metadata-0"
#: The Raft journal and full dumps of the controller quorum (pysyncobj's state, ours alone).
RAFT_DIR: Final = "raft"
#: A metadata snapshot: ``<20-digit end offset>-<10-digit epoch>.checkpoint``.
SNAPSHOT_SUFFIX: Final = ".checkpoint"
#: A file being written; renamed to its final name once complete and fsynced.
PARTIAL_SUFFIX: Final = ".part"

# --- partition logs (both the metadata log's segments and the brokers')
LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"

# --- checkpoint files of a broker's log directory and of each partition
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
