"""The replicated voter change (issue 26, KIP-853): encoding, the pure fold, and the dump."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from kraftlog.common.errors import CorruptMessageError
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VOTER_REMOVE,
    RaftVoter,
    VoterChange,
    VoterChangeError,
    apply_voter_change,
    decode_voter_change,
    encode_voter_change,
    is_voter_change,
    revert_voter_change,
    voters_from_wire,
    voters_in_force,
    voters_to_wire,
)
from kraftlog.quorum.raft._raft_messages import decode_command, encode_append_command
from kraftlog.quorum.raft._raft_voters import VoterNode
from kraftlog.quorum.raft._serializer import DumpCorruptError, DumpSerializer, FullDump, decode_dump, encode_dump

V1 = RaftVoter(1, "127.0.0.1", 9101, "AAAAAAAAAAAAAAAAAAAAAQ", "key-one")
V2 = RaftVoter(2, "127.0.0.1", 9102, "AAAAAAAAAAAAAAAAAAAAAg", "key-two")
V3 = RaftVoter(3, "::1", 9103, "AAAAAAAAAAAAAAAAAAAAAw", None)


def command(change: VoterChange) -> bytes:
    return b"\x00" + encode_voter_change(change)


def test_a_voter_change_round_trips_with_everything_a_new_voter_needs() -> None:
    for change in (
        VoterChange(VOTER_ADD, V2),
        VoterChange(VOTER_REMOVE, V3),
        VoterChange(VOTER_ADD, RaftVoter(0, "h", 1)),
    ):
        cmd = command(change)
        assert is_voter_change(cmd)
        assert decode_voter_change(cmd) == change
        assert decode_command(cmd) == cmd  # the apply path hands it to the membership decoder


def test_a_metadata_batch_is_never_taken_for_a_voter_change() -> None:
    batch = b"\x00" + encode_append_command(2, 3, [b"x"])
    assert not is_voter_change(batch)
    assert not is_voter_change(b"\x01")
    with pytest.raises(CorruptMessageError):
        decode_voter_change(batch)


@pytest.mark.parametrize(
    "body",
    [
        [2, "grow", {"id": 1, "host": "h", "port": 1}],
        [2, "add", {"id": -1, "host": "h", "port": 1}],
        [2, "add", {"id": 1, "host": "", "port": 1}],
        [2, "add", {"id": 1, "host": "h", "port": 70000}],
        [2, "add", {"id": 1, "host": "h"}],
        [2, "add", {"id": 1, "host": "h", "port": 1, "public.key": 7}],
        [2, "add", {"id": True, "host": "h", "port": 1}],
        [2, "add", ["not", "a", "map"]],
    ],
)
def test_malformed_voter_changes_are_refused(body: list[object]) -> None:
    with pytest.raises(CorruptMessageError):
        decode_voter_change(b"\x00" + msgpack.packb(body))


def test_apply_and_revert_are_inverse_and_refuse_what_does_not_fit() -> None:
    one = {1: V1}
    two = apply_voter_change(one, VoterChange(VOTER_ADD, V2))
    assert two == {1: V1, 2: V2} and one == {1: V1}, "a new map; the old one untouched"
    assert revert_voter_change(two, VoterChange(VOTER_ADD, V2)) == one
    back = apply_voter_change(two, VoterChange(VOTER_REMOVE, V2))
    assert back == one
    assert revert_voter_change(back, VoterChange(VOTER_REMOVE, V2)) == two
    with pytest.raises(VoterChangeError, match="already a voter"):
        apply_voter_change(two, VoterChange(VOTER_ADD, V2))
    with pytest.raises(VoterChangeError, match="endpoint"):
        apply_voter_change(two, VoterChange(VOTER_ADD, RaftVoter(9, V2.host, V2.port)))
    with pytest.raises(VoterChangeError, match="last voter"):
        apply_voter_change(one, VoterChange(VOTER_REMOVE, V1))
    wiped = RaftVoter(2, V2.host, V2.port, "AAAAAAAAAAAAAAAAAAAABA", V2.public_key)
    with pytest.raises(VoterChangeError, match="not a voter"):
        apply_voter_change(two, VoterChange(VOTER_REMOVE, wiped))  # another directory: another replica


def test_the_fold_skips_changes_that_do_not_fit_as_apply_does() -> None:
    commands = [
        b"\x00" + encode_append_command(1, 1, [b"r"]),
        command(VoterChange(VOTER_ADD, V2)),
        command(VoterChange(VOTER_ADD, V2)),  # a duplicate: skipped on every node alike
        command(VoterChange(VOTER_ADD, V3)),
        command(VoterChange(VOTER_REMOVE, V1)),
        b"\x00\x93\x02garbage",
    ]
    assert voters_in_force({1: V1}, commands) == {2: V2, 3: V3}


def test_a_voter_node_is_the_member_of_its_address() -> None:
    from pysyncobj.node import TCPNode

    node = VoterNode(V2)
    assert node == TCPNode("127.0.0.1:9102") and node.kl_voter is V2
    assert {node} - {TCPNode("127.0.0.1:9102")} == set()


def test_the_dump_keeps_the_committed_voter_set(tmp_path: Path) -> None:
    dump = FullDump((b"\x01", 5, 2), (b"\x01", 4, 2), ("127.0.0.1:9101",), {"k": 1}, (V1, V2, V3))
    assert decode_dump(encode_dump(dump)) == dump
    older = FullDump((b"\x01", 5, 2), (b"\x01", 4, 2), ("127.0.0.1:9101",), {})
    assert decode_dump(encode_dump(older)).voters == ()
    assert voters_from_wire(voters_to_wire([V3, V1])) == {1: V1, 3: V3}
    with pytest.raises(CorruptMessageError, match="twice"):
        voters_from_wire(voters_to_wire([V1]) * 2)
    with pytest.raises(DumpCorruptError):
        decode_dump(encode_dump(dump)[:-3])

    loaded: dict[int, RaftVoter] = {}
    serializer = DumpSerializer(tmp_path / "dump", state_provider=dict, state_loader=lambda s: None, fsync=False)
    serializer.track_voters(lambda: {1: V1, 2: V2}, loaded.update, VoterNode)
    serializer.serialize(str(tmp_path / "dump"), ((b"\x01", 5, 2), (b"\x01", 4, 2), []))
    last, prev, cluster = serializer.deserialize(str(tmp_path / "dump"))
    assert loaded == {1: V1, 2: V2}
    assert {n.kl_voter for n in cluster} == {V1, V2}


def test_the_voters_file_keeps_the_committed_set(tmp_path: Path) -> None:
    from kraftlog.quorum.raft import VOTERS_FILE, read_voters_file, write_voters_file

    assert read_voters_file(tmp_path) is None
    write_voters_file(tmp_path, {1: V1, 3: V3})
    assert read_voters_file(tmp_path) == {1: V1, 3: V3}
    (tmp_path / VOTERS_FILE).write_bytes(b"\xc1garbage")
    with pytest.raises(CorruptMessageError):
        read_voters_file(tmp_path)
