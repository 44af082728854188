"""The consumer: `Consumer`, its fetch path and positions, offsets, and its group membership (the
classic protocol and KIP-848).
"""

from kraftlog.client.consumer._consumer import (
    Consumer,
    ConsumerRecord,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    consumer_config_from_properties,
)
from kraftlog.client.consumer._consumer_group import CommitFailedError, RebalanceListener
from kraftlog.client.consumer._consumer_groups import ConsumerGroupMetadata
from kraftlog.client.consumer._consumer_protocol import decode_assignment, decode_subscription
from kraftlog.client.consumer._group_client import COORDINATOR_ERRORS, GroupClient
from kraftlog.client.consumer._interceptors import ConsumerInterceptor

__all__: list[str] = [
    "COORDINATOR_ERRORS",
    "GroupClient",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerInterceptor",
    "ConsumerRecord",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RebalanceListener",
    "consumer_config_from_properties",
    "decode_assignment",
    "decode_subscription",
]
