"""Spark is the [spark] extra: nothing but `kraftlog snapshot rebuild` imports pyspark, and without it
that command says which extra to install (issue 13 §1)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kraftlog import spark as _spark

pytestmark = pytest.mark.integration


def test_the_cli_does_not_import_pyspark() -> None:
    """Every command module loads (``kraftlog --help``) on a host without pyspark."""
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "from kraftlog.cli.__main__ import build_parser\n"
        "build_parser()\n"
        "import kraftlog.broker, kraftlog.quorum, kraftlog.client, kraftlog.metadata_log\n"
        "print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['pyspark']"  # only the blocked entry: nothing imported it


def test_executor_zip_holds_the_namespaced_package(tmp_path: Path) -> None:
    """What a non-local Spark master ships to executors imports as kraftlog.spark and its floors."""
    target = _spark._session._metadata_package_zip(tmp_path)
    with zipfile.ZipFile(target) as zf:
        names = set(zf.namelist())
    assert {
        "kraftlog/__init__.py",
        "kraftlog/metadata_log/__init__.py",
        "kraftlog/spark/__init__.py",
        "kraftlog/spark/_fold.py",
        "kraftlog/common/__init__.py",
        "kraftlog/common/records/__init__.py",
        "kraftlog/common/errors/__init__.py",
        "kraftlog/metadata_log/image/__init__.py",
    } <= names
    code = "import kraftlog.spark._fold as f; print(f.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(target))
