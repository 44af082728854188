"""The state both parts of `ReplicaManager` share (metadata application, data requests), declared
once for the type checker: annotations only; `ReplicaManager.__init__` sets the fields, and the
methods are `ReplicaManager`'s own (the MRO finds those first)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kraftlog import storage
from kraftlog.broker._metrics import BrokerTopicMetrics
from kraftlog.broker._partition import Partition
from kraftlog.broker._partition_types import AlterPartitionSender, TopicPartition
from kraftlog.broker._purgatory import DelayedOperations
from kraftlog.broker._replica_types import FollowTarget
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import broker_pb2, errors_pb2


class _ReplicaManagerState:
    node_id: int
    metrics: BrokerTopicMetrics
    config: NodeConfig
    log_manager: storage.LogManager
    alter_partition: AlterPartitionSender
    clock_ms: Callable[[], int]
    fetcher_manager: Any  # a ReplicaFetcherManager, set by the server (optional)
    replica_lag_time_max_ms: int
    produce_purgatory: DelayedOperations
    fetch_purgatory: DelayedOperations
    delete_records_purgatory: DelayedOperations
    # told (topic, partition, producer id, commit) of every transaction marker written and replicated
    marker_listeners: list[Callable[[str, int, int, bool], None]]
    _replication_listener: str | None
    _client_listener: str | None
    _topic_defaults: dict[str, object]
    _image: MetadataImage
    _synced: bool
    _partitions: dict[TopicPartition, Partition]
    _follow_targets: dict[TopicPartition, FollowTarget]
    _log: Any

    if TYPE_CHECKING:

        def _check_all_purgatories(self, tp: TopicPartition) -> None: ...

        def _leader_hint(self, topic: str, pid: int) -> tuple[int, int] | None: ...

        def _node_endpoints(self, broker_ids: Iterable[int]) -> list[broker_pb2.NodeEndpoint]: ...

        def _error(self, exc: BaseException | type[kerr.KafkaError], what: str) -> errors_pb2.Error: ...

        def _leader_partition(self, topic: str, pid: int) -> Partition: ...

        def _hosted_partition(self, topic: str, pid: int) -> Partition: ...
