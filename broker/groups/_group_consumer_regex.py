"""When a KIP-848 consumer group resolves its members' topic regexes (``SubscribedTopicRegex``):
Kafka's GroupMetadataManager (4.x) does it asynchronously, batched per group, and this follows it.

- A heartbeat that brings a regex no other member subscribes to does not resolve it: it schedules a
  refresh of the group's regexes, and answers with what the member's other subscriptions give (its
  literal topics). The refresh runs after the heartbeat, as the coordinator's next timer (Kafka's
  executor); when a regex's topics changed it bumps the group epoch, so the members' next
  heartbeats get the new target. A regex another member already resolved bumps the epoch at once.
- A refresh is scheduled only when none is pending and the last one is older than
  ``regex_refresh_min_interval_ms`` (Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, 10 s), and then
  only if a regex is unresolved, a topic was created since the last one (Kafka's metadata image
  version; a deleted topic needs none: the subscription metadata leaves it out), or the last one is
  older than ``group.consumer.regex.refresh.interval.ms``.
- A refresh resolves every regex of the group with the topics the member that asked may Describe
  (KAFKA-18813); a regex no member subscribes to any more is forgotten (Kafka's tombstone).

Kafka keeps the resolutions in ``__consumer_offsets``; here they are beside the group's state, so a
group loaded from the log resolves the regexes its members had at its first heartbeat, as if read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraftlog.broker.groups._group_regex import resolve_regex

__all__ = ["GroupRegexes"]

TopicNames = Callable[[], Iterable[str]]
Describable = Callable[[frozenset[str]], frozenset[str]]
TopicLookup = Callable[[str], "tuple[str, int] | None"]  # topic name -> (topic id, partition count)


@dataclass(frozen=True)
class _Refresh:
    """A refresh scheduled by a heartbeat, with what it saw then (Kafka's executor task)."""

    regexes: frozenset[str]
    topic_names: TopicNames
    describable: Describable | None
    lookup: TopicLookup  # the heartbeat's topic metadata, for the group's subscription metadata
    due_ms: int


class GroupRegexes:
    """The resolved regexes of one consumer group and its pending refresh (module docstring)."""

    def __init__(self, min_interval_ms: int, interval_ms: int) -> None:
        self.min_interval_ms = min_interval_ms
        self.interval_ms = interval_ms
        self.resolved: dict[str, frozenset[str]] = {}  # regex -> its topics
        # when they were last resolved (all together), with every topic's name then (what Kafka's
        # metadata image version tells: whether topics were created since); None while none is
        self.refreshed_ms: int | None = None
        self.seen_names: frozenset[str] = frozenset()
        self.pending: _Refresh | None = None
        #: the group was loaded from the log: its members' regexes are resolved at its first heartbeat
        self.from_log = False

    def topics(self, regex: str) -> frozenset[str]:
        return self.resolved.get(regex, frozenset())

    def forget_others(self, subscribed: set[str]) -> None:
        """Drop the regexes no member subscribes to any more."""
        for regex in [r for r in self.resolved if r not in subscribed]:
            del self.resolved[regex]
        if not self.resolved:  # Kafka's last refresh time is its resolutions': none, none
            self.refreshed_ms = None

    def resolve_now(
        self, regexes: Iterable[str], topic_names: TopicNames, describable: Describable | None, now_ms: int
    ) -> None:
        """Resolve ``regexes`` at once (a loaded group's, which Kafka reads from its records)."""
        names = tuple(topic_names())
        for regex in regexes:
            topics = resolve_regex(regex, names)
            self.resolved[regex] = topics if describable is None else describable(topics)
        self.refreshed_ms, self.seen_names = now_ms, frozenset(names)

    def update(
        self,
        old: str | None,
        new: str | None,
        subscribed: set[str],
        now_ms: int,
        topic_names: TopicNames,
        describable: Describable | None,
        lookup: TopicLookup,
    ) -> bool:
        """A member's regex went from ``old`` to ``new``; ``subscribed`` is every member's regex
        after the change. Schedules a refresh when due (module docstring); returns whether the
        group epoch must be bumped now (``new`` was resolved already, for another member)."""
        self.forget_others(subscribed)
        bump = False
        require = False
        if old != new and new:
            if new in self.resolved:
                bump = True
            else:
                require = True
        if not subscribed or self.pending is not None:
            return bump
        last = self.refreshed_ms
        if last is not None and now_ms <= last + self.min_interval_ms:
            return bump
        require = require or any(r not in self.resolved for r in subscribed)
        if not require and last is not None and now_ms > last + self.interval_ms:
            require = True
        if not require:
            require = any(name not in self.seen_names for name in topic_names())
        if require:
            self.pending = _Refresh(frozenset(subscribed), topic_names, describable, lookup, now_ms)
        return bump

    def due(self, now_ms: int) -> bool:
        return self.pending is not None and self.pending.due_ms <= now_ms

    def run(self, now_ms: int, subscribed: set[str]) -> tuple[bool, TopicLookup]:
        """Carry out the pending refresh (``subscribed``: the members' regexes now; one nobody
        subscribes to any more is skipped). Returns whether any regex's topics changed (the group
        epoch is bumped then) and the topic lookup of the heartbeat that scheduled it."""
        pending = self.pending
        assert pending is not None
        self.pending = None
        names = tuple(pending.topic_names())
        changed = False
        for regex in sorted(pending.regexes):
            if regex not in subscribed:
                continue
            topics = resolve_regex(regex, names)
            if pending.describable is not None:
                topics = pending.describable(topics)
            if self.resolved.get(regex, frozenset()) != topics:
                changed = True
            self.resolved[regex] = topics
        if self.resolved:
            self.refreshed_ms, self.seen_names = now_ms, frozenset(names)
        return changed, pending.lookup
