"""Typed storage errors carrying Kafka's error codes and names.

`storage` imports no other package of kraftlog (DESIGN.md §2), so its errors do not subclass the
wire-level hierarchy in `proto.errors`. They carry the same three attributes instead —
``error_code``, ``error_name`` and ``retriable`` — and the broker turns them into responses by code.
A unit test checks that every code and name here agrees with Kafka's table in `proto.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, NamedTuple

__all__ = [
    "RecordError",
    "StorageError",
    "CorruptRecordError",
    "InvalidRecordError",
    "OffsetsOutOfOrderError",
    "RecordTooLargeError",
    "RecordBatchTooLargeError",
    "OffsetOutOfRangeError",
    "InvalidTimestampError",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "KafkaStorageError",
    "InvalidConfigError",
    "InconsistentTopicIdError",
]


class RecordError(NamedTuple):
    """One refused record, as Kafka's ProduceResponse ``RecordErrors`` names it.

    ``batch_index`` is the record's index in the partition's produce payload, counting from 0
    across its batches: for the single batch a producer sends, Kafka's index within the batch.
    """

    batch_index: int
    message: str


class StorageError(Exception):
    """Base of every error the storage layer raises on bad input or a failed disk operation.

    ``record_errors`` names the records a produce was refused for (empty unless the error is
    about particular records); the broker copies them into the produce response.
    """

    error_code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "", *, record_errors: Iterable[RecordError] = ()) -> None:
        super().__init__(message)
        self.record_errors: tuple[RecordError, ...] = tuple(record_errors)

    def __init_subclass__(cls, code: int | None = None, name: str | None = None,
                          retriable: bool | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.error_code = code
        if name is not None:
            cls.error_name = name
        if retriable is not None:
            cls.retriable = retriable


class CorruptRecordError(StorageError, code=2, name="CORRUPT_MESSAGE", retriable=True):
    """A batch failed its CRC, size or magic check: the bytes are not what the producer sent."""


class InvalidRecordError(StorageError, code=87, name="INVALID_RECORD"):
    """A well-formed batch whose content breaks a rule (record count, offsets, missing key)."""


class OffsetsOutOfOrderError(InvalidRecordError):
    """A follower append whose offsets do not increase past the log end."""


class RecordTooLargeError(StorageError, code=10, name="MESSAGE_TOO_LARGE"):
    """A batch larger than ``max.message.bytes`` (or a segment)."""


class RecordBatchTooLargeError(StorageError, code=18, name="RECORD_LIST_TOO_LARGE"):
    """An append larger than a whole segment may hold."""


class OffsetOutOfRangeError(StorageError, code=1, name="OFFSET_OUT_OF_RANGE"):
    """A read or truncation outside [log start offset, log end offset]."""


class InvalidTimestampError(StorageError, code=32, name="INVALID_TIMESTAMP"):
    """A batch timestamp outside ``message.timestamp.before/after.max.ms``."""


class UnsupportedCompressionTypeError(StorageError, code=76, name="UNSUPPORTED_COMPRESSION_TYPE"):
    """A compression codec id that Kafka does not define."""


class UnsupportedForMessageFormatError(StorageError, code=43, name="UNSUPPORTED_FOR_MESSAGE_FORMAT"):
    """A batch in a message format other than v2 (magic 2)."""


class KafkaStorageError(StorageError, code=56, name="KAFKA_STORAGE_ERROR", retriable=True):
    """A disk operation failed; the partition is offline on this broker until the dir is repaired."""


class InvalidConfigError(StorageError, code=40, name="INVALID_CONFIG"):
    """A log config value of the wrong type or out of range."""


class InconsistentTopicIdError(StorageError, code=103, name="INCONSISTENT_TOPIC_ID", retriable=True):
    """The partition directory belongs to another incarnation of the topic."""
