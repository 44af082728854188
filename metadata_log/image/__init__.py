"""The metadata image: what the metadata log says, at one offset, as immutable values.

Modelled on KRaft's ``metadata/image`` package. A `MetadataImage` is the state obtained by replaying
every record of the metadata log up to (and including) ``offset``. It never changes: every part is a
frozen dataclass and every map is a `types.MappingProxyType` over a dict that nobody mutates after
construction, so any thread (a gRPC handler, the broker's replica manager, a snapshot writer) may
hold and read an image without locks.

The one way to get a new image is a `MetadataDelta`:

    delta = MetadataDelta(image)
    for entry in committed_entries:
        delta.replay(entry)          # the ONLY place state changes
    image = delta.apply()            # a new image; untouched parts are the same objects

`apply` shares every part of the old image the delta did not touch (the same `BrokerRegistration`,
`TopicImage`, `PartitionRegistration` and config-map objects), so a new image costs what changed,
not what exists, and consumers can compare parts with ``is`` to skip work.

Replay is deterministic (docs/architecture.md §1, images and deltas): no clock, no randomness, no I/O. Every random or
time-dependent choice was made by the active controller and written into the record. A record that
would produce an impossible state (a change to an unknown topic, a stale broker epoch, a duplicate
topic name, producer ids going backwards, ...) raises `MetadataReplayError` and leaves the delta
exactly as it was before that record.

The delta also says what changed (`changed_topic_ids`, `deleted_topics`, `changed_partitions`,
`changed_broker_ids`, `acls_changed`, `changed_scram_users`, `changed_quota_entities`, ...) so a
broker can decide "become leader / follower / stop replica" (or "rebuild the authorizer") from the
delta alone instead of diffing two images.
"""

from __future__ import annotations

from kraftlog.metadata_log.image._image_base import (
    ConfigResource,
    ConfigurationsImage,
    FeaturesImage,
    MetadataReplayError,
    ProducerIdsImage,
    _frozen_map,
    apply_config,
    feature_level,
    next_producer_id,
)
from kraftlog.metadata_log.image._image_cluster import (
    BrokerRegistration,
    ClusterImage,
    next_broker_registration,
)
from kraftlog.metadata_log.image._image_delta import (
    MetadataDelta,
    MetadataImage,
)
from kraftlog.metadata_log.image._image_quotas import (
    QUOTA_KEYS,
    ClientQuotasImage,
    QuotaResolution,
    make_entity,
    next_quota_values,
    quota_sort_key,
    quota_to_records,
    validate_alteration,
)
from kraftlog.metadata_log.image._image_security import (
    AclsImage,
    ScramCredential,
    ScramImage,
    acl_to_record,
    credential_to_record,
    next_acl,
    next_scram_credential,
)
from kraftlog.metadata_log.image._image_topics import (
    PartitionRegistration,
    TopicIdPartition,
    TopicImage,
    TopicsImage,
)

__all__ = [
    "QUOTA_KEYS",
    "AclsImage",
    "ClientQuotasImage",
    "QuotaResolution",
    "make_entity",
    "next_quota_values",
    "quota_sort_key",
    "quota_to_records",
    "validate_alteration",
    "BrokerRegistration",
    "ClusterImage",
    "ConfigResource",
    "ConfigurationsImage",
    "FeaturesImage",
    "MetadataDelta",
    "MetadataImage",
    "MetadataReplayError",
    "PartitionRegistration",
    "ProducerIdsImage",
    "ScramCredential",
    "ScramImage",
    "TopicIdPartition",
    "TopicImage",
    "TopicsImage",
    "_frozen_map",
    "acl_to_record",
    "apply_config",
    "credential_to_record",
    "feature_level",
    "next_acl",
    "next_broker_registration",
    "next_producer_id",
    "next_scram_credential",
]
