"""The controller quorum's voter set in the metadata log (issue 26, KIP-853): the control records
Kafka writes for it, ``KRaftVersionRecord`` (``kraft.version``) and ``VotersRecord`` (the whole
voter set after a change: id, directory id, endpoints, supported kraft.version range).

In Kafka they are control records in the Raft log; in kraftlog a committed voter change (or the
upgrade to kraft.version 1) is a Raft entry of its own (`quorum.raft._membership`), and applying it
also appends these records to the metadata log, at the next offsets, with the entry's epoch and
the time it was proposed: ``kraftlog metadata dump`` shows every change of the voter set where it
happened, among the other records.

They change no metadata state: `MetadataDelta` replays them as no-ops, the ZooKeeper-style tree
leaves them out, and the Spark fold skips them the same way (its views and the controller's stay
equal). A controller's snapshot starts with them (`QuorumControlState`, Kafka's snapshot header
control records): the voter set as of the snapshot's offset, so a node restored from a snapshot
whose log prefix is gone still knows who votes. Their type ids, ``1000 +`` Kafka's ``ControlRecordType`` (5
``KRAFT_VERSION``, 6 ``KRAFT_VOTERS``), stay clear of the metadata record ids.

Importing this module registers both types in `RECORD_TYPES` (the package imports it first).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from kraftlog.metadata_log._records import RECORD_TYPES, MetadataRecord, _read_fields

__all__ = [
    "CONTROL_RECORD_TYPE_IDS",
    "KRaftVersionRecord",
    "QuorumControlState",
    "Voter",
    "VoterEndpoint",
    "VotersRecord",
]

_CONTROL_BASE: Final = 1000


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    """One listener of a voter (Kafka's ``VotersRecord.Endpoint``)."""

    name: str
    host: str
    port: int

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "port": self.port}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> VoterEndpoint:
        return cls(**_read_fields(cls, d))


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter of the set (Kafka's ``VotersRecord.Voter``): its directory id is Kafka's text form."""

    voter_id: int
    voter_directory_id: str
    endpoints: tuple[VoterEndpoint, ...]
    kraft_version_min: int = 0
    kraft_version_max: int = 1

    def to_wire(self) -> dict[str, Any]:
        return {
            "voter_id": self.voter_id,
            "voter_directory_id": self.voter_directory_id,
            "endpoints": [e.to_wire() for e in self.endpoints],
            "kraft_version_min": self.kraft_version_min,
            "kraft_version_max": self.kraft_version_max,
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Voter:
        return cls(**_read_fields(cls, d))


@dataclass(frozen=True, slots=True)
class KRaftVersionRecord(MetadataRecord):
    """The quorum's kraft.version became ``kraft_version`` (written with the upgrade to 1)."""

    TYPE_ID: ClassVar[int] = _CONTROL_BASE + 5
    kraft_version: int


@dataclass(frozen=True, slots=True)
class VotersRecord(MetadataRecord):
    """The whole voter set after a committed voter change."""

    TYPE_ID: ClassVar[int] = _CONTROL_BASE + 6
    voters: tuple[Voter, ...]


@dataclass(frozen=True, slots=True)
class QuorumControlState:
    """The last ``KRaftVersionRecord`` and ``VotersRecord`` of a metadata log up to some offset: the
    quorum's kraft.version and voter set there (issue 26, KIP-853).

    Kafka writes both into the header batch of every snapshot
    (``RecordsSnapshotWriter.Builder.setKraftVersion/setVoterSet``), so the voter set survives the
    deletion of the log prefix that held the changes; `to_records` is what a controller's snapshot
    starts with. Observe records in log order (a snapshot's, then the entries after it).
    """

    kraft_version: KRaftVersionRecord | None = None
    voters: VotersRecord | None = None

    def observe(self, record: MetadataRecord) -> QuorumControlState:
        """This state after ``record`` (unchanged for any other record type)."""
        if isinstance(record, VotersRecord):
            return replace(self, voters=record)
        if isinstance(record, KRaftVersionRecord):
            return replace(self, kraft_version=record)
        return self

    @classmethod
    def of(cls, records: Iterable[MetadataRecord]) -> QuorumControlState:
        """The state after ``records`` (e.g. a snapshot's) from nothing."""
        state = cls()
        for record in records:
            state = state.observe(record)
        return state

    def to_records(self) -> list[MetadataRecord]:
        """The snapshot's control records: none for a static quorum (no voter set in the log), else
        ``KRaftVersionRecord`` then ``VotersRecord`` -- kraft.version 1 when no record said so (a
        quorum formatted dynamic never wrote one: its first voter set was formatted into it)."""
        if self.voters is None:
            return []
        version = self.kraft_version if self.kraft_version is not None else KRaftVersionRecord(kraft_version=1)
        return [version, self.voters]


CONTROL_RECORD_TYPE_IDS: Final = frozenset({KRaftVersionRecord.TYPE_ID, VotersRecord.TYPE_ID})

RECORD_TYPES.update({KRaftVersionRecord.TYPE_ID: KRaftVersionRecord, VotersRecord.TYPE_ID: VotersRecord})
