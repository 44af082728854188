"""The one coordinator runtime (Kafka's CoordinatorRuntime): a shell that follows leadership of an
internal topic's partitions, loads a shard by replaying its partition, queues and appends the
shard's records with acks=all, completes an operation only once its records are committed, and
runs every timer from one deadline queue. Shards are pure (`replay`, operations that return a
`CoordinatorResult`, `next_deadline`/`poll`); the group and transaction coordinators plug in.
"""

from kraftlog.broker.coordinator._coordinator_result import CoordinatorResult, chain, coordinator_error, merge
from kraftlog.broker.coordinator._coordinator_runtime import CoordinatorRuntime, ShardUnavailable
from kraftlog.broker.coordinator._internal_topic import (
    OFFSETS_TOPIC,
    TXN_TOPIC,
    LogEntry,
    ReplicaPartitionWriter,
    TopicCreator,
)
from kraftlog.broker.coordinator._records_wire import (
    I8,
    I16,
    I32,
    I64,
    Reader,
    bytes_,
    compact_array_length,
    compact_string,
    string,
    uvarint,
)

__all__: list[str] = [
    "CoordinatorResult",
    "OFFSETS_TOPIC",
    "TXN_TOPIC",
    "CoordinatorRuntime",
    "I16",
    "I32",
    "I64",
    "I8",
    "LogEntry",
    "Reader",
    "ReplicaPartitionWriter",
    "ShardUnavailable",
    "TopicCreator",
    "bytes_",
    "chain",
    "compact_array_length",
    "compact_string",
    "coordinator_error",
    "merge",
    "string",
    "uvarint",
]
