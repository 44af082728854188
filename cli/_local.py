"""``kraftlog local start|stop|restart|status``: a local multi-process cluster on 127.0.0.1.

The same launcher the integration tests and the chaos runs use. ``start`` formats and starts the
nodes (or starts again those of a cluster already laid out in ``--dir`` that are not running),
waits until every broker is unfenced, and prints the addresses; with ``--foreground`` it stays
until Ctrl-C and then stops every node cleanly. ``--node N`` makes ``start``, ``stop`` and
``restart`` act on one node of the cluster. ``status`` tells a running node from a paused, exited
or zombie one. ``make run`` runs ``local start --foreground --demo``.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from kraftlog.cli._common import Subparsers, UserError, add_output_option, described, print_json

__all__ = ["add_parser", "run"]

DEFAULT_DIR = ".kraftlog/cluster"


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "local", help="start, stop or inspect a local multi-process cluster", **described(__doc__)
    )
    sub = parser.add_subparsers(dest="local_command", metavar="ACTION")
    sub.required = True
    start = sub.add_parser("start", help="format (first time) and start the cluster")
    start.add_argument("--dir", default=DEFAULT_DIR, help=f"cluster directory (default {DEFAULT_DIR})")
    start.add_argument("--controllers", type=int, default=3, help="controller nodes (default 3)")
    start.add_argument("--brokers", type=int, default=0, help="broker-only nodes in addition (default 0)")
    start.add_argument(
        "--separate",
        action="store_true",
        help="dedicated controllers (default: controllers are combined controller+broker)",
    )
    start.add_argument("--foreground", action="store_true", help="stay until Ctrl-C, then stop every node")
    start.add_argument(
        "--demo",
        action="store_true",
        help="create a demo topic (3 partitions, RF 3), produce and consume a few records",
    )
    start.add_argument("--timeout-s", type=float, default=120.0, help="how long to wait for readiness")
    start.add_argument(
        "--network",
        choices=("loopback", "netns"),
        default="loopback",
        help="loopback (default): every node on 127.0.0.1; netns (root, iproute2): each node in "
        "its own network namespace, so 'kraftlog chaos run' can cut and heal its links; "
        "reach such a cluster with 'ip netns exec <prefix>-hub ...'",
    )
    start.add_argument(
        "--security",
        choices=("plaintext", "tls", "mtls", "scram"),
        default="plaintext",
        help="plaintext (default); tls: every listener on TLS with a throw-away CA; mtls: also client "
        "certificates required and ACLs on (the nodes and User:CN=admin are super users); scram: as "
        "mtls, with the Kafka listener on SASL_SSL (SCRAM-SHA-256/512, user admin, password in "
        "<dir>/scram-admin.password). kraftlog's commands connect with --command-config <dir>/client.properties",
    )
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a node config key set on every node, e.g. broker.session.timeout.ms=2000 "
        "(repeatable; applies when the cluster is first laid out in --dir)",
    )
    start.add_argument(
        "--node-override",
        action="append",
        default=[],
        metavar="N:KEY=VALUE",
        help="a node config key set on node N only, over --override, e.g. 2:broker.rack=r2 "
        "(repeatable; applies when the cluster is first laid out in --dir)",
    )
    _add_node_option(start, "start only this node of a cluster laid out already")
    add_output_option(start)
    stop = sub.add_parser("stop", help="stop every node of the cluster in --dir (or one, with --node)")
    stop.add_argument("--dir", default=DEFAULT_DIR)
    _add_node_option(stop, "stop only this node")
    add_output_option(stop)
    restart = sub.add_parser("restart", help="stop and start one node (--node) or every node")
    restart.add_argument("--dir", default=DEFAULT_DIR)
    _add_node_option(restart, "restart only this node")
    restart.add_argument("--timeout-s", type=float, default=120.0, help="how long to wait for readiness")
    add_output_option(restart)
    status = sub.add_parser("status", help="addresses and processes of the cluster in --dir")
    status.add_argument("--dir", default=DEFAULT_DIR)
    add_output_option(status)
    return parser


def _add_node_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--node", type=int, default=None, metavar="N", help=f"{what} (its node id)")


def _load(directory: str) -> Any:
    from kraftlog.deploy import STATE_FILE, LocalCluster

    if not (Path(directory) / STATE_FILE).exists():
        raise UserError(f"no cluster in {directory} (start one with 'kraftlog local start --dir {directory}')")
    return LocalCluster.load(directory)


#: keys the launcher derives from the layout (ports, dirs, voters); an override would break the cluster
_LAYOUT_KEYS = frozenset(
    {
        "node.id",
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.raft.port.offset",
        "controller.quorum.raft.password",
        "controller.quorum.raft.voter.keys",
        "controller.quorum.raft.identity.key.file",
        "listeners",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
    }
)


def parse_node_overrides(items: list[str]) -> dict[int, dict[str, Any]]:
    """``N:KEY=VALUE`` strings -> settings per node id, checked as `parse_overrides` checks them."""
    by_node: dict[int, list[str]] = {}
    for item in items:
        node, sep, rest = item.partition(":")
        if not sep or not node.strip().isdigit():
            raise UserError(f"--node-override {item!r}: expected N:KEY=VALUE (N a node id)")
        by_node.setdefault(int(node), []).append(rest)
    return {node: parse_overrides(entries) for node, entries in by_node.items()}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> settings for every node, each checked against the node config schema
    now, so a typo fails before anything is formatted, with the key named."""
    from kraftlog.cli._admin_command import parse_key_values
    from kraftlog.common import config as common_config

    settings: dict[str, Any] = {}
    for key, raw in parse_key_values(items, "--override").items():
        if key in _LAYOUT_KEYS:
            raise UserError(f"--override {key}: the launcher sets {key} from the cluster layout")
        try:
            parsed = common_config.NODE_CONFIG_DEFS.parse_value(key, raw)
        except common_config.ConfigError as err:
            raise UserError(f"--override {key}: {err}") from err
        # the node re-parses its config file: keep plain values, and the text for anything else
        settings[key] = parsed if isinstance(parsed, (bool, int, float, str, list)) else raw
    return settings


def _chosen(cluster: Any, node: int | None) -> list[int]:
    if node is None:
        return sorted(cluster.nodes)
    if node not in cluster.nodes:
        raise UserError(f"--node {node}: the cluster has nodes {', '.join(map(str, sorted(cluster.nodes)))}")
    return [node]


def _wait_up(cluster: Any, started: list[int], timeout_s: float) -> None:
    """Until an active controller answers and every running broker is unfenced; a node started
    here that exits instead fails the command with its log named."""
    from kraftlog.common import errors as kerr
    from kraftlog.common import progress
    from kraftlog.deploy import wait_until
    from kraftlog.node import NodeStartupError

    brokers = {nid for nid, spec in cluster.nodes.items() if spec.broker_port and cluster.is_running(nid)}
    with progress(f"waiting for {len(brokers)} broker(s) to be unfenced", total=len(brokers)) as shown:
        with cluster.admin(request_timeout_ms=2_000) as admin:

            def ready() -> bool:
                for nid in started:
                    if not cluster.is_running(nid):
                        raise NodeStartupError(f"node {nid} exited: see {cluster.nodes[nid].log_path}")
                try:
                    described = admin.describe_cluster()
                except kerr.KafkaError:  # no active controller yet
                    return False
                unfenced = {b.broker_id for b in described.brokers if not b.fenced} & brokers
                shown.update(completed=len(unfenced))
                return unfenced == brokers

            wait_until(ready, timeout_s, interval_s=0.2, what=f"{len(brokers)} unfenced brokers")


def _report(args: argparse.Namespace, cluster: Any, action: str, nodes: list[int]) -> None:
    if args.output == "json" and action == "stopped":
        status = cluster.status()
        running = sorted(int(n) for n, alive in status["running"].items() if alive)
        print_json({"dir": str(args.dir), "stopped": nodes, "running": running, "state": status["state"]})
    elif args.output == "json":
        print_json(cluster.status())
    elif action == "stopped":
        print(f"stopped {_nodes_text(nodes, cluster)} of the cluster in {args.dir}")
    else:
        _print_status(cluster.status())


def _nodes_text(nodes: list[int], cluster: Any) -> str:
    return "every node" if len(nodes) == len(cluster.nodes) else "node " + ", ".join(map(str, nodes))


def run(args: argparse.Namespace) -> int:
    from kraftlog.deploy import STATE_FILE, LocalCluster

    if args.local_command == "status":
        status = _load(args.dir).status()
        if args.output == "json":
            print_json(status)
        else:
            _print_status(status)
        return 0
    if args.local_command == "stop":
        cluster = _load(args.dir)
        nodes = _chosen(cluster, args.node)
        if args.node is None:
            cluster.stop()
        else:
            cluster.stop_node(args.node)
        _report(args, cluster, "stopped", nodes)
        return 0
    if args.local_command == "restart":
        cluster = _load(args.dir)
        nodes = _chosen(cluster, args.node)
        cluster.enter_network()
        for nid in nodes:
            cluster.restart_node(nid)
        _wait_up(cluster, nodes, args.timeout_s)
        _report(args, cluster, "restarted", nodes)
        return 0
    if args.controllers < 1 or args.brokers < 0:
        raise UserError("--controllers must be >= 1 and --brokers >= 0")
    overrides = parse_overrides(args.override)
    node_overrides = parse_node_overrides(args.node_override)
    if (Path(args.dir) / STATE_FILE).exists():
        cluster = LocalCluster.load(args.dir)
        if overrides or node_overrides:
            raise UserError(
                f"--override applies when a cluster is first laid out; {args.dir} already has one "
                f"(edit its nodes' config.toml, or remove the directory)"
            )
        to_start = [n for n in _chosen(cluster, args.node) if not cluster.is_running(n)]
        if not to_start:
            what = f"node {args.node} of the cluster" if args.node is not None else "every node of the cluster"
            raise UserError(f"{what} in {args.dir} is already running (kraftlog local status --dir {args.dir})")
    else:
        if args.node is not None:
            raise UserError(f"--node {args.node}: there is no cluster in {args.dir} yet; start it whole first")
        cluster = LocalCluster(
            Path(args.dir),
            controllers=args.controllers,
            brokers=args.brokers,
            combined=not args.separate,
            network=args.network,
            overrides=overrides,
            node_overrides=node_overrides,
            security=args.security,
        )
        if args.network == "netns":
            from kraftlog.deploy import unavailable_reason

            why = unavailable_reason()
            if why is not None:
                raise UserError(f"--network netns: {why}")
        try:
            cluster.plan()
        except ValueError as err:  # a --node-override naming a node the layout does not have
            raise UserError(f"--node-override: {err}") from err
        to_start = sorted(cluster.nodes)
    cluster.enter_network()  # before the first connection (a netns cluster is reachable from its hub only)
    for nid in to_start:
        cluster.start_node(nid)
    _wait_up(cluster, to_start, args.timeout_s)
    cluster.ensure_scram_admin()
    status = cluster.status()
    if args.output == "json" and not args.foreground:
        print_json(status)
        return 0
    _print_status(status)
    if args.demo:
        _demo(cluster)
    if not args.foreground:
        return 0
    print("\nRunning. Press Ctrl-C to stop every node.", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.is_set():
        stop.wait(1.0)
    print("stopping...", flush=True)
    cluster.stop()
    print("stopped.")
    return 0


def _print_status(status: dict[str, Any]) -> None:
    bs = status["bootstrap_servers"]
    print(f"cluster {status['cluster_id']} in {status['base_dir']}")
    print(f"  brokers (bootstrap servers): {bs}")
    if status.get("kafka"):
        print(f"  Kafka protocol listeners:    {status['kafka']}")
    print(f"  controllers:                 {status['controllers']}")
    for node, pid in sorted(status["pids"].items(), key=lambda kv: int(kv[0])):
        print(f"  node {node}: pid {pid} ({status['state'][node]})")
    first = bs.split(",")[0] if bs else status["controllers"].split(",")[0]
    ctl = status["controllers"]
    hub = status.get("netns_hub")
    kl = kraftlog_command()
    config = status.get("command_config")
    cc = f" --command-config {shlex.quote(config)}" if config else ""
    if config:
        print(f"  security: {status['security']}; clients connect with --command-config {config}")
    if hub:
        print(f"  network namespaces: run clients inside the hub, e.g. ip netns exec {hub} {kl} ...")
    print("\ntry:")
    print(f"  {kl} topics list --bootstrap-server {ctl}{cc}")
    print(f"  {kl} topics describe --bootstrap-server {ctl} --topic demo{cc}")
    print(f"  echo hello | {kl} produce --bootstrap-server {first} --topic demo{cc}")
    print(f"  {kl} consume --bootstrap-server {first} --topic demo --from-beginning --max-messages 5{cc}")
    print(f"  {kl} quorum status --bootstrap-server {ctl}{cc}")
    print(f"  {kl} metadata tree --bootstrap-server {ctl}{cc}")
    if status.get("kafka"):
        print(f"  kcat -b {status['kafka'].split(',')[0]}{_kcat_security(status)} -L")
    print(f"  {kl} local stop --dir {shlex.quote(status['base_dir'])} --node 1")


def _kcat_security(status: dict[str, Any]) -> str:
    """kcat's (librdkafka's) options for the cluster's Kafka listener (the password of a scram
    cluster is read from its file by the shell, never printed)."""
    security = status.get("client_security") or {}
    if not security:
        return ""
    password_file = status.get("scram_password_file")
    if password_file:
        options = {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": security["ssl_cafile"],
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "admin",
        }
        flags = "".join(f" -X {k}={shlex.quote(v)}" for k, v in options.items())
        return f'{flags} -X sasl.password="$(cat {shlex.quote(password_file)})"'
    options = {"security.protocol": "ssl", "ssl.ca.location": security["ssl_cafile"]}
    if "ssl_certfile" in security:
        options["ssl.certificate.location"] = security["ssl_certfile"]
        options["ssl.key.location"] = security["ssl_keyfile"]
    return "".join(f" -X {k}={shlex.quote(v)}" for k, v in options.items())


def kraftlog_command() -> str:
    """How the user's shell reaches this very installation of kraftlog, for commands we print.

    ``kraftlog`` when the one on PATH is ours; else the script of our environment (relative to
    the working directory when below it, e.g. ``.venv/bin/kraftlog`` after ``make run``); else
    ``python -m kraftlog.cli`` with this interpreter."""
    script = Path(sys.executable).parent / "kraftlog"
    on_path = shutil.which("kraftlog")
    if on_path is not None and script.exists() and Path(on_path).resolve() == script.resolve():
        return "kraftlog"
    if script.exists():
        try:
            return shlex.quote(str(script.relative_to(Path.cwd())))
        except ValueError:
            return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m kraftlog.cli"


def _demo(cluster: Any) -> None:
    """A demo topic with 3 partitions and RF 3, a few records produced with acks=all and read back."""
    from kraftlog.client import Consumer, NewTopic, Producer
    from kraftlog.common import wait_until

    replication = min(3, sum(1 for n in cluster.nodes.values() if n.broker_port))
    with cluster.admin(request_timeout_ms=20_000) as admin:
        resp = admin.create_topics([NewTopic("demo", 3, replication)])
        err = resp.topics[0].error
        if err.code not in (0, 36):
            raise UserError(f"creating the demo topic failed: {err.name} {err.message}")
    with Producer(cluster.bootstrap_servers, acks="all", **cluster.client_security()) as producer:
        sent = [producer.send("demo", f"hello {i}".encode(), key=f"user-{i}".encode()) for i in range(6)]
        producer.flush(30)
        meta = [f.result(30) for f in sent]
    print(f"\nproduced {len(meta)} records to 'demo' (acks=all):")
    for m in meta:
        print(f"  partition {m.partition} offset {m.offset}")
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", **cluster.client_security())
    try:
        consumer.assign([("demo", p) for p in range(3)])
        got: list[Any] = []

        def all_back() -> bool:
            got.extend(consumer.poll(500))  # blocks up to 500 ms for records
            return len(got) >= len(meta)

        wait_until(all_back, timeout_s=20, interval_s=0)
    finally:
        consumer.close()
    print(f"consumed {len(got)} records back:")
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        print(f"  partition {r.partition} offset {r.offset} key {r.key.decode()} value {r.value.decode()}")
