"""client: the Python client library over gRPC (docs/architecture.md §2): `Producer` and
`AsyncProducer`, `Consumer` (with its consumer group), `Admin` against the controllers, `GroupAdmin`
and `TransactionAdmin` against the brokers' coordinators. Imports only `proto` and `common` (an
import-linter contract in pyproject.toml), never the server side."""

from kraftlog.client._admin import Admin, NewTopic, parse_bootstrap_servers, raise_for_errors
from kraftlog.client._config import UnsupportedConfigError
from kraftlog.client._consumer import (
    Consumer,
    ConsumerRecord,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    consumer_config_from_properties,
)
from kraftlog.client._consumer_group import CommitFailedError, RebalanceListener
from kraftlog.client._consumer_groups import ConsumerGroupMetadata
from kraftlog.client._group_admin import GroupAdmin
from kraftlog.client._metadata import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicPartition
from kraftlog.client._partitioner import DefaultPartitioner, murmur2, partition_for_key
from kraftlog.client._producer import (
    AsyncProducer,
    Producer,
    ProducerClosedError,
    RecordMetadata,
    producer_config_from_properties,
)
from kraftlog.client._transaction_admin import ProducerState, TransactionAdmin
from kraftlog.client._transport import MockTransport, Transport, rpc_error

__all__ = [
    "Admin",
    "NewTopic",
    "parse_bootstrap_servers",
    "raise_for_errors",
    "AsyncProducer",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "producer_config_from_properties",
    "Consumer",
    "ConsumerRecord",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetAndMetadata",
    "ConsumerGroupMetadata",
    "CommitFailedError",
    "RebalanceListener",
    "GroupAdmin",
    "TransactionAdmin",
    "ProducerState",
    "consumer_config_from_properties",
    "BrokerMetadata",
    "ClusterMetadata",
    "PartitionMetadata",
    "TopicPartition",
    "DefaultPartitioner",
    "murmur2",
    "partition_for_key",
    "UnsupportedConfigError",
    "MockTransport",
    "Transport",
    "rpc_error",
]
