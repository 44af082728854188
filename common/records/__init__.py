"""Kafka's RecordBatch v2 (magic 2) format: decoding, validation and building.

Layout of one batch (big-endian), 61 bytes of header then the records section::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...

``batchLength`` counts the bytes after itself. The CRC-32C covers ``attributes`` to the end, so the
broker may rewrite ``baseOffset`` and ``partitionLeaderEpoch`` (both before the CRC) without
re-encoding anything: that is how offsets are assigned on the hot path.

Each record is ``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | headers``; every varint is
zig-zag encoded, and a length of -1 means null.
"""

from __future__ import annotations

from kraftlog.common.records._record_batch import (
    RecordBatch,
    check_producer_fields,
    iter_batches,
)
from kraftlog.common.records._record_builder import (
    RecordBatchBuilder,
    build_batch,
    build_control_batch,
    record_size_upper_bound,
    rewrite_offset_and_epoch,
    set_log_append_time,
    set_max_timestamp,
    set_producer_fields,
)
from kraftlog.common.records._record_format import (
    ATTRIBUTES_POS,
    BASE_OFFSET_POS,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_POS,
    HEADER_SIZE,
    HEADER_STRUCT,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAGIC_V2,
    MAX_TIMESTAMP_POS,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    OFFSET_LENGTH_STRUCT,
    PARTITION_LEADER_EPOCH_POS,
    ControlRecordType,
    Header,
    Record,
    TimestampType,
    crc32c,
    read_varint,
    varint_size,
    write_varint,
)

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "TimestampType",
    "ControlRecordType",
    "Header",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "build_batch",
    "build_control_batch",
    "iter_batches",
    "crc32c",
    "CONTROL_FLAG",
    "COMPRESSION_MASK",
    "HEADER_STRUCT",
    "OFFSET_LENGTH_STRUCT",
    "check_producer_fields",
    "record_size_upper_bound",
    "BASE_OFFSET_POS",
    "LENGTH_POS",
    "PARTITION_LEADER_EPOCH_POS",
    "MAGIC_POS",
    "CRC_POS",
    "ATTRIBUTES_POS",
    "MAX_TIMESTAMP_POS",
    "write_varint",
    "varint_size",
    "read_varint",
    "rewrite_offset_and_epoch",
    "set_max_timestamp",
    "set_producer_fields",
    "set_log_append_time",
]
