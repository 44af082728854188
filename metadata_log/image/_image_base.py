"""What every part of the metadata image shares, and the small images: configs, producer ids,
features (see `metadata_log.image`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from kraftlog.metadata_log._records import (
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    ProducerIdsRecord,
)

ConfigResource = tuple[int, str]


"""``(resource_type, resource_name)``: a `ConfigResourceType` id and, e.g., a topic name."""


_EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})


K = TypeVar("K")
V = TypeVar("V")


def _frozen_map(value: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """Return ``value`` as a read-only mapping, copying only when it is not one already.

    Images built by `MetadataDelta.apply` already hold `MappingProxyType`s over private dicts, so
    this costs one ``isinstance`` there; a caller building an image by hand with a plain dict gets
    a private copy, so mutating its dict later cannot change the image.
    """
    if isinstance(value, MappingProxyType):
        return value
    return MappingProxyType(dict(value))


def _thawed(value: Mapping[K, V]) -> dict[K, V]:
    """A private dict copy of an image's map, for a delta's ``apply`` to change.

    The proxy's own ``.copy()`` is one fast dict copy; ``dict(proxy)`` walks the mapping protocol
    in one C call holding the GIL, eight times slower (1,581 against 185 ms at 800 k entries): long
    enough for pysyncobj's thread to miss heartbeats and the quorum to re-elect every few seconds
    while a big metadata log is written (issue 26)."""
    if isinstance(value, MappingProxyType):
        return value.copy()
    return dict(value)


class MetadataReplayError(ValueError):
    """A record that cannot be applied to the current state (unknown type or impossible change).

    Replaying committed records must never fail on a healthy cluster, so this signals a controller
    bug or a corrupt log. It carries Kafka's UNKNOWN_SERVER_ERROR attributes so a server that hits
    it while answering a request can still produce a well-formed error response.
    """

    error_code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    """Dynamic configs by resource: ``(resource_type, resource_name) -> {name: value}``.

    Only explicitly set keys are here; defaults live in `common.config`. A resource whose
    last key is deleted disappears, so "no entry" and "empty map" never both mean the same thing.
    """

    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ConfigurationsImage]

    def __post_init__(self) -> None:
        resources = self.resources
        if not isinstance(resources, MappingProxyType):
            resources = MappingProxyType({k: _frozen_map(v) for k, v in resources.items()})
        object.__setattr__(self, "resources", resources)

    def config(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        """The explicitly set keys of one resource (an empty mapping when none are)."""
        return self.resources.get((resource_type, resource_name), _EMPTY_MAP)

    def topic_config(self, topic_name: str) -> Mapping[str, str]:
        return self.config(ConfigResourceType.TOPIC, topic_name)

    def broker_config(self, broker_id: int | str) -> Mapping[str, str]:
        """Per-broker dynamic configs; ``""`` names the cluster-wide default (as in Kafka)."""
        return self.config(ConfigResourceType.BROKER, str(broker_id))

    def __len__(self) -> int:
        return len(self.resources)


ConfigurationsImage.EMPTY = ConfigurationsImage()


# ---- the transitions of the small entities: `MetadataDelta` replays them, and the Spark job folds
# each entity's records with the same functions (`next_broker_registration` and
# `PartitionRegistration.merge` are the brokers' and partitions').


def apply_config(values: dict[str, str], record: ConfigRecord) -> None:
    """One resource's dynamic configs after ``record``: a value sets the key, None deletes it."""
    if record.value is None:
        values.pop(record.name, None)
    else:
        values[record.name] = record.value


def next_producer_id(current: int, record: ProducerIdsRecord) -> int:
    """The next producer id after ``record``; it never goes back (a block is never handed out twice)."""
    if record.next_producer_id < current:
        raise MetadataReplayError(f"next producer id {record.next_producer_id} goes back from {current}")
    return record.next_producer_id


def feature_level(record: FeatureLevelRecord) -> int:
    """The finalized level ``record`` sets (0 disables the feature; negative is refused)."""
    if record.feature_level < 0:
        raise MetadataReplayError(f"negative level {record.feature_level} for feature {record.name!r}")
    return record.feature_level


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """The first producer id not yet handed out (``/latest_producer_id_block`` in ZooKeeper mode)."""

    next_producer_id: int = 0

    EMPTY: ClassVar[ProducerIdsImage]


ProducerIdsImage.EMPTY = ProducerIdsImage()


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    """Finalized feature levels by name; an absent feature is at level 0 (disabled)."""

    levels: Mapping[str, int] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[FeaturesImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", _frozen_map(self.levels))

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


FeaturesImage.EMPTY = FeaturesImage()
