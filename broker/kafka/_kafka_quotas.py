"""Kafka-protocol client quota requests (KIP-546): DescribeClientQuotas (api key 48) answered from
this broker's metadata image, as a KRaft broker answers it from its metadata cache, and
AlterClientQuotas (49) forwarded to the active controller, which decides (records) and authorizes
it. Describe needs DescribeConfigs on the cluster, alter AlterConfigs on the cluster (Kafka's
rules); a client without them gets CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftlog.broker.kafka._kafka_admin import ControllerForwarder
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import quotas_pb2

if TYPE_CHECKING:
    from kraftlog.metadata_log import MetadataImage

__all__ = ["QuotaApis"]


class QuotaApis:
    """DescribeClientQuotas and AlterClientQuotas for `KafkaApis`."""

    def __init__(self, forward: ControllerForwarder, image: Callable[[], MetadataImage]) -> None:
        self._forward = forward
        self._image = image

    async def describe_client_quotas(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        ctx = current_request()
        if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            err = kerr.ClusterAuthorizationFailedError
            return {"throttle_time": 0, "error_code": err.error_code, "error_message": None, "entries": None}
        body = request.body
        components = [(c.entity_type, int(c.match_type), c.match) for c in body.components]
        try:
            found = self._image().quotas.describe(components, bool(body.strict))
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "error_code": err.error_code, "error_message": str(err), "entries": None}
        return {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
                }
                for entity, values in found
            ],
        }

    async def alter_client_quotas(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        R = quotas_pb2.AlterClientQuotasRequest
        entries = []
        for entry in body.entries:
            components = []
            for c in entry.entity:
                pb = quotas_pb2.QuotaEntityComponent(entity_type=c.entity_type)
                if c.entity_name is not None:
                    pb.entity_name = c.entity_name
                components.append(pb)
            ops = [R.Op(key=op.key, value=float(op.value), remove=bool(op.remove)) for op in entry.ops]
            entries.append(R.Entry(entity=components, ops=ops))
        resp = await self._forward("AlterClientQuotas", R(entries=entries, validate_only=bool(body.validate_only)))

        def entity(e: Any) -> list[dict[str, Any]]:
            return [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity]

        if resp.error.code or len(resp.results) != len(body.entries):  # refused as a whole
            message = resp.error.message or None
            results = [
                {"error_code": resp.error.code, "error_message": message, "entity": entity(e)} for e in body.entries
            ]
        else:
            results = [
                {
                    "error_code": r.error.code,
                    "error_message": (r.error.message or None) if r.error.code else None,
                    "entity": entity(e),
                }
                for r, e in zip(resp.results, body.entries, strict=True)
            ]
        return {"throttle_time": 0, "entries": results}
