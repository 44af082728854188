"""Property tests (hypothesis) of the controller Raft wire decoders (issue 12 §4, `quorum.raft._wire`).

Everything a peer can put on the Raft port goes through these: the frame reader, the handshake
bodies, the session opener, the message and command decoders. On arbitrary bytes and on mutations of
valid encodings each returns a value or raises a Kafka error (`common.errors.KafkaError`: the
connection is then dropped and logged); nothing else, no hang, and a frame reader never holds more
than the limit of its phase.

Budget: ``KRAFTLOG_FUZZ_EXAMPLES`` examples per property (default 40; ``make fuzz`` sets a long one).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgpack
import pytest
from _decoder_fuzz import RANDOM_SEARCH
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlog.common.errors import KafkaError, MessageTooLargeError
from kraftlog.quorum.raft._raft_messages import decode_command, decode_message, encode_append_command, encode_message
from kraftlog.quorum.raft._wire import (
    MAX_HANDSHAKE_FRAME_BYTES,
    FrameReader,
    InitiatorHandshake,
    ResponderHandshake,
    Session,
    derive_auth_key,
    frame,
)

EXAMPLES = int(os.environ.get("KRAFTLOG_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM_SEARCH,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
pytestmark = pytest.mark.timeout(max(300, EXAMPLES))

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
KEY = derive_auth_key("fuzz-password", CLUSTER, iterations=1)

VALID_MESSAGES: list[dict[str, Any]] = [
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 7,
        "prevLogIdx": 6,
        "prevLogTerm": 3,
        "entries": [
            (b"\x00" + encode_append_command(3, 1_700_000_000_000, [b"rec-a", b"rec-b"]), 7, 3),
            (b"\x01", 8, 3),
        ],
    },
    {"type": "append_entries", "term": 3, "commit_index": 7, "serialized": (b"dump-chunk", True, False)},
    {"type": "request_vote", "term": 4, "last_log_index": 9, "last_log_term": 3},
    {"type": "response_vote", "term": 4},
    {"type": "next_node_idx", "next_node_idx": 10, "reset": False, "success": True},
    {"type": "timeout_now", "term": 4},
    {"type": "kl_keepalive"},
]


def _valid_encodings() -> list[bytes]:
    out = []
    for message in VALID_MESSAGES:
        try:
            out.append(encode_message(message))
        except KafkaError:
            continue
    return out


def _expect_value_or_kafka_error(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except KafkaError:
        return None


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "splice"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
        elif op == "splice":
            data[pos : pos + 4] = draw(st.binary(min_size=4, max_size=4))
    return bytes(data)


def test_valid_messages_round_trip() -> None:
    encodings = _valid_encodings()
    assert len(encodings) == len(VALID_MESSAGES), "the seeds must be real messages"
    for data in encodings:
        decoded = decode_message(data)
        assert decoded["type"] in {m["type"] for m in VALID_MESSAGES}


@FUZZ
@given(st.binary(max_size=4096))
def test_decode_message_on_arbitrary_bytes(data: bytes) -> None:
    _expect_value_or_kafka_error(decode_message, data)


@FUZZ
@given(st.data())
def test_decode_message_on_mutated_messages(data: st.DataObject) -> None:
    _expect_value_or_kafka_error(decode_message, data.draw(mutated(_valid_encodings())))


@FUZZ
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(1 << 63), (1 << 64) - 1)
        | st.floats()
        | st.text(max_size=20)
        | st.binary(max_size=20),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
        max_leaves=30,
    )
)
def test_decode_message_on_any_msgpack_value(value: Any) -> None:
    """Well-formed msgpack of the wrong shape: the shape checks, not msgpack, must refuse it."""
    if isinstance(value, dict):
        value = dict(value, type=value.get("type", "append_entries"))
    _expect_value_or_kafka_error(decode_message, msgpack.packb(value, use_bin_type=True))


@FUZZ
@given(st.data())
def test_decode_command_on_arbitrary_and_mutated_commands(data: st.DataObject) -> None:
    seeds = [b"\x00" + encode_append_command(5, 1_700_000_000_000, [b"x" * 10, b"y"]), b"\x01"]
    raw = data.draw(st.one_of(st.binary(max_size=512), mutated(seeds)))
    result = _expect_value_or_kafka_error(decode_command, raw)
    if result is not None:
        assert isinstance(result.records, list) and all(type(r) is bytes for r in result.records)


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=20), st.integers(1, 1 << 16))
def test_frame_reader_never_holds_more_than_its_limit(chunks: list[bytes], limit: int) -> None:
    reader = FrameReader(limit)
    for chunk in chunks:
        try:
            bodies = reader.feed(chunk)
        except MessageTooLargeError:
            assert reader.buffered == 0
            return
        assert all(len(b) <= limit for b in bodies)
        assert reader.buffered <= limit + 4 + len(chunk)


@FUZZ
@given(st.integers(MAX_HANDSHAKE_FRAME_BYTES + 1, (1 << 32) - 1))
def test_an_oversized_announced_length_is_refused_before_the_body(length: int) -> None:
    reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
    with pytest.raises(MessageTooLargeError):
        reader.feed(struct.pack(">I", length) + b"\x00" * 64)
    assert reader.buffered == 0


@FUZZ
@given(st.data())
def test_handshake_bodies_from_a_stranger(data: st.DataObject) -> None:
    """A responder fed arbitrary or mutated hellos and proofs answers or refuses with a Kafka error."""
    initiator = InitiatorHandshake(auth_key=KEY, cluster_id=CLUSTER, node_id=2, peer_id=1)
    hello = initiator.hello()
    responder = ResponderHandshake(auth_key=KEY, cluster_id=CLUSTER, node_id=1, initiators=frozenset({2, 3}))
    first = data.draw(st.one_of(st.binary(max_size=MAX_HANDSHAKE_FRAME_BYTES), mutated([hello])))
    answer = _expect_value_or_kafka_error(responder.receive, first)
    if answer is None:
        return
    proof = data.draw(st.binary(max_size=MAX_HANDSHAKE_FRAME_BYTES))
    result = _expect_value_or_kafka_error(responder.receive, proof)
    assert result is None or result[1] is None or isinstance(result[1], Session)
    assert result is None, "a random proof must never open a session"


@FUZZ
@given(st.data())
def test_session_open_on_forged_and_mutated_frames(data: st.DataObject) -> None:
    sender = Session(send_key=b"k" * 32, recv_key=b"r" * 32)
    receiver = Session(send_key=b"r" * 32, recv_key=b"k" * 32)
    sealed = sender.seal({"type": "kl_keepalive"})
    body = data.draw(st.one_of(st.binary(max_size=256), mutated([sealed])))
    if body == sealed:
        assert receiver.open(body) == {"type": "kl_keepalive"}
        return
    with pytest.raises(KafkaError):
        receiver.open(body)


def test_frames_of_valid_messages_decode_in_any_chunking() -> None:
    stream = b"".join(frame(e) for e in _valid_encodings())
    for size in (1, 3, 7, 64, len(stream)):
        reader = FrameReader(1 << 20)
        bodies = []
        for i in range(0, len(stream), size):
            bodies += reader.feed(stream[i : i + size])
        assert [decode_message(b)["type"] for b in bodies] == [m["type"] for m in VALID_MESSAGES][: len(bodies)]
        assert len(bodies) == len(_valid_encodings())
