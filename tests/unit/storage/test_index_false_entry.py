"""An offset index entry made false by a flipped bit (issue 28, the ``bitflip_index`` storage
fault) in a segment the load does not recover (below the recovery point, or after a clean
shutdown): the load's sanity check reads only the last entry, so reads must not trust an entry
that does not name the batch at its position. Before, a read at an offset whose floor entry was
false started past that offset, and a consumer skipped records.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from kraftlog.common.records import iter_batches
from kraftlog.storage import Log, LogConfig, build_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def _clock() -> int:
    return NOW


def _closed_log(directory: Path) -> tuple[Log, int]:
    log = Log(directory, CONFIG, clock_ms=_clock)
    for i in range(100):
        log.append_as_leader(build_batch([(None, f"v{i}".encode() * 20)], timestamp_ms=NOW), 0)
    end = log.log_end_offset
    log.close()
    return log, end


def _first_batch_read_at(log: Log, offset: int) -> tuple[int, int]:
    info = log.read(offset, 1)
    first = next(b for _p, b in iter_batches(info.records))
    return first.base_offset, first.last_offset


def _assert_every_offset_reads_its_batch(log: Log, end: int) -> None:
    for offset in range(end):
        base, last = _first_batch_read_at(log, offset)
        assert base <= offset <= last, (offset, base)


def test_a_false_entry_below_its_batch_is_caught_and_the_index_rebuilt(tmp_path: Path) -> None:
    log, end = _closed_log(tmp_path / "t-0")
    index = sorted(log.dir.glob("*.index"))[0]
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 24
    # entry 2 still increasing, but naming an offset below the batch at its position
    rel_prev, _ = struct.unpack_from(">ii", raw, 8)
    rel, pos = struct.unpack_from(">ii", raw, 16)
    struct.pack_into(">i", raw, 16, rel_prev + 1)
    index.write_bytes(bytes(raw))
    again = Log(log.dir, CONFIG, had_clean_shutdown=True, recovery_point=end, clock_ms=_clock)
    target = rel_prev + 1  # its floor entry is now the false one, pointing at the batch ending at rel
    assert _first_batch_read_at(again, target)[0] <= target
    _assert_every_offset_reads_its_batch(again, end)
    assert struct.unpack_from(">ii", index.read_bytes(), 16) == (rel, pos)  # rebuilt on disk too
    again.close()


@pytest.mark.parametrize("seed", range(40))
def test_any_flipped_bit_of_an_index_never_makes_a_read_skip(tmp_path: Path, seed: int) -> None:
    log, end = _closed_log(tmp_path / "t-0")
    rng = random.Random(seed)
    index = rng.choice([p for p in sorted(log.dir.glob("*.index")) if p.stat().st_size])
    raw = bytearray(index.read_bytes())
    at = rng.randrange(len(raw))
    raw[at] ^= 1 << rng.randrange(8)
    index.write_bytes(bytes(raw))
    again = Log(log.dir, CONFIG, had_clean_shutdown=True, recovery_point=end, clock_ms=_clock)
    _assert_every_offset_reads_its_batch(again, end)
    again.close()


def test_a_read_only_view_walks_past_a_false_entry_without_rebuilding(tmp_path: Path) -> None:
    log, end = _closed_log(tmp_path / "t-0")
    index = sorted(log.dir.glob("*.index"))[0]
    raw = bytearray(index.read_bytes())
    rel_prev, _ = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">i", raw, 16, rel_prev + 1)
    index.write_bytes(bytes(raw))
    again = Log(log.dir, CONFIG, had_clean_shutdown=True, recovery_point=end, clock_ms=_clock)
    seg = again.segments[0]
    view = seg.read_only_view()
    found = view.find_batch(seg.base_offset + rel_prev + 1)
    assert found is not None and found.base_offset <= seg.base_offset + rel_prev + 1 <= found.last_offset
    assert index.read_bytes() == bytes(raw)  # the view left the shared index alone
    view.close_without_flush()
    again.close()
