"""The cluster part of the metadata image: broker registrations (see `metadata_log.image`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from kraftlog.metadata_log._records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    FencingChange,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kraftlog.metadata_log.image._image_base import _EMPTY_MAP, MetadataReplayError, _frozen_map

#: the records that change one broker's registration (`next_broker_registration`)
BrokerRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One broker as the controllers know it (KRaft's BrokerRegistration).

    ``broker_epoch`` identifies one registration: every fence/unfence/unregister record names the
    epoch it was decided against, so a decision about a previous incarnation cannot touch a newer one.
    """

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()
    #: ``(name, min_supported, max_supported)`` per feature the broker said it supports
    features: tuple[tuple[str, int, int], ...] = ()

    def supported_range(self, feature: str) -> tuple[int, int]:
        """The levels this broker supports of ``feature``; ``(0, 0)`` when it named none (a broker
        that does not know a feature supports only its absence, as Kafka's ``BrokerRegistration``)."""
        for name, low, high in self.features:
            if name == feature:
                return low, high
        return 0, 0

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch,
            endpoints=tuple(record.endpoints),
            rack=record.rack,
            fenced=bool(record.fenced),
            in_controlled_shutdown=bool(record.in_controlled_shutdown),
            log_dirs=tuple(record.log_dirs),
            features=tuple(tuple(f) for f in record.features),  # type: ignore[misc]
        )

    def to_record(self) -> RegisterBrokerRecord:
        """The record that recreates this registration, flags included (used by snapshots)."""
        return RegisterBrokerRecord(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            endpoints=self.endpoints,
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=self.log_dirs,
            features=self.features,
        )

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        """The endpoint of the named listener, or None when the broker does not expose it."""
        for ep in self.endpoints:
            if ep.name == listener_name:
                return ep
        return None


def next_broker_registration(current: BrokerRegistration | None, record: BrokerRecord) -> BrokerRegistration | None:
    """One broker's registration after ``record``; None once it is unregistered.

    The one place these transitions live: `MetadataDelta` replays them, and the Spark job folds
    each broker's records with it. Every record but a registration names the broker epoch it was
    decided against and is refused (`MetadataReplayError`) for another registration, or none.
    """
    if isinstance(record, RegisterBrokerRecord):
        return BrokerRegistration.from_record(record)
    what = {
        UnregisterBrokerRecord: "unregister",
        FenceBrokerRecord: "fence",
        UnfenceBrokerRecord: "unfence",
        BrokerRegistrationChangeRecord: "change",
    }[type(record)]
    if current is None:
        raise MetadataReplayError(f"cannot {what} broker {record.broker_id}: it is not registered")
    if current.broker_epoch != record.broker_epoch:
        raise MetadataReplayError(
            f"cannot {what} broker {record.broker_id} at epoch {record.broker_epoch}: "
            f"its registration has epoch {current.broker_epoch}"
        )
    if isinstance(record, UnregisterBrokerRecord):
        return None
    if isinstance(record, FenceBrokerRecord):
        return replace(current, fenced=True)
    if isinstance(record, UnfenceBrokerRecord):
        return replace(current, fenced=False)
    if record.fenced == FencingChange.FENCE:
        fenced = True
    elif record.fenced == FencingChange.UNFENCE:
        fenced = False
    elif record.fenced == FencingChange.NONE:
        fenced = current.fenced
    else:
        raise MetadataReplayError(f"unknown fencing change {record.fenced}")
    if record.in_controlled_shutdown == 1:
        shutting_down = True
    elif record.in_controlled_shutdown == 0:
        shutting_down = current.in_controlled_shutdown
    else:
        raise MetadataReplayError(f"unknown controlled-shutdown change {record.in_controlled_shutdown}")
    return replace(current, fenced=fenced, in_controlled_shutdown=shutting_down)


@dataclass(frozen=True, slots=True)
class ClusterImage:
    """Registered brokers by id (the ``/brokers/ids`` subtree of ZooKeeper-mode Kafka)."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ClusterImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "brokers", _frozen_map(self.brokers))

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def broker_ids(self) -> list[int]:
        """Every registered broker id, ascending."""
        return sorted(self.brokers)

    def unfenced_broker_ids(self) -> list[int]:
        """Ids of brokers that may lead and be placed on (registered and not fenced), ascending."""
        return sorted(b for b, reg in self.brokers.items() if not reg.fenced)

    def fenced_broker_ids(self) -> list[int]:
        return sorted(b for b, reg in self.brokers.items() if reg.fenced)

    def is_unfenced(self, broker_id: int) -> bool:
        reg = self.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    def __len__(self) -> int:
        return len(self.brokers)


ClusterImage.EMPTY = ClusterImage()
