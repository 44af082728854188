"""When kafka-python can serve as the independent decoder of a batch our decoder accepted.

kafka-python departs from Kafka's ``DefaultRecord.readFrom`` in two places: it reads a record's
attributes byte as a varint (Java reads one int8 and ignores it), and it refuses a header key that
is not UTF-8 (Java's ``Utils.utf8`` substitutes U+FFFD, as we do). A batch with either is compared
with no independent decoder.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlog.common.records import Record, RecordBatch
from kraftlog.storage._scan import _parse_record
from kraftlog.storage._validator import records_section


def kafka_python_can_judge(batch: RecordBatch, records: Sequence[Record]) -> bool:
    if any("\ufffd" in header.key for record in records for header in record.headers):
        return False
    data = records_section(batch.to_bytes(), batch.attributes)
    pos, end = 0, len(data)
    for _ in range(batch.records_count):
        layout = _parse_record(data, pos, end)
        if data[pos + layout.w_len] >= 0x80:
            return False
        pos = layout.stop
    return True
