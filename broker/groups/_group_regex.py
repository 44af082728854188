"""Topic regular expressions of KIP-848 consumer groups (``SubscribedTopicRegex``), evaluated by
the coordinator as Kafka's does with RE2J: RE2 syntax (through Google's RE2 binding, so the syntax
matches and no pattern takes more than linear time in the topic name), matching whole names (Java's
``Matcher.matches``). A pattern RE2 refuses is INVALID_REGULAR_EXPRESSION.

Internal topics (``__consumer_offsets``, ``__transaction_state``, ...) are never matched, as Kafka's
consumers leave them out of pattern subscriptions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import re2

from kraftlog.common import errors as kerr
from kraftlog.common import is_internal_topic

__all__ = ["regex_error", "resolve_regex"]

_MAX_PATTERN_BYTES = 16 * 1024  # a pattern longer than this is refused before RE2 sees it


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the client's error, answered, not logged to stderr
    return options


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    """The compiled pattern (cached: members heartbeat the same one again and again), or raises
    INVALID_REGULAR_EXPRESSION."""
    if len(pattern.encode()) > _MAX_PATTERN_BYTES:
        raise kerr.InvalidRegularExpressionError(f"SubscribedTopicRegex is longer than {_MAX_PATTERN_BYTES} bytes")
    try:
        return re2.compile(pattern, _options())
    except re2.error as err:
        reason = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else err
        raise kerr.InvalidRegularExpressionError(f"SubscribedTopicRegex {pattern!r} is invalid: {reason}") from None


def regex_error(pattern: str) -> kerr.KafkaError | None:
    """None when RE2 accepts ``pattern``, else the INVALID_REGULAR_EXPRESSION to answer."""
    try:
        _compiled(pattern)
    except kerr.InvalidRegularExpressionError as err:
        return err
    return None


def resolve_regex(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics of ``topic_names`` whose whole name ``pattern`` matches (internal ones left out);
    an invalid pattern matches none. Every member's heartbeat asks again with the same topics
    until they change: the answer is remembered per (pattern, topics), so a heartbeat costs a
    look-up, not a match against every topic."""
    names = topic_names if isinstance(topic_names, tuple) else tuple(topic_names)
    return _resolved(pattern, names)


@functools.lru_cache(maxsize=32)
def _resolved(pattern: str, names: tuple[str, ...]) -> frozenset[str]:
    try:
        compiled = _compiled(pattern)
    except kerr.InvalidRegularExpressionError:
        return frozenset()
    return frozenset(name for name in names if not is_internal_topic(name) and compiled.fullmatch(name))
