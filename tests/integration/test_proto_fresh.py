"""The committed gRPC modules must be exactly what `make proto` generates from proto/*.proto."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROTOS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "proto").glob("*.proto"))
PROTO_IMPORT_ROOT = "kraftlog/proto"  # what protoc sees proto/ as (the Makefile's -Ikraftlog/proto=proto)


def test_there_are_protos() -> None:
    assert PROTOS, "proto/*.proto is empty"


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    """The same protoc call as `make proto`: proto/ is seen as kraftlog/proto/, so the modules import
    each other as `kraftlog.proto.*` and register `kraftlog/proto/*.proto` in the descriptor pool;
    protoc writes them under kraftlog/proto/ of the output dir, the Makefile copies them to proto/."""
    pytest.importorskip("grpc_tools")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_IMPORT_ROOT}=proto",
        f"--python_out={tmp_path}",
        f"--grpc_python_out={tmp_path}",
        f"--pyi_out={tmp_path}",
        *PROTOS,
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    out = tmp_path / PROTO_IMPORT_ROOT
    generated = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    assert generated, "protoc generated nothing"
    stale = []
    for name in generated:
        committed = ROOT / "proto" / name
        if not committed.exists() or committed.read_bytes() != (out / name).read_bytes():
            stale.append(f"proto/{name}")
    assert not stale, f"generated gRPC modules are stale, run `make proto`: {stale}"


def test_generated_modules_live_in_the_namespace() -> None:
    """Nothing generated names a top-level `proto` module or registers a `proto/...` file, which
    another distribution's protos could collide with in the process-wide descriptor pool."""
    from kraftlog.proto import admin_pb2

    assert admin_pb2.DESCRIPTOR.name == f"{PROTO_IMPORT_ROOT}/admin.proto"
    assert admin_pb2.CreateTopicsRequest.__module__ == "kraftlog.proto.admin_pb2"
    for module in (ROOT / "proto").glob("*_pb2*.py*"):
        for line in module.read_text().splitlines():
            assert not line.startswith(("from proto ", "import proto")), f"{module.name}: {line}"


def test_every_generated_module_has_its_proto() -> None:
    sources = {Path(p).stem for p in PROTOS}
    for module in (ROOT / "proto").glob("*_pb2*.py*"):
        stem = module.name.split("_pb2")[0]
        assert stem in sources, f"{module.name} has no proto/{stem}.proto: delete it or restore the proto"


def test_echo_service_round_trip() -> None:
    """The generated code imports and works over a real in-process gRPC server."""
    from concurrent import futures

    import grpc

    from kraftlog.proto import diagnostics_pb2, diagnostics_pb2_grpc

    class Echo(diagnostics_pb2_grpc.DiagnosticsServiceServicer):
        def Echo(self, request, context):
            return diagnostics_pb2.EchoResponse(payload=request.payload)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    diagnostics_pb2_grpc.add_DiagnosticsServiceServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = diagnostics_pb2_grpc.DiagnosticsServiceStub(channel)
            reply = stub.Echo(diagnostics_pb2.EchoRequest(payload=b"kraftlog"), timeout=10)
        assert reply.payload == b"kraftlog"
    finally:
        server.stop(None)
