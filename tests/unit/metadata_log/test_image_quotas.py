"""Client quotas in the metadata image: ClientQuotaRecord codec, replay/apply, snapshots,
DescribeClientQuotas matching and the DefaultQuotaCallback resolution order (issue 24)."""

from __future__ import annotations

import pytest

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import (
    ClientQuotaRecord,
    MetadataDelta,
    MetadataImage,
    MetadataReplayError,
    decode_record,
    encode_record,
)
from kraftlog.metadata_log.image import make_entity, validate_alteration

ALICE = (("user", "alice"),)
DEFAULT_USER = (("user", None),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))
APP = (("client-id", "app"),)
DEFAULT_CLIENT = (("client-id", None),)


def _image(*records: ClientQuotaRecord) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for r in records:
        delta.replay(r)
    return delta.apply()


def _set(entity, key, value):  # type: ignore[no-untyped-def]
    return ClientQuotaRecord(entity=entity, key=key, value=value)


def test_record_round_trips_with_a_default_entity_name() -> None:
    record = _set((("client-id", None), ("user", "bob")), "consumer_byte_rate", 2048.0)
    assert decode_record(encode_record(record)) == record
    wire = record.to_wire()
    assert wire["type"] == 14
    assert wire["entity"] == [
        {"entity_type": "client-id", "entity_name": None},
        {"entity_type": "user", "entity_name": "bob"},
    ]


def test_replay_sets_replaces_and_removes_keys() -> None:
    image = _image(_set(ALICE, "producer_byte_rate", 1000), _set(ALICE, "consumer_byte_rate", 2000))
    assert dict(image.quotas.entities[ALICE]) == {"producer_byte_rate": 1000.0, "consumer_byte_rate": 2000.0}
    delta = MetadataDelta(image)
    delta.replay(_set(ALICE, "producer_byte_rate", 5000))
    delta.replay(ClientQuotaRecord(entity=ALICE, key="consumer_byte_rate", remove=True))
    assert delta.changed_quota_entities == {ALICE}
    after = delta.apply()
    assert dict(after.quotas.entities[ALICE]) == {"producer_byte_rate": 5000.0}
    assert dict(image.quotas.entities[ALICE])["producer_byte_rate"] == 1000.0  # the old image is untouched
    delta = MetadataDelta(after)
    delta.replay(ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", remove=True))
    assert ALICE not in delta.apply().quotas.entities  # an entity with no key left is gone


def test_removing_an_unset_key_changes_nothing() -> None:
    image = _image(_set(ALICE, "producer_byte_rate", 1000))
    delta = MetadataDelta(image)
    delta.replay(ClientQuotaRecord(entity=APP, key="producer_byte_rate", remove=True))
    assert delta.apply().quotas is image.quotas


@pytest.mark.parametrize(
    "record",
    [
        ClientQuotaRecord(entity=(("group", "g"),), key="producer_byte_rate", value=1.0),
        ClientQuotaRecord(entity=(), key="producer_byte_rate", value=1.0),
        ClientQuotaRecord(entity=(("user", ""),), key="producer_byte_rate", value=1.0),
        ClientQuotaRecord(entity=ALICE, key="", value=1.0),
        ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", value=float("nan")),
    ],
)
def test_impossible_records_are_refused_and_leave_the_delta_unchanged(record: ClientQuotaRecord) -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError):
        delta.replay(record)
    assert delta.apply().quotas is MetadataImage.EMPTY.quotas


def test_snapshot_records_rebuild_the_same_quotas() -> None:
    image = _image(
        _set(ALICE, "producer_byte_rate", 1000),
        _set(DEFAULT_USER, "request_percentage", 50.5),
        _set(ALICE_APP, "consumer_byte_rate", 7),
        _set(DEFAULT_CLIENT, "controller_mutation_rate", 2.5),
    )
    records = image.to_records()
    assert [type(r) for r in records] == [ClientQuotaRecord] * 4
    rebuilt = MetadataImage.from_records(records)
    assert rebuilt.same_content(image)
    assert rebuilt.to_records() == records


def test_resolution_follows_kafkas_default_quota_callback_order() -> None:
    levels = [
        (ALICE_APP, 1),
        ((("client-id", None), ("user", "alice")), 2),
        (ALICE, 3),
        ((("client-id", "app"), ("user", None)), 4),
        ((("client-id", None), ("user", None)), 5),
        (DEFAULT_USER, 6),
        (APP, 7),
        (DEFAULT_CLIENT, 8),
    ]
    image = _image(*(_set(e, "producer_byte_rate", v) for e, v in levels))
    # peel the most specific level off one at a time: each time the next one in order applies
    expected_tags = [
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("", "app"),
        ("", "app"),
    ]
    for i, (entity, value) in enumerate(levels):
        found = image.quotas.resolve("alice", "app", "producer_byte_rate")
        assert found is not None
        assert (found.quota, found.entity) == (value, entity)
        assert (found.user_tag, found.client_id_tag) == expected_tags[i]
        delta = MetadataDelta(image)
        delta.replay(ClientQuotaRecord(entity=entity, key="producer_byte_rate", remove=True))
        image = delta.apply()
    assert image.quotas.resolve("alice", "app", "producer_byte_rate") is None


def test_resolution_is_per_key() -> None:
    image = _image(_set(ALICE, "consumer_byte_rate", 10), _set(DEFAULT_CLIENT, "producer_byte_rate", 20))
    found = image.quotas.resolve("alice", "x", "producer_byte_rate")
    assert found is not None and found.entity == DEFAULT_CLIENT


def _entities(image: MetadataImage, components, strict=False):  # type: ignore[no-untyped-def]
    return [e for e, _v in image.quotas.describe(components, strict)]


def test_describe_matches_as_kafka() -> None:
    image = _image(
        _set(ALICE, "producer_byte_rate", 1),
        _set(DEFAULT_USER, "producer_byte_rate", 2),
        _set(ALICE_APP, "producer_byte_rate", 3),
        _set(APP, "producer_byte_rate", 4),
    )
    assert len(_entities(image, [])) == 4
    assert _entities(image, [], strict=True) == []
    assert _entities(image, [("user", 0, "alice")]) == [ALICE_APP, ALICE]
    assert _entities(image, [("user", 0, "alice")], strict=True) == [ALICE]
    assert _entities(image, [("user", 1, None)]) == [DEFAULT_USER]
    assert _entities(image, [("user", 2, None)], strict=True) == [DEFAULT_USER, ALICE]  # defaults first
    assert _entities(image, [("client-id", 2, None)]) == [APP, ALICE_APP]
    assert _entities(image, [("user", 0, "alice"), ("client-id", 2, None)]) == [ALICE_APP]


@pytest.mark.parametrize(
    ("components", "error"),
    [
        ([("user", 0, None)], kerr.InvalidRequestError),
        ([("user", 1, "x")], kerr.InvalidRequestError),
        ([("user", 2, "x")], kerr.InvalidRequestError),
        ([("user", 0, "a"), ("user", 2, None)], kerr.InvalidRequestError),
        ([("user", 7, None)], kerr.InvalidRequestError),
        ([("ip", 2, None), ("user", 2, None)], kerr.InvalidRequestError),
        ([("group", 2, None)], kerr.UnsupportedVersionError),
        ([("", 2, None)], kerr.InvalidRequestError),
    ],
)
def test_describe_refuses_bad_filters(components, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        MetadataImage.EMPTY.quotas.describe(components, False)


def test_alteration_validation() -> None:
    validate_alteration(ALICE, "producer_byte_rate", 1024.0)
    validate_alteration(ALICE, "request_percentage", 12.5)
    validate_alteration(ALICE, "producer_byte_rate", None)
    with pytest.raises(kerr.InvalidRequestError, match="Invalid configuration key bogus"):
        validate_alteration(ALICE, "bogus", 1.0)
    with pytest.raises(kerr.InvalidRequestError, match="must be a Long value"):
        validate_alteration(ALICE, "producer_byte_rate", 10.5)
    with pytest.raises(kerr.InvalidRequestError, match="must be positive"):
        validate_alteration(ALICE, "consumer_byte_rate", 0.0)
    with pytest.raises(kerr.InvalidRequestError, match="not supported by kraftlog"):
        validate_alteration((("ip", "1.2.3.4"),), "connection_creation_rate", 10.0)
    with pytest.raises(kerr.InvalidRequestError, match="duplicate entity entry user"):
        make_entity([("user", "a"), ("user", "b")])
    with pytest.raises(kerr.InvalidRequestError, match="Unhandled client quota entity type: group"):
        make_entity([("group", "a")])


def test_keys_follow_the_changed_entities_across_batches() -> None:
    """``apply`` keeps the image's quota keys from the changed entities alone (key counts): after
    batches that set, replace and remove keys, the image equals one built from its entities at once,
    and a key no entity sets any more is gone (a request type no quota limits is not measured)."""
    from kraftlog.metadata_log.image import ClientQuotasImage

    batches = [
        [_set(ALICE, "producer_byte_rate", 1.0), _set(APP, "request_percentage", 5.0)],
        [_set(ALICE, "consumer_byte_rate", 2.0), _set(DEFAULT_USER, "producer_byte_rate", 3.0)],
        [ClientQuotaRecord(entity=APP, key="request_percentage", remove=True)],
        [ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", remove=True)],
    ]
    image = MetadataImage.EMPTY
    for batch in batches:
        delta = MetadataDelta(image)
        for r in batch:
            delta.replay(r)
        image = delta.apply()
        quotas = image.quotas
        rebuilt = ClientQuotasImage(dict(quotas.entities))
        assert quotas == rebuilt and quotas.keys == rebuilt.keys and dict(quotas.key_counts) == dict(rebuilt.key_counts)
    assert image.quotas.keys == {"consumer_byte_rate", "producer_byte_rate"}
    assert dict(image.quotas.key_counts) == {"consumer_byte_rate": 1, "producer_byte_rate": 1}
