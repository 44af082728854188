"""The built wheel installs one top-level package, ``kraftlog``, next to a foreign ``proto`` (issue 13 §1).

proto-plus, which every Google client library pulls in, installs a top-level ``proto`` package; the
wheel used to install its own ``proto`` (and ``cli``, ``storage`` ...) beside it. The test builds
the wheel from this tree, installs it with ``pip --target`` into an empty directory, puts a stand-in
``proto`` package before it on the path and runs the installed code from a neutral directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("kraftlog-*.whl")
    return built


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"kraftlog"}, sorted(tops)
    for expected in (
        "kraftlog/__init__.py",
        "kraftlog/proto/admin_pb2.py",
        "kraftlog/proto/admin.proto",
        "kraftlog/proto/admin_pb2.pyi",
        "kraftlog/deploy/chaos/__init__.py",
        "kraftlog/cli/__main__.py",
    ):
        assert expected in names, expected
    assert not any(n.startswith("kraftlog/tests/") or "/scripts/" in n for n in names)


def test_installed_next_to_a_foreign_proto_package(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")} <= {"kraftlog", "bin"}
    foreign = tmp_path / "foreign"
    (foreign / "proto").mkdir(parents=True)
    (foreign / "proto" / "__init__.py").write_text("FOREIGN = True\n")
    neutral = tmp_path / "cwd"
    neutral.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(foreign), str(target)]))
    code = (
        "import proto, kraftlog, kraftlog.proto, kraftlog.proto.admin_pb2_grpc, kraftlog.cli.__main__\n"
        "assert proto.FOREIGN and proto.__file__ != kraftlog.proto.__file__\n"
        "print(kraftlog.__file__); print(kraftlog.__version__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=neutral, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    path, installed_version = result.stdout.split()
    assert Path(path).is_relative_to(target)
    assert installed_version == version("kraftlog")
    cli = subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", "--version"],
        capture_output=True,
        text=True,
        cwd=neutral,
        env=env,
        timeout=60,
    )
    assert (cli.returncode, cli.stdout) == (0, f"kraftlog {installed_version}\n"), cli.stderr
