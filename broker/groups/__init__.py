"""The group coordinator: classic groups, KIP-848 consumer groups and KIP-932 share groups'
membership as pure shards of ``__consumer_offsets`` on the coordinator runtime, their records, the
server-side assignors, the group service both front ends call, and the consumer-lag gauges.

A share group's partitions are assigned once their share state is initialized: the coordinator's
``share_state_initializer`` (a `ShareStateInitializer`, called with each `ShareInitJob`) is where
the share coordinator plugs in; until then every partition counts as initialized at once. Its
``share_members_release`` (a `ShareMembersRelease`, called with each `ShareMembersGone`) gives back
the records of members that left or were fenced.
"""

from kraftlog.broker.groups._group_classic_types import JoinRequest, Protocol
from kraftlog.broker.groups._group_coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    ShareMembersRelease,
    ShareStateInitializer,
)
from kraftlog.broker.groups._group_lag import GroupLag, latest_offsets
from kraftlog.broker.groups._group_service import GroupService
from kraftlog.broker.groups._group_share_types import ShareInitJob, ShareMembersGone
from kraftlog.broker.groups._group_wire import client_host_of

__all__: list[str] = [
    "GroupCoordinator",
    "GroupLag",
    "GroupService",
    "JoinRequest",
    "OFFSETS_TOPIC",
    "Protocol",
    "ShareInitJob",
    "ShareMembersGone",
    "latest_offsets",
    "ShareMembersRelease",
    "ShareStateInitializer",
    "client_host_of",
]
