"""Incremental fetch sessions (KIP-227, issue 16): a full fetch opens a session, an incremental one
names only changed partitions and is answered only with news, epochs and ids are checked, and a
full cache makes room only from sessions idle long enough."""

from __future__ import annotations

import random

import pytest

from kraftlog.broker.kafka._kafka_fetch_sessions import FetchSessionCache, SessionPartition
from kraftlog.common import errors as kerr

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def sp(offset: int) -> SessionPartition:
    return SessionPartition(fetch_offset=offset, partition_max_bytes=1 << 20)


def answer(fetch, tp, *, data=False, error=False, hw=10, lso=10, start=0) -> bool:
    return fetch.include(tp, has_data=data, has_error=error, hw=hw, lso=lso, log_start=start)


def test_full_then_incremental_fetches_answer_only_news() -> None:
    cache = FetchSessionCache(10, rng=random.Random(1))
    full = cache.resolve(0, 0, [(A0, sp(0)), (A1, sp(0)), (B0, sp(5))], [], now_ms=0)
    assert full.full and full.session_id > 0 and list(full.partitions) == [A0, A1, B0]
    assert all(answer(full, tp) for tp in (A0, A1, B0))  # a full answer has every partition

    inc = cache.resolve(full.session_id, 1, [(A0, sp(7))], [], now_ms=1)
    assert not inc.full and inc.session_id == full.session_id
    assert inc.partitions[A0].fetch_offset == 7 and inc.partitions[B0].fetch_offset == 5  # the rest remembered
    assert answer(inc, A0, data=True)
    assert not answer(inc, A1)  # nothing new
    assert answer(inc, B0, hw=11, lso=11)  # the high watermark moved
    assert answer(inc, A1, error=True)

    nxt = cache.resolve(full.session_id, 2, [], [B0], now_ms=2)
    assert list(nxt.partitions) == [A1, A0]  # B0 forgotten; A0 went to the back after its records
    assert not answer(nxt, A0)
    assert answer(nxt, A1)  # answered again after its error


def test_bad_session_ids_and_epochs_are_refused() -> None:
    cache = FetchSessionCache(10, rng=random.Random(2))
    full = cache.resolve(0, 0, [(A0, sp(0))], [], now_ms=0)
    with pytest.raises(kerr.InvalidFetchSessionEpochError):
        cache.resolve(full.session_id, 5, [], [], now_ms=1)
    with pytest.raises(kerr.FetchSessionIdNotFoundError):
        cache.resolve(full.session_id + 1, 1, [], [], now_ms=1)
    # epoch -1 closes the session and fetches without one
    final = cache.resolve(full.session_id, -1, [(A0, sp(3))], [], now_ms=2)
    assert final.session_id == 0 and final.full and len(cache) == 0
    with pytest.raises(kerr.FetchSessionIdNotFoundError):
        cache.resolve(full.session_id, 1, [], [], now_ms=3)


def test_a_full_cache_evicts_only_an_idle_session() -> None:
    cache = FetchSessionCache(1, rng=random.Random(3), eviction_idle_ms=1000)
    first = cache.resolve(0, 0, [(A0, sp(0))], [], now_ms=0)
    busy = cache.resolve(0, 0, [(B0, sp(0))], [], now_ms=500)
    assert busy.session_id == 0 and busy.full  # no room: answered without a session
    later = cache.resolve(0, 0, [(B0, sp(0))], [], now_ms=1500)
    assert later.session_id > 0 and later.session_id != first.session_id
    with pytest.raises(kerr.FetchSessionIdNotFoundError):
        cache.resolve(first.session_id, 1, [], [], now_ms=1600)
    assert FetchSessionCache(0, rng=random.Random(4)).resolve(0, 0, [(A0, sp(0))], [], now_ms=0).session_id == 0


def test_partitions_with_records_move_to_the_back_and_errors_are_answered_again() -> None:
    """Kafka rotates a session's partitions so that a fetch's byte budget reaches all of them; a
    partition that failed is remembered as unknown, so its recovery is news."""
    cache = FetchSessionCache(10, rng=random.Random(5))
    full = cache.resolve(0, 0, [(A0, sp(0)), (A1, sp(0)), (B0, sp(0))], [], now_ms=0)
    for tp in (A0, A1, B0):
        answer(full, tp)
    inc = cache.resolve(full.session_id, 1, [], [], now_ms=1)
    assert answer(inc, A0, data=True)
    assert list(inc.partitions) == [A1, B0, A0]
    assert answer(inc, A1, error=True)
    again = cache.resolve(full.session_id, 2, [], [], now_ms=2)
    assert answer(again, A1)  # recovered with the same offsets as before the error: still news
    assert not answer(again, B0)


def test_a_throttled_incremental_fetch_leaves_the_session_as_if_unanswered() -> None:
    """KIP-219 (review, issue 24): the fetch is answered empty, so what the session remembers as
    answered is put back and the partitions come again next time; the epoch still advances."""
    cache = FetchSessionCache(10, rng=random.Random(1))
    full = cache.resolve(0, 0, [(A0, sp(0)), (A1, sp(0))], [], now_ms=0)
    assert all(answer(full, tp) for tp in (A0, A1))
    inc = cache.resolve(full.session_id, 1, [(A0, sp(3))], [], now_ms=1)
    assert answer(inc, A0, data=True, hw=20, lso=20)
    assert answer(inc, A1, hw=21, lso=21)
    assert list(inc.partitions) == [A1, A0]
    assert cache.throttled(inc) == full.session_id
    nxt = cache.resolve(full.session_id, 2, [], [], now_ms=2)
    assert list(nxt.partitions) == [A0, A1]  # the order before the throttled answer
    assert nxt.partitions[A0].fetch_offset == 3  # the request's position stays, as in Kafka
    assert answer(nxt, A1, hw=21, lso=21)  # the moved high watermark is news again


def test_a_throttled_full_fetch_opens_no_session() -> None:
    cache = FetchSessionCache(10, rng=random.Random(1))
    full = cache.resolve(0, 0, [(A0, sp(0))], [], now_ms=0)
    assert answer(full, A0, data=True)
    assert cache.throttled(full) == 0 and len(cache) == 0
    with pytest.raises(kerr.FetchSessionIdNotFoundError):
        cache.resolve(full.session_id, 1, [], [], now_ms=1)
    sessionless = cache.resolve(0, -1, [(A0, sp(0))], [], now_ms=2)
    assert cache.throttled(sessionless) == 0


def test_a_fetch_without_a_journal_copies_nothing_and_a_throttle_then_closes_its_session() -> None:
    """Without any client quota a fetch keeps no journal (issue 24, broker_bench: no quota, no
    cost); should a quota set meanwhile throttle it anyway, the session cannot be put back, so it
    is closed and the answer carries session id 0 (the client's next fetch is a full one)."""
    cache = FetchSessionCache(10, rng=random.Random(1))
    full = cache.resolve(0, 0, [(A0, sp(0)), (A1, sp(0))], [], now_ms=0)
    assert all(answer(full, tp) for tp in (A0, A1))
    inc = cache.resolve(full.session_id, 1, [], [], now_ms=1)
    inc.journal = False
    assert answer(inc, A0, data=True, hw=20, lso=20)
    assert inc.answered_before == [] and inc.order_before is None
    assert list(inc.partitions) == [A1, A0]  # the rotation itself still happens
    assert cache.throttled(inc) == 0 and len(cache) == 0
    with pytest.raises(kerr.FetchSessionIdNotFoundError):
        cache.resolve(full.session_id, 2, [], [], now_ms=2)
