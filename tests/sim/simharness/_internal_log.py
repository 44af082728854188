"""One partition of a coordinator's internal topic (``__transaction_state``, ``__consumer_offsets``)
as the real coordinators see it through their `ReplicaPartitionWriter`: a replica manager that
holds real record batches (the bytes `append_records` builds, given offsets as a log would) and
answers ``append_internal`` after a seeded delay, sometimes with a failure.

The model of the partition (what its replicas guarantee, so what the harness may assume):
- one leader at a time, named by its leader epoch; a coordinator reaches the partition through a
  `LeaderView` of one epoch, which stops leading (NOT_LEADER_OR_FOLLOWER) once the epoch moves on;
- an append is in flight (the uncommitted tail) for 1..15 ms; then it is committed, or it fails
  with NOT_ENOUGH_REPLICAS and is gone, or (rarely) it is committed but the answer is lost
  (REQUEST_TIMED_OUT: the coordinator must not assume the write failed);
- a failover (`elect`) moves the leadership to a new epoch: of what was in flight, a random prefix
  turns out committed (it had reached the ISR), the rest is truncated; the new leader's log is
  the committed records, which the next coordinator replays (`read_log`).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from kraftlog.common import errors as kerr
from kraftlog.common.records import iter_batches, rewrite_offset_and_epoch

__all__ = ["InternalPartition", "LeaderView"]


@dataclass
class _InFlight:
    payload: bytes
    done: asyncio.Event


@dataclass
class _Read:
    records: bytes


class _LogReader:
    """What `read_log` asks of ``Partition.log``: whole batches from an offset, below ``max_offset``."""

    def __init__(self, part: InternalPartition) -> None:
        self._part = part

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> _Read:
        end = self._part.end_offset if max_offset is None else max_offset
        out = bytearray()
        for base, last, payload in self._part.batches:
            if last < offset or base >= end:
                continue
            if out and len(out) + len(payload) > max_bytes:
                break
            out += payload
        return _Read(bytes(out))


class InternalPartition:
    """The committed batches of one internal partition, its uncommitted tail and its leader epoch
    (see the module docstring). ``fail_rate``: appends failed with NOT_ENOUGH_REPLICAS;
    ``lost_ack_rate``: appends committed whose answer is lost."""

    def __init__(self, topic: str, rng: random.Random, *, fail_rate: float = 0.04, lost_ack_rate: float = 0.01) -> None:
        self.topic = topic
        self.rng = rng
        self.fail_rate = fail_rate
        self.lost_ack_rate = lost_ack_rate
        self.leader_epoch = 0
        self.batches: list[tuple[int, int, bytes]] = []  # (base offset, last offset, batch bytes)
        self.end_offset = 0
        self.tail: list[_InFlight] = []  # written by the leader, not yet committed, in log order
        self.appends = 0
        self.failed = 0  # answered NOT_ENOUGH_REPLICAS
        self.lost_acks = 0  # committed, answered REQUEST_TIMED_OUT

    def _commit(self, payload: bytes) -> None:
        _pos, batch = next(iter_batches(payload))
        count = batch.last_offset - batch.base_offset + 1
        buf = bytearray(payload)
        rewrite_offset_and_epoch(buf, 0, self.end_offset, self.leader_epoch)
        self.batches.append((self.end_offset, self.end_offset + count - 1, bytes(buf)))
        self.end_offset += count

    def elect(self) -> int:
        """A new leader: a random prefix of the tail is committed, the rest truncated. Returns
        the new leader epoch."""
        keep = self.rng.randint(0, len(self.tail))
        for entry in self.tail[:keep]:
            self._commit(entry.payload)
        for entry in self.tail:
            entry.done.set()
        self.tail.clear()
        self.leader_epoch += 1
        return self.leader_epoch

    def view(self) -> LeaderView:
        """The partition as the replica manager of the current leader sees it."""
        return LeaderView(self, self.leader_epoch)

    async def append(self, epoch: int, payload: bytes) -> type[kerr.KafkaError] | None:
        if epoch != self.leader_epoch:
            return kerr.NotLeaderOrFollowerError
        self.appends += 1
        entry = _InFlight(payload, asyncio.Event())
        before = self.tail[-1] if self.tail else None
        self.tail.append(entry)
        try:
            await asyncio.sleep(self.rng.randint(1, 15) / 1000)
            if before is not None:
                await before.done.wait()  # the log answers appends in offset order
            if epoch != self.leader_epoch or not any(e is entry for e in self.tail):
                return kerr.NotLeaderOrFollowerError  # deposed meanwhile: `elect` decided its fate
            self.tail.remove(entry)
        except asyncio.CancelledError:
            if any(e is entry for e in self.tail):
                self.tail.remove(entry)  # its writer is gone: the write never reached the log
            raise
        finally:
            entry.done.set()
        draw = self.rng.random()
        if draw < self.fail_rate:
            self.failed += 1
            return kerr.NotEnoughReplicasError
        self._commit(payload)
        if draw < self.fail_rate + self.lost_ack_rate:
            self.lost_acks += 1
            return kerr.RequestTimedOutError
        return None


class LeaderView:
    """The replica manager of the broker that leads the partition at ``epoch`` (the
    ``replicas()`` a coordinator's `ReplicaPartitionWriter` reads and appends through)."""

    def __init__(self, part: InternalPartition, epoch: int) -> None:
        self._part = part
        self._epoch = epoch
        self.log = _LogReader(part)
        self.log_start_offset = 0

    # -- what `leader_replica` and `read_log` ask of the partition
    def get_partition(self, topic: str, partition: int) -> LeaderView | None:
        return self if topic == self._part.topic and partition == 0 else None

    @property
    def is_leader(self) -> bool:
        return self._part.leader_epoch == self._epoch

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    @property
    def log_end_offset(self) -> int:
        return self._part.end_offset

    # -- what `append_records` asks of the replica manager
    async def append_internal(
        self, topic: str, partition: int, records: bytes, timeout_ms: int
    ) -> type[kerr.KafkaError] | None:
        if topic != self._part.topic or partition != 0:
            return kerr.UnknownTopicOrPartitionError
        return await self._part.append(self._epoch, records)
