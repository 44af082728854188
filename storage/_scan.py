"""A structural scan of a v2 records section that builds no record objects.

`scan_records` walks the (uncompressed) records section of one batch and checks what Kafka's
``DefaultRecord.readFrom`` checks while decoding, without decoding: every varint ends within its
limit (5 bytes for int32 fields, 10 for the timestamp delta), every length is -1 (null) or fits in
what is left of its record, each record ends exactly where its length says, the declared number
of records is present and nothing follows the last one. It also checks the offset deltas (dense
``0..n-1`` for a batch a producer sent, strictly increasing within ``lastOffsetDelta`` for a batch
that may have been compacted) and returns what the leader's rules need: the smallest and largest
timestamp delta and the number of null keys.

Speed (issue 12): a per-record Python loop costs ~1.5 µs per record on the benchmark machine, too
slow for 100-byte records. So the scan decodes one record generically and then tries to extend a
*run* of records with the same layout (same length, same varint widths, same key and value
lengths, no headers) — common for producer batches — verifying a whole run at C speed with
strided slices (``data[start::record_size]``), one per byte column of the layout. Runs are grown
by doubling and a broken run is bisected, so mixed batches cost little more than the generic loop;
after runs keep failing, the scan backs off from trying them.

Where the install compiled `storage/_cscan.c` (a C compiler was at hand), `scan_records` asks it
first: it applies the same rules in one pass and answers only "well formed, with these figures" or
"not", so on a malformed section the Python scan runs to name the record and the reason. At 16 KiB
batches of 1 KiB records that takes the leader's validation from ~6 us to well under 1 us per
batch (issue 12 §3); the Python run scan stays the fallback and the plain loop the reference.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import NamedTuple

#: the compiled scan (storage/_cscan.c) when the install built it, else None
compiled_scan: Callable[[bytes | bytearray | memoryview, int, int, int, bool, int], tuple[int, int, int] | None] | None
try:
    from kraftlog.storage._cscan import scan as compiled_scan
except ImportError:  # built without a C compiler: the Python scan alone
    compiled_scan = None


def _python_join(chunks: list[bytes]) -> bytes:
    return b"".join(chunks)


#: concatenates decompressed pieces: compiled, the copy runs without the GIL (a worker validating a
#: large payload leaves the event loop running); else bytes.join
join_chunks: Callable[[list[bytes]], bytes]
try:
    from kraftlog.storage._cscan import join as join_chunks
except ImportError:
    join_chunks = _python_join

__all__ = ["Malformed", "RecordsScan", "scan_records", "record_fields", "compiled_scan", "join_chunks"]

_LOW = bytes(range(0x80))  # deleting these leaves the bytes with the high bit set
_HIGH = bytes(range(0x80, 0x100))  # deleting these leaves the bytes with the high bit clear
# 1-byte zig-zag varint -> its value + 64 (0..127), an order-preserving map for min/max
_ZZ1_ORDER = bytes(((z >> 1) ^ -(z & 1)) + 64 if z < 0x80 else 0 for z in range(256))
_INT64_MIN = -(2**63)
#: the compiled scan takes header fields (int32); anything wider is the Python scan's to judge
_INT32_RANGE = range(-(2**31), 2**31).__contains__
_INT64_MAX = 2**63 - 1
_FIRST_RUN = 8  # records in the first probe of a run
_MAX_PROBE = 1 << 16  # records in one probe at most (bounds the cached offset-delta columns)
_MAX_BACKOFF = 256  # records decoded one by one before trying a run again, at most


class Malformed(Exception):
    """The records section does not decode; ``index`` is the record (0-based) where it failed."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


class RecordsScan(NamedTuple):
    """What a scan learned: timestamp deltas' range (0, 0 when there are no records), null keys."""

    min_ts_delta: int
    max_ts_delta: int
    null_keys: int


def _varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zig-zag varint of at most ``max_bytes`` bytes at ``pos``: ``(value, next_pos)``.

    Raises IndexError past the end of ``data`` (the caller names the record).
    """
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    n = 1
    while True:
        b = data[pos + n]
        result |= (b & 0x7F) << shift
        n += 1
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + n
        if n >= max_bytes:
            raise ValueError(f"varint longer than {max_bytes} bytes")
        shift += 7


class _Layout(NamedTuple):
    """One decoded record: where it ends and what a run of look-alikes must share."""

    stop: int  # position after the record
    size: int  # bytes of the whole record, length varint included
    w_len: int  # width of the length varint
    ts_delta: int
    w_ts: int
    offset_delta: int
    w_od: int
    key_len: int
    key_pos: int  # offset of the key-length varint from the record start
    w_key: int
    value_pos: int  # offset of the value-length varint from the record start
    w_value: int
    header_pos: int  # offset of the header-count varint from the record start
    header_count: int


def _parse_record(data: bytes, pos: int, end: int) -> _Layout:
    """Decode one record's framing at ``pos`` (raises ValueError or IndexError when malformed)."""
    length, p = _varint(data, pos, 5)
    w_len = p - pos
    if length < 1:
        raise ValueError(f"invalid record length {length}")
    stop = p + length
    if stop > end:
        raise ValueError(f"record of length {length} runs {stop - end} bytes past the end of the batch")
    p += 1  # attributes: unused in v2
    ts_start = p
    ts_delta, p = _varint(data, p, 10)
    if not _INT64_MIN <= ts_delta <= _INT64_MAX:
        raise ValueError(f"timestamp delta {ts_delta} does not fit in 64 bits")
    od_start = p
    offset_delta, p = _varint(data, p, 5)
    key_start = p
    key_len, p = _varint(data, p, 5)
    w_key = p - key_start
    if key_len < -1 or key_len > max(stop - p, 0):
        raise ValueError(f"invalid key length {key_len}")
    if key_len > 0:
        p += key_len
    value_start = p
    value_len, p = _varint(data, p, 5)
    w_value = p - value_start
    if value_len < -1 or value_len > max(stop - p, 0):
        raise ValueError(f"invalid value length {value_len}")
    if value_len > 0:
        p += value_len
    header_start = p
    header_count, p = _varint(data, p, 5)
    if header_count < 0 or header_count > max(stop - p, 0) // 2:
        raise ValueError(f"invalid header count {header_count}")
    for _ in range(header_count):
        n, p = _varint(data, p, 5)
        if n < 0 or n > stop - p:
            raise ValueError(f"invalid header key length {n}")
        p += n
        n, p = _varint(data, p, 5)
        if n < -1 or n > stop - p:
            raise ValueError(f"invalid header value length {n}")
        if n > 0:
            p += n
    if p != stop:
        raise ValueError(f"record of declared length {length} spans {p - pos - w_len} bytes")
    return _Layout(
        stop,
        stop - pos,
        w_len,
        ts_delta,
        od_start - ts_start,
        offset_delta,
        key_start - od_start,
        key_len,
        key_start - pos,
        w_key,
        value_start - pos,
        w_value,
        header_start - pos,
        header_count,
    )


@functools.lru_cache(maxsize=128)
def _od_column(first: int, count: int, j: int, width: int) -> bytes:
    """Byte ``j`` of the zig-zag varints of ``first .. first+count-1``, all ``width`` bytes wide."""
    if j == 0:
        pattern = bytes(range(0, 0x80, 2))  # (2v) & 0x7f cycles with period 64
        if width > 1:
            pattern = bytes(b | 0x80 for b in pattern)
        phase = first % 64
        return (pattern * ((phase + count + 63) // 64))[phase : phase + count]
    shift = 7 * j - 1  # (2v) >> 7j == v >> (7j - 1)
    flag = 0x80 if j < width - 1 else 0
    lo, hi = first >> shift, (first + count - 1) >> shift
    column = b"".join(bytes([flag | (x & 0x7F)]) * (1 << shift) for x in range(lo, hi + 1))
    phase = first - (lo << shift)
    return column[phase : phase + count]


@functools.lru_cache(maxsize=1)
def _ts2_table() -> list[int]:
    """2-byte zig-zag varint -> value, indexed as ``memoryview.cast('H')`` reads the two bytes."""
    table = [0] * 65536
    little = sys.byteorder == "little"
    for b0 in range(0x80, 0x100):
        for b1 in range(0x80):
            z = (b0 & 0x7F) | (b1 << 7)
            table[(b0 | b1 << 8) if little else (b0 << 8 | b1)] = (z >> 1) ^ -(z & 1)
    return table


_DELETE_BELOW = [bytes(range(v)) for v in range(129)]
_DELETE_ABOVE = [bytes(range(v + 1, 256)) for v in range(129)]


def _byte_max(b: bytes) -> int:
    """Largest byte of ``b`` (all < 128), by bisection with C-speed deletes: builtin ``max``
    iterates Python ints, ~4x slower on a long column."""
    if b == b[:1] * len(b):
        return b[0]
    lo, hi = 0, 127
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if b.translate(None, _DELETE_BELOW[mid]):  # some byte >= mid
            lo = mid
        else:
            hi = mid - 1
    return lo


def _byte_min(b: bytes) -> int:
    """Smallest byte of ``b`` (all < 128), as `_byte_max`."""
    if b == b[:1] * len(b):
        return b[0]
    lo, hi = 0, 127
    while lo < hi:
        mid = (lo + hi) // 2
        if b.translate(None, _DELETE_ABOVE[mid]):  # some byte <= mid
            hi = mid
        else:
            lo = mid + 1
    return lo


def _run_ok(
    data: bytes,
    start: int,
    size: int,
    count: int,
    consts: list[tuple[int, bytes]],
    ts_pos: int,
    w_ts: int,
    od_pos: int,
    w_od: int,
    od_first: int,
) -> bool:
    """Do ``count`` records from ``start``, each ``size`` bytes, share the template's layout?"""
    stop = start + size * count
    for j, byte in consts:
        if data[start + j : stop : size] != byte * count:
            return False
    if w_ts == 1:
        if data[start + ts_pos : stop : size].translate(None, _LOW):
            return False
    elif data[start + ts_pos : stop : size].translate(None, _HIGH) or data[start + ts_pos + 1 : stop : size].translate(
        None, _LOW
    ):
        return False
    for j in range(w_od):
        if data[start + od_pos + j : stop : size] != _od_column(od_first, count, j, w_od):
            return False
    return True


def _extend_run(data: bytes, start: int, end: int, t: _Layout, template_start: int, limit: int) -> tuple[int, int, int]:
    """How many records from ``start`` repeat the layout of the record at ``template_start``
    (at most ``limit``), with their offset deltas continuing the template's by one each;
    returns ``(count, min_ts_delta, max_ts_delta)`` of those records."""
    size = t.size
    ts_pos = t.w_len + 1
    od_pos = ts_pos + t.w_ts
    # offset deltas keep the template's width: stop before the next width
    limit = min(limit, (1 << (7 * t.w_od - 1)) - 1 - t.offset_delta, (end - start) // size)
    if limit <= 0:
        return 0, 0, 0
    tmpl = data[template_start : template_start + size]
    consts = [(j, tmpl[j : j + 1]) for j in range(t.w_len)]
    consts += [(j, tmpl[j : j + 1]) for j in range(t.key_pos, t.key_pos + t.w_key)]
    consts += [(j, tmpl[j : j + 1]) for j in range(t.value_pos, t.value_pos + t.w_value)]
    consts += [(j, tmpl[j : j + 1]) for j in range(t.header_pos, size)]  # header count 0
    done = 0
    probe = _FIRST_RUN
    od_next = t.offset_delta + 1
    # Most runs cover the rest of a producer's batch: try that first, in one probe (for 1000
    # records one probe of ~10 strided slices instead of seven doubling ones, ~25 us); when it
    # fails, grow from a short probe as before, so a mixed batch pays one wasted probe only.
    if _FIRST_RUN < limit <= _MAX_PROBE and _run_ok(
        data, start, size, limit, consts, ts_pos, t.w_ts, od_pos, t.w_od, od_next
    ):
        done = limit
    while done < limit:
        n = min(probe, limit - done)
        at = start + done * size
        if _run_ok(data, at, size, n, consts, ts_pos, t.w_ts, od_pos, t.w_od, od_next + done):
            done += n
            probe = min(2 * probe, _MAX_PROBE)
            continue
        lo, hi = 0, n  # the first lo records match, all n do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _run_ok(data, at, size, mid, consts, ts_pos, t.w_ts, od_pos, t.w_od, od_next + done):
                lo = mid
            else:
                hi = mid
        done += lo
        break
    if not done:
        return 0, 0, 0
    stop = start + done * size
    if t.w_ts == 1:
        ordered = data[start + ts_pos : stop : size].translate(_ZZ1_ORDER)
        return done, _byte_min(ordered) - 64, _byte_max(ordered) - 64
    pairs = bytearray(2 * done)
    pairs[0::2] = data[start + ts_pos : stop : size]
    pairs[1::2] = data[start + ts_pos + 1 : stop : size]
    values = list(map(_ts2_table().__getitem__, memoryview(pairs).cast("H")))
    return done, min(values), max(values)


def scan_records(
    data: bytes,
    count: int,
    *,
    last_offset_delta: int,
    dense: bool,
    runs: bool = True,
    start: int = 0,
    end: int | None = None,
) -> RecordsScan:
    """Check the framing of ``count`` records in the uncompressed section ``data``.

    ``dense``: offset deltas must be exactly ``0..count-1`` (a producer's batch); otherwise they
    must increase strictly and stay within ``0..last_offset_delta`` (a compacted batch may have
    gaps). Raises `Malformed` naming the first bad record. ``runs=False`` decodes every record
    one by one (the reference the property tests hold the run path to). ``start`` and ``end``
    bound the section within ``data`` (default: all of it), so a caller can scan a batch inside
    the produce payload without copying its records out.
    """
    if count < 0:
        raise Malformed(0, f"invalid record count {count}")
    end = len(data) if end is None else end
    if runs and compiled_scan is not None and _INT32_RANGE(count) and _INT32_RANGE(last_offset_delta):
        figures = compiled_scan(data, start, end, count, dense, last_offset_delta)
        if figures is not None:
            return RecordsScan(*figures)
    stats = [_INT64_MAX + 1, _INT64_MIN - 1, 0]  # min ts delta, max ts delta, null keys
    if not runs:
        pos, _od = _plain(data, start, end, 0, count, count, dense, -1, last_offset_delta, stats)
    else:
        pos = _scan_with_runs(data, start, end, count, dense, last_offset_delta, stats)
    if pos != end:
        raise Malformed(max(count - 1, 0), f"{end - pos} bytes follow the last of the {count} records")
    if not count:
        return RecordsScan(0, 0, 0)
    return RecordsScan(stats[0], stats[1], stats[2])


def _scan_with_runs(
    data: bytes, start: int, end: int, count: int, dense: bool, last_offset_delta: int, stats: list[int]
) -> int:
    """Template record, run of look-alikes, repeat; records that break runs too often are
    decoded plainly for a while (``backoff`` records, doubling up to 256)."""
    pos = start
    i = 0
    prev_od = -1
    backoff = 1
    while i < count:
        if pos >= end:
            raise Malformed(i, _missing(i, count))
        try:
            t = _parse_record(data, pos, end)
        except IndexError:
            raise Malformed(i, _ENDS_EARLY) from None
        except ValueError as err:
            raise Malformed(i, str(err)) from None
        od = t.offset_delta
        if dense:
            if od != i:
                raise Malformed(i, f"offset delta {od} where {i} was expected")
        elif od <= prev_od or od > last_offset_delta:
            raise Malformed(i, f"offset delta {od} after {prev_od} (last offset delta {last_offset_delta})")
        if t.ts_delta < stats[0]:
            stats[0] = t.ts_delta
        if t.ts_delta > stats[1]:
            stats[1] = t.ts_delta
        if t.key_len < 0:
            stats[2] += 1
        template_start = pos
        prev_od = od
        pos = t.stop
        i += 1
        if i >= count:
            break
        n = 0
        if t.header_count == 0 and t.w_ts <= 2 and t.w_od <= 3:
            limit = count - i if dense else min(count - i, last_offset_delta - od)
            n, lo, hi = _extend_run(data, pos, end, t, template_start, limit)
            if n:
                i += n
                pos += n * t.size
                prev_od += n
                stats[0] = min(stats[0], lo)
                stats[1] = max(stats[1], hi)
                if t.key_len < 0:
                    stats[2] += n
        if n >= _FIRST_RUN:
            backoff = 1
        elif i < count:
            k = min(backoff, count - i)
            pos, prev_od = _plain(data, pos, end, i, k, count, dense, prev_od, last_offset_delta, stats)
            i += k
            backoff = min(2 * backoff, _MAX_BACKOFF)
    return pos


_ENDS_EARLY = "the record ends before its fields do"


def _missing(i: int, count: int) -> str:
    return f"the batch declares {count} records but holds {i}"


def record_fields(data: bytes, count: int, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(timestamp_delta, key_length)`` of each record, for naming the records a rule refuses
    (the slow path, taken only once a batch is known to break a rule). ``data`` must have passed
    `scan_records`."""
    out = []
    pos = start
    end = len(data) if end is None else end
    for _ in range(count):
        t = _parse_record(data, pos, end)
        out.append((t.ts_delta, t.key_len))
        pos = t.stop
    return out


def _plain(
    data: bytes,
    pos: int,
    end: int,
    i: int,
    n: int,
    count: int,
    dense: bool,
    prev_od: int,
    last_offset_delta: int,
    stats: list[int],
) -> tuple[int, int]:
    """Decode records ``i .. i+n-1`` from ``pos`` one by one; returns the position after them
    and the last offset delta.

    The generic path, written out flat (the 1-byte varint case inline) because it runs once per
    record of a batch whose records vary. ``stats`` is ``[min_ts_delta, max_ts_delta, nulls]``,
    updated in place. Raises `Malformed`.
    """
    min_d, max_d, nulls = stats
    varint = _varint
    try:
        for i in range(i, i + n):  # noqa: B020 - i names the failing record below
            if pos >= end:
                raise ValueError("missing")
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p = pos + 1
            else:
                length, p = varint(data, pos, 5)
            stop = p + length
            if length < 1:
                raise ValueError(f"invalid record length {length}")
            if stop > end:
                raise ValueError(f"record of length {length} runs {stop - end} bytes past the end of the batch")
            b = data[p + 1]  # p: attributes, unused
            if b < 0x80:
                ts = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                ts, p = varint(data, p + 1, 10)
                if not _INT64_MIN <= ts <= _INT64_MAX:
                    raise ValueError(f"timestamp delta {ts} does not fit in 64 bits")
            if ts < min_d:
                min_d = ts
            if ts > max_d:
                max_d = ts
            b = data[p]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                od, p = varint(data, p, 5)
            b = data[p]
            if b < 0x80:
                k = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                k, p = varint(data, p, 5)
            if k > 0:
                if k > stop - p:
                    raise ValueError(f"invalid key length {k}")
                p += k
            elif k < 0:
                if k != -1:
                    raise ValueError(f"invalid key length {k}")
                nulls += 1
            b = data[p]
            if b < 0x80:
                k = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                k, p = varint(data, p, 5)
            if k > 0:
                if k > stop - p:
                    raise ValueError(f"invalid value length {k}")
                p += k
            elif k < -1:
                raise ValueError(f"invalid value length {k}")
            if data[p]:  # headers: rare, decode the record again the long way
                p = _parse_record(data, pos, end).stop
            else:
                p += 1
            if p != stop:
                raise ValueError(f"record of declared length {length} spans {p - stop + length} bytes")
            # offsets after the framing, as the run path checks them after decoding a template
            if dense:
                if od != i:
                    raise ValueError(f"offset delta {od} where {i} was expected")
            elif od <= prev_od or od > last_offset_delta:
                raise ValueError(f"offset delta {od} after {prev_od} (last offset delta {last_offset_delta})")
            prev_od = od
            pos = stop
    except IndexError:
        raise Malformed(i, _ENDS_EARLY) from None
    except ValueError as err:
        raise Malformed(i, _missing(i, count) if str(err) == "missing" else str(err)) from None
    stats[0], stats[1], stats[2] = min_d, max_d, nulls
    return pos, prev_od
