"""Spark snapshot rebuild benchmark: the Spark job next to in-process replay of the same log.

For metadata logs of 1 M and 10 M records (``--quick``: 50 k and 150 k; the JSON keys keep their
names, the table says which sizes ran), generated with the tests' generator (every record type;
64 MiB segments, 8 MiB in --quick), measures in the same run:

- in-process replay: what a controller does to rebuild its image from the segments and write the
  snapshot (``read_log_dir`` -> ``MetadataDelta.replay`` -> ``write_snapshot``), one core;
- the Spark job (``kraftlog.spark.rebuild_snapshot``) on ``local[*]``, after a warm-up run on a
  small log (the SparkSession start is reported separately);

and checks that both write byte-identical snapshots. Records/s for both, the Spark/replay ratio,
how Spark's time grows with the log (seconds per million records at each size), and the Spark
job's phases (decode + shuffle, topic table, entity fold, write).

    python tests/perf/spark_bench.py [--quick] [--keep DIR]

Target (issue 5): the Spark time grows linearly with the log, and at 10 M records it is within 3x
of in-process replay on a 2-core machine. The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "spark"))

import structlog  # noqa: E402
from _loggen import generate_log  # noqa: E402

from kraftlog.metadata_log import MetadataDelta, MetadataImage, read_log_dir, write_snapshot  # noqa: E402

TARGET_RATIO = 3.0


def replay(log_dir: Path, out_dir: Path) -> tuple[float, Path]:
    started = time.perf_counter()
    delta = MetadataDelta(MetadataImage.EMPTY)
    replay_entry = delta.replay
    for entry in read_log_dir(log_dir):
        replay_entry(entry)
    image = delta.apply()
    path = write_snapshot(out_dir, image.offset, image.epoch, image.timestamp_ms, image.to_records())
    return time.perf_counter() - started, path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50 k and 150 k records instead of 1 M and 10 M")
    parser.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="generate the logs in DIR and keep them (reused by a later run with the same DIR)",
    )
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    sizes = {"1m": 50_000, "10m": 150_000} if args.quick else {"1m": 1_000_000, "10m": 10_000_000}
    segment_bytes = (8 << 20) if args.quick else (64 << 20)
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kraftlog-spark-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    figures: dict[str, object] = {
        "quick": args.quick,
        "master": args.master,
        "cpus": os.cpu_count(),
        "segment_bytes": segment_bytes,
    }
    try:
        logs = {}
        for label, n in sizes.items():
            d = base / f"log-{n}" / "__cluster_metadata-0"
            marker = d.parent / "complete"
            started = time.perf_counter()
            if not marker.exists():
                shutil.rmtree(d.parent, ignore_errors=True)
                generate_log(d, n, seed=42, segment_bytes=segment_bytes)
                marker.write_text(str(n))
            logs[label] = d
            size = sum(p.stat().st_size for p in d.glob("*.log"))
            print(
                f"log {label}: {n:,} records, {size / 2**20:,.0f} MiB in {len(list(d.glob('*.log')))} segments "
                f"(generated in {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
            figures[f"records_{label}"] = n
            figures[f"log_mib_{label}"] = round(size / 2**20, 1)

        from kraftlog.spark import rebuild_snapshot, spark_session

        started = time.perf_counter()
        spark = spark_session(args.master, app_name="kraftlog-spark-bench")
        figures["spark_session_start_s"] = round(time.perf_counter() - started, 2)
        figures["spark_parallelism"] = spark.sparkContext.defaultParallelism
        warm = base / "warmup" / "__cluster_metadata-0"
        if not warm.exists():
            generate_log(warm, 20_000, seed=1, segment_bytes=1 << 20)
        rebuild_snapshot(spark, str(warm), base / "warmup.checkpoint")

        rows = []
        for label, n in sizes.items():
            d = logs[label]
            out = base / f"spark-{n}.checkpoint"
            result = rebuild_snapshot(spark, str(d), out)
            spark_s = result.seconds
            ref_dir = base / f"replay-{n}"
            shutil.rmtree(ref_dir, ignore_errors=True)
            replay_s, ref = replay(d, ref_dir)
            identical = out.read_bytes() == ref.read_bytes()
            figures[f"spark_s_{label}"] = round(spark_s, 2)
            figures[f"replay_s_{label}"] = round(replay_s, 2)
            figures[f"spark_records_per_s_{label}"] = round(n / spark_s)
            figures[f"replay_records_per_s_{label}"] = round(n / replay_s)
            figures[f"ratio_{label}"] = round(spark_s / replay_s, 2)
            figures[f"identical_{label}"] = identical
            figures[f"spark_phases_{label}"] = {k: round(v, 2) for k, v in result.phases.items()}
            rows.append((label, n, replay_s, spark_s, identical, result.phases))
            print(f"  {label}: replay {replay_s:.1f} s, spark {spark_s:.1f} s, identical={identical}", flush=True)
        spark.stop()

        s1, s10 = figures["spark_s_1m"], figures["spark_s_10m"]
        n1, n10 = sizes["1m"], sizes["10m"]
        growth = (s10 / s1) / (n10 / n1)  # 1.0 = exactly linear
        figures["spark_growth_vs_linear"] = round(growth, 2)
        figures["spark_s_per_million_1m"] = round(s1 / (n1 / 1e6), 2)
        figures["spark_s_per_million_10m"] = round(s10 / (n10 / 1e6), 2)
        figures["target_ratio"] = TARGET_RATIO
        figures["meets_target"] = bool(figures["ratio_10m"] <= TARGET_RATIO)

        print()
        scale = " (--quick: scaled down)" if args.quick else ""
        print(f"Snapshot rebuild, {args.master} on {os.cpu_count()} CPUs{scale}")
        head = (
            f"{'log':<24}{'records':>12}{'replay s':>10}{'replay rec/s':>14}{'spark s':>9}"
            f"{'spark rec/s':>13}{'spark/replay':>14}{'identical':>11}"
        )
        print(head)
        print("-" * len(head))
        for label, n, replay_s, spark_s, identical, _phases in rows:
            name = f"{label} ({n // 1000:,}k records)" if args.quick else label
            print(
                f"{name:<24}{n:>12,}{replay_s:>10.1f}{n / replay_s:>14,.0f}{spark_s:>9.1f}"
                f"{n / spark_s:>13,.0f}{spark_s / replay_s:>13.2f}x{str(identical):>11}"
            )
        print()
        for label, _n, _r, _spark_s, _i, phases in rows:
            parts = ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
            print(f"spark phases {label}: {parts}")
        print(
            f"spark time growth from {n1:,} to {n10:,} records: x{s10 / s1:.2f} for x{n10 / n1:.0f} records "
            f"({growth:.2f} of linear); {figures['spark_s_per_million_1m']} -> "
            f"{figures['spark_s_per_million_10m']} s per million records"
        )
        print(
            f"target: spark within {TARGET_RATIO}x of replay at the larger log: "
            f"{figures['ratio_10m']}x -> {'met' if figures['meets_target'] else 'NOT met'}"
        )
        print(json.dumps(figures, sort_keys=True))
        ok = bool(figures["identical_1m"] and figures["identical_10m"])
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
