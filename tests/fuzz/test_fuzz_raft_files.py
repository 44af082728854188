"""Fuzz the controller quorum's own files: the Raft journal and its ``.meta`` (`RaftJournal` opening
them) and the full dump (`decode_dump`, `read_dump`). The Raft wire frames are another engineer's
(the transport is being replaced) and are not fuzzed here.

Property: opening or decoding returns or raises the quorum's typed error (`JournalCorruptError`,
`DumpCorruptError`); nothing else, no hang, memory bounded by the file. Records are CRC-framed, so a
journal opened over mutated bytes holds a prefix of the entries written; bodies mutated and framed
again with a correct CRC reach the decoders behind the CRC.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, any_bytes, bounded_call, mutated
from _metadata_strategies import msgpack_values
from hypothesis import example, given
from hypothesis import strategies as st

from kraftlog.common import encode_crc_frame
from kraftlog.quorum.raft._journal import META_MAGIC, JournalCorruptError, RaftJournal
from kraftlog.quorum.raft._serializer import DUMP_MAGIC, DumpCorruptError, FullDump, decode_dump, encode_dump, read_dump

pytestmark = pytest.mark.timeout(TIMEOUT)

# ------------------------------------------------------------------ journal

_commands = st.binary(max_size=40)


@st.composite
def journal_entries(draw: st.DrawFn) -> list[tuple[bytes, int, int]]:
    first = draw(st.integers(1, 10_000))
    terms = sorted(draw(st.lists(st.integers(0, 50), min_size=0, max_size=6)))
    return [(draw(_commands), first + i, t) for i, t in enumerate(terms)]


def _write_journal(
    path: Path, entries: list[tuple[bytes, int, int]], term: int = 3, voted_for: Any = "127.0.0.1:9093"
) -> None:
    j = RaftJournal(path, fsync=False)
    for command, idx, t in entries:
        j.add(command, idx, t)
    j.setCurrentTerm(term, voted_for)
    j.setRaftCommitIndex(entries[-1][1] if entries else 1)
    j.close()


def _open(path: Path) -> RaftJournal | None:
    try:
        return RaftJournal(path, fsync=False)
    except JournalCorruptError:
        return None


@FUZZ
@given(journal_entries(), st.data())
def test_journal_file_mutated(entries: list[tuple[bytes, int, int]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raft.journal"
        _write_journal(path, entries)
        path.write_bytes(data.draw(mutated(path.read_bytes())))
        j = _open(path)
        if j is None:
            return
        try:
            got = list(j[:])
            assert got == entries[: len(got)]
            if got:  # usable afterwards: the next entry appends after the kept prefix
                j.add(b"next", got[-1][1] + 1, got[-1][2])
                assert len(j) == len(got) + 1
        finally:
            j.close()


@FUZZ
@given(any_bytes)
def test_journal_random_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raft.journal"
        path.write_bytes(raw)
        j = _open(path)
        if j is not None:
            j.close()


def _meta_file(body: bytes) -> bytes:
    return META_MAGIC + encode_crc_frame(body, "little")


@FUZZ
@given(st.data())
def test_journal_meta_mutated(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raft.journal"
        _write_journal(path, [(b"a", 1, 1)], term=7)
        meta = path.with_name(path.name + ".meta")
        meta.write_bytes(data.draw(mutated(meta.read_bytes()) | any_bytes))
        j = _open(path)
        if j is not None:  # CRC-protected: a meta file that opens is the one written
            assert (j.getCurrentTerm(), j.getVotedForNodeId()) == (7, "127.0.0.1:9093")
            j.close()


_meta_maps = st.fixed_dictionaries(
    {},
    optional={
        "term": st.integers(0, 100) | msgpack_values,
        "voted_for": msgpack_values,
        "commit_index": st.integers(0, 100) | msgpack_values,
    },
)


@FUZZ
@given(_meta_maps.map(msgpack.packb) | msgpack_values.map(msgpack.packb) | mutated(_meta_maps.map(msgpack.packb)))
@example(msgpack.packb({"term": "x"}))  # int("x"): ValueError escaped
@example(msgpack.packb({"term": [1]}))  # int([1]): TypeError escaped
@example(b"\xc1")  # a byte msgpack never uses: its own exception escaped
def test_journal_meta_body_with_valid_crc(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raft.journal"
        path.with_name(path.name + ".meta").write_bytes(_meta_file(body))
        j = _open(path)
        if j is not None:
            assert isinstance(j.getCurrentTerm(), int) and isinstance(j.getRaftCommitIndex(), int)
            j.close()


def test_journal_record_with_a_huge_length_is_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "raft.journal"
    _write_journal(path, [(b"a", 1, 1)])
    with open(path, "ab") as fh:
        fh.write(struct.pack("<II", 0xFFFFFFFF, 0) + b"\x00" * 32)
    j, error = bounded_call(lambda: RaftJournal(path, fsync=False))
    assert error is None and list(j[:]) == [(b"a", 1, 1)]
    j.close()


# ------------------------------------------------------------------ full dump

_entry = st.tuples(st.binary(max_size=16), st.integers(0, 2**40), st.integers(0, 2**20))
dumps = st.builds(
    FullDump,
    _entry,
    _entry,
    st.lists(st.text(max_size=12), max_size=3).map(tuple),
    st.dictionaries(
        st.text(max_size=6), st.integers().filter(lambda i: -(2**63) <= i < 2**64) | st.text(max_size=6), max_size=4
    ),
)


def _check_dump(raw: bytes) -> FullDump | None:
    try:
        dump = decode_dump(raw)
    except DumpCorruptError:
        return None
    assert isinstance(dump, FullDump) and isinstance(dump.state, dict)
    assert all(isinstance(a, str) for a in dump.cluster)
    return dump


@FUZZ
@given(dumps, st.data())
def test_dump_mutated(dump: FullDump, data: st.DataObject) -> None:
    got = _check_dump(data.draw(mutated(encode_dump(dump))))
    if got is not None:  # CRC-protected
        assert got == dump


@FUZZ
@given(any_bytes | any_bytes.map(lambda b: DUMP_MAGIC + b))
def test_dump_random_bytes(raw: bytes) -> None:
    _check_dump(raw)


_dump_maps = st.fixed_dictionaries(
    {"v": st.just(1) | msgpack_values},
    optional={
        "raft_last": st.tuples(st.binary(max_size=4), st.integers(0, 9), st.integers(0, 9)).map(list) | msgpack_values,
        "raft_prev": st.tuples(st.binary(max_size=4), st.integers(0, 9), st.integers(0, 9)).map(list) | msgpack_values,
        "cluster": st.lists(st.text(max_size=8), max_size=3) | msgpack_values,
        "state": st.dictionaries(st.text(max_size=4), msgpack_values, max_size=3) | msgpack_values,
    },
)


@FUZZ
@given(_dump_maps.map(lambda d: msgpack.packb(d, use_bin_type=True)) | msgpack_values.map(msgpack.packb))
@example(
    msgpack.packb(
        {"v": 1, "raft_last": [b"", 0, 0], "raft_prev": [b"", 0, 0], "cluster": 5, "state": {}}, use_bin_type=True
    )
)  # iterating an int: TypeError escaped
def test_dump_body_with_valid_crc(body: bytes) -> None:
    _check_dump(DUMP_MAGIC + encode_crc_frame(body, "little"))


def test_dump_with_a_huge_declared_length_fails_fast(tmp_path: Path) -> None:
    path = tmp_path / "raft.dump"
    path.write_bytes(DUMP_MAGIC + struct.pack("<II", 0xFFFFFFFF, 0) + b"\x00" * 32)
    _result, error = bounded_call(lambda: read_dump(path))
    assert isinstance(error, DumpCorruptError)
