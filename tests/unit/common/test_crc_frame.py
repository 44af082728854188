"""The one CRC frame helper (common._crc_frame): the exact bytes of both byte orders, since the Raft
journal (little endian) and the metadata log (big endian) persist them and must keep reading old
files."""

from __future__ import annotations

import pytest

from kraftlog.common import (
    CRC_FRAME_HEADER_SIZE,
    crc_frame_header,
    crc_frame_problem,
    encode_crc_frame,
)

# CRC-32C of the ASCII digits 1..9, the check value of the Castagnoli polynomial (RFC 3720)
CHECK_PAYLOAD = b"123456789"
CHECK_CRC = 0xE3069283


def test_big_endian_frame_bytes() -> None:
    frame = encode_crc_frame(CHECK_PAYLOAD, "big")
    assert frame == bytes.fromhex("00000009e3069283") + CHECK_PAYLOAD


def test_little_endian_frame_bytes() -> None:
    frame = encode_crc_frame(CHECK_PAYLOAD, "little")
    assert frame == bytes.fromhex("09000000839206e3") + CHECK_PAYLOAD


@pytest.mark.parametrize("order", ["big", "little"])
def test_header_reads_back_what_encode_wrote(order) -> None:
    frame = encode_crc_frame(memoryview(b"payload"), order)
    header = crc_frame_header(order)
    assert header.size == CRC_FRAME_HEADER_SIZE
    length, crc = header.unpack_from(frame, 0)
    assert length == 7
    assert frame[CRC_FRAME_HEADER_SIZE:] == b"payload"
    assert crc_frame_problem(frame[CRC_FRAME_HEADER_SIZE:], crc) is None


def test_the_other_byte_order_misreads_the_header() -> None:
    frame = encode_crc_frame(CHECK_PAYLOAD, "big")
    length, _ = crc_frame_header("little").unpack_from(frame, 0)
    assert length != len(CHECK_PAYLOAD)


def test_crc_problem_names_both_values() -> None:
    problem = crc_frame_problem(b"12345678X", CHECK_CRC)
    assert problem is not None
    assert problem.startswith("crc mismatch: stored 0xe3069283, computed 0x")
    assert crc_frame_problem(CHECK_PAYLOAD, CHECK_CRC) is None


def test_unknown_byte_order_is_refused() -> None:
    with pytest.raises(ValueError, match="byte order"):
        crc_frame_header("native")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="byte order"):
        encode_crc_frame(b"x", "network")  # type: ignore[arg-type]
