"""``controller.quorum.bootstrap.servers`` and the formatted voter set of a dynamic quorum (KIP-853,
issue 26): what a config accepts, refuses, and how a node finds the controllers."""

from __future__ import annotations

import pickle

import pytest

from kraftlog.common.config import ConfigError, NodeConfig

BASE = {"node.id": 1, "log.dirs": "/tmp/kl-unused"}


def test_neither_voters_nor_bootstrap_servers_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig({**BASE, "process.roles": "controller"})
    assert err.value.key == "controller.quorum.voters"
    assert "controller.quorum.bootstrap.servers" in str(err.value)


def test_bootstrap_servers_alone_loads_and_brokers_reach_them() -> None:
    broker = NodeConfig({**BASE, "process.roles": "broker", "controller.quorum.bootstrap.servers": "h:1,h:2"})
    assert broker.quorum_voters == {} and broker.kraft_version == 1
    assert broker.controller_endpoints == ["h:1", "h:2"]
    static = NodeConfig({**BASE, "process.roles": "broker", "controller.quorum.voters": "7@h:9,3@h:8"})
    assert static.kraft_version == 0 and static.controller_endpoints == ["h:8", "h:9"]


def test_formatted_voters_are_checked_like_static_ones_and_survive_pickling() -> None:
    cfg = NodeConfig({**BASE, "process.roles": "controller", "controller.quorum.bootstrap.servers": "h:1"})
    assert cfg.quorum_voters == {}
    running = cfg.with_formatted_voters({1: ("h", 1), 2: ("h", 2)})
    assert dict(running.quorum_voters) == {1: ("h", 1), 2: ("h", 2)}
    assert dict(pickle.loads(pickle.dumps(running)).quorum_voters) == dict(running.quorum_voters)
    assert running.controller_endpoints == ["h:1", "h:2"]
    with pytest.raises(ConfigError, match="not in 'controller.quorum.voters'"):
        cfg.with_formatted_voters({2: ("h", 2)})
    static = NodeConfig({**BASE, "process.roles": "controller", "controller.quorum.voters": "1@h:1"})
    with pytest.raises(ConfigError, match="formatted for a dynamic quorum"):
        static.with_formatted_voters({1: ("h", 1)})
