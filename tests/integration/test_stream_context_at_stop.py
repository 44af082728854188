"""Streams dropped while the server waits to send (issue 25): on main the gRPC security wrapper
held the request context across a ``yield``; a stream its client dropped while the server was
blocked sending is closed by the event loop's async-generator finalizer in another task, where the
context reset failed and the node logged "Task exception was never retrieved ... ContextVar token
was created in a different Context" (seen at stop and on controller changes, when brokers drop
their FetchMetadata streams)."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from kraftlog.deploy._cluster import LocalCluster
from kraftlog.proto import diagnostics_pb2, diagnostics_pb2_grpc

pytestmark = pytest.mark.integration

_BAD = "was created in a different Context"


def _bad_lines(cluster: LocalCluster) -> dict[int, int]:
    return {n: spec.log_path.read_text(errors="replace").count(_BAD) for n, spec in cluster.nodes.items()}


def test_a_stream_dropped_while_the_server_sends_logs_no_task_exception(tmp_path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, brokers=0, combined=True)
    cluster.start(timeout_s=120)
    try:
        cluster.wait_unfenced_brokers(count=1, timeout_s=90)
        payload = b"x" * (256 * 1024)
        with grpc.insecure_channel(cluster.bootstrap_servers.split(",")[0]) as channel:
            stub = diagnostics_pb2_grpc.DiagnosticsServiceStub(channel)
            for _ in range(5):  # each: the client never reads, the server blocks sending, the client leaves
                sent: list[int] = []
                left = threading.Event()

                def requests(sent=sent, left=left):
                    for i in range(64):
                        yield diagnostics_pb2.EchoRequest(payload=payload)
                        sent.append(i)
                    left.wait(30)  # keep the call open without sending more

                stream = stub.EchoStream(requests(), timeout=30)
                # flow control: the server stops taking requests once its answers cannot be sent
                deadline, seen = time.monotonic() + 15, -1
                while time.monotonic() < deadline and (len(sent) != seen or not sent):
                    seen = len(sent)
                    time.sleep(0.5)
                stream.cancel()
                left.set()
        # the finalizer runs at once on the node; give its log a bounded moment
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not any(_bad_lines(cluster).values()):
            time.sleep(0.1)
    finally:
        cluster.stop()
    counts = _bad_lines(cluster)
    print(f"'{_BAD}' lines per node: {counts}")
    assert counts == {n: 0 for n in cluster.nodes}
