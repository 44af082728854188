"""``kraftlog features``: describe, upgrade and downgrade feature versions, like ``kafka-features.sh``.

``describe`` prints each feature this controller supports with its finalized level (Kafka's
``Feature: f  SupportedMinVersion: a  SupportedMaxVersion: b  FinalizedVersionLevel: c  Epoch: e``).
``upgrade --feature name=level ...`` and ``downgrade --feature name=level ... [--unsafe]`` send one
UpdateFeatures (all or nothing); ``--release-version 4.0`` (or ``3.9``, ``4.0-IV1``, ...) stands for
``--feature metadata.version=`` that release's level (only metadata.version, unlike Kafka 4's tool,
which also sets the other features to the release's defaults); ``--dry-run`` validates without
writing. Exit 1 when refused, with Kafka's error (INVALID_UPDATE_VERSION and why).
"""

from __future__ import annotations

import argparse
from typing import Any

from kraftlog.cli._admin_command import (
    add_admin_options,
    error_failed,
    error_json,
    error_text,
    make_admin,
    raise_if_error,
    report_error,
    run_with_admin,
)
from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, Subparsers, described, print_json
from kraftlog.metadata_log import METADATA_VERSION, metadata_version_level

__all__ = ["add_parser", "run", "parse_feature"]

_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3


def parse_feature(text: str) -> tuple[str, int]:
    """``name=level`` -> ``(name, level)``; anything else is an argparse error."""
    name, sep, level = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not name=level")
    try:
        value = int(level)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the level must be an integer") from None
    return name.strip(), value


def _release_level(text: str) -> int:
    try:
        return metadata_version_level(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "features", help="describe/upgrade/downgrade feature versions (kafka-features)", **described(__doc__)
    )
    sub = parser.add_subparsers(dest="features_command", required=True)
    describe = sub.add_parser("describe", help="finalized and supported feature levels")
    add_admin_options(describe)
    for name, what in (("upgrade", "raise"), ("downgrade", "lower")):
        p = sub.add_parser(name, help=f"{what} finalized feature levels")
        chosen = p.add_mutually_exclusive_group(required=True)
        chosen.add_argument(
            "--feature",
            action="append",
            type=parse_feature,
            metavar="NAME=LEVEL",
            help="a feature and its new level (repeatable)",
        )
        chosen.add_argument(
            "--release-version",
            type=_release_level,
            metavar="X.Y[-IVn]",
            help="metadata.version at the level of this Kafka release (e.g. 4.0)",
        )
        p.add_argument("--dry-run", action="store_true", help="validate only: nothing is written")
        if name == "downgrade":
            p.add_argument("--unsafe", action="store_true", help="allow a lossy downgrade (Kafka's unsafe type)")
        add_admin_options(p)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.features_command == "describe":
        return run_with_admin(args, make_admin, lambda admin: _describe(admin, args))
    return run_with_admin(args, make_admin, lambda admin: _update(admin, args))


def _describe(admin: Any, args: argparse.Namespace) -> int:
    response = admin.describe_features()
    raise_if_error(response.error)
    finalized = {f.name: f.level for f in response.finalized}
    rows = [
        {
            "feature": s.name,
            "supported_min_version": s.min_version,
            "supported_max_version": s.max_version,
            "finalized_version_level": finalized.get(s.name, 0),
            "epoch": response.finalized_epoch,
        }
        for s in response.supported
    ]
    if args.output == "json":
        print_json({"features": rows})
        return EXIT_OK
    for r in rows:
        print(
            f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min_version']}\t"
            f"SupportedMaxVersion: {r['supported_max_version']}\t"
            f"FinalizedVersionLevel: {r['finalized_version_level']}\tEpoch: {r['epoch']}"
        )
    return EXIT_OK


def _update(admin: Any, args: argparse.Namespace) -> int:
    levels = dict(args.feature) if args.feature else {METADATA_VERSION: args.release_version}
    if args.features_command == "upgrade":
        kind = _UPGRADE
    else:
        kind = _UNSAFE_DOWNGRADE if args.unsafe else _SAFE_DOWNGRADE
    response = admin.update_features(
        levels, upgrade_type=kind, validate_only=args.dry_run, timeout_ms=args.request_timeout_ms
    )
    failed = error_failed(response.error)
    verb = "upgrade" if kind == _UPGRADE else "downgrade"
    if args.output == "json":
        print_json(
            {
                "dry_run": args.dry_run,
                "features": [{"feature": n, "level": lvl} for n, lvl in levels.items()],
                "error": error_json(response.error) if failed else None,
            }
        )
    elif not failed:
        for n, lvl in levels.items():
            prefix = "dry run: " if args.dry_run else ""
            print(f"{prefix}{n} was {verb}d to {lvl}.")
    if failed:
        for n, lvl in levels.items():
            report_error(args, f"Could not {verb} {n} to {lvl}: {error_text(response.error)}")
        return EXIT_FAILURE
    return EXIT_OK
