"""The `privacy` check of `make lint` (deploy/scripts/privacy.py): it must find an import of another
package's private module and a circle of imports, and accept what the rules allow."""

from __future__ import annotations

import functools
import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "scripts" / "privacy.py"


def _privacy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kraftlog_privacy_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.setuptools.package-dir]
            "kraftlog" = "src/kraftlog"
            "kraftlog.alpha" = "alpha"
            "kraftlog.beta" = "beta"
            """
        )
    )
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_owner_of_private_names_the_package_that_holds_the_module() -> None:
    privacy = _privacy()
    assert privacy.owner_of_private("kraftlog.broker.kafka._wire.X") == "kraftlog.broker.kafka"
    assert privacy.owner_of_private("kraftlog.common._acl") == "kraftlog.common"
    assert privacy.owner_of_private("kraftlog.common.errors") is None
    assert privacy.owner_of_private("kraftlog.common.__init__") is None


def test_an_import_of_another_packages_private_module_is_a_breach(tmp_path: Path) -> None:
    privacy = _privacy()
    root = _tree(
        tmp_path,
        {
            "alpha/__init__.py": "from kraftlog.alpha._impl import thing\n",
            "alpha/_impl.py": "thing = 1\n",
            "alpha/sub/__init__.py": "from kraftlog.alpha._impl import thing\n",  # inside alpha: allowed
            "beta/__init__.py": "",
            "beta/_uses.py": "from kraftlog.alpha._impl import thing\nfrom kraftlog.alpha import thing as ok\n",
            "beta/_names.py": "from kraftlog.alpha import _hidden\n",
        },
    )
    found = privacy.breaches(root)
    assert len(found) == 2
    assert "beta/_uses.py:1" in found[1] or "beta/_uses.py:1" in found[0]
    assert any("kraftlog.alpha._hidden" in line for line in found)
    assert all("alpha/sub" not in line for line in found)


def test_modules_that_import_each_other_make_a_circle(tmp_path: Path) -> None:
    privacy = _privacy()
    root = _tree(
        tmp_path,
        {
            "alpha/__init__.py": "",
            "alpha/_a.py": "from kraftlog.alpha._b import b\na = 1\n",
            # a type-only import closes a circle too
            "alpha/_b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kraftlog.alpha._a import a\nb = 1\n"
            ),
            "beta/__init__.py": "from kraftlog.beta._c import c\n",
            "beta/_c.py": "import kraftlog.alpha._a\nc = 1\n",
        },
    )
    assert privacy.circles(root) == [["kraftlog.alpha._a", "kraftlog.alpha._b"]]


def test_a_package_whose_module_imports_the_package_back_is_a_circle(tmp_path: Path) -> None:
    privacy = _privacy()
    root = _tree(
        tmp_path,
        {
            "alpha/__init__.py": "from kraftlog.alpha._a import a\n",
            "alpha/_a.py": "from kraftlog.alpha import sub\na = 1\n",
            "alpha/sub/__init__.py": "from kraftlog.alpha import a\n",
            "beta/__init__.py": "",
        },
    )
    assert privacy.circles(root) == [["kraftlog.alpha", "kraftlog.alpha._a", "kraftlog.alpha.sub"]]


def test_the_repository_keeps_both_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    privacy = _privacy()
    # both rules read the same import graph of the whole repository (some 600 files parsed and
    # walked): build it once for the two, not once each
    monkeypatch.setattr(privacy, "_graph", functools.cache(privacy._graph))
    assert privacy.breaches() == []
    assert privacy.circles() == []
