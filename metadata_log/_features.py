"""Feature versions (KIP-584, KIP-778, KIP-1022): the features this build knows, the levels it
supports, the dependencies between them, and the checks a finalized level must pass.

A feature's *finalized* level lives in the metadata log as a `FeatureLevelRecord` (level 0: the
feature is off, and the image drops it). A node that replays a finalized level outside what it
supports cannot behave as the cluster promised, so it refuses to start and names the feature
(`check_supported`); the controller refuses to finalize a level some registered broker does not
support (`kraftlog.quorum.controller.update_features`).

Levels follow Kafka 4.2: ``metadata.version`` 7 is 3.3-IV3, 25 is 4.0-IV3 and 29 is 4.2-IV1
(Kafka 4.2's ``MetadataVersion.LATEST_PRODUCTION``, see `_METADATA_VERSIONS` for what each level past
4.0 means here); ``eligible.leader.replicas.version`` 1 needs ``metadata.version`` >= 23 (4.0-IV1),
as in Kafka's ``EligibleLeaderReplicasVersion``; ``group.version`` 1 and ``transaction.version`` 1-2
need 4.0-IV0 (22); ``share.version`` 1 (share groups, KIP-932) needs 4.1-IV1 (27), as Kafka 4.2's
``ShareVersion.SV_1``. ``kraft.version`` 1 is the dynamic controller quorum (KIP-853); its level is
the Raft layer's (the voter set), never a ``FeatureLevelRecord``, and a static quorum is upgraded to
it at run time (KIP-1170).

A new cluster is formatted with `format_feature_levels` (``kraftlog storage format``): as Kafka 4.2's
``kafka-storage format`` at its latest production release, ``share.version`` is 1 (share groups are
production-ready in 4.2; a preview that had to be enabled by hand in 4.1). ``metadata.version`` is
written only when asked for: a log without it runs at this build's newest level, 4.2-IV1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "ELR_FEATURE",
    "FEATURE_DEPENDENCIES",
    "FORMAT_DEFAULT_FEATURES",
    "LATEST_PRODUCTION_METADATA_VERSION",
    "FeatureRange",
    "KRAFT_VERSION",
    "METADATA_VERSION",
    "SHARE_GROUPS_DISABLED",
    "SHARE_VERSION",
    "SUPPORTED_FEATURES",
    "UnsupportedFeatureLevelError",
    "check_supported",
    "feature_dependency_problem",
    "format_feature_levels",
    "metadata_version_level",
    "share_groups_enabled",
]

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
ELR_FEATURE = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"

#: Kafka 4.2's ``MetadataVersion.LATEST_PRODUCTION`` (4.2-IV1), this build's newest level
LATEST_PRODUCTION_METADATA_VERSION = 29


@dataclass(frozen=True, slots=True)
class FeatureRange:
    """The levels of one feature this build supports, inclusive."""

    min_version: int
    max_version: int

    def __contains__(self, level: object) -> bool:
        return isinstance(level, int) and self.min_version <= level <= self.max_version


#: what this build supports, by feature name (the ``supported_features`` of ApiVersions and of a
#: broker's registration). A level below ``min_version`` other than 0 is as unsupported as one above.
SUPPORTED_FEATURES: Mapping[str, FeatureRange] = {
    METADATA_VERSION: FeatureRange(7, LATEST_PRODUCTION_METADATA_VERSION),
    KRAFT_VERSION: FeatureRange(0, 1),
    "transaction.version": FeatureRange(0, 2),
    "group.version": FeatureRange(0, 1),
    ELR_FEATURE: FeatureRange(0, 1),
    SHARE_VERSION: FeatureRange(0, 1),
}

#: feature -> level -> the minimum levels of other features it needs
FEATURE_DEPENDENCIES: Mapping[str, Mapping[int, Mapping[str, int]]] = {
    ELR_FEATURE: {1: {METADATA_VERSION: 23}},
    "group.version": {1: {METADATA_VERSION: 22}},
    "transaction.version": {1: {METADATA_VERSION: 22}, 2: {METADATA_VERSION: 22}},
    SHARE_VERSION: {1: {METADATA_VERSION: 27}},
}

#: the feature levels a fresh cluster is formatted with, at this build's newest metadata.version
#: (Kafka 4.2's ``kafka-storage format`` defaults, as far as kraftlog has the features; its other
#: 4.2 defaults, group/transaction/ELR versions, stay off here as they were before)
FORMAT_DEFAULT_FEATURES: Mapping[str, int] = {SHARE_VERSION: 1}

#: the metadata.version a format-time default needs (Kafka's ``bootstrapMetadataVersion`` of the
#: level): ``kraftlog storage format --feature metadata.version=N`` below it leaves the feature off
_DEFAULT_NEEDS_METADATA_VERSION: Mapping[str, int] = {SHARE_VERSION: 28}


#: Kafka's MetadataVersion levels by release (``--release-version`` of kafka-features), from 3.3-IV3,
#: the first this build supports; a bare release ("4.0") is its last internal version
_METADATA_VERSIONS: Mapping[str, int] = {
    "3.3-IV3": 7,
    "3.4-IV0": 8,
    "3.5-IV0": 9,
    "3.5-IV1": 10,
    "3.5-IV2": 11,
    "3.6-IV0": 12,
    "3.6-IV1": 13,
    "3.6-IV2": 14,
    "3.7-IV0": 15,
    "3.7-IV1": 16,
    "3.7-IV2": 17,
    "3.7-IV3": 18,
    "3.7-IV4": 19,
    "3.8-IV0": 20,
    "3.9-IV0": 21,
    "4.0-IV0": 22,
    "4.0-IV1": 23,
    "4.0-IV2": 24,
    "4.0-IV3": 25,
    # 4.1-IV0: Kafka turns ELR on for new clusters (KIP-966); kraftlog's format leaves it off.
    "4.1-IV0": 26,
    # 4.1-IV1: Kafka's replica fetcher sends Fetch v18 (KIP-1166); the level share.version 1 needs.
    "4.1-IV1": 27,
    # 4.2-IV0: share groups on by default for new clusters (KIP-932): a format at 4.2-IV0 or later
    # finalizes share.version 1, one below it leaves the feature off.
    "4.2-IV0": 28,
    # 4.2-IV1: Kafka turns streams groups on for new clusters (KIP-1071), which kraftlog does not
    # have; the newest production level (Kafka 4.2's LATEST_PRODUCTION), nothing else changes here.
    "4.2-IV1": 29,
}


def metadata_version_level(release: str) -> int:
    """The ``metadata.version`` level of a Kafka release ("3.9", "4.0-IV1"); `ValueError` naming
    the releases known when it is not one of them."""
    text = release.strip()
    if text in _METADATA_VERSIONS:
        return _METADATA_VERSIONS[text]
    matching = [level for name, level in _METADATA_VERSIONS.items() if name.split("-")[0] == text]
    if matching:
        return max(matching)
    known = sorted({name.split("-")[0] for name in _METADATA_VERSIONS})
    raise ValueError(f"unknown release version {release!r}: known are {', '.join(known)} (or X.Y-IVn)")


class UnsupportedFeatureLevelError(RuntimeError):
    """A finalized feature level this build does not support: the node must not run on it."""


def check_supported(levels: Mapping[str, int], where: str = "the metadata log") -> None:
    """Raise `UnsupportedFeatureLevelError` naming the first feature (by name) of ``levels`` whose
    finalized level this build does not support; level 0 (off) is always supported. ``kraft.version``
    above 0 is never finalized by a metadata record (the quorum's voter set holds it)."""
    for name in sorted(levels):
        level = levels[name]
        if level == 0:
            continue
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            raise UnsupportedFeatureLevelError(
                f"{where} finalizes feature {name} at level {level}, which this node does not know"
            )
        if name == KRAFT_VERSION:
            raise UnsupportedFeatureLevelError(
                f"{where} finalizes feature {name} at level {level}; that level is the controller quorum's"
                " (its voter set in the Raft log), never a metadata record"
            )
        if level not in supported:
            raise UnsupportedFeatureLevelError(
                f"{where} finalizes feature {name} at level {level}; this node supports"
                f" {supported.min_version}-{supported.max_version}"
            )


def feature_dependency_problem(levels: Mapping[str, int], only: Iterable[str] | None = None) -> str | None:
    """What is wrong with the dependencies of ``levels`` (the finalized levels after an update),
    or None: every feature's level must find the levels it needs (Kafka's
    ``Feature.validateVersion`` / ``FeatureControlManager`` dependency check). ``only``: check
    the dependencies of these features alone, as Kafka's controller checks those of the features an
    UpdateFeatures names (so lowering ``metadata.version`` is not refused for a feature it left
    alone)."""
    for name in sorted(levels if only is None else set(only) & set(levels)):
        needs = FEATURE_DEPENDENCIES.get(name, {}).get(levels[name], {})
        for other, minimum in sorted(needs.items()):
            # a log without metadata.version was written before kraftlog finalized it: such a
            # cluster runs at this build's newest level
            absent = SUPPORTED_FEATURES[other].max_version if other == METADATA_VERSION else 0
            have = levels.get(other, absent)
            if have < minimum:
                return f"{name} level {levels[name]} requires {other} level {minimum} or higher, but it is {have}"
    return None


def format_feature_levels(requested: Mapping[str, int] | None = None) -> dict[str, int]:
    """The feature levels ``kraftlog storage format`` finalizes in a new cluster's bootstrap
    metadata: `FORMAT_DEFAULT_FEATURES` (each only when ``metadata.version`` reaches the level the
    default needs, as Kafka derives its defaults from ``--release-version``), then ``requested``
    (``--feature name=level``) over them. Level 0 entries are kept (the caller writes no record
    for them). `ValueError` naming the feature when one is unknown, out of the supported range,
    ``kraft.version`` (the quorum's, set by ``--standalone``/``--initial-controllers``), or when
    the levels miss a dependency."""
    wanted = dict(requested or {})
    for name, level in sorted(wanted.items()):
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None or name == KRAFT_VERSION:
            known = ", ".join(n for n in sorted(SUPPORTED_FEATURES) if n != KRAFT_VERSION)
            raise ValueError(f"unsupported feature {name!r} at format time: known are {known}")
        if level not in supported and not (level == 0 and name != METADATA_VERSION):
            raise ValueError(
                f"unsupported level {level} for feature {name}: this build supports"
                f" {supported.min_version}-{supported.max_version}"
            )
    metadata_version = wanted.get(METADATA_VERSION, LATEST_PRODUCTION_METADATA_VERSION)
    levels = {
        name: level
        for name, level in FORMAT_DEFAULT_FEATURES.items()
        if metadata_version >= _DEFAULT_NEEDS_METADATA_VERSION.get(name, 0)
    }
    levels.update(wanted)
    problem = feature_dependency_problem({n: lvl for n, lvl in levels.items() if lvl != 0})
    if problem is not None:
        raise ValueError(problem)
    return levels


#: why a share-group request is refused while share groups are off (Kafka answers UNSUPPORTED_VERSION)
SHARE_GROUPS_DISABLED = (
    "share groups are disabled on this cluster (share.version is 0); enable them with"
    " 'kraftlog features upgrade --feature share.version=1'"
)


def share_groups_enabled(levels: Mapping[str, int]) -> bool:
    """Whether the finalized ``levels`` turn share groups on (Kafka's
    ``ShareVersion.supportsShareGroups``: ``share.version`` >= 1). Off, the broker answers every
    share-group request of a client or an admin with UNSUPPORTED_VERSION, as Kafka's
    ``KafkaApis.isShareGroupProtocolEnabled`` gate does."""
    return levels.get(SHARE_VERSION, 0) >= 1
