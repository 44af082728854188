"""Spark is the [spark] extra: nothing but `kraftlog snapshot rebuild` imports pyspark, and without it
that command says which extra to install (issue 13 §1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kraftlog import spark as _spark
from kraftlog.cli.__main__ import main


@pytest.fixture
def no_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import pyspark` fail as it does where the extra is not installed."""
    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyspark", None)


def test_require_pyspark_names_the_extra(no_pyspark: None) -> None:
    with pytest.raises(_spark.SparkNotInstalledError, match=r"pip install 'kraftlog\[spark\]'") as info:
        _spark.require_pyspark()
    assert isinstance(info.value, ImportError)
    with pytest.raises(_spark.SparkNotInstalledError):
        _spark.spark_session()


def test_rebuild_without_pyspark_exits_1_with_one_line(no_pyspark: None, tmp_path: Path, capsys) -> None:
    code = main(["snapshot", "rebuild", "--log", str(tmp_path), "--out", str(tmp_path / "x.checkpoint")])
    err = capsys.readouterr().err
    assert code == 1
    assert "pip install 'kraftlog[spark]'" in err and "Traceback" not in err
    assert err.count("\n") == 1
    assert not (tmp_path / "x.checkpoint").exists()


def test_an_environment_archive_that_does_not_exist_is_refused_before_spark_starts(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    missing = tmp_path / "env.tar.gz"
    with pytest.raises(_spark.SnapshotRebuildError, match="no such file"):
        _spark.spark_session("spark://127.0.0.1:1", environment=str(missing))
    args = ["snapshot", "rebuild", "--log", str(tmp_path), "--out", str(tmp_path / "s.checkpoint")]
    assert main([*args, "--master", "spark://127.0.0.1:1", "--environment-archive", str(missing)]) == 2
