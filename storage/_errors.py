"""The storage layer's names for errors of kraftlog's one error tree (`kraftlog.common.errors`).

They are the table's classes under Kafka's storage-side exception names (``CorruptRecordException``
is CORRUPT_MESSAGE, ``RecordTooLargeException`` MESSAGE_TOO_LARGE ...): the record codec in
`kraftlog.common.records` raises the same classes, so ``except CorruptRecordError`` catches what
it raises, and the broker answers with each class's code. Only ``OffsetsOutOfOrderError`` is a
class of its own: a finer INVALID_RECORD that registers no code.
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


#: Everything the storage layer raises is a Kafka error; ``except StorageError`` reads as what it is.
StorageError = kerr.KafkaError
CorruptRecordError = kerr.CorruptMessageError
InvalidRecordError = kerr.InvalidRecordError
RecordTooLargeError = kerr.MessageTooLargeError
RecordBatchTooLargeError = kerr.RecordListTooLargeError
OffsetOutOfRangeError = kerr.OffsetOutOfRangeError
InvalidTimestampError = kerr.InvalidTimestampError
UnsupportedCompressionTypeError = kerr.UnsupportedCompressionTypeError
UnsupportedForMessageFormatError = kerr.UnsupportedForMessageFormatError
KafkaStorageError = kerr.KafkaStorageError
InvalidConfigError = kerr.InvalidConfigError
InconsistentTopicIdError = kerr.InconsistentTopicIdError


class OffsetsOutOfOrderError(kerr.InvalidRecordError):
    """A follower append whose offsets do not increase past the log end (INVALID_RECORD)."""
