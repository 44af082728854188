"""Overload benchmark (issue 24): a well-behaved producer and consumer beside clients that try to
stall or bloat the broker.

One combined node (broker and controller in one process), every listener TLS (``LocalCluster``'s
``tls`` mode: no client certificates), so the attacks go through the TLS paths of the Kafka
listener. A well-behaved producer (kafka-python, acks=1, one 100-byte record every 20 ms, sent at
that fixed rate whatever the answers do, so a stall is not hidden by a producer that waits) and a
consumer (kafka-python, assigned the same partition) run throughout, and a probe client sends an
ApiVersions every 50 ms on its own TLS connection. Three phases:

1. baseline: nothing else;
2. attack: from another process (its sockets and CPU are not the measuring clients'),
   - ``--idle`` TCP connections (1,000) to the Kafka port that never send a byte (no TLS
     ClientHello); one the broker closes is opened again, as an attacker would;
   - a gzip-bomb producer: pipelined pairs of Produce requests (acks=1), each of 4 gzip batches
     of 60 records of 1 MiB of zeros (about 480 KiB on the wire per pair, 480 MiB inflated: the
     issue's figures), one pair after the other for the whole phase;
   - slow TLS readers: 8 connections with a 4 KiB receive window, each with 2 pipelined Fetch
     requests of up to 64 MiB over a partition of 32 MiB, reading 4 KiB every half second;
3. after: the attackers are gone, the well-behaved clients go on.

Reported per phase: the producer's acknowledgement latency (from the record's scheduled send
time), the end-to-end latency (scheduled send time to the consumer's receipt), the probe's
ApiVersions latency, and the broker's RSS (VmRSS from /proc/<pid>/status every 50 ms: the median
of the baseline, the peak of the attack, the last sample of the after phase).

The node inherits this script's RLIMIT_NOFILE (kraftlog does not change its own), whose soft limit
the script raises to what the connections need (at most the hard limit). ``--kraftlog`` runs the
node from another checkout (its console script's interpreter): the node's config is the one
``LocalCluster`` writes, without keys of this change, so the code before issue 24 starts too.
``--attackers`` runs some of the attackers only, to see what each costs alone.

    python tests/perf/overload_bench.py [--quick] [--kraftlog PATH/.venv/bin/kraftlog] [--attackers idle,slow,bomb]

``--quick``: 100 idle connections, 4 slow readers of 8 MiB, bombs of 2 batches, phases of 3/5/4 s.
The last line printed is one JSON object of the figures. The clients are in ``overload/clients.py``.

Measured on the 2-core development machine (load average about 3, full run), the code before issue
24 (b810c35) against the code after it: produce p99 18 / 9,681 / 3,119 ms before (baseline /
attack / after), 19 / 197 / 20 ms after; the probe's worst ApiVersions in the attack 6,290 ms
before, 356 ms after; RSS 84 / 1,078 / 402 MiB before, 87 / 277 / 99 MiB after (the peak is the
bombs' inflation, bounded by ``produce.validation.max.bytes``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

# a sibling module: tests/perf is the script's sys.path[0]
from overload.clients import (
    ATTACKERS,
    BOMB_TOPIC,
    BULK_TOPIC,
    MIB,
    SLOW_FETCH_BYTES,
    SLOW_WINDOW_BYTES,
    WELL_BEHAVED_TOPIC,
    ApiVersionsProbe,
    Attackers,
    Plan,
    RssSampler,
    WellBehaved,
    open_files_limit,
    produce_error,
    produce_frame,
    progress,
    read_answer,
    tls_connect,
)

from kraftlog.client import NewTopic
from kraftlog.common.records import build_batch
from kraftlog.deploy._cluster import LocalCluster, wait_until

FULL = Plan(baseline_s=20, attack_s=30, after_s=15, idle=1000, slow_readers=8, bulk_mib=32, bomb_batches=4)
QUICK = Plan(baseline_s=3, attack_s=5, after_s=4, idle=100, slow_readers=4, bulk_mib=8, bomb_batches=2)


# ---------------------------------------------------------------------------- the run


def node_python(kraftlog: str | None) -> str:
    """The interpreter of a ``kraftlog`` console script (its ``#!`` line), or this one."""
    if kraftlog is None:
        return sys.executable
    with open(kraftlog, "rb") as f:
        first = f.readline().decode(errors="replace")
    interpreter = first[2:].strip().split()[0] if first.startswith("#!") else ""
    if "python" not in Path(interpreter).name:
        raise SystemExit(f"{kraftlog}: not a Python console script (its first line: {first.strip()!r})")
    return interpreter


def raise_open_files(needed: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to ``needed`` (at most the hard limit); the nodes
    and the attacking process inherit it. Returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


def fill(address: tuple[str, int], ca: str, mib: int) -> None:
    """``mib`` MiB of uncompressed ~1000 KiB batches into the slow readers' topic."""
    batch = build_batch([(None, bytes(250 * 1024))] * 4, timestamp_ms=int(time.time() * 1000))
    with tls_connect(address, ca) as sock:
        for first in range(0, mib, 8):
            count = min(8, mib - first)
            sock.sendall(b"".join(produce_frame(BULK_TOPIC, batch, first + i) for i in range(count)))
            errors = [produce_error(read_answer(sock)) for _ in range(count)]
            if any(errors):
                raise RuntimeError(f"filling {BULK_TOPIC} failed: error codes {errors}")


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; 0.0 of nothing."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered), int(-(-q * len(ordered) // 1))) - 1)]


def in_window(samples: list[tuple[float, float]], window: tuple[float, float]) -> list[float]:
    return [value for at, value in samples if window[0] <= at < window[1]]


def wait_for(seconds: float) -> tuple[float, float]:
    """A measurement window of ``seconds`` from now (the clients sample meanwhile)."""
    start = time.monotonic()
    wait_until(lambda: time.monotonic() - start >= seconds, seconds + 10, interval_s=0.1, what="the window")
    return start, time.monotonic()


def run(
    plan: Plan, python: str, tmp: Path, attackers: Attackers
) -> tuple[dict[str, Any], dict[str, tuple[float, float]], dict[str, Any]]:
    cluster = LocalCluster(tmp / "c", controllers=1, combined=True, security="tls", python=python)
    progress("starting the node")
    cluster.start(timeout_s=120)
    try:
        cluster.wait_unfenced_brokers(1, timeout_s=60)
        progress("the node is up")
        with cluster.admin(request_timeout_ms=30_000) as admin:
            answer = admin.create_topics([NewTopic(t, 1, 1) for t in (WELL_BEHAVED_TOPIC, BOMB_TOPIC, BULK_TOPIC)])
            assert all(t.error.code == 0 for t in answer.topics), answer
            wait_until(
                lambda: all(p.leader_id >= 0 for t in admin.describe_topics([BULK_TOPIC]).topics for p in t.partitions),
                30,
                what="the partitions' leaders",
            )
        pid = cluster.nodes[1].pid
        assert pid is not None
        host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
        address, ca = (host, int(port)), str(cluster.tls_dir / "ca.crt")
        node_nofile = open_files_limit(pid)
        if 0 <= node_nofile < plan.idle + 200:
            raise RuntimeError(f"the node may open {node_nofile} files, too few for {plan.idle} connections")
        fill(address, ca, plan.bulk_mib)
        progress(f"{plan.bulk_mib} MiB in {BULK_TOPIC}")
        rss, probe = RssSampler(pid), ApiVersionsProbe(address, ca)
        clients = WellBehaved(cluster.kafka_bootstrap_servers, cluster.client_security())
        for sampler in (rss, probe):
            sampler.start()
        clients.start()
        wait_until(lambda: clients.received and probe.samples, 60, what="the well-behaved clients' first answers")
        progress("the well-behaved clients run: baseline")
        windows = {"baseline": wait_for(plan.baseline_s)}
        progress("starting the attackers")
        attack_start = time.monotonic()
        attackers.go(address, ca, pid)
        ramp_s = time.monotonic() - attack_start
        wait_for(plan.attack_s)
        progress("stopping the attackers")
        figures = attackers.stop()
        windows["attack"] = (attack_start, time.monotonic())
        progress("the attackers are gone: after")
        windows["after"] = wait_for(plan.after_s)
        progress("stopping the clients")
        clients.stop()
        probe.stop()
        rss.stop()
        figures["attack_ramp_s"] = round(ramp_s, 1)
        figures["node_nofile_soft_limit"] = node_nofile
        figures["produce_failed"] = clients.failed
        figures["produce_unacked"] = clients.sent - len(clients.acked) - clients.failed
        figures["consume_missing"] = len(clients.acked) - len(clients.received)
        figures["probe_failures"] = probe.failures
        samples = {"produce": clients.acked, "e2e": clients.received, "apiversions": probe.samples, "rss": rss.samples}
        progress("stopping the node")
        return figures, windows, samples
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer connections, shorter phases (for CI)")
    parser.add_argument("--kraftlog", help="run the node with this kraftlog console script's interpreter")
    parser.add_argument("--idle", type=int, help="idle connections (default 1000, --quick 100)")
    parser.add_argument(
        "--attackers",
        default=",".join(ATTACKERS),
        help=f"which attackers run, comma-separated (default all: {','.join(ATTACKERS)}): what each costs alone",
    )
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(40), logger_factory=structlog.PrintLoggerFactory(sys.stderr)
    )
    plan = QUICK if args.quick else FULL
    chosen = tuple(a for a in ATTACKERS if a in args.attackers.split(","))
    if not chosen or set(args.attackers.split(",")) - set(ATTACKERS):
        parser.error(f"--attackers takes some of {','.join(ATTACKERS)}")
    plan = Plan(**{**plan.__dict__, "attackers": chosen})
    if args.idle is not None:
        plan = Plan(**{**plan.__dict__, "idle": args.idle})
    python = node_python(args.kraftlog)
    nofile = raise_open_files(plan.idle + 1024)
    load_start = os.getloadavg()[0]
    attackers = Attackers(plan)  # first: forked while this process has no other thread
    try:
        with tempfile.TemporaryDirectory(prefix="kraftlog-overload-bench-") as tmp:
            figures, windows, samples = run(plan, python, Path(tmp), attackers)
    finally:
        attackers.close()
    out: dict[str, Any] = {}
    for phase, window in windows.items():
        for name in ("produce", "e2e"):
            values = in_window(samples[name], window)
            out[f"{phase}_{name}_p50_ms"] = round(percentile(values, 0.5), 1)
            out[f"{phase}_{name}_p99_ms"] = round(percentile(values, 0.99), 1)
            out[f"{phase}_{name}_count"] = len(values)
        probes = in_window(samples["apiversions"], window)
        out[f"{phase}_apiversions_p99_ms"] = round(percentile(probes, 0.99), 1)
        out[f"{phase}_apiversions_max_ms"] = round(max(probes, default=0.0), 1)
    rss = {phase: in_window(samples["rss"], window) for phase, window in windows.items()}
    out["rss_baseline_mib"] = round(statistics.median(rss["baseline"]), 1)
    out["rss_attack_peak_mib"] = round(max(rss["attack"]), 1)
    out["rss_after_mib"] = round(rss["after"][-1], 1)
    out.update(figures)
    out.update(
        idle_connections=plan.idle if "idle" in plan.attackers else 0,
        slow_readers=plan.slow_readers if "slow" in plan.attackers else 0,
        nofile_soft_limit=nofile,
        loadavg_1m_start=round(load_start, 2),
        loadavg_1m_end=round(os.getloadavg()[0], 2),
        node_python=python,
    )
    print(
        f"overload benchmark ({'quick' if args.quick else 'full'}): one combined node, TLS listeners, "
        f"node interpreter {python}"
    )
    parts = {
        "idle": f"{plan.idle} idle TCP connections ({figures.get('idle_reopened', 0)} reopened after the broker "
        "closed them)",
        "bomb": f"gzip bombs ({figures.get('bomb_pairs_sent', 0)} pipelined pairs of "
        f"{figures.get('bomb_wire_kib_per_pair', 0)} KiB -> {figures.get('bomb_inflated_mib_per_pair', 0)} MiB sent, "
        f"{figures.get('bomb_pairs', 0)} answered, the slowest in {figures.get('bomb_slowest_pair_s', 0)} s)",
        "slow": f"{plan.slow_readers} TLS readers of 2 x {SLOW_FETCH_BYTES // MIB} MiB fetches through a "
        f"{SLOW_WINDOW_BYTES // 1024} KiB window",
    }
    print("attack: " + ", ".join(parts[a] for a in plan.attackers))
    print(f"{'phase':<10}{'s':>6}{'produce p50/p99 ms':>22}{'e2e p50/p99 ms':>22}", end="")
    print(f"{'ApiVersions p99/max ms':>26}{'RSS MiB':>18}")
    rss_cells = {
        "baseline": f"{out['rss_baseline_mib']:.0f} (median)",
        "attack": f"{out['rss_attack_peak_mib']:.0f} (peak)",
        "after": f"{out['rss_after_mib']:.0f} (last)",
    }
    for phase, (start, end) in windows.items():
        produce = f"{out[f'{phase}_produce_p50_ms']:.1f} / {out[f'{phase}_produce_p99_ms']:.1f}"
        e2e = f"{out[f'{phase}_e2e_p50_ms']:.1f} / {out[f'{phase}_e2e_p99_ms']:.1f}"
        probe = f"{out[f'{phase}_apiversions_p99_ms']:.1f} / {out[f'{phase}_apiversions_max_ms']:.1f}"
        print(f"{phase:<10}{end - start:>6.1f}{produce:>22}{e2e:>22}{probe:>26}{rss_cells[phase]:>18}")
    print(
        f"well-behaved producer: {out['produce_failed']} failed, {out['produce_unacked']} unanswered; consumer: "
        f"{out['consume_missing']} acknowledged records not received; probe: {out['probe_failures']} failures; "
        f"load average {out['loadavg_1m_start']} -> {out['loadavg_1m_end']}"
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
