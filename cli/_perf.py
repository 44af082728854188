"""``kraftlog perf produce`` and ``kraftlog perf consume``: Kafka's producer and consumer perf tests.

``perf produce`` is ``kafka-producer-perf-test``: it sends ``--num-records`` records of
``--record-size`` random upper-case letters (or lines of ``--payload-file``) at ``--throughput``
records/s (-1: as fast as possible), and prints Kafka's lines: every 5 s (``--reporting-interval``)
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.`` and at the end
the totals with the 50th, 95th, 99th and 99.9th latency percentiles; then one JSON line with the
same figures for scripts (``--output json``: only that line). Latency is from ``send`` to the
acknowledgement. ``--producer-props`` takes Kafka's producer configs (``acks=1 linger.ms=5 batch.size=...``).
With ``--transactional-id`` (or ``--transaction-duration-ms``, or ``transactional.id`` in the
producer configs) the records are sent inside transactions, each committed once it is
``--transaction-duration-ms`` old (default 3000) and the last one at the end; the report adds the
number of transactions committed (``N transactions committed.``, ``"transactions"`` in the JSON).

``perf consume`` is ``kafka-consumer-perf-test`` without groups: it reads every partition of the
topic from the beginning (``--from-latest``: from the end) until ``--messages`` records arrived or
none came for ``--timeout`` ms, and prints Kafka's header and figures line (``start.time, end.time,
data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...``), then a JSON line
(``--output json``: only that line).

Both show a progress bar on stderr while they run, when stderr is a terminal.

Exit status 1 when records failed or the consumer stopped short of ``--messages``.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import positive_int
from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    add_bootstrap_server_option,
    add_output_option,
    json_dumps,
    non_negative_int,
    security_kwargs,
)
from kraftlog.cli._produce import parse_properties, read_properties_file

__all__ = ["add_parser", "run", "make_producer", "make_consumer", "ProduceStats"]

_PROG = "kraftlog"
_MB = 1024.0 * 1024.0
#: Kafka's ProducerPerformance defaults when transactions are on
_DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
_DEFAULT_TRANSACTION_DURATION_MS = 3000


def make_producer(bootstrap_servers: Any, **config: Any) -> Any:
    from kraftlog.client import Producer

    return Producer(bootstrap_servers, **config)


def make_consumer(bootstrap_servers: Any, **config: Any) -> Any:
    from kraftlog.client import Consumer

    return Consumer(bootstrap_servers, **config)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "perf",
        help="producer and consumer performance tests (kafka-*-perf-test)",
        description="Measure produce and consume throughput and latency like Kafka's "
        "kafka-producer-perf-test and kafka-consumer-perf-test.",
    )
    sub = parser.add_subparsers(dest="perf_command", metavar="ACTION")
    sub.required = True

    prod = sub.add_parser(
        "produce",
        help="kafka-producer-perf-test",
        description="Send records as fast as allowed and report throughput and latency.",
    )
    add_bootstrap_server_option(prod, required=False)
    prod.add_argument("--topic", required=True)
    prod.add_argument("--num-records", type=positive_int, required=True, metavar="N")
    size = prod.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=positive_int, metavar="BYTES", help="size of each record")
    size.add_argument(
        "--payload-file", metavar="FILE", help="send records taken at random from the lines of FILE (UTF-8)"
    )
    prod.add_argument("--payload-delimiter", default="\n", help="separator of payloads in --payload-file")
    prod.add_argument("--throughput", type=int, required=True, metavar="N", help="maximum records/s; -1 for no limit")
    prod.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="producer configs, e.g. acks=1 linger.ms=5 compression.type=lz4",
    )
    prod.add_argument("--producer.config", dest="producer_config", default=None, metavar="FILE")
    prod.add_argument(
        "--transactional-id",
        default=None,
        metavar="ID",
        help="send inside transactions with this transactional.id (it wins over transactional.id in "
        "--producer-props / --producer.config); --transaction-duration-ms alone uses "
        "performance-producer-<uuid>",
    )
    prod.add_argument(
        "--transaction-duration-ms",
        type=positive_int,
        default=None,
        metavar="MS",
        help="commit the open transaction once it is this old (default: 3000, as Kafka's, when transactions are on)",
    )
    prod.add_argument(
        "--reporting-interval",
        type=positive_int,
        default=5000,
        metavar="MS",
        help="interval between progress lines (default: 5000, as Kafka's)",
    )
    add_output_option(prod)

    cons = sub.add_parser(
        "consume",
        help="kafka-consumer-perf-test (no groups)",
        description="Read records as fast as possible and report throughput.",
    )
    add_bootstrap_server_option(cons)
    cons.add_argument("--topic", required=True)
    cons.add_argument("--messages", type=positive_int, required=True, metavar="N", help="the number of records to read")
    cons.add_argument(
        "--timeout",
        type=non_negative_int,
        default=10_000,
        metavar="MS",
        help="stop when no record arrived for MS milliseconds (default: 10000)",
    )
    cons.add_argument("--from-latest", action="store_true", help="start at the end instead of the beginning")
    cons.add_argument(
        "--fetch-size", type=positive_int, default=None, metavar="BYTES", help="max.partition.fetch.bytes"
    )
    cons.add_argument("--hide-header", action="store_true", help="do not print the header line")
    cons.add_argument("--show-detailed-stats", action="store_true", help="print figures every --reporting-interval")
    cons.add_argument("--reporting-interval", type=positive_int, default=5000, metavar="MS")
    cons.add_argument("--consumer-property", action="append", default=[], metavar="NAME=VALUE")
    cons.add_argument("--consumer.config", dest="consumer_config", default=None, metavar="FILE")
    add_output_option(cons)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.perf_command == "produce":
        return _produce(args)
    return _consume(args)


# ================================================================================ produce


class ProduceStats:
    """Kafka's ``ProducerPerformance.Stats``: windowed progress lines and sampled latencies."""

    def __init__(self, num_records: int, reporting_interval_ms: int, *, quiet: bool = False) -> None:
        self.quiet = quiet  # --output json: no lines for people on stdout
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, num_records // min(num_records, 500_000))
        self.latencies: list[int] = []
        self.count = 0
        self.bytes = 0
        self.total_latency = 0
        self.max_latency = 0
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency = 0
        self.window_max_latency = 0
        self.reporting_interval = reporting_interval_ms / 1000.0
        self.failed = 0
        self._lock = threading.Lock()

    def record(self, iteration: int, latency_ms: int, size: int, now: float) -> None:
        with self._lock:
            self.count += 1
            self.bytes += size
            self.total_latency += latency_ms
            self.max_latency = max(self.max_latency, latency_ms)
            self.window_count += 1
            self.window_bytes += size
            self.window_total_latency += latency_ms
            self.window_max_latency = max(self.window_max_latency, latency_ms)
            if iteration % self.sampling == 0:
                self.latencies.append(latency_ms)
            if now - self.window_start >= self.reporting_interval:
                self._print_window(now)
                self.window_start = now
                self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0

    def _print_window(self, now: float) -> None:
        if self.quiet:
            return
        elapsed_ms = max((now - self.window_start) * 1000.0, 1e-9)
        print(
            "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency."
            % (
                self.window_count,
                1000.0 * self.window_count / elapsed_ms,
                1000.0 * self.window_bytes / elapsed_ms / _MB,
                self.window_total_latency / max(self.window_count, 1),
                float(self.window_max_latency),
            ),
            flush=True,
        )

    def totals(self) -> dict[str, Any]:
        elapsed_ms = max((time.monotonic() - self.start) * 1000.0, 1e-9)
        lat = sorted(self.latencies)

        def pct(p: float) -> int:
            return lat[min(int(len(lat) * p), len(lat) - 1)] if lat else 0

        return {
            "records": self.count,
            "records_per_sec": 1000.0 * self.count / elapsed_ms,
            "mb_per_sec": 1000.0 * self.bytes / elapsed_ms / _MB,
            "avg_latency_ms": self.total_latency / self.count if self.count else 0.0,
            "max_latency_ms": float(self.max_latency),
            "p50_ms": pct(0.5),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
            "failed": self.failed,
            "elapsed_ms": round(elapsed_ms, 3),
            "bytes": self.bytes,
        }

    def print_total(self) -> dict[str, Any]:
        t = self.totals()
        if self.quiet:
            return t
        print(
            "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
            "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
            % (
                t["records"],
                t["records_per_sec"],
                t["mb_per_sec"],
                t["avg_latency_ms"],
                t["max_latency_ms"],
                t["p50_ms"],
                t["p95_ms"],
                t["p99_ms"],
                t["p999_ms"],
            ),
            flush=True,
        )
        return t


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        letters = bytes(65 + i % 26 for i in range(256))  # upper-case letters, as Kafka's
        return [random.randbytes(args.record_size).translate(letters)]
    try:
        text = Path(args.payload_file).read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"--payload-file {args.payload_file}: {err.strerror or err}") from None
    payloads = [p.encode("utf-8") for p in text.split(args.payload_delimiter) if p]
    if not payloads:
        raise UserError(f"--payload-file {args.payload_file} holds no payload")
    return payloads


def _produce(args: argparse.Namespace) -> int:
    from kraftlog.client import producer_config_from_properties
    from kraftlog.common import errors as kerr
    from kraftlog.common import progress

    if args.throughput == 0 or args.throughput < -1:
        raise UserError("--throughput must be a positive number of records/s, or -1 for no limit")
    props: dict[str, str] = {}
    if args.producer_config:
        props.update(read_properties_file(args.producer_config, "--producer.config"))
    props.update(parse_properties(args.producer_props, "--producer-props"))
    try:
        config, unknown = producer_config_from_properties(props)
    except ValueError as err:
        raise UserError(str(err)) from None
    duration_ms = _transactions(args, config)
    for name in unknown:
        print(f"WARN The configuration '{name}' was supplied but isn't a known config.", file=sys.stderr)
    bootstrap = config.pop("bootstrap_servers", None) or args.bootstrap_server
    if not bootstrap:
        raise UserError("either --bootstrap-server or bootstrap.servers in --producer-props must be given")
    payloads = _payloads(args)
    try:
        producer = make_producer(bootstrap, **config, **security_kwargs(args))
    except (ValueError, kerr.KafkaError) as err:
        raise UserError(str(err)) from None
    stats = ProduceStats(args.num_records, args.reporting_interval, quiet=args.output == "json")
    errors: list[BaseException] = []
    rng = random.Random()
    # Acknowledgements advance the bar from the producer's sender thread (rich locks its own state);
    # all of them arrive inside the `with` below, since closing the producer waits for them.

    def on_done(iteration: int, start: float, size: int) -> Callable[[Any, BaseException | None], None]:
        def callback(metadata: Any, error: BaseException | None) -> None:
            now = time.monotonic()
            acknowledged.advance()
            if error is not None:
                with stats._lock:
                    stats.failed += 1
                if len(errors) < 5:
                    errors.append(error)
                    print(f"ERROR {getattr(error, 'error_name', type(error).__name__)}: {error}", file=sys.stderr)
                return
            stats.record(iteration, int((now - start) * 1000), size, now)

        return callback

    committed = 0  # transactions committed (only with transactions on)
    txn_failure: BaseException | None = None
    with progress("producing", total=args.num_records) as acknowledged:
        try:
            if duration_ms is not None:
                producer.init_transactions()
            begin = time.monotonic()
            txn_started: float | None = None  # when the open transaction began; None: none is open
            for i in range(args.num_records):
                payload = payloads[0] if len(payloads) == 1 else rng.choice(payloads)
                sent_at = time.monotonic()
                if duration_ms is not None and txn_started is None:
                    producer.begin_transaction()
                    txn_started = sent_at
                producer.send(args.topic, payload, callback=on_done(i, sent_at, len(payload)))
                # as Kafka's: commit once the open transaction is --transaction-duration-ms old
                if (
                    duration_ms is not None
                    and txn_started is not None
                    and (sent_at - txn_started) * 1000.0 >= duration_ms
                ):
                    producer.commit_transaction()
                    committed += 1
                    txn_started = None
                if args.throughput > 0:
                    ahead = begin + (i + 1) / args.throughput - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            if txn_started is not None:
                producer.commit_transaction()
                committed += 1
        except kerr.KafkaError as err:  # a transaction that cannot commit ends the run, as Kafka's
            txn_failure = err
            print(f"ERROR {getattr(err, 'error_name', type(err).__name__)}: {err}", file=sys.stderr)
        finally:
            producer.close()
    totals = stats.print_total()
    if duration_ms is not None:
        totals["transactions"] = committed
        if args.output != "json":
            print(f"{committed} transactions committed.", flush=True)
    print(json_dumps({"test": "produce", "topic": args.topic, **{k: _round(v) for k, v in totals.items()}}))
    return EXIT_FAILURE if stats.failed or txn_failure is not None else EXIT_OK


def _transactions(args: argparse.Namespace, config: dict[str, Any]) -> int | None:
    """The transaction duration (ms) when the run sends inside transactions, else None; sets
    ``config["transactional_id"]``. Kafka's rules: transactions are on with ``--transactional-id``,
    ``--transaction-duration-ms`` or a ``transactional.id`` producer property; the option wins
    over the property, and neither gives ``performance-producer-<uuid>``."""
    if args.transactional_id is None and args.transaction_duration_ms is None and not config.get("transactional_id"):
        return None
    transactional_id = args.transactional_id or config.get("transactional_id")
    if not transactional_id:
        import uuid

        transactional_id = _DEFAULT_TRANSACTION_ID_PREFIX + str(uuid.uuid4())
    config["transactional_id"] = transactional_id
    duration_ms = args.transaction_duration_ms
    return int(duration_ms) if duration_ms is not None else _DEFAULT_TRANSACTION_DURATION_MS


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


# ================================================================================ consume


def _date(epoch_ms: float) -> str:
    dt = datetime.fromtimestamp(epoch_ms / 1000.0)
    return dt.strftime("%Y-%m-%d %H:%M:%S:") + f"{int(epoch_ms) % 1000:03d}"


_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _figures(start_ms: float, end_ms: float, nbytes: int, count: int) -> tuple[str, dict[str, Any]]:
    elapsed_s = max((end_ms - start_ms) / 1000.0, 1e-9)
    mb = nbytes / _MB
    line = "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
        _date(start_ms),
        _date(end_ms),
        mb,
        mb / elapsed_s,
        count,
        count / elapsed_s,
        0,
        int(end_ms - start_ms),
        mb / elapsed_s,
        count / elapsed_s,
    )
    return line, {
        "start_time_ms": int(start_ms),
        "end_time_ms": int(end_ms),
        "mb": round(mb, 4),
        "mb_per_sec": round(mb / elapsed_s, 4),
        "records": count,
        "records_per_sec": round(count / elapsed_s, 4),
        "fetch_time_ms": int(end_ms - start_ms),
        "bytes": nbytes,
    }


def _consume(args: argparse.Namespace) -> int:
    from kraftlog.cli._consume import consumer_settings
    from kraftlog.common import errors as kerr
    from kraftlog.common import progress

    people = args.output != "json"  # --output json: only the JSON line on stdout

    config: dict[str, Any] = {"auto_offset_reset": "latest" if args.from_latest else "earliest"}
    if args.fetch_size:
        config["max_partition_fetch_bytes"] = args.fetch_size
    config.update(consumer_settings(args))
    try:
        consumer = make_consumer(args.bootstrap_server, **config, **security_kwargs(args))
    except ValueError as err:
        raise UserError(str(err)) from None
    count = nbytes = 0
    timed_out = False
    try:
        try:
            partitions = consumer.partitions_for_topic(args.topic)
        except kerr.KafkaError as err:
            print(
                f"{_PROG} {args.command}: error: topic {args.topic!r}: {err.error_name}: {err.message}", file=sys.stderr
            )
            return EXIT_FAILURE
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        if args.from_latest:
            consumer.seek_to_end(*tps)
        else:
            consumer.seek_to_beginning(*tps)
        start_ms = time.time() * 1000
        last = time.monotonic()
        window_start_ms, window_count, window_bytes = start_ms, 0, 0
        if people and args.show_detailed_stats and not args.hide_header:
            print(
                "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
            )
        with progress("consuming", total=args.messages) as consumed:
            while count < args.messages:
                left = args.timeout / 1000.0 - (time.monotonic() - last)
                if left <= 0:
                    timed_out = True
                    break
                records = consumer.poll(max(1, int(min(left, 1.0) * 1000)))
                if records:
                    last = time.monotonic()
                for r in records:
                    if count >= args.messages:
                        break
                    count += 1
                    size = (len(r.key) if r.key is not None else 0) + (len(r.value) if r.value is not None else 0)
                    nbytes += size
                    window_count += 1
                    window_bytes += size
                consumed.update(completed=count)
                now_ms = time.time() * 1000
                if not (people and args.show_detailed_stats and now_ms - window_start_ms >= args.reporting_interval):
                    continue
                elapsed = max((now_ms - window_start_ms) / 1000.0, 1e-9)
                print(
                    "%s, 0, %.4f, %.4f, %d, %.4f, 0, %d, %.4f, %.4f"
                    % (
                        _date(now_ms),
                        nbytes / _MB,
                        window_bytes / _MB / elapsed,
                        count,
                        window_count / elapsed,
                        int(now_ms - window_start_ms),
                        window_bytes / _MB / elapsed,
                        window_count / elapsed,
                    ),
                    flush=True,
                )
                window_start_ms, window_count, window_bytes = now_ms, 0, 0
        end_ms = time.time() * 1000
    finally:
        consumer.close()
    if timed_out:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
            f"exceeded. You can use the --timeout option to increase the timeout.",
            file=sys.stderr,
        )
    line, figures = _figures(start_ms, end_ms, nbytes, count)
    if people:
        if not args.hide_header:
            print(_HEADER)
        print(line)
    print(
        json_dumps(
            {"test": "consume", "topic": args.topic, **figures, "expected": args.messages, "timed_out": timed_out}
        )
    )
    return EXIT_FAILURE if count < args.messages else EXIT_OK
