"""`Log.append_as_leader` writes small appends through a patched copy and larger ones as a vectored
write (a new 17-byte prefix per batch plus the caller's untouched bytes). Both paths must put the
same bytes on disk: the producer's batch with baseOffset and partitionLeaderEpoch assigned by the
log, the CRC still valid, and the index pointing at each batch.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import kraftlog.storage._log_append as append_module
from kraftlog.storage import Log, LogConfig, build_batch, iter_batches

NOW = 1_700_000_000_000


def _batch(n: int, value_size: int, ts: int) -> bytes:
    return build_batch([(b"k%d" % i, bytes([65 + i % 26]) * value_size) for i in range(n)], timestamp_ms=ts)


def _expected(batch: bytes, base_offset: int, epoch: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, epoch)
    return bytes(out)


@pytest.mark.parametrize("copy_below", [0, 1 << 30], ids=["vectored", "copy"])
@pytest.mark.parametrize("shape", [(1, 100), (3, 2000), (15, 1000), (2, 200_000)])
def test_both_write_paths_store_the_batch_with_assigned_offset_and_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_below: int, shape: tuple[int, int]
) -> None:
    monkeypatch.setattr(append_module, "_COPY_BELOW_BYTES", copy_below)
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=0), clock_ms=lambda: NOW)
    n, value_size = shape
    batches = [_batch(n, value_size, NOW - 10 + i) for i in range(3)]
    log.append_as_leader(batches[0], 4)
    info = log.append_as_leader(batches[1] + batches[2], 5)  # two batches in one request
    assert (info.first_offset, info.last_offset, info.num_batches) == (n, 3 * n - 1, 2)
    on_disk = log.segments[0].log_path.read_bytes()
    expected = _expected(batches[0], 0, 4) + _expected(batches[1], n, 5) + _expected(batches[2], 2 * n, 5)
    assert on_disk == expected
    for _pos, b in iter_batches(on_disk):
        b.ensure_valid()  # the CRC covers nothing the log rewrote
    log.update_high_watermark(log.log_end_offset)
    for i in range(3):  # every batch found through the index from its own offsets
        assert log.read(i * n + n - 1, 1).first_batch_offset == i * n
    log.close()
