"""Kafka's default partitioner: murmur2 for keyed records, sticky partitioning for the rest.

A keyed record goes to ``toPositive(murmur2(key)) % numPartitions`` over *all* partitions of the
topic, computed exactly as the Java client's ``Utils.murmur2`` (seed ``0x9747b28c``, 32-bit wrapping
arithmetic, little-endian 4-byte words, ``toPositive = & 0x7fffffff``), so a key lands on the same
partition as with Kafka.

A record without a key follows KIP-480: the producer sticks to one partition per topic until the
batch it was filling is done (the accumulator starts a new batch for it), then picks another
*available* partition (one with a leader) at random, never the same one twice in a row when there
is a choice. This keeps batches large at low rates instead of spreading single records over every
partition.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

__all__ = ["DefaultPartitioner", "murmur2", "to_positive", "partition_for_key"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of ``data`` exactly as Kafka's Java ``Utils.murmur2``: a signed 32-bit int."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end4 = length & ~3
    for i in range(0, end4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end4 + 2] << 16
    if rest >= 2:
        h ^= data[end4 + 1] << 8
    if rest >= 1:
        h ^= data[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``: ``abs(MIN_VALUE)`` is negative)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``num_partitions``."""
    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Keyed records by murmur2; records without a key stick to one partition per topic until the
    producer starts a new batch for it (`on_new_batch`). Thread-safe."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        """The partition for a record of ``topic`` with serialized ``key``."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        with self._lock:
            current = self._sticky.get(topic)
            if current is not None and current < num_partitions:
                return current
        return self._next(topic, num_partitions, available, None)

    def on_new_batch(self, topic: str, num_partitions: int, available: Sequence[int], prev_partition: int) -> None:
        """The producer is about to open a new batch on ``prev_partition``: if that is the sticky
        partition of ``topic``, move on to another one."""
        self._next(topic, num_partitions, available, prev_partition)

    def _next(self, topic: str, num_partitions: int, available: Sequence[int], prev_partition: int | None) -> int:
        with self._lock:
            old = self._sticky.get(topic)
            if old is not None and old != prev_partition and old < num_partitions:
                return old  # someone else already moved on (or the batch was not the sticky one's)
            candidates = [p for p in available if p < num_partitions]
            if not candidates:
                new = self._rng.randrange(num_partitions)
            elif len(candidates) == 1:
                new = candidates[0]
            else:
                choice: int | None = old
                while choice is None or choice == old:
                    choice = self._rng.choice(candidates)
                new = choice
            self._sticky[topic] = new
            return new

    def close(self) -> None:
        pass
