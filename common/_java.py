"""What kraftlog must compute exactly as Kafka's Java code does, where Java's semantics differ from
Python's: string order and string hash codes.

Why: Kafka sorts consumer member ids with ``String.compareTo`` (UTF-16 code units, so a character
beyond U+FFFF sorts below U+E000..U+FFFF, unlike Python's code-point order), and places a group on
partition ``abs(groupId.hashCode()) % partitions`` of ``__consumer_offsets``. A Python client in a
group led by a Java client, or the other way round, must agree with it to the member.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

__all__ = [
    "java_string_key",
    "java_string_hash",
    "java_abs",
    "java_int32",
    "coordinator_partition",
    "JavaHashTable",
    "java_hashmap_order",
]

K = TypeVar("K", bound=Hashable)

_INT32_MIN = -(2**31)


def java_string_key(value: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does (UTF-16 code units:
    big-endian UTF-16 bytes compare as the units do, and a prefix sorts first)."""
    return value.encode("utf-16-be", "surrogatepass")


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a
    signed 32-bit int."""
    units = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_int32(value: int) -> int:
    """``value`` wrapped to a signed 32-bit int, as Java's int arithmetic wraps."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def java_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value of an int32, with ``Integer.MIN_VALUE`` mapped to 0
    (``Math.abs`` would leave it negative)."""
    return 0 if value == _INT32_MIN else abs(value)


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` (or ``__transaction_state``) whose leader coordinates
    ``key`` (a group id or a transactional id): ``Utils.abs(key.hashCode()) % partitions``."""
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, not {partitions}")
    return java_abs(java_string_hash(key)) % partitions


_DEFAULT_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


class JavaHashTable(Generic[K]):
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) built by the same puts and
    removes, for Java code whose result depends on it (Kafka's sticky assignor takes "the first"
    element of a ``HashSet``, and walks its members in ``HashMap`` order).

    Modelled: the default table of 16 buckets created at the first put, the spread hash
    ``h ^ (h >>> 16)``, doubling when the size passes 3/4 of the table (and when a bucket reaches
    9 entries in a table under 64), buckets split in order on a resize, insertion order within a
    bucket. Not modelled: the red-black trees of buckets with 9+ entries in tables of 64+, where
    Java's order within that bucket may differ; keys that collide that often do not occur here.
    """

    def __init__(self, hash_of: Callable[[K], int], keys: Iterable[K] = ()) -> None:
        self._hash_of = hash_of
        self._buckets: list[list[K]] = []
        self._size = 0
        for key in keys:
            self.add(key)

    def _index(self, key: K, capacity: int) -> int:
        h = self._hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    def _resize(self) -> None:
        old = self._buckets
        capacity = 2 * len(old)
        buckets: list[list[K]] = [[] for _ in range(capacity)]
        for bucket in old:  # a bucket splits into j and j + old capacity, each in its old order
            for key in bucket:
                buckets[self._index(key, capacity)].append(key)
        self._buckets = buckets

    def add(self, key: K) -> bool:
        """Put ``key``; False when it was there (its place does not change)."""
        if not self._buckets:
            self._buckets = [[] for _ in range(_DEFAULT_CAPACITY)]
        bucket = self._buckets[self._index(key, len(self._buckets))]
        if key in bucket:
            return False
        bucket.append(key)
        if len(bucket) > _TREEIFY_THRESHOLD and len(self._buckets) < _MIN_TREEIFY_CAPACITY:
            self._resize()  # HashMap.treeifyBin resizes a small table instead of building a tree
        self._size += 1
        if self._size > len(self._buckets) * 3 // 4:
            self._resize()
        return True

    def remove(self, key: K) -> bool:
        if not self._buckets:
            return False
        bucket = self._buckets[self._index(key, len(self._buckets))]
        if key not in bucket:
            return False
        bucket.remove(key)
        self._size -= 1
        return True

    def __contains__(self, key: object) -> bool:
        if not self._buckets:
            return False
        return key in self._buckets[self._index(key, len(self._buckets))]  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[K]:
        for bucket in self._buckets:
            yield from bucket


def java_hashmap_order(keys: Iterable[K], hash_of: Callable[[K], int]) -> list[K]:
    """``keys`` in the order a ``java.util.HashMap`` that had them put in this order iterates them."""
    return list(JavaHashTable(hash_of, keys))
