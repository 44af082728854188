"""storage: the partition log in Kafka's on-disk format (docs/architecture.md §3).

RecordBatch v2 codec, segments with sparse offset and time indexes, the `Log` of one partition
(append as leader or follower, read, truncate, retention, leader-epoch cache, crash recovery),
log compaction on cleaner threads, and the `LogManager` that owns a node's log dirs and checkpoint files.

This package imports no other kraftlog package.
"""

from kraftlog.common.records import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_batch,
    build_control_batch,
    iter_batches,
)
from kraftlog.common.records.compression import CompressionType
from kraftlog.storage._checkpoint import OffsetCheckpointFile
from kraftlog.storage._cleaner import CleanerStats, CleaningAbortedError, clean_log
from kraftlog.storage._config import LONG_MAX, LogConfig
from kraftlog.storage._epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from kraftlog.storage._errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kraftlog.storage._fault_hooks import FAULTS_ENV, FSYNC_DELAY_FILE, NO_SPACE_FILE, fault_dir
from kraftlog.storage._file_region import FileRegion
from kraftlog.storage._index import IndexCorruptError, OffsetIndex, TimeIndex
from kraftlog.storage._log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchDataInfo,
    Log,
    LogAppendInfo,
    TimestampAndOffset,
    parse_topic_partition,
    partition_dir_name,
)
from kraftlog.storage._log_cleaner import LogCleaner
from kraftlog.storage._log_dir_failure import LogDirFailureChannel
from kraftlog.storage._log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from kraftlog.storage._producer_state import ProducerStateManager
from kraftlog.storage._record_set import split_batches
from kraftlog.storage._segment import LogSegment
from kraftlog.storage._validator import PreparedAppend

__all__ = [
    "FAULTS_ENV",
    "FSYNC_DELAY_FILE",
    "NO_SPACE_FILE",
    "LogDirFailureChannel",
    "fault_dir",
    "AppendOrigin",
    "CLEAN_SHUTDOWN_FILE",
    "CleanerStats",
    "CleaningAbortedError",
    "CompressionType",
    "ControlRecordType",
    "CorruptRecordError",
    "EARLIEST_TIMESTAMP",
    "FetchDataInfo",
    "FileRegion",
    "HEADER_SIZE",
    "Header",
    "InconsistentTopicIdError",
    "IndexCorruptError",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LATEST_TIMESTAMP",
    "LONG_MAX",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "MAX_TIMESTAMP",
    "MetaProperties",
    "NO_PRODUCER_ID",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "PreparedAppend",
    "ProducerStateManager",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampType",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "build_batch",
    "build_control_batch",
    "clean_log",
    "iter_batches",
    "parse_topic_partition",
    "partition_dir_name",
    "read_meta_properties",
    "split_batches",
    "write_meta_properties",
]
