"""Tests of Kafka's ACL model in `kraftlog.common`: the enum codes, name parsing, binding filters and
the CreateAcls validation rules. Expected codes and filter outcomes are Kafka's (its enums and its
``ResourcePatternFilterTest`` cases)."""

from __future__ import annotations

import hashlib

import pytest

from kraftlog.common import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    acl_binding_problem,
    parse_super_users,
    supported_operations,
    validate_acl_binding,
)
from kraftlog.common.errors import InvalidRequestError

LITERAL, PREFIXED, MATCH, ANY_PATTERN = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ = AclOperation.READ


def binding(
    resource_type: ResourceType = TOPIC,
    name: str = "orders",
    pattern_type: PatternType = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern_type, principal, host, operation, permission)


# ---- codes and names


def test_codes_are_kafkas() -> None:
    assert {m.name: m.value for m in AclOperation} == {
        "UNKNOWN": 0,
        "ANY": 1,
        "ALL": 2,
        "READ": 3,
        "WRITE": 4,
        "CREATE": 5,
        "DELETE": 6,
        "ALTER": 7,
        "DESCRIBE": 8,
        "CLUSTER_ACTION": 9,
        "DESCRIBE_CONFIGS": 10,
        "ALTER_CONFIGS": 11,
        "IDEMPOTENT_WRITE": 12,
        "CREATE_TOKENS": 13,
        "DESCRIBE_TOKENS": 14,
    }
    assert {m.name: m.value for m in ResourceType} == {
        "UNKNOWN": 0,
        "ANY": 1,
        "TOPIC": 2,
        "GROUP": 3,
        "CLUSTER": 4,
        "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6,
        "USER": 7,
    }
    assert {m.name: m.value for m in PatternType} == {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {m.name: m.value for m in AclPermissionType} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
    assert {m.name: m.value for m in ScramMechanism} == {"SCRAM_SHA_256": 1, "SCRAM_SHA_512": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("IdempotentWrite", AclOperation.IDEMPOTENT_WRITE),  # kafka-acls (SecurityUtils.operation)
        ("IDEMPOTENTWRITE", AclOperation.IDEMPOTENT_WRITE),
        ("idempotentwrite", AclOperation.IDEMPOTENT_WRITE),
        ("IDEMPOTENT_WRITE", AclOperation.IDEMPOTENT_WRITE),  # AclOperation.fromString
        ("idempotent_write", AclOperation.IDEMPOTENT_WRITE),
        (" Read ", AclOperation.READ),
        ("All", AclOperation.ALL),
        ("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        ("idempotent-write", AclOperation.UNKNOWN),  # neither of Kafka's parsers takes hyphens
        ("reader", AclOperation.UNKNOWN),
        ("", AclOperation.UNKNOWN),
    ],
)
def test_operation_from_string(text: str, expected: AclOperation) -> None:
    assert AclOperation.from_string(text) is expected


def test_other_enums_from_string() -> None:
    assert ResourceType.from_string("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.from_string("transactional_id") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.from_string("topic") is ResourceType.TOPIC
    assert ResourceType.from_string("topics") is ResourceType.UNKNOWN
    assert PatternType.from_string("prefixed") is PatternType.PREFIXED
    assert PatternType.from_string("Literal") is PatternType.LITERAL
    assert PatternType.from_string("wild") is PatternType.UNKNOWN
    assert AclPermissionType.from_string("Allow") is AclPermissionType.ALLOW
    assert AclPermissionType.from_string("deny") is AclPermissionType.DENY
    assert AclPermissionType.from_string("maybe") is AclPermissionType.UNKNOWN


def test_display_names_and_from_code() -> None:
    assert AclOperation.IDEMPOTENT_WRITE.display_name == "IdempotentWrite"
    assert AclOperation.CLUSTER_ACTION.display_name == "ClusterAction"
    assert ResourceType.TRANSACTIONAL_ID.display_name == "TransactionalId"
    assert ResourceType.DELEGATION_TOKEN.display_name == "DelegationToken"
    assert AclPermissionType.ALLOW.display_name == "Allow"
    for enum in (AclOperation, ResourceType, PatternType, AclPermissionType):
        for member in enum:
            assert enum.from_code(member.value) is member
            assert enum.from_string(member.display_name) is member  # names round trip
        assert enum.from_code(99) is enum(0)
        assert enum.from_code("3") is enum(0)
        assert enum(0).is_unknown and not enum(1).is_unknown
    assert [p for p in PatternType if p.is_specific] == [LITERAL, PREFIXED]


def test_scram_mechanism() -> None:
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    assert (sha256.mechanism_name, sha512.mechanism_name) == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert ScramMechanism.from_name("SCRAM-SHA-512") is sha512
    assert ScramMechanism.from_name("SCRAM-SHA-256") is sha256
    for bad in ("scram-sha-256", "SCRAM-SHA-1", "PLAIN"):
        with pytest.raises(ValueError, match="SCRAM-SHA-256, SCRAM-SHA-512"):
            ScramMechanism.from_name(bad)
    assert hashlib.new(sha256.hash_name).digest_size == 32
    assert hashlib.new(sha512.hash_name).digest_size == 64
    assert (sha256.min_iterations, sha256.max_iterations) == (4096, 16384)


def test_constants() -> None:
    assert (CLUSTER_RESOURCE_NAME, WILDCARD_RESOURCE, WILDCARD_PRINCIPAL, WILDCARD_HOST) == (
        "kafka-cluster",
        "*",
        "User:*",
        "*",
    )


def test_binding_takes_codes_and_is_frozen() -> None:
    b = AclBinding(2, "orders", 3, "User:alice", "*", 3, 3)
    assert b == binding()
    assert b.resource_type is TOPIC and b.operation is READ and b.permission_type is ALLOW
    assert AclBinding(99, "x", 3, "User:a", "*", 3, 3).resource_type is ResourceType.UNKNOWN
    with pytest.raises(AttributeError):
        b.resource_name = "other"  # type: ignore[misc]
    assert b.to_filter().matches(b) and b.to_filter().matches_at_most_one


# ---- filters


def _pattern_filter(rtype: ResourceType, name: str | None, ptype: PatternType) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, ptype)


@pytest.mark.parametrize(
    ("filter_args", "pattern", "expected"),
    [
        ((TOPIC, "Name", LITERAL), (GROUP, "Name", LITERAL), False),
        ((TOPIC, "Different", PREFIXED), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "NAME", LITERAL), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "Name", LITERAL), (TOPIC, "Name", PREFIXED), False),
        ((ResourceType.ANY, "Name", PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, ANY_PATTERN), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, MATCH), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", LITERAL), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name", ANY_PATTERN), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name", MATCH), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name-something", MATCH), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "*", LITERAL), (TOPIC, "*", LITERAL), True),
        ((TOPIC, "Name", LITERAL), (TOPIC, "*", LITERAL), False),
        ((TOPIC, "*", LITERAL), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "Name", ANY_PATTERN), (TOPIC, "*", LITERAL), False),
        ((TOPIC, "Name", MATCH), (TOPIC, "*", LITERAL), True),
        ((TOPIC, "Name", PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", PREFIXED), (TOPIC, "Name-something", PREFIXED), False),
        ((TOPIC, "Name-something", PREFIXED), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "Name-something", ANY_PATTERN), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "Name-something", MATCH), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", MATCH), (TOPIC, "*", PREFIXED), False),  # a PREFIXED "*" is no wildcard
    ],
)
def test_pattern_filter_matches_as_kafka(
    filter_args: tuple[ResourceType, str | None, PatternType],
    pattern: tuple[ResourceType, str, PatternType],
    expected: bool,
) -> None:
    assert _pattern_filter(*filter_args).matches(binding(pattern[0], pattern[1], pattern[2])) is expected


def test_entry_filter_matches() -> None:
    b = binding(principal="User:alice", host="10.0.0.1", operation=AclOperation.WRITE, permission=DENY)
    assert AclBindingFilter.ANY.matches(b)
    assert AclBindingFilter(principal="User:alice").matches(b)
    assert not AclBindingFilter(principal="User:bob").matches(b)
    assert not AclBindingFilter(principal="User:*").matches(b)  # filters compare exactly
    assert AclBindingFilter(host="10.0.0.1").matches(b) and not AclBindingFilter(host="*").matches(b)
    assert AclBindingFilter(operation=AclOperation.WRITE).matches(b)
    assert not AclBindingFilter(operation=AclOperation.ALL).matches(b)
    assert AclBindingFilter(permission_type=DENY).matches(b) and not AclBindingFilter(permission_type=ALLOW).matches(b)


def test_filter_unknown_and_indefinite_fields() -> None:
    assert AclBindingFilter(resource_type=ResourceType.UNKNOWN).is_unknown
    assert AclBindingFilter(pattern_type=PatternType.UNKNOWN).is_unknown
    assert AclBindingFilter(operation=AclOperation.UNKNOWN).is_unknown
    assert AclBindingFilter(permission_type=AclPermissionType.UNKNOWN).is_unknown
    assert not AclBindingFilter.ANY.is_unknown
    assert AclBindingFilter.ANY.find_indefinite_field() == "Resource type is ANY."
    assert AclBindingFilter(TOPIC).find_indefinite_field() == "Resource name is NULL."
    assert AclBindingFilter(TOPIC, "x", MATCH).find_indefinite_field() == "Resource pattern type is MATCH."
    assert AclBindingFilter(TOPIC, "x", LITERAL).find_indefinite_field() == "Principal is NULL"
    assert AclBindingFilter(TOPIC, "x", LITERAL, "User:a", "*").find_indefinite_field() == "Operation is ANY"
    assert not AclBindingFilter(TOPIC, "x", LITERAL, "User:a", "*", READ).matches_at_most_one
    assert AclBindingFilter(TOPIC, "x", LITERAL, "User:a", "*", READ, ALLOW).matches_at_most_one


# ---- validation


def test_valid_bindings_pass() -> None:
    for b in (
        binding(),
        binding(name="ord", pattern_type=PREFIXED, principal="User:*", operation=AclOperation.ALL, permission=DENY),
        binding(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, operation=AclOperation.IDEMPOTENT_WRITE),
        binding(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED, operation=AclOperation.WRITE),
        binding(GROUP, "*", operation=AclOperation.READ, host="192.168.0.7"),
        binding(principal="Group:ops"),  # any principal type, as Kafka
    ):
        assert acl_binding_problem(b) is None
        validate_acl_binding(b)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (binding(resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (binding(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (binding(pattern_type=MATCH), "Invalid patternType MATCH"),
        (binding(pattern_type=ANY_PATTERN), "Invalid patternType ANY"),
        (binding(pattern_type=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (binding(operation=AclOperation.ANY), "Invalid operation ANY"),
        (binding(operation=AclOperation.UNKNOWN), "Invalid operation UNKNOWN"),
        (binding(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (binding(name=""), "Resource name should not be empty"),
        (binding(principal="alice"), "expected principalType:principalName"),
        (binding(principal="User:"), "expected principalType:principalName"),
        (binding(principal=":alice"), "expected principalType:principalName"),
        (binding(host=""), "Host should not be empty"),
    ],
)
def test_structural_problems(bad: AclBinding, message: str) -> None:
    problem = acl_binding_problem(bad)
    assert problem is not None and message in problem
    with pytest.raises(InvalidRequestError, match=message) as info:
        validate_acl_binding(bad)
    assert info.value.error_code == 42


def test_create_only_rules() -> None:
    cluster = binding(ResourceType.CLUSTER, "my-cluster", operation=AclOperation.ALTER)
    assert acl_binding_problem(cluster) is None  # storable, but CreateAcls refuses it
    with pytest.raises(InvalidRequestError, match="only valid name for the CLUSTER resource is kafka-cluster"):
        validate_acl_binding(cluster)
    wrong_op = binding(operation=AclOperation.CLUSTER_ACTION)
    assert acl_binding_problem(wrong_op) is None
    with pytest.raises(InvalidRequestError, match="Topic does not support operation ClusterAction"):
        validate_acl_binding(wrong_op)
    with pytest.raises(InvalidRequestError, match="TransactionalId does not support operation Read"):
        validate_acl_binding(binding(ResourceType.TRANSACTIONAL_ID, "tx", operation=READ))
    for rtype in (TOPIC, GROUP, ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER):
        validate_acl_binding(binding(rtype, "x", operation=AclOperation.ALL))  # ALL is valid for every type


def test_supported_operations_are_kafkas() -> None:
    ops = AclOperation
    assert supported_operations(TOPIC) == {
        ops.READ,
        ops.WRITE,
        ops.CREATE,
        ops.DESCRIBE,
        ops.DELETE,
        ops.ALTER,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
    }
    assert supported_operations(GROUP) == {ops.READ, ops.DESCRIBE, ops.DELETE, ops.DESCRIBE_CONFIGS, ops.ALTER_CONFIGS}
    assert supported_operations(ResourceType.CLUSTER) == {
        ops.CREATE,
        ops.CLUSTER_ACTION,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
        ops.IDEMPOTENT_WRITE,
        ops.ALTER,
        ops.DESCRIBE,
    }
    assert supported_operations(ResourceType.TRANSACTIONAL_ID) == {ops.DESCRIBE, ops.WRITE}
    assert supported_operations(ResourceType.DELEGATION_TOKEN) == {ops.DESCRIBE}
    assert supported_operations(ResourceType.USER) == {ops.CREATE_TOKENS, ops.DESCRIBE_TOKENS}
    with pytest.raises(ValueError):
        supported_operations(ResourceType.ANY)


def test_parse_super_users() -> None:
    assert parse_super_users("User:admin; User:CN=broker,O=kafka ;;") == {"User:admin", "User:CN=broker,O=kafka"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError, match="super.users"):
        parse_super_users("User:admin;bob")
