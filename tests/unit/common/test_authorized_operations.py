"""KIP-430's authorized operations (issue 25): the bit field of the operations Kafka lists for a
resource type that the caller may do, from the authorizer, and every one without it."""

from __future__ import annotations

from kraftlog.common import topic_name_problem
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    RequestContext,
    ResourceType,
    Session,
)

SESSION = Session("User:alice", "127.0.0.1")


def _bits(*ops: AclOperation) -> int:
    return sum(1 << int(op) for op in ops)


def test_without_an_authorizer_every_supported_operation_is_set() -> None:
    ctx = RequestContext(SESSION, api="Metadata")
    op = AclOperation
    topic = (op.READ, op.WRITE, op.CREATE, op.DESCRIBE, op.DELETE, op.ALTER, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS)
    assert ctx.authorized_operations(ResourceType.TOPIC, "t") == _bits(*topic) == 3576
    cluster = (
        op.CREATE,
        op.CLUSTER_ACTION,
        op.DESCRIBE_CONFIGS,
        op.ALTER_CONFIGS,
        op.IDEMPOTENT_WRITE,
        op.ALTER,
        op.DESCRIBE,
    )
    assert ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME) == _bits(*cluster)
    group = (op.READ, op.DESCRIBE, op.DELETE, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS)
    assert ctx.authorized_operations(ResourceType.GROUP, "g") == _bits(*group)
    assert not ctx.decisions  # asked, not recorded as the request's decisions


def test_with_an_authorizer_only_what_it_allows_and_describe_gates_the_cluster() -> None:
    asked: list[tuple[AclOperation, ResourceType, str | None]] = []

    def acls(session: Session, op: AclOperation, rt: ResourceType, name: str | None) -> bool:
        asked.append((op, rt, name))
        return session.principal == "User:alice" and name == "t" and op in (AclOperation.READ, AclOperation.DESCRIBE)

    ctx = RequestContext(SESSION, api="Metadata", authorize_fn=acls)
    assert ctx.authorized_operations(ResourceType.TOPIC, "t") == _bits(AclOperation.READ, AclOperation.DESCRIBE)
    assert ctx.authorized_operations(ResourceType.TOPIC, "other") == 0
    assert ("t", ResourceType.TOPIC) in {(n, rt) for _op, rt, n in asked}
    # the cluster's: 0 unless the caller may describe it, as Kafka answers
    asked.clear()
    assert ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, needs_describe=True) == 0
    assert asked == [(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)]


def test_topic_name_rules_are_kafkas() -> None:
    assert topic_name_problem("orders.v1_x-2") is None
    assert topic_name_problem("x" * 249) is None
    for bad in ("", ".", "..", "x" * 250, "rdk-invalid_topic$#!", "a b", "t\n"):
        assert topic_name_problem(bad) is not None, bad
