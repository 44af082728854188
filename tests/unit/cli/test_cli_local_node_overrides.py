"""``kraftlog local start --node-override N:KEY=VALUE``: keys for one node of a local cluster (each
broker's ``broker.rack``, issue 25's fetch from follower), over the ``--override`` of every node."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kraftlog.cli._common import UserError
from kraftlog.cli._local import parse_node_overrides
from kraftlog.deploy._cluster import LocalCluster, NodeSpec


def test_node_overrides_are_parsed_per_node_and_checked_against_the_schema() -> None:
    parsed = parse_node_overrides(["1:broker.rack=r1", "2:broker.rack=r2", "2:num.io.threads=4"])
    assert parsed == {1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2", "num.io.threads": 4}}
    for bad in ("broker.rack=r1", "x:broker.rack=r1", "1:log.dirs=/tmp", "1:no.such.key=1"):
        with pytest.raises(UserError):
            parse_node_overrides([bad])


def test_a_node_override_wins_over_the_cluster_override_on_its_node_only(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c",
        controllers=2,
        combined=True,
        overrides={"broker.rack": "everywhere"},
        node_overrides={2: {"broker.rack": "r2"}},
        cluster_id="x",
        password="p",
    )
    for nid in (1, 2):
        spec = NodeSpec(nid, ["broker", "controller"], 9000 + 2 * nid, 9100 + 2 * nid, str(tmp_path / f"n{nid}"))
        cluster.nodes[nid] = spec
        cluster._write_config(spec, [])
    racks = {nid: tomllib.loads(cluster.nodes[nid].config_path.read_text())["broker.rack"] for nid in (1, 2)}
    assert racks == {1: "everywhere", 2: "r2"}


def test_a_node_override_for_a_node_the_layout_lacks_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, brokers=1, node_overrides={102: {"broker.rack": "r"}})
    with pytest.raises(ValueError, match=r"\[102\]"):
        cluster.plan()
    assert not (tmp_path / "c").exists()
