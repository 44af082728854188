"""How `make test` spreads the tests outside tests/unit over two pytest-xdist workers
(``--dist loadgroup``): each test file is one unit of work, so a module-scoped cluster is started
once and its tests run in their file's order; the tests that load the machine on their own -- the
chaos runs (a 6-node cluster and its workload), the benchmarks' quick variants and Spark's jobs --
form one group that runs one test at a time, so two of them never starve each other's timers."""

from __future__ import annotations

from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
#: the folders and files of the heavy group
_HEAVY = (_TESTS / "chaos", _TESTS / "spark", _TESTS / "integration" / "test_benchmarks_quick.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve()
        heavy = any(path == h or h in path.parents for h in _HEAVY)
        item.add_marker(pytest.mark.xdist_group("heavy" if heavy else str(path.relative_to(_TESTS))))
