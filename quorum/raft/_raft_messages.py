"""The controller Raft messages and commands, carried by the sessions of `quorum.raft._wire`.

Pure logic, no sockets. Nothing here unpickles: every message and every Raft log entry is msgpack
decoded and checked against an explicit shape before pysyncobj sees it; anything else is refused
with a typed Kafka error (`CorruptMessageError`).

Messages
--------
pysyncobj's messages are dicts with string keys; kraftlog sends only the kinds in
``_VALIDATORS`` (``append_entries`` only in its plain-entries and snapshot-chunk forms -- never the
pickled ``transmission`` form) plus its own keepalive. Decoding checks the exact key set and the
type of every value (ints are non-negative 64-bit, never bool); log entries become ``(command:
bytes, index, term)`` tuples whose command is a NO_OP or a kraftlog command of bounded size; a
snapshot chunk becomes ``(bytes, bool, bool)``. So pysyncobj's handlers never see a type they would
crash on.

Commands
--------
pysyncobj's ``@replicated`` pickles ``(funcID, args)`` into each log entry and unpickles it at
apply. kraftlog does not use it: a metadata batch is the REGULAR command ``msgpack([1, epoch,
timestamp_ms, [record bytes, ...]])`` (``encode_append_command``) and `_RaftNode` decodes it with
``decode_command``; a command of any other shape is refused, never unpickled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from kraftlog.common.errors import CorruptMessageError
from kraftlog.quorum.raft._membership import decode_voter_change, is_voter_change
from kraftlog.quorum.raft._prevote import PRE_VOTE, PRE_VOTE_RESPONSE, TERM_AHEAD, TRANSFER_FLAG

__all__ = [
    "COMMAND_NO_OP",
    "COMMAND_REGULAR",
    "KEEPALIVE",
    "MAX_COMMAND_BYTES",
    "VOTER_REPORT",
    "checked_map",
    "decode_command",
    "decode_message",
    "encode_append_command",
    "encode_message",
    "is_uint",
    "split_append_entries",
    "unpack_body",
]

#: Largest metadata batch (one command), Kafka's KRaft limit for one batch (8 MiB).
MAX_COMMAND_BYTES: Final = 8 << 20
_MAX_U64: Final = (1 << 64) - 1

#: pysyncobj's command type bytes (``_COMMAND_TYPE``): the first byte of every log entry.
COMMAND_REGULAR: Final = 0
COMMAND_NO_OP: Final = 1
_ALLOWED_ENTRY_TYPES: Final = frozenset({COMMAND_REGULAR, COMMAND_NO_OP})
_OP_APPEND: Final = 1

#: kraftlog's keepalive message type (pysyncobj's dispatcher ignores types it does not know).
KEEPALIVE: Final = "kl_keepalive"
#: a voter's report to its peers (issue 26): ``{"dir": directory id or nil, "kraft_max": int}``
VOTER_REPORT: Final = "kl_voter_report"


def unpack_body(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several unrelated types for bad input
        raise CorruptMessageError(f"not a msgpack body: {type(err).__name__}") from None


def is_uint(value: Any, limit: int = _MAX_U64) -> bool:
    return type(value) is int and 0 <= value <= limit


def checked_map(value: Any, keys: frozenset[str], what: str) -> dict[str, Any]:
    if type(value) is not dict or frozenset(value) != keys:
        got = sorted(value) if type(value) is dict else type(value).__name__
        raise CorruptMessageError(f"{what}: expected the keys {sorted(keys)}, got {got!r:.120}")
    return value


# --------------------------------------------------------------------------------------- messages


def encode_message(message: dict[str, Any]) -> bytes:
    """msgpack of a pysyncobj message; raises ``CorruptMessageError`` for a type msgpack lacks."""
    try:
        packed: bytes = msgpack.packb(message, use_bin_type=True)
        return packed
    except (TypeError, ValueError, OverflowError) as err:
        raise CorruptMessageError(f"cannot encode a {message.get('type')!r} message: {err}") from None


def _entries(value: Any) -> list[tuple[bytes, int, int]]:
    if type(value) is not list:
        raise CorruptMessageError("append_entries: entries must be a list")
    out = []
    for entry in value:
        if type(entry) is not list or len(entry) != 3:
            raise CorruptMessageError("append_entries: an entry must be [command, index, term]")
        command, index, term = entry
        if type(command) is not bytes or not 0 < len(command) <= MAX_COMMAND_BYTES + 1:
            raise CorruptMessageError("append_entries: an entry's command must be non-empty bytes of bounded size")
        if command[0] not in _ALLOWED_ENTRY_TYPES:
            raise CorruptMessageError(f"append_entries: entry command type {command[0]} is not accepted")
        if not (is_uint(index) and is_uint(term)):
            raise CorruptMessageError("append_entries: entry index and term must be integers")
        out.append((command, index, term))
    return out


def _append_entries(m: dict[str, Any]) -> None:
    if "serialized" in m:
        checked_map(m, frozenset({"type", "term", "commit_index", "serialized"}), "append_entries (snapshot)")
        chunk = m["serialized"]
        if chunk is not None:
            if (
                type(chunk) is not list
                or len(chunk) != 3
                or type(chunk[0]) is not bytes
                or type(chunk[1]) is not bool
                or type(chunk[2]) is not bool
            ):
                raise CorruptMessageError("append_entries: a snapshot chunk must be [bytes, first, last]")
            m["serialized"] = (chunk[0], chunk[1], chunk[2])
    else:
        checked_map(
            m, frozenset({"type", "term", "commit_index", "entries", "prevLogIdx", "prevLogTerm"}), "append_entries"
        )
        if not (is_uint(m["prevLogIdx"]) and is_uint(m["prevLogTerm"])):
            raise CorruptMessageError("append_entries: prevLogIdx and prevLogTerm must be integers")
        m["entries"] = _entries(m["entries"])
    if not (is_uint(m["term"]) and is_uint(m["commit_index"])):
        raise CorruptMessageError("append_entries: term and commit_index must be integers")


def _ints(*keys: str) -> Callable[[dict[str, Any]], None]:
    expected = frozenset({"type", *keys})

    def check(m: dict[str, Any]) -> None:
        checked_map(m, expected, m["type"])
        if not all(is_uint(m[k]) for k in keys):
            raise CorruptMessageError(f"{m['type']}: {', '.join(keys)} must be integers")

    return check


def _next_node_idx(m: dict[str, Any]) -> None:
    checked_map(m, frozenset({"type", "next_node_idx", "reset", "success"}), "next_node_idx")
    if not is_uint(m["next_node_idx"]) or type(m["reset"]) is not bool or type(m["success"]) is not bool:
        raise CorruptMessageError("next_node_idx: an integer index and two booleans expected")


def _apply_command(m: dict[str, Any]) -> None:
    keys = frozenset(m)
    if keys not in (frozenset({"type", "command"}), frozenset({"type", "command", "request_id"})):
        raise CorruptMessageError(f"apply_command: unexpected keys {sorted(keys)!r:.120}")
    command = m["command"]
    if type(command) is not bytes or not 0 < len(command) <= MAX_COMMAND_BYTES + 1 or command[0] != COMMAND_REGULAR:
        raise CorruptMessageError("apply_command: the command must be a kraftlog command")
    if "request_id" in m and not is_uint(m["request_id"]):
        raise CorruptMessageError("apply_command: request_id must be an integer")


def _apply_command_response(m: dict[str, Any]) -> None:
    keys = frozenset(m)
    values: tuple[Any, ...]
    if keys == frozenset({"type", "request_id", "error"}):
        values = (m["request_id"], m["error"])
    elif keys == frozenset({"type", "request_id", "log_idx", "log_term"}):
        values = (m["request_id"], m["log_idx"], m["log_term"])
    else:
        raise CorruptMessageError(f"apply_command_response: unexpected keys {sorted(keys)!r:.120}")
    if not all(is_uint(v) for v in values):
        raise CorruptMessageError("apply_command_response: integers expected")


def _request_vote(m: dict[str, Any]) -> None:
    # ``kl_transfer`` (optional): the vote request of an election the leader asked for (`quorum.raft._prevote`)
    if TRANSFER_FLAG in m:
        if m[TRANSFER_FLAG] is not True:
            raise CorruptMessageError(f"request_vote: {TRANSFER_FLAG} must be true when present")
        _ints("term", "last_log_index", "last_log_term", TRANSFER_FLAG)({**m, TRANSFER_FLAG: 1})
        return
    _ints("term", "last_log_index", "last_log_term")(m)


def _pre_vote_response(m: dict[str, Any]) -> None:
    checked_map(m, frozenset({"type", "term", "granted"}), PRE_VOTE_RESPONSE)
    if not is_uint(m["term"]) or type(m["granted"]) is not bool:
        raise CorruptMessageError(f"{PRE_VOTE_RESPONSE}: an integer term and a boolean expected")


def _voter_report(m: dict[str, Any]) -> None:
    checked_map(m, frozenset({"type", "dir", "kraft_max"}), VOTER_REPORT)
    directory = m["dir"]
    if directory is not None and (type(directory) is not str or not 0 < len(directory) <= 64):
        raise CorruptMessageError(f"{VOTER_REPORT}: dir must be a short string or nil")
    if not is_uint(m["kraft_max"], 255):
        raise CorruptMessageError(f"{VOTER_REPORT}: kraft_max must be a small integer")


_VALIDATORS: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "append_entries": _append_entries,
    "request_vote": _request_vote,
    PRE_VOTE: _ints("term", "last_log_index", "last_log_term"),
    PRE_VOTE_RESPONSE: _pre_vote_response,
    TERM_AHEAD: _ints("term"),
    "response_vote": _ints("term"),
    "timeout_now": _ints("term"),
    "next_node_idx": _next_node_idx,
    "apply_command": _apply_command,
    "apply_command_response": _apply_command_response,
    KEEPALIVE: _ints(),
    VOTER_REPORT: _voter_report,
}


def decode_message(data: bytes) -> dict[str, Any]:
    """msgpack bytes -> a pysyncobj message of a known kind and exact shape, or ``CorruptMessageError``."""
    message = unpack_body(data)
    if type(message) is not dict:
        raise CorruptMessageError("a Raft message must be a map")
    kind = message.get("type")
    validator = _VALIDATORS.get(kind) if type(kind) is str else None
    if validator is None:
        raise CorruptMessageError(f"unknown Raft message type {kind!r:.40}")
    validator(message)
    return message


# --------------------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class AppendCommand:
    """One metadata batch as the state machine applies it."""

    epoch: int
    timestamp_ms: int
    records: list[bytes]


def encode_append_command(epoch: int, timestamp_ms: int, records: list[bytes]) -> bytes:
    """The REGULAR command payload (without pysyncobj's type byte) for one metadata batch."""
    packed: bytes = msgpack.packb([_OP_APPEND, epoch, timestamp_ms, list(records)], use_bin_type=True)
    return packed


def decode_command(command: bytes) -> AppendCommand | bytes | None:
    """A journal entry's command (type byte included): None for a NO_OP, the command itself for a
    voter change (`quorum.raft._membership` decodes it), else the batch.

    Raises ``CorruptMessageError`` for any other type (pysyncobj's membership and version commands
    are pickles) or shape; the caller refuses the entry.
    """
    if not command:
        raise CorruptMessageError("empty Raft command")
    kind = command[0]
    if kind == COMMAND_NO_OP:
        return None
    if kind != COMMAND_REGULAR:
        raise CorruptMessageError(f"Raft command type {kind} is not a kraftlog command")
    if is_voter_change(command):
        decode_voter_change(command)  # well-formed, or CorruptMessageError (voter changes are rare)
        return command
    value = unpack_body(command[1:])
    if type(value) is not list or len(value) != 4 or value[0] != _OP_APPEND or type(value[0]) is not int:
        raise CorruptMessageError("not a kraftlog append command")
    _, epoch, timestamp_ms, records = value
    if type(epoch) is not int or type(timestamp_ms) is not int:
        raise CorruptMessageError("append command: epoch and timestamp_ms must be integers")
    if type(records) is not list or any(type(r) is not bytes for r in records):
        raise CorruptMessageError("append command: records must be a list of bytes")
    return AppendCommand(epoch, timestamp_ms, records)


def split_append_entries(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Two consecutive ``append_entries`` carrying ``message``'s entries, or None if it has fewer
    than two. The second one's ``prevLogIdx``/``prevLogTerm`` name the first one's last entry, so a
    follower applies them exactly as it would the whole (Raft allows any split)."""
    entries = message.get("entries")
    if message.get("type") != "append_entries" or not isinstance(entries, (list, tuple)) or len(entries) < 2:
        return None
    mid = len(entries) // 2
    head = dict(message, entries=list(entries[:mid]))
    tail = dict(message, entries=list(entries[mid:]), prevLogIdx=entries[mid - 1][1], prevLogTerm=entries[mid - 1][2])
    return [head, tail]
