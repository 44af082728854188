"""The ground floor of kraftlog: what every layer may use, importing no other package of ours.

Layering (docs/architecture.md): `cli, deploy -> client, node -> broker, quorum -> storage,
metadata_log -> common`. Importing this package needs the standard library only (the progress
display loads rich, the CRC frame crc32c, when first used), so `deploy/install.sh` can validate a
config with kraftlog's own loader before any venv exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kraftlog.common._backoff import backoff_ms
from kraftlog.common._bootstrap import parse_bootstrap_servers
from kraftlog.common._clock import CLOCK_OFFSET_FILE, FAULTS_ENV, SYSTEM_CLOCK, Clock, ManualClock, SystemClock
from kraftlog.common._config_def import ConfigType
from kraftlog.common._fs import atomic_write, fsync_directory, fsync_file, private_directory, write_private_file
from kraftlog.common._java import (
    JavaHashTable,
    coordinator_partition,
    java_abs,
    java_hashmap_order,
    java_int32,
    java_string_hash,
    java_string_key,
)
from kraftlog.common._names import (
    CLEANER_OFFSET_CHECKPOINT,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    META_PROPERTIES_FILE,
    METADATA_PARTITION_DIR,
    PARTIAL_SUFFIX,
    RAFT_DIR,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
)
from kraftlog.common._request_driver import (
    Call,
    Done,
    Outcome,
    Redirect,
    RequestDriver,
    Retry,
    RetryPolicy,
    Route,
    drive,
    drive_async,
    retry_until,
    wait_until,
)
from kraftlog.common._topic_names import (
    INTERNAL_TOPICS,
    MAX_TOPIC_NAME_LENGTH,
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TXN_TOPIC,
    is_internal_topic,
    topic_name_problem,
)
from kraftlog.common._uuid import kafka_uuid, parse_uuid
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    acl_binding_problem,
    parse_super_users,
    supported_operations,
    validate_acl_binding,
)

if TYPE_CHECKING:
    from kraftlog.common._crc_frame import (
        CRC_FRAME_HEADER_SIZE,
        FrameByteOrder,
        crc_frame_header,
        crc_frame_problem,
        encode_crc_frame,
    )
    from kraftlog.common._progress import Progress, progress

_CRC_FRAME_NAMES = frozenset(
    {"CRC_FRAME_HEADER_SIZE", "FrameByteOrder", "crc_frame_header", "crc_frame_problem", "encode_crc_frame"}
)

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CLEANER_OFFSET_CHECKPOINT",
    "CLUSTER_RESOURCE_NAME",
    "CRC_FRAME_HEADER_SIZE",
    "Call",
    "Clock",
    "ConfigType",
    "Done",
    "FrameByteOrder",
    "INDEX_SUFFIX",
    "JavaHashTable",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "INTERNAL_TOPICS",
    "MAX_TOPIC_NAME_LENGTH",
    "OFFSETS_TOPIC",
    "SHARE_GROUP_STATE_TOPIC",
    "TXN_TOPIC",
    "is_internal_topic",
    "topic_name_problem",
    "LOG_SUFFIX",
    "METADATA_PARTITION_DIR",
    "META_PROPERTIES_FILE",
    "ManualClock",
    "Outcome",
    "PARTIAL_SUFFIX",
    "PatternType",
    "Progress",
    "RAFT_DIR",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "Redirect",
    "RequestDriver",
    "ResourceType",
    "Retry",
    "RetryPolicy",
    "Route",
    "SNAPSHOT_SUFFIX",
    "SYSTEM_CLOCK",
    "CLOCK_OFFSET_FILE",
    "FAULTS_ENV",
    "ScramMechanism",
    "SystemClock",
    "TIME_INDEX_SUFFIX",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "acl_binding_problem",
    "atomic_write",
    "private_directory",
    "write_private_file",
    "backoff_ms",
    "coordinator_partition",
    "crc_frame_header",
    "crc_frame_problem",
    "drive",
    "drive_async",
    "encode_crc_frame",
    "fsync_directory",
    "fsync_file",
    "java_abs",
    "java_hashmap_order",
    "java_int32",
    "java_string_hash",
    "java_string_key",
    "kafka_uuid",
    "parse_bootstrap_servers",
    "parse_super_users",
    "parse_uuid",
    "progress",
    "retry_until",
    "supported_operations",
    "validate_acl_binding",
    "wait_until",
]


def __getattr__(name: str) -> Any:
    """`Progress` and `progress` load rich, the CRC frame helpers crc32c, on first use (PEP 562), not
    at import."""
    if name in ("Progress", "progress"):
        from kraftlog.common import _progress

        return getattr(_progress, name)
    if name in _CRC_FRAME_NAMES:
        from kraftlog.common import _crc_frame

        return getattr(_crc_frame, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
