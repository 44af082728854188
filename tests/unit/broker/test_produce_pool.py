"""Produce validation off the event loop, in bounded memory (issue 24): the byte budgets, which
payloads go to the pool, that the pool's work leaves the loop running, that a prepared append made
for an older config is checked again, and the chunked copy path of the Kafka listener. Real
asyncio loops and files, no sockets."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_replica_manager import presp, produce_req, run, settle, setup

from kraftlog import storage
from kraftlog.broker.kafka._kafka_server import REGION_CHUNK_BYTES, WRITE_HIGH_WATER_BYTES, _copy_region
from kraftlog.broker.replica._produce_pool import (
    ByteBudget,
    ProducePreparation,
    inflate_limits,
    payload_charge,
    payload_shape,
)
from kraftlog.common.records.compression import CompressionType, inflate_bound

NOW = 1_700_000_000_000


def _batch(n: int = 3, codec: CompressionType = CompressionType.NONE, key: bytes | None = b"k") -> bytes:
    return storage.build_batch([(key, b"v" * 100) for _ in range(n)], timestamp_ms=NOW, compression=codec)


# ------------------------------------------------------------------------------ ByteBudget


def test_a_budget_grants_in_arrival_order_and_a_large_waiter_is_not_overtaken() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        assert await budget.acquire(60) == 60
        order: list[str] = []

        async def take(name: str, nbytes: int) -> None:
            await budget.acquire(nbytes)
            order.append(name)

        big = asyncio.create_task(take("big", 80))
        await settle()
        small = asyncio.create_task(take("small", 10))  # would fit now, but "big" is first in line
        await settle()
        assert order == [] and budget.waiting == 2 and budget.available == 40
        budget.release(60)
        await settle()
        assert order == ["big", "small"] and budget.available == 10
        await asyncio.gather(big, small)

    run(main)


def test_a_charge_above_the_capacity_takes_the_whole_budget_and_runs_alone() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        assert await budget.acquire(10**9) == 100
        assert budget.available == 0
        waiter = asyncio.create_task(budget.acquire(1))
        await settle()
        assert not waiter.done()
        budget.release(100)
        assert await waiter == 1

    run(main)


def test_a_cancelled_waiter_leaves_the_line_and_the_next_one_gets_its_turn() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        await budget.acquire(50)
        big = asyncio.create_task(budget.acquire(90))
        await settle()
        small = asyncio.create_task(budget.acquire(40))
        await settle()
        assert not small.done()
        big.cancel()
        await settle()
        assert small.done() and budget.available == 10 and budget.waiting == 0

    run(main)


def test_a_budget_needs_a_positive_capacity() -> None:
    with pytest.raises(ValueError):
        ByteBudget(0)


# ------------------------------------------------------------------------------ what goes to the pool


def test_the_charge_is_the_payload_plus_twice_the_largest_inflate_bound() -> None:
    plain = _batch() + _batch()
    assert payload_charge(plain) == (len(plain), False)
    gz = _batch(codec=CompressionType.GZIP)
    mixed = plain + gz + gz  # batches inflate one at a time: the largest counts, not the sum
    assert payload_charge(mixed) == (len(mixed) + 2 * inflate_bound(len(gz)), True)
    assert payload_charge(b"\x00" * 5) == (5, False)  # too short to read: left to the validator


def test_compressed_and_past_the_inline_allowance_payloads_go_to_the_pool() -> None:
    pool = ProducePreparation(1, 1 << 30, 1 << 30, inline_max_bytes=10_000)
    plain = _batch()
    assert pool.offloads(plain, 10_000) == (False, len(plain))
    assert pool.offloads(plain, len(plain) - 1)[0] is True
    assert pool.offloads(_batch(codec=CompressionType.LZ4), 10_000)[0] is True


# ------------------------------------------------------------------------------ the pool


class _BlockingLog:
    """A stand-in `Log` whose `prepare_append` blocks until released, noting its thread."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []

    def prepare_append(self, records: bytes) -> Any:
        self.threads.append(threading.get_ident())
        self.started.set()
        assert self.release.wait(10)
        return ("prepared", records)


async def _until(event: threading.Event) -> None:
    """Wait for a worker thread's event without blocking the loop (bounded)."""
    for _ in range(1000):
        if event.is_set():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the worker did not get there")


async def _until_true(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` on the loop (bounded)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition did not come true")


def test_prepare_runs_on_a_worker_while_the_loop_keeps_serving() -> None:
    async def main() -> None:
        pool = ProducePreparation(2, 1 << 30, 1 << 30)
        log = _BlockingLog()
        task = asyncio.create_task(pool.prepare(log, b"records", 7))  # type: ignore[arg-type]
        await _until(log.started)
        # the work is blocked on its thread and the loop still runs other callbacks
        ticks = 0
        for _ in range(3):
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 3 and not task.done()
        log.release.set()
        assert await task == ("prepared", b"records")
        assert log.threads != [threading.get_ident()]
        assert pool.budget.available == pool.budget.capacity
        pool.shutdown()

    run(main)


def test_the_broker_budget_holds_back_a_second_payload_until_the_first_is_done() -> None:
    async def main() -> None:
        pool = ProducePreparation(4, 100, 1000)
        first, second = _BlockingLog(), _BlockingLog()
        t1 = asyncio.create_task(pool.prepare(first, b"a", 60))  # type: ignore[arg-type]
        await _until(first.started)
        t2 = asyncio.create_task(pool.prepare(second, b"b", 60))  # type: ignore[arg-type]
        await settle()
        assert not second.started.is_set() and pool.budget.waiting == 1
        first.release.set()
        await t1
        await _until(second.started)
        second.release.set()
        await t2
        assert pool.budget.available == 100
        pool.shutdown()

    run(main)


def test_a_cancelled_call_keeps_its_bytes_charged_until_the_worker_is_done() -> None:
    """A client that gives up (a gRPC deadline) cancels its wait, not the worker: the bytes stay
    charged while the worker still holds them, so give-ups cannot run the pool past its budget."""

    async def main() -> None:
        pool = ProducePreparation(2, 100, 1000)
        conn = pool.connection_budget()
        work = _BlockingLog()
        task = asyncio.create_task(pool.prepare(work, b"a", 60, conn))  # type: ignore[arg-type]
        await _until(work.started)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert (pool.budget.available, conn.available) == (40, 940)
        work.release.set()
        await _until_true(lambda: pool.budget.available == 100 and conn.available == 1000)
        pool.shutdown()

    run(main)


def test_a_connection_budget_bounds_one_connection_and_not_another() -> None:
    async def main() -> None:
        pool = ProducePreparation(4, 1000, 100)
        conn_a, conn_b = pool.connection_budget(), pool.connection_budget()
        a1, a2, b1 = _BlockingLog(), _BlockingLog(), _BlockingLog()
        t_a1 = asyncio.create_task(pool.prepare(a1, b"a1", 60, conn_a))  # type: ignore[arg-type]
        await _until(a1.started)
        t_a2 = asyncio.create_task(pool.prepare(a2, b"a2", 60, conn_a))  # type: ignore[arg-type]
        t_b1 = asyncio.create_task(pool.prepare(b1, b"b1", 60, conn_b))  # type: ignore[arg-type]
        await _until(b1.started)  # another connection is not held back
        assert not a2.started.is_set() and conn_a.waiting == 1
        for log in (a1, b1):
            log.release.set()
        await asyncio.gather(t_a1, t_b1)
        await _until(a2.started)
        a2.release.set()
        await t_a2
        assert (conn_a.available, conn_b.available, pool.budget.available) == (100, 100, 1000)
        pool.shutdown()

    run(main)


def test_a_failure_on_the_pool_is_raised_and_the_budgets_are_given_back() -> None:
    class Failing:
        def prepare_append(self, records: bytes) -> Any:
            raise storage.CorruptRecordError("gzip stream ends inside a member")

    async def main() -> None:
        pool = ProducePreparation(1, 100, 100)
        conn = pool.connection_budget()
        with pytest.raises(storage.CorruptRecordError):
            await pool.prepare(Failing(), b"x", 80, conn)  # type: ignore[arg-type]
        assert (conn.available, pool.budget.available) == (100, 100)
        pool.shutdown()

    run(main)


# ------------------------------------------------------------------------------ through the replica manager


def test_compressed_produce_is_prepared_on_the_pool_and_errors_stay_per_partition(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, partitions=3)
        seen: list[int] = []
        original = storage.Log.prepare_append

        def spy(self: storage.Log, records: Any, **kw: Any) -> storage.PreparedAppend:
            seen.append(threading.get_ident())
            return original(self, records, **kw)

        storage.Log.prepare_append = spy  # type: ignore[method-assign]
        try:
            good = _batch(codec=CompressionType.GZIP)
            bad = bytearray(_batch(codec=CompressionType.GZIP))
            truncated = gzip.compress(b"x")[:-12]
            bad = bytes(bad[:61]) + truncated  # a header claiming a gzip section that does not inflate
            resp = await rm.produce(produce_req({0: good, 1: bad, 2: _batch()}, acks=1))
        finally:
            storage.Log.prepare_append = original  # type: ignore[method-assign]
        assert presp(resp, 0).error.code == 0 and presp(resp, 0).base_offset == 0
        assert presp(resp, 1).error.name == "CORRUPT_MESSAGE"
        assert presp(resp, 2).error.code == 0  # small and uncompressed: checked inline
        assert len(seen) == 2 and threading.get_ident() not in seen
        assert rm.produce_preparation.budget.available == rm.produce_preparation.budget.capacity
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ the log's side


def test_a_payload_prepared_for_an_older_config_is_checked_again(tmp_path: Path) -> None:
    log = storage.Log(tmp_path / "t-0", storage.LogConfig(), clock_ms=lambda: NOW)
    keyless = _batch(key=None)
    prepared = log.prepare_append(keyless)
    log.update_config(storage.LogConfig(cleanup_policy=frozenset({"compact"})))
    with pytest.raises(storage.InvalidRecordError):
        log.append_as_leader(keyless, 0, prepared=prepared)
    assert log.log_end_offset == 0
    prepared = log.prepare_append(_batch())
    assert log.append_as_leader(_batch(), 0, prepared=prepared).last_offset == 2


def test_a_prepared_payload_is_what_gets_written(tmp_path: Path) -> None:
    """The append writes the prepared (here recompressed) records, not the ones passed again."""
    log = storage.Log(tmp_path / "t-0", storage.LogConfig(compression_type="gzip"), clock_ms=lambda: NOW)
    plain = _batch(5)
    prepared = log.prepare_append(plain)
    assert prepared.records != plain and prepared.headers[0].compression_id == CompressionType.GZIP
    info = log.append_as_leader(plain, 0, prepared=prepared)
    assert (info.first_offset, info.last_offset) == (0, 4)
    region = log.read(0, 1 << 20).records
    assert next(storage.iter_batches(region))[1].compression == CompressionType.GZIP
    log.close()


# ------------------------------------------------------------------------------ the copy path


class _Transport:
    def __init__(self) -> None:
        self.limits: list[int] = []

    def set_write_buffer_limits(self, high: int) -> None:
        self.limits.append(high)


class _Writer:
    """A stream writer that notes each write and drain."""

    def __init__(self) -> None:
        self.transport = _Transport()
        self.events: list[tuple[str, int]] = []

    def write(self, data: bytes) -> None:
        self.events.append(("write", len(data)))

    async def drain(self) -> None:
        self.events.append(("drain", 0))


def test_a_region_is_copied_in_bounded_chunks_each_drained_before_the_next_is_read(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    size = 2 * REGION_CHUNK_BYTES + 123
    path.write_bytes(bytes(range(256)) * (size // 256 + 2))
    with open(path, "rb") as f:
        region = storage.FileRegion(f.fileno(), 7, size, str(path))
    writer = _Writer()
    asyncio.run(_copy_region(writer, region))  # type: ignore[arg-type]
    region.close()
    assert writer.transport.limits == [WRITE_HIGH_WATER_BYTES]
    writes = [n for kind, n in writer.events if kind == "write"]
    assert writes == [REGION_CHUNK_BYTES, REGION_CHUNK_BYTES, 123]
    # a drain before the first piece and after every one: never two pieces buffered at once
    assert [kind for kind, _ in writer.events] == ["drain", "write", "drain", "write", "drain", "write", "drain"]


def test_a_region_reads_a_piece_and_refuses_one_outside_it(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        region = storage.FileRegion(f.fileno(), 2, 6, str(path))
    assert (region.read(), region.read(1, 3), region.read(4)) == (b"234567", b"345", b"67")
    with pytest.raises(ValueError):
        region.read(5, 2)
    region.close()


# ------------------------------------------------------------------------------ pieces joined without the GIL


def test_decompressed_pieces_are_joined_whole_and_only_bytes_are_taken() -> None:
    from kraftlog.storage._scan import join_chunks

    pieces = [b"ab", b"", bytes(range(256)) * 4096, b"z"]
    assert join_chunks(pieces) == b"".join(pieces)
    assert join_chunks([]) == b""
    with pytest.raises(TypeError):
        join_chunks([b"a", "b"])  # type: ignore[list-item]


# ------------------------------------------------------------------------------ a follower's side


def test_a_follower_checks_compressed_fetched_batches_on_the_pool_and_small_plain_ones_inline() -> None:
    async def main() -> None:
        pool = ProducePreparation(1, 1 << 30, 1 << 30, inline_max_bytes=10_000)
        assert await pool.check_replicated(_batch()) is False  # left to append_as_follower
        assert await pool.check_replicated(_batch(codec=CompressionType.GZIP)) is True
        assert await pool.check_replicated(_batch(2000)) is True  # past the inline allowance
        bad = bytearray(_batch(codec=CompressionType.GZIP))
        bad[-3] ^= 0xFF  # the CRC no longer matches
        with pytest.raises(storage.CorruptRecordError):
            await pool.check_replicated(bytes(bad))
        assert pool.budget.available == pool.budget.capacity
        pool.shutdown()

    run(main)


class _BusyLog:
    """A stand-in `Log` whose `prepare_append` burns CPU in its worker thread."""

    def prepare_append(self, records: bytes) -> Any:
        total = 0
        for i in range(300_000):
            total += i * i
        return ("prepared", total)


def test_the_workers_cpu_time_counts_into_the_requests_time() -> None:
    """request_percentage (review, issue 24): validation moved to the workers was time the event
    loop thread's clock never saw, so a client could spend the workers' CPU unthrottled."""
    from kraftlog.common.security import RequestContext, Session, request_scope

    async def main() -> int:
        pool = ProducePreparation(2, 1 << 30, 1 << 30)
        ctx = RequestContext(Session("User:alice", "127.0.0.1"), api="Produce")
        try:
            with request_scope(ctx):
                await asyncio.gather(*(pool.prepare(_BusyLog(), b"x", 1) for _ in range(2)))  # type: ignore[arg-type]
        finally:
            pool.shutdown()
        return ctx.offloaded_cpu_ns

    assert asyncio.run(main()) > 1_000_000  # two workers' loops: well over a millisecond of CPU


# ------------------------------------------------------------------------------ stepped inflate charges


class _ValidatingLog:
    """A stand-in `Log` whose `prepare_append` is the real validation (no file), noting the inflate
    limit of each try."""

    def __init__(self, max_message_bytes: int = 1 << 30) -> None:
        from dataclasses import replace

        self.config = replace(
            storage.LogConfig(), max_message_bytes=max_message_bytes, message_timestamp_type="LogAppendTime"
        )
        self.limits: list[int | None] = []

    def prepare_append(self, records: bytes, *, max_inflate_bytes: int | None = None) -> Any:
        from kraftlog.storage._validator import prepare_leader_append

        self.limits.append(max_inflate_bytes)
        return prepare_leader_append(
            records, config=self.config, now=NOW, from_client=True, max_inflate_bytes=max_inflate_bytes
        )


class _SpyBudget(ByteBudget):
    """A broker budget that notes every charge asked of it."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self.grants: list[int] = []

    async def acquire(self, nbytes: int) -> int:
        self.grants.append(nbytes)
        return await super().acquire(nbytes)


def _charges(pool: ProducePreparation) -> list[int]:
    """The charges asked of the broker budget from now on."""
    spy = _SpyBudget(pool.budget.capacity)
    pool.budget = spy
    return spy.grants


def test_inflate_limits_start_near_the_batch_and_end_at_the_bound() -> None:
    mib = 1 << 20
    assert inflate_limits(16 * 1024) == [mib, 8 * mib, 64 * mib]
    assert inflate_limits(256 * 1024) == [4 * mib, 32 * mib, 64 * mib]
    assert inflate_limits(8 * mib) == [128 * mib] == [inflate_bound(8 * mib)]  # large: the bound at once
    plain, gz = _batch(), _batch(codec=CompressionType.GZIP)
    assert payload_shape(plain + gz + plain) == (2 * len(plain) + len(gz), len(gz))
    assert payload_shape(plain) == (len(plain), 0)


def test_a_legitimate_compressed_payload_is_charged_what_it_may_hold_not_the_bound() -> None:
    """issue 24 (review): every compressed payload was charged >= 128 MiB (twice the 64 MiB bound),
    so two of them could not be prepared at once within a 256 MiB connection budget; charged by its
    first inflate limit, it costs ~2 MiB, and both budgets have room for many."""
    records = storage.build_batch(
        [(b"k", b"v" * 1000) for _ in range(500)], timestamp_ms=NOW, compression=CompressionType.GZIP
    )
    size, largest = payload_shape(records)
    assert largest == size and 16 * size < (1 << 20)  # ~3 KiB inflating to ~510 KiB: within the 1 MiB floor

    async def main() -> None:
        pool = ProducePreparation(2, 64 << 20, 16 << 20)
        grants = _charges(pool)
        log = _ValidatingLog()
        conn = pool.connection_budget()
        prepared = await asyncio.gather(
            *(pool.prepare(log, records, size, conn, largest_compressed=largest) for _ in range(4))  # type: ignore[arg-type]
        )
        assert all(p.headers[0].records_count == 500 for p in prepared)
        assert grants == [size + 2 * (1 << 20)] * 4 and log.limits == [1 << 20] * 4
        assert pool.budget.available == pool.budget.capacity and conn.available == conn.capacity
        pool.shutdown()

    run(main)


def test_a_bomb_is_charged_step_by_step_never_holds_more_than_its_charge_and_is_refused() -> None:
    """A gzip batch of 70 MiB of zeros (~70 KiB on the wire) is tried under 1.6 MiB, then 12.8 MiB,
    then the 64 MiB bound, each try charged for its limit (the budgets given back in between), and
    refused past the bound as before (CORRUPT_MESSAGE)."""
    zeros = storage.build_batch(
        [(None, bytes(1 << 20)) for _ in range(100)], timestamp_ms=NOW, compression=CompressionType.GZIP
    )
    size, largest = payload_shape(zeros)
    limits = inflate_limits(largest)
    assert len(limits) == 3 and limits[-1] == inflate_bound(largest) == 64 << 20

    async def main() -> None:
        pool = ProducePreparation(1, 512 << 20, 256 << 20)
        grants = _charges(pool)
        log = _ValidatingLog()
        with pytest.raises(storage.CorruptRecordError, match="inflate past"):
            await pool.prepare(log, zeros, size, largest_compressed=largest)  # type: ignore[arg-type]
        assert log.limits == limits
        assert grants == [size + 2 * limit for limit in limits]
        assert pool.budget.available == pool.budget.capacity
        pool.shutdown()

    run(main)


def test_a_compressed_batch_that_inflates_past_its_first_limit_is_prepared_under_the_next() -> None:
    """Highly compressible records (2 MiB of one byte, ~10 KiB of gzip) pass the 1 MiB first try's
    limit: the second try, charged for 8 MiB, prepares them."""
    records = storage.build_batch(
        [(None, b"a" * 4096) for _ in range(512)], timestamp_ms=NOW, compression=CompressionType.GZIP
    )
    size, largest = payload_shape(records)
    assert inflate_limits(largest)[0] == 1 << 20

    async def main() -> None:
        pool = ProducePreparation(1, 512 << 20, 256 << 20)
        grants = _charges(pool)
        log = _ValidatingLog()
        prepared = await pool.prepare(log, records, size, largest_compressed=largest)  # type: ignore[arg-type]
        assert prepared.headers[0].records_count == 512
        assert log.limits == [1 << 20, 8 << 20] and grants == [size + (2 << 20), size + (16 << 20)]
        pool.shutdown()

    run(main)
