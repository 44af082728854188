"""The leaks of issue 24, found from outside against ``kraftlog local start --security scram``: the
metrics endpoint (answered anyone, with the labels of topics Metadata hides), SCRAM's answer for an
unknown user (told apart from a real one by its salt), the modes of the files and directories the
launcher writes, and passwords printed by ``--output json``.

One two-node cluster (both nodes combined controller+broker, so two Kafka listeners) started by the
CLI as a user starts it, with the metrics endpoint on (an ephemeral port, found in each node's log)
behind a bearer token. Each test first failed on main (see the report of issue 24)."""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from tests.integration.test_security_sasl import _call_on

pytestmark = pytest.mark.integration

TOKEN = "metrics-scraper-token-0123456789"


def kraftlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftlog.cli", *args], capture_output=True, text=True, timeout=180)


class Cluster:
    def __init__(self, directory: Path, started: dict[str, Any]) -> None:
        self.dir = directory
        self.started = started
        self.local = LocalCluster.load(directory)

    def metrics_port(self, node_id: int) -> int:
        log = self.local.nodes[node_id].log_path
        found: list[int] = []

        def logged() -> bool:
            match = re.search(r"metrics_endpoint_started.*?127\.0\.0\.1:(\d+)", Path(log).read_text(errors="replace"))
            if match:
                found.append(int(match.group(1)))
            return bool(found)

        wait_until(logged, 30.0, what=f"node {node_id}'s metrics endpoint in its log")
        return found[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("leaks")
    token_file = base / "metrics.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    directory = base / "cluster"
    started = kraftlog(
        "local",
        "start",
        "--dir",
        str(directory),
        "--security",
        "scram",
        "--controllers",
        "2",
        "--output",
        "json",
        "--override",
        "metrics.port=0",
        "--override",
        "metrics.listener.authentication=token",
        "--override",
        f"metrics.listener.token.file={token_file}",
    )
    assert started.returncode == 0, started.stderr[-3000:]
    c = Cluster(directory, {"stdout": started.stdout})
    try:
        yield c
    finally:
        c.local.stop()


# ------------------------------------------------------------------ the metrics endpoint


def _scrape(port: int, token: str | None, cafile: Path) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(cafile))
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_metrics_need_the_token_and_hide_the_labels_of_topics(cluster: Cluster) -> None:
    local = cluster.local
    with local.admin() as admin:
        assert admin.create_topics([NewTopic("secret", 1, 2)]).topics[0].error.code == 0
    from kraftlog.client import Producer

    with Producer(local.bootstrap_servers, acks="all", **local.client_security()) as producer:
        producer.send("secret", b"classified").result(30)
    cafile = local.tls_dir / "ca.crt"
    for node_id in sorted(local.nodes):
        port = cluster.metrics_port(node_id)
        assert _scrape(port, None, cafile)[0] == 401, "no credentials: refused"
        assert _scrape(port, "wrong-token", cafile)[0] == 401
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)  # HTTPS only
        status, text = _scrape(port, TOKEN, cafile)
        assert status == 200
        assert "kraftlog_broker_topic_bytes_in" in text or "process_cpu_seconds_total" in text
        assert 'topic="secret"' not in text, "ACLs are on: no per-topic labels"
        assert "topic=" not in text


# ------------------------------------------------------------------ SCRAM: unknown and known users


def _server_first(host: str, port: int, cafile: Path, user: str) -> tuple[bytes, int]:
    from kraftlog.common.security._acl import ScramMechanism
    from kraftlog.common.security._scram import ScramClient

    client = ScramClient(ScramMechanism.SCRAM_SHA_512, user, "whatever")
    context = ssl.create_default_context(cafile=str(cafile))
    with context.wrap_socket(socket.create_connection((host, port), timeout=10), server_hostname=host) as sock:
        assert int(_call_on(sock, 17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code) == 0
        answer = _call_on(sock, 36, 2, {"auth_bytes": client.first_message()})
        assert int(answer.error_code) == 0
    fields = dict(item.split("=", 1) for item in bytes(answer.auth_bytes).decode().split(","))
    return base64.b64decode(fields["s"]), int(fields["i"])


def test_scram_answers_an_unknown_user_as_a_known_one(cluster: Cluster) -> None:
    local = cluster.local
    cafile = local.tls_dir / "ca.crt"
    listeners = [address.rsplit(":", 1) for address in local.kafka_bootstrap_servers.split(",")]
    assert len(listeners) == 2
    answers: dict[str, list[tuple[bytes, int]]] = {"admin": [], "nobody": []}
    for user in answers:
        for host, port in listeners * 2:  # two tries on each node
            answers[user].append(_server_first(host, int(port), cafile, user))
    for user, seen in answers.items():
        assert len(set(seen)) == 1, f"{user}: one salt and iteration count on every node and try: {seen}"
    (admin_salt, admin_i), (nobody_salt, nobody_i) = answers["admin"][0], answers["nobody"][0]
    assert admin_i == nobody_i == 4096, "the default iteration count for both"
    assert len(admin_salt) == len(nobody_salt) and admin_salt != nobody_salt


# ------------------------------------------------------------------ files, directories, --output json


def _passwords(directory: Path) -> list[str]:
    """The secrets of a scram local cluster: the admin's and the nodes' SASL passwords, the Raft password."""
    return [
        (directory / "scram-admin.password").read_text().strip(),
        (directory / "scram-nodes.password").read_text().strip(),
        str(json.loads((directory / "cluster.json").read_text())["password"]),
    ]


def _holds_secrets(path: Path) -> bool:
    """Files whose very kind is secret: keys, passwords, configs with passwords, the cluster state."""
    return (
        path.suffix in (".key", ".password")
        or "keystore" in path.name
        or path.name in ("cluster.json", "client.properties", "config.toml")
    )


def test_secret_files_are_private_and_cluster_directories_closed(cluster: Cluster) -> None:
    base = cluster.dir
    secrets = [s.encode() for s in _passwords(base)]
    wrong: list[str] = []
    for path in [base, *base.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        name = f"{path.relative_to(base.parent)} {oct(mode)}"
        # the directories the launcher and storage format lay out (the nodes' partition and Raft
        # directories below them are made at run time, inside these closed ones)
        if path.is_dir() and len(path.relative_to(base).parts) <= 2 and mode != 0o700:
            wrong.append(name)
        elif path.is_file() and _holds_secrets(path) and mode != 0o600:
            wrong.append(name)
        elif path.is_file() and mode & 0o077 and path.stat().st_size < 1 << 20:
            data = path.read_bytes()
            if any(secret in data for secret in secrets):
                wrong.append(name + " (holds a password)")
    assert not wrong, "group/other may read: " + ", ".join(sorted(wrong)[:30])


def test_output_json_names_password_files_never_passwords(cluster: Cluster) -> None:
    local = cluster.local
    passwords = _passwords(cluster.dir)
    status = kraftlog("local", "status", "--dir", str(cluster.dir), "--output", "json")
    assert status.returncode == 0, status.stderr
    for text in (cluster.started["stdout"], status.stdout):
        shown = json.loads(text)
        assert shown["scram_password_file"] == str(cluster.dir / "scram-admin.password")
        assert shown["client_security"]["sasl_password_file"] == str(cluster.dir / "scram-admin.password")
        for password in passwords:
            assert password not in text
    assert local.security == "scram"
