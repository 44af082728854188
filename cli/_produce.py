"""``kraftlog produce``: send lines from stdin to a topic, like ``kafka-console-producer``.

Each line is one record (UTF-8, the newline dropped). Kafka's line reader properties apply
(``--property NAME=VALUE``, repeatable or several after one ``--property``):

- ``parse.key=true`` splits each line at the first ``key.separator`` (default a tab) into key and
  value; a line without the separator is an error unless ``ignore.error=true`` (then the whole
  line is the value and the key is null);
- ``parse.headers=true`` reads headers first: ``h1:v1,h2:v2`` up to ``headers.delimiter`` (default
  a tab), pairs separated by ``headers.separator`` (``,``), key and value by
  ``headers.key.separator`` (``:``; a header without one has a null value);
- ``null.marker=TEXT`` sends a key, value or header value equal to TEXT as null.

``--header KEY=VALUE`` (repeatable) adds a header to every record. Records go out batched, as with
Kafka (``--linger-ms``, default 1000 like the console producer's ``--timeout``); ``--sync`` sends
them one at a time. A failed send is reported on stderr (``Error when sending message ...``) and
makes the exit status 1; a line that cannot be parsed stops the command with status 1.

This module also holds the property helpers the other client commands share
(`parse_properties`, `read_properties_file`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    add_bootstrap_server_option,
    non_negative_int,
    security_kwargs,
)

__all__ = [
    "add_parser",
    "run",
    "make_producer",
    "parse_properties",
    "read_properties_file",
    "LineReader",
    "COMPRESSION_TYPES",
]

_PROG = "kraftlog"
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def make_producer(bootstrap_servers: Sequence[str], **config: Any) -> Any:
    """The producer of this command (tests may replace this function)."""
    from kraftlog.client import Producer

    return Producer(bootstrap_servers, **config)


# ------------------------------------------------------------------------- property helpers


def parse_properties(items: Iterable[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}``, keeping the value verbatim (separators may be spaces or ``=``)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"invalid {option} {item!r}: expected NAME=VALUE")
        out[key.strip()] = value
    return out


def read_properties_file(path: str, what: str) -> dict[str, str]:
    """A Java ``.properties`` file (``--producer.config``, ``--consumer.config``), read as
    ``java.util.Properties.load`` reads it."""
    from kraftlog.common import errors as kerr
    from kraftlog.common.config import ConfigError
    from kraftlog.common.config import parse_properties as parse_properties_text

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{what} {path}: cannot read it: {getattr(err, 'strerror', None) or err}") from None
    try:
        return parse_properties_text(text)
    except ConfigError as err:
        raise UserError(f"{what} {path}: {err}", error=kerr.InvalidConfigError) from None


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


# ------------------------------------------------------------------------- the line reader


class LineReader:
    """Kafka's ``LineMessageReader``: one record per line, key and headers per the properties."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = _true(props.get("parse.key"))
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = _true(props.get("parse.headers"))
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = _true(props.get("ignore.error"))
        self.null_marker = props.get("null.marker")
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if value == "":
                raise UserError(f"property {name} must not be empty")
        if self.null_marker == "":
            raise UserError("property null.marker must not be empty")

    def _nullable(self, text: str) -> bytes | None:
        return None if self.null_marker is not None and text == self.null_marker else text.encode("utf-8")

    def parse(self, line: str, number: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            at = line.find(self.headers_delimiter)
            if at < 0:
                if not self.ignore_error:
                    raise UserError(f"No headers delimiter found on line number {number}: '{line}'")
            else:
                for item in line[:at].split(self.headers_separator):
                    if not item:
                        continue
                    hkey, sep, hval = item.partition(self.headers_key_separator)
                    if self.null_marker is not None and hkey == self.null_marker:
                        raise UserError(
                            f"Header keys should not be equal to the null marker "
                            f"'{self.null_marker}' as they can't be null (line {number})"
                        )
                    headers.append((hkey, self._nullable(hval) if sep else None))
                line = line[at + len(self.headers_delimiter) :]
        key: bytes | None = None
        value_text = line
        if self.parse_key:
            at = line.find(self.key_separator)
            if at < 0:
                if not self.ignore_error:
                    raise UserError(f"No key separator found on line number {number}: '{line}'")
            else:
                key = self._nullable(line[:at])
                value_text = line[at + len(self.key_separator) :]
        return key, self._nullable(value_text), headers


# ------------------------------------------------------------------------- the command


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "produce",
        help="send lines from stdin to a topic (kafka-console-producer)",
        description="Read records from stdin, one per line, and send them to a topic, like Kafka's "
        "kafka-console-producer.sh. Use --property parse.key=true key.separator=: for "
        "keyed lines and --property parse.headers=true (or --header) for headers.",
    )
    add_bootstrap_server_option(parser)
    parser.add_argument("--topic", required=True, help="the topic to write to")
    parser.add_argument(
        "--partition",
        type=non_negative_int,
        default=None,
        metavar="P",
        help="send every record to this partition (default: Kafka's partitioner)",
    )
    parser.add_argument(
        "--property",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="line reader property: parse.key, key.separator, parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, "
        "ignore.error, null.marker",
    )
    parser.add_argument(
        "--header", action="append", default=[], metavar="KEY=VALUE", help="a header added to every record (repeatable)"
    )
    parser.add_argument(
        "--acks",
        "--request-required-acks",
        dest="acks",
        default="all",
        choices=("all", "-1", "0", "1"),
        help="acknowledgements to wait for (default: all)",
    )
    parser.add_argument(
        "--compression-type",
        "--compression-codec",
        dest="compression_type",
        choices=COMPRESSION_TYPES,
        default="none",
        help="batch compression (default: none)",
    )
    parser.add_argument(
        "--linger-ms",
        "--timeout",
        dest="linger_ms",
        type=non_negative_int,
        default=1000,
        metavar="MS",
        help="how long a batch may wait for more records (default: 1000)",
    )
    parser.add_argument(
        "--batch-size",
        type=non_negative_int,
        default=16_384,
        metavar="BYTES",
        help="batch size in bytes (default: 16384)",
    )
    parser.add_argument(
        "--sync", action="store_true", help="send each record and wait for its acknowledgement before the next"
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a producer config, e.g. retries=3 (repeatable)",
    )
    parser.add_argument(
        "--producer.config",
        dest="producer_config",
        default=None,
        metavar="FILE",
        help="a properties file of producer configs",
    )
    return parser


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The producer keywords the options and property files ask for."""
    from kraftlog.client import producer_config_from_properties

    props: dict[str, str] = {}
    if args.producer_config:
        props.update(read_properties_file(args.producer_config, "--producer.config"))
    props.update(parse_properties(args.producer_property, "--producer-property"))
    try:
        config, unknown = producer_config_from_properties(props)
    except ValueError as err:
        raise UserError(str(err)) from None
    if config.get("transactional_id"):
        raise UserError(
            "transactional.id: the console producer sends no transactions (use the client library's Producer)"
        )
    for name in unknown:
        print(f"WARN The configuration '{name}' was supplied but isn't a known config.", file=sys.stderr)
    config.pop("bootstrap_servers", None)
    return config


def run(args: argparse.Namespace) -> int:
    reader = LineReader(parse_properties(args.property, "--property"))
    static_headers = [(k, v.encode("utf-8")) for k, v in parse_properties(args.header, "--header").items()]
    config: dict[str, Any] = {
        "acks": args.acks,
        "compression_type": args.compression_type,
        "linger_ms": 0 if args.sync else args.linger_ms,
        "batch_size": args.batch_size,
    }
    config.update(producer_settings(args))
    return _produce(args, reader, static_headers, config, sys.stdin)


def _produce(
    args: argparse.Namespace,
    reader: LineReader,
    static_headers: list[tuple[str, bytes]],
    config: dict[str, Any],
    stream: TextIO,
) -> int:
    from kraftlog.common import errors as kerr

    try:
        producer = make_producer(args.bootstrap_server, **config, **security_kwargs(args))
    except (ValueError, kerr.KafkaError) as err:
        raise UserError(str(err)) from None
    failures = 0
    status = EXIT_OK

    def report(
        metadata: Any, error: BaseException | None, key: bytes | None = None, value: bytes | None = None
    ) -> None:
        nonlocal failures
        if error is not None:
            failures += 1
            name = getattr(error, "error_name", type(error).__name__)
            print(
                f"ERROR Error when sending message to topic {args.topic} with key: "
                f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                f"{'null' if value is None else f'{len(value)} bytes'} with error: {name}: {error}",
                file=sys.stderr,
            )

    try:
        for number, raw in enumerate(stream, start=1):
            line = raw[:-1] if raw.endswith("\n") else raw
            if line.endswith("\r"):
                line = line[:-1]
            try:
                key, value, headers = reader.parse(line, number)
            except UserError as err:
                print(f"{_PROG} {args.command}: error: {err}", file=sys.stderr)
                status = EXIT_FAILURE
                break
            future = producer.send(
                args.topic,
                value,
                key=key,
                headers=headers + static_headers,
                partition=args.partition,
                callback=lambda m, e, k=key, v=value: report(m, e, k, v),
            )
            if args.sync:
                try:
                    future.result()
                except Exception:  # already reported by the callback
                    pass
    finally:
        producer.close()
    return EXIT_FAILURE if failures or status else EXIT_OK
