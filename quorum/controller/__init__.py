"""The active controller's decisions, as pure functions of the metadata image.

Every handler here takes the current `MetadataImage`, a request (the protobuf message of the RPC) and
a `ControllerContext` (config, clock reading, seeded rng, the next metadata offset) and returns
``(records, response)``. Handlers never mutate state: the records are proposed to the quorum, and
the leader and the standbys change state only by replaying them once committed. The one piece of
mutable state, broker liveness (`BrokerHeartbeats`), is in-memory on the active controller, exactly
as KRaft keeps it: it is not metadata, and a new active controller starts it afresh.

Rules kept here (Kafka's, KRaft mode):

- Leader election picks the first replica in assignment order that is in the ISR, unfenced and not
  shutting down (the seeds' rule). With ``unclean.leader.election.enable`` any live replica may be
  chosen, and the ISR shrinks to it. With no candidate the partition goes offline (leader -1) and
  keeps its last ISR member so a clean election can follow when that broker returns.
- Removing a broker from ISRs (fencing, controlled shutdown) never empties an ISR.
- Every decision about a broker names the broker epoch it was made for, so a decision about an old
  incarnation cannot touch a new one; every AlterPartition names leader and partition epochs, so a
  deposed or stale leader changes nothing (FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION).
"""

from __future__ import annotations

from kraftlog.common import MAX_TOPIC_NAME_LENGTH
from kraftlog.quorum.controller._admin_authz import authorize_cluster, authorize_items
from kraftlog.quorum.controller._cluster_control import (
    broker_heartbeat,
    describe_cluster,
    fence_expired_brokers,
    register_broker,
)
from kraftlog.quorum.controller._config_control import (
    describe_configs,
    incremental_alter_configs,
)
from kraftlog.quorum.controller._controller_base import (
    NO_PARTITION_CHANGE_QUOTA,
    PRODUCER_ID_BLOCK_SIZE,
    BrokerHeartbeats,
    ControllerContext,
    MutationQuotas,
    PartitionChangeQuota,
    Records,
    _elect_offline_partitions,
    _remove_from_isrs,
    apply_records,
    elect_leader,
    error_pb,
    new_topic_id,
)
from kraftlog.quorum.controller._feature_control import describe_features, update_features
from kraftlog.quorum.controller._partition_control import (
    allocate_producer_ids,
    alter_partition,
    alter_partition_reassignments,
    complete_reassignments,
    elect_leaders,
    list_partition_reassignments,
    preferred_leader_rebalance,
)
from kraftlog.quorum.controller._quota_control import alter_client_quotas, describe_client_quotas
from kraftlog.quorum.controller._security_control import (
    alter_user_scram_credentials,
    create_acls,
    delete_acls,
    describe_acls,
    describe_user_scram_credentials,
)
from kraftlog.quorum.controller._topic_control import (
    create_partitions,
    create_topics,
    delete_topics,
    describe_topics,
    validate_topic_name,
)

__all__ = [
    "BrokerHeartbeats",
    "ControllerContext",
    "MutationQuotas",
    "NO_PARTITION_CHANGE_QUOTA",
    "PartitionChangeQuota",
    "MAX_TOPIC_NAME_LENGTH",
    "PRODUCER_ID_BLOCK_SIZE",
    "Records",
    "_elect_offline_partitions",
    "_remove_from_isrs",
    "allocate_producer_ids",
    "alter_partition",
    "alter_client_quotas",
    "alter_partition_reassignments",
    "alter_user_scram_credentials",
    "create_acls",
    "delete_acls",
    "describe_acls",
    "describe_client_quotas",
    "describe_user_scram_credentials",
    "apply_records",
    "authorize_cluster",
    "authorize_items",
    "broker_heartbeat",
    "complete_reassignments",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "describe_features",
    "update_features",
    "describe_topics",
    "elect_leader",
    "elect_leaders",
    "error_pb",
    "fence_expired_brokers",
    "incremental_alter_configs",
    "list_partition_reassignments",
    "new_topic_id",
    "preferred_leader_rebalance",
    "register_broker",
    "validate_topic_name",
]
