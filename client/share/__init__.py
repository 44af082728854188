"""Share groups' consumer (KIP-932): `ShareConsumer`, its records (`ShareConsumerRecord`, with a
delivery count) and `AcknowledgeType`."""

from kraftlog.client.share._acknowledgements import AcknowledgeType, IllegalStateError
from kraftlog.client.share._share_consumer import ShareConsumer, share_consumer_config_from_properties
from kraftlog.client.share._share_fetcher import ShareConsumerRecord

__all__ = [
    "AcknowledgeType",
    "IllegalStateError",
    "ShareConsumer",
    "ShareConsumerRecord",
    "share_consumer_config_from_properties",
]
