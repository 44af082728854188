"""``kraftlog serve --config node.toml``: run one node (controller, broker, or both).

Start order: config (unknown keys and bad values stop here, naming the key), logging with the node's
id and roles bound, the formatted-dirs check (a node refuses to start unformatted or with another
cluster's id), then the metrics endpoint when ``metrics.port`` is set (before any role, so a port
already in use stops the node before it joins anything), then the roles. SIGTERM or SIGINT stops
the node cleanly; a second signal exits at once. A controller that meets a committed metadata record
it cannot replay stops the node with exit status 1 (``kraftlog quorum check`` shows the record).
Test-only fault injection (``KRAFTLOG_TEST_FAULTS``) is refused under systemd.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from kraftlog.cli._common import Subparsers, UserError, described
from kraftlog.cli._storage import add_config_options, load_config_args
from kraftlog.node import NodeStartupError, serve
from kraftlog.storage import FAULTS_ENV

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("serve", help="run a kraftlog node (controller and/or broker)", **described(__doc__))
    add_config_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    _check_test_faults(os.environ)
    config = load_config_args(args)
    try:
        return serve(config, log_level=args.log_level if args.log_level != "warning" else "info")
    except NodeStartupError as err:
        raise UserError(err.message) from err


def _check_test_faults(environ: Mapping[str, str]) -> None:
    """Refuse test-only fault injection (``KRAFTLOG_TEST_FAULTS``, `storage.fault_dir`) under
    systemd, which is how ``deploy/`` runs production nodes (it sets ``INVOCATION_ID``); elsewhere
    (test and local clusters) say loudly that it is on."""
    if not environ.get(FAULTS_ENV):
        return
    if environ.get("INVOCATION_ID"):
        raise UserError(f"{FAULTS_ENV} is set: test-only fault injection is refused under systemd (a production node)")
    print(f"warning: {FAULTS_ENV}={environ[FAULTS_ENV]}: test-only fault injection is on", file=sys.stderr)
