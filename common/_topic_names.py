"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic.validate``), once: the
controller refuses to create a topic of an illegal name, and a broker answers Metadata for such a
name INVALID_TOPIC_EXCEPTION without asking the controller (a client then fails its records
instead of waiting for a topic that can never exist)."""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "INTERNAL_TOPICS",
    "MAX_TOPIC_NAME_LENGTH",
    "OFFSETS_TOPIC",
    "SHARE_GROUP_STATE_TOPIC",
    "TXN_TOPIC",
    "is_internal_topic",
    "topic_name_problem",
]

MAX_TOPIC_NAME_LENGTH: Final = 249

#: Kafka's internal topics (``Topic.INTERNAL_TOPICS``): the coordinators keep their state in them,
#: Metadata flags them ``is_internal``, and pattern subscriptions leave them out. Any other name,
#: one starting with ``__`` included, is a user's topic.
OFFSETS_TOPIC: Final = "__consumer_offsets"
TXN_TOPIC: Final = "__transaction_state"
SHARE_GROUP_STATE_TOPIC: Final = "__share_group_state"
INTERNAL_TOPICS: Final = frozenset({OFFSETS_TOPIC, TXN_TOPIC, SHARE_GROUP_STATE_TOPIC})


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


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
