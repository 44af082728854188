"""Records of the internal topic ``__transaction_state``, in Kafka's schemas: the key
``TransactionLogKey`` v0 (the transactional id) and the value ``TransactionLogValue`` (producer id
and epoch, timeout, state, the partitions of the open transaction, timestamps). Written as v0 (the
non-flexible version Kafka writes for clients of the first transaction protocol) or, for a
transaction of a client of transaction version 2 (KIP-890), as v1 (flexible, with the tagged
previous/next producer ids and the client's transaction version, tags 0, 1 and 2), as Kafka
chooses between them. A null value is a tombstone (the
transactional id expired). Malformed bytes are CORRUPT_MESSAGE.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from kraftlog.broker.coordinator import I8, I16, I32, I64, Reader, compact_array_length, compact_string, string, uvarint
from kraftlog.common.errors import CorruptMessageError

__all__ = ["TxnState", "TransactionLogKey", "TransactionLogValue", "encode_txn_key", "encode_txn_value", "decode_txn"]


class TxnState(enum.IntEnum):
    """Kafka's TransactionState ids."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


class TransactionLogKey(NamedTuple):
    transactional_id: str


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # topic -> partitions, sorted
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0  # tag 2 of v1: 2 when the client speaks KIP-890's protocol


def encode_txn_key(key: TransactionLogKey) -> bytes:
    return I16.pack(0) + string(key.transactional_id)


def encode_txn_value(value: TransactionLogValue) -> bytes:
    """Version 0 for a client of the first transaction protocol, version 1 (flexible, tagged
    fields) for one of transaction version 2: Kafka's choice (``transactionLogValueVersion``)."""
    if value.client_transaction_version >= 2:
        return _encode_value_v1(value)
    parts = [
        I16.pack(0),
        I64.pack(value.producer_id),
        I16.pack(value.producer_epoch),
        I32.pack(value.timeout_ms),
        I8.pack(int(value.state)),
        I32.pack(len(value.partitions)),
    ]
    for topic, ids in value.partitions:
        parts += [string(topic), I32.pack(len(ids)), *(I32.pack(p) for p in ids)]
    parts += [I64.pack(value.last_update_ms), I64.pack(value.start_ms)]
    return b"".join(parts)


def _encode_value_v1(value: TransactionLogValue) -> bytes:
    parts = [
        I16.pack(1),
        I64.pack(value.producer_id),
        I16.pack(value.producer_epoch),
        I32.pack(value.timeout_ms),
        I8.pack(int(value.state)),
        compact_array_length(len(value.partitions)),
    ]
    for topic, ids in value.partitions:
        parts += [compact_string(topic), compact_array_length(len(ids)), *(I32.pack(p) for p in ids), uvarint(0)]
    parts += [I64.pack(value.last_update_ms), I64.pack(value.start_ms)]
    tags = [
        (0, I64.pack(value.previous_producer_id)),
        (1, I64.pack(value.next_producer_id)),
        (2, I16.pack(value.client_transaction_version)),
    ]
    parts.append(uvarint(len(tags)))
    for tag, field in tags:
        parts += [uvarint(tag), uvarint(len(field)), field]
    return b"".join(parts)


def decode_txn(key: bytes, value: bytes | None) -> tuple[TransactionLogKey, TransactionLogValue | None]:
    """A record of ``__transaction_state``: its key and its value (None for a tombstone)."""
    r = Reader(key, "TransactionLogKey")
    version = r.int16()
    if version != 0:
        raise CorruptMessageError(f"TransactionLogKey version {version} is unknown")
    k = TransactionLogKey(r.required_string(False))
    r.end()
    if value is None:
        return k, None
    return k, _decode_value(value)


def _decode_value(data: bytes) -> TransactionLogValue:
    r = Reader(data, "TransactionLogValue")
    version = r.int16()
    if version not in (0, 1):
        raise CorruptMessageError(f"TransactionLogValue version {version} is unknown")
    flexible = version >= 1
    producer_id = r.int64()
    epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    try:
        state = TxnState(status)
    except ValueError as err:
        raise CorruptMessageError(f"TransactionLogValue has unknown state {status}") from err
    partitions = []
    count = r.uvarint() - 1 if flexible else r.int32()
    if count > len(data):
        raise CorruptMessageError(f"TransactionLogValue claims {count} topics")
    for _ in range(max(count, 0)):  # -1: null (no partitions)
        topic = r.required_string(flexible)
        ids = tuple(sorted(r.int32() for _ in range(r.array_length(flexible))))
        if flexible:
            r.tagged_fields()
        partitions.append((topic, ids))
    last_update = r.int64()
    start = r.int64()
    previous = nxt = -1
    client_version = 0
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if tag in (0, 1) and size == 8:
                field = r.int64()
                previous, nxt = (field, nxt) if tag == 0 else (previous, field)
            elif tag == 2 and size == 2:
                client_version = r.int16()
            else:
                r.skip(size)
    r.end()
    return TransactionLogValue(
        producer_id,
        epoch,
        timeout_ms,
        state,
        tuple(sorted(partitions)),
        last_update,
        start,
        previous,
        nxt,
        client_version,
    )
