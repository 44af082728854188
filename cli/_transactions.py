"""``kraftlog transactions``: producers and transactions as kafka-transactions.sh shows them.

``list``: every transactional id with its producer id and state (``--state``, ``--producer-id``
filters); ``describe --transactional-id ID``: its coordinator, epoch, timeout, start and the
partitions of its open transaction; ``describe-producers --topic T --partition P``: the producers
the partition's leader knows; ``abort --topic T --partition P --producer-id N --producer-epoch E
--coordinator-epoch C``: write an ABORT marker for a hanging transaction.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, non_negative_int, print_json, print_table

__all__ = ["add_parser", "run", "make_transaction_admin"]


def make_transaction_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int, **security: Any) -> Any:
    """The admin client of this command (tests may replace it)."""
    from kraftlog.client import TransactionAdmin

    return TransactionAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "transactions",
        help="list, describe and abort transactions, describe a partition's producers (kafka-transactions)",
        description="Producers and transactions, like Kafka's kafka-transactions.sh. The bootstrap "
        "servers are brokers.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="every transactional id", description="Every transactional id.")
    listing.add_argument("--state", action="append", default=[], help="only this state (Ongoing, CompleteCommit, ...)")
    listing.add_argument("--producer-id", action="append", default=[], type=int, help="only this producer id")
    add_admin_options(listing)
    one = sub.add_parser("describe", help="one transactional id", description="One transactional id's transaction.")
    one.add_argument("--transactional-id", required=True, help="the transactional id")
    add_admin_options(one)
    abort = sub.add_parser(
        "abort",
        help="abort a hanging transaction in a partition",
        description="Write an ABORT marker for a producer into one partition, for a transaction its "
        "coordinator will not end.",
    )
    abort.add_argument("--topic", required=True, help="the topic")
    abort.add_argument("--partition", required=True, type=non_negative_int, help="the partition")
    abort.add_argument("--producer-id", required=True, type=int, help="the producer id")
    abort.add_argument("--producer-epoch", required=True, type=int, help="the producer epoch")
    abort.add_argument("--coordinator-epoch", required=True, type=int, help="the coordinator epoch")
    add_admin_options(abort)
    describe = sub.add_parser(
        "describe-producers",
        help="the producers a partition's leader knows",
        description="The idempotent and transactional producers the leader of a partition knows.",
    )
    describe.add_argument("--topic", required=True, help="the topic")
    describe.add_argument("--partition", required=True, type=non_negative_int, help="the partition")
    add_admin_options(describe)
    return parser


def run(args: argparse.Namespace) -> int:
    actions = {"list": _list, "describe": _describe, "abort": _abort, "describe-producers": _producers}
    return run_with_admin(args, make_transaction_admin, lambda admin: actions[args.action](args, admin))


def _list(args: argparse.Namespace, admin: Any) -> int:
    found = admin.list_transactions(args.state, args.producer_id)
    rows = [
        {"transactional_id": t.transactional_id, "coordinator": t.coordinator, "producer_id": t.producer_id,
         "state": t.state}
        for t in found
    ]  # fmt: skip
    if args.output == "json":
        print_json({"transactions": rows})
    else:
        print_table(
            ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
            [[r["transactional_id"], r["coordinator"], r["producer_id"], r["state"]] for r in rows],
        )
    return EXIT_OK


def _describe(args: argparse.Namespace, admin: Any) -> int:
    d = admin.describe_transaction(args.transactional_id)
    row = {
        "transactional_id": d.transactional_id,
        "coordinator": d.coordinator,
        "producer_id": d.producer_id,
        "producer_epoch": d.producer_epoch,
        "state": d.state,
        "timeout_ms": d.timeout_ms,
        "start_ms": d.start_ms if d.start_ms >= 0 else None,
        "partitions": [f"{tp.topic}-{tp.partition}" for tp in d.partitions],
    }
    if args.output == "json":
        print_json(row)
    else:
        print_table(
            ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
             "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TopicPartitions"],
            [[d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
              "None" if row["start_ms"] is None else row["start_ms"], ",".join(row["partitions"])]],
        )  # fmt: skip
    return EXIT_OK


def _abort(args: argparse.Namespace, admin: Any) -> int:
    admin.abort_transaction(args.topic, args.partition, args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.output == "json":
        print_json({"topic": args.topic, "partition": args.partition, "producer_id": args.producer_id, "aborted": True})
    else:
        print(f"Aborted the transaction of producer {args.producer_id} in {args.topic}-{args.partition}.")
    return EXIT_OK


def _producers(args: argparse.Namespace, admin: Any) -> int:
    producers = admin.describe_producers(args.topic, args.partition)
    rows = [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "latest_coordinator_epoch": p.coordinator_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "current_transaction_start_offset": p.current_transaction_start_offset,
        }
        for p in producers
    ]
    if args.output == "json":
        print_json({"topic": args.topic, "partition": args.partition, "producers": rows})
        return EXIT_OK
    print_table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [
            [
                r["producer_id"],
                r["producer_epoch"],
                r["latest_coordinator_epoch"],
                r["last_sequence"],
                r["last_timestamp"],
                "None" if r["current_transaction_start_offset"] < 0 else r["current_transaction_start_offset"],
            ]
            for r in rows
        ],
    )
    return EXIT_OK
