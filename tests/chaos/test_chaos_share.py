"""The share workload's chaos run (issue 27): ``kraftlog chaos run --workload share`` as a real
process with its own 6-node cluster, a seeded fault every 3-5 s for 6 s, while two kraftlog
ShareConsumers (gRPC) and two confluent-kafka ShareConsumers (librdkafka, the Kafka listener) of
one share group read the produce workload's topic, acknowledging explicitly (a few RELEASEs on
purpose). Every acknowledged produce is ACCEPTED by someone, no record is held by two consumers at
once, no delivery passes the delivery limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

pytest.importorskip("confluent_kafka")

ROOT = Path(__file__).resolve().parents[2]
SEED = 20262702


@pytest.mark.timeout(300)
def test_share_chaos_run_loses_nothing_and_never_double_acquires(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraftlog.cli",
            "chaos",
            "run",
            "--workload",
            "share",
            "--duration",
            "6s",
            "--seed",
            str(SEED),
            "--interval",
            "3-5",
            "--work-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {proc.stderr[-3000:]}"
    print(proc.stdout)
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["seed"] == SEED and result["workload"] == "share" and result["faults"] >= 1
    assert result["share_members"] == {"kraftlog": 2, "confluent-kafka": 2}
    assert (result["lost"], result["double_acquired"], result["over_delivery_limit"]) == (0, 0, 0), {
        k: v for k, v in result.items() if k.endswith("_examples")
    }
    assert result["share_drained"] and result["share_consumers_with_records"] == 4
    assert result["share_accepted"] == result["acknowledged"] > 100
    assert result["redeliveries"] > 0  # the workload's own RELEASEs at least
    assert proc.returncode == 0
