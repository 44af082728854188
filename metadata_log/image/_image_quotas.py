"""The client quota part of the metadata image (KIP-546; Kafka's ClientQuotasImage / ClientQuotasDelta).

Quotas live in the metadata log as ``ClientQuotaRecord``s: each sets or removes one key of one
entity. An entity is a set of ``(entity_type, entity_name)`` pairs (types ``user``, ``client-id``,
``ip``), a name of None being that type's default (``<default>``). Every broker enforces from its
own image, with no extra call.

Rules kept here, once, for the controller (`validate_alteration`), the image (`describe`) and the
brokers (`resolve`):

- keys and their types are Kafka's QuotaConfigs: ``producer_byte_rate`` and ``consumer_byte_rate``
  (whole bytes per second), ``request_percentage`` and ``controller_mutation_rate`` (doubles) for
  user and client-id entities; ``connection_creation_rate`` for ip entities, which kraftlog
  refuses (INVALID_REQUEST, see docs/quotas.md);
- the resolution order of Kafka's DefaultQuotaCallback (`resolve`);
- DescribeClientQuotas' match semantics (exact, default, any; strict), as ClientQuotasImage.describe.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

from kraftlog.common import errors as kerr
from kraftlog.metadata_log._records import ClientQuotaRecord, QuotaEntity
from kraftlog.metadata_log.image._image_base import _EMPTY_MAP, MetadataReplayError, _thawed

__all__ = [
    "CLIENT_ID",
    "IP",
    "USER",
    "MATCH_ANY",
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "QUOTA_KEYS",
    "ClientQuotasDelta",
    "ClientQuotasImage",
    "QuotaResolution",
    "make_entity",
    "next_quota_values",
    "quota_sort_key",
    "quota_to_records",
    "validate_alteration",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = frozenset({USER, CLIENT_ID, IP})

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: quota key -> whether its value must be a whole number (Kafka's LONG keys); user and client-id
#: entities take all four (Kafka's QuotaConfigs.userConfigs / clientConfigs)
QUOTA_KEYS: Mapping[str, bool] = MappingProxyType(
    {
        PRODUCER_BYTE_RATE: True,
        CONSUMER_BYTE_RATE: True,
        REQUEST_PERCENTAGE: False,
        CONTROLLER_MUTATION_RATE: False,
    }
)

#: DescribeClientQuotas component match types
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2  # Kafka's MATCH_TYPE_SPECIFIED: any name (not the default)


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical (sorted) form of an entity; `InvalidRequestError` as Kafka's controller
    answers it for an empty entity, a type named twice, an unknown type or an empty name."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise kerr.InvalidRequestError(f"Invalid empty client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in ENTITY_TYPES:
            raise kerr.InvalidRequestError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise kerr.InvalidRequestError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen:
        raise kerr.InvalidRequestError("Invalid empty client quota entity")
    return tuple(sorted(seen.items()))


def _entity_text(entity: QuotaEntity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def validate_alteration(entity: QuotaEntity, key: str, value: float | None) -> None:
    """Refuse (`InvalidRequestError`, Kafka's messages) a set (``value`` not None) or removal of
    ``key`` on ``entity``: only user, client-id, or user and client-id entities are served; a
    key must be one of `QUOTA_KEYS` and a LONG key's value a whole number. Values are accepted
    as positive only (a quota of 0 or less would shut a client out entirely; Kafka's QuotaConfigs
    validators say the same for the byte rates)."""
    types = {t for t, _n in entity}
    if IP in types:
        if types != {IP}:
            raise kerr.InvalidRequestError("Invalid empty client quota entity")
        raise kerr.InvalidRequestError(
            f"ip quota entities ({CONNECTION_CREATION_RATE}) are not supported by kraftlog; "
            "limit connections with max.connections.per.ip and max.connections.per.ip.overrides"
        )
    long_value = QUOTA_KEYS.get(key)
    if long_value is None:
        raise kerr.InvalidRequestError(f"Invalid configuration key {key}")
    if value is None:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise kerr.InvalidRequestError(f"Configuration {key} must be a number")
    if long_value and abs(math.floor(value + 1e-6) - value) > 1e-6:
        raise kerr.InvalidRequestError(f"Configuration {key} must be a Long value")
    if value <= 0:
        raise kerr.InvalidRequestError(f"Configuration {key} must be positive, got {value}")


def _replay_entity(record: ClientQuotaRecord) -> QuotaEntity:
    try:
        entity = make_entity(record.entity)
    except (kerr.KafkaError, TypeError, ValueError) as err:
        raise MetadataReplayError(f"ClientQuotaRecord: bad entity {record.entity!r:.80}: {err}") from err
    if type(record.key) is not str or not record.key:
        raise MetadataReplayError(f"ClientQuotaRecord of {_entity_text(entity)}: key {record.key!r:.40} is no name")
    if not record.remove and (
        type(record.value) not in (int, float) or not math.isfinite(record.value)  # noqa: E721
    ):
        raise MetadataReplayError(f"ClientQuotaRecord of {_entity_text(entity)}: value {record.value!r:.40}")
    return entity


@dataclass(frozen=True, slots=True)
class QuotaResolution:
    """Which entity's quota applies to a (user, client-id) for one key, and the metric tags the
    rate is tracked under (Kafka's quotaMetricTags): clients sharing a user-level quota share one
    rate, ``""`` standing for a tag the quota does not split by."""

    quota: float
    entity: QuotaEntity
    user_tag: str
    client_id_tag: str


@dataclass(frozen=True, slots=True)
class ClientQuotasImage:
    """Every client quota entity with its keys (the ``/config/users`` and ``/config/clients``
    quota subtrees of ZooKeeper mode). An entity with no key left is absent."""

    entities: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY_MAP)
    #: the quota keys some entity sets (derived): a request of a type no entity limits is not
    #: measured at all, as Kafka's quota managers skip recording while no quota of theirs is set
    keys: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    #: how many entities set each key (derived): what lets `ClientQuotasDelta.apply` keep ``keys``
    #: right from the changed entities alone
    key_counts: Mapping[str, int] = field(init=False, repr=False, compare=False, default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ClientQuotasImage]

    def __post_init__(self) -> None:
        entities = self.entities
        if not isinstance(entities, MappingProxyType):
            entities = MappingProxyType({e: MappingProxyType(dict(v)) for e, v in entities.items() if v})
        object.__setattr__(self, "entities", entities)
        counts: dict[str, int] = {}
        for values in entities.values():
            for k in values:
                counts[k] = counts.get(k, 0) + 1
        self._derive(counts)

    def _derive(self, key_counts: dict[str, int]) -> None:
        object.__setattr__(self, "key_counts", MappingProxyType(key_counts))
        object.__setattr__(self, "keys", frozenset(k for k, n in key_counts.items() if n > 0))

    @classmethod
    def _of(
        cls, entities: MappingProxyType[QuotaEntity, Mapping[str, float]], key_counts: dict[str, int]
    ) -> ClientQuotasImage:
        """An image of ``entities`` (already frozen) whose key counts the caller kept: no walk over
        every entity's keys (a metadata log of a million quota records applies its batches in
        one dict copy each)."""
        image = object.__new__(cls)
        object.__setattr__(image, "entities", entities)
        image._derive(key_counts)
        return image

    def __len__(self) -> int:
        return len(self.entities)

    def quota(self, entity: QuotaEntity, key: str) -> float | None:
        return self.entities.get(entity, _EMPTY_MAP).get(key)

    def resolve(self, user: str, client_id: str, key: str) -> QuotaResolution | None:
        """The quota of ``key`` for a client, in the order of Kafka's DefaultQuotaCallback: user
        and client-id, user and default client-id, user, default user and client-id, default user
        and default client-id, default user, client-id, default client-id. None: no quota."""
        if not self.entities:
            return None
        order: tuple[tuple[QuotaEntity, str, str], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), user, client_id),
            (((CLIENT_ID, None), (USER, user)), user, client_id),
            (((USER, user),), user, ""),
            (((CLIENT_ID, client_id), (USER, None)), user, client_id),
            (((CLIENT_ID, None), (USER, None)), user, client_id),
            (((USER, None),), user, ""),
            (((CLIENT_ID, client_id),), "", client_id),
            (((CLIENT_ID, None),), "", client_id),
        )
        for entity, user_tag, client_tag in order:
            value = self.quota(entity, key)
            if value is not None:
                return QuotaResolution(value, entity, user_tag, client_tag)
        return None

    def describe(
        self, components: Iterable[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
        """The entities a DescribeClientQuotas filter matches, sorted; each component is
        ``(entity_type, match_type, match)``. Kafka's rules: an exact component keeps entities
        with that name (MATCH_DEFAULT: the default), MATCH_ANY those with the type whatever the
        name (as Kafka's image does for MATCH_TYPE_SPECIFIED, the default included); no component
        and not ``strict``: every entity; with ``strict`` only entities with no other type.
        Errors: `InvalidRequestError` for a malformed filter, `UnsupportedVersionError` for an
        unknown entity type."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise kerr.InvalidRequestError("Invalid empty entity type.")
            if entity_type in exact or entity_type in typed:
                raise kerr.InvalidRequestError(f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in ENTITY_TYPES:
                raise kerr.UnsupportedVersionError(f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise kerr.InvalidRequestError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise kerr.InvalidRequestError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                exact[entity_type] = None
            elif match_type == MATCH_ANY:
                if match is not None:
                    raise kerr.InvalidRequestError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                typed.add(entity_type)
            else:
                raise kerr.InvalidRequestError(f"Unknown match type {match_type}")
        named = set(exact) | typed
        if IP in named and named & {USER, CLIENT_ID}:
            raise kerr.InvalidRequestError(
                "Invalid entity filter component combination. IP filter component should not be used "
                "with user or clientId filter component."
            )
        found = []
        for entity, values in self.entities.items():
            as_map = dict(entity)
            if not named:
                if strict:
                    continue
            elif any(t not in as_map or as_map[t] != n for t, n in exact.items()) or any(
                t not in as_map for t in typed
            ):
                continue
            elif strict and len(as_map) != len(named):
                continue
            found.append((entity, values))
        found.sort(key=lambda item: quota_sort_key(item[0]))
        return found


ClientQuotasImage.EMPTY = ClientQuotasImage()


def quota_sort_key(entity: QuotaEntity) -> tuple[tuple[str, str], ...]:
    """The order of entities in snapshots and answers: by type, then the default before names."""
    return tuple((t, "" if n is None else "\x01" + n) for t, n in entity)


def next_quota_values(current: Mapping[str, float], record: ClientQuotaRecord) -> dict[str, float]:
    """One entity's keys after ``record`` (empty: the entity is gone); `MetadataReplayError` for
    a record `ClientQuotasDelta` refuses. The Spark fold replays with this function too."""
    _replay_entity(record)
    values = dict(current)
    if record.remove:
        values.pop(record.key, None)
    else:
        values[record.key] = float(record.value)
    return values


def quota_to_records(image: ClientQuotasImage) -> list[ClientQuotaRecord]:
    """The records that recreate ``image`` (a snapshot's part), by entity then key."""
    out = []
    for entity in sorted(image.entities, key=quota_sort_key):
        values = image.entities[entity]
        for key in sorted(values):
            out.append(ClientQuotaRecord(entity=entity, key=key, value=values[key], remove=False))
    return out


class ClientQuotasDelta:
    """The quota changes of one `MetadataDelta`: entity -> its full new key map (empty: gone)."""

    __slots__ = ("_image", "_changes")

    def __init__(self, image: ClientQuotasImage) -> None:
        self._image = image
        self._changes: dict[QuotaEntity, dict[str, float]] = {}

    @property
    def changed_entities(self) -> set[QuotaEntity]:
        return set(self._changes)

    def replay(self, record: ClientQuotaRecord) -> None:
        """Apply one record; on `MetadataReplayError` nothing changed. Removing a key that is not
        set changes nothing (Kafka's replay ignores it too)."""
        entity = _replay_entity(record)
        changed = self._changes.get(entity)
        current: Mapping[str, float] = self._image.entities.get(entity, _EMPTY_MAP) if changed is None else changed
        if changed is None and record.remove and record.key not in current:
            return
        self._changes[entity] = next_quota_values(current, record)

    def apply(self) -> ClientQuotasImage:
        """The new image. Its entity map is a copy of the old one's dict (`_thawed`: why not
        ``dict(proxy)``); its key counts change by the changed entities only."""
        if not self._changes:
            return self._image
        old = self._image.entities
        entities = _thawed(old)
        counts = dict(self._image.key_counts)
        for entity, values in self._changes.items():
            for k in old.get(entity, _EMPTY_MAP):
                counts[k] -= 1
            for k in values:
                counts[k] = counts.get(k, 0) + 1
            if values:
                entities[entity] = MappingProxyType(dict(values))
            else:
                entities.pop(entity, None)
        return ClientQuotasImage._of(MappingProxyType(entities), {k: n for k, n in counts.items() if n > 0})
