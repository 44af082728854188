"""The leader scans an uncompressed batch's records where they lie in the produce payload
(`scan_records` with ``start``/``end``) instead of copying them out. The window must decide exactly
as the copy does: the same records accepted, the same record named when they are not, whatever
bytes surround the window.
"""

from __future__ import annotations

from typing import Any

import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, mutated
from hypothesis import given
from hypothesis import strategies as st

from kraftlog.common.records import HEADER_SIZE, RecordBatchBuilder
from kraftlog.storage._scan import Malformed, record_fields, scan_records

pytestmark = pytest.mark.timeout(TIMEOUT)

NOW = 1_700_000_000_000


@st.composite
def sections(draw: st.DrawFn) -> tuple[bytes, int]:
    """An uncompressed records section (uniform or mixed records) and its record count."""
    n = draw(st.integers(1, 80))
    builder = RecordBatchBuilder()
    if draw(st.booleans()):  # uniform: the run path's case
        size = draw(st.integers(0, 40))
        for i in range(n):
            builder.append(NOW + draw(st.integers(0, 200)), b"k%03d" % (i % 1000), b"v" * size)
    else:
        for _ in range(n):
            builder.append(
                NOW + draw(st.integers(-100, 100)),
                draw(st.none() | st.binary(max_size=8)),
                draw(st.none() | st.binary(max_size=30)),
            )
    return builder.build()[HEADER_SIZE:], n


def _outcome(data: bytes, count: int, dense: bool, start: int = 0, end: int | None = None) -> Any:
    try:
        scan = scan_records(data, count, last_offset_delta=count - 1, dense=dense, start=start, end=end)
    except Malformed as bad:
        return ("malformed", bad.index)
    return scan, record_fields(data, count, start, end)


@FUZZ
@given(sections(), st.data(), st.booleans(), st.binary(max_size=20), st.binary(max_size=20))
def test_scan_in_place_decides_as_the_copy(
    case: tuple[bytes, int], data: st.DataObject, dense: bool, before: bytes, after: bytes
) -> None:
    section, count = case
    section = data.draw(st.just(section) | mutated(section))
    count = max(count + data.draw(st.sampled_from((0, 0, 0, -1, 1))), 0)
    copied = _outcome(section, count, dense)
    in_place = _outcome(before + section + after, count, dense, len(before), len(before) + len(section))
    assert in_place == copied
