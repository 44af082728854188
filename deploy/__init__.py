"""kraftlog: deploy."""

from kraftlog.deploy._cluster import STATE_FILE, LocalCluster, wait_until
from kraftlog.deploy._netns import unavailable_reason

__all__ = [
    "LocalCluster",
    "STATE_FILE",
    "unavailable_reason",
    "wait_until",
]
