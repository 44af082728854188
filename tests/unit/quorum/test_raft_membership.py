"""The replicated voter change (issue 26, KIP-853): encoding, the pure fold, and the dump."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from kraftlog.common.errors import CorruptMessageError
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VOTER_REMOVE,
    VOTER_UPDATE,
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


def test_an_endpoint_update_moves_the_same_voter_and_nothing_else() -> None:
    """Issue 26 (UpdateRaftVoter): the voter keeps its id, directory id and key at a new endpoint;
    another directory is another replica, and an endpoint another voter holds is refused."""
    moved = RaftVoter(2, "127.0.0.2", 9202, V2.directory_id, V2.public_key)
    change = VoterChange(VOTER_UPDATE, moved, 5, (V1, moved))
    assert decode_voter_change(command(change)) == change
    two = {1: V1, 2: V2}
    assert apply_voter_change(two, change) == {1: V1, 2: moved}
    assert voters_in_force(two, [command(change)]) == {1: V1, 2: moved}
    with pytest.raises(VoterChangeError, match="not a voter"):
        apply_voter_change(two, VoterChange(VOTER_UPDATE, RaftVoter(2, "h", 1, "AAAAAAAAAAAAAAAAAAAABA")))
    with pytest.raises(VoterChangeError, match="endpoint"):
        apply_voter_change(two, VoterChange(VOTER_UPDATE, RaftVoter(2, V1.host, V1.port, V2.directory_id)))
    with pytest.raises(VoterChangeError):
        revert_voter_change({1: V1, 2: moved}, change)  # the fold reverts it: the entry names no old endpoint


class _Transport:
    def __init__(self) -> None:
        self.added: list[RaftVoter] = []

    def addNode(self, node: VoterNode) -> None:  # noqa: N802 - pysyncobj's name
        self.added.append(node.kl_voter)


def _reconciling(me: str, others: set[object], in_force: dict[int, RaftVoter]) -> tuple[object, _Transport]:
    """A stand-in for a `_RaftNode` with what `_kl_reconcile_voters` reads of it."""
    from types import SimpleNamespace

    from pysyncobj.node import TCPNode

    from kraftlog.quorum.raft._raft_voters import _VoterChangesNode

    transport = _Transport()
    node = SimpleNamespace(
        _kl_voters_dirty=True,
        _kl_voters_known=True,
        _kl_node_id=1,
        _kl_observer=False,
        _kl_transport=transport,
        _kl_log=SimpleNamespace(info=lambda *a, **k: None),
        _kl_voters_in_force=lambda: in_force,
        _SyncObj__selfNode=TCPNode(me),
        _SyncObj__otherNodes=others,
        _isLeader=lambda: False,
    )

    def update(nodes: set[object]) -> None:  # pysyncobj's: add and drop by address only
        for added in {n for n in nodes if n not in node._SyncObj__otherNodes}:
            transport.addNode(added)
        node._SyncObj__otherNodes = set(nodes)

    node._SyncObj__updateClusterConfiguration = update
    _VoterChangesNode._kl_reconcile_voters(node)  # type: ignore[arg-type]
    return node, transport


def test_a_voter_added_back_at_its_old_endpoint_is_known_by_its_new_key() -> None:
    """Issue 26: voter 2 removed and added back with a wiped directory (new directory id, new key)
    at the same endpoint is the same member to pysyncobj (nodes compare by address), so a node that
    sees both changes at once (a dump, a restart) kept the old voter -- and refused the new key."""
    again = RaftVoter(2, V2.host, V2.port, "AAAAAAAAAAAAAAAAAAAABA", "key-two-again")
    node, transport = _reconciling(V1.address, {VoterNode(V2)}, {1: V1, 2: again})
    assert transport.added == [again]
    assert [n.kl_voter for n in node._SyncObj__otherNodes] == [again]
    _node, unchanged = _reconciling(V1.address, {VoterNode(V2)}, {1: V1, 2: V2})
    assert unchanged.added == []


def test_this_node_is_itself_by_id_at_a_new_endpoint() -> None:
    """Issue 26: voter 1 restarted on another listener runs at its new endpoint while the log still
    names the old one: it never takes its own old entry for another member to dial."""
    node, transport = _reconciling("127.0.0.1:9301", {VoterNode(V2)}, {1: V1, 2: V2})
    assert transport.added == [] and {n.address for n in node._SyncObj__otherNodes} == {V2.address}


def test_observer_admission_is_bounded() -> None:
    """Issue 26: a voter admits any controller of the cluster that proves its key as an observer
    (Kafka lets any replica fetch as one), but tracks at most ``max_observers``: one more is refused,
    a tracked id reconnecting is not, and a voter's id never joins as an observer."""
    from types import SimpleNamespace

    from kraftlog.quorum.raft._identity import ObserverPeer
    from kraftlog.quorum.raft._transport import MAX_OBSERVERS, RaftTransport, TransportSettings

    assert TransportSettings(1, {}, "c", b"", "h").max_observers == MAX_OBSERVERS
    warned: list[dict[str, object]] = []
    transport = SimpleNamespace(
        _is_voter=True,
        _nodes={2: object()},
        _observers={10: object(), 11: object()},
        _max_observers=2,
        log=SimpleNamespace(warning=lambda event, **kw: warned.append(kw)),
    )

    def admit(node_id: int) -> bool:
        return RaftTransport._admit_observer(transport, ObserverPeer(node_id, "d", "k"))  # type: ignore[arg-type]

    assert admit(10) and not warned  # the same observer reconnecting replaces its older link
    assert not admit(12) and warned[-1]["reason"] == "observer_limit"
    assert not admit(2)  # a voter's id
    transport._observers = {10: object()}
    assert admit(12)
    transport._is_voter = False
    assert not admit(13)  # an observer admits no one
