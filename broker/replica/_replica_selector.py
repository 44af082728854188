"""Which replica a consumer should fetch from (KIP-392): Kafka's ``ReplicaSelector`` plug-in point,
with the one selector Kafka ships, ``RackAwareReplicaSelector``.

The leader asks the selector on every consumer Fetch v11+ (`find_preferred_read_replica`); when it
names a follower, the leader answers that partition with ``preferred_read_replica`` and no records,
and the client moves its fetches there. Followers serve such fetches up to their own high
watermark (`Partition.fetch_records`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

__all__ = [
    "RACK_AWARE_REPLICA_SELECTOR",
    "RackAwareReplicaSelector",
    "ReplicaSelector",
    "ReplicaView",
    "find_preferred_read_replica",
    "replica_selector",
]

#: ``replica.selector.class`` naming the rack-aware selector (Kafka's class name).
RACK_AWARE_REPLICA_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica the selector may pick: an in-sync replica that has the fetch offset, as the
    leader sees it. ``rack`` is its broker's ``broker.rack`` (None: unset)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    def rank(self) -> tuple[int, int, int]:
        """Kafka's ``ReplicaView.comparator``: the larger LEO, then the more recently caught up,
        then the larger broker id, is the better replica."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, self.broker_id)


class ReplicaSelector(Protocol):
    """Picks the replica a consumer in ``client_rack`` should read from (the leader, or a follower)."""

    def select(self, client_rack: str, replicas: Iterable[ReplicaView], leader: ReplicaView) -> ReplicaView: ...


class RackAwareReplicaSelector:
    """Kafka's ``RackAwareReplicaSelector``: a replica in the client's rack; the leader when the
    client names no rack, when no replica is in its rack, or when the leader is in it; otherwise
    the most caught-up replica of that rack (`ReplicaView.rank`)."""

    def select(self, client_rack: str, replicas: Iterable[ReplicaView], leader: ReplicaView) -> ReplicaView:
        if not client_rack:
            return leader
        same_rack = [r for r in replicas if r.rack == client_rack]
        if not same_rack or any(r.broker_id == leader.broker_id for r in same_rack):
            return leader
        return max(same_rack, key=ReplicaView.rank)


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (every consumer reads from
    the leader). The config schema refuses any other class before a broker starts."""
    if not class_name:
        return None
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector()
    raise ValueError(f"unknown replica.selector.class {class_name!r}")


def find_preferred_read_replica(
    selector: ReplicaSelector,
    *,
    client_rack: str,
    leader_id: int,
    leader_log_end_offset: int,
    candidates: Iterable[tuple[int, int, int]],
    rack_of: Callable[[int], str | None],
    has_endpoint: Callable[[int], bool],
) -> int | None:
    """The follower a consumer should fetch from, or None to read from the leader (Kafka's
    ``ReplicaManager.findPreferredReadReplica``).

    ``candidates``: ``(broker id, LEO, ms since last caught up)`` of the followers that are in the
    ISR and hold the fetch offset (their LEO is not below it, their log start offset not above it).
    A replica whose broker has no endpoint for clients (not registered, or fenced) is offered to the
    selector without a rack and never named: as in Kafka, a selection of the leader, or of a replica
    without an endpoint, answers None.
    """

    def view(broker_id: int, log_end_offset: int, since_caught_up_ms: int) -> ReplicaView:
        rack = rack_of(broker_id) if has_endpoint(broker_id) else None
        return ReplicaView(broker_id, rack, log_end_offset, since_caught_up_ms)

    leader = view(leader_id, leader_log_end_offset, 0)
    views = [leader] + [view(*c) for c in candidates if c[0] != leader_id]
    chosen = selector.select(client_rack, views, leader)
    if chosen.broker_id == leader_id or not has_endpoint(chosen.broker_id):
        return None
    return chosen.broker_id
