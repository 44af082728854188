"""The codemod deploy/scripts/namespace_imports.py: each rewrite rule, what it must leave alone, and
that a second run changes nothing. Its inputs are the old top-level forms, hence the marker below.

namespace_imports: skip-file
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "scripts" / "namespace_imports.py"


def _load():
    spec = importlib.util.spec_from_file_location("namespace_imports", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ni = _load()
RW = ni.Rewriter(ni.DEFAULT_PACKAGES)

PYTHON_CASES = [
    (
        "from proto import errors_pb2 as proto_dot_errors__pb2\n",
        "from kraftlog.proto import errors_pb2 as proto_dot_errors__pb2\n",
    ),
    ("from storage._log import Log\n", "from kraftlog.storage._log import Log\n"),
    (
        "    from metadata_log import (\n        A,\n    )\n",
        "    from kraftlog.metadata_log import (\n        A,\n    )\n",
    ),
    ("import storage\n", "from kraftlog import storage\n"),
    ("    import metadata_log  # lazily\n", "    from kraftlog import metadata_log  # lazily\n"),
    ("import proto.errors as errors\n", "import kraftlog.proto.errors as errors\n"),
    ("import cli.__main__ as cli_main\n", "import kraftlog.cli.__main__ as cli_main\n"),
    (
        "import cli._configs\nimport cli._topics\n",
        "import kraftlog.cli._configs\nfrom kraftlog import cli\nimport kraftlog.cli._topics\n",
    ),
    (
        "def f():\n    import cli._a\n    import cli._b\n",
        "def f():\n    import kraftlog.cli._a\n    from kraftlog import cli\n"
        "    import kraftlog.cli._b\n    from kraftlog import cli\n",
    ),
    ("import os, storage\n", "import os\nfrom kraftlog import storage\n"),
    (
        'subprocess.run([sys.executable, "-m", "cli", "serve"])\n',
        'subprocess.run([sys.executable, "-m", "kraftlog.cli", "serve"])\n',
    ),
    ('[python,\n "-m",\n "cli.x"]\n', '[python,\n "-m",\n "kraftlog.cli.x"]\n'),
    ('monkeypatch.setattr("quorum.raft.random", r)\n', 'monkeypatch.setattr("kraftlog.quorum.raft.random", r)\n'),
    (
        "monkeypatch.setitem(sys.modules, 'cli._logging', None)\n",
        "monkeypatch.setitem(sys.modules, 'kraftlog.cli._logging', None)\n",
    ),
    ('m = pytest.importorskip("storage._errors")\n', 'm = pytest.importorskip("kraftlog.storage._errors")\n'),
    ('importlib.import_module("broker")\n', 'importlib.import_module("kraftlog.broker")\n'),
    ('sys.modules["client"]\n', 'sys.modules["kraftlog.client"]\n'),
    (
        'x = __import__("proto.errors").errors.TopicAuthorizationFailedError\n',
        'x = __import__("kraftlog.proto.errors").proto.errors.TopicAuthorizationFailedError\n',
    ),
    (
        '_COMMAND_MODULES: tuple[str, ...] = ("cli._serve",\n    "cli._local")\n',
        '_COMMAND_MODULES: tuple[str, ...] = ("kraftlog.cli._serve",\n    "kraftlog.cli._local")\n',
    ),
    ('"""Run it with ``python -m cli serve``."""\n', '"""Run it with ``python -m kraftlog.cli serve``."""\n'),
]

UNTOUCHED = [
    'cfg["broker.session.timeout.ms"]\n',  # config keys look like module paths
    'log.info("quorum.started")\n',
    '_log = structlog.get_logger("deploy.chaos")\n',  # a logger name, not an import
    'CHOICES = ("cli._serve",)\n',  # not a *_MODULES tuple
    "import os\nfrom kraftlog import storage\n",
    "from protocols import x\nimport clients\nimport storage_extra\n",  # other names that share a prefix
    "# import storage in a comment\n",
    "subprocess.run(['-m', 'pytest'])\n",
]


@pytest.mark.parametrize(("before", "after"), PYTHON_CASES)
def test_python_rule(before: str, after: str) -> None:
    assert RW.python(before) == after


@pytest.mark.parametrize("before", [b for b, _ in PYTHON_CASES] + UNTOUCHED)
def test_second_run_changes_nothing(before: str) -> None:
    once = RW.python(before)
    assert RW.python(once) == once


@pytest.mark.parametrize("text", UNTOUCHED)
def test_leaves_other_text_alone(text: str) -> None:
    assert RW.python(text) == text


def test_proto_imports() -> None:
    before = (
        'syntax = "proto3";\nimport "proto/errors.proto";\nimport public "proto/x.proto";\n'
        'import "google/protobuf/empty.proto";\n'
    )
    after = (
        'syntax = "proto3";\nimport "kraftlog/proto/errors.proto";\nimport public "kraftlog/proto/x.proto";\n'
        'import "google/protobuf/empty.proto";\n'
    )
    assert RW.proto(before) == after
    assert RW.proto(after) == after


def test_pyproject_entry_points_only() -> None:
    before = (
        '[project]\nname = "kraftlog"\n[project.scripts]\nkraftlog = "cli.__main__:main"\n'
        '[project.entry-points."x.plugins"]\np = "broker._server"\n'
        '[tool.setuptools.package-data]\nproto = "cli.x"\n'
    )
    after = (
        '[project]\nname = "kraftlog"\n[project.scripts]\nkraftlog = "kraftlog.cli.__main__:main"\n'
        '[project.entry-points."x.plugins"]\np = "kraftlog.broker._server"\n'
        '[tool.setuptools.package-data]\nproto = "cli.x"\n'
    )
    assert RW.pyproject(before) == after
    assert RW.pyproject(after) == after


def test_packages_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"kraftlog" = "src/kraftlog"\n"kraftlog.common" = "common"\n'
        '"kraftlog.storage" = "storage"\n"kraftlog.common.x" = "common/x"\n'
    )
    assert ni.packages_of(tmp_path) == (*ni.DEFAULT_PACKAGES, "common")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_tree_run_is_idempotent_and_skips_untracked(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "__main__.py").write_text("from storage import Log\n")
    (tmp_path / "skipped.py").write_text("# namespace_imports: skip-file\nimport storage\n")
    (tmp_path / "untracked.py").write_text("import storage\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "cli/__main__.py", "skipped.py")
    assert ni.main(["--check", str(tmp_path)]) == 1
    assert ni.main([str(tmp_path)]) == 0
    assert (tmp_path / "cli" / "__main__.py").read_text() == "from kraftlog.storage import Log\n"
    assert (tmp_path / "skipped.py").read_text().endswith("import storage\n")
    assert (tmp_path / "untracked.py").read_text() == "import storage\n"
    assert ni.main(["--check", str(tmp_path)]) == 0


def test_the_repository_names_no_top_level_package() -> None:
    """Every import and module string of the repository is in the namespace (issue 13 §1)."""
    stray = [p.relative_to(ROOT).as_posix() for p in ni.rewrite_tree(ROOT, check=True)]
    assert not stray, f"run `python deploy/scripts/namespace_imports.py`: {stray}"
