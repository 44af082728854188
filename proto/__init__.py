"""kraftlog: proto. The generated gRPC modules, Kafka's error codes, and shared channel options."""

from kraftlog.proto._channels import RECONNECT_OPTIONS, open_aio_channel, open_channel, sasl_metadata

__all__ = ["RECONNECT_OPTIONS", "open_aio_channel", "open_channel", "sasl_metadata"]
