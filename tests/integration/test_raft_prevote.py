"""A controller that cannot win an election causes no epoch change (issue 26, pre-vote: KIP-996).

Three controllers, each in its own network namespace (`deploy._netns`), so links are cut for real:
per pair with blackhole routes, or a node's cable pulled. While a leader is alive and heard from by
a majority:

* a standby cut off from the leader alone (it still reaches the other standby) times out and asks
  for votes; before pre-vote it bumped the term and the other standby followed it, deposing the
  leader. Now its pre-votes are refused and the epoch stays.
* a standby cut off from everyone, while the quorum commits on without it (its log falls behind),
  then healed: before, it campaigned the moment its first link came back (its timer had long
  expired). Now it asks first, is refused, and follows the leader.

Proving that nothing happens needs a window: each fault is held, and then watched after healing,
for several election timeouts, with the epoch polled throughout (any change fails at once).

The test process lives in the machine's namespace; everything that talks to the cluster runs in one
worker process inside the hub namespace (`deploy._netns.enter_namespace`).
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

ELECTION_TIMEOUT_MS = 1000
OVERRIDES = {"controller.quorum.election.timeout.ms": ELECTION_TIMEOUT_MS}
#: how long a fault is held, and watched after it healed (several election timeouts each)
WINDOW_S = 3 * ELECTION_TIMEOUT_MS / 1000.0


# ---------------------------------------------------------------- run inside the hub namespace


def _quorum_state(controllers: str) -> tuple[int, int]:
    """(leader id, epoch) from any controller; (-1, -1) when none answers with a leader."""
    from kraftlog.client import Admin

    try:
        with Admin(controllers, request_timeout_ms=2000) as admin:
            resp = admin.describe_quorum()
    except Exception:
        return (-1, -1)
    if resp.error.code != 0 or resp.leader_id < 0:
        return (-1, -1)
    return (resp.leader_id, resp.leader_epoch)


def _commit(controllers: str, minutes: int) -> int:
    """Commit one metadata record (a cluster-wide broker config; no broker is needed): its error code."""
    from kraftlog.client import Admin

    broker_resource = 4  # Kafka's ConfigResource type BROKER; name "" is the cluster-wide default
    with Admin(controllers, request_timeout_ms=10_000) as admin:
        resp = admin.incremental_alter_configs({(broker_resource, ""): [("log.retention.minutes", 0, str(minutes))]})
        return int(resp.error.code or resp.results[0].error.code)


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


def _log_events(cluster: LocalCluster, nid: int, event: str) -> list[dict[str, Any]]:
    out = []
    for line in cluster.nodes[nid].log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and event in line:
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if parsed.get("event") == event:
                out.append(parsed)
    return out


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, Callable[..., Any]]]:
    from kraftlog.deploy._netns import enter_namespace, unavailable_reason

    why = unavailable_reason()
    if why is not None:
        pytest.skip(why)
    cluster = LocalCluster(tmp_path / "c", controllers=3, overrides=OVERRIDES, network="netns")
    cluster.plan()
    cluster._network_up()
    hub = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=enter_namespace,
        initargs=(cluster.netns.hub,),
    )

    def in_hub(fn: Callable[..., Any], *args: Any, timeout_s: float = 60) -> Any:
        return hub.submit(fn, *args).result(timeout=timeout_s)

    try:
        for nid in (1, 2, 3):
            cluster.start_node(nid)
        yield cluster, in_hub
    finally:
        hub.shutdown(wait=False, cancel_futures=True)
        cluster.stop()


def _watch_epoch(
    in_hub: Callable[..., Any], controllers: str, before: tuple[int, int], seconds: float, what: str
) -> None:
    """Poll the quorum for ``seconds``; fail as soon as the leader or epoch differs from ``before``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = in_hub(_quorum_state, controllers)
        if state != (-1, -1):
            assert state == before, f"{what}: (leader, epoch) went from {before} to {state}"
        time.sleep(0.2)


@pytest.mark.timeout(180)
def test_a_controller_that_cannot_win_changes_no_epoch(
    netns_cluster: tuple[LocalCluster, Callable[..., Any]],
) -> None:
    cluster, in_hub = netns_cluster
    controllers = ",".join(cluster.controller_addresses)
    before = wait_until(
        lambda: (s := in_hub(_quorum_state, controllers))[0] > 0 and s,
        60,
        interval_s=0.2,
        what="an active controller",
    )
    assert in_hub(_commit, controllers, 600) == 0
    leader = before[0]
    standby = min(n for n in (1, 2, 3) if n != leader)
    ns_standby = cluster.netns.namespace_of(standby)
    ns_leader = cluster.netns.namespace_of(leader)
    routes = [(ns_standby, cluster.nodes[leader].host), (ns_leader, cluster.nodes[standby].host)]

    # 1. the standby loses the leader alone: it times out, but the other standby still hears the leader
    try:
        for ns, addr in routes:
            _blackhole(ns, addr, add=True)
        _watch_epoch(in_hub, controllers, before, WINDOW_S, "a standby cut off from the leader only")
    finally:
        for ns, addr in routes:
            _blackhole(ns, addr, add=False)
    _watch_epoch(in_hub, controllers, before, WINDOW_S, "after the standby's link to the leader healed")
    assert _log_events(cluster, standby, "raft_pre_vote_lost"), "the cut-off standby never asked for pre-votes"

    # 2. the standby loses everyone, the quorum commits on without it (its log falls behind), then heals
    cluster.cut(standby)
    try:
        for i in range(3):
            assert in_hub(_commit, controllers, 601 + i) == 0
        _watch_epoch(in_hub, controllers, before, WINDOW_S, "a standby cut off from everyone")
    finally:
        cluster.heal(standby)
    _watch_epoch(in_hub, controllers, before, 2 * WINDOW_S, "after the isolated standby came back")
    assert in_hub(_commit, controllers, 700) == 0
    assert in_hub(_quorum_state, controllers) == before
