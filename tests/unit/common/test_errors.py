"""Kafka's error table in common.errors: exact codes, names, retriable flags, lookups.

The table is wire protocol: a wrong code or flag makes clients retry what they should not (or give
up on what they should retry), so the known entries are pinned here one by one.
"""

from __future__ import annotations

import inspect
import pickle

import pytest

import kraftlog.common.errors as errors
from kraftlog.common.errors import (
    ERRORS_BY_CODE,
    KafkaError,
    error_for_code,
    error_for_name,
    raise_for_code,
)


def _table() -> list[type[KafkaError]]:
    return list(ERRORS_BY_CODE.values())


def test_codes_and_names_are_unique_and_cover_minus_one_through_transaction_abortable() -> None:
    classes = _table()
    codes = [cls.error_code for cls in classes]
    names = [cls.error_name for cls in classes]
    assert len(codes) == len(set(codes))
    assert len(names) == len(set(names))
    assert set(range(-1, 121)) - {0} <= set(codes)
    assert 0 not in codes


def test_every_table_class_is_exported_and_named_like_an_error() -> None:
    exported = set(errors.__all__)
    for cls in _table():
        assert cls.__name__ in exported
        assert cls.__name__.endswith("Error")
        assert cls.error_name == cls.error_name.upper()
        assert cls.__doc__, f"{cls.__name__} needs a docstring (it is the default message)"


@pytest.mark.parametrize(
    ("cls", "code", "name", "retriable"),
    [
        (errors.UnknownServerError, -1, "UNKNOWN_SERVER_ERROR", False),
        (errors.OffsetOutOfRangeError, 1, "OFFSET_OUT_OF_RANGE", False),
        (errors.CorruptMessageError, 2, "CORRUPT_MESSAGE", True),
        (errors.UnknownTopicOrPartitionError, 3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (errors.LeaderNotAvailableError, 5, "LEADER_NOT_AVAILABLE", True),
        (errors.NotLeaderOrFollowerError, 6, "NOT_LEADER_OR_FOLLOWER", True),
        (errors.RequestTimedOutError, 7, "REQUEST_TIMED_OUT", True),
        (errors.BrokerNotAvailableError, 8, "BROKER_NOT_AVAILABLE", False),
        (errors.ReplicaNotAvailableError, 9, "REPLICA_NOT_AVAILABLE", True),
        (errors.MessageTooLargeError, 10, "MESSAGE_TOO_LARGE", False),
        (errors.NetworkError, 13, "NETWORK_EXCEPTION", True),
        (errors.InvalidTopicError, 17, "INVALID_TOPIC_EXCEPTION", False),
        (errors.RecordListTooLargeError, 18, "RECORD_LIST_TOO_LARGE", False),
        (errors.NotEnoughReplicasError, 19, "NOT_ENOUGH_REPLICAS", True),
        (errors.NotEnoughReplicasAfterAppendError, 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
        (errors.RebalanceInProgressError, 27, "REBALANCE_IN_PROGRESS", False),
        (errors.TopicAlreadyExistsError, 36, "TOPIC_ALREADY_EXISTS", False),
        (errors.InvalidConfigError, 40, "INVALID_CONFIG", False),
        (errors.NotControllerError, 41, "NOT_CONTROLLER", True),
        (errors.OutOfOrderSequenceNumberError, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
        (errors.ConcurrentTransactionsError, 51, "CONCURRENT_TRANSACTIONS", True),
        (errors.KafkaStorageError, 56, "KAFKA_STORAGE_ERROR", True),
        (errors.FencedLeaderEpochError, 74, "FENCED_LEADER_EPOCH", True),
        (errors.UnknownLeaderEpochError, 75, "UNKNOWN_LEADER_EPOCH", True),
        (errors.StaleBrokerEpochError, 77, "STALE_BROKER_EPOCH", False),
        (errors.ElectionNotNeededError, 84, "ELECTION_NOT_NEEDED", True),
        (errors.InvalidRecordError, 87, "INVALID_RECORD", False),
        (errors.ProducerFencedError, 90, "PRODUCER_FENCED", False),
        (errors.InconsistentVoterSetError, 94, "INCONSISTENT_VOTER_SET", False),
        (errors.InvalidUpdateVersionError, 95, "INVALID_UPDATE_VERSION", False),
        (errors.UnknownTopicIdError, 100, "UNKNOWN_TOPIC_ID", True),
        (errors.DuplicateBrokerRegistrationError, 101, "DUPLICATE_BROKER_REGISTRATION", False),
        (errors.InconsistentTopicIdError, 103, "INCONSISTENT_TOPIC_ID", True),
        (errors.IneligibleReplicaError, 107, "INELIGIBLE_REPLICA", False),
        (errors.NewLeaderElectedError, 108, "NEW_LEADER_ELECTED", False),
        (errors.TransactionAbortableError, 120, "TRANSACTION_ABORTABLE", False),
    ],
)
def test_known_entries(cls: type[KafkaError], code: int, name: str, retriable: bool) -> None:
    assert (cls.error_code, cls.error_name, cls.retriable) == (code, name, retriable)
    assert error_for_code(code) is cls
    assert error_for_name(name) is cls


def test_retriable_flag_matches_the_retriable_base_class() -> None:
    for cls in _table():
        assert cls.retriable == issubclass(cls, errors.RetriableError), cls.__name__


@pytest.mark.parametrize("code", sorted(ERRORS_BY_CODE))
def test_error_for_code_round_trips(code: int) -> None:
    cls = error_for_code(code)
    assert cls.error_code == code
    assert error_for_name(cls.error_name) is cls
    instance = cls()
    assert isinstance(instance, KafkaError)
    assert instance.error_code == code
    assert str(instance)  # a default message from the docstring


def test_code_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError):
        error_for_code(0)
    with pytest.raises(ValueError):
        error_for_name("NONE")
    assert raise_for_code(0, "fine") is None


def test_unknown_code_keeps_the_code_and_is_an_unknown_server_error() -> None:
    cls = error_for_code(4242)
    assert issubclass(cls, errors.UnknownServerError)
    assert cls.error_code == 4242
    assert error_for_code(4242) is cls  # cached, so except clauses on it keep working
    assert 4242 not in ERRORS_BY_CODE
    restored = pickle.loads(pickle.dumps(cls("from a newer server")))
    assert restored.error_code == 4242
    assert restored.message == "from a newer server"


def test_error_for_name_accepts_legacy_names_case_and_class_names() -> None:
    assert error_for_name("NOT_LEADER_FOR_PARTITION") is errors.NotLeaderOrFollowerError
    assert error_for_name("not_controller") is errors.NotControllerError
    assert error_for_name("UNKNOWN") is errors.UnknownServerError
    assert error_for_name("CorruptMessageError") is errors.CorruptMessageError
    with pytest.raises(KeyError):
        error_for_name("NO_SUCH_ERROR")


def test_raise_for_code_raises_the_precise_type_with_message_and_leader_hint() -> None:
    with pytest.raises(errors.NotLeaderOrFollowerError) as caught:
        raise_for_code(6, "partition t-0 moved", leader_id=2, leader_address="10.0.0.2:9092")
    err = caught.value
    assert err.message == "partition t-0 moved"
    assert err.leader_id == 2
    assert err.leader_address == "10.0.0.2:9092"
    assert err.context == {"leader_id": 2, "leader_address": "10.0.0.2:9092"}
    assert "leader_id=2" in str(err)
    assert isinstance(err, errors.RetriableError)
    assert isinstance(err, errors.InvalidMetadataError)


def test_leader_hints_default_to_none_and_reserved_names_are_refused() -> None:
    assert errors.NotControllerError().leader_id is None
    assert errors.NotControllerError(leader_id=1, leader_address="c1:9093").leader_address == "c1:9093"
    with pytest.raises(TypeError):
        errors.NotControllerError(error_code=3)
    with pytest.raises(TypeError):
        errors.NotControllerError(with_traceback=1)


def test_errors_pickle_with_their_context() -> None:
    err = errors.NotControllerError("standby", leader_id=3, leader_address="c3:9093")
    restored = pickle.loads(pickle.dumps(err))
    assert type(restored) is errors.NotControllerError
    assert restored.leader_id == 3
    assert restored.message == "standby"


def test_duplicate_code_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError):

        class _Clash(KafkaError, code=6, name="ANOTHER_NAME"):
            """Never registered."""


def test_every_layer_raises_from_the_one_tree() -> None:
    """Storage's and metadata_log's errors are members of the table, not look-alikes (issue 13 §2)."""
    import kraftlog.metadata_log._placement as placement
    import kraftlog.metadata_log._records as records
    import kraftlog.storage._errors as storage_errors

    found = 0
    for module in (storage_errors, placement, records):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__name__ not in getattr(module, "__all__", ()) and cls.__module__ != module.__name__:
                continue
            if not issubclass(cls, Exception) or cls is KafkaError:
                continue
            if cls.__name__ == "PlacementError":  # an abstract grouping
                assert issubclass(cls, KafkaError)
                continue
            found += 1
            assert issubclass(cls, KafkaError), cls
            assert issubclass(cls, error_for_code(cls.error_code)), f"{cls.__name__} is not its code's class"
    assert found >= 13


def test_metadata_log_config_error_agrees_with_the_wire_table() -> None:
    from kraftlog.common.config import ConfigError

    assert error_for_code(ConfigError.error_code).error_name == ConfigError.error_name == "INVALID_CONFIG"
