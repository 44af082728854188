"""The full dump (pysyncobj's ``fullDumpFile``) of the controller quorum: kraftlog's own
serializer/deserializer pair.

Why a custom pair
-----------------
* pysyncobj's default serializer *forks* to pickle the state in a child process. Forking a process
  that runs gRPC (and other threads holding locks) is unsafe; a custom serializer makes pysyncobj
  serialize in-thread (``Serializer`` disables fork whenever ``conf.serializer`` is set; kraftlog also
  sets ``useFork=False``).
* pysyncobj's dump is written and renamed without any fsync, and pysyncobj then drops the journal
  prefix that the dump replaces: a power loss in between loses state. Here the dump is fsynced before
  pysyncobj renames it, and the directory (the rename) is fsynced by :meth:`DumpSerializer.make_durable`,
  which the journal calls before it drops any prefix. Order: write ``<dump>.tmp`` -> fsync it ->
  pysyncobj renames it to ``<dump>`` -> (next tick) journal calls ``make_durable`` (fsync dump and
  directory) -> journal drops its prefix.
* The state is not pickled: the dump holds plain msgpack, so nothing in it can execute code and the
  metadata state machine decides what it contains (``state`` below).

The same file is what pysyncobj streams to a follower that is behind the leader's journal
(InstallSnapshot); the follower's copy is made durable by the same hook before its journal is cleared.

File format (little endian)::

    magic "KLRAFTD1" (8) | length u32 | crc32c(body) u32 | body
    body = msgpack {
        "v": 1,
        "raft_last": [command bytes, raft index, raft term],   # last applied raft entry
        "raft_prev": [command bytes, raft index, raft term],   # the one before it
        "cluster": ["host:port", ...],                          # pysyncobj's member addresses
        "voters": [{"id", "host", "port", "directory.id", "public.key"}, ...],
                        # the committed voter set at raft_last (issue 26; absent in older dumps)
        "state": {...}                                          # the state machine's own map
    }
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgpack
import structlog
from pysyncobj.node import TCPNode

from kraftlog.common import crc_frame_header, crc_frame_problem, encode_crc_frame, fsync_directory, fsync_file
from kraftlog.common.errors import CorruptMessageError
from kraftlog.quorum.raft._membership import RaftVoter, voters_from_wire, voters_to_wire

__all__ = ["DUMP_MAGIC", "DumpCorruptError", "FullDump", "DumpSerializer", "encode_dump", "decode_dump", "read_dump"]

DUMP_MAGIC: Final = b"KLRAFTD1"
DUMP_VERSION: Final = 1
#: the dump's frame: ``length u32 | crc32c u32``, little endian (the format above)
_FRAME: Final = crc_frame_header("little")

Entry = tuple[bytes, int, int]

_log = structlog.get_logger(__name__)


class DumpCorruptError(ValueError):
    """A full dump file that fails its magic, length or CRC check, or lacks a field."""


@dataclass(frozen=True, slots=True)
class FullDump:
    """Decoded full dump: the two raft entries pysyncobj keeps, its members and our state."""

    raft_last: Entry
    raft_prev: Entry
    cluster: tuple[str, ...]
    state: dict[str, Any]
    #: the committed voter set at ``raft_last`` (empty: a dump written before voter changes existed)
    voters: tuple[RaftVoter, ...] = ()


def _entry(value: Any) -> Entry:
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        raise DumpCorruptError(f"bad raft entry in dump: {value!r:.80}")
    command, idx, term = value
    if not isinstance(command, bytes) or not isinstance(idx, int) or not isinstance(term, int):
        raise DumpCorruptError(f"bad raft entry in dump: {value!r:.80}")
    return (command, idx, term)


def encode_dump(dump: FullDump) -> bytes:
    body = msgpack.packb(
        {
            "v": DUMP_VERSION,
            "raft_last": list(dump.raft_last),
            "raft_prev": list(dump.raft_prev),
            "cluster": list(dump.cluster),
            "state": dump.state,
            "voters": voters_to_wire(dump.voters),
        },
        use_bin_type=True,
    )
    return DUMP_MAGIC + encode_crc_frame(body, "little")


def decode_dump(data: bytes) -> FullDump:
    if len(data) < len(DUMP_MAGIC) + _FRAME.size or not data.startswith(DUMP_MAGIC):
        raise DumpCorruptError("not a kraftlog Raft dump (bad magic)")
    length, checksum = _FRAME.unpack_from(data, len(DUMP_MAGIC))
    body = data[len(DUMP_MAGIC) + _FRAME.size :]
    if len(body) != length:
        raise DumpCorruptError(f"dump body is {len(body)} bytes, header says {length}")
    if crc_frame_problem(body, checksum) is not None:
        raise DumpCorruptError("dump crc mismatch")
    try:
        d = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise DumpCorruptError(f"undecodable dump body: {err}") from err
    if not isinstance(d, dict) or d.get("v") != DUMP_VERSION:
        raise DumpCorruptError(f"unsupported dump version {d.get('v') if isinstance(d, dict) else None!r}")
    missing = [key for key in ("cluster", "state", "raft_last", "raft_prev") if key not in d]
    if missing:
        raise DumpCorruptError(f"dump lacks {', '.join(missing)}")
    cluster, state = d["cluster"], d["state"]
    if not isinstance(cluster, list) or not all(isinstance(a, str) for a in cluster):
        raise DumpCorruptError(f"dump cluster is not a list of addresses: {cluster!r:.80}")
    if not isinstance(state, dict):
        raise DumpCorruptError("dump state is not a map")
    try:
        voters = tuple(voters_from_wire(d.get("voters", [])).values())
    except CorruptMessageError as err:
        raise DumpCorruptError(f"dump voters: {err.message}") from None
    return FullDump(_entry(d["raft_last"]), _entry(d["raft_prev"]), tuple(cluster), state, voters)


def read_dump(path: Path) -> FullDump:
    return decode_dump(Path(path).read_bytes())


def _addresses(cluster: Iterable[Any]) -> tuple[str, ...]:
    return tuple(sorted(str(getattr(node, "id", node)) for node in cluster))


class DumpSerializer:
    """pysyncobj ``serializer``/``deserializer`` pair writing :class:`FullDump` files.

    ``state_provider`` returns the state machine's map and ``state_loader`` restores it; both run on
    pysyncobj's thread, where the state machine is applied, so the state matches the raft entry the
    dump names exactly (pysyncobj serializes at ``raftLastApplied``).
    """

    def __init__(
        self,
        dump_path: Path,
        *,
        state_provider: Callable[[], dict[str, Any]],
        state_loader: Callable[[dict[str, Any]], None],
        fsync: bool = True,
        node_id: int | None = None,
    ) -> None:
        self._path = Path(dump_path)
        self._provider = state_provider
        self._loader = state_loader
        self._fsync = fsync
        self._log = _log.bind(node_id=node_id, dump=str(self._path))
        self.serialized = 0
        self.deserialized = 0
        self._incoming: Any = None  # the dump being received from the leader, chunk by chunk
        #: the committed voter set to write and where a loaded one goes (`_RaftNode`; set after it is built)
        self.voters_provider: Callable[[], Mapping[int, RaftVoter]] | None = None
        self.voters_loader: Callable[[Mapping[int, RaftVoter]], None] | None = None
        self._node_factory: Callable[[RaftVoter], TCPNode] | None = None

    @property
    def path(self) -> Path:
        return self._path

    def serialize(self, file_name: str, data: tuple[Any, ...]) -> None:
        """pysyncobj ``conf.serializer(fileName, (last, prev, cluster))``: write and fsync ``file_name``.

        ``file_name`` is pysyncobj's temporary name; pysyncobj renames it over the dump afterwards.
        An exception makes pysyncobj report a failed dump and keep its journal.
        """
        try:
            last, prev, cluster = data
            voters = tuple(self.voters_provider().values()) if self.voters_provider is not None else ()
            dump = FullDump(_entry(tuple(last)), _entry(tuple(prev)), _addresses(cluster), self._provider(), voters)
            encoded = encode_dump(dump)
            fd = os.open(file_name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(encoded)
                while view:
                    view = view[os.write(fd, view) :]
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except Exception:
            self._log.exception("raft_dump_write_failed")
            raise
        self.serialized += 1
        self._log.info("raft_dump_written", raft_index=dump.raft_last[1], bytes=len(encoded))

    def deserialize(self, file_name: str) -> tuple[Entry, Entry, set[TCPNode]]:
        """pysyncobj ``conf.deserializer(fileName)``: restore our state, return (last, prev, cluster)."""
        try:
            dump = read_dump(Path(file_name))
            self._loader(dump.state)
        except Exception:
            # pysyncobj only logs this; say loudly what it means.
            self._log.critical("raft_dump_load_failed", exc_info=True)
            raise
        self.deserialized += 1
        self._log.info("raft_dump_loaded", raft_index=dump.raft_last[1])
        if dump.voters and self.voters_loader is not None and self._node_factory is not None:
            self.voters_loader({v.node_id: v for v in dump.voters})
            factory = self._node_factory
            return dump.raft_last, dump.raft_prev, {factory(v) for v in dump.voters}
        return dump.raft_last, dump.raft_prev, {TCPNode(a) for a in dump.cluster}

    def track_voters(
        self,
        provider: Callable[[], Mapping[int, RaftVoter]],
        loader: Callable[[Mapping[int, RaftVoter]], None],
        node_factory: Callable[[RaftVoter], TCPNode],
    ) -> None:
        """Persist the committed voter set with every dump and restore it from one (issue 26)."""
        self.voters_provider = provider
        self.voters_loader = loader
        self._node_factory = node_factory

    def receive(self, data: Any) -> bool:
        """pysyncobj's ``Serializer.setTransmissionData`` for a dump streamed from the leader.

        Chunks ``(bytes, is_first, is_last)`` are written to ``<dump>.1.tmp``; on the last one the file
        is checked (magic, length, CRC), fsynced, renamed over the dump, and the directory fsynced --
        pysyncobj renamed an unsynced file over the dump, so a crash right after could leave a torn
        dump beside a journal that no longer covers it. Returns True when a whole dump was installed
        (pysyncobj then loads it and clears its journal). Anything malformed is dropped and logged.
        """
        if not (
            isinstance(data, (list, tuple))
            and len(data) == 3
            and isinstance(data[0], bytes)
            and isinstance(data[1], bool)
            and isinstance(data[2], bool)
        ):
            self._log.warning("raft_dump_chunk_malformed")
            self._close_incoming()
            return False
        chunk, is_first, is_last = data
        tmp = self._path.with_name(self._path.name + ".1.tmp")
        try:
            if is_first:
                self._close_incoming()
                self._incoming = open(tmp, "wb")
            elif self._incoming is None:
                return False
            self._incoming.write(chunk)
            if not is_last:
                return False
            incoming, self._incoming = self._incoming, None
            incoming.flush()
            if self._fsync:
                os.fsync(incoming.fileno())
            incoming.close()
            read_dump(tmp)  # a torn or foreign stream never replaces the dump
            os.replace(tmp, self._path)
            if self._fsync:
                fsync_directory(self._path.parent)
        except (OSError, DumpCorruptError) as err:
            self._log.warning("raft_dump_receive_failed", error=str(err))
            self._close_incoming()
            return False
        self._log.info("raft_dump_received", bytes=self._path.stat().st_size)
        return True

    def _close_incoming(self) -> None:
        incoming, self._incoming = self._incoming, None
        if incoming is not None:
            incoming.close()

    def make_durable(self) -> None:
        """fsync the dump and its directory: the journal's ``before_prefix_drop`` hook."""
        if not self._fsync:
            return
        try:
            fsync_file(self._path)
        except FileNotFoundError:
            pass
        fsync_directory(self._path.parent)
