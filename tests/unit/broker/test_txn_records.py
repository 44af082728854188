"""``__transaction_state`` records in Kafka's schemas (issue 15)."""

from __future__ import annotations

import struct

import pytest

from kraftlog.broker.txn._txn_records import (
    TransactionLogKey,
    TransactionLogValue,
    TxnState,
    decode_txn,
    encode_txn_key,
    encode_txn_value,
)
from kraftlog.common.errors import CorruptMessageError


def test_v0_is_kafkas_bytes_and_round_trips() -> None:
    value = TransactionLogValue(42, 3, 60000, TxnState.ONGOING, (("a", (0, 2)), ("b", (1,))), 1000, 900)
    raw = encode_txn_value(value)
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60000, 1)
        + struct.pack(">i", 2)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 2)
        + b"\x00\x01b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1000, 900)
    )
    assert raw == expected
    key = encode_txn_key(TransactionLogKey("tx-1"))
    assert key == b"\x00\x00\x00\x04tx-1"
    assert decode_txn(key, raw) == (TransactionLogKey("tx-1"), value)
    assert decode_txn(key, None) == (TransactionLogKey("tx-1"), None)


def test_v1_flexible_with_tagged_producer_ids_is_read() -> None:
    raw = (
        struct.pack(">hqhib", 1, 42, 3, 60000, 4)
        + b"\x02"  # one topic (compact)
        + b"\x02a"  # "a"
        + b"\x02"
        + struct.pack(">i", 5)
        + b"\x00"  # topic's tagged fields
        + struct.pack(">qq", 1000, 900)
        + b"\x02"  # two tagged fields
        + b"\x00\x08"
        + struct.pack(">q", 41)
        + b"\x02\x02"
        + struct.pack(">h", 2)  # ClientTransactionVersion: read since transaction version 2 (issue 28)
    )
    _k, value = decode_txn(encode_txn_key(TransactionLogKey("t")), raw)
    assert value == TransactionLogValue(
        42, 3, 60000, TxnState.COMPLETE_COMMIT, (("a", (5,)),), 1000, 900, 41, -1, client_transaction_version=2
    )


@pytest.mark.parametrize("raw", [b"", b"\x00\x02", struct.pack(">hqhib", 0, 1, 0, 1, 9) + b"\x00" * 20])
def test_malformed_values_are_corrupt_message(raw: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_txn(encode_txn_key(TransactionLogKey("t")), raw)
