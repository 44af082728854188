"""On-disk format of the metadata log: segment files, snapshot files and their retention.

These files are the documented, stable interface of the metadata log (docs/architecture.md §3): brokers fetch
them, operators archive them and the Spark snapshot job reads them without any kraftlog server code.
The format is therefore deliberately small and is fully specified here; changing it requires a new
snapshot ``version`` or a new file suffix, never a silent reinterpretation.

Directory
=========

The controller keeps one directory, ``<metadata.log.dir>/__cluster_metadata-0/``, holding:

* ``{base_offset:020d}.log`` -- log segments (``00000000000000000000.log``, ...);
* ``{offset:020d}-{epoch:010d}.checkpoint`` -- snapshots;
* ``{offset:020d}-{epoch:010d}.checkpoint.part`` -- a snapshot being written; never valid, ignored by
  every reader and removed when a `MetadataLogWriter` opens the directory.

Every other file name is ignored.

Frame
=====

Both file kinds are a plain concatenation of frames, with no file header::

    length  : uint32, big-endian   -- number of payload bytes, >= 1
    crc     : uint32, big-endian   -- CRC-32C (Castagnoli) of the payload bytes only
    payload : `length` bytes

A reader walks frames from position 0. The first frame whose header is incomplete (fewer than 8
bytes left), whose ``length`` is 0 or reaches past the end of the file, or whose CRC does not match,
ends the valid part of the file: its position is the *torn position* and nothing after it is read.
(A length of 0 is rejected because the CRC-32C of no bytes is 0, so a zero-filled tail left by a crash
would otherwise pass as valid frames.) A frame that passes the CRC but whose payload does not decode
is not torn: it is corruption or a newer writer, and readers raise instead of dropping it.

Log segment
===========

Each frame payload of a ``.log`` file is one log entry, a msgpack map (see `_records`)::

    {"offset": int, "epoch": int, "timestamp_ms": int, "record": {"type": int, "version": int, ...}}

Ordering rules:

* offsets are dense: the first entry of ``{B:020d}.log`` has offset ``B`` and each next entry the
  previous offset + 1;
* segments are contiguous: the base offset of a segment is the last offset of the previous segment
  + 1 (an empty segment -- only possible as the newest file -- records the next offset to write);
* any missing offset, between entries or between segments, is an error (`MetadataLogGapError`),
  never silently skipped; a torn tail only ever appears at the end of the newest segment, where the
  writer truncates it on open (a torn non-last segment is reported and shows up as a gap).

The writer rolls to a new segment before a frame would make the active segment exceed
``segment_bytes`` (a single frame larger than that still gets a segment of its own).

Snapshot
========

A snapshot holds the records that rebuild the metadata image as of log offset ``offset`` (the last
log offset it contains; the log continues at ``offset + 1``), written by a leader of ``epoch``. Its
frames are, in this order:

1. a header, msgpack map ``{"kind": "snapshot_header", "version": 0, "last_contained_offset": offset,
   "epoch": epoch, "timestamp_ms": ms, "record_count": n}``;
2. ``n`` record frames, each a bare record map ``{"type": ..., "version": ..., ...}`` (no offset);
3. a footer, msgpack map ``{"kind": "snapshot_footer", "record_count": n}``.

A snapshot without its footer, with a torn or corrupt frame anywhere, with bytes after the footer,
with a record count that disagrees, or whose header disagrees with its file name is invalid and
`read_snapshot` raises. Snapshots are written to ``.checkpoint.part``, fsynced, renamed to
``.checkpoint`` and the directory fsynced, so a complete name always means a complete file.

Retention
=========

A segment may be deleted only when every offset in it is <= the offset of the latest snapshot on disk
and it is not the newest segment; deletion goes oldest first (so the remaining segments stay one
contiguous range) while the segments total more than ``metadata.max.retention.bytes`` (-1: no limit,
nothing deleted). Snapshots older than ``oldest remaining base offset - 1`` cannot be followed by the
log any more and are deleted, except the latest. `oldest_available_offset` tells the server whether
a fetcher must load a snapshot first.

This module imports no other kraftlog package (docs/architecture.md §2).
"""

from __future__ import annotations

from kraftlog.metadata_log.log_files._log_frames import (
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    BadFrame,
    FrameIterator,
    MetadataLogCorruptError,
    MetadataLogGapError,
    encode_frame,
    frame_length_problem,
    iter_frames,
    torn_frame_header,
)
from kraftlog.metadata_log.log_files._log_names import (
    SegmentId,
    SnapshotId,
    latest_snapshot,
    list_segments,
    list_snapshots,
    parse_segment_file_name,
    parse_snapshot_file_name,
    remove_partial_snapshots,
    segment_file_name,
    snapshot_file_name,
)
from kraftlog.metadata_log.log_files._log_retention import (
    DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
    DEFAULT_MAX_RETENTION_BYTES,
    RetentionResult,
    SnapshotPolicy,
    delete_covered_segments,
    oldest_available_offset,
    should_snapshot,
)
from kraftlog.metadata_log.log_files._log_segments import (
    MetadataLogWriter,
    SegmentReadResult,
    read_log_dir,
    read_segment,
)
from kraftlog.metadata_log.log_files._snapshots import (
    SNAPSHOT_FORMAT_VERSION,
    Snapshot,
    check_snapshot_header,
    parse_snapshot_frames,
    read_metadata_file,
    read_snapshot,
    snapshot_header_map,
    write_snapshot,
    write_snapshot_payloads,
)

__all__ = [
    "BadFrame",
    "DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS",
    "DEFAULT_MAX_RETENTION_BYTES",
    "FRAME_HEADER",
    "FRAME_HEADER_SIZE",
    "FrameIterator",
    "MetadataLogCorruptError",
    "MetadataLogGapError",
    "MetadataLogWriter",
    "RetentionResult",
    "SNAPSHOT_FORMAT_VERSION",
    "SegmentId",
    "SegmentReadResult",
    "Snapshot",
    "SnapshotId",
    "SnapshotPolicy",
    "check_snapshot_header",
    "delete_covered_segments",
    "encode_frame",
    "frame_length_problem",
    "iter_frames",
    "latest_snapshot",
    "list_segments",
    "list_snapshots",
    "oldest_available_offset",
    "parse_segment_file_name",
    "parse_snapshot_file_name",
    "parse_snapshot_frames",
    "read_log_dir",
    "read_metadata_file",
    "read_segment",
    "read_snapshot",
    "remove_partial_snapshots",
    "segment_file_name",
    "should_snapshot",
    "snapshot_file_name",
    "snapshot_header_map",
    "torn_frame_header",
    "write_snapshot",
    "write_snapshot_payloads",
]
