"""pyproject.toml installs one package, ``kraftlog``, with true dependency floors (issue 13 §1).

The wheel itself is built and installed by tests/integration/test_install.py; these tests read
pyproject.toml, constraints/floors.txt and the generated modules in proto/.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FLOORS_FILE = ROOT / "constraints" / "floors.txt"
NAMESPACE = "kraftlog"


def _requirements() -> list[Requirement]:
    """Every direct dependency: the runtime ones and those of every extra (not kraftlog's own extras)."""
    project = PYPROJECT["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != NAMESPACE]


def _floor(req: Requirement) -> Version | None:
    floors = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
    return max(floors) if floors else None


def _pinned_floors() -> dict[str, Version]:
    pins = {}
    for line in FLOORS_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints/floors.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def _floors() -> dict[str, Version]:
    floors: dict[str, Version] = {}
    for req in _requirements():
        floor = _floor(req)
        if floor is not None:
            name = canonicalize_name(req.name)
            floors[name] = max(floor, floors.get(name, floor))
    return floors


def test_every_direct_dependency_has_a_floor() -> None:
    missing = [str(r) for r in _requirements() if _floor(r) is None]
    assert not missing, f"no lower bound: {missing}"


def test_floors_admit_the_generated_grpc_modules() -> None:
    """A floor below what proto/*_pb2*.py check at import would install and then fail with a
    RuntimeError (grpcio) or VersionError (protobuf) on the first import."""
    floors = _floors()
    grpc_needed = {
        Version(m)
        for f in (ROOT / "proto").glob("*_pb2_grpc.py")
        for m in re.findall(r"^GRPC_GENERATED_VERSION = '([^']+)'", f.read_text(), re.M)
    }
    protobuf_needed = {
        Version(".".join(m))
        for f in (ROOT / "proto").glob("*_pb2.py")
        for m in re.findall(r"ValidateProtobufRuntimeVersion\(\s*\S+,\s*(\d+),\s*(\d+),\s*(\d+),", f.read_text())
    }
    assert grpc_needed and protobuf_needed, "no version checks found in proto/"
    assert floors["grpcio"] >= max(grpc_needed), f"grpcio floor {floors['grpcio']} < {max(grpc_needed)}"
    assert floors["protobuf"] >= max(protobuf_needed), f"protobuf floor {floors['protobuf']} < {max(protobuf_needed)}"
    assert floors["grpcio-tools"] == max(grpc_needed), "make proto must use the grpcio-tools the modules name"


def test_constraints_pin_every_direct_dependency_at_its_floor() -> None:
    assert _pinned_floors() == _floors()


def test_only_the_kraftlog_namespace_is_installed() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    packages, package_dir = setuptools["packages"], setuptools["package-dir"]
    assert all(p == NAMESPACE or p.startswith(f"{NAMESPACE}.") for p in packages), packages
    assert set(package_dir) <= set(packages)

    def folder(package: str) -> Path:
        parts = package.split(".")
        for i in range(len(parts), 0, -1):
            mapped = package_dir.get(".".join(parts[:i]))
            if mapped is not None:
                return ROOT / mapped / Path(*parts[i:])
        raise AssertionError(f"{package} has no package-dir entry")

    listed = {folder(p).resolve() for p in packages}
    for package in packages:
        assert (folder(package) / "__init__.py").is_file(), f"{package}: no {folder(package)}/__init__.py"
    # every Python package folder under a mapped folder is listed, or the wheel would miss it
    for mapped in package_dir.values():
        for init in (ROOT / mapped).rglob("__init__.py"):
            missing = init.parent.relative_to(ROOT)
            assert init.parent.resolve() in listed, f"{missing} is not in [tool.setuptools] packages"
    # and every top-level folder that is a package is mapped (tests/ is not shipped)
    top = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert top <= {Path(v).parts[0] for v in package_dir.values()}, top
    # the namespace root is not a folder at the repository root, where it would shadow the mapping
    assert not (ROOT / NAMESPACE).exists()


def test_console_script_and_spark_extra() -> None:
    project = PYPROJECT["project"]
    assert project["scripts"] == {"kraftlog": "kraftlog.cli.__main__:main"}
    runtime = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert "pyspark" not in runtime, "a broker or controller host must not need pyspark"
    extras = project["optional-dependencies"]
    assert [Requirement(r).name for r in extras["spark"]] == ["pyspark", "venv-pack"]
    assert any(Requirement(r).name == NAMESPACE and "spark" in Requirement(r).extras for r in extras["dev"])
