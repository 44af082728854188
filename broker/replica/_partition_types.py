"""What a partition replica reports and needs: replica and ISR state, read results, the listener and
AlterPartition interfaces, and the error helpers of the broker's responses (see `broker.replica._partition`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import structlog

from kraftlog.broker.replica._alter_partition import AlterPartitionResult
from kraftlog.common import errors as kerr
from kraftlog.proto import errors_pb2
from kraftlog.storage import FileRegion

TopicPartition = tuple[str, int]


_log = structlog.get_logger(__name__)


def error_pb(err: type[kerr.KafkaError] | kerr.KafkaError | None = None, message: str = "") -> errors_pb2.Error:
    """A response error: code 0 / NONE when ``err`` is None."""
    if err is None:
        return errors_pb2.Error(code=0, name="NONE", message="")
    if isinstance(err, kerr.KafkaError):
        return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message or err.message)
    return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)


def error_pb_from_exception(exc: BaseException) -> errors_pb2.Error:
    """Kafka's code and name from any typed error (every one is a `common.errors.KafkaError`)."""
    code = getattr(exc, "error_code", None)
    name = getattr(exc, "error_name", None)
    if not isinstance(code, int) or not isinstance(name, str):
        return errors_pb2.Error(code=-1, name="UNKNOWN_SERVER_ERROR", message=repr(exc))
    message = exc.message if isinstance(exc, kerr.KafkaError) else str(exc)
    return errors_pb2.Error(code=code, name=name, message=message)


class AlterPartitionSender(Protocol):
    """What a leader needs to propose an ISR (implemented by `AlterPartitionManager`)."""

    def submit(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
    ) -> asyncio.Future[AlterPartitionResult]: ...


class PartitionListener(Protocol):
    """Events the replica manager turns into purgatory checks."""

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None: ...

    def on_records_appended(self, tp: TopicPartition) -> None: ...

    def on_replica_state_changed(self, tp: TopicPartition) -> None: ...

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        """The controller committed this leader's ISR proposal (Kafka marks IsrShrinks/IsrExpands
        here, not when a new registration arrives through the metadata log)."""


class _NoListener:
    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        pass

    def on_records_appended(self, tp: TopicPartition) -> None:
        pass

    def on_replica_state_changed(self, tp: TopicPartition) -> None:
        pass

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        pass


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower (from its fetches)."""

    broker_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1


@dataclass(frozen=True, eq=False, slots=True)
class IsrState:
    """The ISR as committed, plus the proposal in flight (KIP-497).

    ``maximal_isr`` is what the HW and acks=all use: the committed ISR plus a replica being added,
    or the committed ISR still holding the replicas being removed. Compared by identity: an
    AlterPartition answer applies only to the state that proposed it.
    """

    isr: tuple[int, ...]
    maximal_isr: tuple[int, ...]
    proposed_isr: tuple[int, ...] | None = None

    @classmethod
    def committed(cls, isr: tuple[int, ...] | list[int]) -> IsrState:
        isr = tuple(isr)
        return cls(isr, isr, None)

    @property
    def inflight(self) -> bool:
        return self.proposed_isr is not None

    def last_committed(self) -> IsrState:
        return IsrState.committed(self.isr)


class PartitionRead(NamedTuple):
    """One partition's part of a fetch answer."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: tuple[int, int] | None = None
    last_stable_offset: int = -1  # -1: the high watermark (a read_uncommitted or replica fetch)
    aborted: tuple[tuple[int, int], ...] = ()  # read_committed: (producer id, first offset) of aborts
    region: FileRegion | None = None  # a zero-copy read: the batches as a range of the segment file
    preferred_read_replica: int = -1  # KIP-392: the leader sends the consumer to this follower (no records)

    @property
    def num_bytes(self) -> int:
        return self.region.size if self.region is not None else len(self.records)


def _not_leader(message: str, leader_id: int = -1, leader_epoch: int = -1) -> kerr.NotLeaderOrFollowerError:
    return kerr.NotLeaderOrFollowerError(message, leader_id=leader_id, leader_epoch=leader_epoch)
