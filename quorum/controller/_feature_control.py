"""Feature versions: DescribeFeatures and UpdateFeatures (Kafka's FeatureControlManager, KIP-584 /
KIP-778 / KIP-1022).

Rules, in the order they are checked for each update (a refused update refuses the whole request
and writes nothing, as Kafka 3.8+ does; every error is INVALID_UPDATE_VERSION unless said):

1. the upgrade type is 1 (upgrade), 2 (safe downgrade) or 3 (unsafe downgrade) (INVALID_REQUEST);
2. the feature is one this controller knows, and the level is not negative (0 is off; ``metadata.version``
   cannot be turned off);
3. ``kraft.version`` is the quorum's (KIP-853, KIP-1170): its finalized level is the Raft layer's
   (``ctx.kraft_version``), never a ``FeatureLevelRecord``; it is only upgraded (Kafka refuses a
   downgrade), in a request naming no other feature (it goes through the Raft log, the others
   through the metadata log: no all-or-nothing across the two), and only when
   ``ctx.kraft_upgrade_problem`` is None (every voter reported its directory id); the upgrade itself
   is the Raft entry `quorum._kraft_upgrade` appends once these checks pass;
4. the level is within this controller's supported range;
5. a lower level than the finalized one needs a downgrade type, a higher one the upgrade type;
6. ``metadata.version`` is never downgraded (it might drop metadata; Kafka 4 refuses both kinds);
7. every registered broker supports the level (its registration says its range; a broker that named
   no range for the feature supports only 0; one whose registration names no features at all was
   started by a build before feature versions and is not asked);
8. the levels after the whole request satisfy the dependencies of the features it names
   (``eligible.leader.replicas.version`` 1 needs ``metadata.version`` 23+, ``share.version`` 1
   needs 27+); as Kafka's controller, those of a feature the request leaves alone are not checked
   again (a fresh cluster's ``share.version`` 1 does not stop ``metadata.version`` being set to 25).

Turning ``eligible.leader.replicas.version`` off also clears every partition's ELR and last known
ELR in the same batch: with the feature off nobody maintains them, and a stale ELR must not be
elected later.
"""

from __future__ import annotations

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import (
    ELR_FEATURE,
    KRAFT_VERSION,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    FeatureLevelRecord,
    PartitionChangeRecord,
    feature_dependency_problem,
)
from kraftlog.metadata_log.image import MetadataImage
from kraftlog.proto import admin_pb2
from kraftlog.quorum.controller._controller_base import ControllerContext, Records, error_pb

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def describe_features(image: MetadataImage, ctx: ControllerContext) -> admin_pb2.DescribeFeaturesResponse:
    """The finalized levels (by name) at the image's offset and the levels this controller supports."""
    R = admin_pb2.DescribeFeaturesResponse
    levels = _levels(image, ctx)
    return R(
        error=error_pb(),
        finalized=[R.Finalized(name=n, level=lvl) for n, lvl in sorted(levels.items())],
        supported=[
            R.Supported(name=n, min_version=r.min_version, max_version=r.max_version)
            for n, r in sorted(SUPPORTED_FEATURES.items())
        ],
        finalized_epoch=image.offset,
    )


def _levels(image: MetadataImage, ctx: ControllerContext) -> dict[str, int]:
    """The finalized levels: the image's, with ``kraft.version`` the quorum's (absent at 0)."""
    levels = {n: lvl for n, lvl in image.features.levels.items() if n != KRAFT_VERSION}
    if ctx.kraft_version >= 1:
        levels[KRAFT_VERSION] = ctx.kraft_version
    return levels


def _refusal(
    image: MetadataImage,
    name: str,
    level: int,
    upgrade_type: int,
    kraft_version: int = 0,
    kraft_upgrade_problem: str | None = None,
) -> tuple[type[kerr.KafkaError], str] | None:
    """Why one update is refused (rules 1-7 of the module docstring), or None."""
    bad = kerr.InvalidUpdateVersionError
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return kerr.InvalidRequestError, f"unknown upgrade type {upgrade_type} for feature {name}"
    supported = SUPPORTED_FEATURES.get(name)
    if supported is None:
        return bad, f"the controller does not support the given {name} feature"
    if level < 0:
        return bad, f"a feature version cannot be less than 0 ({name}={level})"
    current = kraft_version if name == KRAFT_VERSION else image.features.level(name)
    if name == METADATA_VERSION and level == 0:
        return bad, "metadata.version cannot be set to 0 (it cannot be turned off)"
    if name == KRAFT_VERSION and level < current:
        return bad, (
            f"Invalid upgrade of {KRAFT_VERSION} from version {current} to {level}"
            " because the new version is a downgrade"
        )
    if name == KRAFT_VERSION and level > current and level in supported and kraft_upgrade_problem is not None:
        return bad, f"{KRAFT_VERSION} {level} is the dynamic controller quorum (KIP-853): {kraft_upgrade_problem}"
    if level != 0 and level not in supported:
        return bad, (
            f"invalid update version {level} for feature {name}: the controller supports"
            f" {supported.min_version}-{supported.max_version}"
        )
    if level < current and upgrade_type == UPGRADE:
        return bad, (
            f"cannot downgrade {name} from {current} to {level} without the upgrade type safe or unsafe downgrade"
        )
    if level > current and upgrade_type != UPGRADE:
        return bad, f"cannot downgrade {name} to a newer version ({current} -> {level})"
    if name == METADATA_VERSION and level < current:
        return bad, (
            f"invalid metadata.version {level}: refusing to downgrade from {current} because it might delete"
            " metadata information"
        )
    for broker_id in image.cluster.broker_ids() if name != KRAFT_VERSION else ():  # the voters decide it
        reg = image.cluster.broker(broker_id)
        assert reg is not None
        if not reg.features:
            continue
        low, high = reg.supported_range(name)
        if level != 0 and not low <= level <= high:
            return bad, (
                f"broker {broker_id} does not support the given version: it supports {low} to {high} for feature {name}"
            )
    return None


def update_features(
    image: MetadataImage, req: admin_pb2.UpdateFeaturesRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.UpdateFeaturesResponse]:
    """UpdateFeatures (Kafka API 57): all updates or none; ``validate_only`` checks and writes nothing.

    An update to the level already finalized writes no record (the answer is still NONE), nor does
    ``kraft.version``: the caller upgrades the quorum once these checks pass (`quorum._kraft_upgrade`)."""
    R = admin_pb2.UpdateFeaturesResponse
    names = [u.feature for u in req.updates]

    def refuse(err: type[kerr.KafkaError], msg: str) -> tuple[Records, admin_pb2.UpdateFeaturesResponse]:
        return [], R(error=error_pb(err, msg), results=[R.Result(feature=n, error=error_pb(err, msg)) for n in names])

    if len(set(names)) != len(names):
        return refuse(kerr.InvalidRequestError, "a feature is named twice")
    if KRAFT_VERSION in names and len(names) > 1:
        return refuse(
            kerr.InvalidUpdateVersionError,
            f"{KRAFT_VERSION} moves the controllers to the dynamic controller quorum (KIP-853) through the Raft"
            " log, apart from the other features: update it in a request of its own",
        )
    after = _levels(image, ctx)
    records: Records = []
    for u in req.updates:
        level = max(u.max_version_level, 0) if u.feature != METADATA_VERSION else u.max_version_level
        problem = _refusal(
            image, u.feature, level, u.upgrade_type or UPGRADE, ctx.kraft_version, ctx.kraft_upgrade_problem
        )
        if problem is not None:
            return refuse(*problem)
        if u.feature != KRAFT_VERSION and image.features.level(u.feature) != level:
            records.append(FeatureLevelRecord(name=u.feature, feature_level=level))
        if level == 0:
            after.pop(u.feature, None)
        else:
            after[u.feature] = level
    dependency = feature_dependency_problem(after, only=names)
    if dependency is not None:
        return refuse(kerr.InvalidUpdateVersionError, dependency)
    if req.validate_only:
        records = []
    elif image.features.level(ELR_FEATURE) >= 1 and after.get(ELR_FEATURE, 0) == 0:
        records += _clear_elr(image)
    return records, R(error=error_pb(), results=[R.Result(feature=n, error=error_pb()) for n in names])


def _clear_elr(image: MetadataImage) -> Records:
    out: Records = []
    for topic in image.topics.by_id.values():
        for pid in sorted(topic.partitions):
            part = topic.partitions[pid]
            if part.elr or part.last_known_elr:
                out.append(
                    PartitionChangeRecord(
                        partition_id=pid, topic_id=topic.topic_id, eligible_leader_replicas=(), last_known_elr=()
                    )
                )
    return out
