"""The producer: `Producer` and `AsyncProducer`, the sender, idempotence and transactions, and the
default partitioner.
"""

from kraftlog.client.producer._interceptors import ProducerInterceptor, ProducerRecord
from kraftlog.client.producer._partitioner import DefaultPartitioner, murmur2, partition_for_key
from kraftlog.client.producer._producer import (
    AsyncProducer,
    Producer,
    ProducerClosedError,
    RecordMetadata,
    producer_config_from_properties,
)

__all__: list[str] = [
    "AsyncProducer",
    "DefaultPartitioner",
    "Producer",
    "ProducerClosedError",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "murmur2",
    "partition_for_key",
    "producer_config_from_properties",
]
