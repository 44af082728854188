"""Share sessions (issue 27): epoch 0 opens (bounded), each request carries the next epoch, -1
closes, and a request adds and forgets partitions."""

from __future__ import annotations

import pytest

from kraftlog.broker.share import ShareSessionCache
from kraftlog.common import errors as kerr


def test_a_session_moves_epoch_by_epoch_and_closes() -> None:
    cache = ShareSessionCache(max_sessions=2)
    s = cache.begin("g", "m", 0)
    assert s is not None
    s.update([("t", "topic", 0), ("t", "topic", 1)], [])
    cache.used(s, 0)
    with pytest.raises(kerr.InvalidShareSessionEpochError):
        cache.begin("g", "m", 2)
    again = cache.begin("g", "m", 1)
    assert again is s
    cache.used(s, 1)
    s.update([], [("t", 0)])
    assert list(s.partitions.values()) == [("t", "topic", 1)]
    closed = cache.begin("g", "m", -1)
    assert closed is s and cache.get("g", "m") is None
    with pytest.raises(kerr.ShareSessionNotFoundError):
        cache.begin("g", "m", 3)


def test_the_cache_is_bounded_but_a_member_may_reopen_its_own() -> None:
    cache = ShareSessionCache(max_sessions=1)
    first = cache.begin("g", "a", 0)
    with pytest.raises(kerr.ShareSessionLimitReachedError):
        cache.begin("g", "b", 0)
    reopened = cache.begin("g", "a", 0)
    assert reopened is not first and len(cache) == 1
