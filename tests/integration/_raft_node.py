"""One controller quorum member as a process, for `tests/integration/test_raft_processes.py`.

Run with ``sys.executable``::

    _raft_node.py --node-id 1 --voters 1@127.0.0.1:7001,2@127.0.0.1:7002,3@127.0.0.1:7003 \
                  --data-dir DIR --password SECRET [--election-timeout-ms 1000]

* Committed entries go to ``DIR/committed.jsonl``, one JSON object per line
  (``offset, epoch, timestamp_ms, type, value``), written idempotently by offset: at start the file's
  last complete line gives ``last_durable_offset`` (a torn last line, from a kill -9 mid-write, is cut
  off), and anything at or below the last written offset is skipped. A hole would be an error.
* Commands arrive on stdin as JSON lines, each with an ``id``; answers go to stdout as JSON lines
  with the same ``id``. Unsolicited events (``ready``, ``leader``) have an ``event`` key instead.

  ``{"op": "propose", "id": 1, "values": ["a", "b"], "timeout_s": 2.0}`` -> ``{"id": 1, "ok": true,
  "offset": 7}`` or ``{"id": 1, "ok": false, "error": "NOT_CONTROLLER", "leader_id": 2}``; one
  ConfigRecord per value, one batch, epoch = this node's current epoch. Many may be in flight.
  ``{"op": "status"}``, ``{"op": "bench", "count": N, "concurrency": K}``,
  ``{"op": "latency", "count": N}``, ``{"op": "stop"}``.

Logs (structlog JSON) go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kraftlog.common.errors import KafkaError  # noqa: E402
from kraftlog.metadata_log._records import ConfigRecord, LogEntry  # noqa: E402
from kraftlog.node._logging import configure_logging  # noqa: E402
from kraftlog.quorum.raft import MetadataQuorum  # noqa: E402


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class CommittedFile:
    """Append-only JSON-lines copy of the metadata log, idempotent by offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_offset = -1
        if path.exists():
            data = path.read_bytes()
            complete = data[: data.rfind(b"\n") + 1]
            if len(complete) != len(data):
                with open(path, "r+b") as f:
                    f.truncate(len(complete))
            for line in complete.splitlines():
                self.last_offset = json.loads(line)["offset"]
        self.f = open(path, "a", encoding="utf-8")

    def append(self, entries: list[LogEntry]) -> None:
        lines = []
        for e in entries:
            if e.offset <= self.last_offset:
                continue
            if e.offset != self.last_offset + 1:
                raise RuntimeError(f"hole in the metadata log: {self.last_offset} then {e.offset}")
            lines.append(
                json.dumps(
                    {
                        "offset": e.offset,
                        "epoch": e.epoch,
                        "timestamp_ms": e.timestamp_ms,
                        "type": type(e.record).__name__,
                        "value": getattr(e.record, "value", None),
                    }
                )
                + "\n"
            )
            self.last_offset = e.offset
        if lines:
            self.f.write("".join(lines))
            self.f.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--cluster-id", default="RaftProcessTestCluster")
    parser.add_argument("--election-timeout-ms", type=int, default=1000)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    configure_logging(node_id=args.node_id, role="controller", level="warning", force_json=True)

    voters: dict[int, tuple[str, int]] = {}
    for item in args.voters.split(","):
        vid, endpoint = item.split("@")
        host, port = endpoint.rsplit(":", 1)
        voters[int(vid)] = (host, int(port))
    args.data_dir.mkdir(parents=True, exist_ok=True)
    out = CommittedFile(args.data_dir / "committed.jsonl")
    loop = asyncio.get_running_loop()
    quorum = MetadataQuorum(
        node_id=args.node_id,
        voters=voters,
        data_dir=args.data_dir / "raft",
        password=args.password,
        cluster_id=args.cluster_id,
        fsync=not args.no_fsync,
        election_timeout_ms=args.election_timeout_ms,
        loop=loop,
        on_committed=out.append,
        on_leader_change=lambda leader, epoch: emit({"event": "leader", "leader_id": leader, "epoch": epoch}),
        last_durable_offset=out.last_offset,
    )
    await quorum.start()
    emit({"event": "ready", "node_id": args.node_id, "pid": os.getpid(), "last_offset": out.last_offset})

    async def propose(values: list[str], timeout: float) -> int:
        records = [ConfigRecord(resource_type=2, resource_name="it", name="v", value=v) for v in values]
        return await quorum.propose(records, epoch=quorum.epoch, timeout_s=timeout)

    async def handle(req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "propose":
            started = time.monotonic()
            try:
                offset = await propose(req["values"], float(req.get("timeout_s", 2.0)))
                return {"ok": True, "offset": offset, "node_id": args.node_id, "seconds": time.monotonic() - started}
            except KafkaError as err:
                return {
                    "ok": False,
                    "error": err.error_name,
                    "message": str(err),
                    "node_id": args.node_id,
                    "leader_id": getattr(err, "leader_id", None),
                    "seconds": time.monotonic() - started,
                }
        if op == "status":
            status = dataclasses.asdict(quorum.status())
            status["journal_stats"] = dataclasses.asdict(quorum._journal.stats) if quorum._journal else None
            return {"status": status}
        if op == "bench":
            return await bench(int(req["count"]), int(req["concurrency"]))
        if op == "latency":
            return await latency(int(req["count"]))
        return {"error": f"unknown op {op!r}"}

    async def bench(count: int, concurrency: int) -> dict[str, Any]:
        latencies: list[float] = []
        errors = 0
        todo = iter(range(count))

        async def worker() -> None:
            nonlocal errors
            for i in todo:
                t0 = time.perf_counter()
                try:
                    await propose([f"bench-{i}"], 10.0)
                    latencies.append(time.perf_counter() - t0)
                except KafkaError:
                    errors += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
        return {"commits_per_s": len(latencies) / elapsed, "errors": errors, "seconds": elapsed, **summarise(latencies)}

    async def latency(count: int) -> dict[str, Any]:
        latencies = []
        for i in range(count):
            t0 = time.perf_counter()
            await propose([f"lat-{i}"], 5.0)
            latencies.append(time.perf_counter() - t0)
        return summarise(latencies)

    stop = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    async def serve(req: dict[str, Any]) -> None:
        try:
            reply = await handle(req)
        except Exception as err:  # report, never die: the test reads the answer
            reply = {"error": f"{type(err).__name__}: {err}"}
        emit({"id": req.get("id"), **reply})

    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            break
        req = json.loads(line)
        if req.get("op") == "stop":
            await quorum.stop()
            emit({"id": req.get("id"), "ok": True})
            return
        task = asyncio.ensure_future(serve(req))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await quorum.stop()


def summarise(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {"count": 0}
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "mean_ms": 1000 * statistics.fmean(ordered),
        "max_ms": 1000 * ordered[-1],
    }


if __name__ == "__main__":
    asyncio.run(main())
