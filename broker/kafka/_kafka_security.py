"""Kafka-protocol ACL and SCRAM credential requests: CreateAcls, DescribeAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials. Each is forwarded to the active controller
on behalf of the client (which the controller authorizes: Alter or Describe on the cluster), the
same AdminService calls the gRPC listener forwards."""

from __future__ import annotations

from typing import Any

from kraftlog.broker.kafka._kafka_admin import ControllerForwarder
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.proto import security_pb2

__all__ = ["SecurityApis"]


def _filter(body: Any) -> security_pb2.AclBindingFilter:
    """An ACL filter of DescribeAcls (the request itself) or DeleteAcls (one of its filters)."""
    pb = security_pb2.AclBindingFilter(
        resource_type=body.resource_type_filter,
        pattern_type=getattr(body, "pattern_type_filter", 3),  # v0: LITERAL only
        operation=body.operation,
        permission_type=body.permission_type,
    )
    if body.resource_name_filter is not None:
        pb.resource_name = body.resource_name_filter
    if body.principal_filter is not None:
        pb.principal = body.principal_filter
    if body.host_filter is not None:
        pb.host = body.host_filter
    return pb


def _message(error: Any) -> str | None:
    return error.message or None if error.code else None


class SecurityApis:
    """ACL and SCRAM requests for `KafkaApis`, forwarded as the other admin requests are."""

    def __init__(self, forward: ControllerForwarder) -> None:
        self._forward = forward

    async def create_acls(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        creations = [
            security_pb2.AclBinding(
                resource_type=c.resource_type,
                resource_name=c.resource_name,
                pattern_type=getattr(c, "resource_pattern_type", 3),
                principal=c.principal,
                host=c.host,
                operation=c.operation,
                permission_type=c.permission_type,
            )
            for c in request.body.creations
        ]
        resp = await self._forward("CreateAcls", security_pb2.CreateAclsRequest(creations=creations))
        if resp.error.code or len(resp.results) != len(creations):  # refused as a whole
            results = [{"error_code": resp.error.code, "error_message": _message(resp.error)} for _ in creations]
        else:
            results = [{"error_code": r.error.code, "error_message": _message(r.error)} for r in resp.results]
        return {"throttle_time": 0, "results": results}

    async def describe_acls(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        resp = await self._forward("DescribeAcls", security_pb2.DescribeAclsRequest(filter=_filter(request.body)))
        resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for acl in resp.acls:
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resources.setdefault(key, []).append(
                {
                    "principal": acl.principal,
                    "host": acl.host,
                    "operation": acl.operation,
                    "permission_type": acl.permission_type,
                }
            )
        return {
            "throttle_time": 0,
            "error_code": resp.error.code,
            "error_message": _message(resp.error),
            "resources": [
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                for (t, n, p), acls in resources.items()
            ],
        }

    async def delete_acls(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        filters = [_filter(f) for f in request.body.filters]
        resp = await self._forward("DeleteAcls", security_pb2.DeleteAclsRequest(filters=filters))
        if resp.error.code or len(resp.filter_results) != len(filters):
            failed = {"error_code": resp.error.code, "error_message": _message(resp.error), "matching_acls": []}
            return {"throttle_time": 0, "filter_results": [failed for _ in filters]}
        return {
            "throttle_time": 0,
            "filter_results": [
                {
                    "error_code": r.error.code,
                    "error_message": _message(r.error),
                    "matching_acls": [
                        {
                            "error_code": m.error.code,
                            "error_message": _message(m.error),
                            "resource_type": m.acl.resource_type,
                            "resource_name": m.acl.resource_name,
                            "pattern_type": m.acl.pattern_type,
                            "principal": m.acl.principal,
                            "host": m.acl.host,
                            "operation": m.acl.operation,
                            "permission_type": m.acl.permission_type,
                        }
                        for m in r.matching
                    ],
                }
                for r in resp.filter_results
            ],
        }

    async def describe_user_scram_credentials(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        users = request.body.users
        pb = security_pb2.DescribeUserScramCredentialsRequest(users=[u.name for u in users or ()])
        resp = await self._forward("DescribeUserScramCredentials", pb)
        return {
            "throttle_time": 0,
            "error_code": resp.error.code,
            "error_message": _message(resp.error),
            "results": [
                {
                    "user": r.user,
                    "error_code": r.error.code,
                    "error_message": _message(r.error),
                    "credential_infos": [
                        {"mechanism": c.mechanism, "iterations": c.iterations} for c in r.credential_infos
                    ],
                }
                for r in resp.results
            ],
        }

    async def alter_user_scram_credentials(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        R = security_pb2.AlterUserScramCredentialsRequest
        pb = R(
            deletions=[R.Deletion(name=d.name, mechanism=d.mechanism) for d in body.deletions],
            upsertions=[
                R.Upsertion(
                    name=u.name,
                    mechanism=u.mechanism,
                    iterations=u.iterations,
                    salt=u.salt,
                    salted_password=u.salted_password,
                )
                for u in body.upsertions
            ],
        )
        resp = await self._forward("AlterUserScramCredentials", pb)
        if resp.error.code:
            users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
            results = [{"user": u, "error_code": resp.error.code, "error_message": _message(resp.error)} for u in users]
        else:
            results = [
                {"user": r.user, "error_code": r.error.code, "error_message": _message(r.error)} for r in resp.results
            ]
        return {"throttle_time": 0, "results": results}
