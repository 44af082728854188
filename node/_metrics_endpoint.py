"""The node's Prometheus endpoint (``metrics.port``): who may scrape it, over what, and what it shows.

The endpoint tells a lot about a cluster (topic names in its labels, rates, sizes), so it is secured
like the node's listeners (issue 24), from the node's own config:

- **TLS** when the node's first listener (the one whose host the endpoint binds) is SSL or
  SASL_SSL: HTTPS with that listener's ``ssl.*`` key and certificate (listener-prefixed values
  win, as for the listener itself). A plaintext node serves plain HTTP, as before.
- **Authentication** (``metrics.listener.authentication``): ``none``; ``certificate``, a client
  certificate chaining to the listener's trust store (the cluster CA), checked in the TLS
  handshake, so a scraper without one never gets an HTTP answer; ``token``, an
  ``Authorization: Bearer <token>`` header equal to the content of ``metrics.listener.token.file``
  (read again on every scrape, so a rotated file applies without a restart; compared in constant
  time). A refused scrape gets 401 and nothing else.
- **Labels**: with an authorizer on (``authorizer.class.name``), every sample carrying a per-topic,
  per-group, per-user or per-client-id label is left out (Metadata hides topics a principal may not
  describe; a scraper is no principal the ACLs know), unless ``metrics.listener.topic.labels`` is
  true. Without an authorizer every topic is visible to every client anyway, and so are the labels.

The gRPC health service of every listener is not part of this endpoint and stays public.

Serving: one thread accepts, one thread per scrape (prometheus_client's threading WSGI server), the
TLS handshake done in the scrape's thread with a timeout, so a client that connects and stays silent
holds one thread for ``_SCRAPE_TIMEOUT_S`` at most and never the accepting one; at most
`MAX_CONCURRENT_SCRAPES` threads serve at once (one that trickles a byte now and then keeps its
slot, but a crowd of them cannot grow the node's threads).
"""

from __future__ import annotations

import copy
import dataclasses
import hmac
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, make_server

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from kraftlog.common.config import ConfigError
from kraftlog.node._errors import NodeStartupError

__all__ = [
    "METRICS_AUTHENTICATIONS",
    "TOPIC_LABELS",
    "MetricsAccess",
    "MetricsEndpoint",
    "metrics_host",
    "without_labels",
]

_log = structlog.get_logger(__name__)

METRICS_AUTHENTICATIONS: Final = ("none", "certificate", "token")
#: the labels that name what the ACLs protect: topics, consumer groups (ListGroups hides a group
#: from a principal without Describe as Metadata hides a topic), and the users and client ids of
#: the quota metrics (DescribeClientQuotas needs DescribeConfigs on the cluster); a sample carrying
#: any of them is left out when labels are hidden
TOPIC_LABELS: Final = frozenset({"topic", "group", "user", "client_id"})
_SCRAPE_TIMEOUT_S: Final = 10.0
_PATHS: Final = ("/metrics", "/")


def metrics_host(config: Any) -> str:
    """Where the endpoint binds: the host of the node's first listener (the interface the operator
    already chose for this node), or every interface when that host is empty, as Kafka reads it."""
    from kraftlog.common.config import parse_listeners

    listeners = parse_listeners(config["listeners"])
    for host, _port in listeners.values():
        return host or "0.0.0.0"
    return "0.0.0.0"


@dataclass(frozen=True)
class MetricsAccess:
    """How the endpoint is reached and what it shows; `from_config` reads and checks it."""

    tls: ssl.SSLContext | None = None
    authentication: str = "none"
    token_file: Path | None = None
    hide_topic_labels: bool = False
    read_token: Callable[[Path], bytes] = field(default=lambda path: path.read_bytes().strip(), repr=False)

    @classmethod
    def from_config(cls, config: Any) -> MetricsAccess:
        """The access of a node's endpoint; `ConfigError` names the key at fault (a certificate
        login without a TLS listener or trust store, a token file that cannot be read or is empty)."""
        from kraftlog.common.config import parse_listeners
        from kraftlog.common.security import TlsSettings, listener_prefix, listener_protocol, server_context

        authentication = str(config["metrics.listener.authentication"])
        names = list(parse_listeners(config["listeners"]))
        tls: ssl.SSLContext | None = None
        settings = None
        if names and listener_protocol(config, names[0]) in ("SSL", "SASL_SSL"):
            settings = TlsSettings.from_config(config, listener_prefix(names[0]))
        if authentication == "certificate":
            if settings is None or not settings.has_truststore:
                raise ConfigError(
                    "metrics.listener.authentication=certificate needs TLS on the node's first listener "
                    f"({names[0] if names else 'none'}) with a trust store (ssl.truststore.*): the client "
                    "certificates are checked against it",
                    key="metrics.listener.authentication",
                )
            settings = dataclasses.replace(settings, client_auth="required")
        elif settings is not None:
            settings = dataclasses.replace(settings, client_auth="none")
        if settings is not None:
            tls = server_context(settings)
        token_file: Path | None = None
        if authentication == "token":
            location = config["metrics.listener.token.file"]
            if not location:
                raise ConfigError(
                    "metrics.listener.authentication=token needs metrics.listener.token.file",
                    key="metrics.listener.token.file",
                )
            token_file = Path(str(location))
            try:
                token = token_file.read_bytes().strip()
            except OSError as err:
                raise ConfigError(
                    f"cannot read metrics.listener.token.file {token_file}: {err.strerror or err}",
                    key="metrics.listener.token.file",
                ) from err
            if not token:
                raise ConfigError(
                    f"metrics.listener.token.file {token_file} is empty", key="metrics.listener.token.file"
                )
            if token_file.stat().st_mode & 0o077:
                _log.warning(
                    "metrics_token_file_readable_by_others",
                    path=str(token_file),
                    detail="the bearer token should be readable by its owner only: chmod 600",
                )
            if tls is None:
                _log.warning(
                    "metrics_token_over_plaintext",
                    detail="the metrics endpoint is plain HTTP: the bearer token crosses the network in clear",
                )
        hide = bool(config["authorizer.class.name"]) and not config["metrics.listener.topic.labels"]
        return cls(tls, authentication, token_file, hide)

    def authorized(self, authorization_header: str | None) -> bool:
        """Whether a scrape with this ``Authorization`` header is let in (certificates are checked
        in the handshake already; a token file that cannot be read now refuses every scrape)."""
        if self.authentication != "token":
            return True
        assert self.token_file is not None
        scheme, _, presented = (authorization_header or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        try:
            expected = self.read_token(self.token_file)
        except OSError as err:
            _log.warning("metrics_token_file_unreadable", path=str(self.token_file), error=str(err))
            return False
        return bool(expected) and hmac.compare_digest(presented.strip().encode("utf-8", "replace"), expected)


class _WithoutLabels:
    """A read-only view of a registry without the samples that carry any of ``labels``: a family
    left with no sample is left out whole."""

    def __init__(self, registry: Any, labels: frozenset[str]) -> None:
        self._registry = registry
        self._labels = labels

    def collect(self) -> Iterator[Any]:
        for family in self._registry.collect():
            samples = [s for s in family.samples if not self._labels.intersection(s.labels)]
            if family.samples and not samples:
                continue
            if len(samples) == len(family.samples):
                yield family
                continue
            kept = copy.copy(family)
            kept.samples = samples
            yield kept

    def restricted_registry(self, names: Iterable[str]) -> _WithoutLabels:
        """prometheus_client's ``?name[]=`` filter, still without the labels."""
        return _WithoutLabels(self._registry.restricted_registry(names), self._labels)


def without_labels(registry: Any, labels: frozenset[str] = TOPIC_LABELS) -> Any:
    """``registry`` as the endpoint shows it when topic labels are hidden."""
    return _WithoutLabels(registry, labels)


class _Handler(WSGIRequestHandler):
    """One scrape: TLS handshake (when TLS) in this thread under a timeout, no access log lines."""

    timeout = _SCRAPE_TIMEOUT_S

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError) as err:  # no certificate, a foreign CA, plain HTTP, silence
                _log.debug("metrics_handshake_failed", client=self.client_address[0], error=str(err))
                return
        super().handle()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        pass


#: scrapes served at once, each in its thread; a connection over it is closed at accept, so
#: clients that connect and trickle bytes cannot pile up threads (a scraper retries)
MAX_CONCURRENT_SCRAPES: Final = 16


class _Server(ThreadingWSGIServer):
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scrape_slots = threading.BoundedSemaphore(MAX_CONCURRENT_SCRAPES)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._scrape_slots.acquire(blocking=False):
            _log.debug("metrics_scrape_refused", client=client_address[0] if client_address else None)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._scrape_slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._scrape_slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("metrics_scrape_failed", client=client_address[0] if client_address else None)


class MetricsEndpoint:
    """``GET /metrics`` in the Prometheus text format on ``host:port``, from its own threads."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, access: MetricsAccess | None = None) -> None:
        self.registry = registry
        self.host = host
        self.requested_port = port
        self.access = access or MetricsAccess()
        self._httpd: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (differs from the configured one only for ``metrics.port = 0``)."""
        return int(self._httpd.server_port) if self._httpd is not None else self.requested_port

    @property
    def scheme(self) -> str:
        return "https" if self.access.tls is not None else "http"

    def _app(self) -> Callable[..., Any]:
        shown = without_labels(self.registry) if self.access.hide_topic_labels else self.registry
        metrics = make_wsgi_app(registry=shown)
        access = self.access

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO", "/") not in _PATHS:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"not found\n"]
            if not access.authorized(environ.get("HTTP_AUTHORIZATION")):
                start_response(
                    "401 Unauthorized",
                    [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="kraftlog metrics"')],
                )
                return [b"unauthorized\n"]
            result: Iterable[bytes] = metrics(environ, start_response)
            return result

        return app

    def start(self) -> None:
        """Bind and serve; a port that cannot be bound stops the node with an error naming the key."""
        try:
            httpd = make_server(self.host, self.requested_port, self._app(), _Server, handler_class=_Handler)
        except OSError as err:
            reason = err.strerror or str(err)
            raise NodeStartupError(
                f"cannot serve metrics on {self.host}:{self.requested_port} (metrics.port): {reason}"
            ) from err
        if self.access.tls is not None:
            httpd.socket = self.access.tls.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="metrics-endpoint", daemon=True)
        self._thread.start()
        _log.info(
            "metrics_endpoint_started",
            address=f"{self.host}:{self.port}",
            path="/metrics",
            scheme=self.scheme,
            authentication=self.access.authentication,
            topic_labels=not self.access.hide_topic_labels,
        )

    def stop(self) -> None:
        """Stop serving and close the socket (blocks for up to the server's 0.5 s poll interval)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        _log.info("metrics_endpoint_stopped")
