"""``kraftlog chaos check --history FILE``: re-check a saved queue history (issue 28).

The queue workload writes its history as JSON lines while it runs (`deploy.chaos._queue_history`);
this reads one back and runs the checker (`deploy.chaos._queue_check`) on it alone, with no
cluster: the same table and the same JSON last line as the run that wrote it. Exit code 0 when no
anomaly that fails a run was found (``int_send_skip`` and ``g0`` are reported, not failed: Kafka
does not isolate concurrent producers' writes), 1 when one was, 2 when the file cannot be read.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, UserError, add_output_option, described

__all__ = ["add_check_parser", "run_check"]

_LABEL_WIDTH = 28
_VALUE_WIDTH = 10


def add_check_parser(sub: Any) -> argparse.ArgumentParser:
    check_p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="re-check a saved queue history (no cluster)",
        **described(__doc__),
    )
    check_p.add_argument(
        "--history", required=True, metavar="FILE", help="a history written by the queue workload (JSON lines)"
    )
    add_output_option(check_p)
    return check_p


def run_check(args: argparse.Namespace) -> int:
    from kraftlog.deploy.chaos import check_queue, queue_rows, read_history

    try:
        history = read_history(args.history)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the history {args.history}: {err}") from None
    report = check_queue(history.ops)
    result = {**report.to_json(), "seed": history.seed, "history": str(args.history), "ok": report.ok}
    if args.output != "json":
        print(f"history {args.history}: {len(history.ops)} lines, seed {history.seed}")
        for label, value in queue_rows(report):
            print(f"{label:<{_LABEL_WIDTH}}{value!s:>{_VALUE_WIDTH}}")
        for name, example in report.examples.items():
            print(f"  {name}: {json.dumps(example, sort_keys=True)}")
    print(json.dumps(result, sort_keys=True), flush=True)
    return EXIT_OK if report.ok else EXIT_FAILURE
