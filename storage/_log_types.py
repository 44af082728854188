"""The partition log's vocabulary: append and fetch results, special timestamps, file suffixes and
partition directory names (see `storage._log`).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import structlog

from kraftlog.common import SYSTEM_CLOCK
from kraftlog.storage._errors import KafkaStorageError
from kraftlog.storage._file_region import FileRegion

EARLIEST_TIMESTAMP = -2


LATEST_TIMESTAMP = -1


MAX_TIMESTAMP = -3


PARTITION_METADATA_FILE = "partition.metadata"


_INT32_MAX = 2**31 - 1


CLEANED_SUFFIX = ".cleaned"


SWAP_SUFFIX = ".swap"


DELETED_SUFFIX = ".deleted"


_log = structlog.get_logger(__name__)


def _wall_clock_ms() -> int:
    return SYSTEM_CLOCK.wall_ms()


class AppendOrigin(enum.Enum):
    """Who is appending: clients get the full producer checks; coordinators may write control
    batches; replication appends the leader's batches unchanged."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int


class FetchDataInfo(NamedTuple):
    """Bytes of whole batches plus the offsets a fetch response reports.

    ``next_offset`` is the offset after the last batch returned (where the next read starts), or
    the requested offset when nothing was returned. A `read_region` answer carries the batches as
    ``region`` (a range of the segment file) and leaves ``records`` empty.
    """

    records: bytes
    first_batch_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    region: FileRegion | None = None

    @property
    def num_bytes(self) -> int:
        return self.region.size if self.region is not None else len(self.records)


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_topic_partition(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``; the topic itself may contain dashes."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise KafkaStorageError(f"{name!r} is not a partition directory name (topic-partition)")
    return topic, int(part)
