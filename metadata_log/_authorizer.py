"""The authorizer: Kafka's StandardAuthorizer over the ACLs of one metadata image, pure and immutable.

Every RPC of both protocols asks `Authorizer.authorize` before it acts, so the ACLs are indexed once
per image (by resource type: a dict of LITERAL names, a dict of PREFIXED names with the set of their
lengths) and a check costs a few dict look-ups, not a scan. An `Authorizer` is built from an
`AclsImage`; `Authorizer.updated` returns the same object while the image's ACLs are the same
object (`MetadataDelta.apply` shares untouched parts), so a broker may call it on every new image.

The decision, exactly as Kafka's ``StandardAuthorizerData``:

1. A principal in ``super.users`` is allowed everything.
2. The ACLs that apply to a resource are those of its type whose pattern covers its name: the
   LITERAL ACLs of that name, the LITERAL ACLs of the wildcard ``*``, and every PREFIXED ACL whose
   name is a prefix of it (the whole name included).
3. Of those, an ACL matches the request when its principal is the request's or ``User:*``, its host
   is the client's address or ``*``, and its operation is the requested one or ALL. An ALLOW ACL
   also implies operations: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS. A DENY ACL is never widened: DENY READ does not deny DESCRIBE.
4. A matching DENY wins over any number of matching ALLOWs. Otherwise a matching ALLOW allows.
5. With no match, the request is denied if any ACL applies to the resource (step 2, for any
   principal, host or operation), and otherwise gets ``allow.everyone.if.no.acl.found`` (false by
   default once an authorizer is configured).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlog.common import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraftlog.metadata_log.image import AclsImage, MetadataImage

__all__ = ["Authorizer"]

_ALL = AclOperation.ALL
_DESCRIBE = AclOperation.DESCRIBE
_DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS

#: what an ALLOW ACL of each operation allows besides itself (ALL allows everything anyway)
_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.READ: frozenset({_DESCRIBE}),
    AclOperation.WRITE: frozenset({_DESCRIBE}),
    AclOperation.DELETE: frozenset({_DESCRIBE}),
    AclOperation.ALTER: frozenset({_DESCRIBE}),
    AclOperation.ALTER_CONFIGS: frozenset({_DESCRIBE_CONFIGS}),
}

#: the resource name `authorize_by_resource_type` first checks, as Kafka's default implementation
_PROBE_NAME = "hardcode"

# One ACL as the index keeps it: (principal, host, operations it matches, allow?). ``operations``
# is None for ALL (every operation).
_Entry = tuple[str, str, frozenset[AclOperation] | None, bool]


def _entry(binding: AclBinding) -> _Entry:
    allow = binding.permission_type == AclPermissionType.ALLOW
    if binding.operation == _ALL:
        operations = None
    elif allow:
        operations = frozenset({binding.operation}) | _IMPLIED.get(binding.operation, frozenset())
    else:
        operations = frozenset({binding.operation})
    return (binding.principal, binding.host, operations, allow)


class _TypeIndex:
    """The ACLs of one resource type: LITERAL ones by name, PREFIXED ones by prefix, and the
    lengths of those prefixes (longest first) so the prefixes of a name are found by slicing."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "bindings")

    def __init__(self) -> None:
        self.literal: dict[str, list[_Entry]] = {}
        self.prefixed: dict[str, list[_Entry]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self.bindings: list[AclBinding] = []

    def applicable(self, name: str) -> Iterable[list[_Entry]]:
        """The entry lists of the patterns that cover ``name`` (step 2 of the module docstring)."""
        literal = self.literal.get(name)
        if literal is not None:
            yield literal
        if name != WILDCARD_RESOURCE:
            wildcard = self.literal.get(WILDCARD_RESOURCE)
            if wildcard is not None:
                yield wildcard
        prefixed = self.prefixed
        size = len(name)
        for length in self.prefix_lengths:
            if length <= size:
                entries = prefixed.get(name[:length])
                if entries is not None:
                    yield entries


class Authorizer:
    """Kafka's StandardAuthorizer over one `AclsImage` (see the module docstring for the rules).

    ``super_users`` holds principals as ``Type:name`` (``User:admin``); principals are compared as
    strings, the way Kafka compares ``KafkaPrincipal`` type and name.
    """

    __slots__ = ("acls", "super_users", "allow_everyone_if_no_acl_found", "_index")

    def __init__(
        self,
        acls: AclsImage,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        index: dict[ResourceType, _TypeIndex] = {}
        for binding in acls.acls.values():
            type_index = index.get(binding.resource_type)
            if type_index is None:
                type_index = index[binding.resource_type] = _TypeIndex()
            type_index.bindings.append(binding)
            by_name = type_index.literal if binding.pattern_type == PatternType.LITERAL else type_index.prefixed
            by_name.setdefault(binding.resource_name, []).append(_entry(binding))
        for type_index in index.values():
            type_index.prefix_lengths = tuple(sorted({len(p) for p in type_index.prefixed}, reverse=True))
        self._index = index

    @classmethod
    def from_image(
        cls,
        image: MetadataImage,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> Authorizer:
        """The authorizer of a `MetadataImage` (its ``acls``)."""
        return cls(image.acls, super_users, allow_everyone_if_no_acl_found)

    def updated(self, image: MetadataImage) -> Authorizer:
        """This authorizer for a newer `MetadataImage`: ``self`` when its ACLs are the same object,
        else a new one with the same configuration."""
        if image.acls is self.acls:
            return self
        return Authorizer(image.acls, self.super_users, self.allow_everyone_if_no_acl_found)

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` (the client's IP address) may perform
        ``operation`` on the resource ``resource_type``/``resource_name`` (a concrete name, never a
        pattern)."""
        if principal in self.super_users:
            return True
        type_index = self._index.get(resource_type)
        if type_index is None:
            return self.allow_everyone_if_no_acl_found
        has_acls = allowed = False
        for entries in type_index.applicable(resource_name):
            has_acls = True
            for acl_principal, acl_host, operations, allow in entries:
                if acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL:
                    continue
                if acl_host != host and acl_host != WILDCARD_HOST:
                    continue
                if operations is not None and operation not in operations:
                    continue
                if not allow:
                    return False  # DENY wins: no need to look further
                allowed = True
        if allowed:
            return True
        return False if has_acls else self.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may perform ``operation`` on at least one resource of the type
        (Kafka's ``Authorizer.authorizeByResourceType`` default implementation, which
        StandardAuthorizer uses): e.g. may it write idempotently to some topic, or use some
        transactional id.

        Allowed when `authorize` allows the operation on a resource named ``hardcode`` (so super
        users, and ``allow.everyone.if.no.acl.found`` where no ACL applies, are allowed), or when a
        matching ALLOW ACL (same principal or ``User:*``, host or ``*``, the operation itself or ALL:
        no implied operations here) is the LITERAL wildcard, or is a name no matching DENY covers
        (the same LITERAL name, or a PREFIXED name that is a prefix of it). A matching LITERAL
        wildcard DENY denies outright. ValueError for ANY or UNKNOWN arguments, as Kafka.
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete resource type, not {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete operation, not {operation.name}")
        if self.authorize(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        type_index = self._index.get(resource_type)
        if type_index is None:
            return False
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allowed = False
        for b in type_index.bindings:
            if b.host != host and b.host != WILDCARD_HOST:
                continue
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation != operation and b.operation != _ALL:
                continue
            literal = b.pattern_type == PatternType.LITERAL
            if b.permission_type == AclPermissionType.DENY:
                if literal and b.resource_name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if literal else deny_prefixed).add(b.resource_name)
            elif literal and b.resource_name == WILDCARD_RESOURCE:
                wildcard_allowed = True
            else:
                (allow_literal if literal else allow_prefixed).add(b.resource_name)
        if wildcard_allowed:
            return True
        for names, literal in ((allow_literal, True), (allow_prefixed, False)):
            for name in names:
                if literal and name in deny_literal:
                    continue
                if any(name[:length] in deny_prefixed for length in range(1, len(name) + 1)):
                    continue
                return True
        return False
