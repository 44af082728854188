"""Tests of `metadata_log.Authorizer`, Kafka's StandardAuthorizer over an image's ACLs.

The matrix covers every concrete operation x ALLOW / DENY / no ACL x LITERAL / PREFIXED / wildcard
patterns; the scenarios for `authorize_by_resource_type` follow Kafka's own authorizer tests; a
hypothesis test checks the index against a brute-force reading of the rules.
"""

from __future__ import annotations

import itertools

import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlog.common import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    AclsImage,
    Authorizer,
    MetadataDelta,
    MetadataImage,
    RemoveAccessControlEntryRecord,
)

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "192.168.1.1", "192.168.1.2"

#: every operation an ACL and a request can name (not the filter values UNKNOWN and ANY, nor ALL)
CONCRETE_OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]

#: what an ALLOW of each operation allows, written out independently of the implementation
ALLOWED_BY = {
    Op.READ: {Op.READ, Op.DESCRIBE},
    Op.WRITE: {Op.WRITE, Op.DESCRIBE},
    Op.DELETE: {Op.DELETE, Op.DESCRIBE},
    Op.ALTER: {Op.ALTER, Op.DESCRIBE},
    Op.ALTER_CONFIGS: {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS},
}


def acl(
    name: str = "orders",
    pattern: PatternType = LITERAL,
    operation: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    principal: str = ALICE,
    host: str = "*",
    rtype: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, operation, permission)


def acls_image(*bindings: AclBinding) -> AclsImage:
    """The bindings replayed as records, as a broker's image would hold them."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    for i, b in enumerate(bindings):
        delta.replay(
            AccessControlEntryRecord(
                f"00000000-0000-4000-8000-{i:012d}",
                int(b.resource_type),
                b.resource_name,
                int(b.pattern_type),
                b.principal,
                b.host,
                int(b.operation),
                int(b.permission_type),
            )
        )
    return delta.apply().acls


def authorizer(*bindings: AclBinding, super_users: frozenset[str] = frozenset(), everyone: bool = False) -> Authorizer:
    return Authorizer(acls_image(*bindings), super_users, everyone)


def can(a: Authorizer, op: AclOperation, name: str = "orders", principal: str = ALICE, rtype=TOPIC, host=HOST) -> bool:
    return a.authorize(principal, host, op, rtype, name)


# the three ways an ACL can cover the topic "orders"
COVERING_PATTERNS = {"literal": ("orders", LITERAL), "prefixed": ("ord", PREFIXED), "wildcard": ("*", LITERAL)}


# ---- the matrix


@pytest.mark.parametrize("pattern", list(COVERING_PATTERNS))
@pytest.mark.parametrize("everyone", [False, True])
def test_matrix_allow(pattern: str, everyone: bool) -> None:
    name, ptype = COVERING_PATTERNS[pattern]
    for granted in CONCRETE_OPS:
        a = authorizer(acl(name, ptype, granted, ALLOW), everyone=everyone)
        for asked in CONCRETE_OPS:
            expected = asked in ALLOWED_BY.get(granted, {granted})
            assert can(a, asked) is expected, (pattern, granted, asked)
            # an ACL applies to the resource: no fallback to allow.everyone.if.no.acl.found
            assert can(a, asked, principal=BOB) is False
        # a topic the pattern does not cover has no ACL: the fallback decides
        assert can(a, granted, "payments") is (pattern == "wildcard" or everyone)


@pytest.mark.parametrize("pattern", list(COVERING_PATTERNS))
def test_matrix_deny_beats_allow_all_and_is_not_widened(pattern: str) -> None:
    name, ptype = COVERING_PATTERNS[pattern]
    for denied in CONCRETE_OPS:
        # ALLOW ALL from a literal ACL, DENY of one operation through the pattern under test
        a = authorizer(acl("orders", LITERAL, Op.ALL, ALLOW), acl(name, ptype, denied, DENY))
        for asked in CONCRETE_OPS:
            # DENY READ does not deny DESCRIBE: only the named operation is denied
            assert can(a, asked) is (asked != denied), (pattern, denied, asked)


@pytest.mark.parametrize("pattern", list(COVERING_PATTERNS))
@pytest.mark.parametrize("everyone", [False, True])
def test_matrix_no_acl(pattern: str, everyone: bool) -> None:
    name, ptype = COVERING_PATTERNS[pattern]
    nothing = authorizer(everyone=everyone)
    unrelated = authorizer(acl("payments", LITERAL, Op.ALL), acl("pay", PREFIXED, Op.ALL), everyone=everyone)
    for asked in CONCRETE_OPS:
        assert can(nothing, asked) is everyone
        assert can(unrelated, asked) is everyone  # ACLs on other names do not count
    # an ACL of another principal on the resource: denied even with allow.everyone.if.no.acl.found
    other = authorizer(acl(name, ptype, Op.READ, ALLOW, principal=BOB), everyone=True)
    for asked in CONCRETE_OPS:
        assert can(other, asked) is False
        assert can(other, asked, principal=BOB) is (asked in (Op.READ, Op.DESCRIBE))


def test_all_operation_allows_and_denies_everything() -> None:
    allow_all = authorizer(acl(operation=Op.ALL))
    deny_all = authorizer(acl(operation=Op.ALL), acl(name="*", operation=Op.ALL, permission=DENY))
    for asked in CONCRETE_OPS:
        assert can(allow_all, asked) and not can(deny_all, asked)


# ---- patterns, principals, hosts


def test_deny_wins_across_patterns() -> None:
    cases = [
        (acl("orders", LITERAL), acl("ord", PREFIXED, permission=DENY)),
        (acl("ord", PREFIXED), acl("orders", LITERAL, permission=DENY)),
        (acl("orders", LITERAL), acl("*", LITERAL, permission=DENY)),
        (acl("*", LITERAL), acl("o", PREFIXED, permission=DENY)),
        (acl("orders", PREFIXED), acl("ord", PREFIXED, permission=DENY, principal="User:*")),
    ]
    for allow, deny in cases:
        assert can(authorizer(allow), Op.READ)
        assert not can(authorizer(allow, deny), Op.READ), (allow, deny)
        assert not can(authorizer(deny, allow), Op.READ)


def test_which_patterns_apply() -> None:
    # PREFIXED applies to names starting with it, the whole name included
    assert can(authorizer(acl("orders", PREFIXED)), Op.READ)
    # a longer prefix does not apply: bob's ACL leaves "orders" without ACLs, so the fallback decides
    assert can(authorizer(acl("orders-eu", PREFIXED, principal=BOB), everyone=True), Op.READ)
    assert not can(authorizer(acl("orders-eu", PREFIXED, principal=BOB), everyone=True), Op.READ, "orders-eu-1")
    assert can(authorizer(acl("orders-eu", PREFIXED)), Op.READ, "orders-eu-1")
    # a LITERAL name that is a prefix of the resource does not apply
    assert can(authorizer(acl("ord", LITERAL, principal=BOB), everyone=True), Op.READ)
    # a PREFIXED "*" is no wildcard: it covers names starting with "*"
    star = authorizer(acl("*", PREFIXED), everyone=False)
    assert not can(star, Op.READ) and can(star, Op.READ, "*orders")
    # the LITERAL wildcard covers every name, "*" itself included
    wildcard = authorizer(acl("*", LITERAL))
    assert can(wildcard, Op.READ, "anything") and can(wildcard, Op.READ, "*")
    # many prefixes of different lengths, one denying
    a = authorizer(
        acl("o", PREFIXED), acl("or", PREFIXED), acl("ord", PREFIXED, permission=DENY), acl("orders-", PREFIXED)
    )
    assert not can(a, Op.READ, "orders") and can(a, Op.READ, "oranges") and can(a, Op.READ, "o")
    # resource types are separate
    assert not can(authorizer(acl(rtype=GROUP)), Op.READ)
    assert can(authorizer(acl(rtype=GROUP)), Op.READ, rtype=GROUP)
    assert can(authorizer(acl(rtype=GROUP), everyone=True), Op.READ)  # no TOPIC ACL at all


def test_principal_matching() -> None:
    anyone = authorizer(acl(principal="User:*"))
    assert can(anyone, Op.READ, principal=ALICE) and can(anyone, Op.READ, principal=BOB)
    bob_only = authorizer(acl(principal=BOB))
    assert not can(bob_only, Op.READ) and can(bob_only, Op.READ, principal=BOB)
    # the principal type counts: Group:* is not the User wildcard, Group:alice is not User:alice
    assert not can(authorizer(acl(principal="Group:*")), Op.READ)
    assert not can(authorizer(acl(principal="Group:alice")), Op.READ)
    assert can(authorizer(acl(principal="Group:alice")), Op.READ, principal="Group:alice")


def test_host_matching() -> None:
    one_host = authorizer(acl(host=HOST))
    assert can(one_host, Op.READ, host=HOST) and not can(one_host, Op.READ, host=OTHER_HOST)
    deny_other = authorizer(acl(host="*"), acl(host=OTHER_HOST, permission=DENY))
    assert can(deny_other, Op.READ, host=HOST) and not can(deny_other, Op.READ, host=OTHER_HOST)


def test_super_users_are_allowed_everything() -> None:
    deny_everything = [
        acl(name="*", operation=Op.ALL, permission=DENY, principal="User:*", rtype=t) for t in (TOPIC, CLUSTER)
    ]
    a = authorizer(*deny_everything, super_users=frozenset({"User:admin"}))
    for asked in CONCRETE_OPS:
        assert can(a, asked, principal="User:admin")
        assert can(a, asked, "kafka-cluster", principal="User:admin", rtype=CLUSTER)
        assert not can(a, asked)
    assert not can(a, Op.READ, principal="Group:admin")  # super.users names full principals


# ---- authorize_by_resource_type (scenarios of Kafka's authorizer tests)


def by_type(a: Authorizer, op: AclOperation, rtype: ResourceType, principal: str = ALICE, host: str = HOST) -> bool:
    return a.authorize_by_resource_type(principal, host, op, rtype)


def test_by_resource_type_add_and_remove() -> None:
    assert not by_type(authorizer(), Op.READ, TOPIC)
    allow = acl("sb1", host=HOST)
    deny = acl("sb1", host=HOST, permission=DENY)
    assert by_type(authorizer(allow), Op.READ, TOPIC)
    assert not by_type(authorizer(allow, deny), Op.READ, TOPIC)
    # through the image: removing the DENY allows again
    image = MetadataImage.EMPTY
    delta = MetadataDelta(image)
    for i, b in enumerate((allow, deny)):
        delta.replay(
            AccessControlEntryRecord(
                f"id-{i}", int(b.resource_type), b.resource_name, 3, b.principal, b.host, 3, int(b.permission_type)
            )
        )
    image = delta.apply()
    a = Authorizer.from_image(image)
    assert not by_type(a, Op.READ, TOPIC)
    delta = MetadataDelta(image)
    delta.replay(RemoveAccessControlEntryRecord("id-1"))
    a = a.updated(delta.apply())
    assert by_type(a, Op.READ, TOPIC)


def test_by_resource_type_unrelated_deny_does_not_dominate() -> None:
    a = authorizer(
        acl("sb1", principal=ALICE, host=HOST, permission=DENY),
        acl("sb1", principal=BOB, host=HOST, permission=DENY),
        acl("sb1", principal=ALICE, host=OTHER_HOST, operation=Op.WRITE, permission=DENY),
        acl("sb1", principal=BOB, host=OTHER_HOST, permission=DENY),
        acl("sb1", principal=ALICE, host=OTHER_HOST, permission=ALLOW),
        acl("sb2", principal=ALICE, host=OTHER_HOST, permission=DENY),
        acl("s", PREFIXED, principal=ALICE, host=OTHER_HOST, permission=DENY, rtype=GROUP),
    )
    assert not by_type(a, Op.READ, TOPIC, host=HOST)
    assert not by_type(a, Op.READ, GROUP, host=HOST)
    assert not by_type(a, Op.READ, TXN, host=HOST)
    assert not by_type(a, Op.READ, CLUSTER, host=HOST)
    assert by_type(a, Op.READ, TOPIC, host=OTHER_HOST)


def test_by_resource_type_prefixed_deny_dominates() -> None:
    def group(name: str, permission: AclPermissionType) -> AclBinding:
        return acl(name, PREFIXED, Op.READ, permission, host=HOST, rtype=GROUP)

    steps = [
        (group("abcde", ALLOW), True),
        (group("abcd", DENY), False),  # dominates abcde
        (group("abc", ALLOW), True),  # abc is not under abcd
        (group("a", DENY), False),  # dominates everything
        (group("ab", ALLOW), False),
    ]
    have: list[AclBinding] = []
    for binding, expected in steps:
        have.append(binding)
        assert by_type(authorizer(*have), Op.READ, GROUP) is expected, binding


def test_by_resource_type_wildcard_deny_dominates() -> None:
    def group(name: str, pattern: PatternType, permission: AclPermissionType) -> AclBinding:
        return acl(name, pattern, Op.WRITE, permission, host=HOST, rtype=GROUP)

    have = [group("hello", PREFIXED, ALLOW)]
    assert by_type(authorizer(*have), Op.WRITE, GROUP)
    for extra in (group("*", LITERAL, DENY), group("*", LITERAL, ALLOW), group("aloha", LITERAL, ALLOW)):
        have.append(extra)
        assert not by_type(authorizer(*have), Op.WRITE, GROUP)


def test_by_resource_type_literal_deny_only_shadows_its_own_name() -> None:
    a = authorizer(acl("a", host=HOST), acl("a", host=HOST, permission=DENY), acl("b", host=HOST))
    assert by_type(a, Op.READ, TOPIC)
    a = authorizer(acl("a", host=HOST), acl("a", host=HOST, permission=DENY))
    assert not by_type(a, Op.READ, TOPIC)


def test_by_resource_type_hosts_principals_and_all() -> None:
    assert by_type(authorizer(acl("t", host="*", operation=Op.ALL)), Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("t", host=OTHER_HOST)), Op.READ, TOPIC)
    assert by_type(authorizer(acl("t", principal="User:*", host=HOST)), Op.READ, TOPIC, principal=BOB)
    assert not by_type(authorizer(acl("t", host=HOST), acl("t", host="*", permission=DENY)), Op.READ, TOPIC)
    # no implied operations here: an ALLOW READ does not count for DESCRIBE... unless the probe
    # resource is covered, which is the authorize() step (READ implies DESCRIBE there)
    assert not by_type(authorizer(acl("t", host=HOST)), Op.DESCRIBE, TOPIC)
    assert by_type(authorizer(acl("*", host=HOST)), Op.DESCRIBE, TOPIC)
    # IdempotentWrite on the cluster, the use Kafka puts it to
    assert by_type(
        authorizer(acl("kafka-cluster", operation=Op.IDEMPOTENT_WRITE, rtype=CLUSTER)), Op.IDEMPOTENT_WRITE, CLUSTER
    )


def test_by_resource_type_super_users_and_no_acl_found() -> None:
    deny_all = [
        acl("*", operation=Op.ALL, permission=DENY, principal="User:*", rtype=t) for t in (TOPIC, CLUSTER, GROUP, TXN)
    ]
    a = authorizer(*deny_all, super_users=frozenset({"User:admin"}))
    for rtype in (TOPIC, CLUSTER, GROUP, TXN):
        assert by_type(a, Op.READ, rtype, principal="User:admin")
        assert not by_type(a, Op.READ, rtype)
    # Kafka's default implementation first asks about a resource named "hardcode": with
    # allow.everyone.if.no.acl.found, a type whose ACLs do not cover that name is allowed
    assert by_type(authorizer(everyone=True), Op.WRITE, TXN)
    assert by_type(
        authorizer(acl("tx", host=HOST, permission=DENY, rtype=TXN, operation=Op.WRITE), everyone=True), Op.WRITE, TXN
    )
    assert not by_type(
        authorizer(acl("hard", PREFIXED, principal=BOB, rtype=TXN, operation=Op.WRITE), everyone=True), Op.WRITE, TXN
    )


def test_by_resource_type_refuses_filter_values() -> None:
    a = authorizer()
    for op, rtype in (
        (Op.READ, ResourceType.ANY),
        (Op.READ, ResourceType.UNKNOWN),
        (Op.ANY, TOPIC),
        (Op.UNKNOWN, TOPIC),
    ):
        with pytest.raises(ValueError):
            by_type(a, op, rtype)


# ---- construction


def test_updated_reuses_the_authorizer_while_the_acls_are_shared() -> None:
    image = MetadataDelta(MetadataImage.EMPTY).apply()
    a = Authorizer.from_image(image, frozenset({"User:admin"}), True)
    assert a.updated(image) is a
    delta = MetadataDelta(image)
    delta.replay(AccessControlEntryRecord("id-1", 2, "t", 3, ALICE, "*", 3, 3))
    newer = delta.apply()
    b = a.updated(newer)
    assert b is not a and b.acls is newer.acls
    assert (b.super_users, b.allow_everyone_if_no_acl_found) == (frozenset({"User:admin"}), True)
    assert not can(b, Op.READ, "t", principal=BOB) and can(b, Op.READ, "t")


# ---- the index against a brute-force reading of the rules


def _reference(
    bindings: list[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
    everyone: bool,
) -> bool:
    applies = [
        b
        for b in bindings
        if b.resource_type == rtype
        and (
            (b.pattern_type == LITERAL and b.resource_name in (name, "*"))
            or (b.pattern_type == PREFIXED and name.startswith(b.resource_name))
        )
    ]
    matching = [
        b
        for b in applies
        if b.principal in (principal, "User:*")
        and b.host in (host, "*")
        and (
            b.operation == Op.ALL
            or b.operation == op
            or (b.permission_type == ALLOW and op in ALLOWED_BY.get(b.operation, ()))
        )
    ]
    if any(b.permission_type == DENY for b in matching):
        return False
    if matching:
        return True
    return everyone and not applies


_NAMES = st.sampled_from(["", "o", "or", "ord", "orders", "orders-eu", "*", "p", "pay"])
_BINDINGS = st.builds(
    acl,
    _NAMES.filter(bool),
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]),
    st.sampled_from([ALLOW, DENY]),
    st.sampled_from([ALICE, BOB, "User:*"]),
    st.sampled_from(["*", HOST]),
    st.sampled_from([TOPIC, GROUP]),
)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BINDINGS, max_size=12, unique=True), st.booleans())
def test_index_agrees_with_brute_force(bindings: list[AclBinding], everyone: bool) -> None:
    a = authorizer(*bindings, everyone=everyone)
    names = ["o", "or", "ord", "orders", "orders-eu", "*", "pay", "zzz"]
    ops = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]
    for name, op, principal, host, rtype in itertools.product(
        names, ops, (ALICE, BOB), (HOST, OTHER_HOST), (TOPIC, GROUP)
    ):
        expected = _reference(bindings, principal, host, op, rtype, name, everyone)
        assert a.authorize(principal, host, op, rtype, name) is expected, (name, op, principal, host, rtype)
