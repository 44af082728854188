#!/usr/bin/env python3
"""Run librdkafka's own integration tests against a local kraftlog cluster (issue 25's proof).

librdkafka's ``tests/`` folder holds its regression suite: one ``test-runner`` binary whose tests
(C and C++) run against an existing cluster named in ``test.conf``, told the broker's version by
``TEST_KAFKA_VERSION``. This script

1. fetches librdkafka at the version of the installed confluent-kafka (``libversion()``) into a
   cache folder (``git clone --depth 1 --branch v<version>``; without the network, ``--mirror`` names
   a local git directory to export from, at that tag or, when the mirror lacks it, ``--rev``);
2. builds the library and ``tests/test-runner`` once (no ``--install-deps``: what the machine has);
3. per scenario of librdkafka's (``default``: topic auto-creation on; ``noautocreate``: off) starts a
   ``kraftlog local start`` cluster of three combined nodes, the default scenario with the
   StandardAuthorizer and ``allow.everyone.if.no.acl.found=true`` so that the ACL tests (0109, 0115,
   0119) deny what their ACLs deny and everything else passes as without an authorizer;
4. puts stand-ins for ``kafka-topics.sh`` and ``kafka-acls.sh`` in ``$KAFKA_PATH/bin`` that call
   ``kraftlog topics`` / ``kraftlog acls`` (the tests run those through ``system()``);
5. runs ``test-runner -L`` (broker tests only: the local and mock-broker ones need no broker) once per
   ``group.protocol`` (``TEST_CONSUMER_GROUP_PROTOCOL``) and prints one row per test, then a last line
   of JSON with the counts. Exit status 0 only when no test failed.

The tests that need what kraftlog leaves out of scope are counted apart ("out of scope"): those
needing a broker newer than 4.0 (share groups, 4.2), manual tests and those librdkafka marks as
known issues (its own runs leave them out too); and the tests the runner skips by
itself (SSL or SASL set up by librdkafka's cluster launcher trivup, the Java helpers). This stays
outside ``make test`` (it needs the network, or a mirror, and about an hour of two cores).

Usage: ``python deploy/scripts/librdkafka_suite.py [--protocols classic,consumer] [--tests 0030,0081]``
(``make librdkafka-suite`` runs it with the defaults; ``--help`` lists the options).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPO_URL = "https://github.com/confluentinc/librdkafka"
#: The broker version the tests are told: kraftlog answers as Kafka 4.0.
KAFKA_VERSION = "4.0.0"
PROTOCOLS = ("classic", "consumer")
SCENARIOS = ("default", "noautocreate")
#: Node configs every cluster gets: what librdkafka's scenarios ask of trivup (RF 3, 4 partitions)
#: and what keeps group tests fast (no initial rebalance delay).
BASE_OVERRIDES = (
    "num.partitions=4",
    "default.replication.factor=3",
    "group.initial.rebalance.delay.ms=0",
    "delete.topic.enable=true",
    # trivup's racks (tests/cluster_testing.py): broker.rack=RACK<id> per node (NODE_OVERRIDES) and
    # fetch from follower (KIP-392), which 0101 needs
    "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
)
#: Node configs per node of the three: trivup's ``broker.rack=RACK${appid}``.
NODE_OVERRIDES = tuple(f"{node}:broker.rack=RACK{node}" for node in (1, 2, 3))
ACL_OVERRIDES = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true",
)
#: Tests that need a SASL listener (they skip on PLAINTEXT) run over a ``--security scram`` cluster
#: (SASL_SSL, SCRAM-SHA-512, re-authentication every 10 s) when named with ``--sasl-tests``: none by
#: default, as 0135 and 0142 each end in a share-consumer subtest (out of scope, below).
SASL_TESTS: tuple[str, ...] = ()
#: Broker tests that need what is out of kraftlog's scope, by test number: not counted.
OUT_OF_SCOPE = {
    "0092": "MsgVersion 0/1 (removed in Kafka 4.0; the test skips itself)",
    "0097": "SSL listeners and keys set up by trivup (SSL_* variables)",
    "0098": "Kafka's Java producer (TransactionProducerCli), built against the jars in $KAFKA_PATH/libs",
    "0126": "OAUTHBEARER/OIDC, which kraftlog does not serve",
    "0135": "half of it is a share consumer (KIP-932, broker 4.2); its two SASL subtests pass over SCRAM",
    "0142": "a share-consumer subtest (KIP-932); its consumer re-authentication subtest passes over SCRAM",
}
SASL_OVERRIDES = ("connections.max.reauth.ms=10000",)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(r"^\|\s*(?P<name>\S+)\s*\|\s*(?P<state>[A-Z]+)\s*\|\s*(?P<secs>[0-9.]+)s\s*\|\s?(?P<why>.*)$")

__all__ = ["TestEntry", "main", "parse_report", "parse_summary", "parse_test_table", "summarize"]


@dataclass(frozen=True)
class TestEntry:
    """One row of librdkafka's ``tests[]`` table (tests/test.c): what decides whether it needs a broker."""

    name: str
    local: bool
    manual: bool
    known_issue: bool
    scenarios: tuple[str, ...]
    min_version: tuple[int, int]

    def in_scope(self, scenario: str) -> bool:
        """A broker test of this scenario that a Kafka 4.0 broker can answer."""
        runs = not (self.local or self.manual or self.known_issue)
        return runs and scenario in self.scenarios and self.min_version <= (4, 0)


def parse_test_table(test_c: str) -> dict[str, TestEntry]:
    """The ``_TEST(name, flags, ...)`` entries of test.c's ``tests[]`` table, by test name."""
    start = test_c.index("struct test tests[] = {")
    end = test_c.index("{NULL}", start)
    entries: dict[str, TestEntry] = {}
    # Each entry starts at "_TEST(" and runs to the next one (or the end of the table).
    chunks = re.split(r"(?=\b_TEST\()", test_c[start:end])
    for chunk in chunks:
        head = re.match(r"_TEST\(\s*(\w+)\s*,(.*)", chunk, re.S)
        if head is None:
            continue
        name, rest = head.group(1), head.group(2)
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
        version = re.search(r"TEST_BRKVER\(\s*(\d+)\s*,\s*(\d+)", rest)
        flags = rest.split(",", 1)[0]
        entries[name] = TestEntry(
            name=name,
            local="TEST_F_LOCAL" in flags,
            manual="TEST_F_MANUAL" in flags,
            # librdkafka's own runs leave these out (test-runner's -k runs them): not the _WIN32/_OSX kinds
            known_issue=re.search(r"TEST_F_KNOWN_ISSUE(?!_)", flags) is not None,
            scenarios=tuple(scenario.group(1).split(",")) if scenario else ("default",),
            min_version=(int(version.group(1)), int(version.group(2))) if version else (0, 0),
        )
    return entries


def parse_summary(output: str) -> dict[str, tuple[str, str]]:
    """test-runner's closing summary table: test name -> (state, reason), ANSI colours removed."""
    rows: dict[str, tuple[str, str]] = {}
    for line in _ANSI.sub("", output).splitlines():
        match = _ROW.match(line.strip())
        if match and match.group("name") != "<MAIN>":
            rows[match.group("name")] = (match.group("state"), match.group("why").strip())
    return rows


def parse_report(text: str) -> dict[str, str]:
    """test-runner's TEST_REPORT file: test name -> state (written and closed even when the summary
    on stdout is cut off)."""
    return {m.group(1): m.group(2) for m in re.finditer(r'"name": "([^"]+)", "state": "([A-Z]+)"', text)}


@dataclass
class Counts:
    """The outcome of one run (one scenario, one group.protocol) over the in-scope broker tests."""

    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def summarize(
    entries: dict[str, TestEntry], rows: dict[str, tuple[str, str]], scenario: str, only: list[str] | None = None
) -> Counts:
    """Sort the in-scope broker tests of ``scenario`` by outcome; a test the summary does not list
    (the runner crashed or was cut off) counts as failed."""
    counts = Counts()
    for name, entry in entries.items():
        if not entry.in_scope(scenario) or name[:4] in OUT_OF_SCOPE:
            continue
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        state, why = rows.get(name, ("FAILED", "no result: test-runner ended before it"))
        if state == "PASSED":
            counts.passed.append(name)
        elif state == "SKIPPED":
            counts.skipped.append((name, why))
        else:
            counts.failed.append((name, why or state))
    return counts


def _log(message: str) -> None:
    print(f"[librdkafka-suite {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    _log("$ " + " ".join(shlex.quote(c) for c in cmd))
    subprocess.run(cmd, cwd=cwd, env=env, check=True)


def installed_version() -> str:
    """librdkafka's version as the installed confluent-kafka reports it (e.g. ``2.16.0``)."""
    import confluent_kafka

    return str(confluent_kafka.libversion()[0])


def fetch_source(cache: Path, version: str, mirror: Path | None, rev: str) -> Path:
    """librdkafka's tree at ``v<version>`` in ``cache`` (kept between runs, with its build)."""
    src = cache
    if (src / "tests" / "test.c").exists():
        return src
    cache.parent.mkdir(parents=True, exist_ok=True)
    clone = ["git", "clone", "--quiet", "--depth", "1", "--branch", f"v{version}", REPO_URL, str(src)]
    if subprocess.run(clone, check=False).returncode == 0:
        return src
    if mirror is None:
        raise SystemExit(f"cloning {REPO_URL} failed; without the network pass --mirror <git dir>")
    tags = subprocess.run(
        ["git", "--git-dir", str(mirror), "tag", "--list", f"v{version}"], capture_output=True, text=True, check=True
    ).stdout.split()
    chosen = f"v{version}" if tags else rev
    _log(f"exporting librdkafka {chosen} from {mirror} (v{version} {'found' if tags else 'missing there'})")
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", str(mirror), "archive", chosen], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    return src


def build(src: Path, jobs: int) -> Path:
    """Configure (once), build the library and tests/test-runner; returns the test-runner's path."""
    runner = src / "tests" / "test-runner"
    nice = ["nice", "-n", "10"]
    if not (src / "config.cache").exists():
        # No --install-deps: build with what the machine has (OpenSSL and zlib at least; SCRAM needs
        # OpenSSL), without libcurl (OIDC tests are out of scope).
        _run([*nice, "./configure", "--disable-curl"], cwd=src)
    _run([*nice, "make", f"-j{jobs}", "libs"], cwd=src)
    _run([*nice, "make", f"-j{jobs}", "-C", "tests", "build"], cwd=src)
    if not runner.exists():
        raise SystemExit(f"the build left no {runner}")
    return runner


def write_standins(bin_dir: Path, kraftlog: str) -> None:
    """``kafka-topics.sh`` and ``kafka-acls.sh`` as the tests call them, answered by kraftlog's CLI.

    The tests pass the Kafka listener as ``--bootstrap-server``; the stand-ins use the cluster's
    address from ``$KRAFTLOG_BOOTSTRAP`` instead (kraftlog's admin commands reach the controllers),
    with ``$KRAFTLOG_COMMAND_CONFIG`` on a secured cluster."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    kl = shlex.quote(kraftlog)
    topics = f"""#!/bin/bash
# kafka-topics.sh stand-in: --create/--alter/--delete/--list/--describe become kraftlog's subcommands.
action=""; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --create) action=create;; --alter) action=alter;; --delete) action=delete;;
    --list) action=list;; --describe) action=describe;;
    --bootstrap-server|--zookeeper) shift;;
    *) args+=("$1");;
  esac
  shift
done
[ -n "$KRAFTLOG_COMMAND_CONFIG" ] && args+=(--command-config "$KRAFTLOG_COMMAND_CONFIG")
exec {kl} topics "$action" --bootstrap-server "$KRAFTLOG_BOOTSTRAP" "${{args[@]}}"
"""
    acls = f"""#!/bin/bash
# kafka-acls.sh stand-in: kraftlog acls takes kafka-acls' options as they are.
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bootstrap-server) shift;;
    *) args+=("$1");;
  esac
  shift
done
[ -n "$KRAFTLOG_COMMAND_CONFIG" ] && args+=(--command-config "$KRAFTLOG_COMMAND_CONFIG")
exec {kl} acls --bootstrap-server "$KRAFTLOG_BOOTSTRAP" "${{args[@]}}"
"""
    for name, text in (("kafka-topics.sh", topics), ("kafka-acls.sh", acls)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)


@dataclass
class Cluster:
    """A ``kraftlog local start`` cluster: its folder, Kafka listeners and admin address."""

    kraftlog: str
    base_dir: Path
    security: str = "plaintext"
    kafka: str = ""
    admin: str = ""
    #: librdkafka properties a client of this cluster needs (SASL_SSL for a scram cluster)
    client_conf: dict[str, str] = field(default_factory=dict)
    command_config: str = ""

    def start(self, overrides: list[str], timeout_s: float) -> None:
        cmd = [self.kraftlog, "local", "start", "--dir", str(self.base_dir), "--controllers", "3"]
        cmd += ["--security", self.security]
        cmd += [f"--override={o}" for o in overrides]
        cmd += [f"--node-override={o}" for o in NODE_OVERRIDES]
        cmd += ["--timeout-s", str(timeout_s), "--output", "json"]
        _log("$ " + " ".join(shlex.quote(c) for c in cmd))
        out = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"kraftlog local start failed:\n{out.stderr}")
        status = json.loads(out.stdout)
        self.kafka = status["kafka"]
        self.admin = status["controllers"]
        self.command_config = status.get("command_config") or ""
        password_file = status.get("scram_password_file")
        if password_file:
            self.client_conf = {
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": status["client_security"]["ssl_cafile"],
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "admin",
                "sasl.password": Path(password_file).read_text().strip(),
            }
        _log(f"cluster up: Kafka listeners {self.kafka}, controllers {self.admin}")

    def stop(self) -> None:
        subprocess.run([self.kraftlog, "local", "stop", "--dir", str(self.base_dir)], check=False)


def run_suite(
    runner: Path,
    cluster: Cluster,
    work: Path,
    scenario: str,
    protocol: str,
    args: argparse.Namespace,
    tests: list[str] | None,
    label: str,
) -> tuple[dict[str, tuple[str, str]], Path]:
    """One test-runner run; returns the summary rows and the path of its full output."""
    conf = work / f"test-{label}-{protocol}.conf"
    lines = [
        f"bootstrap.servers={cluster.kafka}",
        f"test.timeout.multiplier={args.timeout_multiplier}",
        "test.topic.random=true",
        *(f"{k}={v}" for k, v in cluster.client_conf.items()),
    ]
    conf.write_text("\n".join(lines) + "\n")
    env = dict(os.environ)
    env.update(
        RDKAFKA_TEST_CONF=str(conf),
        TEST_KAFKA_VERSION=KAFKA_VERSION,
        BROKERS=cluster.kafka,
        KAFKA_PATH=str(work),
        KRAFTLOG_BOOTSTRAP=cluster.admin,
        TEST_CONSUMER_GROUP_PROTOCOL=protocol,
        TEST_REPORT=str(work / f"report-{label}-{protocol}.json"),
        KRAFTLOG_COMMAND_CONFIG=cluster.command_config,
    )
    # The test-runner links the freshly built libraries, not an installed librdkafka (run-test.sh's way).
    libs = [str(runner.parent.parent / "src"), str(runner.parent.parent / "src-cpp")]
    env["LD_LIBRARY_PATH"] = ":".join([*libs, env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    env.pop("ZK_ADDRESS", None)
    env.pop("CI", None)
    if tests:
        env["TESTS"] = ",".join(tests)
    if args.skip:
        env["TESTS_SKIP"] = ",".join(args.skip)
    if args.debug:
        env["TEST_DEBUG"] = args.debug
    log_path = work / f"output-{label}-{protocol}.log"
    # Line-buffered: test-runner prints its summary with printf and may abort in its exit handlers
    # (a free() of librdkafka's test harness), which would lose a block-buffered tail.
    cmd = [
        "nice",
        "-n",
        "10",
        "stdbuf",
        "-oL",
        str(runner),
        "-L",
        f"-p{args.parallel}",
        "-s",
        scenario,
        "-V",
        KAFKA_VERSION,
    ]
    _log(f"running librdkafka's tests ({label}), group.protocol={protocol}; output in {log_path}")
    with log_path.open("w") as out:
        subprocess.run(cmd, cwd=runner.parent, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    rows = parse_summary(log_path.read_text(errors="replace"))
    report = work / f"report-{label}-{protocol}.json"
    for name, state in (parse_report(report.read_text(errors="replace")) if report.exists() else {}).items():
        rows.setdefault(name, (state, ""))
    return rows, log_path


def _one_run(
    runner: Path,
    work: Path,
    args: argparse.Namespace,
    scenario: str,
    protocol: str,
    overrides: list[str],
    security: str,
    tests: list[str] | None,
) -> tuple[dict[str, tuple[str, str]], Path]:
    """Start a fresh cluster, run test-runner against it, stop it."""
    label = scenario if security == "plaintext" else f"{scenario}-{security}"
    cluster = Cluster(args.kraftlog, work / f"cluster-{label}-{protocol}", security=security)
    if cluster.base_dir.exists():
        shutil.rmtree(cluster.base_dir)
    cluster.start(overrides, args.start_timeout_s)
    try:
        return run_suite(runner, cluster, work, scenario, protocol, args, tests, label)
    finally:
        cluster.stop()


def _table(results: dict[str, dict[str, Counts]]) -> None:
    for scenario, by_protocol in results.items():
        for protocol, counts in by_protocol.items():
            total = len(counts.passed) + len(counts.failed) + len(counts.skipped)
            print(
                f"\n== scenario {scenario}, group.protocol={protocol}: {len(counts.passed)} passed, "
                f"{len(counts.failed)} failed, {len(counts.skipped)} skipped of {total} broker tests"
            )
            for name, why in counts.failed:
                print(f"  FAILED  {name:45} {why[:110]}")
            for name, why in counts.skipped:
                print(f"  SKIPPED {name:45} {why[:110]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=ROOT / ".cache" / "librdkafka",
        help="librdkafka's tree and build, kept between runs (default .cache/librdkafka)",
    )
    parser.add_argument("--version", default=None, help="librdkafka version (default: confluent-kafka's)")
    parser.add_argument(
        "--mirror",
        type=Path,
        default=None,
        help="a local git directory of librdkafka to export from when cloning fails",
    )
    parser.add_argument("--rev", default="HEAD", help="with --mirror, the revision when the tag is missing")
    parser.add_argument("--kraftlog", default=str(ROOT / ".venv" / "bin" / "kraftlog"), help="kraftlog's CLI")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="group.protocol values to run")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="librdkafka's scenarios to run")
    parser.add_argument("--tests", type=lambda s: s.split(","), default=None, help="only these test numbers")
    parser.add_argument("--skip", type=lambda s: s.split(","), default=None, help="skip these test numbers")
    parser.add_argument("--no-sasl", action="store_true", help="skip the SASL_SSL run of the SASL tests")
    parser.add_argument(
        "--sasl-tests",
        type=lambda s: s.split(","),
        default=None,
        help="run these over SASL_SSL (SCRAM), e.g. 0135,0142",
    )
    parser.add_argument("--parallel", type=int, default=2, help="tests run at once (test-runner -p)")
    parser.add_argument("--jobs", type=int, default=2, help="make -j for the build")
    parser.add_argument("--timeout-multiplier", type=float, default=2.0, help="test.timeout.multiplier")
    parser.add_argument("--debug", default="", help="TEST_DEBUG: librdkafka debug contexts for every client")
    parser.add_argument("--work-dir", type=Path, default=None, help="clusters, logs, reports (default: temp)")
    parser.add_argument("--start-timeout-s", type=float, default=180.0, help="cluster readiness bound")
    args = parser.parse_args(argv)

    version = args.version or installed_version()
    src = fetch_source(args.cache_dir, version, args.mirror, args.rev)
    runner = build(src, args.jobs)
    entries = parse_test_table((src / "tests" / "test.c").read_text())
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="librdkafka-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    write_standins(work / "bin", args.kraftlog)
    results: dict[str, dict[str, Counts]] = {}
    protocols = args.protocols.split(",")
    sasl_tests = args.sasl_tests or list(SASL_TESTS)
    for scenario in args.scenarios.split(","):
        overrides = list(BASE_OVERRIDES)
        overrides.append(f"auto.create.topics.enable={'false' if scenario == 'noautocreate' else 'true'}")
        if scenario == "default":
            overrides += ACL_OVERRIDES
        for protocol in protocols:
            # A fresh cluster per run: one run's topics, groups and ACLs do not leak into the next.
            rows, log_path = _one_run(runner, work, args, scenario, protocol, overrides, "plaintext", args.tests)
            if scenario == "default" and sasl_tests and not args.no_sasl:
                sasl_overrides = [o for o in overrides if o not in ACL_OVERRIDES] + list(SASL_OVERRIDES)
                sasl_rows, _ = _one_run(runner, work, args, scenario, protocol, sasl_overrides, "scram", sasl_tests)
                rows.update({k: v for k, v in sasl_rows.items() if k[:4] in sasl_tests})
            counts = summarize(entries, rows, scenario, args.tests)
            results.setdefault(scenario, {})[protocol] = counts
            _log(
                f"{scenario}/{protocol}: {len(counts.passed)} passed, {len(counts.failed)} failed, "
                f"{len(counts.skipped)} skipped ({log_path})"
            )
    _table(results)
    totals: dict[str, int] = {}
    for by_protocol in results.values():
        for protocol, counts in by_protocol.items():
            for what in ("passed", "failed", "skipped"):
                key = f"{protocol}_{what}"
                totals[key] = totals.get(key, 0) + len(getattr(counts, what))
    print(json.dumps(totals, sort_keys=True))
    return 0 if not any(v for k, v in totals.items() if k.endswith("_failed")) else 1


if __name__ == "__main__":
    sys.exit(main())
