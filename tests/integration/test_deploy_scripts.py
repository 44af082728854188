"""deploy/ for systemd hosts (issue 6 §2): the unit templates, the example three-host cluster and
install.sh.

The units are checked by ``systemd-analyze verify`` (the only test here that may skip: when the tool is
absent; ``make test`` installs Debian's ``systemd`` package when it runs as root), install.sh by its
``--dry-run``, which must print every step as the exact command and change nothing, and the example
configs by kraftlog's own loader plus the cross-node rules of one cluster.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from kraftlog.common import config as common_config
from kraftlog.node import new_cluster_id

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
INSTALL = DEPLOY / "install.sh"
UNITS = {role: DEPLOY / "systemd" / f"kraftlog-{role}@.service" for role in ("controller", "broker")}
CONFIGS = sorted((DEPLOY / "config").glob("*.toml"))
PLACEHOLDER = "@RAFT_PASSWORD@"
DEFAULT_EXEC = "/opt/kraftlog/venv/bin/kraftlog"
DATA_ROOT = "/var/lib/kraftlog"
SAVED_CLUSTER_ID = Path("/etc/kraftlog/cluster-id")
# Margin the stop timeout must leave over the broker's controlled shutdown (broker.session.timeout.ms).
STOP_MARGIN_S = 10


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def seconds(value: str) -> float:
    """systemd time spans used here: '60', '60s', '10min', '500ms', '1h', '1min 30s'."""
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "": 1}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def role_of(cfg: common_config.NodeConfig) -> str:
    return "controller" if cfg.is_controller else "broker"


def node_dirs(cfg: common_config.NodeConfig) -> list[str]:
    dirs = list(cfg.log_dirs)
    if cfg.metadata_log_dir not in dirs:
        dirs.append(cfg.metadata_log_dir)
    return dirs


def cluster_id_for_dry_run() -> str:
    """install.sh refuses an id other than the one this host was installed with, if it was."""
    if SAVED_CLUSTER_ID.is_file():
        return SAVED_CLUSTER_ID.read_text().strip()
    return new_cluster_id()


def run_install(*args: str, user: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(user or []), "bash", str(INSTALL), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        stdin=subprocess.DEVNULL,
    )


def heredoc(out: str, dest: str) -> str:
    """The content install.sh --dry-run shows for ``install ... /dev/stdin DEST <<'EOF'``."""
    match = re.search(rf"/dev/stdin {re.escape(dest)} <<'EOF'\n(.*?)\nEOF\n", out, re.S)
    assert match, f"no here-document for {dest} in:\n{out}"
    return match.group(1)


def fake_executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def tree_snapshot(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


# ------------------------------------------------------------------------------------------------
# the units
# ------------------------------------------------------------------------------------------------


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """Both templates, instantiated, alone and with the drop-in install.sh writes (custom --prefix)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip(
            "systemd-analyze is not installed (Debian: apt-get install systemd; "
            "`make test` installs it when run as root)"
        )
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    # verify checks that ExecStart's program exists: point it at a stand-in.
    fake = fake_executable(tmp_path / "bin" / "kraftlog")
    prefix = tmp_path / "prefix"
    fake_executable(prefix / "venv" / "bin" / "kraftlog")
    for unit in UNITS.values():
        text = unit.read_text()
        assert DEFAULT_EXEC in text
        (unit_dir / unit.name).write_text(text.replace(DEFAULT_EXEC, str(fake)))

    instances = []
    for path in CONFIGS:
        cfg = common_config.load_node_config(path)
        instance = f"kraftlog-{role_of(cfg)}@{cfg.node_id}.service"
        instances.append(instance)
        if path.name not in ("controller-1.toml", "broker-101.toml"):
            continue
        out = run_install(
            "--dry-run", "--config", str(path), "--prefix", str(prefix), "--cluster-id", cluster_id_for_dry_run()
        )
        assert out.returncode == 0, out.stderr
        dropin = heredoc(out.stdout, f"/etc/systemd/system/{instance}.d/50-install.conf")
        assert f"ExecStart={prefix}/venv/bin/kraftlog serve" in dropin
        (unit_dir / f"{instance}.d").mkdir()
        (unit_dir / f"{instance}.d" / "50-install.conf").write_text(dropin + "\n")
        # the TLS drop-in of deploy/systemd (LoadCredential=) verifies with the units too
        (unit_dir / f"{instance}.d" / "60-tls.conf").write_text((DEPLOY / "systemd" / "60-tls.conf").read_text())

    proc = subprocess.run(
        [analyze, "verify", "--man=no", *(str(unit_dir / i) for i in instances)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER=""),
    )
    output = proc.stdout + proc.stderr
    ours = [line for line in output.splitlines() if "kraftlog" in line or str(tmp_path) in line]
    assert proc.returncode == 0, output
    assert ours == [], "systemd-analyze verify complained:\n" + "\n".join(ours)


# ------------------------------------------------------------------------------------------------
# the example cluster
# ------------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------------
# install.sh
# ------------------------------------------------------------------------------------------------


def test_install_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(INSTALL)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = INSTALL.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text


def _touched_paths(name: str, unit: str, prefix: Path) -> list[Path]:
    return [
        prefix,
        Path("/etc/kraftlog"),
        Path(f"/etc/kraftlog/{name}.toml"),
        Path(DATA_ROOT),
        Path(f"{DATA_ROOT}/{name}"),
        Path("/etc/systemd/system/kraftlog-broker@.service"),
        Path("/etc/systemd/system/kraftlog-controller@.service"),
        Path(f"/etc/systemd/system/{unit}.d"),
        Path(f"/etc/systemd/system/multi-user.target.wants/{unit}"),
    ]


def _user_exists() -> bool:
    try:
        pwd.getpwnam("kraftlog")
    except KeyError:
        return False
    return True


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_dry_run_prints_every_step_and_changes_nothing(config: Path, tmp_path: Path) -> None:
    cfg = common_config.load_node_config(config)
    role, nid = role_of(cfg), cfg.node_id
    name, unit = f"{role}-{nid}", f"kraftlog-{role}@{nid}.service"
    prefix = tmp_path / "opt" / "kraftlog"
    password_file = tmp_path / "raft-password"
    password_file.write_text("correct-horse-battery-staple-0123\n")
    cluster_id = cluster_id_for_dry_run()
    touched = _touched_paths(name, unit, prefix)
    before = {p: p.exists() for p in touched}
    user_before = _user_exists()
    deploy_before = tree_snapshot(DEPLOY)
    build_before = (REPO / "build").exists()

    proc = run_install(
        "--dry-run",
        "--config",
        str(config),
        "--prefix",
        str(prefix),
        "--cluster-id",
        cluster_id,
        "--raft-password-file",
        str(password_file),
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    q = shlex.quote
    etc_config = f"/etc/kraftlog/{name}.toml"
    exe = f"{prefix}/venv/bin/kraftlog"

    # Every step, as the exact command, in this order.
    expected = [
        (
            r"\+ useradd --system --user-group --home-dir /var/lib/kraftlog --no-create-home "
            r"--shell /usr/sbin/nologin --comment 'kraftlog node' kraftlog"
            if not user_before
            else r"# user kraftlog already exists"
        ),
        rf"\+ \S+ -m venv {re.escape(q(str(prefix)))}/venv",
        rf"\+ {re.escape(q(str(prefix)))}/venv/bin/pip install .*--upgrade {re.escape(q(str(REPO)))}",
        re.escape(
            f"+ install -d -m 0750 -o kraftlog -g kraftlog {DATA_ROOT} " + " ".join(q(d) for d in node_dirs(cfg))
        ),
        re.escape("+ install -d -m 0750 -o root -g kraftlog /etc/kraftlog"),
    ]
    if cfg.is_controller:
        expected += [
            re.escape(f"+ install -m 0600 -o root -g root {q(str(password_file))} /etc/kraftlog/raft-password"),
            re.escape(f"+ install -m 0640 -o root -g kraftlog /dev/stdin {etc_config} < {q(str(config))}")
            + f".*{PLACEHOLDER}",
        ]
    else:
        expected.append(re.escape(f"+ install -m 0640 -o root -g kraftlog {q(str(config))} {etc_config}"))
    expected += [
        re.escape(
            f"+ runuser -u kraftlog -- {q(exe)} storage format -t {q(cluster_id)} -c {etc_config} --ignore-formatted"
        ),
        re.escape(f"+ install -m 0644 {q(str(UNITS['controller']))} {q(str(UNITS['broker']))} /etc/systemd/system/"),
        re.escape(f"+ install -d -m 0755 /etc/systemd/system/{unit}.d"),
        re.escape(f"+ install -m 0644 -o root -g root /dev/stdin /etc/systemd/system/{unit}.d/50-install.conf"),
        re.escape("+ systemctl daemon-reload"),
        re.escape(f"+ systemctl enable {unit}"),
    ]
    lines = out.splitlines()
    position = -1
    for pattern in expected:
        found = [i for i, line in enumerate(lines) if re.match(pattern, line)]
        assert found, f"dry run lacks {pattern!r}:\n{out}"
        assert found[0] > position, f"{pattern!r} is out of order:\n{out}"
        position = found[0]
    assert out.count("## step ") == 7

    dropin = heredoc(out, f"/etc/systemd/system/{unit}.d/50-install.conf")
    assert "[Service]" in dropin
    assert f"ReadWritePaths={' '.join(node_dirs(cfg))}" in dropin
    assert f"ExecStart={exe} serve -c /etc/kraftlog/{role}-%i.toml" in dropin
    (timeout,) = re.findall(r"^TimeoutStopSec=(.+)$", dropin, re.M)
    session_s = int(cfg["broker.session.timeout.ms"]) / 1000
    assert seconds(timeout) >= 60 and (not cfg.is_broker or seconds(timeout) > session_s + STOP_MARGIN_S)
    assert "correct-horse-battery-staple" not in out + proc.stderr, "a dry run never shows the password"

    # ... and nothing changed.
    assert {p: p.exists() for p in touched} == before
    assert _user_exists() == user_before
    assert tree_snapshot(DEPLOY) == deploy_before
    assert (REPO / "build").exists() == build_before


def test_dry_run_by_node_id_uses_the_example_config_and_default_prefix() -> None:
    proc = run_install("--dry-run", "--node-id", "2", "--cluster-id", cluster_id_for_dry_run())
    assert proc.returncode == 0, proc.stderr
    assert f"from {DEPLOY}/config/controller-2.toml" in proc.stdout
    assert "+ systemctl enable kraftlog-controller@2.service" in proc.stdout
    assert f"{DEFAULT_EXEC} storage format" in proc.stdout
    # the units already point at the default prefix: the drop-in does not repeat ExecStart
    dropin = heredoc(proc.stdout, "/etc/systemd/system/kraftlog-controller@2.service.d/50-install.conf")
    assert "ExecStart" not in dropin


@pytest.mark.skipif(
    SAVED_CLUSTER_ID.exists() or Path("/etc/kraftlog/raft-password").exists(),
    reason="this host already has a kraftlog install, whose saved id and password are reused",
)
def test_dry_run_shows_how_a_new_cluster_id_and_password_would_be_made() -> None:
    proc = run_install("--dry-run", "--node-id", "3")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert (
        f"+ {DEFAULT_EXEC} storage random-uuid | install -m 0640 -o root -g kraftlog /dev/stdin "
        "/etc/kraftlog/cluster-id" in out
    )
    assert re.search(
        r"^\+ \S+ -c 'import secrets; print\(secrets.token_urlsafe\(32\)\)' \| "
        r"install -m 0600 -o root -g root /dev/stdin /etc/kraftlog/raft-password$",
        out,
        re.M,
    ), out
    assert '-t "$(cat /etc/kraftlog/cluster-id)"' in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node-id", "101", "--config", str(DEPLOY / "config" / "broker-102.toml")], "does not match node.id 102"),
        (["--node-id", "7"], "no single example config for node 7"),
        (["--node-id", "x"], "--node-id must be a non-negative integer"),
        (["--node-id", "101", "--cluster-id", "not-a-cluster-id"], "invalid --cluster-id"),
        (["--node-id", "101", "--prefix", "opt/kraftlog"], "--prefix must be an absolute path"),
        (["--node-id", "101", "--bogus"], "unknown argument: --bogus"),
        (["--node-id"], "--node-id needs a value"),
        ([], "give --config FILE or --node-id N"),
    ],
)
def test_dry_run_refuses_bad_arguments_before_any_step(args: list[str], message: str) -> None:
    proc = run_install("--dry-run", *args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "## step" not in proc.stdout


def test_dry_run_refuses_a_bad_config_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "broker-101.toml"
    bad.write_text((DEPLOY / "config" / "broker-101.toml").read_text() + '"log.segment.byte" = 1024\n')
    proc = run_install("--dry-run", "--config", str(bad), "--cluster-id", cluster_id_for_dry_run())
    assert proc.returncode != 0
    assert "log.segment.byte" in proc.stderr and "log.segment.bytes" in proc.stderr
    assert "## step" not in proc.stdout

    props = tmp_path / "broker-101.properties"
    props.write_text("node.id=101\n")
    proc = run_install("--dry-run", "--config", str(props))
    assert proc.returncode != 0 and "must be a TOML file" in proc.stderr


def test_dry_run_refuses_a_weak_password_file(tmp_path: Path) -> None:
    weak = tmp_path / "pw"
    weak.write_text("short\n")
    proc = run_install(
        "--dry-run", "--node-id", "1", "--cluster-id", cluster_id_for_dry_run(), "--raft-password-file", str(weak)
    )
    assert proc.returncode != 0 and "at least 16" in proc.stderr


def test_real_install_refuses_to_run_without_root() -> None:
    if os.geteuid() != 0:
        proc = run_install("--node-id", "101")
    else:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv (util-linux) is missing to drop privileges")
        # a copy nobody can read, wherever the checkout lives
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            script = Path(tmp) / "install.sh"
            shutil.copy(INSTALL, script)
            script.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
            proc = subprocess.run(
                [
                    setpriv,
                    "--reuid",
                    "65534",
                    "--regid",
                    "65534",
                    "--clear-groups",
                    "bash",
                    str(script),
                    "--node-id",
                    "101",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
    assert proc.returncode == 1
    assert "must run as root" in proc.stderr
    assert "## step" not in proc.stdout


# ------------------------------------------------------------------------------ local cluster process states


def test_node_state_tells_a_zombie_and_a_reused_pid_from_a_running_node(tmp_path: Path) -> None:
    import subprocess
    import sys

    from kraftlog.deploy._cluster import LocalCluster, NodeSpec, _proc_cmdline, _proc_state, wait_until

    spec = NodeSpec(node_id=1, roles=["controller"], controller_port=1, broker_port=None, dir=str(tmp_path))
    cluster = LocalCluster(tmp_path, controllers=1, nodes={1: spec})
    assert cluster.node_state(1) == "not started"
    # a child that exits and is not waited for stays a zombie; os.kill(pid, 0) would call it alive
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        spec.pid = exited.pid
        wait_until(lambda: _proc_state(exited.pid) == "Z", 30, what="the child to exit")
        assert cluster.node_state(1) == "zombie" and not cluster.is_running(1)
    finally:
        exited.wait()
    assert cluster.node_state(1) == "exited"
    # a live process whose command line does not name this node's config is someone else's
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        spec.pid = other.pid
        wait_until(lambda: "time.sleep" in _proc_cmdline(other.pid), 30, what="the child to exec")
        assert cluster.node_state(1) == "exited"
    finally:
        other.kill()
        other.wait()
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(spec.config_path)])
    try:
        spec.pid = mine.pid
        wait_until(lambda: "time.sleep" in _proc_cmdline(mine.pid), 30, what="the child to exec")
        assert cluster.node_state(1) == "running" and cluster.is_running(1)
    finally:
        mine.kill()
        mine.wait()


def test_install_script_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(
        [shellcheck, str(INSTALL), str(DEPLOY / "scripts" / "system-deps.sh")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


def test_the_mtls_examples_load_and_name_the_units_credentials() -> None:
    """deploy/config/mtls: every listener TLS with client certificates, the key material where
    deploy/systemd/60-tls.conf's LoadCredential= puts it for that very unit."""
    from kraftlog.common.security._listener_security import ListenerSecurity

    for path in sorted((DEPLOY / "config" / "mtls").glob("*.toml")):
        cfg = common_config.load_node_config(path)
        unit = f"kraftlog-{role_of(cfg)}@{cfg.node_id}.service"
        assert cfg["ssl.keystore.location"] == f"/run/credentials/{unit}/keystore.pem"
        assert cfg["ssl.truststore.location"] == f"/run/credentials/{unit}/ca.crt"
        security = ListenerSecurity.from_config(cfg, "CONTROLLER")
        assert security.protocol == "SSL" and security.tls is not None and security.tls.client_auth == "required"
        assert cfg["authorizer.class.name"].endswith("StandardAuthorizer")
    dropin = (DEPLOY / "systemd" / "60-tls.conf").read_text()
    assert "LoadCredential=keystore.pem:" in dropin and "LoadCredential=ca.crt:" in dropin
