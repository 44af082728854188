"""Node and topic configuration with Kafka's key names, types, defaults and validation rules.

Operators arrive with Kafka habits and Kafka files, so every key that exists in Kafka keeps Kafka's
name, type and default (DESIGN.md §6) and a typo fails loudly at start-up instead of silently
falling back to a default. The same schema machinery validates topic-level configs for CreateTopics
and IncrementalAlterConfigs, and links each broker-level ``log.*`` key to the topic-level key it is
the default for, so ``NodeConfig.topic_defaults()`` resolves them with Kafka's precedence
(``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours`` and so on).

Files may be TOML or Java ``.properties``; ``--override key=value`` strings are applied last.

This module lives in `metadata_log` because both the controller (topic defaults, config records)
and the broker read it. ``ConfigError`` is Kafka's INVALID_CONFIG from the one error tree
(`kraftlog.common.errors`), and a ``ValueError`` as well, since a bad value is what it reports.
"""

from __future__ import annotations

import difflib
import enum
import hmac
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol, final

from kraftlog.common import errors as kerr

__all__ = [
    "ConfigError",
    "ConfigType",
    "ConfigKey",
    "ConfigDef",
    "Validator",
    "Range",
    "OneOf",
    "Custom",
    "Password",
    "NO_DEFAULT",
    "NODE_CONFIG_DEFS",
    "TOPIC_CONFIG_DEFS",
    "TOPIC_SYNONYMS",
    "NodeConfig",
    "load_node_config",
    "read_config_file",
    "parse_properties",
    "parse_quorum_voters",
    "parse_listeners",
    "validate_topic_configs",
]

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

_MS_PER_MINUTE: Final = 60_000
_MS_PER_HOUR: Final = 3_600_000


class ConfigError(kerr.InvalidConfigError, ValueError):
    """A config key is unknown, a value has the wrong type or range, or keys contradict each other.

    ``key`` and ``value`` name the culprit so the CLI and the admin API can point at it; the code is
    INVALID_CONFIG (40), inherited, so a server answers CreateTopics or IncrementalAlterConfigs
    with it directly.
    """

    def __init__(self, message: str, *, key: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


class ConfigType(enum.StrEnum):
    """Kafka's ConfigDef types; values parse from strings (properties, overrides) or typed TOML."""

    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"


_TYPE_PHRASES: Final[Mapping[ConfigType, str]] = MappingProxyType({
    ConfigType.INT: "an integer",
    ConfigType.LONG: "an integer",
    ConfigType.DOUBLE: "a number",
    ConfigType.BOOLEAN: "true or false",
    ConfigType.STRING: "a string",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.PASSWORD: "a string",
})


class _NoDefault:
    """Sentinel type: the key has no default, so it must be set."""

    _instance: ClassVar[_NoDefault | None] = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: Default of a required key (Kafka's ``NO_DEFAULT_VALUE``). ``None`` as a default means "unset".
NO_DEFAULT: Final = _NoDefault()


@final
class Password:
    """A secret config value that never shows up in ``repr``/``str`` (and so never in logs)."""

    __slots__ = ("_value",)
    HIDDEN: ClassVar[str] = "[hidden]"

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        """The secret itself; read it only where it is used."""
        return self._value

    def __repr__(self) -> str:
        return f"Password({self.HIDDEN!r})"

    def __str__(self) -> str:
        return self.HIDDEN

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Password):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)


# ---------------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------------


class Validator(Protocol):
    """Checks a parsed (typed, non-None) value and describes what it accepts, for error messages."""

    def check(self, value: Any) -> str | None:
        """Return None if ``value`` is acceptable, else a (possibly empty) detail of what is wrong."""

    def describe(self, type_: ConfigType) -> str:
        """Describe the accepted values, e.g. ``"an integer >= 1"``, completing "expected ..."."""


def _fmt_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive numeric bounds (Kafka's ``Range.atLeast`` / ``Range.between``)."""

    min: float | None = None
    max: float | None = None

    def check(self, value: Any) -> str | None:
        if self.min is not None and value < self.min:
            return ""
        if self.max is not None and value > self.max:
            return ""
        return None

    def describe(self, type_: ConfigType) -> str:
        phrase = _TYPE_PHRASES[type_]
        if self.min is not None and self.max is not None:
            return f"{phrase} in [{_fmt_number(self.min)}, {_fmt_number(self.max)}]"
        if self.min is not None:
            return f"{phrase} >= {_fmt_number(self.min)}"
        if self.max is not None:
            return f"{phrase} <= {_fmt_number(self.max)}"
        return phrase


@dataclass(frozen=True, slots=True)
class OneOf:
    """An enumeration; for a LIST key every item must be one of the choices (Kafka's ValidList)."""

    choices: tuple[str, ...]

    def __init__(self, *choices: str) -> None:
        object.__setattr__(self, "choices", tuple(choices))

    def check(self, value: Any) -> str | None:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item not in self.choices:
                return f"{item!r} is not allowed" if isinstance(value, list) else ""
        return None

    def describe(self, type_: ConfigType) -> str:
        listed = ", ".join(self.choices)
        if type_ is ConfigType.LIST:
            return f"a comma-separated list of values from [{listed}]"
        return f"one of [{listed}]"


@dataclass(frozen=True, slots=True)
class Custom:
    """Any rule as a callable: it raises ``ValueError(detail)`` or returns False to reject."""

    func: Callable[[Any], object]
    expectation: str

    def check(self, value: Any) -> str | None:
        try:
            ok = self.func(value)
        except ValueError as exc:
            return str(exc)
        return "" if ok is False else None

    def describe(self, type_: ConfigType) -> str:
        return self.expectation


# ---------------------------------------------------------------------------------------------
# Keys and schemas
# ---------------------------------------------------------------------------------------------


def _show(value: object) -> str:
    """Render a raw value for an error message (secrets hidden)."""
    if isinstance(value, Password):
        return repr(Password.HIDDEN)
    return repr(value)


_INT_TEXT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config key: Kafka's name, type, default, validator and documentation.

    ``topic_key`` is set on broker-level keys that supply a topic-level default (``log.segment.bytes``
    -> ``segment.bytes``); ``topic_unit_ms`` converts a key kept in coarser units (``log.retention.hours``)
    into the topic key's milliseconds. Keys that exist only in kraftlog say so in ``kraftlog_only``.
    """

    name: str
    type: ConfigType
    default: object = NO_DEFAULT
    validator: Validator | None = None
    doc: str = ""
    topic_key: str | None = None
    topic_unit_ms: int = 1
    kraftlog_only: bool = False

    @property
    def required(self) -> bool:
        """True when the key has no default and must be set explicitly."""
        return self.default is NO_DEFAULT

    def expectation(self) -> str:
        """What a valid value looks like, completing "expected ..." in error messages."""
        if self.validator is not None:
            return self.validator.describe(self.type)
        return _TYPE_PHRASES[self.type]

    def parse(self, raw: object) -> object:
        """Convert ``raw`` (a string, or a typed TOML value) to this key's type and validate it."""
        if raw is None:
            if self.default is None:
                return None
            raise self._invalid(raw)
        value = self._convert(raw)
        if self.validator is not None:
            detail = self.validator.check(value)
            if detail is not None:
                raise self._invalid(raw, detail)
        return value

    def format(self, value: object, *, mask_passwords: bool = True) -> str:
        """Render a typed value as the string a properties file or override would contain."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        if isinstance(value, Password):
            return Password.HIDDEN if mask_passwords else value.value
        if isinstance(value, float):
            return repr(value)
        return str(value)

    def _invalid(self, raw: object, detail: str = "") -> ConfigError:
        message = f"invalid value {_show(raw)} for {self.name!r}: expected {self.expectation()}"
        if detail:
            message += f" ({detail})"
        return ConfigError(message, key=self.name, value=raw)

    def _convert(self, raw: object) -> object:
        match self.type:
            case ConfigType.INT:
                return self._convert_integer(raw, INT_MIN, INT_MAX, "32-bit")
            case ConfigType.LONG:
                return self._convert_integer(raw, LONG_MIN, LONG_MAX, "64-bit")
            case ConfigType.DOUBLE:
                return self._convert_double(raw)
            case ConfigType.BOOLEAN:
                return self._convert_boolean(raw)
            case ConfigType.STRING:
                if not isinstance(raw, str):
                    raise self._invalid(raw)
                return raw.strip()
            case ConfigType.PASSWORD:
                if isinstance(raw, Password):
                    return raw
                if not isinstance(raw, str):
                    raise self._invalid(Password(str(raw)))
                return Password(raw.strip())
            case ConfigType.LIST:
                return self._convert_list(raw)
        raise AssertionError(f"unhandled config type {self.type}")  # pragma: no cover

    def _convert_integer(self, raw: object, low: int, high: int, width: str) -> int:
        if isinstance(raw, bool):
            raise self._invalid(raw)
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str) and _INT_TEXT.fullmatch(raw.strip()):
            value = int(raw.strip())
        else:
            raise self._invalid(raw)
        if not low <= value <= high:
            raise self._invalid(raw, f"out of the {width} range")
        return value

    def _convert_double(self, raw: object) -> float:
        if isinstance(raw, bool):
            raise self._invalid(raw)
        if isinstance(raw, (int, float)):
            value = float(raw)
        elif isinstance(raw, str):
            try:
                value = float(raw.strip())
            except ValueError:
                raise self._invalid(raw) from None
        else:
            raise self._invalid(raw)
        if math.isnan(value):
            raise self._invalid(raw)
        return value

    def _convert_boolean(self, raw: object) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            text = raw.strip().lower()
            if text == "true":
                return True
            if text == "false":
                return False
        raise self._invalid(raw)

    def _convert_list(self, raw: object) -> list[str]:
        if isinstance(raw, str):
            return [item.strip() for item in raw.split(",") if item.strip()]
        if isinstance(raw, (list, tuple)):
            items: list[str] = []
            for item in raw:
                if isinstance(item, bool) or not isinstance(item, (str, int)):
                    raise self._invalid(raw)
                text = str(item).strip()
                if text:
                    items.append(text)
            return items
        raise self._invalid(raw)


class ConfigDef(Mapping[str, ConfigKey]):
    """An ordered schema of config keys (Kafka's ConfigDef), frozen once the module has built it.

    Definition order is meaningful: among broker keys feeding the same topic key, the earlier one
    wins (``log.retention.ms`` before ``log.retention.minutes`` before ``log.retention.hours``).
    """

    def __init__(self, label: str, keys: Iterable[ConfigKey] = ()) -> None:
        self.label = label
        self._keys: dict[str, ConfigKey] = {}
        self._hints: dict[str, str] = {}
        self._frozen = False
        for key in keys:
            self.add(key)

    def add(self, key: ConfigKey) -> ConfigDef:
        """Add a key; its default is validated now so a bad default fails at import, not at use."""
        if self._frozen:
            raise RuntimeError(f"{self.label} config definitions are frozen")
        if key.name in self._keys:
            raise ValueError(f"config key {key.name!r} defined twice")
        if key.default is not NO_DEFAULT and key.default is not None:
            parsed = key.parse(key.default)
            if parsed != key.default:
                raise ValueError(f"default of {key.name!r} must be given in its parsed form")
        self._keys[key.name] = key
        return self

    def define(
        self,
        name: str,
        type_: ConfigType,
        default: object = NO_DEFAULT,
        validator: Validator | None = None,
        doc: str = "",
        *,
        topic_key: str | None = None,
        topic_unit_ms: int = 1,
        kraftlog_only: bool = False,
    ) -> ConfigDef:
        """Define a key in Kafka's style; returns self so definitions chain."""
        return self.add(ConfigKey(name, type_, default, validator, doc, topic_key, topic_unit_ms, kraftlog_only))

    def hint(self, wrong: str, right: str) -> None:
        """Register a "did you mean" for a key people predictably use in the wrong place."""
        if self._frozen:
            raise RuntimeError(f"{self.label} config definitions are frozen")
        self._hints[wrong] = right

    def freeze(self) -> None:
        """Forbid further changes: module-level schemas are shared by every thread of the process."""
        self._frozen = True

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def suggest(self, name: str) -> str | None:
        """The known key closest to ``name``, for "did you mean" messages."""
        if name in self._hints:
            return self._hints[name]
        matches = difflib.get_close_matches(name, list(self._keys), n=1, cutoff=0.6)
        return matches[0] if matches else None

    def unknown_key_error(self, name: str, value: object = None) -> ConfigError:
        """The error for a key this schema does not define, naming the closest known key."""
        message = f"unknown config key {name!r}"
        suggestion = self.suggest(name)
        if suggestion is not None:
            message += f" (did you mean {suggestion!r}?)"
        return ConfigError(message, key=name, value=value)

    def parse_value(self, name: str, raw: object) -> object:
        """Parse one value, failing on an unknown key."""
        key = self._keys.get(name)
        if key is None:
            raise self.unknown_key_error(name, raw)
        return key.parse(raw)

    def parse(self, raw: Mapping[str, object]) -> dict[str, object]:
        """Parse the given settings (only those; no defaults added), failing on the first bad one."""
        return {name: self.parse_value(name, value) for name, value in raw.items()}

    def defaults(self) -> dict[str, object]:
        """Every key that has a default (``None`` included), in definition order."""
        return {name: key.default for name, key in self._keys.items() if key.default is not NO_DEFAULT}


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


def parse_quorum_voters(value: str | Sequence[str]) -> dict[int, tuple[str, int]]:
    """Parse ``controller.quorum.voters`` (``"1@host:9093,2@host:9094"``) into id -> (host, port).

    IPv6 hosts are written in brackets (``1@[::1]:9093``) and returned without them. Raises
    ``ConfigError`` naming ``controller.quorum.voters`` on a malformed entry, a duplicate id or two
    voters sharing one endpoint: each of those would split or stall the Raft quorum.
    """
    try:
        return _voters(_as_items(value))
    except ValueError as exc:
        key = NODE_CONFIG_DEFS["controller.quorum.voters"]
        raise key._invalid(value, str(exc)) from None


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


def parse_listeners(value: str | Sequence[str]) -> dict[str, tuple[str, int]]:
    """Parse ``listeners``-style values (``"PLAINTEXT://:9092,CONTROLLER://host:9093"``).

    Returns listener name -> (host, port); an empty host means "all interfaces", as in Kafka.
    """
    try:
        return _listeners(_as_items(value))
    except ValueError as exc:
        key = NODE_CONFIG_DEFS["listeners"]
        raise key._invalid(value, str(exc)) from None


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
_COMPRESSION_TYPES: Final = ("producer", "none", "gzip", "snappy", "lz4", "zstd", "uncompressed")
_TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES: Final = ("delete", "compact")

# ---------------------------------------------------------------------------------------------
# Topic-level keys (Kafka's TopicConfig / LogConfig)
# ---------------------------------------------------------------------------------------------

_I, _L, _D, _B, _S, _LS, _P = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)

TOPIC_CONFIG_DEFS: Final = ConfigDef("topic")
(
    TOPIC_CONFIG_DEFS
    .define("cleanup.policy", _LS, ["delete"], OneOf(*_CLEANUP_POLICIES),
            "delete: drop old segments by retention; compact: keep the last record per key; both allowed.")
    .define("compression.type", _S, "producer", OneOf(*_COMPRESSION_TYPES),
            "Final codec of the stored batches; 'producer' keeps what the producer sent.")
    .define("delete.retention.ms", _L, 86_400_000, Range(0),
            "How long tombstones survive compaction, so slow readers still see the delete.")
    .define("file.delete.delay.ms", _L, 60_000, Range(0),
            "Delay before a deleted segment's files are removed, so in-flight reads can finish.")
    .define("flush.messages", _L, LONG_MAX, Range(1),
            "Force an fsync after this many messages; replication, not fsync, is the durability default.")
    .define("flush.ms", _L, LONG_MAX, Range(0), "Force an fsync when data is older than this.")
    .define("index.interval.bytes", _I, 4096, Range(0),
            "Bytes between sparse offset-index entries: smaller means faster lookups, bigger indexes.")
    .define("max.message.bytes", _I, 1_048_588, Range(0), "Largest record batch the topic accepts.")
    .define("message.timestamp.type", _S, "CreateTime", OneOf(*_TIMESTAMP_TYPES),
            "Whether batches keep the producer's timestamp or get the broker's append time.")
    .define("message.timestamp.before.max.ms", _L, LONG_MAX, Range(0),
            "How far in the past a CreateTime timestamp may be before the batch is rejected.")
    .define("message.timestamp.after.max.ms", _L, 3_600_000, Range(0),
            "How far in the future a CreateTime timestamp may be before the batch is rejected.")
    .define("min.cleanable.dirty.ratio", _D, 0.5, Range(0, 1),
            "Dirty/total ratio at which the log becomes eligible for compaction.")
    .define("min.compaction.lag.ms", _L, 0, Range(0), "Minimum age before a record may be compacted.")
    .define("max.compaction.lag.ms", _L, LONG_MAX, Range(1), "Maximum age before a record must be compactable.")
    .define("min.insync.replicas", _I, 1, Range(1),
            "Replicas that must be in sync for an acks=all write to succeed.")
    .define("preallocate", _B, False, None, "Preallocate segment files on creation.")
    .define("retention.bytes", _L, -1, None, "Maximum partition size before old segments are deleted; -1: unlimited.")
    .define("retention.ms", _L, 604_800_000, Range(-1),
            "Maximum age of a segment's newest record before deletion; -1: unlimited.")
    .define("segment.bytes", _I, 1_073_741_824, Range(14), "Size at which a segment is rolled.")
    .define("segment.index.bytes", _I, 10_485_760, Range(4), "Maximum size of a segment's offset index.")
    .define("segment.jitter.ms", _L, 0, Range(0), "Random jitter subtracted from segment.ms to avoid roll storms.")
    .define("segment.ms", _L, 604_800_000, Range(1), "Age at which a segment is rolled even if not full.")
    .define("unclean.leader.election.enable", _B, False, None,
            "Allow an out-of-sync replica to become leader, trading acknowledged data for availability.")
)

# ---------------------------------------------------------------------------------------------
# Node-level keys (Kafka's KafkaConfig in KRaft mode, plus kraftlog's own)
# ---------------------------------------------------------------------------------------------

NODE_CONFIG_DEFS: Final = ConfigDef("node")
(
    NODE_CONFIG_DEFS
    # --- identity and roles
    .define("node.id", _I, NO_DEFAULT, Range(0),
            "This node's id, unique across brokers and controllers; required.")
    .define("process.roles", _LS, [], OneOf("broker", "controller"),
            "broker, controller, or both (combined mode, for small and dev clusters).")
    .define("broker.rack", _S, None, None, "Rack of this broker, used to spread replicas across racks.")
    # --- controller quorum
    .define("controller.quorum.voters", _LS, [], Custom(_voters, "a comma-separated list of id@host:port"),
            "The controller quorum: every voter's node id and Raft endpoint.")
    .define("controller.quorum.bootstrap.servers", _LS, [],
            Custom(_check_host_ports, "a comma-separated list of host:port"),
            "Accepted for Kafka compatibility; kraftlog's pysyncobj quorum still needs controller.quorum.voters.")
    .define("controller.quorum.election.timeout.ms", _I, 1000, Range(1),
            "Time without a leader before a voter starts an election.")
    .define("controller.quorum.fetch.timeout.ms", _I, 2000, Range(1),
            "Time without hearing from the leader before a voter suspects it.")
    .define("controller.quorum.request.timeout.ms", _I, 2000, Range(1),
            "Timeout of one request between quorum members.")
    .define("controller.quorum.election.backoff.max.ms", _I, 1000, Range(1),
            "Upper bound of the randomized back-off between elections.")
    .define("controller.quorum.retry.backoff.ms", _I, 20, Range(0),
            "Back-off before retrying a failed quorum request.")
    .define("controller.quorum.append.linger.ms", _I, 25, Range(0),
            "How long the leader batches appends before writing them to the log.")
    .define("controller.listener.names", _LS, None, None, "Names of the listeners used by the controllers.")
    # --- listeners
    .define("listeners", _LS, ["PLAINTEXT://:9092"],
            Custom(_listeners, "a comma-separated list of NAME://host:port"),
            "Endpoints this node listens on; an empty host binds every interface.")
    .define("advertised.listeners", _LS, None,
            Custom(_listeners, "a comma-separated list of NAME://host:port"),
            "Endpoints published to clients and other nodes; defaults to listeners.")
    .define("listener.security.protocol.map", _LS,
            ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
            Custom(_check_protocol_map, "a comma-separated list of LISTENER_NAME:PROTOCOL"),
            "Security protocol of each listener name.")
    .define("inter.broker.listener.name", _S, None, None, "Listener brokers use to reach each other.")
    .define("num.network.threads", _I, 3, Range(1), "Threads receiving requests and sending responses.")
    .define("num.io.threads", _I, 8, Range(1), "Threads processing requests, including disk I/O.")
    .define("background.threads", _I, 10, Range(1), "Threads for background tasks.")
    .define("queued.max.requests", _I, 500, Range(1), "Requests queued before network threads stop reading.")
    .define("socket.send.buffer.bytes", _I, 102_400, None, "SO_SNDBUF of server sockets; -1: OS default.")
    .define("socket.receive.buffer.bytes", _I, 102_400, None, "SO_RCVBUF of server sockets; -1: OS default.")
    .define("socket.request.max.bytes", _I, 104_857_600, Range(1), "Largest request a server accepts.")
    # --- storage locations and the metadata log
    .define("log.dirs", _LS, None, None, "Directories holding partition logs; overrides log.dir.")
    .define("log.dir", _LS, ["/tmp/kafka-logs"], None, "Log directory used when log.dirs is not set.")
    .define("metadata.log.dir", _S, None, None,
            "Directory of the metadata log; defaults to the first log directory.")
    .define("metadata.log.segment.bytes", _I, 1_073_741_824, Range(12), "Segment size of the metadata log.")
    .define("metadata.log.segment.ms", _L, 604_800_000, Range(1), "Age at which a metadata log segment rolls.")
    .define("metadata.log.max.record.bytes.between.snapshots", _L, 20_971_520, Range(1),
            "Bytes of new metadata records after which a snapshot is taken.")
    .define("metadata.log.max.snapshot.interval.ms", _L, 3_600_000, Range(0),
            "Time after which a snapshot is taken if there are new records; 0 disables.")
    .define("metadata.max.retention.bytes", _L, 104_857_600, None,
            "Metadata log bytes kept before old snapshots and segments are deleted; -1: unlimited.")
    .define("metadata.max.retention.ms", _L, 604_800_000, None,
            "Age of metadata snapshots and segments before deletion; -1: unlimited.")
    .define("metadata.max.idle.interval.ms", _I, 500, Range(0),
            "Interval of no-op records the active controller appends so followers see progress.")
    .define("num.recovery.threads.per.data.dir", _I, 2, Range(1),
            "Threads per log directory for recovery at start-up and flushing at shutdown.")
    # --- topic creation defaults and placement
    .define("num.partitions", _I, 1, Range(1), "Partition count of auto-created topics.")
    .define("default.replication.factor", _I, 1, Range(1), "Replication factor of auto-created topics.")
    .define("auto.create.topics.enable", _B, True, None, "Create a topic when a client first uses it.")
    .define("delete.topic.enable", _B, True, None, "Allow topics to be deleted.")
    .define("auto.leader.rebalance.enable", _B, True, None,
            "Move leadership back to preferred replicas when it drifts.")
    .define("leader.imbalance.check.interval.seconds", _L, 300, Range(1),
            "How often the controller checks leader imbalance.")
    .define("leader.imbalance.per.broker.percentage", _I, 10, Range(0, 100),
            "Imbalance percentage per broker that triggers a preferred-leader election.")
    # --- replication
    .define("min.insync.replicas", _I, 1, Range(1), "Default of the topic-level min.insync.replicas.",
            topic_key="min.insync.replicas")
    .define("unclean.leader.election.enable", _B, False, None,
            "Default of the topic-level unclean.leader.election.enable.", topic_key="unclean.leader.election.enable")
    .define("replica.lag.time.max.ms", _L, 30_000, Range(0),
            "A follower that has not caught up within this time is removed from the ISR.")
    .define("replica.fetch.max.bytes", _I, 1_048_576, Range(0), "Bytes per partition a follower fetch asks for.")
    .define("replica.fetch.wait.max.ms", _I, 500, Range(0),
            "Longest time a follower fetch waits for data; must not exceed replica.lag.time.max.ms.")
    .define("replica.fetch.min.bytes", _I, 1, Range(0), "Bytes a follower fetch waits for before returning.")
    .define("replica.fetch.response.max.bytes", _I, 10_485_760, Range(0), "Size cap of a whole follower fetch response.")
    .define("replica.fetch.backoff.ms", _I, 1000, Range(0), "Back-off after a failed follower fetch.")
    .define("replica.socket.timeout.ms", _I, 30_000, None, "Timeout of follower fetch requests.")
    .define("num.replica.fetchers", _I, 1, Range(1), "Fetcher threads per source broker.")
    .define("replica.high.watermark.checkpoint.interval.ms", _L, 5000, Range(1),
            "How often high watermarks are saved to disk.")
    .define("fetch.max.bytes", _I, 57_671_680, Range(1024), "Size cap of a consumer fetch response.")
    .define("message.max.bytes", _I, 1_048_588, Range(0), "Largest record batch accepted; topic default.",
            topic_key="max.message.bytes")
    .define("compression.type", _S, "producer", OneOf(*_COMPRESSION_TYPES), "Default topic compression.",
            topic_key="compression.type")
    # --- broker lifecycle
    .define("broker.heartbeat.interval.ms", _I, 2000, Range(1), "Interval of broker heartbeats to the controller.")
    .define("broker.session.timeout.ms", _I, 9000, Range(1),
            "A broker that has not heartbeated for this long is fenced.")
    .define("initial.broker.registration.timeout.ms", _I, 60_000, Range(1),
            "How long a starting broker tries to register before giving up.")
    .define("controlled.shutdown.enable", _B, True, None,
            "Move leadership away before a broker shuts down.")
    # --- partition log (log.*); the order within a topic key is the precedence order
    .define("log.segment.bytes", _I, 1_073_741_824, Range(14), "Segment size.", topic_key="segment.bytes")
    .define("log.roll.ms", _L, None, None, "Segment roll age in ms; overrides log.roll.hours.", topic_key="segment.ms")
    .define("log.roll.hours", _I, 168, Range(1), "Segment roll age in hours.",
            topic_key="segment.ms", topic_unit_ms=_MS_PER_HOUR)
    .define("log.roll.jitter.ms", _L, None, None, "Roll jitter in ms; overrides log.roll.jitter.hours.",
            topic_key="segment.jitter.ms")
    .define("log.roll.jitter.hours", _I, 0, Range(0), "Roll jitter in hours.",
            topic_key="segment.jitter.ms", topic_unit_ms=_MS_PER_HOUR)
    .define("log.retention.ms", _L, None, None,
            "Retention in ms (-1: unlimited); overrides log.retention.minutes and hours.", topic_key="retention.ms")
    .define("log.retention.minutes", _I, None, None, "Retention in minutes; overrides log.retention.hours.",
            topic_key="retention.ms", topic_unit_ms=_MS_PER_MINUTE)
    .define("log.retention.hours", _I, 168, None, "Retention in hours.",
            topic_key="retention.ms", topic_unit_ms=_MS_PER_HOUR)
    .define("log.retention.bytes", _L, -1, None, "Partition size limit; -1: unlimited.", topic_key="retention.bytes")
    .define("log.retention.check.interval.ms", _L, 300_000, Range(1), "How often retention is enforced.")
    .define("log.cleanup.policy", _LS, ["delete"], OneOf(*_CLEANUP_POLICIES), "Default cleanup policy.",
            topic_key="cleanup.policy")
    .define("log.cleaner.enable", _B, True, None, "Run the log cleaner (needed by compacted topics).")
    .define("log.cleaner.threads", _I, 1, Range(0), "Log cleaner threads.")
    .define("log.cleaner.backoff.ms", _L, 15_000, Range(0), "Sleep of the cleaner when there is nothing to clean.")
    .define("log.cleaner.dedupe.buffer.size", _L, 134_217_728, None, "Memory for deduplication, all threads.")
    .define("log.cleaner.io.buffer.size", _I, 524_288, Range(0), "I/O buffer memory of the cleaner, all threads.")
    .define("log.cleaner.io.buffer.load.factor", _D, 0.9, None, "Load factor of the dedupe buffer.")
    .define("log.cleaner.io.max.bytes.per.second", _D, sys.float_info.max, None, "Cleaner I/O throttle.")
    .define("log.cleaner.min.cleanable.ratio", _D, 0.5, Range(0, 1), "Default dirty ratio for compaction.",
            topic_key="min.cleanable.dirty.ratio")
    .define("log.cleaner.delete.retention.ms", _L, 86_400_000, Range(0), "Default tombstone retention.",
            topic_key="delete.retention.ms")
    .define("log.cleaner.min.compaction.lag.ms", _L, 0, Range(0), "Default minimum compaction lag.",
            topic_key="min.compaction.lag.ms")
    .define("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, Range(1), "Default maximum compaction lag.",
            topic_key="max.compaction.lag.ms")
    .define("log.index.interval.bytes", _I, 4096, Range(0), "Default sparse index interval.",
            topic_key="index.interval.bytes")
    .define("log.index.size.max.bytes", _I, 10_485_760, Range(4), "Default maximum offset index size.",
            topic_key="segment.index.bytes")
    .define("log.flush.interval.messages", _L, LONG_MAX, Range(1), "Default fsync interval in messages.",
            topic_key="flush.messages")
    .define("log.flush.interval.ms", _L, None, None, "Default fsync interval in ms; overrides the scheduler interval.",
            topic_key="flush.ms")
    .define("log.flush.scheduler.interval.ms", _L, LONG_MAX, None, "How often the flusher looks for logs to fsync.",
            topic_key="flush.ms")
    .define("log.flush.offset.checkpoint.interval.ms", _I, 60_000, Range(0),
            "How often the recovery point is saved.")
    .define("log.flush.start.offset.checkpoint.interval.ms", _I, 60_000, Range(0),
            "How often log start offsets are saved.")
    .define("log.segment.delete.delay.ms", _L, 60_000, Range(0), "Default delay before segment files are deleted.",
            topic_key="file.delete.delay.ms")
    .define("log.preallocate", _B, False, None, "Default for preallocating segment files.", topic_key="preallocate")
    .define("log.message.timestamp.type", _S, "CreateTime", OneOf(*_TIMESTAMP_TYPES), "Default timestamp type.",
            topic_key="message.timestamp.type")
    .define("log.message.timestamp.before.max.ms", _L, LONG_MAX, Range(0), "Default past-timestamp tolerance.",
            topic_key="message.timestamp.before.max.ms")
    .define("log.message.timestamp.after.max.ms", _L, 3_600_000, Range(0), "Default future-timestamp tolerance.",
            topic_key="message.timestamp.after.max.ms")
    # --- internal topics and coordinators
    .define("offsets.topic.replication.factor", _I, 3, Range(1), "Replication factor of __consumer_offsets.")
    .define("offsets.topic.num.partitions", _I, 50, Range(1), "Partitions of __consumer_offsets.")
    .define("offsets.topic.segment.bytes", _I, 104_857_600, Range(1), "Segment size of __consumer_offsets.")
    .define("offsets.retention.minutes", _I, 10_080, Range(1), "How long committed offsets of empty groups are kept.")
    .define("offsets.retention.check.interval.ms", _L, 600_000, Range(1), "How often stale offsets are checked.")
    .define("offsets.commit.timeout.ms", _I, 5000, Range(1), "How long an offset commit waits for replication.")
    .define("offsets.load.buffer.size", _I, 5_242_880, Range(1), "Read size when loading offsets into the cache.")
    .define("transaction.state.log.replication.factor", _I, 3, Range(1), "Replication factor of __transaction_state.")
    .define("transaction.state.log.min.isr", _I, 2, Range(1), "min.insync.replicas of __transaction_state.")
    .define("transaction.state.log.num.partitions", _I, 50, Range(1), "Partitions of __transaction_state.")
    .define("transaction.state.log.segment.bytes", _I, 104_857_600, Range(1), "Segment size of __transaction_state.")
    .define("transaction.max.timeout.ms", _I, 900_000, Range(1), "Largest transaction timeout a producer may ask for.")
    .define("transactional.id.expiration.ms", _I, 604_800_000, Range(1),
            "Idle time after which a transactional id is forgotten.")
    .define("producer.id.expiration.ms", _I, 86_400_000, Range(1),
            "Idle time after which an idempotent producer's state is forgotten.")
    .define("share.coordinator.state.topic.replication.factor", _I, 3, Range(1),
            "Replication factor of __share_group_state (accepted for Kafka compatibility).")
    .define("share.coordinator.state.topic.min.isr", _I, 2, Range(1),
            "min.insync.replicas of __share_group_state (accepted for Kafka compatibility).")
    .define("group.initial.rebalance.delay.ms", _I, 3000, Range(0),
            "Wait for more members before the first rebalance of a new group.")
    .define("group.min.session.timeout.ms", _I, 6000, None, "Smallest session timeout a member may ask for.")
    .define("group.max.session.timeout.ms", _I, 1_800_000, None, "Largest session timeout a member may ask for.")
    .define("group.max.size", _I, INT_MAX, Range(1), "Maximum members of one group.")
    # --- kraftlog's own keys
    .define("controller.quorum.fsync", _B, True, None,
            "kraftlog: fsync the Raft journal before acknowledging; turn off only for throwaway test clusters.",
            kraftlog_only=True)
    .define("controller.quorum.raft.port.offset", _I, 1, Range(1, 1000),
            "kraftlog: each voter's Raft (pysyncobj) transport listens on its controller.quorum.voters "
            "port plus this offset; the voter port itself serves the controller's gRPC services.",
            kraftlog_only=True)
    .define("controller.quorum.raft.password", _P, None, None,
            "kraftlog: shared secret authenticating controllers to each other on the Raft port (handshake HMAC, per-connection encryption keys); required, a controller refuses to start without it.",
            kraftlog_only=True)
    .define("metrics.port", _I, -1, Range(-1, 65535),
            "kraftlog: port of the Prometheus metrics endpoint; -1 turns it off.", kraftlog_only=True)
    .define("grpc.max.message.bytes", _I, 104_857_600, Range(1024, INT_MAX),
            "kraftlog: largest gRPC message sent or received; the gRPC twin of socket.request.max.bytes.",
            kraftlog_only=True)
)


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    """Group broker keys by the topic key they default, in definition (= precedence) order."""
    synonyms: dict[str, list[str]] = {name: [] for name in TOPIC_CONFIG_DEFS}
    for key in NODE_CONFIG_DEFS.values():
        if key.topic_key is not None:
            if key.topic_key not in synonyms:
                raise ValueError(f"{key.name} names unknown topic key {key.topic_key}")
            synonyms[key.topic_key].append(key.name)
    return {topic: tuple(names) for topic, names in synonyms.items()}


#: Topic-level key -> the broker-level keys that default it, highest precedence first.
TOPIC_SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(_build_synonyms())

# A topic key in a node file, or a broker key in a topic request, is a predictable mix-up.
for _topic_key, _broker_keys in TOPIC_SYNONYMS.items():
    if _broker_keys and _topic_key not in NODE_CONFIG_DEFS:
        NODE_CONFIG_DEFS.hint(_topic_key, _broker_keys[0])
    for _broker_key in _broker_keys:
        if _broker_key not in TOPIC_CONFIG_DEFS:
            TOPIC_CONFIG_DEFS.hint(_broker_key, _topic_key)
del _topic_key, _broker_keys, _broker_key

TOPIC_CONFIG_DEFS.freeze()
NODE_CONFIG_DEFS.freeze()

# ---------------------------------------------------------------------------------------------
# NodeConfig
# ---------------------------------------------------------------------------------------------


@final
class NodeConfig(Mapping[str, object]):
    """The validated, immutable configuration of one node.

    ``cfg[key]`` returns the typed value, or Kafka's default when the key was not set (``None`` for
    keys Kafka leaves unset, e.g. ``log.retention.ms``). ``originals`` holds only what was set
    explicitly, which is what a config dump or DescribeConfigs "source" needs.
    """

    __slots__ = ("_values", "_originals", "_voters")

    _values: Mapping[str, object]
    _originals: Mapping[str, object]
    _voters: Mapping[int, tuple[str, int]]

    def __init__(self, settings: Mapping[str, object] | None = None) -> None:
        """Parse and validate ``settings`` (raw strings or typed values keyed by Kafka name)."""
        parsed = NODE_CONFIG_DEFS.parse(settings or {})
        values = NODE_CONFIG_DEFS.defaults()
        values.update(parsed)
        voters = _check_node(values)
        object.__setattr__(self, "_values", MappingProxyType(values))
        object.__setattr__(self, "_originals", MappingProxyType(parsed))
        object.__setattr__(self, "_voters", MappingProxyType(voters))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, object]) -> NodeConfig:
        """Build a config from a mapping, e.g. in tests or the local-cluster launcher."""
        return cls(settings)

    def __reduce__(self) -> tuple[type[NodeConfig], tuple[dict[str, object]]]:
        """Pickle as the explicit settings (re-validated on load), e.g. for worker processes."""
        return (NodeConfig, (dict(self._originals),))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("NodeConfig is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("NodeConfig is immutable")

    def __getitem__(self, key: str) -> object:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(str(NODE_CONFIG_DEFS.unknown_key_error(key))) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key!r}: {value!r}" for key, value in self._originals.items())
        return f"NodeConfig({{{shown}}})"

    @property
    def originals(self) -> Mapping[str, object]:
        """The explicitly set keys and their typed values (read-only)."""
        return self._originals

    @property
    def node_id(self) -> int:
        """``node.id``."""
        value = self._values["node.id"]
        assert isinstance(value, int)
        return value

    @property
    def roles(self) -> tuple[str, ...]:
        """``process.roles`` in the order given."""
        value = self._values["process.roles"]
        assert isinstance(value, list)
        return tuple(value)

    @property
    def is_broker(self) -> bool:
        """True if this node runs the broker role."""
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        """True if this node runs the controller role (is a Raft voter)."""
        return "controller" in self.roles

    @property
    def log_dirs(self) -> list[str]:
        """Partition log directories: ``log.dirs`` if set, else ``log.dir`` (Kafka's precedence)."""
        dirs = self._values["log.dirs"]
        if dirs is None:
            dirs = self._values["log.dir"]
        assert isinstance(dirs, list)
        return list(dirs)

    @property
    def metadata_log_dir(self) -> str:
        """``metadata.log.dir``, or the first log directory as in Kafka."""
        value = self._values["metadata.log.dir"]
        return value if isinstance(value, str) and value else self.log_dirs[0]

    @property
    def quorum_voters(self) -> Mapping[int, tuple[str, int]]:
        """``controller.quorum.voters`` as voter id -> (host, port)."""
        return self._voters

    def topic_defaults(self) -> dict[str, object]:
        """Topic-level defaults derived from this node's broker-level keys, with Kafka's precedence.

        For each topic key the first broker synonym with a value wins (``log.retention.ms``, then
        ``log.retention.minutes``, then ``log.retention.hours``), scaled to milliseconds; a negative
        retention means unlimited and is reported as -1, as Kafka does.
        """
        result: dict[str, object] = {}
        for topic_key, spec in TOPIC_CONFIG_DEFS.items():
            value: object = spec.default
            for broker_key in TOPIC_SYNONYMS[topic_key]:
                candidate = self._values[broker_key]
                if candidate is None:
                    continue
                unit = NODE_CONFIG_DEFS[broker_key].topic_unit_ms
                if unit != 1 and isinstance(candidate, int):
                    candidate = min(candidate * unit, LONG_MAX)
                value = candidate
                break
            if topic_key == "retention.ms" and isinstance(value, int) and value < 0:
                value = -1
            result[topic_key] = list(value) if isinstance(value, list) else value
        return result

    def to_properties(self, *, include_defaults: bool = False, mask_passwords: bool = True) -> str:
        """Render as a Java ``.properties`` text that :func:`load_node_config` reads back.

        Only explicitly set keys by default, so the output stays a readable node file; unset
        (``None``) values cannot be expressed and are skipped. Passwords are masked unless asked
        otherwise, because this text ends up in logs and support bundles.
        """
        lines: list[str] = []
        for name, key in NODE_CONFIG_DEFS.items():
            if not include_defaults and name not in self._originals:
                continue
            value = self._values.get(name)
            if value is None:
                continue
            text = key.format(value, mask_passwords=mask_passwords)
            lines.append(f"{_escape_properties(name, is_key=True)}={_escape_properties(text, is_key=False)}")
        return "".join(line + "\n" for line in lines)


def _check_node(values: Mapping[str, object]) -> dict[int, tuple[str, int]]:
    """Cross-key checks Kafka makes at start-up; returns the parsed voters."""
    node_id = values.get("node.id")
    if node_id is None:
        raise ConfigError("missing required config 'node.id' (a non-negative integer)", key="node.id")
    assert isinstance(node_id, int)

    roles = values["process.roles"]
    assert isinstance(roles, list)
    if not roles:
        raise ConfigError(
            "'process.roles' must be a non-empty subset of [broker, controller]", key="process.roles", value=roles
        )
    if len(set(roles)) != len(roles):
        raise ConfigError(f"'process.roles' lists a role twice: {roles}", key="process.roles", value=roles)

    voter_items = values["controller.quorum.voters"]
    assert isinstance(voter_items, list)
    voters = _voters(voter_items)  # already validated by the key's validator
    if not voters:
        raise ConfigError(
            "'controller.quorum.voters' must list the controller quorum as id@host:port,... "
            "(kraftlog needs the static voter set even when controller.quorum.bootstrap.servers is set)",
            key="controller.quorum.voters",
            value=voter_items,
        )
    ids = ", ".join(str(voter) for voter in voters)
    if "controller" in roles and node_id not in voters:
        raise ConfigError(
            f"node.id {node_id} has the controller role but is not in 'controller.quorum.voters' ({ids})",
            key="controller.quorum.voters",
            value=voter_items,
        )
    if "controller" not in roles and node_id in voters:
        raise ConfigError(
            f"node.id {node_id} is in 'controller.quorum.voters' ({ids}) but process.roles lacks 'controller'",
            key="process.roles",
            value=roles,
        )

    dirs = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
    if not dirs:
        raise ConfigError("'log.dirs' (or 'log.dir') must name at least one directory", key="log.dirs", value=dirs)

    wait_ms, lag_ms = values["replica.fetch.wait.max.ms"], values["replica.lag.time.max.ms"]
    assert isinstance(wait_ms, int) and isinstance(lag_ms, int)
    if wait_ms > lag_ms:
        raise ConfigError(
            f"'replica.fetch.wait.max.ms' ({wait_ms}) must not exceed 'replica.lag.time.max.ms' ({lag_ms}),"
            " or healthy followers would drop out of the ISR",
            key="replica.fetch.wait.max.ms",
            value=wait_ms,
        )
    return voters


# ---------------------------------------------------------------------------------------------
# Topic configs
# ---------------------------------------------------------------------------------------------


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, object]:
    """Validate topic-level configs of CreateTopics / IncrementalAlterConfigs; return typed values.

    Only the given keys are returned (defaults come from :meth:`NodeConfig.topic_defaults`). An
    unknown key or a bad value raises :class:`ConfigError` naming the key; ``None`` values (a DELETE
    operation) must be filtered out by the caller because they are not values.
    """
    parsed = TOPIC_CONFIG_DEFS.parse(configs)
    min_lag, max_lag = parsed.get("min.compaction.lag.ms"), parsed.get("max.compaction.lag.ms")
    if isinstance(min_lag, int) and isinstance(max_lag, int) and min_lag > max_lag:
        raise ConfigError(
            f"'min.compaction.lag.ms' ({min_lag}) must not exceed 'max.compaction.lag.ms' ({max_lag})",
            key="min.compaction.lag.ms",
            value=configs["min.compaction.lag.ms"],
        )
    return parsed


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
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if index >= len(lines):
                break
            line += lines[index].lstrip(_PROPERTIES_WS)
            index += 1
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


def load_node_config(path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> NodeConfig:
    """Load, validate and freeze a node's configuration.

    ``path`` is a TOML or ``.properties`` file (or None for defaults plus overrides); ``overrides``
    are ``key=value`` strings from ``--override`` and win over the file. Raises :class:`ConfigError`
    on an unknown key (with the closest known one), a bad value (with the expected type or range),
    or contradicting keys (a controller missing from the voters, no roles, no node.id).
    """
    if isinstance(overrides, str):
        raise TypeError("overrides must be a sequence of 'key=value' strings, not one string")
    raw: dict[str, object] = {}
    if path is not None:
        raw.update(read_config_file(path))
    for item in overrides:
        key, value = _split_override(item)
        raw[key] = value
    return NodeConfig(raw)
