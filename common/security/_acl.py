"""Kafka's ACL model: the enums with Kafka's numeric codes, ACL bindings and binding filters, the rules
CreateAcls applies to a new binding, and the SCRAM mechanism ids of ``UserScramCredentialRecord``.

Why the numeric codes matter: they are what ``AccessControlEntryRecord`` stores in the metadata log and
what Kafka's CreateAcls / DescribeAcls / DeleteAcls requests carry, so they must equal Kafka's
(``org.apache.kafka.common.acl.AclOperation``, ``AclPermissionType``,
``org.apache.kafka.common.resource.ResourceType``, ``PatternType``) and may never be renumbered.

Names are parsed the way Kafka's tools do: ``from_string`` accepts the enum name in any case with or
without its underscores ("IDEMPOTENT_WRITE", "idempotent_write", "IdempotentWrite", "idempotentwrite"),
the union of Kafka's ``AclOperation.fromString`` and ``SecurityUtils.operation`` (what kafka-acls
uses); anything else (a hyphenated "idempotent-write" included, as in Kafka) is ``UNKNOWN``, never an
exception, so a caller decides how to report it. ``display_name`` is Kafka's PascalCase spelling
("IdempotentWrite", "TransactionalId", "Allow") used by kafka-acls and the ZooKeeper ACL nodes.

Only the standard library is imported: this is the ground floor (`kraftlog.common`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import ClassVar, Self

from kraftlog.common.errors import InvalidRequestError

__all__ = [
    "CLUSTER_RESOURCE_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "ScramMechanism",
    "acl_binding_problem",
    "parse_super_users",
    "supported_operations",
    "validate_acl_binding",
]

#: the one name of the CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``)
CLUSTER_RESOURCE_NAME = "kafka-cluster"
#: a LITERAL resource name that matches every resource of its type
WILDCARD_RESOURCE = "*"
#: the principal of ACLs that apply to every principal
WILDCARD_PRINCIPAL = "User:*"
#: the host of ACLs that apply from every host
WILDCARD_HOST = "*"


class _KafkaEnum(IntEnum):
    """What the four ACL enums share: code 0 is UNKNOWN, Kafka's parsing and display names."""

    @classmethod
    def from_code(cls, code: object) -> Self:
        """The member with Kafka code ``code``; UNKNOWN (0) for any other value, as Kafka's fromCode."""
        member = cls._value2member_map_.get(code) if isinstance(code, int) else None
        return cls(0) if member is None else member  # type: ignore[return-value]

    @classmethod
    def from_string(cls, text: str) -> Self:
        """Parse a name as Kafka's tools do (see the module docstring); UNKNOWN when it is none."""
        key = text.strip().upper()
        for member in cls:
            assert member.name is not None
            if key == member.name or key == member.name.replace("_", ""):
                return member
        return cls(0)

    @property
    def display_name(self) -> str:
        """Kafka's PascalCase name (``SecurityUtils.operationName`` and friends): "IdempotentWrite"."""
        assert self.name is not None
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_unknown(self) -> bool:
        return self.value == 0


class AclOperation(_KafkaEnum):
    """Kafka's ``AclOperation``: ANY only in filters; ALL matches every operation in an ACL."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(_KafkaEnum):
    """Kafka's ``ResourceType``: ANY only in filters."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    """Kafka's ``PatternType``: LITERAL and PREFIXED in bindings; ANY and MATCH only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """LITERAL or PREFIXED: a pattern type a stored ACL may have (Kafka's ``isSpecific``)."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclPermissionType(_KafkaEnum):
    """Kafka's ``AclPermissionType``: ANY only in filters; a matching DENY beats every ALLOW."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ScramMechanism(IntEnum):
    """The SCRAM mechanisms, with the type bytes ``UserScramCredentialRecord.mechanism`` stores
    (Kafka's ``security.scram.internals.ScramMechanism``), and their iteration bounds."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name: "SCRAM-SHA-256" or "SCRAM-SHA-512"."""
        return "SCRAM-SHA-256" if self is ScramMechanism.SCRAM_SHA_256 else "SCRAM-SHA-512"

    @property
    def hash_name(self) -> str:
        """The `hashlib` / `hmac` digest name: "sha256" or "sha512"."""
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def min_iterations(self) -> int:
        """Kafka refuses credentials with fewer iterations (4096 for both mechanisms)."""
        return 4096

    @property
    def max_iterations(self) -> int:
        """Kafka refuses credentials with more iterations (16384 for both mechanisms)."""
        return 16384

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism of a SASL mechanism name (exact, upper case, as Kafka's forMechanismName);
        ValueError naming the supported ones for any other."""
        for member in cls:
            if member.mechanism_name == name:
                return member
        supported = ", ".join(m.mechanism_name for m in cls)
        raise ValueError(f"unsupported SCRAM mechanism {name!r} (supported: {supported})")


def _coerce(enum: type[_KafkaEnum], value: object) -> _KafkaEnum:
    return value if isinstance(value, enum) else enum.from_code(value)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern (type, name, pattern type) and an entry (principal, host,
    operation, permission). Kafka's ``AclBinding`` flattened; integer codes given to the
    constructor become the enums (an unknown code becomes UNKNOWN, as Kafka's fromCode).

    A binding can hold any values; `acl_binding_problem` says whether it may be stored and
    `validate_acl_binding` whether a CreateAcls request may create it.
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _coerce(ResourceType, self.resource_type))
        object.__setattr__(self, "pattern_type", _coerce(PatternType, self.pattern_type))
        object.__setattr__(self, "operation", _coerce(AclOperation, self.operation))
        object.__setattr__(self, "permission_type", _coerce(AclPermissionType, self.permission_type))

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )

    def sort_key(self) -> tuple[int, str, int, str, str, int, int]:
        """A total order for listings (type, name, pattern type, principal, host, operation, permission)."""
        return (
            int(self.resource_type),
            self.resource_name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission_type),
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: selects bindings for DescribeAcls and DeleteAcls.

    None in a string field and ANY in an enum field match everything. Pattern type MATCH selects
    every binding that applies to the filter's resource name: the LITERAL binding of that name, the
    LITERAL wildcard ``*`` and every PREFIXED binding whose name is a prefix of it. Pattern type ANY
    (or a specific one) compares names exactly.
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    ANY: ClassVar[AclBindingFilter]

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _coerce(ResourceType, self.resource_type))
        object.__setattr__(self, "pattern_type", _coerce(PatternType, self.pattern_type))
        object.__setattr__(self, "operation", _coerce(AclOperation, self.operation))
        object.__setattr__(self, "permission_type", _coerce(AclPermissionType, self.permission_type))

    @property
    def is_unknown(self) -> bool:
        """A field is UNKNOWN: Kafka's controller refuses such a filter (INVALID_REQUEST)."""
        return (
            self.resource_type.is_unknown
            or self.pattern_type.is_unknown
            or self.operation.is_unknown
            or self.permission_type.is_unknown
        )

    def find_indefinite_field(self) -> str | None:
        """Why this filter could match more than one binding (Kafka's wording), or None."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.resource_name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation == AclOperation.ANY:
            return "Operation is ANY"
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type == AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    @property
    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def matches(self, binding: AclBinding) -> bool:
        """Kafka's ``AclBindingFilter.matches``: the pattern filter and the entry filter both match."""
        return self._pattern_matches(binding) and self._entry_matches(binding)

    def _pattern_matches(self, binding: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        pattern_type = self.pattern_type
        if pattern_type not in (PatternType.ANY, PatternType.MATCH) and pattern_type != binding.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pattern_type == PatternType.ANY or pattern_type == binding.pattern_type:
            return name == binding.resource_name
        # MATCH: the bindings that apply to the resource called ``name``
        if binding.pattern_type == PatternType.LITERAL:
            return name == binding.resource_name or binding.resource_name == WILDCARD_RESOURCE
        if binding.pattern_type == PatternType.PREFIXED:
            return name.startswith(binding.resource_name)
        return False  # a binding that is no stored ACL (Kafka throws here)

    def _entry_matches(self, binding: AclBinding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == binding.permission_type


AclBindingFilter.ANY = AclBindingFilter()


_SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {
                AclOperation.READ,
                AclOperation.WRITE,
                AclOperation.CREATE,
                AclOperation.DESCRIBE,
                AclOperation.DELETE,
                AclOperation.ALTER,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
            }
        ),
        ResourceType.GROUP: frozenset(
            {
                AclOperation.READ,
                AclOperation.DESCRIBE,
                AclOperation.DELETE,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
            }
        ),
        ResourceType.CLUSTER: frozenset(
            {
                AclOperation.CREATE,
                AclOperation.CLUSTER_ACTION,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
                AclOperation.IDEMPOTENT_WRITE,
                AclOperation.ALTER,
                AclOperation.DESCRIBE,
            }
        ),
        ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
        ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
        ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
    }
)


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations Kafka lists for a concrete resource type (``AclEntry.supportedOperations``;
    ALL is accepted on top of them); ValueError for UNKNOWN and ANY."""
    try:
        return _SUPPORTED_OPERATIONS[resource_type]
    except KeyError:
        raise ValueError(f"{resource_type!r} is not a concrete resource type") from None


def _principal_problem(principal: object) -> str | None:
    if not isinstance(principal, str):
        return f"Invalid principal {principal!r}: not a string"
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return f"Invalid principal {principal!r}: expected principalType:principalName, e.g. User:alice"
    return None


def acl_binding_problem(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be a stored ACL, or None when it can.

    The structural rules an ACL of the metadata log must meet for the authorizer to evaluate it:
    a concrete resource type, pattern type LITERAL or PREFIXED, an operation and permission that are
    no filter values (ANY) and not UNKNOWN, a non-empty resource name and host, and a principal of
    the form ``Type:name``. Checked in the order Kafka's controller checks them.
    """
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if not binding.pattern_type.is_specific:
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if not isinstance(binding.resource_name, str) or not binding.resource_name:
        return "Resource name should not be empty"
    problem = _principal_problem(binding.principal)
    if problem is not None:
        return problem
    if not isinstance(binding.host, str) or not binding.host:
        return "Host should not be empty (use * for every host)"
    return None


def validate_acl_binding(binding: AclBinding) -> None:
    """Refuse a binding a CreateAcls request may not create, with `InvalidRequestError`.

    On top of `acl_binding_problem`: the CLUSTER resource must be named ``kafka-cluster`` (Kafka's
    broker-side CreateAcls check), and the operation must be one Kafka lists for the resource type,
    or ALL (what kafka-acls enforces). Any principal type is accepted (``User:`` is what Kafka's
    principal builders produce; Kafka does not restrict it either).
    """
    problem = acl_binding_problem(binding)
    if problem is not None:
        raise InvalidRequestError(problem)
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_RESOURCE_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    allowed = _SUPPORTED_OPERATIONS[binding.resource_type]
    if binding.operation != AclOperation.ALL and binding.operation not in allowed:
        names = ", ".join(sorted(op.display_name for op in (*allowed, AclOperation.ALL)))
        raise InvalidRequestError(
            f"ResourceType {binding.resource_type.display_name} does not support operation "
            f"{binding.operation.display_name}; it supports {names}"
        )


def parse_super_users(value: str) -> frozenset[str]:
    """The principals of Kafka's ``super.users`` value: ``;``-separated ``Type:name`` entries,
    blanks ignored; ValueError names an entry without ``Type:``."""
    out = set()
    for part in value.split(";"):
        principal = part.strip()
        if not principal:
            continue
        problem = _principal_problem(principal)
        if problem is not None:
            raise ValueError(f"super.users: {problem}")
        out.add(principal)
    return frozenset(out)
