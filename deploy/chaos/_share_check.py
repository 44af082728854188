"""The share workload's checker (``kraftlog chaos run --workload share``, issue 27): from the produce
workload's acknowledgements and every share consumer's log of what it was given and how it
acknowledged it, what KIP-932 promises. Pure: no clock, no I/O; times are one process's
``time.monotonic()`` seconds.

Each `Delivery` is one record handed to one consumer: ``lower_s`` is a time before the broker
acquired it for that consumer (the start of the poll that returned it, or for a client that may
fetch ahead, of the poll before), ``received_s`` when the poll returned it, ``ack_sent_s`` when its
acknowledgement went out, ``ack_ok`` whether the broker applied it (None: never known) and
``ack_error`` the error it answered instead. A lost record's deliveries are shown with it
(``lost_deliveries`` examples).

- ``lost``: an acknowledged produce no consumer had ACCEPTED with the broker's agreement, nor sent an
  ACCEPT whose outcome stayed unknown. Such an ACCEPT is indeterminate, as Jepsen's ``:info``
  operations: the leader may have applied and persisted it and died before answering (seed 27: the
  share-partition start offset moved past the record in the state 101 wrote just before its kill,
  and rightly nobody was given it again). An ACCEPT answered with an error is refused only when
  the error says the broker turned it down before applying it (`REFUSED_BEFORE_APPLIED`); any
  other error (a timeout, a broken connection: REQUEST_TIMED_OUT, NETWORK_EXCEPTION, librdkafka's
  _TRANSPORT, as seed 20262806's 45 "lost" records all were) leaves it unknown too.
  ``accept_in_doubt`` counts those records (information);
- ``double_acquired``: a record two deliveries held at once. A holds it for sure from ``received_s``
  to ``ack_sent_s`` when its acknowledgement was applied (only the holder of the lock can
  acknowledge; a lock lost in between would have ended A's hold for good). B held it at
  ``received_s`` when that is within the lock duration of ``lower_s`` (its lock cannot have ended
  yet). So B received inside A's sure hold, on those terms, is two holders at once. Deliveries
  whose acknowledgement failed or is unknown are only ever B: the broker may have taken their
  locks away (lock expiry, a leader change), which is no fault;
- ``over_delivery_limit``: a delivery whose count exceeds ``group.share.delivery.count.limit``;
- ``redeliveries`` (information): deliveries with a count above 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlog.deploy.chaos._checker import Ack

__all__ = ["ACCEPT", "RELEASE", "REFUSED_BEFORE_APPLIED", "Delivery", "ShareReport", "ack_outcome", "check_share"]

ACCEPT = "accept"
RELEASE = "release"
_EXAMPLES = 5

#: acknowledgement errors a share-partition leader answers only before it applied anything: the
#: record is not acquired by the member (or not at all), the request or session is wrong, the
#: broker does not lead the partition, or the share coordinator refused the state write by epoch
REFUSED_BEFORE_APPLIED = frozenset(
    {
        "INVALID_RECORD_STATE",
        "INVALID_REQUEST",
        "NOT_LEADER_OR_FOLLOWER",
        "FENCED_LEADER_EPOCH",
        "FENCED_STATE_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_ID",
        "SHARE_SESSION_NOT_FOUND",
        "INVALID_SHARE_SESSION_EPOCH",
        "GROUP_AUTHORIZATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
    }
)


@dataclass(frozen=True, slots=True)
class Delivery:
    consumer: str
    partition: int
    offset: int
    delivery_count: int
    lower_s: float
    received_s: float
    ack: str = ACCEPT  # accept or release
    ack_sent_s: float | None = None
    ack_ok: bool | None = None
    ack_error: str | None = None  # the Kafka error name the broker answered, when ack_ok is False


@dataclass
class ShareReport:
    acknowledged: int = 0
    deliveries: int = 0
    accepted: int = 0
    accept_in_doubt: int = 0
    lost: int = 0
    double_acquired: int = 0
    over_delivery_limit: int = 0
    redeliveries: int = 0
    max_delivery_count: int = 0
    consumers_with_records: int = 0
    examples: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.double_acquired == 0 and self.over_delivery_limit == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "share_acknowledged": self.acknowledged,
            "share_deliveries": self.deliveries,
            "share_accepted": self.accepted,
            "accept_in_doubt": self.accept_in_doubt,
            "lost": self.lost,
            "double_acquired": self.double_acquired,
            "over_delivery_limit": self.over_delivery_limit,
            "redeliveries": self.redeliveries,
            "max_delivery_count": self.max_delivery_count,
            "share_consumers_with_records": self.consumers_with_records,
        }


def ack_outcome(ack_ok: bool | None, ack_error: str | None) -> bool | None:
    """Whether an acknowledgement was applied: True, False (refused before it was applied: no
    error name given, or one of `REFUSED_BEFORE_APPLIED`) or None (unknown)."""
    if ack_ok is False and ack_error is not None and ack_error not in REFUSED_BEFORE_APPLIED:
        return None
    return ack_ok


def _example(report: ShareReport, kind: str, item: Any) -> None:
    shown = report.examples.setdefault(kind, [])
    if len(shown) < _EXAMPLES:
        shown.append(item)


def check_share(
    acks: Iterable[Ack], deliveries: Sequence[Delivery], *, lock_ms: int, delivery_limit: int
) -> ShareReport:
    """The report of the module docstring; ``lock_ms`` is the group's acquisition lock duration."""
    report = ShareReport(deliveries=len(deliveries))
    by_record: dict[tuple[int, int], list[Delivery]] = {}
    for d in deliveries:
        by_record.setdefault((d.partition, d.offset), []).append(d)
        report.max_delivery_count = max(report.max_delivery_count, d.delivery_count)
        if d.delivery_count > 1:
            report.redeliveries += 1
        if d.delivery_count > delivery_limit:
            report.over_delivery_limit += 1
            _example(report, "over_delivery_limit", [d.consumer, d.partition, d.offset, d.delivery_count])
    report.consumers_with_records = len({d.consumer for d in deliveries})
    accepted = {k for k, ds in by_record.items() if any(d.ack == ACCEPT and d.ack_ok for d in ds)}
    report.accepted = len(accepted)
    in_doubt = {
        k
        for k, ds in by_record.items()
        if any(d.ack == ACCEPT and ack_outcome(d.ack_ok, d.ack_error) is None for d in ds)
    } - accepted
    report.accept_in_doubt = len(in_doubt)
    wanted = {(a.partition, a.offset) for a in acks}
    report.acknowledged = len(wanted)
    for key in sorted(wanted - accepted - in_doubt):
        report.lost += 1
        _example(report, "lost", list(key))
        # what happened to it, for the reader of a failed run: each delivery's consumer, count,
        # acknowledgement and the broker's answer
        shown = [[d.consumer, d.delivery_count, d.ack, d.ack_ok, d.ack_error] for d in by_record.get(key, [])]
        _example(report, "lost_deliveries", [*key, shown])
    lock_s = lock_ms / 1000.0
    for key, ds in by_record.items():
        holders = [d for d in ds if d.ack_ok and d.ack_sent_s is not None]
        for a in holders:
            assert a.ack_sent_s is not None
            for b in ds:
                if b is a:
                    continue
                if a.received_s < b.received_s < a.ack_sent_s and b.received_s < b.lower_s + lock_s:
                    report.double_acquired += 1
                    _example(
                        report,
                        "double_acquired",
                        [key[0], key[1], a.consumer, b.consumer, round(b.received_s - a.received_s, 3)],
                    )
    return report
