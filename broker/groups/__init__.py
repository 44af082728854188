"""The group coordinator: classic groups and KIP-848 consumer groups as pure shards of
``__consumer_offsets`` on the coordinator runtime, their records, the server-side assignors, the
group service both front ends call, and the consumer-lag gauges.
"""

from kraftlog.broker.groups._group_classic_types import JoinRequest, Protocol
from kraftlog.broker.groups._group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from kraftlog.broker.groups._group_lag import GroupLag
from kraftlog.broker.groups._group_service import GroupService
from kraftlog.broker.groups._group_wire import client_host_of

__all__: list[str] = [
    "GroupCoordinator",
    "GroupLag",
    "GroupService",
    "JoinRequest",
    "OFFSETS_TOPIC",
    "Protocol",
    "client_host_of",
]
