"""tests/unit/conftest.py closes the ways out of the process: each of them fails naming the rule."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
from collections.abc import Callable

import grpc
import pytest


def _udp_send() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"x", ("127.0.0.1", 9))


def _tcp_bind() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))


def _asyncio_server() -> None:
    async def serve() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        server.close()

    asyncio.run(serve())


def _spawned_process() -> None:
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()


@pytest.mark.parametrize(
    "escape",
    [
        _udp_send,
        _tcp_bind,
        lambda: socket.create_connection(("127.0.0.1", 9)),
        _asyncio_server,
        lambda: grpc.insecure_channel("127.0.0.1:9"),
        lambda: subprocess.run(["true"], check=False),
        lambda: os.system("true"),
        _spawned_process,
    ],
    ids=["udp", "bind", "connect", "asyncio-server", "grpc-channel", "subprocess", "os.system", "spawn"],
)
def test_each_way_out_fails_naming_the_rule(escape: Callable[[], object]) -> None:
    with pytest.raises(AssertionError, match="opens no socket and starts no process"):
        escape()


def test_an_event_loop_still_wakes_itself() -> None:
    """asyncio's self-pipe is a socketpair inside the process: it stays allowed."""

    async def hop() -> int:
        await asyncio.sleep(0)
        return 1

    assert asyncio.run(hop()) == 1
