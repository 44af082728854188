"""Produced batches are decompressed and validated off the event loop, with bounded memory.

A compressed produce payload is inflated and its records scanned before anything is written; a
few hundred KiB of gzip can inflate to hundreds of MiB. Done on the event loop, that stalls every
other client of the broker for seconds (issue 24). Kafka runs this work on its request handler
threads (``num.io.threads``) and streams the decompression, so its network threads keep answering.

A follower checks what it replicates the same way (`ProducePreparation.check_replicated`: CRC
and framing of compressed or large fetched batches on the pool), so a bomb that reached a leader
does not stall its followers either.

Here `ProducePreparation` hands such payloads to a thread pool of ``num.io.threads`` workers that
run `Log.prepare_append` (decompression with zlib, lz4, zstd and snappy and the compiled record
scan release the GIL, so the loop keeps running beside them), and `Log.append_as_leader` then
writes the prepared result on the loop. Small uncompressed payloads stay inline: the compiled
scan of 1 MiB costs less than a trip through the pool.

Memory is bounded by `ByteBudget`: before a payload goes to the pool it takes its charge (its own
size plus twice the inflate limit its batches are decompressed under: the inflated section and
one copy live while a batch is scanned, one batch at a time) from its connection's budget, then
from the broker's, waiting in line when either is short. A charge larger than a whole budget is
cut to that budget, so such a payload runs alone rather than never. The limit is stepped
(`inflate_limits`): first 16 times the largest compressed batch (at least 1 MiB), then 8 times
more per try up to `inflate_bound`; a batch that inflates past a limit stops there (the
decompressors are bounded as they go) and is tried again with the larger charge. Legitimate
compressed batches are charged about what they hold, a gzip bomb never holds more than its charge.

Ordering rules: a budget grants in arrival order (FIFO), so a large waiter is not starved by a
stream of small ones; the connection budget is taken before the broker's (one order everywhere,
no deadlock); both are given back when the work ends, whatever happened, or when the waiter is
cancelled.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kraftlog import storage
from kraftlog.common.records.compression import InflateLimitError, inflate_bound
from kraftlog.common.security import current_request

__all__ = ["ByteBudget", "ProducePreparation", "inflate_limits", "payload_charge", "payload_shape"]

_BATCH_LENGTH = struct.Struct(">i")
_LENGTH_AT = 8  # batchLength follows baseOffset
_ATTRIBUTES_AT = 21  # baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4
_LOG_OVERHEAD = 12  # baseOffset + batchLength: what batchLength does not count
_COMPRESSION_MASK = 0x07
_T = TypeVar("_T")
#: the first inflate limit a compressed payload is charged for: 16 times its largest compressed
#: batch (producers' codecs reach 2-10 on real records), at least 1 MiB (`inflate_limits`)
FIRST_INFLATE_RATIO = 16
FIRST_INFLATE_BYTES = 1 << 20
INFLATE_STEP = 8


def payload_shape(records: bytes) -> tuple[int, int]:
    """``(bytes, largest compressed batch)``: the payload's size and the size of its largest
    compressed batch (0: none is compressed). Reads only the batch headers (a malformed payload is
    left to the validator to refuse)."""
    size = len(records)
    largest = 0
    pos = 0
    while pos + _ATTRIBUTES_AT + 2 <= size:
        (length,) = _BATCH_LENGTH.unpack_from(records, pos + _LENGTH_AT)
        if length <= 0:
            break
        batch = min(_LOG_OVERHEAD + length, size - pos)
        if records[pos + _ATTRIBUTES_AT + 1] & _COMPRESSION_MASK:
            largest = max(largest, batch)
        pos += batch
    return size, largest


def payload_charge(records: bytes) -> tuple[int, bool]:
    """``(bytes, compressed)``: the most preparing ``records`` may hold in memory at once (its
    size plus twice the `inflate_bound` of its largest compressed batch), and whether any batch is
    compressed. The pool charges less at first (`inflate_limits`)."""
    size, largest = payload_shape(records)
    return size + (2 * inflate_bound(largest) if largest else 0), largest > 0


def inflate_limits(largest_compressed: int) -> list[int]:
    """The inflate limits, smallest first, under which a payload whose largest compressed batch
    has ``largest_compressed`` bytes is tried (each charged as the payload plus twice the limit):
    `FIRST_INFLATE_RATIO` times that batch, at least `FIRST_INFLATE_BYTES`, then `INFLATE_STEP`
    times more each time up to `inflate_bound`, the last. A batch that inflates past a limit is
    tried again under the next with its charge (its earlier work is lost: at most 1 / (step - 1)
    more); past the bound it is refused (CORRUPT_MESSAGE), as before."""
    bound = inflate_bound(largest_compressed)
    limit = min(bound, max(FIRST_INFLATE_BYTES, FIRST_INFLATE_RATIO * largest_compressed))
    limits = [limit]
    while limit < bound:
        limit = min(bound, limit * INFLATE_STEP)
        limits.append(limit)
    return limits


class ByteBudget:
    """Bytes that may be in flight at once, granted in arrival order (event-loop only)."""

    __slots__ = ("capacity", "_available", "_waiters")

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"a byte budget needs a positive capacity, not {capacity_bytes}")
        self.capacity = capacity_bytes
        self._available = capacity_bytes
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def available(self) -> int:
        return self._available

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, nbytes: int) -> int:
        """Wait until ``nbytes`` (at most the capacity) are free and take them; returns the bytes
        taken, which the caller gives back with `release`."""
        grant = max(0, min(nbytes, self.capacity))
        if not self._waiters and self._available >= grant:
            self._available -= grant
            return grant
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (grant, fut)
        self._waiters.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted just as it was cancelled: give it back
                self.release(grant)
            else:
                with contextlib.suppress(ValueError):  # already popped by a wake that saw it cancelled
                    self._waiters.remove(entry)
                self._wake()  # the next in line may fit now that this one left the head
            raise
        return grant

    def release(self, nbytes: int) -> None:
        self._available = min(self.capacity, self._available + nbytes)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._available:
            grant, fut = self._waiters.popleft()
            if fut.done():
                continue
            self._available -= grant
            fut.set_result(None)


class ProducePreparation:
    """Runs `Log.prepare_append` for a produce payload: inline when it is small and uncompressed,
    else on a pool of ``threads`` workers within the broker's budget (``max_bytes``) and the
    caller's connection budget (`connection_budget`, ``max_bytes_per_connection`` each).

    ``inline_max_bytes``: uncompressed bytes of one request prepared on the loop (the rest of that
    request goes to the pool)."""

    def __init__(
        self, threads: int, max_bytes: int, max_bytes_per_connection: int, *, inline_max_bytes: int = 4 << 20
    ) -> None:
        self._threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self.budget = ByteBudget(max_bytes)
        self.max_bytes_per_connection = max_bytes_per_connection
        self.inline_max_bytes = inline_max_bytes

    def connection_budget(self) -> ByteBudget:
        return ByteBudget(self.max_bytes_per_connection)

    def offloads(self, records: bytes, inline_left: int) -> tuple[bool, int]:
        """``(to the pool, most it may charge)`` for a payload of a request that may still prepare
        ``inline_left`` uncompressed bytes on the loop (`payload_charge`: the last step's charge)."""
        charge, compressed = payload_charge(records)
        return compressed or len(records) > inline_left, charge

    async def prepare(
        self,
        log: storage.Log,
        records: bytes,
        charge: int,
        connection: ByteBudget | None = None,
        *,
        largest_compressed: int = 0,
    ) -> storage.PreparedAppend:
        """`Log.prepare_append` of ``records`` on the pool, once ``charge`` bytes of both budgets
        are free; raises what it raises.

        With ``largest_compressed`` (`payload_shape`'s), the charge is stepped instead: the payload
        is charged its size plus twice each of `inflate_limits` in turn and prepared under that
        limit, and only a batch that inflates past it is tried again under the next (the budgets
        given back in between, so no call ever holds one charge while it waits for another). A
        compressed batch that inflates 10 times then costs what it holds, not the bound's 128 MiB,
        and a bomb still never holds more than it was charged for."""
        if largest_compressed <= 0:
            return await self._run(log.prepare_append, records, charge, connection)
        size = len(records)
        limits = inflate_limits(largest_compressed)
        for limit in limits:
            try:
                return await self._run(
                    functools.partial(log.prepare_append, max_inflate_bytes=limit),
                    records,
                    size + 2 * limit,
                    connection,
                )
            except InflateLimitError as err:
                if err.limit_bytes != limit or limit == limits[-1]:
                    raise  # a batch's own bound (smaller than this limit), or the last step: a bomb
        raise AssertionError("unreachable: the last limit returns or raises")

    async def check_replicated(self, records: bytes) -> bool:
        """A follower's side: `Log.check_replicated` of fetched ``records`` on the pool (within
        the broker's budget) when they hold a compressed batch or more than the inline allowance;
        True once they passed there (raises what the check raises), False when they are left to
        `Log.append_as_follower` to check inline."""
        charge, compressed = payload_charge(records)
        if not compressed and len(records) <= self.inline_max_bytes:
            return False
        await self._run(storage.Log.check_replicated, records, charge, None)
        return True

    async def _run(self, fn: Callable[[bytes], _T], records: bytes, charge: int, connection: ByteBudget | None) -> _T:
        """Run ``fn(records)`` on a worker once the connection's and the broker's budgets hold
        ``charge``. Ordering: the bytes are given back when the worker is done with them, not
        when the caller stops waiting (a cancelled call's work goes on in its thread, and its
        memory with it). The worker's CPU time is added to the current request's
        (`RequestContext.offloaded_cpu_ns`, for request_percentage) once it is done."""
        loop = asyncio.get_running_loop()
        request = current_request()
        cpu_ns = [0]

        def timed(payload: bytes) -> _T:  # in the worker thread
            started_ns = time.thread_time_ns()
            try:
                return fn(payload)
            finally:
                cpu_ns[0] = time.thread_time_ns() - started_ns

        conn_grant = await connection.acquire(charge) if connection is not None else 0
        try:
            grant = await self.budget.acquire(charge)
        except BaseException:
            if connection is not None:
                connection.release(conn_grant)
            raise

        def give_back() -> None:
            self.budget.release(grant)
            if connection is not None:
                connection.release(conn_grant)

        try:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="produce-validation")
            work = self._executor.submit(timed, records)
        except BaseException:
            give_back()
            raise

        def done(_work: object) -> None:  # in the worker thread (or here, if cancelled unstarted)
            with contextlib.suppress(RuntimeError):  # the loop closed at shutdown: nothing to give back to
                loop.call_soon_threadsafe(give_back)

        work.add_done_callback(done)
        try:
            return await asyncio.wrap_future(work, loop=loop)
        finally:
            if work.done():  # written by the worker before its future completed
                request.offloaded_cpu_ns += cpu_ns[0]

    def shutdown(self) -> None:
        """Stop the workers (work already handed to them finishes; nothing waits for it)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
