"""The ``sticky`` and ``cooperative-sticky`` assignors of the classic group protocol (KIP-54, KIP-429).

They keep as many partitions as they can where they were while balancing the group, and must give
exactly the assignment Kafka's Java ``StickyAssignor`` / ``CooperativeStickyAssignor`` give, since a
Java consumer and a Python one may lead the same group in turn. So this follows Kafka 4.x's
``AbstractStickyAssignor`` step by step, written from its documented algorithm and behaviour:

1. Each member's previously owned partitions (its subscription's ``owned_partitions`` and
   generation for cooperative-sticky; the user data it sent for eager sticky) are collected; a
   partition claimed by two members of one generation is taken from both, one claimed in two
   generations stays with the newer one.
2. When every member subscribes to the same topics, the *constrained* builder runs: every member
   gets ``floor`` or ``ceil`` of partitions/members, keeping owned partitions first (rack-aligned
   ones only when racks matter), then rack-aligned round robin, then round robin.
3. Otherwise the *general* builder runs: owned partitions kept, the rest given to the least loaded
   eligible member, then partitions moved one by one from members with more than one partition
   above another eligible member, preferring a previous owner, never undoing a move in a cycle.

Where Java's result depends on the iteration order of its ``HashMap``/``HashSet`` (members walked
in map order; "the first" partition of a set), `JavaHashTable` reproduces that order; the member
map is taken in the order given, which must be the JoinGroup response's order (as the Java
consumer builds its map from that response).

``cooperative-sticky`` then withholds every partition that changes owner: the previous owner must
revoke it first, and a follow-up rebalance hands it over (KIP-429).

Where Java fails, this does not: when Java's steps throw (a NullPointerException on a previous owner
that was set aside) or end in an invalid assignment (a partition twice or past its topic's end, from
owned partitions past the end; a partition of a topic its member no longer subscribes to, handed back
to a previous owner), the same steps run again with guards: owned partitions past their topic's end
are ignored, and a previous owner that cannot take a partition back is passed over. Every valid
Java assignment is given exactly. One Java quirk is kept because Java's assignment is valid by its
own rule: when the first member walked has an empty subscription, the group counts as "all
subscriptions equal" and that member may be given partitions of the others' topics.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from kraftlog.client._metadata import TopicPartition, partitions_by_topic
from kraftlog.client.assignors._assignors import PartitionRacks, Subscription
from kraftlog.client.assignors._sticky_builders import ConstrainedBuilder, GeneralBuilder
from kraftlog.client.assignors._sticky_common import DEFAULT_GENERATION, MemberData, RackInfo, tp_java_order
from kraftlog.common import java_hashmap_order, java_string_hash

__all__ = [
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "MemberData",
    "encode_sticky_user_data",
    "decode_sticky_user_data",
]


# =============================================================================== assignors


class _AbstractSticky(ABC):
    """What both sticky assignors share; ``member_data`` says where a member's history comes from."""

    name = ""

    def __init__(self) -> None:
        # Java keeps the highest generation it has seen on the assignor instance, across rebalances
        self.max_generation = DEFAULT_GENERATION
        self.partitions_transferring: dict[TopicPartition, str] | None = None

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The member's previously owned partitions and generation, as this assignor reads them."""

    def assign(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        subscribed = {t for s in subscriptions.values() for t in s.topics}
        partitions = {t: racks for t, racks in partitions.items() if t in subscribed and racks}
        if not subscriptions:
            return {}
        # Java's steps exactly; where they fail or give an invalid assignment (a partition twice, of
        # a topic the member did not subscribe to, or past its topic's end), the same steps again
        # with the guards that Java lacks
        try:
            result = self._assign_once(partitions, subscriptions, guarded=False)
            if _valid(partitions, subscriptions, result):
                return result
        except (KeyError, IndexError, RuntimeError):
            pass
        return self._assign_once(partitions, subscriptions, guarded=True)

    def _assign_once(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription], *, guarded: bool
    ) -> dict[str, list[TopicPartition]]:
        order = java_hashmap_order(list(subscriptions), java_string_hash)
        ordered = {m: subscriptions[m] for m in order}
        data = {m: self.member_data(s) for m, s in ordered.items()}
        owned: dict[str, list[TopicPartition]] = {}
        multi_owned: set[TopicPartition] = set()
        all_equal = self._collect_owned(partitions, ordered, data, owned, multi_owned, guarded)
        racks = RackInfo(partitions, ordered)
        if all_equal:
            constrained = ConstrainedBuilder(partitions, racks, owned, multi_owned)
            result = constrained.build()
            self.partitions_transferring = constrained.transferring
        else:
            self.partitions_transferring = None
            general = GeneralBuilder(partitions, racks, owned, ordered, data, self.max_generation, guarded=guarded)
            result = general.build()
        return {m: sorted(result.get(m, []), key=tp_java_order) for m in subscriptions}

    def _collect_owned(
        self,
        partitions: PartitionRacks,
        subscriptions: dict[str, Subscription],
        data: dict[str, MemberData],
        owned: dict[str, list[TopicPartition]],
        multi_owned: set[TopicPartition],
        guarded: bool,
    ) -> bool:
        equal = True
        topics: set[str] = set()
        owner_of: dict[TopicPartition, str] = {}
        for consumer, sub in subscriptions.items():
            if not topics:
                topics.update(sub.topics)
            elif equal and not (len(sub.topics) == len(topics) and topics.issuperset(sub.topics)):
                equal = False
            generation = data[consumer].generation
            generation = DEFAULT_GENERATION if generation is None else generation
            self.max_generation = max(self.max_generation, generation)
            mine: list[TopicPartition] = []
            owned[consumer] = mine
            for tp in data[consumer].partitions:
                # Java checks only the topic; guarded, a partition number past the topic's end (a
                # leader with stale metadata, bad user data) is ignored too
                if tp.topic not in partitions:
                    continue
                if guarded and not 0 <= tp.partition < len(partitions[tp.topic]):
                    continue
                other = owner_of.get(tp)
                if other is None:
                    mine.append(tp)
                    owner_of[tp] = consumer
                    continue
                # Java compares with the other member's subscription generation, not its user data's
                other_generation = subscriptions[other].generation_id
                other_generation = other_generation if other_generation >= 0 else DEFAULT_GENERATION
                if generation == other_generation:
                    multi_owned.add(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                    owner_of[tp] = consumer
                elif generation > other_generation:
                    mine.append(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                    owner_of[tp] = consumer
        return equal


def _valid(
    partitions: PartitionRacks, subscriptions: Mapping[str, Subscription], result: dict[str, list[TopicPartition]]
) -> bool:
    """No partition twice, none of a topic its member did not subscribe to, none past its topic."""
    seen: set[TopicPartition] = set()
    for member, tps in result.items():
        topics = subscriptions[member].topics
        for tp in tps:
            if tp in seen or tp.topic not in topics or not 0 <= tp.partition < len(partitions.get(tp.topic, ())):
                return False
            seen.add(tp)
    return True


# Struct encodings of the assignors' user data, as Kafka's protocol types write them: INT16 string
# lengths, INT32 array counts and values, big-endian.
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int | None) -> bytes:
    """StickyAssignorUserData v1 (v0 without the generation): (topic, [partition]) per topic."""
    by_topic = partitions_by_topic(partitions)
    out = bytearray(_I32.pack(len(by_topic)))
    # topics in the order Java's groupPartitionsByTopic (a HashMap) writes them: the same bytes
    for topic in java_hashmap_order(list(by_topic), java_string_hash):
        ps = by_topic[topic]
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(ps))
        out += b"".join(_I32.pack(p) for p in ps)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def _decode_topic_partitions(data: bytes) -> tuple[list[TopicPartition], int]:
    (count,) = _I32.unpack_from(data, 0)
    pos = 4
    if count < 0:
        raise ValueError("null array")
    out = []
    for _ in range(count):
        (n,) = _I16.unpack_from(data, pos)
        if n < 0:
            raise ValueError("null topic")
        if pos + 2 + n > len(data):
            raise ValueError("short topic")
        topic = data[pos + 2 : pos + 2 + n].decode("utf-8", "replace")  # Java's new String(..., UTF_8)
        pos += 2 + n
        (k,) = _I32.unpack_from(data, pos)
        pos += 4
        if k < 0:
            raise ValueError("null partitions")
        for _ in range(k):
            out.append(TopicPartition(topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
    return out, pos


def decode_sticky_user_data(data: bytes | None) -> MemberData | None:
    """v1, else v0, else `MemberData([], -1)` as Java falls back; None for no user data."""
    if not data:
        return None
    try:
        partitions, pos = _decode_topic_partitions(data)
        (generation,) = _I32.unpack_from(data, pos)
        return MemberData(partitions, generation)
    except (ValueError, struct.error):
        pass
    try:
        partitions, _pos = _decode_topic_partitions(data)
        return MemberData(partitions, None)
    except (ValueError, struct.error):
        return MemberData([], DEFAULT_GENERATION)


class StickyAssignor(_AbstractSticky):
    """Kafka's eager ``sticky`` assignor: a member's history travels in its user data."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self._assignment: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, partitions: Sequence[TopicPartition], generation: int) -> None:
        self._assignment = list(partitions)
        self._generation = generation

    def subscription_user_data(self) -> bytes | None:
        if self._assignment is None:
            return None
        return encode_sticky_user_data(self._assignment, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        decoded = decode_sticky_user_data(subscription.user_data)
        return decoded if decoded is not None else MemberData([], None)


class CooperativeStickyAssignor(_AbstractSticky):
    """Kafka's ``cooperative-sticky`` assignor (KIP-429): partitions changing owner are withheld
    until their previous owner has revoked them."""

    name = "cooperative-sticky"

    def __init__(self) -> None:
        super().__init__()
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, partitions: Sequence[TopicPartition], generation: int) -> None:
        self._generation = generation

    def subscription_user_data(self) -> bytes:
        return _I32.pack(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:  # ConsumerProtocolSubscription v2+ carries it
            return MemberData(subscription.owned_partitions, subscription.generation_id)
        data = subscription.user_data
        if data is None:
            generation: int | None = None
        else:
            try:
                (generation,) = _I32.unpack_from(data, 0)
            except struct.error:
                generation = DEFAULT_GENERATION
        return MemberData(subscription.owned_partitions, generation)

    def assign(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result = super().assign(partitions, subscriptions)
        transferring = self.partitions_transferring
        if transferring is None:
            transferring = self._transferring(subscriptions, result)
        for tp, consumer in transferring.items():
            if tp in result[consumer]:
                result[consumer].remove(tp)
        return result

    @staticmethod
    def _transferring(
        subscriptions: Mapping[str, Subscription], result: dict[str, list[TopicPartition]]
    ) -> dict[TopicPartition, str]:
        added: dict[TopicPartition, str] = {}
        revoked: set[TopicPartition] = set()
        for consumer, assigned in result.items():
            owned = set(subscriptions[consumer].owned_partitions)
            now = set(assigned)
            added.update((tp, consumer) for tp in assigned if tp not in owned)
            revoked.update(tp for tp in subscriptions[consumer].owned_partitions if tp not in now)
        return {tp: c for tp, c in added.items() if tp in revoked}
