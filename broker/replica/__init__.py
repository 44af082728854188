"""The replicas a broker hosts: the metadata follower that applies the metadata log, the replica
manager (a partition registry, the metadata applier and the request path, each owning its state),
partitions with their leader and follower state (high watermark, ISR, AlterPartition), the
fetchers that replicate from leaders, the purgatory of parked requests, and their metrics.
"""

from kraftlog.broker.replica._alter_partition import AlterPartitionManager
from kraftlog.broker.replica._fetch_response import close_regions
from kraftlog.broker.replica._fetcher import ReplicaFetcherManager
from kraftlog.broker.replica._metadata_follower import MetadataFollower, grpc_stream_opener
from kraftlog.broker.replica._metrics import BrokerStateCollector, BrokerTopicMetrics
from kraftlog.broker.replica._partition_types import error_pb
from kraftlog.broker.replica._purgatory import DelayedOperation
from kraftlog.broker.replica._replica_manager import ReplicaManager
from kraftlog.broker.replica._replica_types import LEADER_HINT_CODES, FetchResult

__all__: list[str] = [
    "AlterPartitionManager",
    "BrokerStateCollector",
    "BrokerTopicMetrics",
    "DelayedOperation",
    "MetadataFollower",
    "ReplicaFetcherManager",
    "ReplicaManager",
    "FetchResult",
    "LEADER_HINT_CODES",
    "close_regions",
    "error_pb",
    "grpc_stream_opener",
]
