"""The controller quorum's voter set in the metadata log (issue 26, KIP-853): the control records
Kafka writes for it, ``KRaftVersionRecord`` (``kraft.version``) and ``VotersRecord`` (the whole
voter set after a change: id, directory id, endpoints, supported kraft.version range).

In Kafka they are control records in the Raft log; in kraftlog a committed voter change (or the
upgrade to kraft.version 1) is a Raft entry of its own (`quorum.raft._membership`), and applying it
also appends these records to the metadata log, at the next offsets, with the entry's epoch and
the time it was proposed: ``kraftlog metadata dump`` shows every change of the voter set where it
happened, among the other records.

They change no metadata state: `MetadataDelta` replays them as no-ops, the ZooKeeper-style tree
and snapshots leave them out, and the Spark fold skips them the same way (its views and the
controller's stay equal). Their type ids, ``1000 +`` Kafka's ``ControlRecordType`` (5
``KRAFT_VERSION``, 6 ``KRAFT_VOTERS``), stay clear of the metadata record ids.

Importing this module registers both types in `RECORD_TYPES` (the package imports it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from kraftlog.metadata_log._records import RECORD_TYPES, MetadataRecord, _read_fields

__all__ = ["CONTROL_RECORD_TYPE_IDS", "KRaftVersionRecord", "Voter", "VoterEndpoint", "VotersRecord"]

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


CONTROL_RECORD_TYPE_IDS: Final = frozenset({KRaftVersionRecord.TYPE_ID, VotersRecord.TYPE_ID})

RECORD_TYPES.update({KRaftVersionRecord.TYPE_ID: KRaftVersionRecord, VotersRecord.TYPE_ID: VotersRecord})
