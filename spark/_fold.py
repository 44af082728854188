"""Executor side, second stage: each entity's records folded in log order up to the cut, with the
image's own transitions (`PartitionRegistration.merge`, `next_broker_registration`), into the
records of the snapshot.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from typing import Any

from kraftlog.common import AclBinding
from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    encode_record,
)
from kraftlog.metadata_log.image import (
    BrokerRegistration,
    MetadataReplayError,
    PartitionRegistration,
    ScramCredential,
    acl_to_record,
    apply_config,
    credential_to_record,
    feature_level,
    next_acl,
    next_broker_registration,
    next_producer_id,
    next_quota_values,
    next_scram_credential,
    quota_sort_key,
)
from kraftlog.spark._decode import (
    _ACL,
    _FENCE,
    _PARTITION,
    _REG_CHANGE,
    _REGISTER,
    _S_ACL,
    _S_BROKER,
    _S_CONFIG,
    _S_FEATURE,
    _S_PRODUCER_IDS,
    _S_QUOTA,
    _S_SCRAM,
    _S_TOPIC,
    _SCRAM,
    _TOPIC,
    _UNFENCE,
    _UNREGISTER,
    _Change,
    _err,
)


def _merge_values(items: Iterable[tuple[Any, list[Any]]]) -> dict[Any, list[Any]]:
    """Reduce side: the value lists of each key from every file, in one offset-sorted list."""
    merged: dict[Any, list[Any]] = {}
    for key, values in items:
        have = merged.get(key)
        if have is None:
            merged[key] = values
        else:
            have.extend(values)
    return merged


def _by_position(value: tuple[Any, ...]) -> int:
    position: int = value[0]
    return position


def _collect_summaries(items: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    for _key, summary in items:
        yield summary


def _fold_topics(cut: int, items: Iterable[tuple[Any, list[Any]]]) -> Iterator[dict[str, Any]]:
    """Per topic id: its incarnations up to the cut, and the TopicRecord of the live one."""
    lifecycle: dict[str, list[list[Any]]] = {}
    out: list[tuple[tuple[Any, ...], bytes]] = []
    errors: list[tuple[Any, ...]] = []
    for key, values in _merge_values(items).items():
        topic_id = key[1]
        values.sort(key=_by_position)
        incarnations: list[list[Any]] = []
        live = False
        for position, type_id, fields in values:
            if position > cut:
                break
            if type_id == _TOPIC:
                name = fields[0]
                if live:
                    errors.append(_err(position, "MetadataReplayError", f"topic id {topic_id} already exists"))
                    break
                incarnations.append([position, None, name])
                live = True
            else:  # RemoveTopicRecord
                if not live:
                    errors.append(
                        _err(position, "MetadataReplayError", f"cannot remove topic: unknown topic id {topic_id}")
                    )
                    break
                incarnations[-1][1] = position
                live = False
        if incarnations:
            lifecycle[topic_id] = incarnations
        if live:
            name = incarnations[-1][2]
            out.append(((_S_TOPIC, name, -1), encode_record(TopicRecord(name=name, topic_id=topic_id))))
    out.sort(key=lambda item: item[0])
    yield {"lifecycle": lifecycle, "records": out, "errors": errors}


def _fold_entities(
    cut: int, lifecycle_bc: Any, tombstones_bc: Any, items: Iterable[tuple[Any, list[Any]]]
) -> Iterator[dict[str, Any]]:
    lifecycle: dict[str, list[list[Any]]] = lifecycle_bc.value
    tombstones: dict[str, list[int]] = tombstones_bc.value
    out: list[tuple[tuple[Any, ...], bytes]] = []
    errors: list[tuple[Any, ...]] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        merged = _merge_values(items)
        for key, values in merged.items():
            values.sort(key=_by_position)
            kind = key[0]
            if kind == "p":
                _fold_partition(key, values, cut, lifecycle, out, errors)
            elif kind == "b":
                _fold_broker(key, values, cut, out, errors)
            elif kind == "c":
                _fold_config(key, values, cut, tombstones, out)
            elif kind == "i":
                _fold_producer_ids(values, cut, out, errors)
            elif kind == "f":
                _fold_feature(key, values, cut, out, errors)
            elif kind == "a":
                _fold_acl(key, values, cut, out, errors)
            elif kind == "s":
                _fold_scram(key, values, cut, out, errors)
            elif kind == "q":
                _fold_quota(values, cut, out, errors)
            else:  # pragma: no cover - keys are made by _key_of
                raise AssertionError(f"unexpected key {key!r}")
        merged.clear()
    finally:
        if gc_was_enabled:
            gc.enable()
    out.sort(key=lambda item: item[0])
    yield {"records": out, "errors": errors}


def _incarnation(incarnations: list[list[Any]], position: int) -> int | None:
    """Index of the incarnation of a topic id that is live at ``position`` (None: not live)."""
    for i in range(len(incarnations) - 1, -1, -1):
        created, removed, _name = incarnations[i]
        if created < position:
            return i if removed is None or position < removed else None
    return None


def _fold_partition(
    key: tuple[Any, ...],
    values: list[Any],
    cut: int,
    lifecycle: dict[str, list[list[Any]]],
    out: list[Any],
    errors: list[Any],
) -> None:
    _, topic_id, partition_id = key
    incarnations = lifecycle.get(topic_id, [])
    state: PartitionRegistration | None = None
    current: int | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        which = _incarnation(incarnations, position)
        is_create = type_id == _PARTITION
        if which is None:
            what = "create" if is_create else "change"
            errors.append(
                _err(
                    position,
                    "MetadataReplayError",
                    f"cannot {what} partition {partition_id}: unknown topic id {topic_id}",
                )
            )
            return
        if which != current:
            state, current = None, which
        try:
            if is_create:
                if partition_id < 0:
                    raise MetadataReplayError(f"negative partition id {partition_id}")
                reg = PartitionRegistration.from_record(PartitionRecord(*fields))
            else:
                if state is None:
                    raise MetadataReplayError(f"cannot change unknown partition {partition_id} of topic {topic_id}")
                reg = state.merge(_Change._make(fields))
            reg.validate()
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
        state = reg
    if state is None or current != len(incarnations) - 1 or incarnations[-1][1] is not None:
        return  # never written, or its topic was removed (and maybe re-created under a new id)
    name = incarnations[-1][2]
    out.append(((_S_TOPIC, name, partition_id), encode_record(state.to_record(topic_id, partition_id))))


_BROKER_RECORDS: dict[int, type[Any]] = {
    _REGISTER: RegisterBrokerRecord,
    _UNREGISTER: UnregisterBrokerRecord,
    _FENCE: FenceBrokerRecord,
    _UNFENCE: UnfenceBrokerRecord,
    _REG_CHANGE: BrokerRegistrationChangeRecord,
}


def _fold_broker(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    """One broker's records in log order, through the registration transitions `MetadataDelta`
    replays (`next_broker_registration`)."""
    reg: BrokerRegistration | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        try:
            reg = next_broker_registration(reg, _BROKER_RECORDS[type_id](*fields))
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if reg is not None:
        out.append(((_S_BROKER, key[1]), encode_record(reg.to_record())))


def _fold_config(
    key: tuple[Any, ...], values: list[Any], cut: int, tombstones: dict[str, list[int]], out: list[Any]
) -> None:
    _, resource_type, resource_name = key
    removals = tombstones.get(resource_name, ()) if resource_type == ConfigResourceType.TOPIC else ()
    current: dict[str, str] = {}
    r = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        while r < len(removals) and removals[r] < position:
            current.clear()  # the topic of this name was removed: its configs went with it
            r += 1
        apply_config(current, ConfigRecord(*fields))
    while r < len(removals) and removals[r] <= cut:
        current.clear()
        r += 1
    for name in sorted(current):
        out.append(
            (
                (_S_CONFIG, resource_type, resource_name, name),
                encode_record(
                    ConfigRecord(
                        resource_type=resource_type, resource_name=resource_name, name=name, value=current[name]
                    )
                ),
            )
        )


def _fold_producer_ids(values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    current = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        try:
            current = next_producer_id(current, ProducerIdsRecord(*fields))
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if current > 0:
        out.append(
            (
                (_S_PRODUCER_IDS,),
                encode_record(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=current)),
            )
        )


def _fold_feature(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    name = key[1]
    level = 0
    for position, _type_id, fields in values:
        if position > cut:
            break
        try:
            level = feature_level(FeatureLevelRecord(*fields))
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if level != 0:
        out.append(((_S_FEATURE, name), encode_record(FeatureLevelRecord(name=name, feature_level=level))))


def _fold_acl(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    """One ACL id's records in log order, through the transitions `MetadataDelta` replays
    (`next_acl`)."""
    acl: AclBinding | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        record = AccessControlEntryRecord(*fields) if type_id == _ACL else RemoveAccessControlEntryRecord(*fields)
        try:
            acl = next_acl(acl, record)
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if acl is not None:
        acl_id = key[1]
        out.append(((_S_ACL, acl_id), encode_record(acl_to_record(acl_id, acl))))


def _fold_scram(key: tuple[Any, ...], values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    """One user's records for one mechanism in log order, through the transitions `MetadataDelta`
    replays (`next_scram_credential`)."""
    credential: ScramCredential | None = None
    for position, type_id, fields in values:
        if position > cut:
            break
        record = UserScramCredentialRecord(*fields) if type_id == _SCRAM else RemoveUserScramCredentialRecord(*fields)
        try:
            credential = next_scram_credential(credential, record)
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
    if credential is not None:
        _, mechanism, name = key
        out.append(((_S_SCRAM, mechanism, name), encode_record(credential_to_record(credential, name, mechanism))))


def _fold_quota(values: list[Any], cut: int, out: list[Any], errors: list[Any]) -> None:
    """One client quota entity's records in log order, through the transitions `MetadataDelta`
    replays (`next_quota_values`); the snapshot gets one record per key left."""
    current: dict[str, float] = {}
    entity: Any = None
    for position, _type_id, fields in values:
        if position > cut:
            break
        record = ClientQuotaRecord(*fields)
        try:
            current = next_quota_values(current, record)
        except MetadataReplayError as err:
            errors.append(_err(position, "MetadataReplayError", str(err)))
            return
        entity = record.entity
    if entity is None:
        return
    order = quota_sort_key(entity)
    for name in sorted(current):
        record = ClientQuotaRecord(entity=entity, key=name, value=current[name], remove=False)
        out.append(((_S_QUOTA, order, name), encode_record(record)))
