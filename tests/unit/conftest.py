"""Unit tests start no process and open no socket: those are integration tests (tests/integration).

tests/unit mirrors the packages (tests/unit/storage tests kraftlog.storage, ...). Test modules share
helpers by name (``from test_replica_manager import setup``), so every package folder (and tests/unit
itself, for ``_hypothesis_budget``) is put on sys.path here, whichever file pytest is asked to run.

Property tests run a small budget by default and a long one with HYPOTHESIS_PROFILE=thorough
(`make fuzz`): see _hypothesis_budget.py.

Every test here runs with the ways out of the process closed: binding or connecting a socket,
gRPC servers and channels, and starting a process raise, naming the rule. An event loop's own
socketpair stays allowed (asyncio needs it to wake itself)."""

from __future__ import annotations

import _posixsubprocess
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

_HERE = Path(__file__).resolve().parent
for _folder in [_HERE, *sorted(_HERE.iterdir())]:
    if _folder.is_dir() and not _folder.name.startswith(("_", ".")) and str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# before any test module is imported: their @settings(max_examples=examples(N)) read the profile
from _hypothesis_budget import load_profile  # noqa: E402

load_profile()

_RULE = "a unit test opens no socket and starts no process: put it under tests/integration"


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError(_RULE)


@pytest.fixture(autouse=True)
def _no_sockets_and_no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # sendto: a datagram needs neither bind nor connect to leave the process
    for name in ("bind", "connect", "connect_ex", "sendto"):
        monkeypatch.setattr(socket.socket, name, _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse)
    # multiprocessing's spawn and forkserver start methods call fork_exec without Popen
    monkeypatch.setattr(_posixsubprocess, "fork_exec", _refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse)
    for module, names in (
        (grpc, ("server", "insecure_channel", "secure_channel")),
        (grpc.aio, ("server", "insecure_channel", "secure_channel")),
    ):
        for name in names:
            monkeypatch.setattr(module, name, _refuse)
