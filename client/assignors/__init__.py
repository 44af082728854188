"""The classic protocol's client-side partition assignors: range, round robin, sticky and
cooperative sticky.
"""

from kraftlog.client.assignors._assignors import (
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
)
from kraftlog.client.assignors._sticky import CooperativeStickyAssignor, StickyAssignor

__all__: list[str] = [
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
]
