"""``kraftlog features`` (issue 26): kafka-features' table, its update requests and refusals."""

from __future__ import annotations

import argparse

import pytest

from kraftlog.cli import _features
from kraftlog.cli.__main__ import main
from kraftlog.proto import admin_pb2 as R
from tests.unit.cli.test_cli_admin import BOOT, _uncached_logging, err, fake  # noqa: F401

DESCRIBED = R.DescribeFeaturesResponse(
    finalized=[R.DescribeFeaturesResponse.Finalized(name="metadata.version", level=25)],
    supported=[
        R.DescribeFeaturesResponse.Supported(name="eligible.leader.replicas.version", min_version=0, max_version=1),
        R.DescribeFeaturesResponse.Supported(name="metadata.version", min_version=7, max_version=25),
    ],
    finalized_epoch=42,
)


def test_parse_feature() -> None:
    assert _features.parse_feature(" metadata.version=25") == ("metadata.version", 25)
    for bad in ("metadata.version", "=3", "x=high"):
        with pytest.raises(argparse.ArgumentTypeError):
            _features.parse_feature(bad)


def test_describe_prints_kafka_features_lines(fake, capsys) -> None:  # noqa: F811 (the fixture)
    fake(_features, describe_features=DESCRIBED)
    assert main(["features", "describe", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
        "FinalizedVersionLevel: 0\tEpoch: 42",
        "Feature: metadata.version\tSupportedMinVersion: 7\tSupportedMaxVersion: 25\t"
        "FinalizedVersionLevel: 25\tEpoch: 42",
    ]


def test_upgrade_downgrade_and_refusal(fake, capsys) -> None:  # noqa: F811 (the fixture)
    admin = fake(_features, update_features=R.UpdateFeaturesResponse())
    assert main(["features", "upgrade", "--feature", "eligible.leader.replicas.version=1", "--dry-run", *BOOT]) == 0
    assert "dry run: eligible.leader.replicas.version was upgraded to 1." in capsys.readouterr().out
    ((args, kwargs),) = admin.called("update_features")
    assert args == ({"eligible.leader.replicas.version": 1},) and kwargs["upgrade_type"] == 1
    assert kwargs["validate_only"] is True
    assert main(["features", "downgrade", "--feature", "group.version=0", "--unsafe", *BOOT]) == 0
    assert admin.called("update_features")[-1][1]["upgrade_type"] == 3
    refused = R.UpdateFeaturesResponse(error=err("INVALID_UPDATE_VERSION", "kraft.version 1 needs the dynamic"))
    fake(_features, update_features=refused)
    assert main(["features", "upgrade", "--feature", "kraft.version=1", *BOOT]) == 1
    assert "Could not upgrade kraft.version to 1: INVALID_UPDATE_VERSION" in capsys.readouterr().err


def test_release_version_stands_for_metadata_version(fake, capsys) -> None:  # noqa: F811 (the fixture)
    admin = fake(_features, update_features=R.UpdateFeaturesResponse())
    assert main(["features", "upgrade", "--release-version", "4.0", *BOOT]) == 0
    assert admin.called("update_features")[-1][0] == ({"metadata.version": 25},)
    assert main(["features", "upgrade", "--release-version", "4.0-IV1", *BOOT]) == 0
    assert admin.called("update_features")[-1][0] == ({"metadata.version": 23},)
    assert main(["features", "upgrade", "--release-version", "2.8", *BOOT]) == 2  # a usage error
    assert "unknown release version '2.8'" in capsys.readouterr().err
