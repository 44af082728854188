"""Tests of the ACL and SCRAM parts of the metadata image (`metadata_log.image._image_security`) and of
their replay through `MetadataDelta`: records, transitions, snapshots (``to_records``), change sets
and sharing of untouched parts."""

from __future__ import annotations

import dataclasses
import re

import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlog.common import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    AclsImage,
    ConfigRecord,
    ConfigResourceType,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    MetadataReplayError,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ScramCredential,
    ScramImage,
    TopicRecord,
    UserScramCredentialRecord,
    decode_entry,
    decode_record,
    encode_entry,
    encode_record,
)
from kraftlog.metadata_log.image._image_security import credential_from_record

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ID_A = "0a1b2c3d-0000-4000-8000-00000000000a"
ID_B = "0a1b2c3d-0000-4000-8000-00000000000b"
ID_C = "0a1b2c3d-0000-4000-8000-00000000000c"
ID_E = "0a1b2c3d-0000-4000-8000-00000000000e"


def acl(
    acl_id: str,
    name: str = "orders",
    *,
    resource_type: int = ResourceType.TOPIC,
    pattern_type: int = PatternType.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    operation: int = AclOperation.READ,
    permission: int = AclPermissionType.ALLOW,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id, int(resource_type), name, int(pattern_type), principal, host, int(operation), int(permission)
    )


def scram(name: str, mechanism: int = SHA256, iterations: int = 4096, tag: bytes = b"1") -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name, int(mechanism), b"salt-" + tag, b"\x00stored\xff" + tag, b"\x80server\x01" + tag, iterations
    )


def replay_all(image: MetadataImage, *records: MetadataRecord | LogEntry) -> MetadataImage:
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()


@pytest.fixture
def base() -> MetadataImage:
    return replay_all(
        MetadataImage.EMPTY,
        TopicRecord("orders", "id-orders"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
        acl(ID_A),
        acl(ID_B, "ord", pattern_type=PatternType.PREFIXED, operation=AclOperation.WRITE, permission=2),
        scram("alice"),
        scram("alice", SHA512, 8192),
        scram("bob"),
    )


# ---- records


def test_record_type_ids_are_kafkas() -> None:
    assert AccessControlEntryRecord.TYPE_ID == 18
    assert RemoveAccessControlEntryRecord.TYPE_ID == 19
    assert UserScramCredentialRecord.TYPE_ID == 11
    assert RemoveUserScramCredentialRecord.TYPE_ID == 22


def test_records_survive_msgpack_with_bytes() -> None:
    record = UserScramCredentialRecord("alice", 2, bytes(range(256)), b"\x00" * 64, b"\xff" * 64, 4096)
    decoded = decode_record(encode_record(record))
    assert decoded == record and type(decoded.salt) is bytes and decoded.salt == bytes(range(256))
    for r in (record, acl(ID_A), RemoveAccessControlEntryRecord(ID_A), RemoveUserScramCredentialRecord("alice", 1)):
        entry = LogEntry(7, 2, 1_700_000_000_000, r)
        assert decode_entry(encode_entry(entry)) == entry
    wire = record.to_wire()
    assert wire["type"] == 11 and wire["salt"] == bytes(range(256))


def test_keys_stay_out_of_repr() -> None:
    record = scram("alice", tag=b"SECRET")
    credential = credential_from_record(record)
    for text in (repr(record), repr(credential), repr(replay_all(MetadataImage.EMPTY, record))):
        assert "stored" not in text and "x80server" not in text  # the keys; the salt is public in SCRAM
    assert "SECRET" not in repr(record)
    assert "iterations=4096" in repr(credential)
    assert UserScramCredentialRecord.SENSITIVE_FIELDS == {"salt", "stored_key", "server_key"}
    assert AccessControlEntryRecord.SENSITIVE_FIELDS == frozenset()


# ---- ACLs


def test_acl_records_build_the_image(base: MetadataImage) -> None:
    acls = base.acls
    assert len(acls) == 2
    assert acls.get(ID_A) == AclBinding(
        ResourceType.TOPIC,
        "orders",
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    b = acls.get(ID_B)
    assert b is not None and b.pattern_type is PatternType.PREFIXED and b.permission_type is AclPermissionType.DENY
    assert acls.id_of(b) == ID_B and acls.id_of(dataclasses.replace(b, host="h")) is None
    # DescribeAcls-style matching
    match = AclBindingFilter(ResourceType.TOPIC, "orders-eu", PatternType.MATCH)
    assert [i for i, _ in acls.matching(match)] == [ID_B]
    # "orders" is covered by its LITERAL ACL and by the PREFIXED "ord" (listed first: by binding)
    assert [i for i, _ in acls.matching(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH))] == [
        ID_B,
        ID_A,
    ]
    assert [i for i, _ in acls.matching(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.ANY))] == [ID_A]
    assert [i for i, _ in acls.matching(AclBindingFilter(ResourceType.GROUP))] == []
    with pytest.raises(TypeError):
        acls.acls["x"] = b  # type: ignore[index]


def test_remove_acl(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(RemoveAccessControlEntryRecord(ID_A))
    assert delta.acls_changed and delta.changed_acl_ids == {ID_A}
    img = delta.apply()
    assert list(img.acls.acls) == [ID_B]
    assert base.acls.get(ID_A) is not None  # the old image did not change


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (acl(ID_A, "other"), f"ACL id {ID_A} already exists"),
        (RemoveAccessControlEntryRecord(ID_C), f"cannot remove ACL {ID_C}: no ACL has that id"),
        (acl(ID_C, resource_type=99), "unknown resource type code 99"),
        (acl(ID_C, pattern_type=7), "unknown pattern type code 7"),
        (acl(ID_C, operation=15), "unknown operation code 15"),
        (acl(ID_C, permission=4), "unknown permission type code 4"),
        (acl(ID_C, resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(ID_C, pattern_type=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(ID_C, operation=AclOperation.ANY), "Invalid operation ANY"),
        (acl(ID_C, permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (acl(ID_C, ""), "Resource name should not be empty"),
        (acl(ID_C, principal="alice"), "principalType:principalName"),
        (acl(ID_C, host=""), "Host should not be empty"),
        (AccessControlEntryRecord(ID_C, "2", "t", 3, "User:a", "*", 3, 3), "unknown resource type code '2'"),
        (RemoveAccessControlEntryRecord({"x": 1}), "is not a string"),  # type: ignore[arg-type]
    ],
)
def test_impossible_acl_records_raise_and_change_nothing(
    base: MetadataImage, bad: MetadataRecord, message: str
) -> None:
    delta = MetadataDelta(base)
    delta.replay(acl(ID_E, "payments"))
    before = delta.apply()
    with pytest.raises(MetadataReplayError, match=re.escape(message)):
        delta.replay(bad)
    assert delta.apply() == before and delta.changed_acl_ids == {ID_E}


def test_acl_created_and_removed_in_one_delta_leaves_no_trace(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(acl(ID_C, "payments"))
    delta.replay(RemoveAccessControlEntryRecord(ID_C))
    assert not delta.acls_changed
    img = delta.apply()
    assert img.acls is base.acls
    with pytest.raises(MetadataReplayError):
        delta.replay(RemoveAccessControlEntryRecord(ID_C))


def test_acl_id_removed_and_recreated_in_one_delta(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(RemoveAccessControlEntryRecord(ID_A))
    delta.replay(acl(ID_A, "payments"))
    with pytest.raises(MetadataReplayError, match="already exists"):
        delta.replay(acl(ID_A, "again"))
    img = delta.apply()
    assert img.acls.get(ID_A).resource_name == "payments"  # type: ignore[union-attr]
    delta.replay(RemoveAccessControlEntryRecord(ID_A))
    assert ID_A not in delta.apply().acls.acls and delta.changed_acl_ids == {ID_A}


# ---- SCRAM


def test_scram_records_build_the_image(base: MetadataImage) -> None:
    s = base.scram
    assert len(s) == 3 and s.users() == ["alice", "bob"]
    assert s.describe("alice") == [(SHA256, 4096), (SHA512, 8192)]
    assert s.describe("bob") == [(SHA256, 4096)] and s.describe("carol") == []
    cred = s.credential(SHA256, "alice")
    assert cred == ScramCredential(b"salt-1", b"\x00stored\xff1", b"\x80server\x011", 4096)
    assert s.credential(SHA512, "bob") is None and s.credential(SHA256, "carol") is None
    assert set(s.mechanisms) == {SHA256, SHA512}


def test_scram_upsert_and_remove(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(scram("alice", SHA256, 10000, tag=b"2"))
    delta.replay(RemoveUserScramCredentialRecord("alice", int(SHA512)))
    assert delta.changed_scram_users == {"alice"} and not delta.acls_changed
    img = delta.apply()
    assert img.scram.describe("alice") == [(SHA256, 10000)]
    assert img.scram.credential(SHA256, "alice").salt == b"salt-2"  # type: ignore[union-attr]
    assert SHA512 not in img.scram.mechanisms  # its last user went: no empty map stays
    assert img.scram.credential(SHA256, "bob") is base.scram.credential(SHA256, "bob")
    # removing the last credential of bob empties the image
    img2 = replay_all(img, RemoveUserScramCredentialRecord("bob", 1), RemoveUserScramCredentialRecord("alice", 1))
    assert img2.scram == ScramImage.EMPTY and len(img2.scram) == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (RemoveUserScramCredentialRecord("carol", 1), "cannot remove the SCRAM-SHA-256 credential of 'carol'"),
        (RemoveUserScramCredentialRecord("bob", 2), "cannot remove the SCRAM-SHA-512 credential of 'bob'"),
        (scram("carol", mechanism=3), "unknown mechanism 3"),
        (RemoveUserScramCredentialRecord("alice", 0), "unknown mechanism 0"),
        (scram("", SHA256), "is not a non-empty string"),
        (scram("carol", iterations=0), "invalid iteration count 0"),
        (UserScramCredentialRecord("carol", 1, "salt", b"k", b"s", 4096), "salt is not bytes"),  # type: ignore[arg-type]
        (UserScramCredentialRecord("carol", 1, b"s", (1, 2), b"s", 4096), "stored_key is not bytes"),  # type: ignore[arg-type]
    ],
)
def test_impossible_scram_records_raise_and_change_nothing(
    base: MetadataImage, bad: MetadataRecord, message: str
) -> None:
    delta = MetadataDelta(base)
    delta.replay(scram("dave"))
    before = delta.apply()
    with pytest.raises(MetadataReplayError, match=message):
        delta.replay(bad)
    assert delta.apply() == before and delta.changed_scram_users == {"dave"}


def test_scram_created_and_removed_in_one_delta_leaves_no_trace(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(scram("carol", SHA512))
    delta.replay(RemoveUserScramCredentialRecord("carol", int(SHA512)))
    assert delta.changed_scram_users == set()
    assert delta.apply().scram is base.scram


# ---- the whole image: sharing, equality, snapshots


def test_untouched_security_parts_are_shared(base: MetadataImage) -> None:
    img = replay_all(base, ConfigRecord(ConfigResourceType.TOPIC, "orders", "a", "b"))
    assert img.acls is base.acls and img.scram is base.scram
    img = replay_all(base, scram("carol", SHA512))
    assert img.acls is base.acls
    assert img.scram.mechanisms[SHA256] is base.scram.mechanisms[SHA256]  # untouched mechanism map
    img = replay_all(base, acl(ID_C, "x"))
    assert img.scram is base.scram and img.acls.get(ID_A) is base.acls.get(ID_A)


def test_same_content_sees_acls_and_scram(base: MetadataImage) -> None:
    assert not MetadataImage.EMPTY.same_content(replay_all(MetadataImage.EMPTY, acl(ID_A)))
    assert not MetadataImage.EMPTY.same_content(replay_all(MetadataImage.EMPTY, scram("a")))
    assert not replay_all(MetadataImage.EMPTY, scram("a")).same_content(
        replay_all(MetadataImage.EMPTY, scram("a", tag=b"2"))
    )
    empty_again = replay_all(base, *[RemoveAccessControlEntryRecord(i) for i in (ID_A, ID_B)])
    assert empty_again.acls == AclsImage.EMPTY
    assert not replay_all(MetadataImage.EMPTY, acl(ID_A)).is_empty
    # hand-built images with plain dicts equal replayed ones
    assert (
        ScramImage({1: {"bob": base.scram.credential(SHA256, "bob")}})
        == replay_all(MetadataImage.EMPTY, scram("bob")).scram
    )


def test_to_records_order_and_round_trip(base: MetadataImage) -> None:
    img = replay_all(base, acl(ID_C, "a-topic"), scram("aaron", SHA512))
    recs = img.to_records()
    kinds = [type(r).__name__ for r in recs]
    first_acl = kinds.index("AccessControlEntryRecord")
    assert kinds[first_acl - 1] == "ConfigRecord"  # after the configs
    assert kinds[first_acl:] == ["AccessControlEntryRecord"] * 3 + ["UserScramCredentialRecord"] * 4
    assert [r.id for r in recs[first_acl : first_acl + 3]] == [ID_A, ID_B, ID_C]  # by id
    assert [(r.mechanism, r.name) for r in recs[first_acl + 3 :]] == [
        (1, "alice"),
        (1, "bob"),
        (2, "aaron"),
        (2, "alice"),
    ]
    assert all(type(r.mechanism) is int for r in recs[first_acl + 3 :])
    rebuilt = MetadataImage.from_records([decode_record(encode_record(r)) for r in recs])
    assert rebuilt == img and rebuilt.to_records() == recs
    assert [encode_record(r) for r in rebuilt.to_records()] == [encode_record(r) for r in recs]


# ---- hypothesis: random ACL and SCRAM sequences

_IDS = st.sampled_from([ID_A, ID_B, ID_C, "0a1b2c3d-0000-4000-8000-00000000000d"])
_USERS = st.sampled_from(["alice", "bob", "carol"])
_MECHS = st.sampled_from([1, 2, 2, 1, 3])  # 3: an unknown mechanism, refused
_ACL_RECORDS = st.builds(
    acl,
    _IDS,
    st.sampled_from(["orders", "ord", "*", "payments"]),
    resource_type=st.sampled_from([2, 3, 4, 1]),
    pattern_type=st.sampled_from([3, 4, 2]),
    principal=st.sampled_from(["User:alice", "User:*", "bob"]),
    operation=st.sampled_from([3, 4, 8, 2, 1]),
    permission=st.sampled_from([3, 2]),
)
_RECORDS = st.one_of(
    _ACL_RECORDS,
    st.builds(RemoveAccessControlEntryRecord, _IDS),
    st.builds(scram, _USERS, _MECHS, st.sampled_from([4096, 8192, 0]), st.sampled_from([b"1", b"2"])),
    st.builds(RemoveUserScramCredentialRecord, _USERS, _MECHS),
)
_SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _replay_valid(records: list[MetadataRecord]) -> tuple[MetadataImage, list[MetadataRecord]]:
    delta = MetadataDelta(MetadataImage.EMPTY)
    accepted = []
    for record in records:
        before = delta.apply()
        sets = (delta.acls_changed, delta.changed_acl_ids, delta.changed_scram_users)
        try:
            delta.replay(record)
        except MetadataReplayError:
            assert delta.apply() == before
            assert sets == (delta.acls_changed, delta.changed_acl_ids, delta.changed_scram_users)
            continue
        accepted.append(record)
    return delta.apply(), accepted


@_SETTINGS
@given(st.lists(_RECORDS, max_size=40), st.lists(st.integers(0, 40), max_size=3))
def test_random_sequences_round_trip_and_chunk(records: list[MetadataRecord], cuts: list[int]) -> None:
    image, accepted = _replay_valid(records)
    snapshot = image.to_records()
    assert MetadataImage.from_records(snapshot) == image
    assert MetadataImage.from_records(snapshot).to_records() == snapshot
    bounds = sorted({0, len(accepted), *[min(c, len(accepted)) for c in cuts]})
    chained = MetadataImage.EMPTY
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chained = replay_all(chained, *accepted[lo:hi])
        chained = MetadataImage.from_records(chained.to_records())  # through a snapshot each time
    assert chained == image
