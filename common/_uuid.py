"""Kafka's text form of a UUID (topic ids, cluster ids, directory ids): the 16 bytes in URL-safe
base64 without padding, 22 characters, as ``Uuid.toString()`` writes them and every Kafka tool shows
and accepts them.

Inside kraftlog a topic id is kept in the canonical 36-character form (the metadata records and the
gRPC messages carry it so); people see and type Kafka's form, and either form is accepted back.
"""

from __future__ import annotations

import base64
import binascii
import uuid

__all__ = ["kafka_uuid", "parse_uuid"]

_KAFKA_UUID_LENGTH = 22


def kafka_uuid(value: str | uuid.UUID) -> str:
    """``value`` (a `uuid.UUID`, its canonical text, or already Kafka's form) in Kafka's form."""
    return base64.urlsafe_b64encode(parse_uuid(value).bytes).decode("ascii").rstrip("=")


def parse_uuid(value: str | uuid.UUID) -> uuid.UUID:
    """A UUID from Kafka's 22-character form or the canonical hex form; ValueError names the text."""
    if isinstance(value, uuid.UUID):
        return value
    text = value.strip()
    if len(text) == _KAFKA_UUID_LENGTH:
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            raw = b""
        # 22 characters carry 132 bits; like Kafka's Uuid.fromString (Java's decoder), the unused
        # last 4 are ignored, and `kafka_uuid` writes them as zeros
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    else:
        try:
            return uuid.UUID(text)
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a UUID (Kafka's 22-character base64 form or 8-4-4-4-12 hex)")
