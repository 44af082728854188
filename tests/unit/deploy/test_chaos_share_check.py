"""The share workload's checker (issue 27): lost (acknowledged produce never accepted with the
broker's agreement), double_acquired (a delivery received inside another's sure hold, within its
own lock), over_delivery_limit and redeliveries, on hand-made consumer logs."""

from __future__ import annotations

from kraftlog.deploy.chaos import WORKLOADS, Ack, Delivery, check_share
from kraftlog.deploy.chaos._share_check import RELEASE, ack_outcome

LOCK_MS = 5000


def acks(*keys: tuple[int, int]) -> list[Ack]:
    return [Ack(p, i, o, 0.0) for i, (p, o) in enumerate(keys)]


def test_a_clean_log_passes_and_counts_the_redelivery_of_a_release() -> None:
    log = [
        Delivery("a", 0, 0, 1, 1.0, 1.1, RELEASE, 1.2, True),
        Delivery("b", 0, 0, 2, 1.3, 1.4, "accept", 1.5, True),  # after a's release was applied
        Delivery("a", 0, 1, 1, 1.0, 1.1, "accept", 1.2, True),
    ]
    r = check_share(acks((0, 0), (0, 1)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.ok and (r.lost, r.double_acquired, r.over_delivery_limit, r.redeliveries) == (0, 0, 0, 1)
    assert r.accepted == 2 and r.consumers_with_records == 2 and r.max_delivery_count == 2
    assert "share" in WORKLOADS


def test_an_acknowledged_record_accepted_by_nobody_is_lost() -> None:
    log = [
        Delivery("a", 0, 0, 1, 1.0, 1.1, "accept", 1.2, False),  # the broker refused the accept
        Delivery("a", 0, 1, 1, 1.0, 1.1, "accept", 1.2, None),  # never known
        Delivery("a", 0, 2, 1, 1.0, 1.1, RELEASE, 1.2, True),
    ]
    r = check_share(acks((0, 0), (0, 1), (0, 2), (1, 0)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.lost == 3 and not r.ok
    assert r.examples["lost"] == [[0, 0], [0, 2], [1, 0]]
    # each shown with what happened to it (the share soak of seed 20262806 lost 14 and said no more)
    assert r.examples["lost_deliveries"] == [
        [0, 0, [["a", 1, "accept", False, None]]],
        [0, 2, [["a", 1, RELEASE, True, None]]],
        [1, 0, []],
    ]
    refused = Delivery("a", 0, 0, 1, 1.0, 1.1, "accept", 1.2, False, "INVALID_RECORD_STATE")
    r = check_share(acks((0, 0)), [refused], lock_ms=LOCK_MS, delivery_limit=5)
    assert r.examples["lost_deliveries"] == [[0, 0, [["a", 1, "accept", False, "INVALID_RECORD_STATE"]]]]


def test_an_accept_that_failed_in_transit_is_in_doubt_not_lost() -> None:
    """Seed 20262806's 45 "lost" records: each had one delivery, an ACCEPT answered with
    REQUEST_TIMED_OUT, NETWORK_EXCEPTION or librdkafka's _TRANSPORT; the leader may well have
    applied it (the next leader's start offset was past the record). Only an error the leader
    gives before applying anything makes the ACCEPT a refusal."""
    log = [
        Delivery("a", 0, 1, 1, 1.0, 1.1, "accept", 1.2, False, "REQUEST_TIMED_OUT"),
        Delivery("b", 0, 2, 1, 1.0, 1.1, "accept", 1.2, False, "_TRANSPORT"),
        Delivery("a", 0, 3, 1, 1.0, 1.1, "accept", 1.2, False, "NOT_LEADER_OR_FOLLOWER"),
    ]
    r = check_share(acks((0, 1), (0, 2), (0, 3)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert (r.lost, r.accept_in_doubt) == (1, 2) and r.examples["lost"] == [[0, 3]]
    assert ack_outcome(False, "NETWORK_EXCEPTION") is None and ack_outcome(False, None) is False
    assert ack_outcome(True, None) is True and ack_outcome(False, "FENCED_LEADER_EPOCH") is False


def test_an_accept_of_unknown_outcome_is_in_doubt_not_lost() -> None:
    """Seed 27: the leader persisted an ACCEPT and was killed before answering it; nobody was given
    the record again, rightly. Lost only if no ACCEPT of it may have been applied."""
    log = [
        Delivery("a", 2, 67, 1, 1.0, 1.1, "accept", 1.2, None),
        Delivery("a", 2, 68, 1, 1.0, 1.1, "accept", 1.2, None),
        Delivery("b", 2, 68, 2, 7.0, 7.1, "accept", 7.2, True),  # redelivered after all: accepted
    ]
    r = check_share(acks((2, 67), (2, 68)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.ok and r.lost == 0 and r.accepted == 1 and r.accept_in_doubt == 1
    assert r.to_json()["accept_in_doubt"] == 1


def test_a_record_received_inside_another_consumers_applied_hold_is_double_acquired() -> None:
    log = [
        Delivery("a", 1, 7, 1, 10.0, 10.1, "accept", 12.0, True),  # a surely held it 10.1 .. 12.0
        Delivery("b", 1, 7, 1, 10.5, 11.0, "accept", 11.2, False),  # b got it at 11.0, within its own lock
    ]
    r = check_share(acks((1, 7)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.double_acquired == 1 and not r.ok
    assert r.examples["double_acquired"] == [[1, 7, "a", "b", 0.9]]


def test_holds_the_broker_may_have_ended_are_no_double_acquisition() -> None:
    log = [
        # a's accept failed: its lock may have expired or moved with the leader; b's delivery is fair
        Delivery("a", 0, 3, 1, 0.0, 0.1, "accept", 9.0, False),
        Delivery("b", 0, 3, 2, 6.0, 6.5, "accept", 6.6, True),
        # c's accept was applied, but d's receipt came past d's own possible lock: d cannot have held it
        Delivery("c", 0, 4, 1, 0.0, 0.1, "accept", 20.0, True),
        Delivery("d", 0, 4, 1, 0.0, 10.0, "accept", 10.1, False),
        # e received before c's hold began: not inside it
        Delivery("e", 0, 4, 1, 0.0, 0.05, "accept", 0.06, False),
    ]
    r = check_share(acks((0, 3), (0, 4)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.double_acquired == 0 and r.lost == 0


def test_a_delivery_count_past_the_limit_is_counted() -> None:
    log = [Delivery("a", 0, 0, n, 1.0 * n, 1.0 * n + 0.1, RELEASE, 1.0 * n + 0.2, True) for n in range(1, 7)]
    log.append(Delivery("b", 0, 0, 7, 9.0, 9.1, "accept", 9.2, True))
    r = check_share(acks((0, 0)), log, lock_ms=LOCK_MS, delivery_limit=5)
    assert r.over_delivery_limit == 2 and r.redeliveries == 6 and r.max_delivery_count == 7 and not r.ok
    assert r.to_json()["over_delivery_limit"] == 2
