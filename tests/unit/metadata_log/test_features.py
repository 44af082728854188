"""The feature levels this build supports and the dependencies between them (issue 26)."""

from __future__ import annotations

import pytest

from kraftlog.metadata_log import (
    ELR_FEATURE,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    UnsupportedFeatureLevelError,
    check_supported,
    feature_dependency_problem,
)


def test_supported_levels_and_off_pass() -> None:
    check_supported({METADATA_VERSION: 25, ELR_FEATURE: 1, "group.version": 0})
    check_supported({"some.future.feature": 0})  # off is always supported


@pytest.mark.parametrize(
    ("levels", "named"),
    [
        ({METADATA_VERSION: 30}, "metadata.version at level 30"),  # 4.3-IV0: past 4.2-IV1
        ({METADATA_VERSION: 3}, "metadata.version at level 3"),  # below the range is as bad as above
        ({"kraft.version": 1}, "kraft.version at level 1"),
        ({"some.future.feature": 2}, "does not know"),
    ],
)
def test_an_unsupported_level_is_named(levels: dict[str, int], named: str) -> None:
    with pytest.raises(UnsupportedFeatureLevelError, match=named):
        check_supported(levels)


def test_dependencies() -> None:
    assert feature_dependency_problem({METADATA_VERSION: 25, ELR_FEATURE: 1}) is None
    problem = feature_dependency_problem({METADATA_VERSION: 22, ELR_FEATURE: 1})
    assert problem is not None and "requires metadata.version level 23" in problem
    # a log that never finalized metadata.version runs at this build's newest level
    assert feature_dependency_problem({ELR_FEATURE: 1}) is None
    assert SUPPORTED_FEATURES[METADATA_VERSION].max_version >= 23
