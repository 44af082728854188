"""Values of the share-partition core (KIP-932): record states, acknowledgement types, the
configuration a share partition runs with, and what its calls return.

The numbers are Kafka's: a record state's id is what a state batch carries to and from the share
coordinator (``DeliveryState``: 0 Available, 2 Acknowledged, 4 Archived; 1 Acquired only in
memory), an acknowledgement type's id is what ShareFetch/ShareAcknowledge carry (0 GAP, 1 ACCEPT,
2 RELEASE, 3 REJECT, 4 RENEW from KIP-1222).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "RecordState",
    "AcknowledgeType",
    "AcquireMode",
    "ArchiveReason",
    "AutoOffsetReset",
    "SharePartitionConfig",
    "StateBatch",
    "AcquiredRecords",
    "ArchivedRecord",
    "AcknowledgementBatch",
    "AcquireResult",
    "ChangeResult",
    "parse_auto_offset_reset",
]


class RecordState(enum.IntEnum):
    """A record's state in a share partition (Kafka's ``RecordState`` ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """Acknowledged and archived records are never delivered again."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(enum.IntEnum):
    """How a consumer acknowledges an offset (Kafka's ``AcknowledgeType`` ids; GAP marks an offset
    with no record to deliver, such as a control record)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquireMode(enum.Enum):
    """KIP-1206's ``ShareAcquireMode``: ``batch_optimized`` acquires whole fetched batches until at
    least ``max_records`` are acquired (the last batch may overshoot); ``record_limit`` acquires at
    most ``max_records`` records, splitting a batch where it has to."""

    BATCH_OPTIMIZED = "batch_optimized"
    RECORD_LIMIT = "record_limit"


class ArchiveReason(enum.Enum):
    """Why a record was archived, for the records reported to the caller (dead-letter topics)."""

    REJECTED = "REJECT"
    DELIVERY_LIMIT = "DELIVERY_COUNT_EXCEEDED"


class AutoOffsetReset(NamedTuple):
    """``share.auto.offset.reset``: ``latest`` (Kafka's default), ``earliest``, or
    ``by_duration:<ISO-8601 duration>`` (``duration_ms`` set)."""

    kind: str
    duration_ms: int = 0


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,3})?)S)?)?$", re.IGNORECASE
)


def parse_auto_offset_reset(value: str) -> AutoOffsetReset:
    """Kafka's ``share.auto.offset.reset`` value; ValueError naming the value when it is not one.
    The duration is Java's ``Duration.parse`` form limited to days, hours, minutes and seconds
    (``P1DT2H``, ``PT30M``, ``PT1.5S``), as Kafka's validator accepts, and must not be negative."""
    text = value.strip().lower()
    if text in ("latest", "earliest"):
        return AutoOffsetReset(text)
    prefix = "by_duration:"
    if text.startswith(prefix):
        match = _DURATION.match(value.strip()[len(prefix) :])
        if match is not None and match.group(0) not in ("P", "PT", "p", "pt"):
            parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
            ms = ((parts["d"] * 24 + parts["h"]) * 60 + parts["m"]) * 60_000 + parts["s"] * 1000
            return AutoOffsetReset("by_duration", int(round(ms)))
    raise ValueError(f"share.auto.offset.reset={value!r}: expected latest, earliest or by_duration:<ISO-8601 duration>")


@dataclass(frozen=True)
class SharePartitionConfig:
    """What one share partition runs with (Kafka's broker and group config defaults).

    ``record_lock_duration_ms``: ``group.share.record.lock.duration.ms`` (how long an acquired
    record stays with its consumer); ``delivery_count_limit``: ``group.share.delivery.count.limit``
    (a record delivered that many times is archived instead of being made available again);
    ``max_record_locks``: ``group.share.partition.max.record.locks`` (records in flight between
    the start and the end offset); ``auto_offset_reset``: ``share.auto.offset.reset``;
    ``read_committed``: ``share.isolation.level`` is ``read_committed``."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    auto_offset_reset: AutoOffsetReset = AutoOffsetReset("latest")
    read_committed: bool = False

    def __post_init__(self) -> None:
        if self.record_lock_duration_ms <= 0:
            raise ValueError(f"group.share.record.lock.duration.ms={self.record_lock_duration_ms}: must be positive")
        if self.delivery_count_limit < 1:
            raise ValueError(f"group.share.delivery.count.limit={self.delivery_count_limit}: must be at least 1")
        if self.max_record_locks < 1:
            raise ValueError(f"group.share.partition.max.record.locks={self.max_record_locks}: must be at least 1")


class StateBatch(NamedTuple):
    """A run of offsets sharing one state and delivery count, as the share coordinator stores them
    (Kafka's ``PersisterStateBatch``; ``last_offset`` inclusive; ``delivery_state`` a
    `RecordState` id)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class AcquiredRecords(NamedTuple):
    """A run of offsets acquired by one member in one call, all with the same delivery count
    (Kafka's ``AcquiredRecords``; ``last_offset`` inclusive)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class ArchivedRecord(NamedTuple):
    """A record archived because it was rejected or reached the delivery limit: the caller writes it
    to the group's dead-letter topic. Each offset is reported once, by the call that archived it."""

    offset: int
    delivery_count: int
    reason: ArchiveReason


class AcknowledgementBatch(NamedTuple):
    """One acknowledgement range of ShareFetch/ShareAcknowledge: ``types`` holds one
    `AcknowledgeType` id for the whole range or one per offset (Kafka's
    ``AcknowledgementBatch``; ``last_offset`` inclusive)."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True)
class AcquireResult:
    """What `SharePartition.acquire` did: the runs handed to the member; how many records of
    aborted transactions it archived under read_committed (never delivered, so not reported);
    records it archived because their delivery count was already at the limit (a limit lowered
    since they were delivered), reported once as `ChangeResult.archived` is."""

    acquired: tuple[AcquiredRecords, ...]
    archived_aborted: int = 0
    archived: tuple[ArchivedRecord, ...] = ()

    @property
    def count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.acquired)


@dataclass(frozen=True)
class ChangeResult:
    """What an acknowledgement, a release or a lock expiry did: records archived by REJECT or by
    the delivery limit (to report once), and whether the start offset moved (the caller then
    writes the state to the share coordinator)."""

    archived: tuple[ArchivedRecord, ...] = ()
    start_offset_moved: bool = False
    changed: bool = False
