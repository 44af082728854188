"""The share partition core (KIP-932): acquisition with locks driven by the caller's clock, the
delivery limit, the in-flight bound, acknowledgements (ACCEPT, RELEASE, REJECT, RENEW, GAP) with
Kafka's errors, max_records and record_limit, read_committed, the start offset, the state written
to the share coordinator and the partition rebuilt from it, and properties over random schedules."""

from __future__ import annotations

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AcquireMode,
    ArchivedRecord,
    ArchiveReason,
    AutoOffsetReset,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
    fetched_batches,
    initial_start_offset,
    parse_auto_offset_reset,
)
from kraftlog.common import errors as kerr
from kraftlog.common.records import ControlRecordType, build_batch, build_control_batch

LOCK_MS = 1_000
CONFIG = SharePartitionConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, max_record_locks=100)

ACCEPT, RELEASE, REJECT, RENEW, GAP = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
    AcknowledgeType.GAP,
)


def log(first: int, last: int, size: int = 1) -> list[FetchedBatch]:
    """Batches of ``size`` records covering first..last."""
    return [FetchedBatch(o, min(o + size - 1, last)) for o in range(first, last + 1, size)]


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


def fetch(sp: SharePartition, member: str, now_ms: int, max_records: int = 500, log_end: int = 10) -> list[int]:
    """What a ShareFetch would hand ``member``: a read from the next fetch offset to ``log_end``."""
    start = sp.next_fetch_offset()
    got = sp.acquire(member, log(start, log_end - 1), now_ms, max_records) if start < log_end else None
    return [o for r in (got.acquired if got else ()) for o in range(r.first_offset, r.last_offset + 1)]


# ================================================================================ acquire


def test_acquire_locks_records_for_one_member_and_counts_the_delivery() -> None:
    sp = SharePartition(CONFIG, 0)
    got = sp.acquire("a", log(0, 4), 100, 10)
    assert got.acquired == (AcquiredRecords(0, 4, 1),)
    assert sp.end_offset == 5 and sp.start_offset == 0
    assert sp.record(2) == (RecordState.ACQUIRED, 1, "a")
    assert sp.next_deadline() == 100 + LOCK_MS
    # nothing left to acquire for another member: every record is held
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", log(0, 4), 100, 10).acquired == ()


def test_batch_optimized_finishes_the_batch_record_limit_stops_at_the_count() -> None:
    sp = SharePartition(CONFIG, 0)
    got = sp.acquire("a", log(0, 9, size=4), 0, 3)
    assert got.acquired == (AcquiredRecords(0, 3, 1),)  # the whole first batch of four
    sp2 = SharePartition(CONFIG, 0)
    got2 = sp2.acquire("a", log(0, 9, size=4), 0, 3, AcquireMode.RECORD_LIMIT)
    assert got2.acquired == (AcquiredRecords(0, 2, 1),)
    assert sp2.end_offset == 3 and sp2.record(3) == (RecordState.AVAILABLE, 0, None)


def test_max_record_locks_bounds_the_window() -> None:
    sp = SharePartition(SharePartitionConfig(max_record_locks=4), 10)
    assert sp.acquire("a", log(10, 19), 0, 100).acquired == (AcquiredRecords(10, 13, 1),)
    assert not sp.can_acquire()
    assert sp.acquire("b", log(14, 19), 0, 100).acquired == ()
    sp.acknowledge("a", [ack(10, 11, ACCEPT)], 0)  # the start moves: room for two more
    assert sp.start_offset == 12 and sp.can_acquire()
    assert sp.acquire("b", log(14, 19), 0, 100).acquired == (AcquiredRecords(14, 15, 1),)


def test_gaps_between_batches_hold_no_record_and_do_not_block_the_start() -> None:
    sp = SharePartition(CONFIG, 0)
    got = sp.acquire("a", [FetchedBatch(0, 1), FetchedBatch(5, 6)], 0, 10)
    assert got.acquired == (AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1))
    sp.acknowledge("a", [ack(0, 1, ACCEPT), ack(2, 4, GAP)], 0)  # a consumer acks the gap as GAP
    assert sp.start_offset == 5
    sp.acknowledge("a", [ack(5, 6, ACCEPT)], 0)
    assert sp.start_offset == sp.end_offset == 7


# ========================================================================== acknowledge


def test_accept_advances_the_start_past_the_contiguous_prefix_only() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 5), 0, 10)
    out = sp.acknowledge("a", [ack(1, 2, ACCEPT)], 0)
    assert not out.start_offset_moved and sp.start_offset == 0
    assert sp.delivery_complete_count() == 2
    out = sp.acknowledge("a", [ack(0, 0, ACCEPT)], 0)
    assert out.start_offset_moved and sp.start_offset == 3
    assert sp.delivery_complete_count() == 0  # below the start: no longer in the window
    assert sp.record(1) == (RecordState.ACKNOWLEDGED, 0, None)  # below the start: done


def test_release_redelivers_with_a_higher_count_and_the_limit_archives_once() -> None:
    sp = SharePartition(CONFIG, 0)  # limit 3
    reported: list[ArchivedRecord] = []
    for delivery in (1, 2, 3):
        got = sp.acquire("a", log(0, 0), 0, 10)
        assert got.acquired == (AcquiredRecords(0, 0, delivery),)
        reported += sp.acknowledge("a", [ack(0, 0, RELEASE)], 0).archived
    assert reported == [ArchivedRecord(0, 3, ArchiveReason.DELIVERY_LIMIT)]
    assert sp.start_offset == 1  # archived: done with
    assert sp.acquire("a", log(0, 0), 0, 10).acquired == ()


def test_reject_archives_and_reports_each_record_once() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 2), 0, 10)
    out = sp.acknowledge("a", [ack(0, 2, ACCEPT, REJECT, REJECT)], 0)
    assert out.archived == (
        ArchivedRecord(1, 1, ArchiveReason.REJECTED),
        ArchivedRecord(2, 1, ArchiveReason.REJECTED),
    )
    assert sp.start_offset == 3
    with pytest.raises(kerr.InvalidRecordStateError):
        sp.acknowledge("a", [ack(1, 1, REJECT)], 0)  # no second report


def test_renew_extends_the_lock_without_a_new_delivery() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 1), 0, 10)
    sp.acknowledge("a", [ack(0, 0, RENEW)], 900)
    assert sp.expire_locks(LOCK_MS).changed  # offset 1's lock ends; offset 0's was renewed
    assert sp.record(0) == (RecordState.ACQUIRED, 1, "a")
    assert sp.record(1) == (RecordState.AVAILABLE, 1, None)
    assert sp.next_deadline() == 900 + LOCK_MS
    sp.expire_locks(900 + LOCK_MS)
    assert sp.record(0) == (RecordState.AVAILABLE, 1, None)


@pytest.mark.parametrize(
    ("member", "batches", "error"),
    [
        ("a", [ack(0, 0, ACCEPT)], kerr.InvalidRecordStateError),  # held by another member
        ("b", [ack(5, 5, ACCEPT)], kerr.InvalidRequestError),  # past the window
        ("b", [ack(2, 1, ACCEPT)], kerr.InvalidRequestError),  # an empty range
        ("b", [ack(0, 1, ACCEPT, ACCEPT, ACCEPT)], kerr.InvalidRequestError),  # types do not fit the range
        ("b", [ack(0, 0, 9)], kerr.InvalidRequestError),  # unknown type
        ("b", [ack(0, 0, ACCEPT), ack(0, 0, ACCEPT)], kerr.InvalidRequestError),  # twice in one call
    ],
)
def test_acknowledgement_errors_change_nothing(
    member: str, batches: list[AcknowledgementBatch], error: type[kerr.KafkaError]
) -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("b", log(0, 1), 0, 10)
    before = sp.state_batches(), sp.record(0), sp.record(1)
    with pytest.raises(error):
        sp.acknowledge(member, batches, 0)
    assert (sp.state_batches(), sp.record(0), sp.record(1)) == before


def test_a_range_the_start_moved_into_applies_from_the_start_one_below_it_fails() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 3), 0, 10)
    sp.expire_locks(LOCK_MS)
    sp.acquire("b", log(0, 1), LOCK_MS, 2, AcquireMode.RECORD_LIMIT)
    sp.acknowledge("b", [ack(0, 1, ACCEPT)], LOCK_MS)  # b took over 0-1 and accepted them
    assert sp.start_offset == 2
    sp.acquire("a", log(2, 3), LOCK_MS, 10)
    sp.acknowledge("a", [ack(0, 3, ACCEPT)], LOCK_MS)  # a's late range straddles the start
    assert sp.start_offset == 4
    with pytest.raises(kerr.InvalidRecordStateError):
        sp.acknowledge("a", [ack(0, 1, ACCEPT)], LOCK_MS)


def test_a_failing_range_fails_the_ranges_before_it_too() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 1), 0, 10)
    sp.acquire("b", log(2, 2), 0, 10)
    with pytest.raises(kerr.InvalidRecordStateError):
        sp.acknowledge("a", [ack(0, 1, ACCEPT), ack(2, 2, ACCEPT)], 0)
    assert sp.start_offset == 0 and sp.record(0)[0] is RecordState.ACQUIRED


# ================================================================================= time


def test_an_expired_lock_makes_the_record_available_to_another_member() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 1), 0, 10)
    assert not sp.expire_locks(LOCK_MS - 1).changed
    assert sp.expire_locks(LOCK_MS).changed
    got = sp.acquire("b", log(sp.next_fetch_offset(), 1), LOCK_MS, 10)
    assert got.acquired == (AcquiredRecords(0, 1, 2),)
    with pytest.raises(kerr.InvalidRecordStateError):
        sp.acknowledge("a", [ack(0, 0, ACCEPT)], LOCK_MS)  # a's lock is gone


def test_release_member_gives_back_what_it_held() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 1), 0, 10)
    sp.acquire("b", log(2, 3), 0, 10)
    sp.release_member("a")
    assert sp.acquired_by("a") == [] and sp.acquired_by("b") == [2, 3]
    assert sp.next_fetch_offset() == 0


# ====================================================================== read_committed


def test_read_committed_archives_aborted_records_and_delivers_the_marker() -> None:
    cfg = SharePartitionConfig(read_committed=True)
    sp = SharePartition(cfg, 0)
    batches = [
        FetchedBatch(0, 1, producer_id=7, is_transactional=True),
        FetchedBatch(2, 2, producer_id=8, is_transactional=True),
        FetchedBatch(3, 3, producer_id=7, is_transactional=True, is_control=True),  # 7's abort marker
        FetchedBatch(4, 4, producer_id=7, is_transactional=True),  # 7's next transaction: committed
        FetchedBatch(5, 5, producer_id=8, is_transactional=True, is_control=True),
    ]
    got = sp.acquire("a", batches, 0, 100, aborted=[(7, 0)])
    assert got.archived_aborted == 2
    assert got.acquired == (AcquiredRecords(2, 5, 1),)
    assert sp.start_offset == 2  # the aborted prefix is done with
    # read_uncommitted delivers everything
    sp2 = SharePartition(SharePartitionConfig(), 0)
    assert sp2.acquire("a", batches, 0, 100, aborted=[(7, 0)]).acquired == (AcquiredRecords(0, 5, 1),)


# ============================================================================ state


def test_state_batches_join_runs_and_write_acquired_as_available() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 5), 0, 10)
    sp.acknowledge("a", [ack(1, 2, ACCEPT), ack(3, 3, REJECT)], 0)
    assert sp.state_batches() == [
        StateBatch(0, 0, 0, 1),
        StateBatch(1, 2, 2, 1),
        StateBatch(3, 3, 4, 1),
        StateBatch(4, 5, 0, 1),
    ]


def test_rebuilt_partition_redelivers_what_the_old_leader_had_out() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 3), 0, 10)
    sp.acknowledge("a", [ack(0, 0, ACCEPT)], 0)
    again = SharePartition.from_state(CONFIG, sp.start_offset, sp.state_batches())
    assert again.start_offset == 1 and again.end_offset == 4
    assert again.acquire("b", log(again.next_fetch_offset(), 5), 0, 10).acquired == (
        AcquiredRecords(1, 3, 2),
        AcquiredRecords(4, 5, 1),
    )


def test_rebuild_drops_batches_below_the_start() -> None:
    sp = SharePartition.from_state(CONFIG, 5, [StateBatch(0, 6, 0, 2), StateBatch(7, 7, 2, 1)])
    assert sp.start_offset == 5 and sp.end_offset == 8
    assert sp.state_batches() == [StateBatch(5, 6, 0, 2), StateBatch(7, 7, 2, 1)]


def test_log_start_moving_past_the_start_moves_it() -> None:
    sp = SharePartition(CONFIG, 0)
    sp.acquire("a", log(0, 3), 0, 10)
    assert sp.move_log_start(2)
    assert sp.start_offset == 2 and sp.acquired_by("a") == [2, 3]
    assert not sp.move_log_start(1)


# =================================================================== auto offset reset


def test_auto_offset_reset_values() -> None:
    assert parse_auto_offset_reset("latest") == AutoOffsetReset("latest")
    assert parse_auto_offset_reset("EARLIEST") == AutoOffsetReset("earliest")
    assert parse_auto_offset_reset("by_duration:P1DT2H") == AutoOffsetReset("by_duration", 26 * 3_600_000)
    assert parse_auto_offset_reset("by_duration:PT1.5S") == AutoOffsetReset("by_duration", 1_500)
    for bad in ("none", "by_duration:", "by_duration:P", "by_duration:-PT1S", "by_duration:1h"):
        with pytest.raises(ValueError, match="share.auto.offset.reset"):
            parse_auto_offset_reset(bad)


def test_initial_start_offset() -> None:
    def at(ts: int) -> int | None:
        return 40 if ts <= 9_000 else None

    assert initial_start_offset(AutoOffsetReset("earliest"), 10, 50, at, 10_000) == 10
    assert initial_start_offset(AutoOffsetReset("latest"), 10, 50, at, 10_000) == 50
    assert initial_start_offset(AutoOffsetReset("by_duration", 1_000), 10, 50, at, 10_000) == 40
    assert initial_start_offset(AutoOffsetReset("by_duration", 500), 10, 50, at, 10_000) == 50  # none that late


# ======================================================================= properties

MEMBERS = ("m0", "m1", "m2")
step = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 6), st.booleans(), st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from([1, 2, 3, 4]), st.integers(0, 3)),
    st.tuples(st.just("tick"), st.integers(0, 2 * LOCK_MS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(step, max_size=60), st.integers(1, 5), st.integers(3, 12))
def test_random_schedules_keep_the_invariants(steps: list[tuple], limit: int, locks: int) -> None:
    """Whatever members do and however time moves: no offset is handed to a member while another
    (or the same) member may still believe it holds it (its lock has not ended and it did not
    acknowledge it), delivery counts never pass the limit, nothing is reported archived twice,
    the window stays within its bound, and the state written rebuilds an equal partition."""
    cfg = SharePartitionConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=limit, max_record_locks=locks)
    sp = SharePartition(cfg, 0)
    now = 0
    beliefs: dict[int, tuple[str, int]] = {}  # offset -> (member, lock end) as the members see it
    reported: list[int] = []
    log_end = 20
    for s in steps:
        if s[0] == "fetch":
            _kind, member, n, strict, from_start = s
            mode = AcquireMode.RECORD_LIMIT if strict else AcquireMode.BATCH_OPTIMIZED
            # a read may begin anywhere at or before the window's end (its batches overlap held records)
            start = sp.start_offset if from_start else sp.next_fetch_offset()
            got = sp.acquire(member, log(start, log_end - 1, size=2), now, n, mode) if start < log_end else None
            for r in got.acquired if got else ():
                assert r.delivery_count <= limit
                for o in range(r.first_offset, r.last_offset + 1):
                    holder = beliefs.get(o)
                    assert holder is None or holder[1] <= now, f"offset {o} handed to {member} while {holder} holds it"
                    beliefs[o] = (member, now + LOCK_MS)
            if got and strict:
                assert got.count <= n
        elif s[0] == "ack":
            _kind, member, kind, k = s
            mine = sp.acquired_by(member)[:k]
            if mine:
                out = sp.acknowledge(member, [ack(o, o, kind) for o in mine], now)
                reported += [a.offset for a in out.archived]
                for o in mine:
                    if kind == RENEW:
                        beliefs[o] = (member, now + LOCK_MS)
                    else:
                        beliefs.pop(o, None)
        elif s[0] == "tick":
            now += s[1]
            reported += [a.offset for a in sp.expire_locks(now).archived]
        else:
            reported += [a.offset for a in sp.release_member(s[1]).archived]
            beliefs = {o: b for o, b in beliefs.items() if b[0] != s[1]}
        holders: dict[int, str] = {}
        for m in MEMBERS:
            for o in sp.acquired_by(m):
                assert o not in holders
                holders[o] = m
        for o in range(sp.start_offset, sp.end_offset):
            assert sp.record(o)[1] <= limit
        assert sp.in_flight() <= locks
        assert len(reported) == len(set(reported))
        rebuilt = SharePartition.from_state(cfg, sp.start_offset, sp.state_batches())
        assert rebuilt.state_batches() == sp.state_batches()
        assert (rebuilt.start_offset, rebuilt.end_offset) == (sp.start_offset, sp.end_offset)


def test_fetched_batches_reads_the_headers_of_a_read_and_feeds_read_committed() -> None:
    """The headers `acquire` needs come from a read's bytes: an aborted transaction's batch is
    archived, its marker and the plain batch are delivered, a torn last batch is left out."""
    aborted = build_batch(
        [(None, b"x"), (None, b"y")],
        timestamp_ms=1,
        base_offset=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    marker = build_control_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1, base_offset=2
    )
    plain = build_batch([(None, b"z")], timestamp_ms=1, base_offset=3)
    read = aborted + marker + plain + plain[:20]
    batches = fetched_batches(read)
    assert batches == [
        FetchedBatch(0, 1, 7, True, False),
        FetchedBatch(2, 2, 7, True, True),
        FetchedBatch(3, 3, -1, False, False),
    ]
    sp = SharePartition(SharePartitionConfig(read_committed=True), 0)
    got = sp.acquire("a", batches, 0, 10, aborted=[(7, 0)])
    assert got.acquired == (AcquiredRecords(2, 3, 1),) and got.archived_aborted == 2
