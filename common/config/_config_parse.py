"""Config text: quorum voters, listeners, ``.properties`` and TOML files (see `kraftlog.common.config`)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kraftlog.common._config_def import INT_MAX, ConfigError

# ---------------------------------------------------------------------------------------------
# Endpoint parsing (voters, listeners)
# ---------------------------------------------------------------------------------------------

_HOST = r"(\[[0-9A-Fa-f:.%a-zA-Z]+\]|[^\s:@/\[\],]*)"
_VOTER_RE = re.compile(rf"(\d+)@{_HOST}:(\d+)")
_LISTENER_RE = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*)://{_HOST}:(\d+)")
_HOSTPORT_RE = re.compile(rf"{_HOST}:(\d+)")


def _strip_brackets(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _as_items(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return [str(item).strip() for item in value if str(item).strip()]


def _voters(items: Sequence[str]) -> dict[int, tuple[str, int]]:
    """Parse voter entries; raises ValueError(detail) so both the validator and the API can use it."""
    voters: dict[int, tuple[str, int]] = {}
    seen: dict[tuple[str, int], int] = {}
    for entry in items:
        match = _VOTER_RE.fullmatch(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not id@host:port")
        node_id, host, port = int(match[1]), _strip_brackets(match[2]), int(match[3])
        if not host:
            raise ValueError(f"{entry!r} has an empty host")
        if node_id > INT_MAX:
            raise ValueError(f"voter id {node_id} is out of the 32-bit range")
        if not 1 <= port <= 65535:
            raise ValueError(f"{entry!r} has port {port} outside 1..65535")
        if node_id in voters:
            raise ValueError(f"duplicate voter id {node_id}")
        if (host, port) in seen:
            raise ValueError(f"voters {seen[(host, port)]} and {node_id} share the endpoint {host}:{port}")
        voters[node_id] = (host, port)
        seen[(host, port)] = node_id
    return voters


def _listeners(items: Sequence[str]) -> dict[str, tuple[str, int]]:
    listeners: dict[str, tuple[str, int]] = {}
    for entry in items:
        match = _LISTENER_RE.fullmatch(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not NAME://host:port")
        name, host, port = match[1].upper(), _strip_brackets(match[2]), int(match[3])
        if port > 65535:
            raise ValueError(f"{entry!r} has port {port} outside 0..65535")
        if name in listeners:
            raise ValueError(f"listener name {name} is used twice")
        listeners[name] = (host, port)
    return listeners


def _check_host_ports(items: Sequence[str]) -> None:
    for entry in items:
        match = _HOSTPORT_RE.fullmatch(entry)
        if match is None or not match[1] or not 1 <= int(match[2]) <= 65535:
            raise ValueError(f"{entry!r} is not host:port")


def _check_protocol_map(items: Sequence[str]) -> None:
    names: set[str] = set()
    for entry in items:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in _SECURITY_PROTOCOLS:
            raise ValueError(f"{entry!r} is not LISTENER_NAME:PROTOCOL")
        if name.strip().upper() in names:
            raise ValueError(f"listener name {name.strip()} is mapped twice")
        names.add(name.strip().upper())


_SECURITY_PROTOCOLS: Final = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

# ---------------------------------------------------------------------------------------------
# Files: .properties and TOML
# ---------------------------------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PROPERTIES_WS = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _odd_trailing_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        i += 1
        if i >= len(text):
            break
        char = text[i]
        if char == "u":
            digits = text[i + 1 : i + 5]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uXXXX escape in properties text: {text!r}")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(char, char))
        i += 1
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line where java.util.Properties does: first unescaped '=', ':' or blank."""
    i, length = 0, len(line)
    key_end = length
    while i < length:
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:" or char in _PROPERTIES_WS:
            key_end = i
            break
        i += 1
    key = line[:key_end]
    j = key_end
    separator_seen = False
    while j < length:
        char = line[j]
        if char in _PROPERTIES_WS:
            j += 1
        elif char in "=:" and not separator_seen:
            separator_seen = True
            j += 1
        else:
            break
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text the way ``java.util.Properties.load`` does.

    Written by hand, not with javaproperties, for one reason: the ground floor imports the standard
    library only, because ``deploy/install.sh`` validates a node's config with the system Python
    before any venv exists. tests/unit/test_config.py holds it to javaproperties as an oracle.

    Handles ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!`` comments; backslash
    line continuation (leading blanks of the next line dropped); and ``\\t \\n \\r \\f \\uXXXX``
    escapes (any other escaped character stands for itself). The last duplicate wins.
    """
    lines = _LINE_BREAK.split(text)
    result: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_PROPERTIES_WS)
        index += 1
        if not line or line[0] in "#!":
            continue
        continued_into_end = False
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if index >= len(lines):
                continued_into_end = True
                break
            line += lines[index].lstrip(_PROPERTIES_WS)
            index += 1
        if not line and not continued_into_end:
            # a continuation that ends in an empty line: Java's LineReader drops a 0-length line,
            # except at the very end of the input, where it still returns the empty one
            continue
        key, value = _split_key_value(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _escape_properties(text: str, *, is_key: bool) -> str:
    """Escape for a properties file: keys end at '=', ':' or blanks; values only fear leading blanks."""
    out: list[str] = []
    for position, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\f":
            out.append("\\f")
        elif is_key and char in "=:#!":
            out.append("\\" + char)
        elif char == " " and (is_key or position == 0):
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


def _flatten_toml(table: Mapping[str, Any], prefix: str, out: dict[str, object], source: str) -> None:
    """Turn TOML tables back into Kafka's dotted names: ``[log] dirs=...`` -> ``log.dirs``."""
    for part, value in table.items():
        name = f"{prefix}.{part}" if prefix else part
        if isinstance(value, dict):
            _flatten_toml(value, name, out, source)
            continue
        if isinstance(value, list) and any(isinstance(item, dict) for item in value):
            raise ConfigError(f"{source}: arrays of tables are not config values ({name!r})", key=name)
        if name in out:
            raise ConfigError(f"{source}: config key {name!r} is set twice", key=name, value=value)
        out[name] = value


def _parse_toml(text: str, source: str) -> dict[str, object]:
    """Parse TOML text; nesting deeper than the interpreter's recursion limit is a decode error
    (tomllib recurses per nested array or inline table)."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or inline tables nested too deeply") from None
    out: dict[str, object] = {}
    _flatten_toml(data, "", out, source)
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, object]:
    """Read a node config file into flat Kafka key names -> raw values (not yet validated).

    ``.toml`` files are TOML; ``.properties`` files are Java properties; any other name is tried as
    TOML first and read as properties if it is not valid TOML (a properties file whose lines are all
    ``key = number`` means the same in both).
    """
    file_path = Path(path)
    try:
        text = file_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(file_path)!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(file_path)!r} is not UTF-8: {exc}") from exc
    suffix = file_path.suffix.lower()
    if suffix == ".toml":
        try:
            return _parse_toml(text, str(file_path))
        except tomllib.TOMLDecodeError as exc:
            message = f"config file {str(file_path)!r} is not valid TOML: {exc}"
            if "declare" in str(exc):
                message += (
                    " (TOML forbids reopening with a [section] header a table that dotted keys such as"
                    " 'log.retention.hours = 1' already created: quote those keys or move them into the section)"
                )
            raise ConfigError(message) from exc
    if suffix != ".properties":
        try:
            return _parse_toml(text, str(file_path))
        except tomllib.TOMLDecodeError:
            pass
    return dict(parse_properties(text))


def _split_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r} is not key=value", value=item)
    return key.strip(), value
