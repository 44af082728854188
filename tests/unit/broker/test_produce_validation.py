"""Produce validation through the `ReplicaManager` (issue 12 §1): per-partition errors with Kafka's
names, ``record_errors`` and an error message in the response, nothing of a refused request in the
log, the partition (and the other partitions of the request) keep serving; a fetch that meets a
corrupt batch written by an earlier process answers CORRUPT_MESSAGE naming its offset.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path

from test_replica_manager import (
    batch,
    count_records,
    fetch_req,
    fresp,
    presp,
    produce_req,
    run,
    setup,
)
from test_validator import raw_batch, record

from kraftlog import storage


def now_ms() -> int:
    return int(time.time() * 1000)


def test_refused_batches_name_their_records_and_leave_the_log_unchanged(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, partitions=4, configs={"cleanup.policy": "compact"})
        now = now_ms()
        too_few = raw_batch(record(0) + record(1), count=3, base_ts=now, max_ts=now)
        out_of_order = raw_batch(record(0) + record(2) + record(1), count=3, base_ts=now, max_ts=now)
        no_inflate = raw_batch(gzip.compress(record(0))[:-12], count=1, attributes=1, base_ts=now, max_ts=now)
        keyless = storage.build_batch([(b"a", b"1"), (None, b"2")], timestamp_ms=now)
        resp = await rm.produce(produce_req({0: too_few, 1: out_of_order, 2: no_inflate, 3: keyless}, acks=1))
        p0, p1, p2, p3 = (presp(resp, i) for i in range(4))
        assert (p0.error.name, [(e.batch_index, e.message) for e in p0.record_errors]) == (
            "INVALID_RECORD",
            [(2, "the batch declares 3 records but holds 2")],
        )
        assert "record 2 does not decode" in p0.error.message
        assert p1.error.name == "INVALID_RECORD" and [e.batch_index for e in p1.record_errors] == [1]
        assert p2.error.name == "CORRUPT_MESSAGE" and not p2.record_errors and "gzip" in p2.error.message
        assert p3.error.name == "INVALID_RECORD" and [e.batch_index for e in p3.record_errors] == [1]
        assert all(p.base_offset == -1 for p in (p0, p1, p2, p3))
        # nothing reached a log, and every partition keeps serving
        good = storage.build_batch([(b"k", b"v")], timestamp_ms=now)
        resp = await rm.produce(produce_req({i: good for i in range(4)}, acks=1))
        assert [presp(resp, i).base_offset for i in range(4)] == [0, 0, 0, 0]
        await rm.shutdown()

    run(main)


def test_timestamp_errors_name_the_records(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, configs={"message.timestamp.before.max.ms": "60000"})
        now = now_ms()
        section = record(0) + record(1, ts_delta=-120_000) + record(2) + record(3, ts_delta=2 * 3_600_000)
        resp = await rm.produce(produce_req({0: raw_batch(section, count=4, base_ts=now, max_ts=now)}, acks=1))
        p = presp(resp)
        assert p.error.name == "INVALID_TIMESTAMP"
        assert [e.batch_index for e in p.record_errors] == [1, 3]
        assert rm.get_partition("t", 0).log_end_offset == 0
        await rm.shutdown()

    run(main)


def test_fetch_of_a_corrupt_batch_on_disk_answers_corrupt_message(tmp_path: Path) -> None:
    async def first_life() -> None:
        rm, _meta = setup(tmp_path)
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        await rm.shutdown()

    run(first_life)
    [segment] = (tmp_path / "node1").glob("t-0/*.log")
    now = now_ms()
    with open(segment, "ab") as fh:  # what an older version let through: CRC fine, a record missing
        fh.write(raw_batch(record(0) + record(1), count=3, base_offset=2, base_ts=now, max_ts=now))

    async def second_life() -> None:
        rm, _meta = setup(tmp_path)
        part = rm.get_partition("t", 0)
        assert part.log_end_offset == 5
        part.log.update_high_watermark(5)
        pd = fresp(await rm.fetch(fetch_req({0: 0})))
        assert pd.error.code == 0 and count_records(pd.records) == 2  # the good batch, not the bad one
        pd = fresp(await rm.fetch(fetch_req({0: 2})))
        assert pd.error.name == "CORRUPT_MESSAGE" and "batch at offset 2 is corrupt" in pd.error.message
        assert pd.high_watermark == 5
        # a follower's fetch meets the same answer; produce keeps working past the bad batch
        resp = await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert presp(resp).base_offset == 5
        await rm.shutdown()

    run(second_life)
