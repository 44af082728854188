"""The active controller's client quota decisions (Kafka's ClientQuotaControlManager), as records,
and DescribeClientQuotas over an image (Kafka's ClientQuotasImage.describe).

AlterClientQuotas, Kafka's rules:

- each entry (entity) succeeds or fails on its own; an entity named twice in one request fails
  its later entries (INVALID_REQUEST "Ignoring duplicate entity"), a key named twice in one entry
  fails that entry;
- an entity must be user, client-id, or user and client-id, each with a name or the default
  (unset); ip entities are refused (see `kraftlog.metadata_log.image.validate_alteration`);
- a key must be a quota key of Kafka's QuotaConfigs (INVALID_REQUEST "Invalid configuration key
  k"), a byte rate a whole number; any invalid op fails the whole entry, no record of it written;
- a value equal to the current one, or removing a key that is not set, writes nothing;
- ``validate_only`` answers as the request would be answered, with no record.
"""

from __future__ import annotations

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import ClientQuotaRecord, MetadataImage, MetadataRecord
from kraftlog.metadata_log.image import make_entity, validate_alteration
from kraftlog.proto import quotas_pb2
from kraftlog.quorum.controller._controller_base import ControllerContext, error_pb

__all__ = ["alter_client_quotas", "describe_client_quotas", "entity_from_pb", "entity_to_pb"]

Records = list[MetadataRecord]
QuotaEntity = tuple[tuple[str, str | None], ...]


def entity_from_pb(components: list[quotas_pb2.QuotaEntityComponent]) -> QuotaEntity:
    """The canonical entity of a request's components (`InvalidRequestError` as Kafka's)."""
    return make_entity((c.entity_type, c.entity_name if c.HasField("entity_name") else None) for c in components)


def entity_to_pb(entity: QuotaEntity) -> list[quotas_pb2.QuotaEntityComponent]:
    out = []
    for entity_type, name in entity:
        pb = quotas_pb2.QuotaEntityComponent(entity_type=entity_type)
        if name is not None:
            pb.entity_name = name
        out.append(pb)
    return out


def _entry_records(
    image: MetadataImage, entity: QuotaEntity, ops: list[quotas_pb2.AlterClientQuotasRequest.Op]
) -> Records:
    """The records of one valid entry; `InvalidRequestError` for any invalid op."""
    named: set[str] = set()
    current = image.quotas.entities.get(entity, {})
    records: Records = []
    for op in ops:
        if op.key in named:
            raise kerr.InvalidRequestError(f"Duplicate quota key {op.key} not updating quota for this entity")
        named.add(op.key)
        validate_alteration(entity, op.key, None if op.remove else op.value)
        if op.remove:
            if op.key in current:
                records.append(ClientQuotaRecord(entity=entity, key=op.key, remove=True))
        elif current.get(op.key) != op.value:
            records.append(ClientQuotaRecord(entity=entity, key=op.key, value=float(op.value)))
    return records


def alter_client_quotas(
    image: MetadataImage, req: quotas_pb2.AlterClientQuotasRequest, ctx: ControllerContext
) -> tuple[Records, quotas_pb2.AlterClientQuotasResponse]:
    R = quotas_pb2.AlterClientQuotasResponse
    records: Records = []
    results = []
    seen: set[QuotaEntity] = set()
    for entry in req.entries:
        try:
            entity = entity_from_pb(list(entry.entity))
            if entity in seen:
                raise kerr.InvalidRequestError(f"Ignoring duplicate entity {entity}")
            seen.add(entity)
            entry_records = _entry_records(image, entity, list(entry.ops))
        except kerr.KafkaError as err:
            results.append(R.Result(entity=list(entry.entity), error=error_pb(err)))
            continue
        records.extend(entry_records)
        results.append(R.Result(entity=list(entry.entity), error=error_pb()))
    return ([] if req.validate_only else records), R(results=results, error=error_pb())


def describe_client_quotas(
    image: MetadataImage, req: quotas_pb2.DescribeClientQuotasRequest
) -> quotas_pb2.DescribeClientQuotasResponse:
    R = quotas_pb2.DescribeClientQuotasResponse
    components = [(c.entity_type, c.match_type, c.match if c.HasField("match") else None) for c in req.components]
    try:
        found = image.quotas.describe(components, req.strict)
    except kerr.KafkaError as err:
        return R(error=error_pb(err))
    return R(
        error=error_pb(),
        entries=[R.Entry(entity=entity_to_pb(entity), values=dict(values)) for entity, values in found],
    )
