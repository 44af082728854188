"""What a running kraftlog node is: its runtime (`serve`, `Node`), metrics endpoint, logging and the
formatting of its data dirs.

Above broker and quorum (it starts them) and below the CLI and the launcher, which both use it
(docs/architecture.md §2). The config schema and loader it reads are in
`kraftlog.common.config`, because the controller and the broker read the same schema.
"""

from __future__ import annotations

from kraftlog.node._errors import NodeStartupError
from kraftlog.node._format import (
    FormatResult,
    check_formatted,
    format_node_dirs,
    is_valid_cluster_id,
    new_cluster_id,
    node_dirs,
    resolve_quorum,
)
from kraftlog.node._logging import configure_logging
from kraftlog.node._metrics import RpcMetricsInterceptor, new_node_registry, response_errors
from kraftlog.node._metrics_endpoint import MetricsEndpoint, metrics_host
from kraftlog.node._runtime import Node, serve

__all__ = [
    "FormatResult",
    "MetricsEndpoint",
    "Node",
    "NodeStartupError",
    "RpcMetricsInterceptor",
    "check_formatted",
    "configure_logging",
    "format_node_dirs",
    "is_valid_cluster_id",
    "metrics_host",
    "new_cluster_id",
    "new_node_registry",
    "node_dirs",
    "resolve_quorum",
    "response_errors",
    "serve",
]
