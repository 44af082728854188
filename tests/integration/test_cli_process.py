"""Tests of the ``kraftlog`` entry point (`cli.__main__`): parsing, exit codes, the demo, and the
installed console script run as a real subprocess."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlog.storage import Log, LogConfig, build_batch

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KRAFTLOG_SCRIPT = Path(sys.executable).with_name("kraftlog")  # the console script of this venv


@pytest.mark.skipif(not KRAFTLOG_SCRIPT.exists(), reason="console script not installed in this venv")
def test_console_script_version(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(KRAFTLOG_SCRIPT), "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kraftlog {importlib.metadata.version('kraftlog')}\n"


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    log = Log(tmp_path / "t-0", LogConfig())
    try:
        log.append_as_leader(build_batch([(b"k", b"hello")], timestamp_ms=1_700_000_000_000), 0)
        path = log.segments[0].log_path
    finally:
        log.close()
    return path


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


def test_python_dash_m_cli(segment: Path) -> None:
    result = _run([sys.executable, "-m", "kraftlog.cli", "dump-log", "--print-data-log", str(segment)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"Dumping {segment}"
    assert "key: k payload: hello" in result.stdout


def test_python_dash_m_cli_user_error_has_no_traceback(tmp_path: Path) -> None:
    result = _run([sys.executable, "-m", "kraftlog.cli", "dump-log", str(tmp_path / "missing.log")])
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.skipif(not KRAFTLOG_SCRIPT.exists(), reason="console script not installed in this venv")
def test_console_script(segment: Path) -> None:
    result = _run([str(KRAFTLOG_SCRIPT), "dump-log", "--output", "json", str(segment)])
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["batches"][0]["count"] == 1
    help_result = _run([str(KRAFTLOG_SCRIPT), "--help"])
    assert help_result.returncode == 0 and "dump-log" in help_result.stdout
