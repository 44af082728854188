"""The schema machinery of kraftlog's configs: types, validators, `ConfigKey`, `ConfigDef`, `ConfigError`.

Kafka's ``ConfigDef`` in Python: a key has a name, a type, a default, a validator and a doc line;
values parse from strings (``.properties``, ``--override``) or typed TOML. Import from
`kraftlog.common.config`.
"""

from __future__ import annotations

import difflib
import enum
import hmac
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, Final, Protocol, final

from kraftlog.common import errors as kerr

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


_TYPE_PHRASES: Final[Mapping[ConfigType, str]] = MappingProxyType(
    {
        ConfigType.INT: "an integer",
        ConfigType.LONG: "an integer",
        ConfigType.DOUBLE: "a number",
        ConfigType.BOOLEAN: "true or false",
        ConfigType.STRING: "a string",
        ConfigType.LIST: "a comma-separated list",
        ConfigType.PASSWORD: "a string",
    }
)


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
        # a rejected password is still a password (a typo of the real one): never in the message
        shown = repr(Password.HIDDEN) if self.type is ConfigType.PASSWORD else _show(raw)
        message = f"invalid value {shown} for {self.name!r}: expected {self.expectation()}"
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
        #: resolves a family of prefixed names (``listener.name.<l>.ssl.client.auth``) to a key
        self._prefix_resolver: Callable[[ConfigDef, str], ConfigKey | None] | None = None
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

    def resolve_prefixes(self, resolver: Callable[[ConfigDef, str], ConfigKey | None]) -> None:
        """Accept names outside the schema that ``resolver`` maps to a defined key (None: not one
        of its family); such a name is parsed and validated as that key, errors naming the name."""
        if self._frozen:
            raise RuntimeError(f"{self.label} config definitions are frozen")
        self._prefix_resolver = resolver

    def key_for(self, name: str) -> ConfigKey | None:
        """The definition ``name`` is parsed with: its own, or the one its prefix family maps it to."""
        key = self._keys.get(name)
        if key is None and self._prefix_resolver is not None:
            base = self._prefix_resolver(self, name)
            if base is not None:
                key = replace(base, name=name, topic_key=None)
        return key

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
        key = self.key_for(name)
        if key is None:
            raise self.unknown_key_error(name, raw)
        return key.parse(raw)

    def parse(self, raw: Mapping[str, object]) -> dict[str, object]:
        """Parse the given settings (only those; no defaults added), failing on the first bad one."""
        return {name: self.parse_value(name, value) for name, value in raw.items()}

    def defaults(self) -> dict[str, object]:
        """Every key that has a default (``None`` included), in definition order."""
        return {name: key.default for name, key in self._keys.items() if key.default is not NO_DEFAULT}
