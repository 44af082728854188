"""A running node: its roles (controller, broker, or both), listeners, health, metrics and signals.

`serve` is what ``kraftlog serve --config node.toml`` runs and what systemd starts.

Start order: config (unknown keys and bad values stop here, naming the key), logging with the node's
id and roles bound, the formatted-dirs check (a node refuses to start unformatted or with another
cluster's id), then the metrics endpoint when ``metrics.port`` is set (before any role, so a port
already in use stops the node before it joins anything), then the roles. A controller serves
ControllerService and AdminService on its voter address, plus the standard gRPC health and
reflection services. SIGTERM or SIGINT stops the node cleanly; a second signal exits at once.

A controller that meets a committed metadata record it cannot replay (at start or later) stops the
node: one critical ``metadata_replay_failed`` log line names the offset, the record type and the
reason, the node shuts down cleanly and exits with status 1 (``kraftlog quorum check`` shows the
record, ``kraftlog quorum repair`` rebuilds the log before it). Shutdown is bounded in every step.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import os
import signal
import socket
from typing import Any

import structlog

from kraftlog.node._errors import NodeStartupError

__all__ = ["Node", "serve"]

_log = structlog.get_logger(__name__)


def _warn_without_scram_secret(config: Any) -> None:
    """A node offering SCRAM without a cluster-wide secret answers unknown names with a salt of its
    own (another one on each node and after each restart): say so once, at start."""
    from kraftlog.common.security import listener_protocol, scram_secret_of

    scram = any(str(m).startswith("SCRAM-") for m in config.get("sasl.enabled.mechanisms") or [])
    sasl = any(listener_protocol(config, name).startswith("SASL_") for name in _listener_names(config))
    if scram and sasl and scram_secret_of(config) is None:
        _log.warning(
            "scram_unknown_user_secret_missing",
            detail="set sasl.scram.unknown.user.secret (the same on every node) or "
            "controller.quorum.raft.password: without either, an unknown SCRAM user gets another "
            "salt on each node, which tells it from a real one",
        )


def _listener_names(config: Any) -> list[str]:
    from kraftlog.common.config import parse_listeners

    return list(parse_listeners(config["listeners"]))


class Node:
    """The roles of one process, sharing one asyncio loop and one gRPC server per listener."""

    def __init__(self, config: Any, cluster_id: str) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.controller: Any = None
        self.broker: Any = None
        self.servers: list[Any] = []
        self.health: Any = None
        self.broker_health: Any = None
        self._ready_task: asyncio.Task[None] | None = None
        self.registry: Any = None  # the node's metrics registry, when metrics.port is set
        self.metrics_endpoint: Any = None

    async def start(self) -> None:
        import grpc
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection

        max_bytes = self.config["grpc.max.message.bytes"]
        options = [
            ("grpc.max_send_message_length", max_bytes),
            # Kafka's socket.request.max.bytes: the largest request this node's servers accept
            ("grpc.max_receive_message_length", min(max_bytes, self.config["socket.request.max.bytes"])),
            ("grpc.so_reuseport", 0),
        ]
        _warn_without_scram_secret(self.config)
        metrics_port = self.config["metrics.port"]
        if metrics_port >= 0:
            from kraftlog.common.config import ConfigError
            from kraftlog.node._metrics import new_node_registry
            from kraftlog.node._metrics_endpoint import MetricsAccess, MetricsEndpoint, metrics_host

            try:
                access = MetricsAccess.from_config(self.config)
            except ConfigError as err:
                raise NodeStartupError(f"metrics endpoint: {err}") from err
            self.registry = new_node_registry()
            self.metrics_endpoint = MetricsEndpoint(self.registry, metrics_host(self.config), metrics_port, access)
            self.metrics_endpoint.start()

        def new_server(service_names: list[str], role: str, security: Any, sasl: Any = None) -> tuple[Any, Any]:
            listener_options = [*options, *_connection_options(self.config, security.listener)]
            interceptors = []
            if self.registry is not None:
                from kraftlog.node._metrics import RpcMetricsInterceptor

                interceptors.append(RpcMetricsInterceptor(self.registry, role))
            interceptors.append(security)  # inside the metrics: refusals are measured too
            server = grpc.aio.server(options=listener_options, interceptors=interceptors)
            servicer = health.aio.HealthServicer() if hasattr(health, "aio") else health.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
            add_sasl_service(server, sasl)
            service_names = [*service_names, security_pb2.DESCRIPTOR.services_by_name["SaslService"].full_name]
            reflection.enable_server_reflection(
                service_names + [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
                server,
            )
            return server, servicer

        from kraftlog.common.security import ListenerSecurity
        from kraftlog.node._grpc_sasl import add_sasl_service
        from kraftlog.node._grpc_security import interceptor
        from kraftlog.proto import (
            admin_pb2,
            broker_pb2,
            controller_pb2,
            diagnostics_pb2,
            security_pb2,
        )

        controller_security = ListenerSecurity.from_config(self.config, "CONTROLLER")

        admin_name = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
        if "controller" in self.config.roles:
            from kraftlog.broker.quota import ControllerMutationQuotaManager
            from kraftlog.quorum import ControllerServer

            mutation_quotas = ControllerMutationQuotaManager(
                lambda: self.controller.image.quotas,
                window_num=self.config["controller.quota.window.num"],
                window_size_ms=self.config["controller.quota.window.size.seconds"] * 1000,
            )
            directories: dict[int, str] | None = None
            if self.config.kraft_version >= 1 and self.config.node_id not in self.config.quorum_voters:
                from kraftlog.node._quorum_join import discover_voters, known_voters

                # formatted with --no-initial-controllers (issue 26): the voters its Raft dir kept, else
                # the bootstrap servers' answer (an observer until a voter change adds it)
                known = known_voters(self.config)
                self.config, directories = known if known is not None else await discover_voters(self.config)
            self.controller = ControllerServer(
                self.config,
                self.cluster_id,
                registry=self.registry,
                mutation_quotas=mutation_quotas,
                voter_directory_ids=directories,
            )
            controller_sasl = _sasl_sessions(controller_security, lambda: self.controller.image)
            server, self.health = new_server(
                [admin_name, controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name],
                "controller",
                interceptor(controller_security, self.controller.acl_gate, controller_sasl),
                controller_sasl,
            )
            self.controller.add_to_server(server)
            host, port = self.config.controller_endpoint
            if _add_port(server, f"{host}:{port}", controller_security) == 0:
                raise NodeStartupError(f"cannot listen on the controller address {host}:{port}")
            await self.controller.start()
            await server.start()
            self.servers.append(server)
            await _set(self.health, health_pb2.HealthCheckResponse.SERVING)
        if "broker" in self.config.roles:
            from kraftlog.broker import BrokerServer

            self.broker = BrokerServer(self.config, self.cluster_id, registry=self.registry)
            broker_sasl = _sasl_sessions(self.broker.grpc_security, lambda: self.broker.follower.image)
            server, self.broker_health = new_server(
                [
                    admin_name,
                    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name,
                    diagnostics_pb2.DESCRIPTOR.services_by_name["DiagnosticsService"].full_name,
                ],
                "broker",
                interceptor(self.broker.grpc_security, self.broker.acl_gate, broker_sasl),
                broker_sasl,
            )
            self.broker.add_to_server(server)
            await _set(self.broker_health, health_pb2.HealthCheckResponse.NOT_SERVING)
            if _add_port(server, f"{self.broker.host}:{self.broker.port}", self.broker.grpc_security) == 0:
                raise NodeStartupError(f"cannot listen on the broker address {self.broker.host}:{self.broker.port}")
            await self.broker.start()
            await server.start()
            self.servers.append(server)
            self._ready_task = asyncio.get_running_loop().create_task(self._serving_when_unfenced())
        _log.info("node_started", roles=list(self.config.roles), pid=os.getpid())

    async def _serving_when_unfenced(self) -> None:
        """Health says SERVING for the broker only while it knows itself unfenced: not before its
        registration caught up, and not after a fencing (told by the controller, or presumed after a
        session without an answered heartbeat) until a fresh heartbeat unfences it."""
        from grpc_health.v1 import health_pb2

        while True:
            while not await self.broker.wait_ready(5.0):
                pass
            await _set(self.broker_health, health_pb2.HealthCheckResponse.SERVING)
            _log.info("broker_serving")
            await self.broker.wait_fenced()
            await _set(self.broker_health, health_pb2.HealthCheckResponse.NOT_SERVING)
            _log.info("broker_not_serving", reason="fenced")

    async def stop(self) -> None:
        """Broker first (its controlled shutdown needs the controllers), then the controller."""
        from grpc_health.v1 import health_pb2

        for servicer in (self.health, self.broker_health):
            await _set(servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
        if self._ready_task is not None:
            self._ready_task.cancel()
        if self.broker is not None:
            session_s = self.config["broker.session.timeout.ms"] / 1000.0
            await _bounded(self.broker.stop(controlled=self._quorum_can_act()), session_s + 10.0, "broker")
        for server in self.servers:
            await _bounded(server.stop(grace=1.0), 5.0, "grpc_server")
        if self.controller is not None:
            await _bounded(self.controller.stop(), 15.0, "controller")
        if self.metrics_endpoint is not None:
            # last: scrapes see the shutdown
            await _bounded(asyncio.to_thread(self.metrics_endpoint.stop), 5.0, "metrics")
        _log.info("node_stopped")

    def _quorum_can_act(self) -> bool:
        """Whether a controlled shutdown can be granted at all. A combined node that sees no majority
        of the voters (the last controller of a cluster being stopped) knows no controller can
        commit the leadership moves: asking would only wait out the whole session timeout."""
        quorum = self.controller.quorum if self.controller is not None else None
        if quorum is None or quorum.majority_connected:
            return True
        _log.info("controlled_shutdown_skipped", reason="no majority of the controller quorum is reachable")
        return False


def _connection_options(config: Any, listener: str) -> list[tuple[str, int]]:
    """Kafka's connection limits as a gRPC server of ``listener`` can have them (grpc's options
    are per server, and it never shows the application a connection):

    - ``connections.max.idle.ms`` -> ``grpc.max_connection_idle_ms``: a connection without a call
      for that long gets a GOAWAY (clients reconnect on their next call);
    - ``connections.handshake.timeout.ms`` -> ``grpc.server_handshake_timeout_ms``: TLS and the
      HTTP/2 preface must finish within it (a SASL session is per call, not per connection, so
      SASL is not part of it);
    - ``listener.name.<l>.max.connections`` -> ``grpc.max_allowed_incoming_connections``: grpc
      closes connections over it (Kafka would wait to accept them). The broker-wide
      ``max.connections`` and the per-address limits count Kafka listeners only: grpc cannot count
      by address, and the nodes' own traffic runs on the gRPC listeners (Kafka likewise exempts its
      inter-broker listener from the broker-wide limit);
    - ``grpc.max.concurrent.streams`` -> ``grpc.max_concurrent_streams``: calls in progress on one
      connection (more wait in the client).
    """
    from kraftlog.common.security import listener_prefix

    int_max = 2**31 - 1
    out = [
        ("grpc.server_handshake_timeout_ms", int(config["connections.handshake.timeout.ms"])),
        ("grpc.max_concurrent_streams", int(config["grpc.max.concurrent.streams"])),
    ]
    idle_ms = int(config["connections.max.idle.ms"])
    if idle_ms >= 0:
        out.append(("grpc.max_connection_idle_ms", min(idle_ms, int_max)))
    key = listener_prefix(listener) + "max.connections"
    if key in config:
        out.append(("grpc.max_allowed_incoming_connections", int(config[key])))
    return out


def _sasl_sessions(security: Any, image: Any) -> Any:
    """The SASL sessions of a SASL gRPC listener (None for the others); SCRAM credentials are
    looked up in the role's current metadata image."""
    if not security.uses_sasl:
        return None
    from kraftlog.common.security import SaslSessions

    return SaslSessions(security, lambda mechanism, user: image().scram.credential(mechanism, user))


def _add_port(server: Any, address: str, security: Any) -> int:
    """Listen on ``address`` with the listener's protocol: TLS (SSL) or plaintext."""
    import grpc

    from kraftlog.common.security import grpc_server_credentials

    if not security.uses_tls:
        return int(server.add_insecure_port(address))
    creds = grpc_server_credentials(security.tls)
    credentials = grpc.ssl_server_credentials(
        [(creds.private_key_pem, creds.certificate_chain_pem)],
        root_certificates=creds.root_certificates_pem,
        require_client_auth=creds.require_client_auth,
    )
    return int(server.add_secure_port(address, credentials))


async def _bounded(step: Any, timeout_s: float, name: str) -> None:
    """Run one shutdown step for at most ``timeout_s``: a step that hangs (a dead peer, a stuck
    thread) is logged and skipped, so the process still exits within its systemd stop timeout."""
    try:
        await asyncio.wait_for(step, timeout_s)
    except TimeoutError:
        _log.warning("node_stop_step_timed_out", step=name, timeout_s=timeout_s)


async def _set(servicer: Any, status: Any) -> None:
    if servicer is None:
        return
    result = servicer.set("", status)
    if asyncio.iscoroutine(result):
        await result


async def _serve(config: Any, cluster_id: str) -> int:
    node = Node(config, cluster_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            os._exit(1)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    from kraftlog.quorum import MetadataReplayFailure

    try:
        try:
            await node.start()
        except MetadataReplayFailure as err:
            _log.info("node_stopping", reason="metadata_replay_failed", offset=err.offset)
            return 1
        # what stops the node: a metadata record the controller cannot replay (a finalized feature
        # level it does not support included), or the controller refusing this broker's
        # registration for a finalized feature level it does not support
        fatals = [node.controller.fatal] if node.controller is not None else []
        if node.broker is not None:
            fatals.append(node.broker.lifecycle.unsupported)
        if node.broker is not None:
            # READY means joined: registered and unfenced (caught up with the metadata log)
            while not stop.is_set() and not any(f.is_set() for f in fatals) and not await node.broker.wait_ready(1.0):
                pass
        _sd_notify("READY=1")
        waits = [asyncio.ensure_future(stop.wait()), *(asyncio.ensure_future(f.wait()) for f in fatals)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        _sd_notify("STOPPING=1")
        if node.controller is not None and node.controller.fatal.is_set():
            _log.info("node_stopping", reason="metadata_replay_failed", offset=node.controller.fatal_error.offset)
            return 1
        if node.broker is not None and node.broker.lifecycle.unsupported.is_set():
            _log.info("node_stopping", reason=node.broker.lifecycle.unsupported_reason)
            return 1
    finally:
        await node.stop()
    return 0


def _sd_notify(state: str) -> None:
    """systemd's Type=notify protocol over $NOTIFY_SOCKET, without a dependency."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    if path.startswith("@"):
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(path)
            sock.sendall(state.encode())
    except OSError as err:
        _log.warning("sd_notify_failed", error=str(err))


def serve(config: Any, *, log_level: str = "info") -> int:
    """Run a node until SIGTERM/SIGINT (exit status 0) or a fatal metadata error (1).

    Order: logging with the node's id and roles bound, the formatted-dirs check (`NodeStartupError`
    when a dir is not the node's), the voter set of a dynamic quorum (`resolve_quorum`), then
    `Node.start`.
    """
    from kraftlog.common.config import keys_without_effect
    from kraftlog.node._format import check_formatted, resolve_quorum
    from kraftlog.node._logging import configure_logging

    configure_logging(node_id=config.node_id, role="+".join(config.roles), level=log_level)
    for key, why in keys_without_effect(config.originals):
        _log.warning("config_key_without_effect", key=key, value=config[key], reason=why)
    cluster_id = check_formatted(config)
    config = resolve_quorum(config)  # a dynamic quorum's controller: the voter set it was formatted with
    status = asyncio.run(_serve(config, cluster_id))
    # The node has stopped and closed what it owns. The interpreter's last collection at exit then
    # took 1-6 s of wall time (measured: a one-node cluster's SIGTERM-to-exit went from 6-7.5 s to
    # 0.4-1.4 s on a loaded 2-core machine, for ~0.25 s less CPU) running the finalizers of objects
    # left in cycles (grpc's among them): every stop, restart and test teardown waited for it
    # (issue 23). Freezing the heap at exit skips that collection; module teardown still runs.
    atexit.register(gc.freeze)
    return status
