"""``kraftlog consume``: print a topic's records, like ``kafka-console-consumer``.

Without ``--partition`` every partition of the topic is read (consumer groups arrive in a later
issue); ``--offset`` (a number, ``earliest`` or ``latest``) needs ``--partition``, as in Kafka. The
start is the end of each partition unless ``--from-beginning`` or ``--offset`` says otherwise.
The command stops after ``--max-messages`` records, or when no record came for ``--timeout-ms``,
or on Ctrl-C, and then writes ``Processed a total of N messages`` to stderr.

Each record is printed by Kafka's ``DefaultMessageFormatter`` rules (``--property NAME=VALUE``):
``print.timestamp`` (``CreateTime:1700000000000``), ``print.partition`` (``Partition:0``),
``print.offset`` (``Offset:42``), ``print.headers`` (``k1:v1,k2:v2`` or ``NO_HEADERS``),
``print.key``, ``print.value`` (default true), in that order, separated by ``key.separator`` (a
tab), each record ended by ``line.separator`` (a newline); ``headers.separator`` (``,``),
``headers.key.separator`` (``:``) and ``null.literal`` (``null``) shape the rest. Keys, values and
header values are written as the bytes they are.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    add_bootstrap_server_option,
    non_negative_int,
    security_kwargs,
)
from kraftlog.cli._produce import parse_properties, read_properties_file

__all__ = ["add_parser", "run", "make_consumer", "MessageFormatter", "consumer_settings"]

_PROG = "kraftlog"


def make_consumer(bootstrap_servers: Sequence[str], **config: Any) -> Any:
    """The consumer of this command (tests may replace this function)."""
    from kraftlog.client import Consumer

    return Consumer(bootstrap_servers, **config)


def _true(value: str | None, default: bool = False) -> bool:
    return default if value is None else value.strip().lower() == "true"


class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter``."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_timestamp = _true(props.get("print.timestamp"))
        self.print_partition = _true(props.get("print.partition"))
        self.print_offset = _true(props.get("print.offset"))
        self.print_headers = _true(props.get("print.headers"))
        self.print_key = _true(props.get("print.key"))
        self.print_value = _true(props.get("print.value"), True)
        self.key_separator = props.get("key.separator", "\t").encode("utf-8")
        self.line_separator = props.get("line.separator", "\n").encode("utf-8")
        self.headers_separator = props.get("headers.separator", ",").encode("utf-8")
        self.headers_key_separator = props.get("headers.key.separator", ":").encode("utf-8")
        self.null_literal = props.get("null.literal", "null").encode("utf-8")

    def _bytes(self, value: bytes | None) -> bytes:
        return self.null_literal if value is None else value

    def format(self, record: Any) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            if record.timestamp < 0:
                fields.append(b"NO_TIMESTAMP")
            else:
                kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
                fields.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if record.headers:
                fields.append(
                    self.headers_separator.join(
                        k.encode("utf-8") + self.headers_key_separator + self._bytes(v) for k, v in record.headers
                    )
                )
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self._bytes(record.key))
        if self.print_value:
            fields.append(self._bytes(record.value))
        return self.key_separator.join(fields) + self.line_separator


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "consume",
        help="print the records of a topic (kafka-console-consumer)",
        description="Print the records of a topic's partitions, like Kafka's kafka-console-consumer.sh "
        "with --partition/--offset (no consumer groups yet).",
    )
    add_bootstrap_server_option(parser)
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument(
        "--partition",
        type=non_negative_int,
        default=None,
        metavar="P",
        help="read only this partition (default: all partitions of the topic)",
    )
    parser.add_argument(
        "--offset",
        default=None,
        metavar="N|earliest|latest",
        help="where to start in --partition: an offset, earliest or latest (default: latest)",
    )
    parser.add_argument(
        "--from-beginning", action="store_true", help="start with the earliest record instead of the end"
    )
    parser.add_argument(
        "--max-messages",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="exit after N records (default: no limit)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=non_negative_int,
        default=None,
        metavar="MS",
        help="exit when no record arrived for MS milliseconds (default: wait forever)",
    )
    parser.add_argument(
        "--property",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="formatter property: print.timestamp, print.partition, print.offset, "
        "print.headers, print.key, print.value, key.separator, line.separator, "
        "headers.separator, headers.key.separator, null.literal",
    )
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: only records of committed transactions, up to the last stable offset",
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a consumer config, e.g. fetch.max.wait.ms=100 (repeatable)",
    )
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        default=None,
        metavar="FILE",
        help="a properties file of consumer configs",
    )
    return parser


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    from kraftlog.client import consumer_config_from_properties

    props: dict[str, str] = {}
    if getattr(args, "consumer_config", None):
        props.update(read_properties_file(args.consumer_config, "--consumer.config"))
    props.update(parse_properties(getattr(args, "consumer_property", []), "--consumer-property"))
    try:
        config, unknown = consumer_config_from_properties(props)
    except ValueError as err:
        raise UserError(str(err)) from None
    for name in unknown:
        print(f"WARN The configuration '{name}' was supplied but isn't a known config.", file=sys.stderr)
    config.pop("bootstrap_servers", None)
    return config


def _start(args: argparse.Namespace) -> tuple[str, int | None]:
    """(``earliest``|``latest``|``offset``, offset)."""
    if args.offset is not None:
        if args.partition is None:
            raise UserError("The partition is required when offset is specified.")
        if args.from_beginning:
            raise UserError("Options from-beginning and offset cannot be specified together.")
        text = args.offset.strip().lower()
        if text in ("earliest", "latest"):
            return text, None
        try:
            offset = int(text)
        except ValueError:
            raise UserError(f"invalid --offset {args.offset!r}: a non-negative number, earliest or latest") from None
        if offset < 0:
            raise UserError(f"invalid --offset {args.offset!r}: a non-negative number, earliest or latest")
        return "offset", offset
    return ("earliest" if args.from_beginning else "latest"), None


def _stdout() -> BinaryIO:
    sys.stdout.flush()
    return getattr(sys.stdout, "buffer", None) or _TextAdapter()  # type: ignore[return-value]


class _TextAdapter:
    """For a text-only stdout (no ``buffer``): decode as UTF-8."""

    def write(self, data: bytes) -> int:
        return sys.stdout.write(data.decode("utf-8", errors="replace"))

    def flush(self) -> None:
        sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from kraftlog.common import errors as kerr

    where, offset = _start(args)
    formatter = MessageFormatter(parse_properties(args.property, "--property"))
    config: dict[str, Any] = {
        "auto_offset_reset": "earliest" if where == "earliest" else "latest",
        "isolation_level": args.isolation_level,
    }
    config.update(consumer_settings(args))
    try:
        consumer = make_consumer(args.bootstrap_server, **config, **security_kwargs(args))
    except ValueError as err:
        raise UserError(str(err)) from None
    count = 0
    status = EXIT_OK
    try:
        try:
            partitions = consumer.partitions_for_topic(args.topic, args.timeout_ms)
        except kerr.KafkaError as err:
            print(
                f"{_PROG} {args.command}: error: topic {args.topic!r}: {err.error_name}: {err.message}", file=sys.stderr
            )
            return EXIT_FAILURE
        if args.partition is not None:
            if args.partition not in partitions:
                print(
                    f"{_PROG} {args.command}: error: partition {args.partition} of topic {args.topic!r} "
                    f"does not exist (it has {len(partitions)})",
                    file=sys.stderr,
                )
                return EXIT_FAILURE
            partitions = [args.partition]
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        if where == "earliest":
            consumer.seek_to_beginning(*tps)
        elif where == "latest":
            consumer.seek_to_end(*tps)
        else:
            consumer.seek(tps[0], offset)
        out = _stdout()
        last = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            wait_ms = 1000
            if args.timeout_ms is not None:
                left = args.timeout_ms - (time.monotonic() - last) * 1000
                if left <= 0:
                    break
                wait_ms = max(1, min(wait_ms, int(left)))
            records = consumer.poll(wait_ms)
            if records:
                last = time.monotonic()
            for record in records:
                if args.max_messages is not None and count >= args.max_messages:
                    break
                out.write(formatter.format(record))
                count += 1
            if records:
                out.flush()
    except KeyboardInterrupt:
        pass
    except kerr.KafkaError as err:
        print(f"{_PROG} {args.command}: error: {err.error_name}: {err}", file=sys.stderr)
        status = EXIT_FAILURE
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return status
