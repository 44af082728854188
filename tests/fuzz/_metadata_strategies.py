"""Hypothesis strategies for metadata records, shared by the metadata fuzz tests: valid records built
from the dataclasses' type hints, any msgpack value, and maps shaped like records whose values are
anything (they reach the field handling behind the type lookup)."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from hypothesis import strategies as st

from kraftlog.metadata_log._records import RECORD_TYPES, BrokerEndpoint, LogEntry, MetadataRecord, QuotaEntity

__all__ = ["records", "entries", "msgpack_values", "record_like_maps", "wire_ints"]

# ------------------------------------------------------------------ valid records, from the type hints

_ints = st.integers(-(2**31), 2**31 - 1)
_text = st.text(max_size=12)
_endpoints = st.builds(BrokerEndpoint, _text, _text, st.integers(0, 65535), _text)
_quota_entities = st.dictionaries(_text, st.none() | _text, max_size=3).map(lambda d: tuple(sorted(d.items())))


def _for_type(hint: Any) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is int:
        return _ints
    if hint is bool:
        return st.booleans()
    if hint is float:  # a quota's value: any finite double (NaN would not equal itself after a round trip)
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is str:
        return _text
    if hint is bytes:
        return st.binary(max_size=16)
    if hint == QuotaEntity:  # as the record keeps one: one name per entity type, sorted by type
        return _quota_entities
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]
        return st.lists(_for_type(args[0]), max_size=4).map(tuple)
    if origin is tuple:  # a fixed shape, such as a supported feature's (name, min, max)
        return st.tuples(*(_for_type(a) for a in args))
    if hint is BrokerEndpoint:
        return _endpoints
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and hasattr(hint, "from_wire"):
        # a nested part of a record: a VotersRecord's voters and their endpoints (issue 26)
        return st.builds(hint, **{n: _for_type(h) for n, h in typing.get_type_hints(hint).items()})
    if type(None) in args:  # X | None
        (inner,) = (a for a in args if a is not type(None))
        return st.none() | _for_type(inner)
    raise AssertionError(f"no strategy for {hint!r}")


def _record_strategy(cls: type[MetadataRecord]) -> st.SearchStrategy[MetadataRecord]:
    hints = typing.get_type_hints(cls)
    fields = {name: _for_type(hint) for name, hint in hints.items() if typing.get_origin(hint) is not typing.ClassVar}
    return st.builds(cls, **fields)


records = st.one_of([_record_strategy(cls) for cls in RECORD_TYPES.values()])
entries = st.builds(LogEntry, st.integers(0, 2**62), st.integers(0, 2**31), st.integers(0, 2**50), records)

# ------------------------------------------------------------------ structure-aware garbage

wire_ints = st.integers(-(2**63), 2**64 - 1)  # what msgpack can carry
_msgpack_scalars = st.none() | st.booleans() | wire_ints | st.floats() | st.text(max_size=8) | st.binary(max_size=8)
msgpack_values = st.recursive(
    _msgpack_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            _msgpack_scalars.filter(lambda k: not isinstance(k, float) or not math.isnan(k)), inner, max_size=4
        )
    ),
    max_leaves=12,
)

_FIELD_NAMES = sorted(
    {name for cls in RECORD_TYPES.values() for name in typing.get_type_hints(cls)}
    | {"name", "host", "port", "security_protocol"}
)


@st.composite
def record_like_maps(draw: st.DrawFn) -> dict[Any, Any]:
    """A map shaped like a record (a known or odd type id, a version, known field names) whose
    values are anything msgpack can carry: reaches the field handling behind the type lookup."""
    d: dict[Any, Any] = {"type": draw(st.sampled_from(sorted(RECORD_TYPES)) | msgpack_values)}
    if draw(st.booleans()):
        d["version"] = draw(st.integers(-2, 2) | msgpack_values)
    for name in draw(st.lists(st.sampled_from(_FIELD_NAMES), max_size=8, unique=True)):
        d[name] = draw(
            msgpack_values
            | st.lists(
                msgpack_values | st.dictionaries(st.sampled_from(_FIELD_NAMES), msgpack_values, max_size=4), max_size=3
            )
        )
    return d
