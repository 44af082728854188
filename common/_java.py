"""What kraftlog must compute exactly as Kafka's Java code does, where Java's semantics differ from
Python's: string order and string hash codes.

Why: Kafka sorts consumer member ids with ``String.compareTo`` (UTF-16 code units, so a character
beyond U+FFFF sorts below U+E000..U+FFFF, unlike Python's code-point order), and places a group on
partition ``abs(groupId.hashCode()) % partitions`` of ``__consumer_offsets``. A Python client in a
group led by a Java client, or the other way round, must agree with it to the member.
"""

from __future__ import annotations

__all__ = ["java_string_key", "java_string_hash", "java_abs", "coordinator_partition"]

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
