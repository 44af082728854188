"""The controller's ACL and SCRAM credential handlers: records in, answers out (Kafka's rules)."""

from __future__ import annotations

import kraftlog.quorum.controller._security_control as sec
from kraftlog.common import errors as kerr
from kraftlog.common.security._acl import AclOperation, AclPermissionType, PatternType, ResourceType, ScramMechanism
from kraftlog.common.security._scram import scram_credential, scram_salted_password
from kraftlog.metadata_log._records import RemoveAccessControlEntryRecord, UserScramCredentialRecord
from kraftlog.proto import security_pb2 as pb
from tests.unit.quorum.test_controller import Harness


def _acl(
    name: str, op: AclOperation, *, pattern: PatternType = PatternType.LITERAL, allow: bool = True
) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=pattern,
        principal="User:alice",
        host="*",
        operation=op,
        permission_type=AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
    )


def test_created_acls_are_described_and_a_duplicate_writes_nothing() -> None:
    h = Harness()
    records, resp = h.run(sec.create_acls, pb.CreateAclsRequest(creations=[_acl("orders", AclOperation.READ)] * 2))
    assert [r.error.code for r in resp.results] == [0, 0]
    assert len(records) == 1  # the same ACL twice in one request: one record
    records, resp = h.run(sec.create_acls, pb.CreateAclsRequest(creations=[_acl("orders", AclOperation.READ)]))
    assert records == [] and resp.results[0].error.code == 0
    described = sec.describe_acls(
        h.image,
        pb.DescribeAclsRequest(
            filter=pb.AclBindingFilter(resource_type=1, pattern_type=1, operation=1, permission_type=1)
        ),
    )
    assert [(a.resource_name, a.operation) for a in described.acls] == [("orders", AclOperation.READ)]


def test_an_invalid_creation_fails_alone() -> None:
    h = Harness()
    bad = _acl("orders", AclOperation.READ)
    bad.principal = "alice"  # no principal type
    cluster = pb.AclBinding(
        resource_type=ResourceType.CLUSTER,
        resource_name="not-the-cluster",
        pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=AclOperation.ALTER,
        permission_type=AclPermissionType.ALLOW,
    )
    records, resp = h.run(
        sec.create_acls, pb.CreateAclsRequest(creations=[bad, _acl("t", AclOperation.WRITE), cluster])
    )
    codes = [r.error.code for r in resp.results]
    assert codes == [kerr.InvalidRequestError.error_code, 0, kerr.InvalidRequestError.error_code]
    assert len(records) == 1


def test_delete_removes_what_each_filter_matches_once() -> None:
    h = Harness()
    h.run(
        sec.create_acls,
        pb.CreateAclsRequest(
            creations=[
                _acl("orders", AclOperation.READ),
                _acl("ord", AclOperation.WRITE, pattern=PatternType.PREFIXED),
                _acl("payments", AclOperation.READ),
            ]
        ),
    )
    by_name = pb.AclBindingFilter(
        resource_type=1, resource_name="orders", pattern_type=PatternType.MATCH, operation=1, permission_type=1
    )
    everything = pb.AclBindingFilter(
        resource_type=1, pattern_type=1, operation=1, permission_type=1, principal="User:alice"
    )
    records, resp = h.run(sec.delete_acls, pb.DeleteAclsRequest(filters=[by_name, everything]))
    first, second = resp.filter_results
    assert sorted(m.acl.resource_name for m in first.matching) == ["ord", "orders"]  # MATCH: literal and prefix
    assert len(second.matching) == 3
    assert len(records) == 3 and all(isinstance(r, RemoveAccessControlEntryRecord) for r in records)
    assert len(h.image.acls) == 0


def test_scram_credentials_are_derived_from_the_salted_password_never_the_password() -> None:
    h = Harness()
    salt = b"0123456789abcdef"
    salted = scram_salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    upsert = pb.AlterUserScramCredentialsRequest.Upsertion(
        name="alice", mechanism=ScramMechanism.SCRAM_SHA_256, iterations=4096, salt=salt, salted_password=salted
    )
    records, resp = h.run(sec.alter_user_scram_credentials, pb.AlterUserScramCredentialsRequest(upsertions=[upsert]))
    assert [(r.user, r.error.code) for r in resp.results] == [("alice", 0)]
    (record,) = records
    assert isinstance(record, UserScramCredentialRecord)
    expected = scram_credential(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    assert (record.stored_key, record.server_key) == (expected.stored_key, expected.server_key)
    described = sec.describe_user_scram_credentials(h.image, pb.DescribeUserScramCredentialsRequest())
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in described.results] == [
        ("alice", [(1, 4096)])
    ]


def test_scram_alterations_fail_per_user_with_kafkas_errors() -> None:
    h = Harness()
    U = pb.AlterUserScramCredentialsRequest.Upsertion
    D = pb.AlterUserScramCredentialsRequest.Deletion
    good = dict(iterations=4096, salt=b"salt", salted_password=b"x" * 32)
    req = pb.AlterUserScramCredentialsRequest(
        upsertions=[
            U(name="few", mechanism=1, iterations=10, salt=b"s", salted_password=b"x" * 32),
            U(name="dup", mechanism=1, **good),
            U(name="dup", mechanism=1, **good),
            U(name="mech", mechanism=9, **good),
            U(name="", mechanism=1, **good),
        ],
        deletions=[D(name="ghost", mechanism=2)],
    )
    records, resp = h.run(sec.alter_user_scram_credentials, req)
    assert records == []
    errors = {r.user: r.error.name for r in resp.results}
    assert errors == {
        "few": "UNACCEPTABLE_CREDENTIAL",
        "dup": "DUPLICATE_RESOURCE",
        "mech": "UNSUPPORTED_SASL_MECHANISM",
        "": "UNACCEPTABLE_CREDENTIAL",
        "ghost": "RESOURCE_NOT_FOUND",
    }
    missing = sec.describe_user_scram_credentials(h.image, pb.DescribeUserScramCredentialsRequest(users=["nobody"]))
    assert missing.results[0].error.name == "RESOURCE_NOT_FOUND"
