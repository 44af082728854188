"""Client settings that name features kraftlog does not have yet.

Kafka's clients accept settings such as ``enable.idempotence``, ``transactional.id``, ``group.id``
with ``enable.auto.commit`` or ``isolation.level=read_committed``. A client that took them and went
on without the feature would pretend: the user would believe records are deduplicated, offsets
committed or aborted transactions hidden. So each such setting is accepted only with a value that
keeps Kafka's meaning without the feature (``enable.idempotence=false``, ``read_uncommitted``, ...),
and any other value is refused with `UnsupportedConfigError`, naming the setting and what to use
instead. Later issues that build the features lift the refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "UnsupportedConfigError",
    "Unsupported",
    "check_unsupported_properties",
    "parse_bool",
    "refuse",
    "java_class_is",
    "PLAINTEXT_ONLY",
    "BYTES_SERIALIZER",
    "BYTES_DESERIALIZER",
    "FALSE_ONLY",
]


class UnsupportedConfigError(ValueError):
    """A setting names a feature this client does not have yet (a `ValueError`, so callers that
    catch bad settings catch it too)."""


def parse_bool(value: str, key: str) -> bool:
    """Kafka's boolean config values: ``true`` / ``false`` (any case)."""
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"invalid value {value!r} for {key}: expected true or false")
    return text == "true"


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A property whose feature is missing: ``accepts(value)`` says whether the value keeps
    Kafka's meaning without it; ``why`` and ``instead`` go into the error."""

    accepts: Callable[[str], bool]
    why: str
    instead: str


def refuse(option: str, value: object, why: str, instead: str) -> UnsupportedConfigError:
    """The error for ``option=value`` (returned, so the caller raises it where it stands)."""
    return UnsupportedConfigError(f"{option}={value} is not supported yet: {why}; {instead}")


def check_unsupported_properties(props: Mapping[str, str], table: Mapping[str, Unsupported]) -> None:
    """Raise `UnsupportedConfigError` for the first property of ``table`` with a refused value."""
    for key, value in props.items():
        rule = table.get(key)
        if rule is not None and not rule.accepts(value):
            raise refuse(key, value, rule.why, rule.instead)


def java_class_is(*names: str) -> Callable[[str], bool]:
    """Accepts an empty value or one of Kafka's class names ``names`` (simple or qualified)."""

    def accepts(value: str) -> bool:
        text = value.strip()
        return not text or text.rsplit(".", 1)[-1] in names

    return accepts


def _is(*allowed: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() in allowed


PLAINTEXT_ONLY = Unsupported(
    _is("plaintext"),
    "security settings do not travel as client properties here",
    "pass --command-config FILE (security.protocol, ssl.*, sasl.*) or the client's security_protocol, "
    "ssl_* and sasl_* arguments",
)
BYTES_SERIALIZER = Unsupported(
    java_class_is("ByteArraySerializer", "StringSerializer"),
    "this client sends bytes (or UTF-8 text) as given",
    "serialize in the application, or pass key_serializer/value_serializer",
)
BYTES_DESERIALIZER = Unsupported(
    java_class_is("ByteArrayDeserializer", "StringDeserializer"),
    "this client returns the bytes as stored",
    "deserialize in the application, or pass key_deserializer/value_deserializer",
)
FALSE_ONLY = _is("false")
