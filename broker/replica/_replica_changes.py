"""What applying a metadata delta hands out: the partitions this broker now follows and where
their leaders are (`FollowTarget`), and what changed (`ReplicaChanges`). Their own module because
the registry, the applier and the fetchers all use them and need nothing else of each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlog.broker.replica._partition import TopicPartition

__all__ = ["FollowTarget", "ReplicaChanges"]


@dataclass(frozen=True, slots=True)
class FollowTarget:
    """A partition this broker follows, and where its leader is (``address`` = ``host:port``)."""

    topic: str
    partition: int
    topic_id: str
    leader_id: int
    leader_epoch: int
    address: str

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class ReplicaChanges:
    """What one `ReplicaManager.apply_delta` did, for the fetcher and for logs/tests.

    - ``leaders``: partitions this broker now leads (stop fetching them);
    - ``followers``: partitions to (re)start fetching from their leader;
    - ``stopped_fetching``: followers without a reachable leader (NO_LEADER, unknown endpoint);
    - ``stopped``: replicas no longer hosted here (deleted topic, reassigned away, re-created);
    - ``deleted``: partitions whose files were removed.
    """

    leaders: list[TopicPartition] = field(default_factory=list)
    followers: list[FollowTarget] = field(default_factory=list)
    stopped_fetching: list[TopicPartition] = field(default_factory=list)
    stopped: list[TopicPartition] = field(default_factory=list)
    deleted: list[TopicPartition] = field(default_factory=list)

    @property
    def not_fetching(self) -> list[TopicPartition]:
        """Every partition the fetchers must drop."""
        return [*self.leaders, *self.stopped_fetching, *self.stopped]

    def __bool__(self) -> bool:
        return bool(self.leaders or self.followers or self.stopped_fetching or self.stopped or self.deleted)
