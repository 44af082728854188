"""``kraftlog delete-records``: move partitions' log start offsets, like ``kafka-delete-records.sh``.

``--offset-json-file F`` takes kafka-delete-records' format:
``{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}``, where an
offset of -1 means the high watermark. Records below the new start are no longer readable on any
replica. The result is printed per partition, as Kafka does: the new low watermark, or the error
(exit 1 when any partition failed). The bootstrap servers are brokers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, read_json_file, report_error, run_with_admin, tp_name
from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, Subparsers, UserError, described, partition_entries, print_json

__all__ = ["add_parser", "run", "make_records_admin", "parse_offset_json"]


def make_records_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int, **security: Any) -> Any:
    """The admin client of this command (tests may replace it)."""
    from kraftlog.client import RecordsAdmin

    return RecordsAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def parse_offset_json(obj: Any, path: str = "the offset JSON file") -> dict[tuple[str, int], int]:
    """kafka-delete-records' ``--offset-json-file`` content -> ``{(topic, partition): offset}``;
    problems (a missing field, an offset below -1, a partition named twice, an unknown version)
    are UserErrors naming the entry."""
    if isinstance(obj, dict):
        version = obj.get("version", 1)
        if version != 1:
            raise UserError(f"{path}: version {version!r} is not supported (only 1)")
    out: dict[tuple[str, int], int] = {}
    for i, item, topic, partition in partition_entries(obj, path, duplicates_in="the offset JSON file"):
        offset = item.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
            raise UserError(
                f"{path}: partitions[{i}] needs an integer 'offset' of at least -1 (-1: the high watermark)"
            )
        out[(topic, partition)] = offset
    return out


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "delete-records",
        help="delete records below an offset in partitions (kafka-delete-records)",
        **described(__doc__),
    )
    parser.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='JSON file: {"partitions":[{"topic":"t","partition":0,"offset":10}],"version":1}',
    )
    add_admin_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    offsets = parse_offset_json(read_json_file(args.offset_json_file, "offset JSON file"), args.offset_json_file)
    return run_with_admin(args, make_records_admin, lambda admin: _delete(admin, args, offsets))


def _delete(admin: Any, args: argparse.Namespace, offsets: dict[tuple[str, int], int]) -> int:
    results = admin.delete_records(offsets, timeout_ms=args.request_timeout_ms)
    ordered = sorted(results.items())
    failed = [(tp, r) for tp, r in ordered if r.error is not None]
    if args.output == "json":
        print_json(
            {
                "partitions": [
                    {
                        "topic": t,
                        "partition": p,
                        "low_watermark": r.low_watermark if r.error is None else None,
                        "error": None
                        if r.error is None
                        else {"code": r.error.error_code, "name": r.error.error_name, "message": r.error.message},
                    }
                    for (t, p), r in ordered
                ]
            }
        )
    else:
        print("Executing records delete operation")
        print("Records delete operation completed:")
        for (t, p), r in ordered:
            outcome = f"low_watermark: {r.low_watermark}" if r.error is None else f"error: {r.error.error_name}"
            print(f"partition: {tp_name(t, p)}\t{outcome}")
    for (t, p), r in failed:
        report_error(args, f"cannot delete records of {tp_name(t, p)}: {r.error.error_name}: {r.error.message}")
    return EXIT_FAILURE if failed else EXIT_OK
