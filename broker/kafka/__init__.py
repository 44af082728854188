"""The Kafka-protocol listener: the wire codec (kio), the asyncio server with zero-copy fetch, fetch
sessions, and the handlers that translate each API onto the replica manager, the group and
transaction services and the controller (`KafkaApis`, one dispatch table).
"""

from kraftlog.broker.kafka._connection_quotas import ConnectionLimits
from kraftlog.broker.kafka._kafka_accept import ConnectionLimiter, ConnectionMetrics
from kraftlog.broker.kafka._kafka_apis import KafkaApis, KafkaBroker
from kraftlog.broker.kafka._kafka_server import KafkaListener

__all__: list[str] = [
    "ConnectionLimiter",
    "ConnectionLimits",
    "ConnectionMetrics",
    "KafkaApis",
    "KafkaBroker",
    "KafkaListener",
]
