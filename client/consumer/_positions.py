"""A consumer's fetch positions, and their validation after a leader change (KIP-320).

A position is the offset of the next record to return plus the leader epoch of the record before
it (``offset_epoch``: the epoch of the batch the consumer last read). When the metadata names a new
leader epoch for the partition, the position may point into records the new leader never had: an
unclean election (or a leader elected with a shorter log) truncates them away, and new records take
their offsets. Fetching on at the old offset would then silently skip the new records. So, as
Kafka's consumer does, the partition stops fetching and asks the new leader OffsetForLeaderEpoch
(``offset_epoch``): the end offset of that epoch in the leader's log.

- end offset >= position: the position is valid; fetching goes on.
- end offset < position: the log was truncated. With an ``auto_offset_reset`` policy the position
  moves to that end offset, the first offset known to diverge (Kafka's rule: the consumer re-reads
  what replaced the truncated records, rather than jumping to the log start or end); with
  ``none``, `LogTruncationError` is raised, naming the divergent offset, until the application seeks.
- no answer for the epoch (the leader knows no epoch that old): with a policy the position is reset
  per ``auto_offset_reset``; with ``none``, `LogTruncationError` without a divergent offset.

Positions without an epoch (after `seek`, a reset, or before any record was read) need no
validation. Ordering: a partition awaiting validation is neither fetched nor drained, so nothing
past a truncation point is returned once the new epoch is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kraftlog.client._metadata import TopicPartition
from kraftlog.common import errors as kerr

__all__ = [
    "LogTruncationError",
    "PartitionState",
    "ValidationAnswer",
    "judge_validation",
    "needs_validation",
    "validation_request",
]

UNDEFINED = -1


@dataclass
class PartitionState:
    """What a consumer tracks of one assigned partition."""

    position: int | None = None
    reset: int | None = None  # EARLIEST / LATEST while the position is to be looked up
    offset_epoch: int | None = None  # leader epoch of the record before the position (None: unknown)
    leader_epoch: int = UNDEFINED  # the metadata's leader epoch the position is known valid under
    awaiting_validation: bool = False
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    paused: bool = False
    backoff_until: float = 0.0
    fetching: bool = False  # in an outstanding Fetch

    def seek(self, offset: int | None, *, epoch: int | None = None, reset: int | None = None) -> None:
        """Move the position (None: look it up per ``reset``); validation is no longer pending."""
        self.position, self.offset_epoch, self.reset = offset, epoch, reset
        self.awaiting_validation = False

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused and not self.awaiting_validation


class LogTruncationError(kerr.OffsetOutOfRangeError):
    """The log was truncated below the consumer's position (the new leader does not have records
    the consumer already read), and ``auto_offset_reset`` is ``none``.

    ``partitions`` maps each partition to the position that was found invalid;
    ``divergent_offsets`` maps those for which the leader named one to the first offset known to
    diverge (seek there to read what replaced the truncated records). As Kafka's
    ``LogTruncationException``, a kind of OFFSET_OUT_OF_RANGE.
    """


def needs_validation(state: PartitionState, current_epoch: int) -> bool:
    """True when the metadata's leader epoch moved past the one the position was valid under and
    the position carries an epoch to check (KIP-320)."""
    return (
        state.position is not None
        and state.offset_epoch is not None
        and current_epoch >= 0
        and state.leader_epoch >= 0
        and current_epoch != state.leader_epoch
    )


def validation_request(items: Mapping[TopicPartition, tuple[int, int]]) -> Any:
    """OffsetForLeaderEpoch for ``{tp: (current_leader_epoch, offset_epoch)}`` from a consumer."""
    from kraftlog.proto import broker_pb2

    R = broker_pb2.OffsetForLeaderEpochRequest
    topics: dict[str, list[Any]] = {}
    for tp, (current, epoch) in items.items():
        topics.setdefault(tp.topic, []).append(
            R.Partition(partition=tp.partition, current_leader_epoch=current, leader_epoch=epoch)
        )
    return R(replica_id=-1, topics=[R.Topic(topic=t, partitions=ps) for t, ps in topics.items()])


class ValidationAnswer(NamedTuple):
    """What to do with a position after the leader's OffsetForLeaderEpoch answer."""

    valid: bool
    divergent_offset: int | None = None  # truncated: the first offset known to diverge
    divergent_epoch: int | None = None


def judge_validation(position: int, answer_epoch: int, answer_end_offset: int) -> ValidationAnswer:
    """Kafka's ``SubscriptionState.maybeCompleteValidation`` rule, as a pure function."""
    if answer_epoch == UNDEFINED or answer_end_offset == UNDEFINED:
        return ValidationAnswer(False)
    if answer_end_offset < position:
        return ValidationAnswer(False, answer_end_offset, answer_epoch)
    return ValidationAnswer(True)
