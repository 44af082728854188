"""Feature versions (KIP-584, KIP-778, KIP-1022): the features this build knows, the levels it
supports, the dependencies between them, and the checks a finalized level must pass.

A feature's *finalized* level lives in the metadata log as a `FeatureLevelRecord` (level 0: the
feature is off, and the image drops it). A node that replays a finalized level outside what it
supports cannot behave as the cluster promised, so it refuses to start and names the feature
(`check_supported`); the controller refuses to finalize a level some registered broker does not
support (`kraftlog.quorum.controller.update_features`).

Levels follow Kafka 4.0: ``metadata.version`` 7 is 3.3-IV3 and 25 is 4.0-IV3;
``eligible.leader.replicas.version`` 1 needs ``metadata.version`` >= 23 (4.0-IV1), as in
Kafka's ``EligibleLeaderReplicasVersion``; ``group.version`` 1 and ``transaction.version`` 1-2
need 4.0-IV0 (22). ``kraft.version`` 1 is the dynamic controller quorum (KIP-853); its level is the
Raft layer's (the voter set), never a ``FeatureLevelRecord``, and a static quorum is upgraded to it
at run time (KIP-1170).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ELR_FEATURE",
    "FEATURE_DEPENDENCIES",
    "FeatureRange",
    "KRAFT_VERSION",
    "METADATA_VERSION",
    "SUPPORTED_FEATURES",
    "UnsupportedFeatureLevelError",
    "check_supported",
    "feature_dependency_problem",
    "metadata_version_level",
]

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
ELR_FEATURE = "eligible.leader.replicas.version"


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
    METADATA_VERSION: FeatureRange(7, 25),
    KRAFT_VERSION: FeatureRange(0, 1),
    "transaction.version": FeatureRange(0, 2),
    "group.version": FeatureRange(0, 1),
    ELR_FEATURE: FeatureRange(0, 1),
}

#: feature -> level -> the minimum levels of other features it needs
FEATURE_DEPENDENCIES: Mapping[str, Mapping[int, Mapping[str, int]]] = {
    ELR_FEATURE: {1: {METADATA_VERSION: 23}},
    "group.version": {1: {METADATA_VERSION: 22}},
    "transaction.version": {1: {METADATA_VERSION: 22}, 2: {METADATA_VERSION: 22}},
}


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


def feature_dependency_problem(levels: Mapping[str, int]) -> str | None:
    """What is wrong with the dependencies of ``levels`` (the finalized levels after an update),
    or None: every feature's level must find the levels it needs (Kafka's
    ``Feature.validateDefinition`` / ``FeatureControlManager`` dependency check)."""
    for name in sorted(levels):
        needs = FEATURE_DEPENDENCIES.get(name, {}).get(levels[name], {})
        for other, minimum in sorted(needs.items()):
            # a log without metadata.version was written before kraftlog finalized it: such a
            # cluster runs at this build's newest level
            absent = SUPPORTED_FEATURES[other].max_version if other == METADATA_VERSION else 0
            have = levels.get(other, absent)
            if have < minimum:
                return f"{name} level {levels[name]} requires {other} level {minimum} or higher, but it is {have}"
    return None
