"""The security part of the metadata image: ACLs and SCRAM credentials (see `metadata_log.image`).

Both live in the metadata log (``AccessControlEntryRecord`` / ``RemoveAccessControlEntryRecord``,
``UserScramCredentialRecord`` / ``RemoveUserScramCredentialRecord``), so every broker and controller
authorizes and authenticates from its own image, with no extra call (KRaft's AclsImage and
ScramImage). The transitions of one ACL id (`next_acl`) and of one user's credential for one
mechanism (`next_scram_credential`) live here once: `MetadataDelta` replays them through
`AclsDelta` / `ScramDelta`, and the Spark job folds each entity's records with the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

from kraftlog.common import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    acl_binding_problem,
)
from kraftlog.common.security import ScramCredential as ScramCredential
from kraftlog.metadata_log._records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kraftlog.metadata_log.image._image_base import _EMPTY_MAP, MetadataReplayError, _frozen_map, _thawed

#: the records that change one ACL id (`next_acl`)
AclRecord = AccessControlEntryRecord | RemoveAccessControlEntryRecord
#: the records that change one user's credential for one mechanism (`next_scram_credential`)
ScramRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord


# ------------------------------------------------------------------------------------------ ACLs


def acl_from_record(record: AccessControlEntryRecord) -> AclBinding:
    """The binding an ``AccessControlEntryRecord`` stores; `MetadataReplayError` when it is none
    the authorizer could evaluate (an unknown code, a filter value such as ANY or MATCH, an empty
    name or host, a principal without ``Type:``; see `kraftlog.common.acl_binding_problem`)."""
    codes = (
        ("resource type", ResourceType, record.resource_type),
        ("pattern type", PatternType, record.pattern_type),
        ("operation", AclOperation, record.operation),
        ("permission type", AclPermissionType, record.permission_type),
    )
    for what, enum, code in codes:
        if type(code) is not int or code not in enum._value2member_map_:
            raise MetadataReplayError(f"ACL {record.id!r}: unknown {what} code {code!r:.40}")
    binding = AclBinding(
        ResourceType(record.resource_type),
        record.resource_name,
        PatternType(record.pattern_type),
        record.principal,
        record.host,
        AclOperation(record.operation),
        AclPermissionType(record.permission_type),
    )
    problem = acl_binding_problem(binding)
    if problem is not None:
        raise MetadataReplayError(f"ACL {record.id!r}: {problem}")
    return binding


def acl_to_record(acl_id: str, binding: AclBinding) -> AccessControlEntryRecord:
    """The record that recreates ``binding`` under ``acl_id`` (used by snapshots)."""
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=int(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=int(binding.operation),
        permission_type=int(binding.permission_type),
    )


def next_acl(current: AclBinding | None, record: AclRecord) -> AclBinding | None:
    """One ACL id's binding after ``record``; None once it is removed.

    Creating an id that exists, or removing one that does not, is refused (`MetadataReplayError`):
    the active controller picks a fresh id for every ACL and removes only ids it has.
    """
    if type(record.id) is not str:
        raise MetadataReplayError(f"ACL id {record.id!r:.40} is not a string")
    if isinstance(record, AccessControlEntryRecord):
        if current is not None:
            raise MetadataReplayError(f"ACL id {record.id} already exists")
        return acl_from_record(record)
    if current is None:
        raise MetadataReplayError(f"cannot remove ACL {record.id}: no ACL has that id")
    return None


@dataclass(frozen=True, slots=True)
class AclsImage:
    """Every ACL by id (the ``/kafka-acl`` and ``/kafka-acl-extended`` subtrees of ZooKeeper mode).

    Evaluate requests through `metadata_log.Authorizer`, which indexes these once per image.
    """

    acls: Mapping[str, AclBinding] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[AclsImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "acls", _frozen_map(self.acls))

    def __len__(self) -> int:
        return len(self.acls)

    def get(self, acl_id: str) -> AclBinding | None:
        return self.acls.get(acl_id)

    def matching(self, acl_filter: AclBindingFilter) -> list[tuple[str, AclBinding]]:
        """``(id, binding)`` of the ACLs ``acl_filter`` matches (DescribeAcls, DeleteAcls), ordered
        by binding then id."""
        found = [(acl_id, b) for acl_id, b in self.acls.items() if acl_filter.matches(b)]
        found.sort(key=lambda item: (item[1].sort_key(), item[0]))
        return found

    def id_of(self, binding: AclBinding) -> str | None:
        """The id of an ACL equal to ``binding`` (CreateAcls adds no duplicate), or None."""
        for acl_id, existing in self.acls.items():
            if existing == binding:
                return acl_id
        return None


AclsImage.EMPTY = AclsImage()


class AclsDelta:
    """The ACL changes of one `MetadataDelta`: id -> new binding, or None for an id of the base
    removed here. An id created and removed within the delta leaves no entry (no one saw it)."""

    __slots__ = ("_image", "_changes")

    def __init__(self, image: AclsImage) -> None:
        self._image = image
        self._changes: dict[str, AclBinding | None] = {}

    @property
    def changed(self) -> bool:
        return bool(self._changes)

    @property
    def changed_ids(self) -> set[str]:
        return set(self._changes)

    def replay(self, record: AclRecord) -> None:
        """Apply one record; on `MetadataReplayError` nothing changed."""
        acl_id = record.id
        base = self._image.acls
        if type(acl_id) is str and acl_id in self._changes:
            current = self._changes[acl_id]
        else:
            current = base.get(acl_id) if type(acl_id) is str else None
        new = next_acl(current, record)
        if new is None and acl_id not in base:
            del self._changes[acl_id]  # created in this delta: it never existed for anyone
        else:
            self._changes[acl_id] = new

    def apply(self) -> AclsImage:
        if not self._changes:
            return self._image
        acls = _thawed(self._image.acls)
        for acl_id, binding in self._changes.items():
            if binding is None:
                acls.pop(acl_id, None)
            else:
                acls[acl_id] = binding
        return AclsImage(MappingProxyType(acls))


# ------------------------------------------------------------------------------------ SCRAM


def credential_from_record(record: UserScramCredentialRecord) -> ScramCredential:
    """The credential (`kraftlog.common.ScramCredential`, what the SASL servers check) of
    ``record``; `MetadataReplayError` for keys that are not bytes or a count of iterations below 1."""
    for name in ("salt", "stored_key", "server_key"):
        if type(getattr(record, name)) is not bytes:
            raise MetadataReplayError(f"SCRAM credential of {record.name!r}: {name} is not bytes")
    if type(record.iterations) is not int or record.iterations < 1:
        raise MetadataReplayError(
            f"SCRAM credential of {record.name!r}: invalid iteration count {record.iterations!r:.40}"
        )
    return ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)


def credential_to_record(
    credential: ScramCredential, name: str, mechanism: ScramMechanism
) -> UserScramCredentialRecord:
    """The record that recreates ``credential`` (used by snapshots)."""
    return UserScramCredentialRecord(
        name=name,
        mechanism=int(mechanism),
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


def scram_key(record: ScramRecord) -> tuple[ScramMechanism, str]:
    """``(mechanism, user)`` a SCRAM record names; `MetadataReplayError` for a user name that is no
    non-empty string or an unknown mechanism type byte."""
    name = record.name
    if type(name) is not str or not name:
        raise MetadataReplayError(f"SCRAM user name {name!r:.80} is not a non-empty string")
    code = record.mechanism
    if type(code) is not int or code not in ScramMechanism._value2member_map_:
        raise MetadataReplayError(f"SCRAM credential of {name!r}: unknown mechanism {code!r:.40}")
    return ScramMechanism(code), name


def next_scram_credential(current: ScramCredential | None, record: ScramRecord) -> ScramCredential | None:
    """One user's credential for one mechanism after ``record``; None once it is removed.

    A ``UserScramCredentialRecord`` creates or replaces it; removing a credential that does not
    exist is refused (`MetadataReplayError`), as is a record `scram_key` refuses.
    """
    mechanism, name = scram_key(record)
    if isinstance(record, UserScramCredentialRecord):
        return credential_from_record(record)
    if current is None:
        raise MetadataReplayError(f"cannot remove the {mechanism.mechanism_name} credential of {name!r}: there is none")
    return None


@dataclass(frozen=True, slots=True)
class ScramImage:
    """SCRAM credentials: mechanism -> user name -> credential (``/config/users`` in ZooKeeper
    mode). A mechanism without users is absent, so equal content means equal images."""

    mechanisms: Mapping[ScramMechanism, Mapping[str, ScramCredential]] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ScramImage]

    def __post_init__(self) -> None:
        mechanisms = self.mechanisms
        if not isinstance(mechanisms, MappingProxyType):
            mechanisms = MappingProxyType({ScramMechanism(m): _frozen_map(u) for m, u in mechanisms.items() if u})
        object.__setattr__(self, "mechanisms", mechanisms)

    def credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """What SASL/SCRAM authentication of ``user`` with ``mechanism`` checks against."""
        return self.mechanisms.get(mechanism, _EMPTY_MAP).get(user)

    def users(self) -> list[str]:
        """Every user with at least one credential, sorted."""
        return sorted({user for users in self.mechanisms.values() for user in users})

    def describe(self, user: str) -> list[tuple[ScramMechanism, int]]:
        """``(mechanism, iterations)`` of the user's credentials by mechanism (what
        DescribeUserScramCredentials shows: never salt or keys)."""
        out = []
        for mechanism in sorted(self.mechanisms):
            credential = self.mechanisms[mechanism].get(user)
            if credential is not None:
                out.append((mechanism, credential.iterations))
        return out

    def __len__(self) -> int:
        """The number of credentials (user and mechanism pairs)."""
        return sum(len(users) for users in self.mechanisms.values())


ScramImage.EMPTY = ScramImage()


class ScramDelta:
    """The SCRAM changes of one `MetadataDelta`: (mechanism, user) -> new credential, or None for
    a credential of the base removed here."""

    __slots__ = ("_image", "_changes")

    def __init__(self, image: ScramImage) -> None:
        self._image = image
        self._changes: dict[tuple[ScramMechanism, str], ScramCredential | None] = {}

    @property
    def changed_users(self) -> set[str]:
        """Users whose credential for some mechanism was created, replaced or removed here."""
        return {user for _mechanism, user in self._changes}

    def replay(self, record: ScramRecord) -> None:
        """Apply one record; on `MetadataReplayError` nothing changed."""
        key = scram_key(record)
        in_base = self._image.credential(*key)
        current = self._changes[key] if key in self._changes else in_base
        new = next_scram_credential(current, record)
        if new is None and in_base is None:
            del self._changes[key]  # created in this delta: it never existed for anyone
        else:
            self._changes[key] = new

    def apply(self) -> ScramImage:
        if not self._changes:
            return self._image
        mechanisms: dict[ScramMechanism, dict[str, ScramCredential]] = {}
        for (mechanism, user), credential in self._changes.items():
            users = mechanisms.get(mechanism)
            if users is None:
                users = mechanisms[mechanism] = _thawed(self._image.mechanisms.get(mechanism, _EMPTY_MAP))
            if credential is None:
                users.pop(user, None)
            else:
                users[user] = credential
        merged = dict(self._image.mechanisms)  # untouched mechanisms keep their map objects
        for mechanism, users in mechanisms.items():
            if users:
                merged[mechanism] = MappingProxyType(users)
            else:
                merged.pop(mechanism, None)
        return ScramImage(MappingProxyType(merged))
