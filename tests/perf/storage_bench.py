"""Storage benchmark: `Log.append_as_leader` and `Log.read` next to raw os.write / os.read.

Both sides write the same bytes to files in the same directory in the same run, so the ratio is
meaningful on a noisy machine. Each measurement is repeated and the median kept; the order of the
raw and the log run alternates between repetitions.

    python tests/perf/storage_bench.py [--quick] [--dir DIR] [--mib N] [--repeat R]

Targets (issue 2): append >= 0.7 of raw at 1 MiB batches and >= 0.5 at 16 KiB; read >= 0.7 of raw.
The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog

from kraftlog import storage

RECORD_BYTES = 1024


def make_batch(batch_bytes: int) -> bytes:
    """A producer batch of 1 KiB records filling about ``batch_bytes``."""
    per_record = RECORD_BYTES + 16
    count = max(1, batch_bytes // per_record)
    value = os.urandom(RECORD_BYTES - 8)
    builder = storage.RecordBatchBuilder()
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(now, f"{i:08d}".encode(), value)
    return builder.build()


def raw_append(path: Path, batch: bytes, n: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, batch)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def log_append(directory: Path, batch: bytes, n: int) -> tuple[float, storage.Log]:
    log = storage.Log(directory, storage.LogConfig())
    start = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(batch, 0)
    return time.perf_counter() - start, log


def raw_read(path: Path, chunk: int) -> tuple[float, int]:
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        start = time.perf_counter()
        while True:
            data = os.read(fd, chunk)
            if not data:
                break
            total += len(data)
        return time.perf_counter() - start, total
    finally:
        os.close(fd)


def log_read(log: storage.Log, chunk: int) -> tuple[float, int]:
    log.update_high_watermark(log.log_end_offset)
    offset = log.log_start_offset
    total = 0
    start = time.perf_counter()
    end = log.log_end_offset
    while offset < end:
        info = log.read(offset, chunk, max_offset=end)
        data = info.records
        if not data:
            break
        total += len(data)
        offset = info.next_offset
    return time.perf_counter() - start, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short variant for CI")
    parser.add_argument("--dir", default=None, help="directory for the files (default: a temp dir)")
    parser.add_argument("--mib", type=int, default=None, help="MiB written per measurement")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median kept)")
    args = parser.parse_args(argv)
    # the log's own diagnostics go to stderr at warning level: stdout is the report
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    mib = args.mib or (48 if args.quick else 384)
    repeat = args.repeat or (3 if args.quick else 5)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraftlog-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    results: dict[str, float] = {}
    rows = []
    try:
        read_raw_rates, read_log_rates = [], []
        for label, batch_bytes in (("16kib", 16 * 1024), ("1mib", 1024 * 1024)):
            batch = make_batch(batch_bytes)
            n = max(1, (mib * 1024 * 1024) // len(batch))
            total_mb = n * len(batch) / 1e6
            raw_rates, log_rates = [], []
            for r in range(repeat):
                run_dir = base / f"run-{label}-{r}"
                run_dir.mkdir()
                raw_path = run_dir / "raw.bin"
                order = ("raw", "log") if r % 2 == 0 else ("log", "raw")
                log = None
                for which in order:
                    if which == "raw":
                        raw_rates.append(total_mb / raw_append(raw_path, batch, n))
                    else:
                        elapsed, log = log_append(run_dir / "bench-0", batch, n)
                        log_rates.append(total_mb / elapsed)
                assert log is not None
                if label == "1mib":
                    seg = log.segments[0].log_path
                    for which in order:
                        if which == "raw":
                            t, got = raw_read(seg, 1024 * 1024)
                            read_raw_rates.append(got / 1e6 / t)
                        else:
                            t, got = log_read(log, 1024 * 1024)
                            read_log_rates.append(got / 1e6 / t)
                log.close()
                shutil.rmtree(run_dir)
            raw_med, log_med = statistics.median(raw_rates), statistics.median(log_rates)
            results[f"append_mb_s_{label}"] = round(log_med, 1)
            results[f"raw_write_mb_s_{label}"] = round(raw_med, 1)
            results[f"append_ratio_{label}"] = round(log_med / raw_med, 3)
            rows.append((f"append {label} batches", raw_med, log_med))
        rmed, lmed = statistics.median(read_raw_rates), statistics.median(read_log_rates)
        results["read_mb_s"] = round(lmed, 1)
        results["raw_read_mb_s"] = round(rmed, 1)
        results["read_ratio"] = round(lmed / rmed, 3)
        rows.append(("sequential read 1 MiB", rmed, lmed))
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(f"storage benchmark: {mib} MiB per measurement, median of {repeat}, dir {base}")
    print(f"{'measurement':<26}{'raw MB/s':>12}{'Log MB/s':>12}{'ratio':>8}{'target':>8}")
    targets = {"append 16kib batches": 0.5, "append 1mib batches": 0.7, "sequential read 1 MiB": 0.7}
    for name, raw, log in rows:
        print(f"{name:<26}{raw:>12.1f}{log:>12.1f}{log / raw:>8.2f}{targets[name]:>8.2f}")
    results["mib_per_measurement"] = mib
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
