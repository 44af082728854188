"""client: the Python client library over gRPC (docs/architecture.md §2): `Producer` and
`AsyncProducer`, `Consumer` (with its consumer group), `ShareConsumer` (a share group's member,
KIP-932), `Admin` against the controllers, `GroupAdmin` and `TransactionAdmin` against the
brokers' coordinators. Imports only `proto` and `common` (an import-linter contract in
pyproject.toml), never the server side."""

from kraftlog.client._config import UnsupportedConfigError
from kraftlog.client._metadata import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicPartition
from kraftlog.client._security import client_security, security_from_properties
from kraftlog.client._transport import MockTransport, Transport, rpc_error
from kraftlog.client.admin import (
    Admin,
    DeletedRecords,
    GroupAdmin,
    NewTopic,
    ProducerState,
    RecordsAdmin,
    TransactionAdmin,
    parse_bootstrap_servers,
    raise_for_errors,
)
from kraftlog.client.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerGroupMetadata,
    ConsumerInterceptor,
    ConsumerRecord,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RebalanceListener,
    consumer_config_from_properties,
)
from kraftlog.client.producer import (
    AsyncProducer,
    DefaultPartitioner,
    Producer,
    ProducerClosedError,
    ProducerInterceptor,
    ProducerRecord,
    RecordMetadata,
    murmur2,
    partition_for_key,
    producer_config_from_properties,
)
from kraftlog.client.share import (
    AcknowledgeType,
    IllegalStateError,
    ShareConsumer,
    ShareConsumerRecord,
    share_consumer_config_from_properties,
)

__all__ = [
    "AcknowledgeType",
    "Admin",
    "AsyncProducer",
    "BrokerMetadata",
    "ClusterMetadata",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerInterceptor",
    "ConsumerRecord",
    "DefaultPartitioner",
    "GroupAdmin",
    "IllegalStateError",
    "LogTruncationError",
    "MockTransport",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "Producer",
    "ProducerClosedError",
    "ProducerInterceptor",
    "ProducerRecord",
    "DeletedRecords",
    "ProducerState",
    "RecordsAdmin",
    "RebalanceListener",
    "RecordMetadata",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
    "TransactionAdmin",
    "Transport",
    "UnsupportedConfigError",
    "client_security",
    "consumer_config_from_properties",
    "murmur2",
    "parse_bootstrap_servers",
    "partition_for_key",
    "producer_config_from_properties",
    "raise_for_errors",
    "rpc_error",
    "security_from_properties",
    "share_consumer_config_from_properties",
]
