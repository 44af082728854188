"""kraftlog: proto. The generated gRPC modules, Kafka's error codes, and shared channel options."""

from kraftlog.proto._channels import RECONNECT_OPTIONS

__all__ = ["RECONNECT_OPTIONS"]
