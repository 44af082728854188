"""The controller Raft wire format without sockets: frames, handshake, sessions, message shapes,
commands (issue 11: no pickle on any socket, peers bound to cluster and voter id)."""

from __future__ import annotations

import os
import pickle
import random
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
from pysyncobj.journal import MemoryJournal
from pysyncobj.transport import Transport

from kraftlog.common.errors import (
    CorruptMessageError,
    InconsistentClusterIdError,
    InconsistentVoterSetError,
    MessageTooLargeError,
    RecordListTooLargeError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
)
from kraftlog.quorum.raft import APPLY_INVALID, MetadataStateMachine, _RaftNode, build_syncobj_conf
from kraftlog.quorum.raft._raft_messages import (
    MAX_COMMAND_BYTES,
    decode_command,
    decode_message,
    encode_append_command,
    encode_message,
    split_append_entries,
)
from kraftlog.quorum.raft._serializer import DumpSerializer
from kraftlog.quorum.raft._transport import RefusalLog
from kraftlog.quorum.raft._wire import (
    MAX_FRAME_BYTES,
    MAX_HANDSHAKE_FRAME_BYTES,
    FrameReader,
    InitiatorHandshake,
    ResponderHandshake,
    Session,
    derive_auth_key,
    frame,
)

CLUSTER = "TransportTestCluster00A"
KEY = derive_auth_key("secret", CLUSTER, iterations=10)


def nonces(seed: int) -> Any:
    rng = random.Random(seed)
    return lambda n: bytes(rng.randrange(256) for _ in range(n))


def initiator(
    *, key: bytes = KEY, cluster: str = CLUSTER, me: Any = 3, peer: int = 1, seed: int = 1
) -> InitiatorHandshake:
    return InitiatorHandshake(auth_key=key, cluster_id=cluster, node_id=me, peer_id=peer, nonce=nonces(seed))


def responder(
    *, key: bytes = KEY, me: int = 1, initiators: frozenset[int] = frozenset({2, 3}), seed: int = 2
) -> ResponderHandshake:
    return ResponderHandshake(auth_key=key, cluster_id=CLUSTER, node_id=me, initiators=initiators, nonce=nonces(seed))


def handshake(i: InitiatorHandshake, r: ResponderHandshake) -> tuple[Session, Session]:
    challenge, none = r.receive(i.hello())
    assert challenge is not None and none is None
    proof, none = i.receive(challenge)
    assert proof is not None and none is None
    confirm, r_session = r.receive(proof)
    assert confirm is not None and r_session is not None
    nothing, i_session = i.receive(confirm)
    assert nothing is None and i_session is not None
    return i_session, r_session


def hello_with(**fields: Any) -> bytes:
    base = msgpack.unpackb(initiator().hello())
    base.update(fields)
    return msgpack.packb({k: v for k, v in base.items() if v is not _DROP}, use_bin_type=True)


_DROP = object()


# ------------------------------------------------------------------------------------------ frames


def test_frames_come_out_whole_however_the_bytes_are_cut() -> None:
    bodies = [b"", b"a", b"x" * 300, os.urandom(5000)]
    stream = b"".join(frame(b) for b in bodies)
    for cut in (1, 3, 4, 7, 512, len(stream)):
        reader = FrameReader(MAX_FRAME_BYTES)
        got: list[bytes] = []
        for pos in range(0, len(stream), cut):
            got += reader.feed(stream[pos : pos + cut])
        assert got == bodies and reader.buffered == 0


def test_an_oversized_length_is_refused_before_its_body_is_buffered() -> None:
    reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
    assert reader.feed(struct.pack(">I", 2**31)[:3]) == []
    with pytest.raises(MessageTooLargeError):
        reader.feed(struct.pack(">I", 2**31)[3:])
    assert reader.buffered == 0
    # the limit is checked on the header alone, even if body bytes arrived with it
    reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
    with pytest.raises(MessageTooLargeError):
        reader.feed(frame(b"x" * (MAX_HANDSHAKE_FRAME_BYTES + 1)))
    assert reader.buffered == 0


def test_the_reader_asks_for_no_more_than_the_current_frame() -> None:
    reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
    assert reader.wanted() == 4
    reader.feed(struct.pack(">I", 10))
    assert reader.wanted() == 10
    reader.feed(b"12345")
    assert reader.wanted() == 5
    assert reader.feed(b"67890") == [b"1234567890"]
    assert reader.wanted() == 4


def test_frame_limits_fit_the_largest_message_pysyncobj_is_configured_to_send(tmp_path: Path) -> None:
    ser = DumpSerializer(tmp_path / "d", state_provider=dict, state_loader=lambda s: None)
    conf = build_syncobj_conf(
        election_timeout_ms=1000,
        journal_file=tmp_path / "j",
        dump_file=tmp_path / "d",
        serializer=ser,
        compaction_entries=10,
        compaction_interval_s=10,
    )
    # one entry never reaches the batch size: pysyncobj's pickled "transmission" path is never taken
    assert conf.appendEntriesBatchSizeBytes > MAX_COMMAND_BYTES
    # a batch ends with the entry that crosses the size: less than two maximal commands
    largest = [(b"\x00" + b"x" * (MAX_COMMAND_BYTES - 1), 10**12, 10**6)] * 2
    msg = {
        "type": "append_entries",
        "term": 10**6,
        "commit_index": 10**12,
        "entries": largest,
        "prevLogIdx": 10**12,
        "prevLogTerm": 10**6,
    }
    assert len(encode_message(msg)) + 16 <= MAX_FRAME_BYTES
    assert conf.logCompactionBatchSize * 2 < MAX_FRAME_BYTES


# ------------------------------------------------------------------------------------------ handshake


def test_a_handshake_gives_both_sides_matching_sessions() -> None:
    i_session, r_session = handshake(initiator(), responder())
    msg = {"type": "request_vote", "term": 7, "last_log_index": 12, "last_log_term": 6}
    assert r_session.open(i_session.seal(msg)) == msg
    back = {"type": "response_vote", "term": 7}
    assert i_session.open(r_session.seal(back)) == back


def test_the_password_never_travels_in_the_handshake() -> None:
    i, r = initiator(), responder()
    challenge, _ = r.receive(i.hello())
    assert challenge is not None
    proof, _ = i.receive(challenge)
    assert proof is not None
    confirm, _ = r.receive(proof)
    assert confirm is not None
    wire = i.hello() + challenge + proof + confirm
    assert b"secret" not in wire and KEY not in wire


def test_a_wrong_password_fails_on_either_side() -> None:
    wrong = derive_auth_key("guess", CLUSTER, iterations=10)
    with pytest.raises(SaslAuthenticationFailedError):
        handshake(initiator(key=wrong), responder())
    with pytest.raises(SaslAuthenticationFailedError):
        handshake(initiator(), responder(key=wrong))


def test_the_same_password_in_another_cluster_is_another_key() -> None:
    assert derive_auth_key("secret", "A", iterations=10) != derive_auth_key("secret", "B", iterations=10)


def test_a_replayed_handshake_does_not_authenticate() -> None:
    """An eavesdropper records a voter's hello and proof, and plays them to the node later."""
    i, r = initiator(), responder(seed=2)
    hello = i.hello()
    challenge, _ = r.receive(hello)
    assert challenge is not None
    proof, _ = i.receive(challenge)
    assert proof is not None
    replay_target = responder(seed=99)  # a later connection draws a fresh nonce
    replay_target.receive(hello)
    with pytest.raises(SaslAuthenticationFailedError):
        replay_target.receive(proof)


def test_a_responder_that_cannot_prove_the_password_gets_no_session() -> None:
    """A fake node (e.g. one that took over a voter's address) replays an old confirmation."""
    old_r, i_old = responder(seed=6), initiator(seed=5)
    challenge, _ = old_r.receive(i_old.hello())
    assert challenge is not None
    proof, _ = i_old.receive(challenge)
    assert proof is not None
    old_confirm, _ = old_r.receive(proof)
    fresh = initiator(seed=7)
    fresh.hello()
    fresh.receive(challenge)  # the fake replays the old challenge too
    with pytest.raises(SaslAuthenticationFailedError):
        fresh.receive(old_confirm)


def test_a_peer_of_another_cluster_is_refused_at_its_hello() -> None:
    r = responder()
    with pytest.raises(InconsistentClusterIdError):
        r.receive(hello_with(cluster="SomeOtherCluster000000"))


@pytest.mark.parametrize(
    "fields",
    [
        {"from": 99},
        {"from": 1},
        {"from": 4},
        {"to": 2},
    ],
)
def test_unknown_self_or_non_dialling_voter_ids_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(InconsistentVoterSetError):
        responder(initiators=frozenset({3})).receive(hello_with(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"from": "readonly"},
        {"from": -1},
        {"from": True},
        {"from": 2**40},
        {"nonce": b"short"},
        {"cluster": ""},
        {"cluster": "x" * 100},
        {"cluster": 7},
        {"extra": 1},
        {"nonce": _DROP},
        {"proto": "pysyncobj"},
    ],
)
def test_malformed_hellos_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(CorruptMessageError):
        responder().receive(hello_with(**fields))


@pytest.mark.parametrize("version", [0, 2, True, "1"])
def test_other_protocol_versions_are_refused(version: Any) -> None:
    with pytest.raises(UnsupportedVersionError):
        responder().receive(hello_with(v=version))


def test_pickles_and_garbage_are_refused_without_running_anything(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.mkdir, (str(marker),))

    payloads = [
        pickle.dumps(RunsCode()),
        pickle.dumps("readonly"),
        pickle.dumps(["status"]),
        b"",
        b"\xc1",
        os.urandom(64),
        msgpack.packb([1, 2, 3]),
    ]
    for body in payloads:
        with pytest.raises(CorruptMessageError):
            responder().receive(body)
        with pytest.raises(CorruptMessageError):
            decode_message(body)
    with pytest.raises(CorruptMessageError):
        decode_command(b"\x00" + pickle.dumps((0, (1, 2, [b"r"]))))
    with pytest.raises(CorruptMessageError):
        decode_command(b"\x00" + pickle.dumps(RunsCode()))
    with pytest.raises(CorruptMessageError):  # pysyncobj's membership command
        decode_command(b"\x02" + pickle.dumps(RunsCode()))
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ session


def test_tampered_replayed_or_reordered_frames_fail_to_open() -> None:
    i_session, r_session = handshake(initiator(), responder())
    msgs = [{"type": "response_vote", "term": t} for t in range(3)]
    sealed = [i_session.seal(m) for m in msgs]
    assert r_session.open(sealed[0]) == msgs[0]
    with pytest.raises(CorruptMessageError):
        r_session.open(sealed[0])  # replayed
    i2, r2 = handshake(initiator(seed=11), responder(seed=12))
    frames = [i2.seal(m) for m in msgs]
    with pytest.raises(CorruptMessageError):
        r2.open(frames[1])  # reordered (frame 0 skipped)
    i3, r3 = handshake(initiator(seed=13), responder(seed=14))
    body = bytearray(i3.seal(msgs[0]))
    body[3] ^= 1
    with pytest.raises(CorruptMessageError):
        r3.open(bytes(body))  # tampered
    # a frame sealed for one connection does not open on another
    i4, r4 = handshake(initiator(seed=15), responder(seed=16))
    with pytest.raises(CorruptMessageError):
        r4.open(sealed[1])


# ------------------------------------------------------------------------------------------ messages

NOOP = b"\x01"
CMD = b"\x00" + encode_append_command(3, 1_700_000_000_000, [b"rec1", b"rec2"])

#: Every message kind pysyncobj 0.3.17 sends with kraftlog's configuration, as it builds them.
PYSYNCOBJ_MESSAGES: list[dict[str, Any]] = [
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [(NOOP, 10, 3), (CMD, 11, 3)],
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    },
    {"type": "append_entries", "term": 3, "commit_index": 9, "entries": [], "prevLogIdx": 11, "prevLogTerm": 3},
    {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": (b"KLRAFTD1...", True, False)},
    {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": None},
    {"type": "request_vote", "term": 4, "last_log_index": 11, "last_log_term": 3},
    {"type": "response_vote", "term": 4},
    {"type": "timeout_now", "term": 4},
    {"type": "next_node_idx", "next_node_idx": 12, "reset": False, "success": True},
    {"type": "apply_command", "command": CMD, "request_id": 5},
    {"type": "apply_command", "command": CMD},
    {"type": "apply_command_response", "request_id": 5, "log_idx": 12, "log_term": 4},
    {"type": "apply_command_response", "request_id": 5, "error": 3},
    {"type": "kl_keepalive"},
]


@pytest.mark.parametrize("message", PYSYNCOBJ_MESSAGES, ids=lambda m: m["type"])
def test_every_message_pysyncobj_sends_round_trips_with_its_python_types(message: dict[str, Any]) -> None:
    decoded = decode_message(encode_message(message))
    assert decoded == message
    if "entries" in message:
        assert all(type(e) is tuple for e in decoded["entries"])
    if message.get("serialized") is not None:
        assert type(decoded["serialized"]) is tuple


BAD_MESSAGES: list[dict[str, Any]] = [
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "transmission": "finish",
        "data": b"x",
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    },  # pysyncobj's chunked form: pickled on arrival
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [(b"\x02pickle", 10, 3)],
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    },  # a membership command (a pickle) in the log
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [(b"", 10, 3)],
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    },
    {"type": "append_entries", "term": 3, "commit_index": 9, "entries": [(CMD, 10)], "prevLogIdx": 9, "prevLogTerm": 2},
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [("text", 10, 3)],
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    },
    {"type": "append_entries", "term": 3, "commit_index": 9, "entries": (), "prevLogIdx": 9},
    {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": False},
    {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": (b"x", 1, 0)},
    {"type": "append_entries", "term": "3", "commit_index": 9, "serialized": None},
    {"type": "request_vote", "term": (4,), "last_log_index": 11, "last_log_term": 3},  # the TypeError
    {"type": "request_vote", "term": -4, "last_log_index": 11, "last_log_term": 3},
    {"type": "request_vote", "term": 4.0, "last_log_index": 11, "last_log_term": 3},
    {"type": "request_vote", "term": 4, "last_log_index": 11},
    {"type": "response_vote", "term": True},
    {"type": "response_vote", "term": 4, "extra": 1},
    {"type": "next_node_idx", "next_node_idx": 12, "reset": 0, "success": True},
    {"type": "apply_command", "command": b"\x02x", "request_id": 5},
    {"type": "apply_command", "command": b"\x00" + b"x" * (MAX_COMMAND_BYTES + 1)},
    {"type": "apply_command_response", "request_id": 5},
    {"type": "apply_command_response", "request_id": 5, "error": 3, "log_idx": 1},
    {"type": "status"},  # pysyncobj's utility commands are not served
    {"type": None},
    {"term": 4},
]


@pytest.mark.parametrize("message", BAD_MESSAGES, ids=lambda m: str(m.get("type")))
def test_malformed_messages_are_refused(message: dict[str, Any]) -> None:
    with pytest.raises(CorruptMessageError):
        decode_message(msgpack.packb(message, use_bin_type=True))


def test_a_message_with_a_type_msgpack_lacks_is_not_sent() -> None:
    from pysyncobj.node import TCPNode

    with pytest.raises(CorruptMessageError):
        encode_message({"type": "apply_command", "command": TCPNode("127.0.0.1:1")})


def test_a_large_append_entries_splits_into_consecutive_ones() -> None:
    entries = [(NOOP, idx, 3) for idx in range(10, 15)]
    msg = {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": entries,
        "prevLogIdx": 9,
        "prevLogTerm": 2,
    }
    head, tail = split_append_entries(msg)
    assert head["entries"] + tail["entries"] == entries
    assert (head["prevLogIdx"], head["prevLogTerm"]) == (9, 2)
    assert (tail["prevLogIdx"], tail["prevLogTerm"]) == (head["entries"][-1][1], head["entries"][-1][2])
    assert split_append_entries(dict(msg, entries=entries[:1])) is None
    assert split_append_entries({"type": "request_vote"}) is None


# ------------------------------------------------------------------------------------------ commands


def test_append_commands_round_trip() -> None:
    cmd = decode_command(CMD)
    assert cmd is not None and (cmd.epoch, cmd.timestamp_ms, cmd.records) == (3, 1_700_000_000_000, [b"rec1", b"rec2"])
    assert decode_command(NOOP) is None
    for bad in (
        b"",
        b"\x03" + pickle.dumps(1),
        b"\x00" + msgpack.packb([2, 3, 4, []]),
        b"\x00" + msgpack.packb([1, 3, 4, ["text"]]),
        b"\x00" + msgpack.packb([1, "3", 4, []]),
        b"\x00" + msgpack.packb([True, 3, 4, []]),
    ):
        with pytest.raises(CorruptMessageError):
            decode_command(bad)


class _Offline(Transport):
    """A transport that goes nowhere: the node is driven by hand."""

    def send(self, node: Any, message: Any) -> bool:
        return False


def _offline_node(tmp_path: Path) -> _RaftNode:
    sm = MetadataStateMachine()
    ser = DumpSerializer(tmp_path / "raft.dump", state_provider=sm.to_state, state_loader=sm.from_state)
    conf = build_syncobj_conf(
        election_timeout_ms=1_000_000,
        journal_file=tmp_path / "raft.journal",
        dump_file=tmp_path / "raft.dump",
        serializer=ser,
        compaction_entries=10_000,
        compaction_interval_s=10_000,
        auto_tick=False,
    )
    return _RaftNode(
        self_address="10.0.0.1:1",
        other_addresses=["10.0.0.2:1", "10.0.0.3:1"],
        conf=conf,
        journal=MemoryJournal(),
        state_machine=sm,
        sink=lambda entries: None,
        node_id=1,
        transport_class=_Offline,
    )


def test_a_committed_pickle_is_refused_at_apply_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.mkdir, (str(marker),))

    node = _offline_node(tmp_path)
    try:
        for command in (
            b"\x00" + pickle.dumps(RunsCode()),
            b"\x02" + pickle.dumps(RunsCode()),
            b"\x03" + pickle.dumps(RunsCode()),
        ):
            result = node._SyncObj__doApplyCommand(command)
            assert result[0] == APPLY_INVALID
        assert node._SyncObj__doApplyCommand(NOOP) is None
        assert node._kl_sm.next_offset == 0, "a refused entry takes no offset"
        assert not marker.exists()
    finally:
        node._doDestroy()


def test_a_batch_too_large_for_a_frame_is_refused_at_propose(tmp_path: Path) -> None:
    node = _offline_node(tmp_path)
    try:
        with pytest.raises(RecordListTooLargeError):
            node._kl_append(1, 0, [b"x" * MAX_COMMAND_BYTES])
    finally:
        node._doDestroy()


# ------------------------------------------------------------------------------------------ refusal log


class _Lines:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})


def test_refusals_are_rate_limited_and_count_what_was_suppressed() -> None:
    clock_value = [0.0]
    lines = _Lines()
    log = RefusalLog(lines, clock=lambda: clock_value[0], rate=2.0, burst=3.0)
    results = [log(peer=f"10.0.0.9:{p}", reason="malformed_frame") for p in range(10)]
    assert results == [True] * 3 + [False] * 7
    clock_value[0] = 1.0  # two tokens later
    assert log(peer="10.0.0.9:99", reason="malformed_frame")
    assert lines.lines[-1] == {
        "event": "raft_peer_refused",
        "peer": "10.0.0.9:99",
        "reason": "malformed_frame",
        "suppressed": 7,
    }
    assert log(peer="10.0.0.9:100", reason="malformed_frame")
    assert "suppressed" not in lines.lines[-1]


def test_a_journal_with_pickled_commands_is_refused_at_start(tmp_path: Path) -> None:
    """A journal of the pickle era would be replayed with its commands refused and their offsets
    reused: the controller must not start on it (nothing is unpickled to find out)."""
    import asyncio

    from kraftlog.quorum.raft import JOURNAL_FILE, MetadataQuorum, QuorumConfigError
    from kraftlog.quorum.raft._journal import RaftJournal

    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.mkdir, (str(marker),))

    raft_dir = tmp_path / "raft"
    raft_dir.mkdir()
    journal = RaftJournal(raft_dir / JOURNAL_FILE)
    journal.add(NOOP, 1, 1)
    journal.add(CMD, 2, 1)
    journal.add(b"\x00" + pickle.dumps(RunsCode()), 3, 1)
    journal.close()

    async def body() -> None:
        quorum = MetadataQuorum(
            node_id=1,
            voters={1: ("127.0.0.1", 1)},
            data_dir=raft_dir,
            password="pw",
            cluster_id=CLUSTER,
            loop=asyncio.get_running_loop(),
            on_committed=lambda entries: None,
            on_leader_change=lambda leader, epoch: None,
        )
        with pytest.raises(QuorumConfigError, match="raft index 3"):
            await quorum.start()

    asyncio.run(body())
    assert not marker.exists()


def test_importing_the_transport_leaves_socket_inet_ntop_working() -> None:
    """pysyncobj.win_inet_pton replaces socket.inet_ntop with a Windows-only stub on every platform."""
    import socket

    import pysyncobj.tcp_connection  # noqa: F401 - the import that replaced it

    import kraftlog.quorum.raft._transport  # noqa: F401 - the import that must put it back

    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
