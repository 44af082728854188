"""``kraftlog dump-log``: print the content of segment and index files, like ``kafka-dump-log.sh``.

An offline tool for operators: it reads files directly, never through a broker, so it works on a
stopped node, on a copy of a segment, and on damaged files. It must therefore never trust the bytes
it reads: a torn or corrupt tail is reported as the position where valid data ends, not a crash.

The output follows Kafka's ``DumpLogSegments`` line for line (same field names and order), so what
people know from Kafka, and the scripts they wrote against it, apply. ``--output json`` prints the
same fields with snake_case keys, one JSON object per file on one line.

Segments can be gigabytes: the ``.log`` file is read in bounded chunks, and JSON is streamed rather
than built in memory.
"""

from __future__ import annotations

from kraftlog.cli._dump_log_cmd import (
    add_parser,
    dump_files,
    run,
)
from kraftlog.cli._dump_log_scan import (
    DumpOptions,
)

__all__ = [
    "add_parser",
    "run",
    "dump_files",
    "DumpOptions",
]
