#!/usr/bin/env python3
"""The static checks CI runs before the tests: ruff (lint and format), mypy, import-linter, privacy.

Why a script: the code lives in root folders (``storage/``, ``quorum/`` ...) that pyproject maps into
the ``kraftlog`` namespace through setuptools' editable finder, an import hook that neither mypy nor
import-linter (grimp) can follow. So this builds ``build/typecheck/kraftlog/``, a tree of symlinks laid
out as the installed package is (one link per entry of ``[tool.setuptools.package-dir]``, so a package
added there is checked without touching this file), and points both tools at it. Their settings live
in pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``, ``[tool.importlinter]``).

Usage: ``python deploy/scripts/lint.py [ruff|format|mypy|imports ...]`` (default: the gating ones,
`GATING`); exits 1 when any check fails, after running every requested one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "typecheck"
NAMESPACE = "kraftlog"
CHECKS = ("ruff", "format", "mypy", "imports", "privacy")
#: What `make lint` (and so `make test`) runs: all of them. mypy checks every package (strict per
#: pyproject for common, storage, metadata_log, quorum and broker).
GATING = CHECKS

__all__ = ["build_tree", "main"]


def build_tree(root: Path = ROOT, tree: Path = TREE) -> Path:
    """(Re)build the symlink tree and return the directory to put on MYPYPATH / PYTHONPATH."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    if tree.exists():
        shutil.rmtree(tree)
    (tree / NAMESPACE).mkdir(parents=True)
    for name, folder in sorted(package_dir.items()):
        if name == NAMESPACE:
            # The namespace root holds files, not only subpackages: link each of them.
            for entry in (root / folder).iterdir():
                if entry.suffix in (".py", ".pyi", ".typed"):
                    (tree / NAMESPACE / entry.name).symlink_to(entry)
            continue
        prefix, _, sub = name.partition(".")
        if prefix != NAMESPACE or "." in sub:
            raise SystemExit(f"lint: package-dir entry {name!r} is not kraftlog.<package>")
        (tree / NAMESPACE / sub).symlink_to(root / folder, target_is_directory=True)
    return tree


def _packages(root: Path = ROOT) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return [name for name in config["tool"]["setuptools"]["package-dir"] if name != NAMESPACE]


def _run(label: str, argv: list[str], env: dict[str, str] | None = None) -> bool:
    print(f"== {label}: {' '.join(argv)}", flush=True)
    done = subprocess.run(argv, cwd=ROOT, env=env, check=False)
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the static checks of kraftlog.")
    parser.add_argument(
        "checks", nargs="*", metavar="CHECK", help=f"which checks to run, of {', '.join(CHECKS)} (default: all)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.checks) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check {', '.join(unknown)} (choose from {', '.join(CHECKS)})")
    args.checks = args.checks or list(GATING)
    python = sys.executable
    ok = True
    if "ruff" in args.checks:
        ok &= _run("ruff", [python, "-m", "ruff", "check", "."])
    if "format" in args.checks:
        ok &= _run("ruff format", [python, "-m", "ruff", "format", "--check", "."])
    if "privacy" in args.checks:
        ok &= _run("privacy", [python, str(Path(__file__).with_name("privacy.py"))])
    if {"mypy", "imports"} & set(args.checks):
        tree = build_tree()
        env = dict(os.environ, MYPYPATH=str(tree), PYTHONPATH=str(tree))
        if "mypy" in args.checks:
            ok &= _run("mypy", [python, "-m", "mypy", *[a for p in _packages() for a in ("-p", p)]], env)
        if "imports" in args.checks:
            # import-linter has no `python -m` entry; its console script may carry a stale shebang
            # in a copied venv, so call the command function through this interpreter.
            ok &= _run(
                "import-linter", [python, "-c", "from importlinter.cli import lint_imports_command as c; c()"], env
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
