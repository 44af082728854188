"""A broker must not stay on a standby controller that is cut off from the quorum (issue 11, defect 4).

Three controllers and one broker, each in its own network namespace (`deploy._netns`), so links can
be cut for real and per pair: a blackhole route in both namespaces of a pair drops everything
between those two nodes and nothing else. The broker is made to follow a standby S by letting it
reach S alone while it starts; then S is cut off from the other two controllers but not from the
broker, so S keeps serving its frozen log and keep-alives. A topic created through the active
controller after that must show in the broker's metadata within 2 x
``controller.quorum.fetch.timeout.ms``.

The test process itself lives in the machine's namespace, from where the nodes' addresses do not
exist: everything that talks to the cluster runs in one worker process that moved into the hub
namespace before it opened any connection (`deploy._netns.enter_namespace`).
"""

from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import structlog

from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

FETCH_TIMEOUT_MS = 2000
BOUND_S = 2 * FETCH_TIMEOUT_MS / 1000.0
BROKER = 101
METRICS_PORT = 19_100  # every node has its own address, so one port number serves all
OVERRIDES = {
    "controller.quorum.fetch.timeout.ms": FETCH_TIMEOUT_MS,
    "controller.quorum.election.timeout.ms": 1000,
    "metrics.port": METRICS_PORT,
}


# ---------------------------------------------------------------- run inside the hub namespace


def _active_controller(controllers: str) -> int:
    from kraftlog.client import Admin

    with Admin(controllers, request_timeout_ms=3000) as admin:
        resp = admin.describe_quorum()
        return resp.leader_id if resp.error.code == 0 else -1


def _create_topic(controllers: str, name: str) -> float:
    """Create ``name`` (1 partition, RF 1); the monotonic time the creation was acknowledged."""
    from kraftlog.client import Admin, NewTopic

    with Admin(controllers, request_timeout_ms=10_000) as admin:
        resp = admin.create_topics([NewTopic(name, 1, 1)])
    assert resp.topics[0].error.code == 0, resp
    return time.monotonic()


def _broker_knows(broker: str, name: str) -> bool:
    import grpc

    from kraftlog.proto import broker_pb2, broker_pb2_grpc

    with grpc.insecure_channel(broker) as channel:
        try:
            md = broker_pb2_grpc.BrokerServiceStub(channel).Metadata(
                broker_pb2.MetadataRequest(topics=[name]), timeout=1
            )
        except grpc.RpcError:
            return False
    return any(t.name == name and t.error.code == 0 and t.partitions for t in md.topics)


def _applied_metadata_offset(host: str) -> int:
    """The broker's ``kraftlog_broker_metadata_last_applied_offset`` gauge (-1: nothing applied)."""
    import urllib.request

    with urllib.request.urlopen(f"http://{host}:{METRICS_PORT}/metrics", timeout=2) as resp:
        text = resp.read().decode()
    found = re.search(r"^kraftlog_broker_metadata_last_applied_offset ([-0-9.e+]+)$", text, re.M)
    return int(float(found.group(1))) if found else -1


def _broker_unfenced(controllers: str, broker_id: int) -> bool:
    from kraftlog.client import Admin

    with Admin(controllers, request_timeout_ms=3000) as admin:
        return any(b.broker_id == broker_id and not b.fenced for b in admin.describe_cluster().brokers)


def _create_and_time(controllers: str, broker: str, name: str, give_up_s: float) -> float | None:
    """Create ``name``, then poll the broker's Metadata until it lists it: seconds from the
    acknowledged creation, or None when it did not within ``give_up_s``."""
    created = _create_topic(controllers, name)
    while time.monotonic() - created < give_up_s:
        if _broker_knows(broker, name):
            return time.monotonic() - created
        time.sleep(0.02)
    return None


def _controller_has(controller: str, name: str) -> bool:
    """Whether the controller's own committed log holds topic ``name`` (read from its stream)."""
    import grpc

    from kraftlog.metadata_log import MetadataDelta, MetadataImage, decode_entry
    from kraftlog.proto import controller_pb2, controller_pb2_grpc

    delta = MetadataDelta(MetadataImage.EMPTY)
    with grpc.insecure_channel(controller) as channel:
        call = controller_pb2_grpc.ControllerServiceStub(channel).FetchMetadata(
            controller_pb2.FetchMetadataRequest(from_offset=0, broker_id=-1), timeout=10
        )
        try:
            for batch in call:
                for raw in batch.entries:
                    delta.replay(decode_entry(raw))
                if batch.keep_alive:
                    break
        finally:
            call.cancel()
    return name in delta.apply().topics.by_name


def _left_sources(log_path: Path) -> set[str]:
    """Controllers whose metadata stream the broker left or lost (from its JSON log lines)."""
    left = set()
    for line in log_path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") in ("metadata_source_left", "metadata_stream_failed", "metadata_stream_error"):
            left.add(event.get("controller"))
    return left


# ---------------------------------------------------------------- links


def _blackhole(namespace: str, address: str, *, add: bool) -> None:
    proc = subprocess.run(
        ["ip", "-n", namespace, "route", "add" if add else "del", "blackhole", f"{address}/32"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if add and proc.returncode != 0:
        raise RuntimeError(f"blackhole {address} in {namespace}: {proc.stderr.strip()}")


class _Cuts:
    """Pairwise link cuts (blackhole routes on both sides), all undone by `heal_all`."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.routes: list[tuple[str, str]] = []

    def _add(self, node: int, peer: int) -> None:
        ns = self.cluster.netns.namespace_of(node)
        addr = self.cluster.nodes[peer].host
        _blackhole(ns, addr, add=True)
        self.routes.append((ns, addr))

    def one_way(self, node: int, peers: list[int]) -> None:
        """``node`` cannot send to ``peers`` (so no connection between them comes up either)."""
        for p in peers:
            self._add(node, p)

    def both_ways(self, node: int, peers: list[int]) -> None:
        for p in peers:
            self._add(node, p)
            self._add(p, node)

    def heal(self, node: int) -> None:
        ns = self.cluster.netns.namespace_of(node)
        for route in [r for r in self.routes if r[0] == ns]:
            _blackhole(*route, add=False)
            self.routes.remove(route)

    def heal_all(self) -> None:
        for ns, addr in self.routes:
            _blackhole(ns, addr, add=False)
        self.routes.clear()


# ---------------------------------------------------------------- the test


@pytest.mark.timeout(240)
def test_broker_leaves_a_standby_cut_off_from_the_quorum(tmp_path: Path) -> None:
    from kraftlog.deploy._netns import enter_namespace, unavailable_reason

    why = unavailable_reason()
    if why is not None:
        pytest.skip(why)
    cluster = LocalCluster(tmp_path / "c", controllers=3, brokers=1, overrides=OVERRIDES, network="netns")
    cluster.plan()
    cuts = _Cuts(cluster)
    controllers = ",".join(cluster.controller_addresses)
    spec = cluster.nodes[BROKER]
    broker = f"{spec.host}:{spec.broker_port}"
    hub: ProcessPoolExecutor | None = None

    def in_hub(fn, *args, timeout_s: float = 60):
        assert hub is not None
        return hub.submit(fn, *args).result(timeout=timeout_s)

    try:
        # the namespaces, without starting every node as cluster.start() would: the broker must
        # start after its links to two controllers are cut
        cluster._network_up()
        hub = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=enter_namespace,
            initargs=(cluster.netns.hub,),
        )
        for nid in (1, 2, 3):
            cluster.start_node(nid)
        leader = wait_until(
            lambda: (lid := in_hub(_active_controller, controllers)) > 0 and lid,
            60,
            interval_s=0.2,
            what="an active controller",
        )
        standby = min(n for n in (1, 2, 3) if n != leader)
        others = [n for n in (1, 2, 3) if n != standby]

        # the broker starts reaching the standby alone: its metadata can only come from there
        cuts.one_way(BROKER, others)
        cluster.start_node(BROKER)
        wait_until(
            lambda: in_hub(_applied_metadata_offset, spec.host) >= 0,
            60,
            interval_s=0.2,
            what="the broker to follow the standby",
        )
        cuts.heal(BROKER)
        wait_until(
            lambda: in_hub(_broker_unfenced, controllers, BROKER),
            60,
            interval_s=0.2,
            what="the broker registered and unfenced through the active controller",
        )
        in_hub(_create_topic, controllers, "before")
        wait_until(
            lambda: in_hub(_broker_knows, broker, "before"),
            30,
            interval_s=0.1,
            what="the broker to see a topic through the standby",
        )
        assert in_hub(_active_controller, controllers) == leader
        standby_address = f"{cluster.nodes[standby].host}:{cluster.nodes[standby].controller_port}"
        assert _left_sources(spec.log_path) <= set(cluster.controller_addresses) - {standby_address}, (
            "the broker left the standby before it was cut off"
        )

        # the standby loses the other controllers, not the broker
        cuts.both_ways(standby, others)
        elapsed = in_hub(_create_and_time, controllers, broker, "after", 5 * BOUND_S)
        assert not in_hub(_controller_has, standby_address, "after"), "the standby was not cut off"
        structlog.get_logger(__name__).info(
            "topic_seen_by_broker", elapsed_s=elapsed, bound_s=BOUND_S, standby=standby, leader=leader
        )
        assert elapsed is not None, f"the broker never saw the topic (waited {5 * BOUND_S:.0f}s)"
        assert elapsed <= BOUND_S, f"the broker saw the topic after {elapsed:.2f}s, bound {BOUND_S:.1f}s"
    finally:
        if hub is not None:
            hub.shutdown(wait=False, cancel_futures=True)
        cuts.heal_all()
        cluster.stop()
