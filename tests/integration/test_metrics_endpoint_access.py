"""The metrics endpoint's access (issue 24): HTTPS from the node's listener TLS, client certificates
or a bearer token, and no topic labels under ACLs; checked against an in-process endpoint on
127.0.0.1 with certificates of a throw-away CA (real sockets and TLS handshakes)."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from kraftlog.common.config import NodeConfig
from kraftlog.deploy._certs import load_issued, make_ca, make_certificate
from kraftlog.node._metrics_endpoint import MetricsAccess, MetricsEndpoint

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    ca = make_ca(folder, "metrics test CA")
    make_certificate(ca, folder, "node-1", ["127.0.0.1", "localhost"])
    make_certificate(ca, folder, "scraper", client=True)
    foreign = make_ca(folder / "foreign", "another CA")
    make_certificate(foreign, folder / "foreign", "intruder", client=True)
    return folder


def _config(tls_dir: Path | None, **extra: Any) -> NodeConfig:
    values: dict[str, Any] = {
        "node.id": 1,
        "process.roles": "broker",
        "listeners": "BROKER://127.0.0.1:9092",
        "controller.quorum.voters": "9@127.0.0.1:9999",
        "log.dirs": "/tmp/x",
    }
    if tls_dir is not None:
        values["listener.security.protocol.map"] = "BROKER:SSL"
        values.update(load_issued(tls_dir, "node-1").ssl_config())
    values.update(extra)
    return NodeConfig.from_mapping(values)


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    per_topic = Counter("kraftlog_broker_topic_bytes_in", "bytes in", ["topic"], registry=registry)
    per_topic.labels("secret").inc(5)
    per_topic.labels("public").inc(7)
    Counter("kraftlog_requests", "requests", registry=registry).inc(3)
    return registry


@pytest.fixture
def serve() -> Iterator[Any]:
    endpoints: list[MetricsEndpoint] = []

    def start(access: MetricsAccess) -> MetricsEndpoint:
        endpoint = MetricsEndpoint(_registry(), "127.0.0.1", 0, access)
        endpoint.start()
        endpoints.append(endpoint)
        return endpoint

    yield start
    for endpoint in endpoints:
        endpoint.stop()


def _get(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def _client(tls_dir: Path, name: str | None = None, folder: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    if name is not None:
        issued = load_issued(folder or tls_dir, name)
        context.load_cert_chain(str(issued.certificate_path), str(issued.key_path))
    return context


def test_a_plaintext_node_without_acls_serves_everything_over_http(serve: Any) -> None:
    endpoint = serve(MetricsAccess.from_config(_config(None)))
    assert endpoint.scheme == "http"
    status, text = _get(f"http://127.0.0.1:{endpoint.port}/metrics")
    assert status == 200 and 'topic="secret"' in text and "kraftlog_requests_total 3.0" in text
    assert _get(f"http://127.0.0.1:{endpoint.port}/elsewhere")[0] == 404


def test_acls_hide_topic_labels_unless_told_otherwise(serve: Any) -> None:
    acls = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    hidden = serve(MetricsAccess.from_config(_config(None, **acls)))
    status, text = _get(f"http://127.0.0.1:{hidden.port}/metrics")
    assert status == 200 and "kraftlog_requests_total 3.0" in text
    assert "topic=" not in text and "kraftlog_broker_topic_bytes_in" not in text
    shown = serve(MetricsAccess.from_config(_config(None, **acls, **{"metrics.listener.topic.labels": "true"})))
    assert 'topic="public"' in _get(f"http://127.0.0.1:{shown.port}/metrics")[1]
    # ?name[]= picks families, and still hides the labels
    picked = _get(f"http://127.0.0.1:{hidden.port}/metrics?name[]=kraftlog_broker_topic_bytes_in_total")[1]
    assert "topic=" not in picked


def test_a_tls_listener_gives_https_and_a_token_is_required(serve: Any, tls_dir: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "metrics.token"
    token_file.write_text("s3cr3t-token\n")
    access = MetricsAccess.from_config(
        _config(
            tls_dir,
            **{"metrics.listener.authentication": "token", "metrics.listener.token.file": str(token_file)},
        )
    )
    endpoint = serve(access)
    url = f"https://127.0.0.1:{endpoint.port}/metrics"
    assert endpoint.scheme == "https"
    assert _get(url, context=_client(tls_dir))[0] == 401
    assert _get(url, context=_client(tls_dir), token="wrong")[0] == 401
    assert _get(url, context=_client(tls_dir), token="s3cr3t-token")[0] == 200
    token_file.write_text("rotated-token")  # read again on every scrape
    assert _get(url, context=_client(tls_dir), token="s3cr3t-token")[0] == 401
    assert _get(url, context=_client(tls_dir), token="rotated-token")[0] == 200
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5)


def test_certificate_authentication_wants_one_from_the_cluster_ca(serve: Any, tls_dir: Path) -> None:
    endpoint = serve(MetricsAccess.from_config(_config(tls_dir, **{"metrics.listener.authentication": "certificate"})))
    url = f"https://127.0.0.1:{endpoint.port}/metrics"
    assert _get(url, context=_client(tls_dir, "scraper"))[0] == 200
    for context in (_client(tls_dir), _client(tls_dir, "intruder", tls_dir / "foreign")):
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            urllib.request.urlopen(url, timeout=5, context=context)
    # a silent client does not block the others (the handshake runs in the scrape's own thread)
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5):
        assert _get(url, context=_client(tls_dir, "scraper"))[0] == 200


def test_clients_that_hold_connections_open_cannot_pile_up_threads(serve: Any) -> None:
    """Connections that send nothing hold at most MAX_CONCURRENT_SCRAPES threads; the rest are
    closed at accept, and once the holders go a scrape is served again."""
    import select
    import threading

    from kraftlog.common import wait_until
    from kraftlog.node._metrics_endpoint import MAX_CONCURRENT_SCRAPES

    endpoint = serve(MetricsAccess.from_config(_config(None)))
    before = threading.active_count()
    holders = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) for _ in range(60)]
    ended: set[socket.socket] = set()

    def over_the_cap_closed() -> bool:
        readable, _, _ = select.select([h for h in holders if h not in ended], [], [], 0.2)
        for sock in readable:
            try:
                if sock.recv(1) == b"":
                    ended.add(sock)
            except ConnectionResetError:
                ended.add(sock)
        return len(ended) >= len(holders) - MAX_CONCURRENT_SCRAPES

    try:
        assert wait_until(over_the_cap_closed, timeout_s=8), f"{len(ended)} of {len(holders)} closed"
        assert len(ended) == len(holders) - MAX_CONCURRENT_SCRAPES  # the others hold a slot each
        assert threading.active_count() - before <= MAX_CONCURRENT_SCRAPES
    finally:
        for sock in holders:
            sock.close()

    def scraped() -> bool:
        try:
            return _get(f"http://127.0.0.1:{endpoint.port}/metrics")[0] == 200
        except OSError:  # refused while the holders' threads were still ending
            return False

    assert wait_until(scraped, timeout_s=20)
