"""The active controller's security decisions: ACLs and SCRAM credentials, as records.

Pure handlers like the rest of `quorum.controller`: ``(image, request, context) -> (records,
response)``. Kafka's rules (StandardAuthorizer's ACL store, ControllerApis'
AlterUserScramCredentials):

- CreateAcls: each creation is checked on its own (INVALID_REQUEST naming the problem); an ACL
  equal to one that exists is answered with success and writes nothing; a new one gets a fresh
  id from the context's seeded rng.
- DeleteAcls: each filter removes every ACL it matches; an ACL two filters match is removed once
  and reported under each; an invalid filter fails only itself.
- AlterUserScramCredentials: one result per user named; a user named twice for one mechanism,
  an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384 or an empty
  name/salt (UNACCEPTABLE_CREDENTIAL), or deleting a credential that does not exist
  (RESOURCE_NOT_FOUND) fail that user, whose other alterations are then not made either.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    scram_credential_from_salted_password,
    validate_acl_binding,
)
from kraftlog.metadata_log import (
    MetadataImage,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kraftlog.metadata_log.image import acl_to_record
from kraftlog.proto import security_pb2
from kraftlog.quorum.controller._controller_base import ControllerContext, error_pb

__all__ = [
    "acl_binding_from_pb",
    "acl_binding_to_pb",
    "acl_filter_from_pb",
    "alter_user_scram_credentials",
    "create_acls",
    "delete_acls",
    "describe_acls",
    "describe_user_scram_credentials",
]

Records = list[MetadataRecord]


def acl_binding_from_pb(pb: Any) -> AclBinding:
    """An `AclBinding` from its message; `InvalidRequestError` for an unknown code."""
    try:
        return AclBinding(
            ResourceType(pb.resource_type),
            pb.resource_name,
            PatternType(pb.pattern_type),
            pb.principal,
            pb.host,
            AclOperation(pb.operation),
            AclPermissionType(pb.permission_type),
        )
    except ValueError as err:
        raise kerr.InvalidRequestError(f"invalid ACL: {err}") from err


def acl_binding_to_pb(binding: AclBinding) -> security_pb2.AclBinding:
    return security_pb2.AclBinding(
        resource_type=int(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=int(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=int(binding.operation),
        permission_type=int(binding.permission_type),
    )


def acl_filter_from_pb(pb: Any) -> AclBindingFilter:
    """An `AclBindingFilter` from its message (unset strings match anything)."""
    try:
        return AclBindingFilter(
            ResourceType(pb.resource_type),
            pb.resource_name if pb.HasField("resource_name") else None,
            PatternType(pb.pattern_type),
            pb.principal if pb.HasField("principal") else None,
            pb.host if pb.HasField("host") else None,
            AclOperation(pb.operation),
            AclPermissionType(pb.permission_type),
        )
    except ValueError as err:
        raise kerr.InvalidRequestError(f"invalid ACL filter: {err}") from err


def create_acls(
    image: MetadataImage, req: security_pb2.CreateAclsRequest, ctx: ControllerContext
) -> tuple[Records, security_pb2.CreateAclsResponse]:
    records: Records = []
    results = []
    planned: set[AclBinding] = set()
    for creation in req.creations:
        try:
            binding = acl_binding_from_pb(creation)
            validate_acl_binding(binding)
        except kerr.KafkaError as err:
            results.append(security_pb2.CreateAclsResponse.Result(error=error_pb(err)))
            continue
        if image.acls.id_of(binding) is None and binding not in planned:
            planned.add(binding)
            acl_id = str(uuid.UUID(int=ctx.rng.getrandbits(128), version=4))
            records.append(acl_to_record(acl_id, binding))
        results.append(security_pb2.CreateAclsResponse.Result(error=error_pb()))
    return records, security_pb2.CreateAclsResponse(results=results, error=error_pb())


def describe_acls(image: MetadataImage, req: security_pb2.DescribeAclsRequest) -> security_pb2.DescribeAclsResponse:
    try:
        acl_filter = acl_filter_from_pb(req.filter)
    except kerr.KafkaError as err:
        return security_pb2.DescribeAclsResponse(error=error_pb(err))
    found = sorted((binding for _id, binding in image.acls.matching(acl_filter)), key=AclBinding.sort_key)
    return security_pb2.DescribeAclsResponse(error=error_pb(), acls=[acl_binding_to_pb(b) for b in found])


def delete_acls(
    image: MetadataImage, req: security_pb2.DeleteAclsRequest, ctx: ControllerContext
) -> tuple[Records, security_pb2.DeleteAclsResponse]:
    R = security_pb2.DeleteAclsResponse
    records: Records = []
    removed: set[str] = set()
    results = []
    for pb in req.filters:
        try:
            acl_filter = acl_filter_from_pb(pb)
        except kerr.KafkaError as err:
            results.append(R.FilterResult(error=error_pb(err)))
            continue
        matching = []
        for acl_id, binding in sorted(image.acls.matching(acl_filter), key=lambda item: item[1].sort_key()):
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
            matching.append(R.Matching(error=error_pb(), acl=acl_binding_to_pb(binding)))
        results.append(R.FilterResult(error=error_pb(), matching=matching))
    return records, R(filter_results=results, error=error_pb())


def describe_user_scram_credentials(
    image: MetadataImage, req: security_pb2.DescribeUserScramCredentialsRequest
) -> security_pb2.DescribeUserScramCredentialsResponse:
    R = security_pb2.DescribeUserScramCredentialsResponse
    users = list(req.users) if req.users else image.scram.users()
    seen: dict[str, int] = {}
    for user in users:
        seen[user] = seen.get(user, 0) + 1
    results = []
    for user in dict.fromkeys(users):
        if seen[user] > 1:
            results.append(R.Result(user=user, error=error_pb(kerr.DuplicateResourceError, "user named twice")))
            continue
        infos = image.scram.describe(user)
        if not infos:
            err = error_pb(
                kerr.ResourceNotFoundError, f"attempt to describe a user credential that does not exist: {user}"
            )
            results.append(R.Result(user=user, error=err))
            continue
        results.append(
            R.Result(
                user=user,
                error=error_pb(),
                credential_infos=[R.CredentialInfo(mechanism=int(m), iterations=i) for m, i in infos],
            )
        )
    return R(error=error_pb(), results=results)


def _mechanism(code: int) -> ScramMechanism:
    try:
        return ScramMechanism(code)
    except ValueError as err:
        raise kerr.UnsupportedSaslMechanismError(f"unknown SCRAM mechanism {code}") from err


def alter_user_scram_credentials(
    image: MetadataImage, req: security_pb2.AlterUserScramCredentialsRequest, ctx: ControllerContext
) -> tuple[Records, security_pb2.AlterUserScramCredentialsResponse]:
    R = security_pb2.AlterUserScramCredentialsResponse
    per_user: dict[str, list[MetadataRecord]] = {}
    failed: dict[str, kerr.KafkaError] = {}
    named: dict[tuple[str, int], int] = {}
    for item in _alterations(req.deletions, req.upsertions):
        named[(item.name, item.mechanism)] = named.get((item.name, item.mechanism), 0) + 1
    items: list[tuple[str, Any]] = [("delete", d) for d in req.deletions] + [("upsert", u) for u in req.upsertions]
    for kind, item in items:
        user = item.name
        per_user.setdefault(user, [])
        if user in failed:
            continue
        try:
            if not user:
                raise kerr.UnacceptableCredentialError("username must not be empty")
            mechanism = _mechanism(item.mechanism)
            if named[(user, item.mechanism)] > 1:
                raise kerr.DuplicateResourceError(
                    f"a user credential cannot be altered twice in the same request: {user} {mechanism.mechanism_name}"
                )
            if kind == "delete":
                if image.scram.credential(mechanism, user) is None:
                    raise kerr.ResourceNotFoundError(
                        f"attempt to delete a user credential that does not exist: {user} {mechanism.mechanism_name}"
                    )
                per_user[user].append(RemoveUserScramCredentialRecord(name=user, mechanism=int(mechanism)))
            else:
                credential = scram_credential_from_salted_password(
                    mechanism, item.salted_password, item.salt, item.iterations
                )
                per_user[user].append(
                    UserScramCredentialRecord(
                        name=user,
                        mechanism=int(mechanism),
                        salt=credential.salt,
                        stored_key=credential.stored_key,
                        server_key=credential.server_key,
                        iterations=credential.iterations,
                    )
                )
        except kerr.KafkaError as err:
            failed[user] = err
    records: Records = []
    results = []
    for user, user_records in per_user.items():
        if user in failed:
            results.append(R.Result(user=user, error=error_pb(failed[user])))
            continue
        records.extend(user_records)
        results.append(R.Result(user=user, error=error_pb()))
    return records, R(results=results, error=error_pb())


def _alterations(*groups: Iterable[Any]) -> Iterable[Any]:
    for group in groups:
        yield from group
