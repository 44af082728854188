"""Share groups' delivery state (KIP-932), the pure cores: the share partition on a partition's
leader (`SharePartition`: in-flight records, acquisition locks, delivery counts, acknowledgements)
and the share coordinator's shard on ``__share_group_state`` (`ShareShard`: ShareSnapshot and
ShareUpdate records, the Initialize/Read/Write/Delete/ReadSummary ShareGroupState handlers).

The shells: `ShareCoordinator` runs the shards on the coordinator runtime, `ShareStateService`
serves the share coordinator's APIs to other brokers, `SharePersister` reaches the coordinator of
a share partition's state wherever it runs.

The cores read no clock and do no I/O: the shells (ShareFetch/ShareAcknowledge on the leader, the
persister, the coordinator runtime) pass ``now_ms`` and the log's facts in and carry the results
out. Share-group membership is the group coordinator's (`kraftlog.broker.groups`).
"""

from kraftlog.broker.share._share_coordinator import ShareShards, kafka_uuid_text, share_state_partition
from kraftlog.broker.share._share_coordinator_shell import ShareCoordinator
from kraftlog.broker.share._share_dlq import (
    DeadLetterWriter,
    DlqTarget,
    broker_append,
    dlq_headers,
    dlq_payload,
    dlq_topic_problem,
)
from kraftlog.broker.share._share_fetch import FetchedBatch, aborted_ranges, fetched_batches
from kraftlog.broker.share._share_fetch_grpc import ShareServicer
from kraftlog.broker.share._share_fetch_service import (
    PartitionAnswer,
    ShareFetchAnswer,
    ShareFetchCall,
    ShareFetchService,
)
from kraftlog.broker.share._share_forget import ShareGroupForgetter, forget_over_grpc
from kraftlog.broker.share._share_metrics import ShareGroupMetrics
from kraftlog.broker.share._share_partition import UNINITIALIZED_START_OFFSET, SharePartition, initial_start_offset
from kraftlog.broker.share._share_partition_manager import (
    PartitionFetch,
    SharePartitionManager,
    SharePartitionStats,
    group_partition_config,
)
from kraftlog.broker.share._share_persister import RemoteCall, SharePersister
from kraftlog.broker.share._share_records import (
    SHARE_STATE_TOPIC,
    ShareKey,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    ShareValue,
    UnknownShareRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.broker.share._share_sessions import ShareSession, ShareSessionCache
from kraftlog.broker.share._share_shard import ShareShard, StateKey
from kraftlog.broker.share._share_shard_types import (
    DeleteStateRequest,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    ShareShardConfig,
    ShareStateResult,
    TopicPartitions,
    WriteStateRequest,
)
from kraftlog.broker.share._share_state import ShareGroupOffset, combine_state_batches
from kraftlog.broker.share._share_state_calls import (
    STATE_APIS,
    ShareStateService,
    request_from_pb,
    request_to_pb,
    result_from_pb,
    result_to_pb,
)
from kraftlog.broker.share._share_types import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AcquireMode,
    AcquireResult,
    ArchivedRecord,
    ArchiveReason,
    AutoOffsetReset,
    ChangeResult,
    RecordState,
    SharePartitionConfig,
    StateBatch,
    parse_auto_offset_reset,
)

__all__ = [
    "ShareGroupMetrics",
    "SharePartitionStats",
    "DeadLetterWriter",
    "DlqTarget",
    "broker_append",
    "dlq_headers",
    "dlq_payload",
    "dlq_topic_problem",
    "SHARE_STATE_TOPIC",
    "STATE_APIS",
    "RemoteCall",
    "ShareCoordinator",
    "SharePersister",
    "PartitionAnswer",
    "PartitionFetch",
    "ShareFetchAnswer",
    "ShareFetchCall",
    "ShareFetchService",
    "SharePartitionManager",
    "ShareSession",
    "ShareSessionCache",
    "ShareServicer",
    "ShareGroupForgetter",
    "forget_over_grpc",
    "ShareStateService",
    "request_from_pb",
    "request_to_pb",
    "result_from_pb",
    "result_to_pb",
    "UNINITIALIZED_START_OFFSET",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquireMode",
    "AcquireResult",
    "AcquiredRecords",
    "ArchiveReason",
    "ArchivedRecord",
    "AutoOffsetReset",
    "ChangeResult",
    "DeleteStateRequest",
    "FetchedBatch",
    "InitializeStateRequest",
    "ReadStateRequest",
    "ReadStateSummaryRequest",
    "RecordState",
    "ShareGroupOffset",
    "ShareKey",
    "SharePartition",
    "SharePartitionConfig",
    "ShareShard",
    "ShareShardConfig",
    "ShareShards",
    "ShareSnapshotKey",
    "ShareSnapshotValue",
    "ShareStateResult",
    "ShareUpdateKey",
    "ShareUpdateValue",
    "ShareValue",
    "StateBatch",
    "StateKey",
    "TopicPartitions",
    "UnknownShareRecordError",
    "WriteStateRequest",
    "aborted_ranges",
    "combine_state_batches",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "fetched_batches",
    "group_partition_config",
    "initial_start_offset",
    "kafka_uuid_text",
    "parse_auto_offset_reset",
    "share_state_partition",
]
