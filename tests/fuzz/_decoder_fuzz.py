"""Shared pieces of the decoder fuzz tests: the example budget and byte-mutation strategies.

Why mutations: random bytes almost never get past a magic number, a length check or a CRC, so they
only exercise the first few lines of a decoder. Starting from a valid encoding and flipping,
overwriting, truncating, extending or splicing a few bytes reaches the code behind those checks,
where the bugs are. For CRC-protected frames the tests also mutate the payload and frame it again
with a correct CRC, so the payload decoder itself is fuzzed.

Budget: ``KRAFTLOG_FUZZ_EXAMPLES`` (examples per property; ``make fuzz`` sets a long one), with a
small default so the unit run stays short. The short default run is derandomized (the same examples
every run), so CI's verdict on a commit does not depend on a seed; a random search belongs to
``make fuzz``, whose finds become ``@example`` lines that every run then checks.
"""

from __future__ import annotations

import os
import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = ["EXAMPLES", "FUZZ", "RANDOM_SEARCH", "TIMEOUT", "mutated", "any_bytes", "bounded_call", "INTERESTING_INTS"]

EXAMPLES = int(os.environ.get("KRAFTLOG_FUZZ_EXAMPLES") or 100)

#: random search only when a budget was asked for (``make fuzz``); see the module docstring
RANDOM_SEARCH = bool(os.environ.get("KRAFTLOG_FUZZ_EXAMPLES"))

#: pytest-timeout for one property, growing with the budget (the project default of 300 s would cut
#: a long `make fuzz` run short); a file-writing example takes a few ms, 50 ms leaves room for load
TIMEOUT = max(300, int(EXAMPLES * 0.05))

#: hypothesis settings for every decoder property: no per-example deadline (the machine is shared;
#: `bounded_call` checks time where it matters), file-writing tests allowed to be slow.
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM_SEARCH,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

#: values that break length and count fields: zero, one, sign boundaries, all ones
INTERESTING_INTS = (
    0,
    1,
    2,
    7,
    8,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    0x7FFFFFFFFFFFFFFF,
    0xFFFFFFFFFFFFFFFF,
)

any_bytes = st.binary(max_size=512)


def _overwrite_int(data: bytearray, pos: int, value: int, fmt: str) -> None:
    width = struct.calcsize(fmt)
    if len(data) < width:
        return
    pos = min(pos, len(data) - width)
    mask = (1 << (8 * width)) - 1
    struct.pack_into(fmt, data, pos, value & mask)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes | st.SearchStrategy[bytes], max_ops: int = 4) -> bytes:
    """``valid`` (bytes or a strategy of them) changed by 1..``max_ops`` edits: bit flips, byte
    overwrites, integer fields set to boundary values (both byte orders), truncation, extension,
    insertion, deletion and duplication of a slice."""
    base = draw(valid) if isinstance(valid, st.SearchStrategy) else valid
    data = bytearray(base)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(("flip", "byte", "int", "truncate", "extend", "insert", "delete", "duplicate")))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "int":
            fmt = draw(st.sampled_from((">I", "<I", ">Q", "<Q", ">H", "<H")))
            _overwrite_int(data, pos, draw(st.sampled_from(INTERESTING_INTS)), fmt)
        elif op == "truncate":
            del data[pos:]
        elif op == "extend":
            data += draw(st.binary(min_size=1, max_size=64))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 16))]
        elif op == "duplicate" and data:
            data[pos:pos] = data[pos : pos + draw(st.integers(1, 64))]
    return bytes(data)


def bounded_call(
    fn: Callable[[], Any], *, max_seconds: float = 2.0, max_peak_bytes: int = 8 * 1024 * 1024
) -> tuple[Any, BaseException | None]:
    """Run ``fn`` and check it neither hangs nor allocates much: returns ``(result, error)``.

    Used for inputs that declare a huge length: a decoder must refuse them from the input size,
    never allocate what the length field says. The time bound is generous (shared machine); the
    memory bound is what catches a decoder that believes the length.
    """
    tracemalloc.start()
    started = time.monotonic()
    result: Any = None
    error: BaseException | None = None
    try:
        result = fn()
    except Exception as err:  # the caller asserts the type
        error = err
    finally:
        elapsed = time.monotonic() - started
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < max_seconds, f"decoder took {elapsed:.2f}s"
    assert peak < max_peak_bytes, f"decoder allocated {peak} bytes at peak"
    return result, error
