"""``kraftlog chaos run``: a seeded chaos run against a cluster, with a checker.

Targets, one of:

* ``--dir D``: the local cluster that ``kraftlog local start --dir D`` started (with
  ``--network netns`` its links can be cut; on loopback partitions are skipped and the run says so);
* ``--inventory FILE``: a systemd cluster on real hosts (``[[node]]`` tables with ``id``, ``role``,
  ``host``, ``port``, ``ssh``), faults over ``ssh ... sudo systemctl`` and iptables; ``--dry-run``
  prints every remote command instead of running it;
* neither: the run formats and starts its own cluster (3 controllers, 3 brokers, chaos-tuned
  timeouts, each node in its own network namespace when the machine allows) and removes it after.

Security: every connection of the run (admin, health checks, workloads, checker; kraftlog's gRPC
client, kafka-python and raw channels alike) uses the target's client security. ``--security
plaintext|tls|mtls`` secures the run's own cluster as ``kraftlog local start --security`` does (a
throw-away CA; mtls: client certificates required and ACLs on, the run connecting as the super user
``User:CN=admin``). A ``--dir`` cluster's security is the one it was started with (its state
file): ``--security`` there must name it or is refused. An inventory's is its ``[client]`` table
(``security_protocol = "SSL"``, ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``: kafka-python's
arguments).

Profiles: ``--profile data`` (the default) attacks brokers and controllers under an acks=all
produce workload; ``--profile quorum`` attacks the controller quorum (both standbys paused past the
propose timeout, the active controller paused, killed or cut off, a majority killed) under admin
calls that time out and are retried, part of the run with the election timeout above the request
timeout, and checks the metadata log itself (local clusters only: it reads the nodes' files; its
own cluster is 3 controllers and 1 broker).

Workloads of the data profile: ``--workload data`` (the default) is the acks=all producers alone;
``--workload group`` adds ``--group-members`` consumers (default 3) of one group that read the topic
under the faults, commit after processing and restart at seeded times, then drain it to the end.
``--group-protocol consumer`` makes the members KIP-848 consumers (``group.protocol=consumer``;
default classic); the run's own cluster then sets the coordinator's
``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms`` to the classic
members' values. Its checks: every acknowledged record consumed by the group (consumed_missing), no
committed offset moving backwards (commit_regressions, also the group's final committed offsets),
no partition owned by two members in one generation (double_owners; under KIP-848, with no group
generation, the same as overlapping_owners), no two members holding one partition at once by
their listeners' assigned/revoked times (overlapping_owners; overlaps with a member that was told
its partitions were lost are Kafka's allowed window, counted as lost_overlaps and not failed).
The producer is idempotent, so a record written twice (duplicates) fails the run too.

``--workload eos`` adds ``--eos-processors`` transactional processors (default 2): each reads the
topic with a read_committed consumer of one group and, in one transaction per poll, writes every
record to a second topic (the same partition, the value naming the input record and the
transaction attempt) and commits the consumed offsets (``send_offsets_to_transaction``); on an
error it aborts and seeks back to the committed offsets. About one transaction in ten is aborted
on purpose, and each processor "crashes" at seeded times (drops its clients with a transaction
open; its next producer, of the same transactional id, fences it). After the faults the processors
drain the topic; the output is read with read_committed and read_uncommitted. Its checks: every
input record in the output exactly once (eos_violations), no record of an aborted transaction
visible (aborted_visible), no committed transaction only partly visible (partial_txns).

``--workload queue`` runs ``--queue-workers`` workers (default 4) after Jepsen's Kafka test on a
topic of its own: sends, polls and transactions mixing both, with transactional and idempotent
producers, assigned consumers and subscribed ones (a classic group and a KIP-848 group), all
read_committed; about one transaction in ten is aborted on purpose and workers crash now and then.
Every operation goes to the history file (``--history``, JSON lines) as it happens; after the
faults a fresh consumer reads every partition to its end, and the checker reads only the history:
lost writes, duplicates, two values at one offset, skipped or backward polls (between polls and
within one), unseen records, aborted reads, and G1a/G1c dependency cycles fail the run (G0 and
skips between one transaction's sends are reported, not failed: Kafka does not isolate concurrent
writers). ``kraftlog chaos check --history FILE`` re-checks a saved history without a cluster.

``--workload share`` adds ``--share-members`` kraftlog ShareConsumers and ``--share-kafka-members``
confluent-kafka ShareConsumers (default 2 each) of one share group (KIP-932) reading the topic from
its start; checks: every acknowledged produce ACCEPTED by some consumer (``lost``), no record held
by two consumers at once (``double_acquired``), no delivery past the delivery limit
(``over_delivery_limit``); ``redeliveries`` for information.

The table goes to stdout; the last line is one JSON object (``--output json``: only that line). The
exit code is 0 when the profile's checks pass (data: nothing acknowledged lost or written twice and
the cluster converged, with the group workload its four figures 0, with the eos workload its
three figures 0, with the share workload its three), else 1.
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

from kraftlog.cli._chaos_check import add_check_parser, run_check
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, add_output_option, described, print_json

__all__ = ["add_parser", "parse_duration_s", "run"]

# timeouts of the cluster the run starts itself: a fault's produce outage is bounded by the broker
# session timeout (a killed leader is fenced after it), so it is shorter than Kafka's 9 s default
OWN_CLUSTER_OVERRIDES: dict[str, Any] = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
}

# the quorum profile's own cluster: 3 controllers with the timeouts of phase 2 (phase 1 raises the
# election timeout above the request timeout), 1 broker that placement needs
QUORUM_OWN_CLUSTER_OVERRIDES: dict[str, Any] = {
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.request.timeout.ms": 2000,
    "broker.session.timeout.ms": 6000,
    "broker.heartbeat.interval.ms": 500,
}
# the group workload's own cluster: new members join without the initial delay, and fewer
# __consumer_offsets partitions than Kafka's 50 (RF 3 on one machine) to load after each fault
GROUP_OWN_CLUSTER_OVERRIDES: dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 6,
}
# the eos workload's own cluster: the group's settings, and fewer __transaction_state partitions
# than Kafka's 50 too
EOS_OWN_CLUSTER_OVERRIDES: dict[str, Any] = {
    **GROUP_OWN_CLUSTER_OVERRIDES,
    "transaction.state.log.num.partitions": 6,
}
# the queue workload's own cluster: transactions and both group protocols
QUEUE_OWN_CLUSTER_OVERRIDES: dict[str, Any] = {
    **EOS_OWN_CLUSTER_OVERRIDES,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 500,
}
PROFILES = ("data", "quorum")
WORKLOADS = ("data", "group", "eos", "queue", "share")
GROUP_PROTOCOLS = ("classic", "consumer")
# deploy.chaos._kafka_clients.CLIENTS (not imported: every kraftlog command would load the chaos
# package; tests/unit/deploy/test_chaos_clients.py keeps the two equal)
CLIENTS = ("kraftlog", "kafka-python")
# deploy.chaos._security.SECURITY_MODES (not imported, as CLIENTS; tests/unit/deploy/test_chaos_security.py
# keeps the two equal)
SECURITY_MODES = ("plaintext", "tls", "mtls")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration_s(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``500ms`` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 30m, 2h)")
    value = float(match.group(1))
    return value * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[match.group(2)]


def _interval(text: str) -> tuple[float, float]:
    try:
        lo, _, hi = text.partition("-")
        pair = (float(lo), float(hi or lo))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not an interval: {text!r} (e.g. 5-10)") from err
    if not 0 < pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"interval must be 0 < low <= high: {text!r}")
    return pair


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "chaos",
        help="seeded fault injection with a checker",
        **described(__doc__),
    )
    sub = parser.add_subparsers(dest="chaos_command", metavar="ACTION")
    sub.required = True
    run_p = sub.add_parser(
        "run",
        help="run faults under an acks=all workload, then check",
        **described(__doc__),
    )
    where = run_p.add_mutually_exclusive_group()
    where.add_argument("--dir", help="a cluster started by 'kraftlog local start --dir D'")
    where.add_argument("--inventory", help="TOML inventory of a systemd cluster")
    run_p.add_argument(
        "--profile",
        choices=PROFILES,
        default="data",
        help="data (default): acks=all produce workload, broker and controller faults; quorum: "
        "admin workload with timed-out retried calls, controller quorum faults, metadata log checks",
    )
    run_p.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="data",
        help="data profile only. data (default): acks=all producers; group: also consumers of one "
        "group, checked for records never consumed, committed offsets moving backwards and "
        "partitions owned twice in a generation; eos: also transactional processors copying the "
        "topic to a second one (read-process-write), checked for inputs missing or doubled in the "
        "output, aborted records visible and committed transactions partly visible; queue: also "
        "Jepsen's queue workload (send, poll, txn) on a topic of its own, its history written to "
        "--history and checked for every anomaly class of 'kraftlog chaos check'; share: also "
        "share consumers of one share group (kraftlog's and confluent-kafka's), checked for "
        "acknowledged records never accepted, records held by two consumers at once and deliveries "
        "past the delivery limit",
    )
    run_p.add_argument(
        "--share-members", type=int, default=2, help="kraftlog ShareConsumers of --workload share (default 2)"
    )
    run_p.add_argument(
        "--share-kafka-members",
        type=int,
        default=2,
        help="confluent-kafka ShareConsumers of --workload share (default 2; none without confluent-kafka)",
    )
    run_p.add_argument("--queue-workers", type=int, default=4, help="worker threads of --workload queue (default 4)")
    run_p.add_argument("--queue-no-txn", action="store_true", help="--workload queue: no transactions")
    run_p.add_argument(
        "--history",
        metavar="FILE",
        default=None,
        help="--workload queue: the history's file, JSON lines (default: queue-history-SEED.jsonl in "
        "--work-dir, else here); re-check it with 'kraftlog chaos check --history FILE'",
    )
    run_p.add_argument(
        "--eos-processors", type=int, default=2, help="transactional processors of --workload eos (default 2)"
    )
    run_p.add_argument(
        "--group-members", type=int, default=3, help="consumers in the group of --workload group (default 3)"
    )
    run_p.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        default=None,
        help="--workload group only: the members' group.protocol, classic (default) or consumer (KIP-848)",
    )
    run_p.add_argument(
        "--client",
        choices=CLIENTS,
        default="kraftlog",
        help="data profile: the workload's producer and consumer, kraftlog's own (gRPC, default) or "
        "kafka-python over the brokers' Kafka listeners (the checker reads back with kraftlog's)",
    )
    run_p.add_argument("--dry-run", action="store_true", help="with --inventory: print remote commands only")
    run_p.add_argument("--duration", type=parse_duration_s, default=600.0, help="e.g. 90s, 10m, 30m (default 10m)")
    run_p.add_argument("--seed", type=int, default=None, help="seed of the fault schedule (default: random)")
    run_p.add_argument(
        "--interval",
        type=_interval,
        default=None,
        help="seconds between fault starts, LOW-HIGH (default 5-10; quorum profile 6-12)",
    )
    run_p.add_argument("--partitions", type=int, default=3, help="partitions of the workload topic (default 3)")
    run_p.add_argument(
        "--faults",
        default="",
        help="comma-separated fault kinds to use (default: all of the profile). data: "
        "kill_broker, kill_active_controller, pause, restart, kill_minority, "
        "partition_active_controller, partition_leader, and (named only) the storage faults "
        "bitflip_segment, bitflip_index, truncate_segment, lose_unsynced (SIGKILL, damage, start) and "
        "slow_fsync (a leader's fsyncs delayed), disk_full, clock_skew, clock_jump (all eight: local "
        "clusters), delay_link (netns clusters; docs/verification.md); quorum: pause_standbys, "
        "pause_active_controller, kill_active_controller, kill_majority, "
        "partition_active_controller, replace_voter (a dynamic quorum's: remove a standby voter, wipe "
        "its disk, add it back; in the default set when the quorum is dynamic)",
    )
    run_p.add_argument(
        "--quorum",
        choices=("static", "dynamic"),
        default="static",
        help="the run's own cluster: static controller.quorum.voters (default) or a dynamic quorum "
        "(KIP-853: --initial-controllers; its voter set changes at run time)",
    )
    run_p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=None,
        help="the brokers' broker.session.timeout.ms (pauses outlast it; default: read from "
        "the local cluster's config, else Kafka's 9000)",
    )
    run_p.add_argument(
        "--network",
        choices=("auto", "netns", "loopback"),
        default="auto",
        help="network of the run's own cluster (default auto: netns when possible)",
    )
    run_p.add_argument("--work-dir", help="where the run's own cluster lives (default: a temporary directory)")
    run_p.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default=None,
        help="the run's own cluster: plaintext (default); tls: every listener on TLS with a throw-away CA; "
        "mtls: also client certificates required and ACLs on (the run connects as the super user "
        "User:CN=admin). With --dir the cluster's own security applies (--security must match it); "
        "with --inventory its [client] table's",
    )
    add_output_option(run_p)
    add_check_parser(sub)
    return parser


def _session_timeout_ms(cluster: Any) -> int:
    for spec in cluster.nodes.values():
        if "broker" in spec.roles:
            try:
                conf = tomllib.loads(spec.config_path.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError):
                continue
            return int(conf.get("broker.session.timeout.ms", 9000))
    return 9000


def run(args: argparse.Namespace) -> int:
    if args.chaos_command == "check":
        return run_check(args)
    from kraftlog.deploy.chaos import (
        ALL_FAULT_KINDS,
        FAULT_KINDS,
        QUORUM_FAULT_KINDS,
        REPLACE_VOTER,
        ChaosSettings,
        LocalTarget,
        SystemdTarget,
        load_inventory,
        load_inventory_security,
        own_cluster_node_overrides,
        run_chaos,
    )

    quorum = args.profile == "quorum"
    known = (*QUORUM_FAULT_KINDS, REPLACE_VOTER) if quorum else ALL_FAULT_KINDS
    requested = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    # the default: every kind of the profile, replace_voter only where the quorum is dynamic
    kinds = requested or (QUORUM_FAULT_KINDS if quorum else FAULT_KINDS)
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise UserError(f"unknown fault kind(s) {unknown} for the {args.profile} profile; known: {', '.join(known)}")
    if quorum and args.inventory:
        raise UserError(
            "the quorum profile reads every node's metadata log and log files: it runs against a "
            "local cluster only (--dir D, or none to start its own)"
        )
    interval = args.interval or ((6.0, 12.0) if quorum else (5.0, 10.0))
    if args.partitions < 1:
        raise UserError("--partitions must be >= 1")
    group = args.workload == "group"
    if quorum and group:
        raise UserError("--workload group belongs to the data profile (the quorum profile has its admin workload)")
    if args.group_members < 1:
        raise UserError("--group-members must be >= 1")
    eos = args.workload == "eos"
    if quorum and args.client != "kraftlog":
        raise UserError("--client belongs to the data profile (the quorum profile has its admin workload)")
    if quorum and eos:
        raise UserError("--workload eos belongs to the data profile (the quorum profile has its admin workload)")
    share = args.workload == "share"
    if quorum and share:
        raise UserError("--workload share belongs to the data profile (the quorum profile has its admin workload)")
    if args.share_members < 0 or args.share_kafka_members < 0 or args.share_members + args.share_kafka_members < 1:
        raise UserError("--share-members and --share-kafka-members must be >= 0, one of them >= 1")
    queue = args.workload == "queue"
    if quorum and queue:
        raise UserError("--workload queue belongs to the data profile (the quorum profile has its admin workload)")
    if args.queue_workers < 1:
        raise UserError("--queue-workers must be >= 1")
    if args.history is not None and not queue:
        raise UserError("--history is the queue workload's (its history file): add --workload queue")
    if args.eos_processors < 1:
        raise UserError("--eos-processors must be >= 1")
    if args.group_protocol is not None and not group:
        raise UserError(
            "--group-protocol is the group workload's (its consumers' group.protocol): add --workload group, "
            "or drop --group-protocol (the data workload has no consumer group)"
        )
    group_protocol = args.group_protocol or "classic"
    seed = args.seed if args.seed is not None else int.from_bytes(__import__("os").urandom(4), "big")
    quiet = args.output == "json"

    def out(line: str) -> None:
        if not quiet or line.startswith("{"):
            print(line, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    own_cluster = None
    originals: dict[int, dict[str, Any]] | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.inventory:
        runner = (lambda argv: print(f"[dry-run] {shlex.join(argv)}", flush=True)) if args.dry_run else None
        nodes = load_inventory(args.inventory)
        try:
            inventory_security = load_inventory_security(args.inventory)
        except ValueError as err:
            raise UserError(str(err)) from None
        _security_matches(args.security, inventory_security.mode, f"the inventory {args.inventory}'s [client] table")
        target: Any = (
            SystemdTarget(nodes, runner, security=inventory_security)
            if runner
            else SystemdTarget(nodes, security=inventory_security)
        )
        session_ms = args.session_timeout_ms or 9000
        if args.dry_run:
            return _dry_run(
                target,
                seed,
                kinds,
                session_ms,
                args.duration,
                interval,
                args.workload,
                group_protocol if group else None,
            )
    elif args.dir:
        from kraftlog.deploy import STATE_FILE, LocalCluster

        if not (Path(args.dir) / STATE_FILE).exists():
            raise UserError(f"no cluster in {args.dir} (start one with: kraftlog local start --dir {args.dir})")
        cluster = LocalCluster.load(args.dir)
        _security_matches(
            args.security,
            cluster.security,
            f"the cluster in {args.dir} (kraftlog local start --security {cluster.security})",
        )
        down = sorted(n for n in cluster.nodes if not cluster.is_running(n))
        if down:
            raise UserError(
                f"node(s) {down} of the cluster in {args.dir} are not running (kraftlog local start --dir {args.dir})"
            )
        cluster.enter_network()
        target = LocalTarget(cluster)
        session_ms = args.session_timeout_ms or _session_timeout_ms(cluster)
    else:
        from kraftlog.deploy import LocalCluster, unavailable_reason

        network = args.network
        if network == "auto":
            network = "netns" if unavailable_reason() is None else "loopback"
        elif network == "netns" and (why := unavailable_reason()) is not None:
            raise UserError(f"--network netns: {why}")
        if args.work_dir:
            base = Path(args.work_dir)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="kraftlog-chaos-")
            base = Path(tmp.name)
        overrides = QUORUM_OWN_CLUSTER_OVERRIDES if quorum else OWN_CLUSTER_OVERRIDES
        if group:
            overrides = {**overrides, **GROUP_OWN_CLUSTER_OVERRIDES}
        if eos:
            overrides = {**overrides, **EOS_OWN_CLUSTER_OVERRIDES}
        if queue:
            overrides = {**overrides, **QUEUE_OWN_CLUSTER_OVERRIDES}
        if share:
            from kraftlog.deploy.chaos import SHARE_BROKER_KEYS

            overrides = {**overrides, **GROUP_OWN_CLUSTER_OVERRIDES, **SHARE_BROKER_KEYS}
        if group_protocol == "consumer":
            from kraftlog.deploy.chaos import CONSUMER_PROTOCOL_BROKER_KEYS

            overrides = {**overrides, **CONSUMER_PROTOCOL_BROKER_KEYS}
        own_security = args.security or "plaintext"
        own_cluster = LocalCluster(
            base / "cluster",
            controllers=3,
            brokers=1 if quorum else 3,
            quorum=args.quorum,
            network=network,
            overrides=overrides,
            security=own_security,
            node_overrides=own_cluster_node_overrides(kinds, str(base / "cluster")),
        )
        own_cluster.plan()
        if quorum:
            originals = _start_in_phase_one(own_cluster)
        own_cluster.enter_network()  # before any connection: see deploy._netns
        own_cluster.start(timeout_s=120)
        target = LocalTarget(own_cluster)
        session_ms = args.session_timeout_ms or int(overrides["broker.session.timeout.ms"])
        out(f"started a local cluster ({network}, {own_security}) in {base / 'cluster'}")
    if quorum and not requested and getattr(target, "voter_changes", None) is not None:
        kinds = (*kinds, REPLACE_VOTER)
    if group_protocol == "consumer" and own_cluster is None:
        out(
            "consumer protocol: the members' session and heartbeat are the cluster's own "
            "group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms (Kafka's 45 s and 5 s "
            "unless set)"
        )
    progress_stop = threading.Event()
    progress_thread = threading.Thread(
        target=_show_progress, args=(args.duration, seed, progress_stop), name="chaos-progress", daemon=True
    )
    progress_thread.start()
    try:
        if quorum:
            from kraftlog.deploy.chaos import QuorumSettings, run_quorum_chaos

            result = run_quorum_chaos(
                target,
                QuorumSettings(duration_s=args.duration, seed=seed, interval_s=interval, kinds=kinds),
                out=out,
                stop=stop,
                original_configs=originals,
            )
        else:
            result = run_chaos(
                target,
                ChaosSettings(
                    duration_s=args.duration,
                    seed=seed,
                    interval_s=interval,
                    partitions=args.partitions,
                    session_timeout_ms=session_ms,
                    kinds=kinds,
                    workload=args.workload,
                    group_members=args.group_members,
                    group_protocol=group_protocol,
                    eos_processors=args.eos_processors,
                    client=args.client,
                    queue_workers=args.queue_workers,
                    queue_transactions=not args.queue_no_txn,
                    history_path=args.history or str(Path(args.work_dir or ".") / f"queue-history-{seed}.jsonl"),
                    share_members=args.share_members,
                    share_kafka_members=args.share_kafka_members,
                ),
                out=out,
                stop=stop,
            )
    finally:
        progress_stop.set()
        progress_thread.join()
        if own_cluster is not None:
            own_cluster.stop()
        if tmp is not None:
            tmp.cleanup()
    return EXIT_OK if result["ok"] else 1


def _security_matches(given: str | None, actual: str, where: str) -> None:
    """``--security`` names the run's own cluster's security; against a cluster that has one
    already it may only repeat it (a different value would be silently ignored otherwise)."""
    if given is not None and given != actual:
        raise UserError(
            f"--security {given}: {where} is {actual}; a run against an existing cluster connects "
            f"with that cluster's own security (drop --security, or give --security {actual})"
        )


def _show_progress(duration_s: float, seed: int, done: threading.Event) -> None:
    """The run's time as a bar on stderr (a terminal only), then the convergence check after it."""
    from kraftlog.common import progress

    started = time.monotonic()
    with progress(f"chaos run, seed {seed}", total=round(duration_s)) as shown:
        while not done.wait(0.5):
            elapsed = time.monotonic() - started
            if elapsed < duration_s:
                shown.update(completed=round(elapsed))
            else:
                shown.update(completed=round(duration_s), description="healing and checking convergence")


def _start_in_phase_one(cluster: Any) -> dict[int, dict[str, Any]]:
    """Write the quorum profile's phase-1 timeouts into the controllers' configs of a cluster not
    started yet (no rolling restart needed); returns the values phase 2 restores."""
    from kraftlog.deploy.chaos import LONG_ELECTION, read_config_values, write_config_values

    originals = {}
    for node, spec in cluster.nodes.items():
        if "controller" in spec.roles:
            originals[node] = read_config_values(spec.config_path, list(LONG_ELECTION))
            write_config_values(spec.config_path, LONG_ELECTION)
    return originals


def _dry_run(
    target: Any,
    seed: int,
    kinds: tuple[str, ...],
    session_ms: int,
    duration_s: float,
    interval: tuple[float, float],
    workload: str = "data",
    group_protocol: str | None = None,
) -> int:
    """Print the schedule a run with this seed starts with, and the commands of each fault."""
    import random

    from kraftlog.deploy.chaos import ClusterView, choose_fault, heal, inject

    rng = random.Random(seed)
    view = ClusterView(target.controllers(), target.brokers(), None, [], session_ms)
    elapsed = 0.0
    while elapsed < duration_s:
        fault = choose_fault(rng, view, list(kinds))
        print(f"# at {elapsed:.1f}s: {fault.describe()}", flush=True)
        inject(target, fault)
        heal(target, fault)
        elapsed += rng.uniform(*interval)
    report: dict[str, Any] = {"seed": seed, "dry_run": True, "workload": workload}
    if group_protocol is not None:
        report["group_protocol"] = group_protocol
    print_json(report, file=sys.stdout)
    return EXIT_OK
