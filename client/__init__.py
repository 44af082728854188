"""client: the Python client library over gRPC (DESIGN.md §2): `Admin` now; `Producer` and
`Consumer` arrive with the brokers. Imports only `proto`."""

from client._admin import Admin, NewTopic, parse_bootstrap_servers, raise_for_errors

__all__ = ["Admin", "NewTopic", "parse_bootstrap_servers", "raise_for_errors"]
