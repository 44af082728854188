"""Where the metadata came from: facts about the log entries behind the image that the image itself
does not keep (it must equal the replay of a snapshot, which has no per-record provenance).

`kraftlog metadata tree` shows them in the fields the ZooKeeper nodes had: the controller epoch
that last wrote a partition's state, a broker's registration time, and who became the active
controller when (``/controller``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftlog.metadata_log._records import (
    LogEntry,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnregisterBrokerRecord,
)


@dataclass
class MetadataProvenance:
    """Per partition, the epoch of the entry that last wrote its state; per broker, the time of the
    entry that registered it; the active controller: the ``leader_id``, epoch and time of the first
    `NoOpRecord` that names its writer in the newest epoch that has one (a new leader commits it
    before it decides anything). Records of a snapshot count as written at the snapshot's epoch and
    time (what happened before it is compacted away; a snapshot keeps no NoOpRecord, so the
    controller is known again from the next epoch's).

    Observe entries in log order, after the image accepted them (a refused entry changes nothing).
    """

    partition_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    broker_registered_ms: dict[int, int] = field(default_factory=dict)
    #: (controller id, its epoch, the time it committed its first entry of that epoch), or None
    controller: tuple[int, int, int] | None = None

    @classmethod
    def from_snapshot(cls, records: Iterable[MetadataRecord], epoch: int, timestamp_ms: int) -> MetadataProvenance:
        provenance = cls()
        for record in records:
            provenance._observe(record, epoch, timestamp_ms)
        return provenance

    def observe(self, entry: LogEntry) -> None:
        self._observe(entry.record, entry.epoch, entry.timestamp_ms)

    def _observe(self, record: MetadataRecord, epoch: int, timestamp_ms: int) -> None:
        if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
            self.partition_epochs[(record.topic_id, record.partition_id)] = epoch
        elif isinstance(record, RemoveTopicRecord):
            for key in [k for k in self.partition_epochs if k[0] == record.topic_id]:
                del self.partition_epochs[key]
        elif isinstance(record, RegisterBrokerRecord):
            self.broker_registered_ms[record.broker_id] = timestamp_ms
        elif isinstance(record, UnregisterBrokerRecord):
            self.broker_registered_ms.pop(record.broker_id, None)
        elif isinstance(record, NoOpRecord) and record.leader_id >= 0:
            if self.controller is None or epoch > self.controller[1]:
                self.controller = (record.leader_id, epoch, timestamp_ms)
