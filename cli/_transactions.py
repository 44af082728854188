"""``kraftlog transactions``: producers and transactions as kafka-transactions.sh shows them.

``describe-producers --topic T --partition P``: the producers the partition's leader knows (id,
epoch, last sequence and timestamp, coordinator epoch, open transaction). The transaction
subcommands (list, describe, abort) come with transactions themselves.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, non_negative_int, print_json, print_table

__all__ = ["add_parser", "run", "make_transaction_admin"]


def make_transaction_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int) -> Any:
    """The admin client of this command (tests may replace it)."""
    from kraftlog.client import TransactionAdmin

    return TransactionAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "transactions",
        help="describe the producers of a partition (kafka-transactions)",
        description="Producers and transactions, like Kafka's kafka-transactions.sh. The bootstrap "
        "servers are brokers.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
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
    def body(admin: Any) -> int:
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

    return run_with_admin(args, make_transaction_admin, body)
