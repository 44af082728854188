"""The controller quorum's Raft journal and full dump (`quorum.raft._journal`, `quorum.raft._serializer`), and
the pysyncobj 0.3.17 defect they guard against.

The defect: on ``append_entries`` a pysyncobj follower calls ``deleteEntriesFrom(prevLogIdx + 1)``
whenever it holds anything after ``prevLogIdx``, conflicting or not, and the stock journal deletes
at once. ``test_stale_append_entries_*`` drive three real ``SyncObj`` nodes (``autoTick=False``) over
an in-memory transport the test controls: a record is committed and acknowledged with the votes of
the leader and one follower, a stale duplicate of an earlier heartbeat reaches that follower, the
leader dies; with the stock journal the survivors elect a leader without the record and reuse its
offset, with `RaftJournal` the record survives.
"""

from __future__ import annotations

import os
import struct
import types
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import pysyncobj.serializer as pysyncobj_serializer
import pytest
from pysyncobj import FAIL_REASON
from pysyncobj.journal import FileJournal, MemoryJournal
from pysyncobj.node import TCPNode
from pysyncobj.serializer import Serializer
from pysyncobj.transport import Transport

from kraftlog.metadata_log._records import ConfigRecord, decode_record, encode_record
from kraftlog.quorum.raft import APPLY_OK, MetadataStateMachine, RawEntry, _RaftNode, build_syncobj_conf
from kraftlog.quorum.raft._journal import JournalCorruptError, RaftJournal
from kraftlog.quorum.raft._raft_messages import decode_message, encode_message
from kraftlog.quorum.raft._serializer import DumpCorruptError, DumpSerializer, FullDump, encode_dump, read_dump

NOOP = b"\x01"


def cmd(i: int) -> bytes:
    return b"\x00cmd-%d" % i


def fill(journal: Any, terms: list[int]) -> None:
    """Entries 1..len(terms) with the given terms (entry 1 is pysyncobj's initial no-op)."""
    for idx, term in enumerate(terms, start=1):
        journal.add(NOOP if idx == 1 else cmd(idx), idx, term)


def indexes(journal: Any) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in journal[0 : len(journal)]]


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record what every os.fsync call flushed (resolved path of the descriptor)."""
    calls: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


# ------------------------------------------------------------------------------- journal basics


def test_entries_survive_reopen_and_slices_work(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 2, 2])
    assert len(j) == 5
    assert j[-1] == (cmd(5), 5, 2)
    assert j[1:3] == [(cmd(2), 2, 1), (cmd(3), 3, 1)]
    assert j.term_of(4) == 2 and j.term_of(9) is None
    j.close()
    j2 = RaftJournal(tmp_path / "j")
    assert indexes(j2) == [(1, 0), (2, 1), (3, 1), (4, 2), (5, 2)]
    assert j2[2] == (cmd(3), 3, 1)


def test_non_contiguous_append_is_refused(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1])
    with pytest.raises(Exception, match="non-contiguous"):
        j.add(cmd(5), 5, 1)


def test_term_and_vote_persist_and_are_fsynced_before_return(tmp_path: Path, fsyncs: list[str]) -> None:
    j = RaftJournal(tmp_path / "j")
    fsyncs.clear()
    j.setCurrentTerm(7, "127.0.0.1:9001")
    # meta written to a temp file, fsynced, renamed, then the directory fsynced: all before return
    assert fsyncs == [str(tmp_path / "j.meta.tmp"), str(tmp_path)]
    j.close()
    j2 = RaftJournal(tmp_path / "j")
    assert j2.getCurrentTerm() == 7
    assert j2.getVotedForNodeId() == "127.0.0.1:9001"


def test_commit_index_hint_is_stored_lazily_after_a_journal_sync(tmp_path: Path, fsyncs: list[str]) -> None:
    j = RaftJournal(tmp_path / "j", sync_on_add=False)
    fill(j, [0, 1, 1])
    j.setRaftCommitIndex(3)
    fsyncs.clear()
    j.onOneSecondTimer()
    assert fsyncs[0] == str(tmp_path / "j"), "entries must be durable before a commit index naming them"
    assert str(tmp_path / "j.meta.tmp") in fsyncs
    j.close()
    assert RaftJournal(tmp_path / "j").getRaftCommitIndex() == 3


def test_fsync_paths(tmp_path: Path, fsyncs: list[str]) -> None:
    journal_file = str(tmp_path / "a")
    immediate = RaftJournal(tmp_path / "a", sync_on_add=True)
    fsyncs.clear()
    immediate.add(NOOP, 1, 0)
    assert fsyncs == [journal_file], "sync_on_add: fsync before add() returns"

    grouped = RaftJournal(tmp_path / "b", sync_on_add=False)
    fsyncs.clear()
    fill(grouped, [0, 1, 1])
    assert fsyncs == [] and grouped.dirty
    grouped.sync()
    grouped.sync()  # clean: no second fsync
    assert fsyncs == [str(tmp_path / "b")] and not grouped.dirty

    off = RaftJournal(tmp_path / "c", fsync=False)
    fsyncs.clear()
    fill(off, [0, 1])
    off.setCurrentTerm(1, None)
    off.sync()
    assert fsyncs == []


# ------------------------------------------------------------------------------- torn tails


def test_torn_tail_is_truncated_at_open(tmp_path: Path) -> None:
    path = tmp_path / "j"
    j = RaftJournal(path)
    fill(j, [0, 1, 1, 1])
    j.close()
    size = path.stat().st_size
    with open(path, "ab") as f:  # a record whose payload never made it to disk
        f.write(struct.pack("<II", 200, 0) + b"\x05" * 30)
    j2 = RaftJournal(path)
    assert indexes(j2) == [(1, 0), (2, 1), (3, 1), (4, 1)]
    assert j2.stats.torn_bytes == 38
    assert path.stat().st_size == size
    j2.add(cmd(5), 5, 1)  # appends right after the last good record
    j2.close()
    assert indexes(RaftJournal(path))[-1] == (5, 1)


def test_flipped_byte_in_last_record_drops_only_that_record(tmp_path: Path) -> None:
    path = tmp_path / "j"
    j = RaftJournal(path)
    fill(j, [0, 1, 1])
    j.close()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert indexes(RaftJournal(path)) == [(1, 0), (2, 1)]


def test_partial_frame_header_and_partial_file_header(tmp_path: Path) -> None:
    path = tmp_path / "j"
    j = RaftJournal(path)
    fill(j, [0, 1])
    j.close()
    with open(path, "ab") as f:
        f.write(b"\x10\x00")
    assert indexes(RaftJournal(path)) == [(1, 0), (2, 1)]

    fresh = tmp_path / "k"
    fresh.write_bytes(b"KLRAF")  # crash while the header of a new journal was written
    assert len(RaftJournal(fresh)) == 0


def test_damaged_header_or_meta_is_refused(tmp_path: Path) -> None:
    (tmp_path / "j").write_bytes(b"PYSYNCOBJ" + b"\0" * 40)
    with pytest.raises(JournalCorruptError):
        RaftJournal(tmp_path / "j")
    j = RaftJournal(tmp_path / "k")
    j.setCurrentTerm(3, None)
    j.close()
    meta = tmp_path / "k.meta"
    data = bytearray(meta.read_bytes())
    data[-1] ^= 1
    meta.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptError):
        RaftJournal(tmp_path / "k")


# ------------------------------------------------------------------------------- conflict-only truncation


def stale_append(journal: Any, prev_pos: int, entries: list[tuple[bytes, int, int]]) -> None:
    """What pysyncobj's follower does with append_entries(prevLogIdx, entries) when it has more."""
    journal.deleteEntriesFrom(prev_pos + 1)
    for entry in entries:
        journal.add(*entry)


def test_stock_journal_deletes_acknowledged_entries_on_a_stale_append(tmp_path: Path) -> None:
    stock = FileJournal(str(tmp_path / "stock"))
    fill(stock, [0, 1, 1, 1, 1])  # the follower acknowledged up to index 5
    stale_append(stock, 1, [(cmd(3), 3, 1)])  # duplicate of an old message: prev=2, entries=[3]
    assert [e[1] for e in stock[0 : len(stock)]] == [1, 2, 3], "stock pysyncobj drops acked 4 and 5"
    stock._destroy()


def test_raft_journal_keeps_acknowledged_entries_on_a_stale_append(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 1, 1])
    j.setCurrentTerm(1, None)
    size = (tmp_path / "j").stat().st_size
    stale_append(j, 1, [(cmd(3), 3, 1)])
    assert indexes(j) == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]
    assert j.stats.kept_matching == 1 and j.stats.kept_verified_tail == 2
    assert (tmp_path / "j").stat().st_size == size, "matching entries are not rewritten"
    j.close()
    assert len(RaftJournal(tmp_path / "j")) == 5


def test_conflicting_term_truncates_from_the_conflict(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 1, 1])
    j.setCurrentTerm(2, None)
    stale_append(j, 2, [(cmd(4), 4, 2), (cmd(5), 5, 2), (cmd(6), 6, 2)])
    assert indexes(j) == [(1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]
    assert j.stats.conflicts == 1
    j.close()
    assert indexes(RaftJournal(tmp_path / "j"))[-3:] == [(4, 2), (5, 2), (6, 2)]


def test_unverified_stale_tail_is_dropped_verified_tail_kept(tmp_path: Path) -> None:
    """Why the tail rule matters: after append_entries pysyncobj sets the follower's commit index to
    min(leaderCommit, *last log index*). Keeping an old-term tail the leader never confirmed would
    let a batch-limited message (prev=3, entries=[4], commit=5) commit our stale entry 5."""
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 2, 2])  # 4 and 5 came from a deposed leader of term 2
    j.setCurrentTerm(3, None)
    j.setRaftCommitIndex(3)
    stale_append(j, 2, [(cmd(4), 4, 2)])  # the term-3 leader has the same entry 4, nothing about 5
    assert indexes(j) == [(1, 0), (2, 1), (3, 1), (4, 2)]
    assert j.stats.dropped_unverified == 1

    k = RaftJournal(tmp_path / "k")
    fill(k, [0, 1, 1, 2, 3, 3])  # 5 and 6 were appended by the current (term 3) leader
    k.setCurrentTerm(3, None)
    k.setRaftCommitIndex(2)
    stale_append(k, 1, [])  # a stale heartbeat: prev=2, no entries
    assert [i for i, _ in indexes(k)] == [1, 2, 3, 4, 5, 6], "entry 4 precedes a current-term entry"

    m = RaftJournal(tmp_path / "m")
    fill(m, [0, 1, 1, 1])
    m.setCurrentTerm(4, None)
    m.setRaftCommitIndex(4)
    stale_append(m, 1, [])
    assert len(m) == 4, "committed entries are in every future leader's log"


def test_snapshot_install_keeps_the_matching_suffix(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 1, 1, 1])
    j.setCurrentTerm(1, None)
    j.clear()  # pysyncobj: __loadDumpFile(clearJournal=True) -> clear, add(prev), add(last)
    j.add(cmd(3), 3, 1)
    j.add(cmd(4), 4, 1)
    assert indexes(j) == [(3, 1), (4, 1), (5, 1), (6, 1)]
    assert j.stats.rebases == 1

    k = RaftJournal(tmp_path / "k")
    fill(k, [0, 1, 1])
    k.clear()
    k.add(cmd(7), 7, 2)
    k.add(cmd(8), 8, 2)
    assert indexes(k) == [(7, 2), (8, 2)]


def test_prefix_drop_waits_for_the_dump_to_be_durable(tmp_path: Path) -> None:
    seen: list[int] = []
    j = RaftJournal(tmp_path / "j", before_prefix_drop=lambda: seen.append(len(RaftJournal(tmp_path / "j"))))
    fill(j, [0, 1, 1, 1, 1])
    j.deleteEntriesTo(3)
    assert seen == [5], "the hook runs while the journal file still holds every entry"
    assert indexes(j) == [(4, 1), (5, 1)]
    j.add(cmd(6), 6, 1)
    j.close()
    assert indexes(RaftJournal(tmp_path / "j")) == [(4, 1), (5, 1), (6, 1)]


def test_align_with_dump_after_a_crash_between_dump_and_compaction(tmp_path: Path) -> None:
    j = RaftJournal(tmp_path / "j")
    fill(j, [0, 1, 1, 1, 1, 1])
    assert j.align_with_dump((cmd(3), 3, 1), (cmd(4), 4, 1)) == "prefix_dropped"
    assert indexes(j) == [(3, 1), (4, 1), (5, 1), (6, 1)], "entries after the dump are kept"
    assert j.align_with_dump((cmd(3), 3, 1), (cmd(4), 4, 1)) == "aligned"
    with pytest.raises(JournalCorruptError):
        j.align_with_dump((cmd(1), 1, 0), (cmd(2), 2, 1))
    k = RaftJournal(tmp_path / "k")
    fill(k, [0, 1])
    assert k.align_with_dump((cmd(9), 9, 2), (cmd(10), 10, 2)) == "reset"
    assert indexes(k) == [(9, 2), (10, 2)]


# ------------------------------------------------------------------------------- full dump


def test_serializer_fsyncs_before_rename_and_never_forks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsyncs: list[str]
) -> None:
    def no_fork() -> int:
        raise AssertionError("os.fork must never be called")

    monkeypatch.setattr(os, "fork", no_fork)
    events: list[tuple[str, ...]] = []
    real_replace = pysyncobj_serializer.atomicReplace

    def recording_replace(src: str, dst: str) -> Any:
        events.append(("fsyncs-so-far", *fsyncs))
        events.append(("rename", src, dst))
        return real_replace(src, dst)

    monkeypatch.setattr(pysyncobj_serializer, "atomicReplace", recording_replace)
    sm = MetadataStateMachine()
    sm.apply(raft_index=3, entry_term=1, epoch=1, timestamp_ms=5, records=[b"r0", b"r1"])
    dump_path = tmp_path / "raft.dump"
    ours = DumpSerializer(dump_path, state_provider=sm.to_state, state_loader=sm.from_state)
    # pysyncobj's own Serializer, asked to fork: the custom serializer turns fork off.
    ser = Serializer(str(dump_path), 2**16, True, ours.serialize, ours.deserialize, None)
    last, prev = (b"\x00x", 3, 1), (b"\x01", 2, 1)
    ser.serialize((None, last, prev, {TCPNode("127.0.0.1:1"), TCPNode("127.0.0.1:2")}), 2)
    state, serialized_id = ser.checkSerializing()
    assert (state, serialized_id) == (2, 2)  # SERIALIZER_STATE.SUCCESS for raft index 2
    tmp = str(dump_path) + ".tmp"
    assert events == [("fsyncs-so-far", tmp), ("rename", tmp, str(dump_path))]
    dump = read_dump(dump_path)
    assert dump.raft_last == last and dump.raft_prev == prev
    assert dump.cluster == ("127.0.0.1:1", "127.0.0.1:2")
    fsyncs.clear()
    ours.make_durable()
    assert fsyncs == [str(dump_path), str(tmp_path)]

    restored = MetadataStateMachine()
    loader = DumpSerializer(dump_path, state_provider=restored.to_state, state_loader=restored.from_state)
    data = Serializer(str(dump_path), 2**16, True, loader.serialize, loader.deserialize, None).deserialize()
    assert data[0] is None and data[1] == last and data[2] == prev
    assert data[3] == {TCPNode("127.0.0.1:1"), TCPNode("127.0.0.1:2")}
    assert restored.next_offset == 2
    assert restored.retained() == [RawEntry(0, 1, 5, b"r0"), RawEntry(1, 1, 5, b"r1")]


def test_corrupt_dump_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "raft.dump"
    path.write_bytes(encode_dump(FullDump((b"a", 2, 1), (b"b", 1, 0), (), {"next_offset": 0, "entries": []})))
    assert read_dump(path).raft_last == (b"a", 2, 1)
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(DumpCorruptError):
        read_dump(path)
    path.write_bytes(bytes(data[:20]))
    with pytest.raises(DumpCorruptError):
        read_dump(path)


def test_state_machine_fences_stale_epochs_and_keeps_unacknowledged_entries() -> None:
    sm = MetadataStateMachine(retain_entries=2)
    assert sm.apply(raft_index=2, entry_term=3, epoch=2, timestamp_ms=1, records=[b"x"])[0] == (1, 3)
    assert sm.next_offset == 0, "a batch decided in another epoch consumes no offset"
    assert sm.apply(raft_index=2, entry_term=3, epoch=3, timestamp_ms=1, records=[])[0][0] == 2
    assert sm.apply(raft_index=2, entry_term=3, epoch=True, timestamp_ms=1, records=[b"x"])[0][0] == 2
    for i in range(5):
        result, entries = sm.apply(raft_index=3 + i, entry_term=3, epoch=3, timestamp_ms=9, records=[b"r"])
        assert result == (APPLY_OK, i, i) and entries == [RawEntry(i, 3, 9, b"r")]
    assert len(sm.retained()) == 5, "nothing acknowledged yet: everything stays for the dump"
    sm.durable_offset = 3
    sm.trim()
    assert [e.offset for e in sm.retained()] == [3, 4]
    assert sm.end_offset_at(4) == 2 and sm.end_offset_at(100) == 5 and sm.end_offset_at(1) == 0


# ------------------------------------------------------------------------------- the defect, end to end


class MemNet:
    """An in-memory network the test drives: messages wait in per-link queues until delivered."""

    def __init__(self) -> None:
        self.transports: dict[str, MemTransport] = {}
        self.queues: dict[tuple[str, str], deque[bytes]] = defaultdict(deque)
        self.history: dict[tuple[str, str], list[bytes]] = defaultdict(list)
        self.blocked: set[tuple[str, str]] = set()
        self.dead: set[str] = set()

    def transport_class(self) -> type[Transport]:
        net = self

        class Bound(MemTransport):
            NET = net

        return Bound

    def deliver_all(self) -> int:
        delivered = 0
        for link, queue in list(self.queues.items()):
            src, dst = link
            if link in self.blocked or dst in self.dead or src in self.dead:
                continue
            while queue:
                self.transports[dst].receive(src, queue.popleft())
                delivered += 1
        return delivered

    def inject(self, src: str, dst: str, data: bytes) -> None:
        self.transports[dst].receive(src, data)


class MemTransport(Transport):
    NET: MemNet

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        self._me = selfNode.id
        self._others = list(otherNodes)
        self._ready = False
        self.NET.transports[self._me] = self

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:
        self._ready = True
        for node in self._others:
            self._onNodeConnected(node)

    def send(self, node: Any, message: Any) -> bool:
        data = encode_message(message)  # the wire's msgpack shapes, checked on the way in
        self.NET.queues[(self._me, node.id)].append(data)
        self.NET.history[(self._me, node.id)].append(data)
        return True

    def receive(self, src: str, data: bytes) -> None:
        self._onMessageReceived(TCPNode(src), decode_message(data))


ADDRS = ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]


class Cluster:
    def __init__(self, tmp_path: Path, stock: bool) -> None:
        self.net = MemNet()
        self.forced: list[str] = []  # nodes whose election timer the test fired
        self.nodes: dict[str, _RaftNode] = {}
        self.delivered: dict[str, list[RawEntry]] = {a: [] for a in ADDRS}
        for n, addr in enumerate(ADDRS, start=1):
            d = tmp_path / f"n{n}"
            d.mkdir()
            sm = MetadataStateMachine()
            ser = DumpSerializer(d / "raft.dump", state_provider=sm.to_state, state_loader=sm.from_state)
            journal: Any = MemoryJournal() if stock else RaftJournal(d / "raft.journal", sync_on_add=False)
            conf = build_syncobj_conf(
                election_timeout_ms=1_000_000,
                journal_file=d / "raft.journal",
                dump_file=d / "raft.dump",
                serializer=ser,
                compaction_entries=10_000,
                compaction_interval_s=10_000,
                auto_tick=False,
            )
            self.nodes[addr] = _RaftNode(
                self_address=addr,
                other_addresses=[a for a in ADDRS if a != addr],
                conf=conf,
                journal=journal,
                state_machine=sm,
                sink=self.delivered[addr].extend,
                node_id=n,
                transport_class=self.net.transport_class(),
            )

    def live(self) -> list[_RaftNode]:
        return [node for addr, node in self.nodes.items() if addr not in self.net.dead]

    def pump(self, rounds: int = 30) -> None:
        """Deliver and tick until quiet (bounded)."""
        for _ in range(rounds):
            for node in self.live():
                node.doTick(0)
            if self.net.deliver_all() == 0:
                for node in self.live():
                    node.doTick(0)
                if self.net.deliver_all() == 0:
                    return

    def elect(self, addr: str) -> None:
        self.forced.append(addr)
        self.timer_fired(addr)
        self.pump()

    def timer_fired(self, addr: str) -> None:
        """``addr``'s election timer fires. That is at least an election timeout after the last
        heartbeat anyone heard, so no voter still counts a leader as alive (pre-vote's window)."""
        for node in self.live():
            node._kl_leader_heard_at = None
        self.nodes[addr]._SyncObj__raftElectionDeadline = 0

    def propose(self, addr: str, value: str) -> list[Any]:
        node = self.nodes[addr]
        result: list[Any] = []
        node._kl_append(
            node.raftCurrentTerm,
            1_700_000_000_000,
            [encode_record(ConfigRecord(2, "t", "k", value))],
            callback=lambda res, err: result.append((res, err)),
        )
        self.pump()
        return result

    def values_at(self, addr: str) -> dict[int, str]:
        return {e.offset: decode_record(e.record).value for e in self.delivered[addr]}


def run_stale_duplicate_scenario(tmp_path: Path, *, stock: bool) -> Cluster:
    a, b, c = ADDRS
    cl = Cluster(tmp_path, stock)
    cl.elect(a)
    assert cl.nodes[a]._isLeader()
    # c is partitioned from a: the record X is committed by a and b alone.
    cl.net.blocked |= {(a, c), (c, a)}
    sent_before = len(cl.net.history[(a, b)])
    assert cl.propose(a, "X") == [((APPLY_OK, 0, 0), FAIL_REASON.SUCCESS)], "X is acknowledged"
    assert cl.values_at(a) == {0: "X"}
    # A stale duplicate of the last heartbeat a sent b *before* X (prevLogIdx = 2, no entries).
    stale = next(
        m
        for m in reversed(cl.net.history[(a, b)][:sent_before])
        if decode_message(m)["type"] == "append_entries" and not decode_message(m).get("entries")
    )
    assert decode_message(stale)["prevLogIdx"] == 2
    cl.net.inject(a, b, stale)
    # a dies; c comes back.
    cl.net.dead.add(a)
    cl.net.blocked.clear()
    cl.elect(c)
    if not (cl.nodes[b]._isLeader() or cl.nodes[c]._isLeader()):
        cl.elect(b)
    leader = next(addr for addr in (b, c) if cl.nodes[addr]._isLeader())
    cl.propose(leader, "Y")
    cl.pump()
    return cl


def test_stale_append_entries_loses_a_committed_record_with_the_stock_journal(tmp_path: Path) -> None:
    """pysyncobj 0.3.17 as shipped: the acknowledged record X is gone from the new leader's log,
    its offset is reused for Y, and b, which had already applied X, now disagrees with c."""
    cl = run_stale_duplicate_scenario(tmp_path, stock=True)
    b, c = ADDRS[1], ADDRS[2]
    assert cl.nodes[c]._isLeader(), "b's log was shortened, so c (which never had X) won"
    assert cl.values_at(c) == {0: "Y"}, "committed record X lost; offset 0 reused"
    assert cl.values_at(b) == {0: "X", 1: "Y"}, "b applied X before losing it: the replicas diverged"
    assert "X" not in [cmd_value for cmd_value in cl.values_at(c).values()]


def test_stale_append_entries_keeps_every_committed_record_with_raft_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness's timers are 1000 s; take the jitter before a refuser's own campaign out of them.
    monkeypatch.setattr("kraftlog.quorum.raft._raft_node.random", types.SimpleNamespace(uniform=lambda a, b: 0.0))
    cl = run_stale_duplicate_scenario(tmp_path, stock=False)
    b, c = ADDRS[1], ADDRS[2]
    assert cl.nodes[b]._isLeader(), "b kept X, so only b could win the election"
    # b refused c (whose log is behind) and campaigned at once: its timer (1000 s here) never fired.
    assert cl.forced == [ADDRS[0], c]
    assert cl.values_at(b) == {0: "X", 1: "Y"} and cl.values_at(c) == {0: "X", 1: "Y"}
    assert cl.nodes[b]._kl_journal.stats.kept_verified_tail >= 1


def test_split_vote_after_the_leader_dies_is_retried_before_the_election_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both survivors campaign in the same term and vote for themselves: neither can win. Each must
    re-campaign after a short random delay, not after a whole new election timeout (1000 s here)."""
    delays = iter([0.0, 1.0])  # the first rival re-campaigns at once, the second one later
    monkeypatch.setattr(
        "kraftlog.quorum.raft._raft_node.random", types.SimpleNamespace(uniform=lambda lo, hi: lo * next(delays))
    )
    a, b, c = ADDRS
    cl = Cluster(tmp_path, stock=False)
    cl.elect(a)
    assert cl.propose(a, "X") == [((APPLY_OK, 0, 0), FAIL_REASON.SUCCESS)]
    cl.net.dead.add(a)
    # Both timers fire; both win their pre-vote rounds (a pre-vote records no vote), and both
    # campaign before either vote request is delivered: a split vote in the same term.
    for addr in (b, c):
        cl.timer_fired(addr)
        cl.nodes[addr].doTick(0)
    cl.net.deliver_all()  # the pre-vote requests
    cl.net.deliver_all()  # the grants
    for addr in (b, c):
        cl.nodes[addr].doTick(0)
    term = cl.nodes[b].raftCurrentTerm
    assert cl.nodes[c].raftCurrentTerm == term and not cl.nodes[b]._isLeader() and not cl.nodes[c]._isLeader()
    cl.pump()
    leaders = [addr for addr in (b, c) if cl.nodes[addr]._isLeader()]
    assert len(leaders) == 1, "one rival re-campaigned in a new term and won without its timer firing"
    assert cl.nodes[leaders[0]].raftCurrentTerm == term + 1
    cl.propose(leaders[0], "Y")
    cl.pump()
    assert cl.values_at(b) == cl.values_at(c) == {0: "X", 1: "Y"}
