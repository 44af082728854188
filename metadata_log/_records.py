"""Metadata records: the entries of the metadata log that replaces the ZooKeeper tree.

Each record is a frozen dataclass with a type id (KRaft's ``apiKey`` numbers for the same record) and
a version. On disk and on the wire a record is a msgpack map ``{"type": id, "version": v, ...fields}``;
a log entry wraps it with ``offset`` (dense from 0), ``epoch`` (the controller epoch that wrote it)
and ``timestamp_ms``.

Type ids are Kafka's apiKeys for the same record wherever ours have the same meaning (ACL, SCRAM and
quota records: 18, 19, 11, 22, 14 as in Kafka's ``metadata/src/main/resources/common/metadata``).

Decoding is strict: an unknown type id, an unknown version, or a missing field raises
`MetadataRecordError`. Fields a newer writer added may be ignored only when they are listed as
optional in the record (its dataclass default), so a reader never silently drops state.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from kraftlog.common import errors as kerr

__all__ = [
    "MetadataRecordError",
    "MetadataRecord",
    "LogEntry",
    "BrokerEndpoint",
    "RegisterBrokerRecord",
    "UnregisterBrokerRecord",
    "FenceBrokerRecord",
    "UnfenceBrokerRecord",
    "BrokerRegistrationChangeRecord",
    "TopicRecord",
    "PartitionRecord",
    "PartitionChangeRecord",
    "RemoveTopicRecord",
    "ConfigRecord",
    "ProducerIdsRecord",
    "FeatureLevelRecord",
    "NoOpRecord",
    "UserScramCredentialRecord",
    "AccessControlEntryRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveUserScramCredentialRecord",
    "ClientQuotaRecord",
    "QuotaEntity",
    "RECORD_TYPES",
    "encode_record",
    "decode_record",
    "encode_entry",
    "decode_entry",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "ConfigResourceType",
    "FencingChange",
    "LeaderRecoveryState",
]

NO_LEADER = -1
NO_LEADER_CHANGE = -2


class MetadataRecordError(kerr.CorruptMessageError, ValueError):
    """A metadata record or entry that cannot be decoded (unknown type, version or field)."""


class ConfigResourceType:
    """Kafka's ConfigResource.Type ids."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # a group's own configs (KIP-848: consumer.session.timeout.ms, ...)


class FencingChange:
    """``BrokerRegistrationChangeRecord.fenced`` values, as KRaft's BrokerRegistrationFencingChange."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class LeaderRecoveryState:
    RECOVERED = 0
    RECOVERING = 1
    NO_CHANGE = -1


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "port": self.port, "security_protocol": self.security_protocol}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> BrokerEndpoint:
        return cls(**_read_fields(cls, d))


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """Base of every record type; subclasses set ``TYPE_ID``, ``VERSION`` and their fields."""

    TYPE_ID: ClassVar[int] = -1
    VERSION: ClassVar[int] = 0
    #: fields a tool must not print (secrets derived from a password); the log keeps them
    SENSITIVE_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE_ID, "version": self.VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = [v.to_wire() if hasattr(v, "to_wire") else v for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> MetadataRecord:
        if d.get("version", 0) > cls.VERSION:
            raise MetadataRecordError(
                f"{cls.__name__} version {d.get('version')} is newer than supported version {cls.VERSION}"
            )
        return cls(**_read_fields(cls, d))


def _drop_at_default(out: dict[str, Any], names: tuple[str, ...], default: Any) -> dict[str, Any]:
    """``out`` without the optional fields ``names`` that hold ``default`` (a tagged field at its
    default is not written, so adding one leaves the encoding of every existing record unchanged)."""
    for name in names:
        value = out.get(name)
        if value == default or (default == [] and value == ()):
            del out[name]
    return out


#: one field's reader: the wire value in, the field's value out, `MetadataRecordError` if the value
#: is not of the field's type (a None where an int belongs would reach the image and fail later)
_FieldReader = Callable[[Any], Any]

_WIRE_FIELDS: dict[type, tuple[tuple[str, _FieldReader, bool], ...]] = {}


def _read_fields(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments of ``cls`` read from the wire map ``d``: each present field through
    its reader; a missing field with no default raises `MetadataRecordError` naming it."""
    kwargs: dict[str, Any] = {}
    for name, read, required in _wire_fields(cls):
        if name in d:
            kwargs[name] = read(d[name])
        elif required:
            raise MetadataRecordError(f"{cls.__name__} is missing field {name!r}")
    return kwargs


def _wire_fields(cls: type) -> tuple[tuple[str, _FieldReader, bool], ...]:
    """``(name, reader, required)`` per field of a record class, built once from its type hints."""
    fields = _WIRE_FIELDS.get(cls)
    if fields is None:
        hints = typing.get_type_hints(cls)
        fields = tuple(
            (
                f.name,
                _reader_for(hints[f.name], f"{cls.__name__}.{f.name}"),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
        _WIRE_FIELDS[cls] = fields
    return fields


def _reader_for(hint: Any, where: str) -> _FieldReader:
    """The reader of one type hint; the hints records use are scalars, ``X | None`` and
    ``tuple[X, ...]`` (msgpack gives a list) of those or of a nested part with ``from_wire``
    (`BrokerEndpoint`, a voter of a ``VotersRecord``)."""

    def refuse(value: Any) -> typing.NoReturn:
        raise MetadataRecordError(f"{where}: {type(value).__name__} {value!r:.60} is not a {hint}")

    if typing.get_origin(hint) is types.UnionType:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = _reader_for(options[0], where)
        return lambda v: None if v is None else inner(v)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _reader_for(args[0], where)
        else:  # a fixed shape, such as a quota entity's (entity_type, entity_name)
            items = [_reader_for(a, where) for a in args]

            def item_tuple(v: Any) -> Any:
                if not isinstance(v, (list, tuple)) or len(v) != len(items):
                    refuse(v)
                return tuple(read(x) for read, x in zip(items, v, strict=True))

            return item_tuple

        def each(v: Any) -> Any:
            if not isinstance(v, (list, tuple)):
                refuse(v)
            return tuple(item(x) for x in v)

        return each
    if isinstance(hint, type) and hasattr(hint, "from_wire"):  # a nested part: BrokerEndpoint, a voter
        nested = hint
        return lambda v: nested.from_wire(v) if isinstance(v, dict) else refuse(v)
    if hint is bool:
        return lambda v: v if isinstance(v, bool) else refuse(v)
    if hint is int:
        return lambda v: v if isinstance(v, int) and not isinstance(v, bool) else refuse(v)
    if hint is float:
        return lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else refuse(v)
    if hint in (str, bytes):
        return lambda v: v if isinstance(v, hint) else refuse(v)
    raise TypeError(f"{where}: no wire reader for {hint!r}")


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 0
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()
    #: ``(name, min_supported, max_supported)`` per feature the broker supports (Kafka's
    #: RegisterBrokerRecord.Features); the controller refuses to finalize a level outside any
    #: registered broker's range. Left off the wire when empty (an old registration has none).
    features: tuple[tuple[str, int, int], ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return _drop_at_default(MetadataRecord.to_wire(self), ("features",), [])


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 2
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 3
    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    #: KIP-966, tagged fields in Kafka's PartitionRecord v2: left off the wire when empty, so a
    #: record without ELR encodes as before and older readers ignore them
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return _drop_at_default(MetadataRecord.to_wire(self), ("eligible_leader_replicas", "last_known_elr"), [])


@dataclass(frozen=True, slots=True)
class ConfigRecord(MetadataRecord):
    """Set (``value`` not None) or delete (``value`` None) one config of one resource."""

    TYPE_ID: ClassVar[int] = 4
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord(MetadataRecord):
    """A partial update of a partition: a field left at its default is unchanged.

    ``leader`` is ``NO_LEADER_CHANGE`` (-2) when unchanged; setting it (even to ``NO_LEADER``)
    bumps the leader epoch. Every change bumps the partition epoch.
    """

    TYPE_ID: ClassVar[int] = 5
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = LeaderRecoveryState.NO_CHANGE
    #: KIP-966 (tagged in Kafka's PartitionChangeRecord v2): None leaves the ELR / last known ELR
    #: unchanged and is left off the wire
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        return _drop_at_default(MetadataRecord.to_wire(self), ("eligible_leader_replicas", "last_known_elr"), None)


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 8
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 9
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 10
    topic_id: str


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord(MetadataRecord):
    """The next producer id block starts at ``next_producer_id``."""

    TYPE_ID: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord(MetadataRecord):
    """Create or replace the SCRAM credential of one user for one mechanism (``/config/users/[u]``).

    ``mechanism`` is the `kraftlog.common.ScramMechanism` type byte (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
    The record holds the salted, iterated keys of RFC 5802, never the password; whoever holds
    ``stored_key`` and ``server_key`` can impersonate the server to that user, so they are not
    printed (`SENSITIVE_FIELDS`) and the files holding them are mode 0600.
    """

    TYPE_ID: ClassVar[int] = 11
    SENSITIVE_FIELDS: ClassVar[frozenset[str]] = frozenset({"salt", "stored_key", "server_key"})
    name: str
    mechanism: int
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    TYPE_ID: ClassVar[int] = 17
    broker_id: int
    broker_epoch: int
    fenced: int = FencingChange.NONE
    in_controlled_shutdown: int = 0  # 1: the broker entered controlled shutdown


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord(MetadataRecord):
    """Create one ACL (``/kafka-acl/...`` in ZooKeeper mode); the codes are Kafka's (`kraftlog.common`
    ``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``) and ``id`` is a UUID
    the active controller chose, the handle a later `RemoveAccessControlEntryRecord` names."""

    TYPE_ID: ClassVar[int] = 18
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord(MetadataRecord):
    """Delete the ACL created under ``id``."""

    TYPE_ID: ClassVar[int] = 19
    id: str


@dataclass(frozen=True, slots=True)
class NoOpRecord(MetadataRecord):
    """Committed first in every new controller epoch, so a new leader knows its log is current.

    ``leader_id`` names the controller that wrote it (-1: not said, as in logs written before it
    existed, and in the barriers a leader commits later in its epoch may say it again). The first one
    of an epoch plays the part of Kafka's LeaderChangeMessage: the log itself says who became the
    active controller and when, which ``kraftlog metadata tree`` shows as ``/controller`` (see
    `MetadataProvenance`). An optional field, as a tagged field is in Kafka's records: readers that
    do not know it ignore it, so the version stays 0. It is not compared: every NoOp is the same
    no-op to the image, who wrote it is provenance."""

    TYPE_ID: ClassVar[int] = 20
    leader_id: int = field(default=-1, compare=False)

    def to_wire(self) -> dict[str, Any]:
        out = MetadataRecord.to_wire(self)
        if self.leader_id < 0:  # as a tagged field at its default: not written
            del out["leader_id"]
        return out


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord(MetadataRecord):
    """Delete the SCRAM credential of one user for one mechanism."""

    TYPE_ID: ClassVar[int] = 22
    name: str
    mechanism: int


#: a client quota entity: ``(entity_type, entity_name)`` pairs sorted by type, a name of None
#: being the type's default (``<default>`` in the CLI), as Kafka's ClientQuotaEntity
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord(MetadataRecord):
    """Set (``remove`` False) or remove one quota ``key`` of one client quota entity
    (``/config/users/[u]``, ``/config/clients/[c]``, ``/config/users/[u]/clients/[c]`` in
    ZooKeeper mode); Kafka's QuotaRecord (apiKey 14, formerly ClientQuotaRecord).

    ``entity`` holds ``(entity_type, entity_name)`` pairs, entity_name None for the default; on
    the wire it is a list of ``{"entity_type", "entity_name"}`` maps as in Kafka's schema.
    """

    TYPE_ID: ClassVar[int] = 14
    entity: QuotaEntity
    key: str
    value: float = 0.0
    remove: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": self.TYPE_ID,
            "version": self.VERSION,
            "entity": [{"entity_type": t, "entity_name": n} for t, n in self.entity],
            "key": self.key,
            "value": self.value,
            "remove": self.remove,
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> MetadataRecord:
        if d.get("version", 0) > cls.VERSION:
            raise MetadataRecordError(
                f"{cls.__name__} version {d.get('version')} is newer than supported version {cls.VERSION}"
            )
        for name in ("entity", "key"):
            if name not in d:
                raise MetadataRecordError(f"{cls.__name__} is missing field {name!r}")
        if not isinstance(d["entity"], list) or not all(isinstance(e, dict) for e in d["entity"]):
            raise MetadataRecordError(f"{cls.__name__}: entity is not a list of maps")
        read = {name: reader for name, reader, _ in _wire_fields(cls)}
        entity = read["entity"]([(e["entity_type"], e.get("entity_name")) for e in d["entity"]])
        return cls(
            entity=tuple(sorted(entity)),
            key=read["key"](d["key"]),
            value=read["value"](d.get("value", 0.0)),
            remove=read["remove"](d.get("remove", False)),
        )


RECORD_TYPES: dict[int, type[MetadataRecord]] = {
    cls.TYPE_ID: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        BrokerRegistrationChangeRecord,
        NoOpRecord,
        UserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        RemoveUserScramCredentialRecord,
        ClientQuotaRecord,
    )
}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One committed metadata log entry."""

    offset: int
    epoch: int
    timestamp_ms: int
    record: MetadataRecord = field(compare=True)

    def to_wire(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "epoch": self.epoch,
            "timestamp_ms": self.timestamp_ms,
            "record": self.record.to_wire(),
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> LogEntry:
        """Decode an entry map; anything malformed (a missing key, an offset that is no integer)
        raises `MetadataRecordError`, the record's own errors included."""
        try:
            offset, epoch, timestamp_ms = int(d["offset"]), int(d["epoch"]), int(d["timestamp_ms"])
            wire_record = d["record"]
        except _MALFORMED as err:
            raise MetadataRecordError(f"malformed metadata log entry: {err!r}") from err
        return cls(offset, epoch, timestamp_ms, record_from_wire(wire_record))


#: what a malformed map makes the field conversions raise: a missing key, a value of the wrong
#: type (``int([])``, an unhashable key), a wrong value (``int("x")``) or an infinite float
_MALFORMED = (KeyError, TypeError, ValueError, OverflowError)


def record_from_wire(d: Any) -> MetadataRecord:
    """Decode a record map; every malformed input raises `MetadataRecordError`."""
    if not isinstance(d, dict) or "type" not in d:
        raise MetadataRecordError(f"not a metadata record: {d!r:.80}")
    type_id = d["type"]
    try:
        cls = RECORD_TYPES.get(type_id)
    except TypeError:  # an unhashable type id (a list or map)
        cls = None
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {type_id!r:.80}")
    try:
        return cls.from_wire(d)
    except MetadataRecordError:
        raise
    except _MALFORMED as err:
        raise MetadataRecordError(f"malformed {cls.__name__}: {err!r:.200}") from err


def encode_record(record: MetadataRecord) -> bytes:
    packed: bytes = msgpack.packb(record.to_wire(), use_bin_type=True)
    return packed


def decode_record(data: bytes) -> MetadataRecord:
    try:
        d = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise MetadataRecordError(f"undecodable metadata record: {err}") from err
    return record_from_wire(d)


def encode_entry(entry: LogEntry) -> bytes:
    packed: bytes = msgpack.packb(entry.to_wire(), use_bin_type=True)
    return packed


def decode_entry(data: bytes) -> LogEntry:
    try:
        d = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as err:
        raise MetadataRecordError(f"undecodable metadata log entry: {err}") from err
    if not isinstance(d, dict):
        raise MetadataRecordError("metadata log entry is not a map")
    return LogEntry.from_wire(d)
