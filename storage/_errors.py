"""The storage layer's errors: members of kraftlog's one error tree (`kraftlog.common.errors`).

Each is a subclass of the table's class for its Kafka code (``CorruptRecordError`` is a
CORRUPT_MESSAGE, ``RecordTooLargeError`` a MESSAGE_TOO_LARGE ...) and of `StorageError`, so the
broker answers with the code the class inherits, a client-side ``except kerr.CorruptMessageError``
catches it, and ``except StorageError`` still means "the storage layer refused". The names are
Kafka's storage-side exception names (``CorruptRecordException``, ``RecordTooLargeException``);
none registers a code of its own.
"""

from __future__ import annotations

from kraftlog.common import errors as kerr
from kraftlog.common.errors import RecordError

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


class StorageError(kerr.KafkaError):
    """Base of every error the storage layer raises on bad input or a failed disk operation.

    An abstract grouping (no code of its own): each subclass takes its code from the table class it
    also derives from. ``record_errors`` (from `KafkaError`) names the records a produce was
    refused for.
    """


class CorruptRecordError(StorageError, kerr.CorruptMessageError):
    """A batch failed its CRC, size or magic check: the bytes are not what the producer sent."""


class InvalidRecordError(StorageError, kerr.InvalidRecordError):
    """A well-formed batch whose content breaks a rule (record count, offsets, missing key)."""


class OffsetsOutOfOrderError(InvalidRecordError):
    """A follower append whose offsets do not increase past the log end."""


class RecordTooLargeError(StorageError, kerr.MessageTooLargeError):
    """A batch larger than ``max.message.bytes`` (or a segment)."""


class RecordBatchTooLargeError(StorageError, kerr.RecordListTooLargeError):
    """An append larger than a whole segment may hold."""


class OffsetOutOfRangeError(StorageError, kerr.OffsetOutOfRangeError):
    """A read or truncation outside [log start offset, log end offset]."""


class InvalidTimestampError(StorageError, kerr.InvalidTimestampError):
    """A batch timestamp outside ``message.timestamp.before/after.max.ms``."""


class UnsupportedCompressionTypeError(StorageError, kerr.UnsupportedCompressionTypeError):
    """A compression codec id that Kafka does not define."""


class UnsupportedForMessageFormatError(StorageError, kerr.UnsupportedForMessageFormatError):
    """A batch in a message format other than v2 (magic 2)."""


class KafkaStorageError(StorageError, kerr.KafkaStorageError):
    """A disk operation failed; the partition is offline on this broker until the dir is repaired."""


class InvalidConfigError(StorageError, kerr.InvalidConfigError):
    """A log config value of the wrong type or out of range."""


class InconsistentTopicIdError(StorageError, kerr.InconsistentTopicIdError):
    """The partition directory belongs to another incarnation of the topic."""
