"""Replica placement: which brokers hold the replicas of each new partition.

This is Kafka's classic algorithm (``AdminUtils.assignReplicasToBrokers``, the one the seed notes
walk through in §2.3.5.3), chosen over KRaft's StripedReplicaPlacer because it is the behaviour the
seeds document and operators can predict by hand:

* Rack-unaware: brokers sorted by id; partition ``p``'s first replica (its preferred leader) is
  ``brokers[(p + start_index) % n]``, so leaders go round-robin; follower ``j`` sits
  ``1 + (shift + j) % (n - 1)`` places after it, and ``shift`` grows by one every ``n`` partitions,
  so the followers of a broker's leaders are not always the same brokers.
* Rack-aware (every broker declares a rack): the same walk over a list that alternates racks, and a
  candidate is skipped while its rack (or the broker itself) already holds a replica and some rack
  (or broker) holds none. Replicas of a partition thus land on distinct racks whenever
  ``replication_factor <= racks``.

The functions are pure. The only randomness, the start index and shift, is drawn from the ``rng``
the caller injects (the active controller), and the resulting assignment is written into
PartitionRecords, so replay never re-runs placement (docs/architecture.md §1).
"""

from __future__ import annotations

import enum
import random
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kraftlog.common import errors as kerr

if TYPE_CHECKING:
    from kraftlog.metadata_log.image import BrokerRegistration, ClusterImage

__all__ = [
    "PlacementError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "RackAwareMode",
    "BrokerRacks",
    "placement_brokers",
    "rack_alternated_broker_list",
    "assign_replicas_rack_unaware",
    "assign_replicas_rack_aware",
    "assign_replicas",
    "expand_assignment",
]

BrokerRacks = Mapping[int, str | None]
"""Broker id -> rack (None when the broker declares none): the input every placement needs."""

BrokersLike = BrokerRacks | Iterable[int] | Iterable["BrokerRegistration"]


class PlacementError(kerr.KafkaError, ValueError):
    """A placement request that cannot be satisfied; each subclass carries the Kafka error to
    answer with (from the one error tree), and all are ValueErrors of the request."""


class InvalidPartitionsError(PlacementError, kerr.InvalidPartitionsError):
    """Partition count below 1, or an expansion that does not increase it (INVALID_PARTITIONS)."""


class InvalidReplicationFactorError(PlacementError, kerr.InvalidReplicationFactorError):
    """Replication factor below 1 or above the number of usable brokers."""


class InvalidReplicaAssignmentError(PlacementError, kerr.InvalidReplicaAssignmentError):
    """The brokers cannot be placed on as asked: some have a rack and some do not, or the existing
    assignment an expansion should continue is malformed.

    Kafka raises AdminOperationException for the mixed-rack case (its clients then see
    UNKNOWN_SERVER_ERROR with the message); we answer INVALID_REPLICA_ASSIGNMENT (39) instead so a
    client can tell it from a crash. The message is Kafka's.
    """


class RackAwareMode(enum.Enum):
    """What to do with rack information (Kafka's RackAwareMode).

    ENFORCED: use racks; refuse when only some brokers have one (Kafka's default for CreateTopics).
    SAFE: use racks when every broker has one, otherwise ignore them.
    DISABLED: ignore racks (``--disable-rack-aware``).
    """

    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


def placement_brokers(cluster: ClusterImage) -> dict[int, str | None]:
    """Brokers new replicas may go to: registered, unfenced, not in controlled shutdown.

    KRaft places only on such brokers: a fenced broker would start the partition under-replicated,
    one shutting down would have to move its replicas again at once.
    """
    return {bid: reg.rack for bid, reg in cluster.brokers.items() if not reg.fenced and not reg.in_controlled_shutdown}


def _broker_racks(brokers: BrokersLike) -> dict[int, str | None]:
    """Normalize the accepted broker descriptions to ``{id: rack}``."""
    if isinstance(brokers, Mapping):
        return dict(brokers)
    out: dict[int, str | None] = {}
    for broker in brokers:
        if isinstance(broker, int):
            broker_id, rack = broker, None
        else:
            broker_id, rack = broker.broker_id, broker.rack
        if broker_id in out:
            raise InvalidReplicaAssignmentError(f"broker {broker_id} is listed twice")
        out[broker_id] = rack
    return out


def _check_counts(num_partitions: int, replication_factor: int, num_brokers: int) -> None:
    """Kafka's checks, in Kafka's order, with Kafka's messages."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > num_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {num_brokers}."
        )


def _replica_index(first_index: int, shift: int, j: int, n: int) -> int:
    """Position of follower ``j`` (0-based): never the first replica's own position."""
    return (first_index + 1 + (shift + j) % (n - 1)) % n


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks in name order, brokers within a rack by id.

    E.g. racks a:[0,1,2], b:[3], c:[4,5] -> [0, 3, 4, 1, 5, 2]. Consecutive entries thus sit on
    different racks for as long as every rack still has brokers left.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(broker_racks):
        by_rack.setdefault(broker_racks[broker_id], []).append(broker_id)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        for rack in racks:
            members = by_rack[rack]
            if depth < len(members):
                out.append(members[depth])
        depth += 1
    return out


def assign_replicas_rack_unaware(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int = 0,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokersRackUnaware with the start index and shift given.

    Returns partition id -> replicas (first = preferred leader) for partitions
    ``start_partition_id .. start_partition_id + num_partitions - 1``.
    """
    brokers = sorted(broker_ids)
    n = len(brokers)
    _check_counts(num_partitions, replication_factor, n)
    shift = replica_shift
    out: dict[int, list[int]] = {}
    for p in range(max(0, start_partition_id), max(0, start_partition_id) + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        out[p] = replicas
    return out


def assign_replicas_rack_aware(
    broker_racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int = 0,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokersRackAware with the start index and shift given.

    ``start_index`` and ``replica_shift`` index the rack-alternated list. Each follower is the next
    candidate (same walk as rack-unaware, stride ``shift * racks``) that adds a new rack while one
    is missing and a new broker while one is missing; so racks repeat only when
    ``replication_factor`` exceeds the number of racks.
    """
    if any(rack is None for rack in broker_racks.values()):
        raise InvalidReplicaAssignmentError("Not all brokers have rack information for replica rack aware assignment.")
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    _check_counts(num_partitions, replication_factor, n)
    num_racks = len(set(broker_racks.values()))
    shift = replica_shift
    out: dict[int, list[int]] = {}
    for p in range(max(0, start_partition_id), max(0, start_partition_id) + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            # The walk visits every other broker within n - 1 steps and at least one of them is
            # acceptable while replicas < n, so the bound below is never reached.
            for _attempt in range(n):
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
            else:  # pragma: no cover - impossible, see above
                raise AssertionError("rack-aware placement found no candidate")
        out[p] = replicas
    return out


def _use_racks(racks: Mapping[int, str | None], mode: RackAwareMode) -> bool:
    if mode is RackAwareMode.DISABLED:
        return False
    with_rack = sum(1 for rack in racks.values() if rack is not None)
    if with_rack == 0:
        return False
    if with_rack == len(racks):
        return True
    if mode is RackAwareMode.SAFE:
        return False
    raise InvalidReplicaAssignmentError("Not all brokers have rack information for replica rack aware assignment.")


def assign_replicas(
    brokers: BrokersLike,
    num_partitions: int,
    replication_factor: int,
    rng: random.Random | None = None,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    start_partition_id: int = 0,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Place the replicas of ``num_partitions`` new partitions (Kafka's assignReplicasToBrokers).

    ``brokers`` is ``{id: rack}``, broker ids, or `BrokerRegistration`s: the usable ones only (see
    `placement_brokers`). ``start_index`` and ``replica_shift`` default to draws from ``rng`` in
    ``[0, n)`` (start first, as Kafka draws them); a given ``start_index`` alone also fixes the shift
    to it, as Kafka's ``fixedStartIndex`` does. ``rng`` is required only when a draw is needed, so
    placement never reaches for hidden global randomness.

    Raises `InvalidPartitionsError` (37), `InvalidReplicationFactorError` (38), or
    `InvalidReplicaAssignmentError` (39) for mixed racks under `RackAwareMode.ENFORCED`.
    """
    racks = _broker_racks(brokers)
    n = len(racks)
    _check_counts(num_partitions, replication_factor, n)
    use_racks = _use_racks(racks, rack_aware_mode)
    if start_index is None:
        start_index = _draw(rng, n, "start_index")
        if replica_shift is None:
            replica_shift = _draw(rng, n, "replica_shift")
    elif replica_shift is None:
        replica_shift = start_index
    if start_index < 0 or replica_shift < 0:
        raise ValueError("start_index and replica_shift must not be negative")
    if use_racks:
        return assign_replicas_rack_aware(
            {b: r for b, r in racks.items() if r is not None},
            num_partitions,
            replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
            start_partition_id=start_partition_id,
        )
    return assign_replicas_rack_unaware(
        racks,
        num_partitions,
        replication_factor,
        start_index=start_index,
        replica_shift=replica_shift,
        start_partition_id=start_partition_id,
    )


def _draw(rng: random.Random | None, n: int, what: str) -> int:
    if rng is None:
        raise ValueError(f"{what} is not fixed, so an rng must be injected to draw it")
    return rng.randrange(n)


def expand_assignment(
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    brokers: BrokersLike,
    rng: random.Random | None = None,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Replicas for partitions ``len(existing) .. new_total - 1`` of a topic being expanded.

    Kafka's addPartitions: the replication factor is partition 0's; the start index is the
    position, in the id-sorted brokers, of the first broker whose id is at least that of partition
    0's first replica (0 when there is none); the replica shift is fixed to that same index; and
    numbering continues at the existing count. This is not what placing all ``new_total``
    partitions at once would give: the shift misses the bumps that walk made at partitions
    ``n, 2n, ...`` below the count, and under rack-aware placement the index (taken in the
    id-sorted list) walks the rack-alternated list, both exactly as Kafka does.

    Only the new partitions are returned. ``rng`` is accepted for symmetry with `assign_replicas`
    but never drawn from: the continuation is fully determined by ``existing``.
    """
    del rng  # determined by `existing`; see the docstring
    count = len(existing)
    if new_total <= count:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic currently has "
            f"{count} partitions, {new_total} would not be an increase."
        )
    if sorted(existing) != list(range(count)):
        raise InvalidReplicaAssignmentError(
            f"existing partitions must be numbered 0..{count - 1}, got {sorted(existing)}"
        )
    first_replicas = list(existing[0])
    if not first_replicas:
        raise InvalidReplicaAssignmentError("partition 0 has no replicas")
    replication_factor = len(first_replicas)
    racks = _broker_racks(brokers)
    _check_counts(new_total - count, replication_factor, len(racks))
    ordered = sorted(racks)
    start_index = bisect_left(ordered, first_replicas[0])  # the first broker with id >= the leader's
    if start_index == len(ordered):
        start_index = 0
    return assign_replicas(
        racks,
        new_total - count,
        replication_factor,
        start_index=start_index,
        replica_shift=start_index,
        start_partition_id=count,
        rack_aware_mode=rack_aware_mode,
    )
