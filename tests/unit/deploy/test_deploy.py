"""deploy/ for systemd hosts (issue 6 §2): the unit templates, the example three-host cluster and
install.sh.

The units are checked by ``systemd-analyze verify`` (the only test here that may skip: when the tool is
absent; ``make test`` installs Debian's ``systemd`` package when it runs as root), install.sh by its
``--dry-run``, which must print every step as the exact command and change nothing, and the example
configs by kraftlog's own loader plus the cross-node rules of one cluster.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from kraftlog.common import config as common_config

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
UNITS = {role: DEPLOY / "systemd" / f"kraftlog-{role}@.service" for role in ("controller", "broker")}
CONFIGS = sorted((DEPLOY / "config").glob("*.toml"))
PLACEHOLDER = "@RAFT_PASSWORD@"
DEFAULT_EXEC = "/opt/kraftlog/venv/bin/kraftlog"
DATA_ROOT = "/var/lib/kraftlog"
# Margin the stop timeout must leave over the broker's controlled shutdown (broker.session.timeout.ms).
STOP_MARGIN_S = 10


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """A unit file as section -> key -> every value in order (keys such as After= may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], defaultdict(list))
            continue
        assert current is not None, f"directive outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        current[key.strip()].append(value.strip())
    return sections


def seconds(value: str) -> float:
    """systemd time spans used here: '60', '60s', '10min', '500ms', '1h', '1min 30s'."""
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "": 1}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def words(values: list[str]) -> list[str]:
    return [word for value in values for word in value.split()]


def role_of(cfg: common_config.NodeConfig) -> str:
    return "controller" if cfg.is_controller else "broker"


def node_dirs(cfg: common_config.NodeConfig) -> list[str]:
    dirs = list(cfg.log_dirs)
    if cfg.metadata_log_dir not in dirs:
        dirs.append(cfg.metadata_log_dir)
    return dirs


def load_examples() -> dict[str, common_config.NodeConfig]:
    return {path.name: common_config.load_node_config(path) for path in CONFIGS}


# ------------------------------------------------------------------------------------------------
# the units
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", sorted(UNITS))
def test_unit_has_the_required_directives(role: str) -> None:
    unit = parse_unit(UNITS[role].read_text())
    head, service, install = unit["Unit"], unit["Service"], unit["Install"]

    assert "network-online.target" in words(head["After"])
    assert "network-online.target" in words(head["Wants"])
    config = f"/etc/kraftlog/{role}-%i.toml"
    assert service["ExecStart"] == [f"{DEFAULT_EXEC} serve -c {config}"]
    assert head["AssertPathExists"] == [config]

    single = {
        "Type": "notify",
        "NotifyAccess": "main",
        "User": "kraftlog",
        "Group": "kraftlog",
        "Restart": "on-failure",
        "LimitNOFILE": "100000",
        "KillSignal": "SIGTERM",
        "StandardOutput": "journal",
        "StandardError": "journal",
        "ProtectSystem": "strict",
        "ProtectHome": "true",
        "PrivateTmp": "true",
        "NoNewPrivileges": "true",
        "PrivateDevices": "true",
        "ProtectKernelTunables": "true",
        "ProtectKernelModules": "true",
        "ProtectControlGroups": "true",
        "RestrictNamespaces": "true",
        "RestrictSUIDSGID": "true",
        "LockPersonality": "true",
        "CapabilityBoundingSet": "",
    }
    for key, value in single.items():
        assert service.get(key) == [value], f"{UNITS[role].name}: {key}={service.get(key)}, want {value}"
    assert DATA_ROOT in words(service["ReadWritePaths"])
    assert {"AF_UNIX", "AF_INET", "AF_INET6"} <= set(words(service["RestrictAddressFamilies"]))
    assert "@system-service" in words(service["SystemCallFilter"])
    # Documented choice: JIT compilers (the JVM of a Spark job) and libffi closures need W+X pages.
    assert service.get("MemoryDenyWriteExecute", ["false"]) == ["false"]
    assert install["WantedBy"] == ["multi-user.target"]


@pytest.mark.parametrize("role", sorted(UNITS))
def test_stop_timeout_covers_the_controlled_shutdown(role: str) -> None:
    """SIGTERM starts a controlled shutdown bounded by broker.session.timeout.ms; SIGKILL must not cut it."""
    service = parse_unit(UNITS[role].read_text())["Service"]
    (timeout,) = service["TimeoutStopSec"]
    sessions = [int(cfg["broker.session.timeout.ms"]) for cfg in load_examples().values()]
    default = int(common_config.NODE_CONFIG_DEFS["broker.session.timeout.ms"].default)
    assert seconds(timeout) > max(sessions + [default]) / 1000 + STOP_MARGIN_S


@pytest.mark.parametrize("name", [p.name for p in CONFIGS])
def test_unit_lets_the_example_node_write_its_data_dirs(name: str) -> None:
    cfg = load_examples()[name]
    service = parse_unit(UNITS[role_of(cfg)].read_text())["Service"]
    writable = words(service["ReadWritePaths"])
    for d in node_dirs(cfg):
        assert any(d == w or d.startswith(w.rstrip("/") + "/") for w in writable), (d, writable)


# ------------------------------------------------------------------------------------------------
# the example cluster
# ------------------------------------------------------------------------------------------------


def test_example_configs_form_one_three_host_cluster() -> None:
    configs = load_examples()
    assert len(configs) == 6
    controllers = {n: c for n, c in configs.items() if c.roles == ("controller",)}
    brokers = {n: c for n, c in configs.items() if c.roles == ("broker",)}
    assert len(controllers) == 3 and len(brokers) == 3

    ids = [c.node_id for c in configs.values()]
    assert len(set(ids)) == len(ids), ids
    for name, cfg in configs.items():
        assert name == f"{role_of(cfg)}-{cfg.node_id}.toml", "install.sh and the units rely on ROLE-ID.toml"

    # one voter set, named identically everywhere, made of exactly the controllers
    assert len({tuple(c["controller.quorum.voters"]) for c in configs.values()}) == 1
    voters = next(iter(configs.values())).quorum_voters
    assert set(voters) == {c.node_id for c in controllers.values()}
    assert all(dict(c.quorum_voters) == dict(voters) for c in configs.values())

    ports_by_host: dict[str, list[int]] = defaultdict(list)
    roles_by_host: dict[str, list[str]] = defaultdict(list)
    offsets = set()
    for cfg in controllers.values():
        listeners = common_config.parse_listeners(cfg["listeners"])
        assert listeners["CONTROLLER"] == voters[cfg.node_id], "a controller listens where the voters say"
        host, port = voters[cfg.node_id]
        offset = int(cfg["controller.quorum.raft.port.offset"])
        offsets.add(offset)
        ports_by_host[host] += [port, port + offset]
        roles_by_host[host].append("controller")
        assert cfg["metrics.port"] > 0, "every example node serves Prometheus metrics"
        ports_by_host[host].append(cfg["metrics.port"])
        password = cfg["controller.quorum.raft.password"]
        assert isinstance(password, common_config.Password) and password.value == PLACEHOLDER
    assert len(offsets) == 1
    for cfg in brokers.values():
        listeners = common_config.parse_listeners(cfg["listeners"])
        host, port = listeners["BROKER"]
        assert host and host != "0.0.0.0", "brokers register their listener host with the controller"
        ports_by_host[host] += [port, cfg["metrics.port"]]
        roles_by_host[host].append("broker")

    assert len(roles_by_host) == 3
    for host, roles in roles_by_host.items():
        assert host.endswith(".example"), host
        assert sorted(roles) == ["broker", "controller"], (host, roles)
        assert len(ports_by_host[host]) == len(set(ports_by_host[host])), (host, ports_by_host[host])

    all_dirs = [d for cfg in configs.values() for d in node_dirs(cfg)]
    assert len(all_dirs) == len(set(all_dirs)), all_dirs
    for cfg in configs.values():
        for d in node_dirs(cfg):
            assert d.startswith(f"{DATA_ROOT}/{role_of(cfg)}-{cfg.node_id}"), d

    # topics survive one lost broker while acks=all still succeeds
    for cfg in configs.values():
        assert int(cfg["min.insync.replicas"]) < int(cfg["default.replication.factor"]) <= len(brokers)


def test_only_controllers_carry_the_password_placeholder() -> None:
    for path in CONFIGS:
        cfg = common_config.load_node_config(path)
        assert (PLACEHOLDER in path.read_text()) == cfg.is_controller, path.name


# ------------------------------------------------------------------------------------------------
# install.sh
# ------------------------------------------------------------------------------------------------


def test_make_test_installs_systemd_analyze_but_make_run_does_not() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipes: dict[str, list[str]] = {}
    target = None
    for line in makefile.splitlines():
        if line.startswith("\t") and target is not None:
            recipes[target].append(line.strip())
        elif re.match(r"^[A-Za-z$(][^=]*:(?!=)", line):
            target = line.split(":", 1)[0].strip()
            recipes[target] = []
        else:
            target = None
    # `make test` runs `system-deps.sh test` first (a prerequisite: the dev install needs its C compiler)
    assert any("deploy/scripts/system-deps.sh test" in step for step in recipes["system-deps-test"])
    test_prerequisites = re.search(r"^test:(.*)$", makefile, re.M)
    assert test_prerequisites is not None
    assert test_prerequisites.group(1).split().index("system-deps-test") < test_prerequisites.group(1).split().index(
        "$(STAMP_DEV)"
    )
    assert not any("system-deps.sh test" in step for step in recipes["run"] + recipes["system-deps"])
    script = (DEPLOY / "scripts" / "system-deps.sh").read_text()
    assert 'optional+=("systemd")' in script and "systemd-analyze" in script


# ------------------------------------------------------------------------------ local cluster process states
