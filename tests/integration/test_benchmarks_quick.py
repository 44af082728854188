"""Every benchmark in tests/perf runs in its --quick variant and ends with one JSON line of figures.

Speed targets are checked by the benchmarks themselves (they print the ratio next to the target);
this test only keeps the scripts working, so a full run on demand never finds them broken.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PERF = Path(__file__).resolve().parents[1] / "perf"
EXPECTED_KEYS = {
    "storage_bench.py": {"append_ratio_1mib", "append_ratio_16kib", "read_ratio", "append_mb_s_1mib"},
    "broker_bench.py": {
        "produce_rf1_mb_s",
        "produce_rf1_ratio",
        "idempotent_produce_ratio",
        "txns_per_s",
        "consume_rf1_ratio",
        "produce_rf3_ratio",
        "e2e_p99_ms",
        "failover_s",
        "tls_produce_ratio",
        "tls_consume_ratio",
    },
    "spark_bench.py": {"spark_s_1m", "replay_s_1m", "spark_s_10m", "replay_s_10m"},
    "quorum_bench.py": {"commits_per_s", "create_10k_partitions_s", "failover_median_s", "load_100k_partitions_s"},
    "cleaner_bench.py": {"compaction_s", "produce_max_ms_baseline", "produce_max_ms_compacting", "fenced_samples"},
    "kafka_bench.py": {
        "sendfile_consume_mb_s",
        "copy_consume_mb_s",
        "grpc_consume_mb_s",
        "raw_read_mb_s",
        "produce_vs_tansu_ratio",
        "consume_vs_tansu_ratio",
    },
    "group_bench.py": {
        "rebalance_classic_s",
        "rebalance_consumer_protocol_s",
        "offset_commits_per_s",
        "echo_round_trip_ms",
    },
    "share_bench.py": {
        "group_2_records_per_s",
        "share_1_records_per_s",
        "share_4_records_per_s",
        "share_8_records_per_s",
        "share_vs_group_ratio_8",
    },
    "overload_bench.py": {
        "baseline_produce_p99_ms",
        "attack_produce_p99_ms",
        "after_produce_p99_ms",
        "baseline_e2e_p99_ms",
        "attack_e2e_p99_ms",
        "attack_apiversions_max_ms",
        "rss_baseline_mib",
        "rss_attack_peak_mib",
        "rss_after_mib",
        "idle_opened",
        "bomb_pairs",
    },
}


def _overload_sane(figures: dict[str, Any]) -> None:
    """Every phase measured something and every attacker ran (no bound on the figures: the
    machine is shared; the full run is where they are read)."""
    for phase in ("baseline", "attack", "after"):
        assert figures[f"{phase}_produce_count"] > 0 and figures[f"{phase}_e2e_count"] > 0, phase
    assert figures["produce_failed"] == 0 and figures["consume_missing"] == 0
    assert figures["idle_opened"] == figures["idle_connections"]
    assert figures["bomb_pairs_sent"] > 0 and figures["slow_readers"] > 0
    assert 0 < figures["rss_baseline_mib"] <= figures["rss_attack_peak_mib"]


SANITY = {"overload_bench.py": _overload_sane}


@pytest.mark.parametrize("script", sorted(p.name for p in PERF.glob("*.py") if not p.name.startswith("_")))
def test_quick_variant_prints_json_last(script: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PERF / script), "--quick"], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    figures = json.loads(last)
    assert isinstance(figures, dict) and figures
    missing = EXPECTED_KEYS.get(script, set()) - figures.keys()
    assert not missing, f"{script} JSON lacks {missing}"
    assert all(isinstance(v, (int, float)) for v in figures.values() if not isinstance(v, (str, dict, list)))
    if script in SANITY:
        SANITY[script](figures)
