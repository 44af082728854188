"""``kraftlog elect-leaders``: preferred or unclean leader election, like ``kafka-leader-election.sh``.

Choose the partitions with exactly one of ``--topic T --partition P``, ``--all-topic-partitions``
or ``--path-to-json-file F`` (``{"partitions": [{"topic": "t", "partition": 0}, ...]}``). The result
is printed per outcome as Kafka does: partitions whose election succeeded, partitions that already
had a valid leader, and one error line per partition that could not be elected (exit 1).
"""

from __future__ import annotations

import argparse
from typing import Any

from kraftlog.cli._admin_command import (
    add_admin_options,
    error_failed,
    error_json,
    error_name,
    error_text,
    make_admin,
    raise_if_error,
    read_json_file,
    report_error,
    run_with_admin,
    tp_name,
)
from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    described,
    non_negative_int,
    partition_entries,
    print_json,
)

__all__ = ["add_parser", "run", "make_admin", "parse_partitions_file", "ELECTION_TYPES"]

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
_NOT_NEEDED = "ELECTION_NOT_NEEDED"


def _election_type(text: str) -> str:
    value = text.strip().upper()
    if value not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(f"{text!r} is not PREFERRED or UNCLEAN")
    return value


def parse_partitions_file(obj: Any, path: str = "the partitions file") -> dict[str, list[int]]:
    """``{"partitions": [{"topic": "t", "partition": 0}]}`` -> ``{"t": [0]}``; problems are UserErrors."""
    out: dict[str, list[int]] = {}
    for _i, _item, topic, partition in partition_entries(obj, path, duplicates_in="replica election data"):
        out.setdefault(topic, []).append(partition)
    return out


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "elect-leaders",
        help="run preferred or unclean leader elections (kafka-leader-election)",
        **described(__doc__),
    )
    parser.add_argument(
        "--election-type",
        required=True,
        type=_election_type,
        metavar="PREFERRED|UNCLEAN",
        help="PREFERRED: move leadership to the first replica when it is in the ISR; "
        "UNCLEAN: elect any live replica for partitions without a leader",
    )
    parser.add_argument("--topic", default=None, help="the topic of the partition (with --partition)")
    parser.add_argument(
        "--partition", type=non_negative_int, default=None, metavar="P", help="the partition (with --topic)"
    )
    parser.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    parser.add_argument(
        "--path-to-json-file",
        default=None,
        metavar="FILE",
        help='JSON file: {"partitions":[{"topic":"t","partition":0}]}',
    )
    add_admin_options(parser)
    return parser


def _selection(args: argparse.Namespace) -> dict[str, list[int]] | None:
    """The partitions to elect (None: every partition)."""
    chosen = [
        name
        for name, given in (
            ("--topic/--partition", args.topic is not None or args.partition is not None),
            ("--all-topic-partitions", args.all_topic_partitions),
            ("--path-to-json-file", args.path_to_json_file is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise UserError(
            "give exactly one of --topic with --partition, --all-topic-partitions or "
            "--path-to-json-file" + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file is not None:
        return parse_partitions_file(read_json_file(args.path_to_json_file, "partitions file"), args.path_to_json_file)
    if args.topic is None or not args.topic.strip():
        raise UserError("--partition needs --topic")
    if args.partition is None:
        raise UserError("--topic needs --partition")
    return {args.topic: [args.partition]}


def run(args: argparse.Namespace) -> int:
    partitions = _selection(args)
    return run_with_admin(args, make_admin, lambda admin: _elect(admin, args, partitions))


def _elect(admin: Any, args: argparse.Namespace, partitions: dict[str, list[int]] | None) -> int:
    etype = args.election_type
    response = admin.elect_leaders(ELECTION_TYPES[etype], partitions, timeout_ms=args.request_timeout_ms)
    raise_if_error(response.error)
    results = sorted(response.results, key=lambda r: (r.topic, r.partition))
    elected = [r for r in results if not error_failed(r.error)]
    not_needed = [r for r in results if error_failed(r.error) and error_name(r.error) == _NOT_NEEDED]
    failed = [r for r in results if error_failed(r.error) and error_name(r.error) != _NOT_NEEDED]
    if args.output == "json":

        def status(r: Any) -> str:
            if not error_failed(r.error):
                return "elected"
            return "not_needed" if error_name(r.error) == _NOT_NEEDED else "failed"

        print_json(
            {
                "election_type": etype,
                "results": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "status": status(r),
                        "error": error_json(r.error) if status(r) == "failed" else None,
                    }
                    for r in results
                ],
            }
        )
    else:
        if elected:
            print(
                f"Successfully completed leader election ({etype}) for partitions "
                + ", ".join(tp_name(r.topic, r.partition) for r in elected)
            )
        if not_needed:
            print(
                "Valid replica already elected for partitions "
                + ", ".join(tp_name(r.topic, r.partition) for r in not_needed)
            )
    for r in failed:
        report_error(
            args,
            f"Error completing leader election ({etype}) for partition: "
            f"{tp_name(r.topic, r.partition)}: {error_text(r.error)}",
        )
    if failed:
        report_error(args, f"{len(failed)} replica(s) could not be elected")
        return EXIT_FAILURE
    return EXIT_OK
