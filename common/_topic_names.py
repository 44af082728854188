"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic.validate``), once: the
controller refuses to create a topic of an illegal name, and a broker answers Metadata for such a
name INVALID_TOPIC_EXCEPTION without asking the controller (a client then fails its records
instead of waiting for a topic that can never exist)."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_TOPIC_NAME_LENGTH", "topic_name_problem"]

MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.fullmatch(name):  # not match(): "$" would accept a trailing newline
        return f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None
