#!/usr/bin/env python3
"""Two rules of docs/architecture.md §2 that import-linter cannot state: privacy and no circles.

*Privacy*: a module whose name starts with ``_`` (``kraftlog.broker.kafka._wire``) is private to the
package that holds it (``kraftlog.broker.kafka``) and to that package's sub-packages; every other
module of kraftlog imports what it needs from the package's ``__init__``. import-linter's wildcards
match whole name segments, so it cannot say "any private module"; this reads every import statement
of every package module with ``ast`` (relative imports resolved; imports inside functions and
``TYPE_CHECKING`` blocks included) and lists the breaches. Tests are not package modules: they may
reach into a private module to test it.

*No circles*: no two modules import each other, directly or through others (Tarjan's strongly
connected components over the same statements). A circle means two modules are one seam cut in the
wrong place; import-linter's ``acyclic_siblings`` contract says the same of packages.

Usage: ``python deploy/scripts/privacy.py`` (exit 1, one line per breach or circle, when any is
found); `deploy/scripts/lint.py` runs it as the ``privacy`` check.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kraftlog"

__all__ = ["breaches", "circles", "main", "owner_of_private"]


def _modules(root: Path) -> Iterator[tuple[str, Path]]:
    """(dotted name, file) of every module the package-dir table maps into the namespace."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    for name, folder in config["tool"]["setuptools"]["package-dir"].items():
        if name == NAMESPACE:
            continue
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join([name, *parts]), path


def owner_of_private(target: str) -> str | None:
    """The package that owns ``target``'s first private segment, or None when it names none.

    ``kraftlog.broker.kafka._wire.X`` -> ``kraftlog.broker.kafka``; ``kraftlog.common.errors`` -> None.
    """
    parts = target.split(".")
    for index, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def _imported(module: str, path: Path, tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, target for the privacy rule, module imported) of every import statement."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                # `from pkg import _private` names something private of pkg; `from pkg import mod`
                # may import the submodule pkg.mod
                named = f"{target}.{alias.name}"
                yield node.lineno, named if alias.name.startswith("_") else target, named
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, alias.name


def _graph(root: Path) -> tuple[dict[str, Path], dict[str, list[tuple[int, str, str]]]]:
    files: dict[str, Path] = {}
    imports: dict[str, list[tuple[int, str, str]]] = {}
    for module, path in _modules(root):
        files[module] = path
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imports[module] = [i for i in _imported(module, path, tree) if i[1].startswith(NAMESPACE + ".")]
    return files, imports


def breaches(root: Path = ROOT) -> list[str]:
    """One line per import of a private module (or name) from outside the package that holds it."""
    files, imports = _graph(root)
    found: list[str] = []
    for module, statements in imports.items():
        for lineno, target, _ in statements:
            owner = owner_of_private(target)
            if owner is None or module == owner or module.startswith(owner + "."):
                continue
            found.append(
                f"{files[module].relative_to(root)}:{lineno}: {module} imports {target}, private to {owner} "
                f"(import it from {owner})"
            )
    return found


def circles(root: Path = ROOT) -> list[list[str]]:
    """Every set of modules that import each other (in a circle); a package is its ``__init__``."""
    files, imports = _graph(root)
    edges: dict[str, set[str]] = {m: set() for m in files}
    for module, statements in imports.items():
        for _, _, named in statements:
            # the module imported: `from a import b` imports a.b when that is a module, else a; a
            # compiled extension (storage._cscan) is no module of ours
            target = named if named in files else named.rpartition(".")[0]
            if target not in files or target == module:
                continue
            edges[module].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(files) + 100))
    for module in sorted(files):
        if module not in index:
            visit(module)
    return found


def main() -> int:
    found = breaches()
    for line in found:
        print(line)
    cycles = circles()
    for component in cycles:
        print("circle: " + " <-> ".join(component))
    print(f"privacy: {len(found)} import(s) of another package's private module, {len(cycles)} circle(s)")
    return 1 if found or cycles else 0


if __name__ == "__main__":
    sys.exit(main())
