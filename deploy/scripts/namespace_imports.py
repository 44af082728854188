#!/usr/bin/env python3
"""Move every reference to kraftlog's packages into the ``kraftlog`` namespace (issue 13 §1).

The code lives in top-level folders (``proto/``, ``cli/``, ``storage/`` ...) that pyproject maps to
``kraftlog.proto``, ``kraftlog.cli``, ``kraftlog.storage``; this codemod rewrites what still names a
package at the top level, in every file git tracks:

* ``*.py`` and ``*.pyi`` (the generated ``*_pb2*`` modules included):
  - ``from X[.y] import ...``                 -> ``from kraftlog.X[.y] import ...``
  - ``import X`` / ``import X as n``          -> ``from kraftlog import X`` / ``... import X as n``
  - ``import X.y as n``                       -> ``import kraftlog.X.y as n``
  - ``import X.y`` (binds ``X``)              -> ``import kraftlog.X.y`` plus ``from kraftlog import X``
  - module names in strings: ``"-m", "X..."`` (subprocess argv), the first argument of
    ``setattr``/``delattr``/``patch``/``import_module``/``importorskip``/``find_spec`` calls,
    ``sys.modules["X..."]``, ``setitem(sys.modules, "X...", ...)``, ``sys.modules.get/pop("X...")``,
    ``__import__("X.y").y`` (-> ``__import__("kraftlog.X.y").X.y``), the elements of tuples and
    lists assigned to a name ending in ``_MODULES``, and ``python -m X`` in text;
* ``*.proto``: ``import "X/f.proto";`` -> ``import "kraftlog/X/f.proto";`` (protoc then runs with
  ``-Ikraftlog/proto=proto``, see the Makefile's ``proto`` target);
* ``pyproject.toml``: entry points (``"X.__main__:main"``) in ``[project.scripts]``,
  ``[project.gui-scripts]`` and ``[project.entry-points.*]``;
* ``*.sh``, ``*.service``: ``python -m X``.

Ordering rules: it only prefixes names that start with one of the packages, so running it twice
changes nothing (``kraftlog.X`` never starts with ``X``), and it never touches other strings (config
keys such as ``"broker.rack"`` or log event names look like module paths but are not). The packages
are ``DEFAULT_PACKAGES`` plus every ``kraftlog.<name>`` of pyproject's ``[tool.setuptools.package-dir]``,
so a package added there later is picked up. A file holding the marker ``namespace_imports: skip-file``
is left alone (this script, and tests whose inputs are the old forms).

The serialized descriptors inside ``*_pb2.py`` name their ``.proto`` files; text edits cannot fix
those, so after a run that changed ``.proto`` files regenerate them with ``make proto``
(``tests/integration/test_proto_fresh.py`` fails until then).

Usage: ``python deploy/scripts/namespace_imports.py [--check] [ROOT]``; prints each changed file,
``--check`` changes nothing and exits 1 when a file would change.
"""
# namespace_imports: skip-file

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

NAMESPACE = "kraftlog"
DEFAULT_PACKAGES: tuple[str, ...] = ("proto", "cli", "client", "storage", "deploy", "broker", "quorum", "metadata_log")
SKIP_MARKER = "namespace_imports: skip-file"
PYTHON_SUFFIXES = (".py", ".pyi")
TEXT_SUFFIXES = (".sh", ".service")
ENTRY_POINT_SECTION = re.compile(r"^\[project\.(scripts|gui-scripts|entry-points\.[^\]]+)\]\s*$")

__all__ = ["Rewriter", "packages_of", "rewrite_tree", "main"]


def packages_of(root: Path) -> tuple[str, ...]:
    """``DEFAULT_PACKAGES`` plus the top-level ``kraftlog.<name>`` entries of pyproject's package-dir."""
    names = list(DEFAULT_PACKAGES)
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        package_dir = data.get("tool", {}).get("setuptools", {}).get("package-dir", {})
        for name in package_dir:
            head, _, rest = name.partition(".")
            if head == NAMESPACE and rest and "." not in rest and rest not in names:
                names.append(rest)
    return tuple(names)


class Rewriter:
    """The rewrite rules for one set of top-level package names (pure text in, text out)."""

    def __init__(self, packages: Iterable[str], namespace: str = NAMESPACE) -> None:
        self.ns = namespace
        alt = "|".join(sorted((re.escape(p) for p in packages), key=len, reverse=True))
        mod = rf"(?:{alt})(?:\.\w+)*"  # a dotted module path under one of the packages
        self._from = re.compile(rf"^(?P<head>[ \t]*(?:>>> |\.\.\. )?from[ \t]+)(?P<mod>{mod})(?=[ \t]+import\b)", re.M)
        self._import = re.compile(
            r"^(?P<indent>[ \t]*)(?P<prompt>(?:>>> |\.\.\. )?)import[ \t]+"
            r"(?P<names>[\w. \t,]+?)(?P<tail>[ \t]*(?:#.*)?)$",
            re.M,
        )
        self._top = re.compile(rf"^(?:{alt})(?:\.|$)")
        q = r"(?P<q>[\"'])"
        self._dash_m = re.compile(rf"(?P<pre>[\"']-m[\"'][ \t]*,\s*){q}(?P<mod>{mod})(?P=q)")
        calls = (
            r"(?:setattr|delattr|patch|import_module|importorskip|find_spec|setitem\(\s*sys\.modules\s*,|"
            r"delitem\(\s*sys\.modules\s*,|sys\.modules\.(?:get|pop)\(|sys\.modules\[)"
        )
        self._call = re.compile(rf"(?P<pre>\b{calls}\(?\s*){q}(?P<mod>{mod})(?P=q)")
        self._dunder = re.compile(rf"__import__\({q}(?P<top>{alt})(?P<rest>(?:\.\w+)*)(?P=q)\)")
        self._modules_tuple = re.compile(r"^(?P<head>[ \t]*\w*_MODULES\b[^=\n]*=\s*)(?P<body>[(\[][^)\]]*[)\]])", re.M)
        self._mod_string = re.compile(rf"{q}(?P<mod>{mod})(?P=q)")
        self._python_m = re.compile(rf"(?P<pre>\bpython[\d.]*[ \t]+-m[ \t]+)(?P<mod>{mod})\b(?!\.)")
        self._proto_import = re.compile(
            rf"^(?P<pre>[ \t]*import[ \t]+(?:public[ \t]+|weak[ \t]+)?\")"
            rf"(?P<path>(?:{alt})/[^\"]+)\"",
            re.M,
        )
        self._entry_point = re.compile(rf"^(?P<pre>[ \t]*[\w.\-]+[ \t]*=[ \t]*\")(?P<mod>{mod})(?=[:\"])")

    # -- helpers -----------------------------------------------------------------------------------

    def _ns(self, module: str) -> str:
        return f"{self.ns}.{module}"

    def _prefix(self, match: re.Match[str]) -> str:
        """Prefix the ``mod`` group, quoting it again with the ``q`` group when there is one."""
        groups = match.groupdict()
        quote = groups.get("q") or ""
        return f"{groups.get('pre') or ''}{quote}{self._ns(match['mod'])}{quote}"

    def _rewrite_import(self, match: re.Match[str], bound: set[tuple[str, str]]) -> str:
        indent, prompt, tail = match["indent"], match["prompt"], match["tail"]
        items = [item.strip() for item in match["names"].split(",")]
        if not any(self._top.match(item) for item in items) or any(not item for item in items):
            return match[0]
        lines: list[str] = []
        for item in items:
            module, _, alias = (part.strip() for part in item.partition(" as "))
            if not self._top.match(module):
                lines.append(f"import {item}")
            elif "." not in module:
                lines.append(f"from {self.ns} import {module}" + (f" as {alias}" if alias else ""))
            elif alias:
                lines.append(f"import {self._ns(module)} as {alias}")
            else:
                # `import X.y` binds X: import the submodule, then bind X from the namespace
                top = module.split(".", 1)[0]
                lines.append(f"import {self._ns(module)}")
                if not indent and (indent, top) in bound:
                    continue
                bound.add((indent, top))
                lines.append(f"from {self.ns} import {top}")
        out = [f"{indent}{prompt}{line}" for line in lines]
        out[0] += tail
        return "\n".join(out)

    def _rewrite_modules_tuple(self, match: re.Match[str]) -> str:
        return match["head"] + self._mod_string.sub(self._prefix, match["body"])

    def _rewrite_dunder(self, match: re.Match[str]) -> str:
        q, top, rest = match["q"], match["top"], match["rest"]
        return f"__import__({q}{self.ns}.{top}{rest}{q}).{top}"

    # -- per file type -----------------------------------------------------------------------------

    def python(self, text: str) -> str:
        """Rewrite a Python module or stub."""
        bound: set[tuple[str, str]] = set()
        text = self._from.sub(lambda m: m["head"] + self._ns(m["mod"]), text)
        text = self._import.sub(lambda m: self._rewrite_import(m, bound), text)
        text = self._dash_m.sub(self._prefix, text)
        text = self._call.sub(self._prefix, text)
        text = self._dunder.sub(self._rewrite_dunder, text)
        text = self._modules_tuple.sub(self._rewrite_modules_tuple, text)
        return self._python_m.sub(self._prefix, text)

    def proto(self, text: str) -> str:
        """Rewrite the import lines of a ``.proto`` file."""
        return self._proto_import.sub(lambda m: f'{m["pre"]}{self.ns}/{m["path"]}"', text)

    def pyproject(self, text: str) -> str:
        """Rewrite the entry points of pyproject.toml (only inside the entry point tables)."""
        out, in_entry_points = [], False
        for line in text.splitlines(keepends=True):
            if line.startswith("["):
                in_entry_points = bool(ENTRY_POINT_SECTION.match(line))
            elif in_entry_points:
                line = self._entry_point.sub(lambda m: m["pre"] + self._ns(m["mod"]), line)
            out.append(line)
        return "".join(out)

    def shell(self, text: str) -> str:
        """Rewrite ``python -m X`` in shell scripts and unit files."""
        return self._python_m.sub(self._prefix, text)

    def for_path(self, path: Path) -> Callable[[str], str] | None:
        """The rule set for ``path``, or None for a file this codemod does not touch."""
        if path.suffix in PYTHON_SUFFIXES:
            return self.python
        if path.suffix == ".proto":
            return self.proto
        if path.name == "pyproject.toml":
            return self.pyproject
        if path.suffix in TEXT_SUFFIXES:
            return self.shell
        return None


def tracked_files(root: Path) -> list[Path]:
    """Every file git tracks under ``root`` (the codemod never touches untracked files)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    return [root / name for name in out.decode().split("\0") if name]


def rewrite_tree(root: Path, *, check: bool = False) -> list[Path]:
    """Rewrite every tracked file under ``root``; returns the files that changed (or would)."""
    rewriter = Rewriter(packages_of(root))
    changed = []
    for path in tracked_files(root):
        rule = rewriter.for_path(path)
        if rule is None or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if SKIP_MARKER in text:
            continue
        new = rule(text)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: rewrite (or with ``--check`` only list) the files that name top-level packages."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    parser.add_argument(
        "root",
        nargs="?",
        default=Path(__file__).resolve().parents[2],
        type=Path,
        help="the repository (default: the one holding this script)",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    changed = rewrite_tree(root, check=args.check)
    for path in changed:
        print(("would rewrite " if args.check else "rewrote ") + path.relative_to(root).as_posix())
    if args.check:
        return 1 if changed else 0
    if any(path.suffix == ".proto" for path in changed):
        print("a .proto file changed: run `make proto` to regenerate the gRPC modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
