"""The base of Kafka's error table: `KafkaError`, its abstract groupings and the code/name registry.

Split from `kraftlog.common.errors` (the public module) so that the table of ~130 classes
(`_error_table`) and the machinery that registers them each stay readable; import from
`kraftlog.common.errors`, never from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "ERRORS_BY_CODE",
    "InvalidMetadataError",
    "KafkaError",
    "RecordError",
    "RetriableError",
]


# Kafka error codes travel as int16 on the wire.
_INT16_MIN = -(2**15)
_INT16_MAX = 2**15 - 1

_BY_CODE: dict[int, type[KafkaError]] = {}
_BY_NAME: dict[str, type[KafkaError]] = {}
_UNKNOWN_CODE_CLASSES: dict[int, type[KafkaError]] = {}

#: Read-only view of the table: error code -> exception class (code 0, NONE, is not in it).
ERRORS_BY_CODE: Mapping[int, type[KafkaError]] = MappingProxyType(_BY_CODE)

# Names older Kafka versions (and older clients) used for codes that were renamed since.
_LEGACY_NAMES: dict[str, int] = {
    "UNKNOWN": -1,
    "NOT_LEADER_FOR_PARTITION": 6,
    "GROUP_LOAD_IN_PROGRESS": 14,
    "GROUP_COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR_FOR_GROUP": 16,
}

# Attributes a context keyword may not replace: they define what the error *is*.
_RESERVED_CONTEXT = frozenset({"error_code", "error_name", "retriable", "message", "context", "args", "record_errors"})


class RecordError(NamedTuple):
    """One refused record, as Kafka's ProduceResponse ``RecordErrors`` names it.

    ``batch_index`` is the record's index in the partition's produce payload, counting from 0
    across its batches: for the single batch a producer sends, Kafka's index within the batch.
    """

    batch_index: int
    message: str


class KafkaError(Exception):
    """The server experienced an unexpected error while processing the request.

    Base of every Kafka protocol error. ``error_code``, ``error_name`` and ``retriable`` are class
    attributes so code can reason about an error type without an instance (``cls.retriable`` in a
    retry loop, ``cls.error_code`` when filling a response). Extra keyword arguments become instance
    attributes and are kept in :attr:`context`: NOT_LEADER_OR_FOLLOWER and NOT_CONTROLLER use it to
    carry the current leader (``leader_id``, ``leader_address``) so a client can redirect at once
    instead of refreshing metadata first.
    """

    error_code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    _dynamic: ClassVar[bool] = False

    message: str
    context: dict[str, Any]
    record_errors: tuple[RecordError, ...]

    def __init_subclass__(
        cls,
        *,
        code: int | None = None,
        name: str | None = None,
        retriable: bool | None = None,
        _register: bool = True,
        **kwargs: Any,
    ) -> None:
        """Set the class attributes from keywords and register the class in the code/name table.

        A subclass without ``code`` is an abstract grouping (or a finer-grained alias) that inherits
        its parent's code and is not registered, so the table keeps exactly one class per code.
        """
        super().__init_subclass__(**kwargs)
        if retriable is not None:
            if not retriable and issubclass(cls, RetriableError):
                raise TypeError(f"{cls.__name__} derives from RetriableError but says retriable=False")
            cls.retriable = retriable
        if (code is None) != (name is None):
            raise TypeError(f"{cls.__name__}: give both code= and name=, or neither")
        if code is None or name is None:
            return
        if code == 0:
            raise TypeError("code 0 is NONE, which is not an error")
        if not _INT16_MIN <= code <= _INT16_MAX:
            raise TypeError(f"{cls.__name__}: error code {code} does not fit in int16")
        if name != name.upper():
            raise TypeError(f"{cls.__name__}: error name {name!r} must be upper-case like Kafka's")
        cls.error_code = code
        cls.error_name = name
        if not _register:
            return
        if code in _BY_CODE:
            raise TypeError(f"error code {code} registered twice: {_BY_CODE[code].__name__}, {cls.__name__}")
        if name in _BY_NAME:
            raise TypeError(f"error name {name} registered twice: {_BY_NAME[name].__name__}, {cls.__name__}")
        _BY_CODE[code] = cls
        _BY_NAME[name] = cls

    def __init__(
        self, message: str | None = None, *, record_errors: Iterable[RecordError] = (), **context: Any
    ) -> None:
        if message is None:
            message = _default_message(type(self))
        super().__init__(message)
        self.message = message
        # The records a produce was refused for (INVALID_RECORD, INVALID_TIMESTAMP ...); the broker
        # copies them into the produce response. Empty unless the error is about particular records.
        self.record_errors = tuple(record_errors)
        self.context = {}
        for key, value in context.items():
            if key.startswith("_") or key in _RESERVED_CONTEXT or _is_behaviour(type(self), key):
                raise TypeError(f"{type(self).__name__}: {key!r} cannot be used as a context keyword")
            setattr(self, key, value)
            self.context[key] = value

    def __str__(self) -> str:
        if not self.context:
            return self.message
        extra = ", ".join(f"{key}={value!r}" for key, value in self.context.items())
        return f"{self.message} ({extra})"

    def __repr__(self) -> str:
        parts = [repr(self.message)] + [f"{key}={value!r}" for key, value in self.context.items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by code for classes built on the fly for unknown codes (they are not importable)."""
        if type(self)._dynamic:
            return (_rebuild, (self.error_code, self.message, dict(self.context), self.record_errors))
        return (_rebuild_static, (type(self), self.message, dict(self.context), self.record_errors))


def _is_behaviour(cls: type[KafkaError], key: str) -> bool:
    """True if ``key`` names a method or other class attribute that a context value would shadow.

    Attributes declared on the class with the value ``None`` are hint slots (``leader_id`` and
    friends) and may be filled in.
    """
    if not hasattr(cls, key):
        return False
    return getattr(cls, key) is not None


def _default_message(cls: type[KafkaError]) -> str:
    """The first line of the nearest docstring: the one place each error's meaning is written."""
    for klass in cls.__mro__:
        doc = klass.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.strip():
            return doc.strip().splitlines()[0].strip()
    return cls.error_name


#: The code -> class lookup of the whole table (`kraftlog.common.errors.error_for_code`), installed by
#: the package when it has built the table: this module is below the table, so it cannot import it.
_code_lookup: Callable[[int], type[KafkaError]] | None = None


def install_code_lookup(lookup: Callable[[int], type[KafkaError]]) -> None:
    """Let unpickling find an error's class by code (called once, by `kraftlog.common.errors`)."""
    global _code_lookup
    _code_lookup = lookup


def _rebuild(
    code: int, message: str, context: dict[str, Any], record_errors: tuple[RecordError, ...] = ()
) -> KafkaError:
    if _code_lookup is None:  # pragma: no cover - the package installs it at import
        raise RuntimeError("kraftlog.common.errors was not imported")
    return _code_lookup(code)(message, record_errors=record_errors, **context)


def _rebuild_static(
    cls: type[KafkaError], message: str, context: dict[str, Any], record_errors: tuple[RecordError, ...] = ()
) -> KafkaError:
    return cls(message, record_errors=record_errors, **context)


class RetriableError(KafkaError, retriable=True):
    """A transient error: the same request may succeed if sent again after a back-off.

    Abstract grouping (Kafka's ``RetriableException``) so clients can ``except RetriableError``.
    """


class InvalidMetadataError(RetriableError):
    """The client's view of the cluster is stale: refresh metadata, then retry.

    Abstract grouping modelled on Kafka's ``InvalidMetadataException``: leadership or placement
    moved, so retrying against the same broker without new metadata would fail again.
    """
