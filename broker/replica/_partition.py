"""`Partition`: one partition's replica on this broker, as leader or follower (docs/architecture.md §4).

Modelled on Kafka's ``Partition``. The leader tracks, per follower, the log end offset (LEO) the
follower fetched from, when it last fetched and when it was last caught up; it keeps the high
watermark (HW) at the minimum LEO over the ISR and proposes ISR changes to the controller.

Ordering rules:

- Persist before acknowledge: records reach the leader's log (`Log.append_as_leader`, written to the
  segment file, epoch cache persisted first) before anything is acknowledged; an acks=all produce is
  acknowledged only once the HW has passed its last offset, i.e. once every member of the ISR has
  the records in its log. HWs reach ``replication-offset-checkpoint`` when the replica manager
  checkpoints them (periodically and on shutdown); a HW only needs to be a lower bound after a
  crash, so a late checkpoint loses nothing.
- The ISR changes only through the controller (KIP-497): a shrink or an expansion is *proposed*
  through the `AlterPartitionSender` and applied when the controller's answer or a newer metadata
  registration says it was committed. While a proposal is in flight the HW and acks=all use the
  *maximal* ISR, the union of the committed and the proposed ISR, so a commit can never make an
  acknowledged record unsafe.
- The leader's HW only moves forward. A follower's HW is min(leader HW, own LEO).
- Epochs fence: metadata older than what the partition has seen is ignored; a request carrying an
  older leader epoch gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
- A follower never truncates on becoming follower: the leader's fetch answer tells it where its log
  diverges (leader-epoch truncation, KIP-101/KIP-320), and only then does it truncate.
- A leader that loses leadership (`make_follower`, `stop`) stops acknowledging at once: its pending
  acks=all produces fail with NOT_LEADER_OR_FOLLOWER when the replica manager re-checks them.

Every method runs on the broker's event loop; storage calls are synchronous.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kraftlog import storage
from kraftlog.broker.replica._partition_replication import _LeaderReplication
from kraftlog.broker.replica._partition_types import (
    AlterPartitionSender,
    IsrState,
    PartitionListener,
    PartitionRead,
    ReplicaState,
    TopicPartition,
    _log,
    _NoListener,
    _not_leader,
    error_pb,
    error_pb_from_exception,
)
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import NO_LEADER, PartitionRegistration

__all__ = [
    "AlterPartitionSender",
    "IsrState",
    "Partition",
    "PartitionListener",
    "PartitionRead",
    "ReplicaState",
    "TopicPartition",
    "error_pb",
    "error_pb_from_exception",
]


# ------------------------------------------------------------------------------------ helpers


# ------------------------------------------------------------------------------------ Partition


class Partition(_LeaderReplication):
    """One partition replica: leader or follower state over a storage `Log`."""

    def __init__(
        self,
        topic: str,
        partition_id: int,
        topic_id: str,
        *,
        local_broker_id: int,
        log: storage.Log,
        alter_partition: AlterPartitionSender,
        clock_ms: Callable[[], int],
        replica_lag_time_max_ms: int = 30_000,
        min_insync_replicas: int = 1,
        listener: PartitionListener | None = None,
        is_replica_eligible: Callable[[int, int], bool] | None = None,
        alter_partition_retry_ms: int = 100,
        registered_broker_epoch: Callable[[int], int] | None = None,
    ) -> None:
        self.topic = topic
        self.partition_id = partition_id
        self.topic_id = topic_id
        self.tp: TopicPartition = (topic, partition_id)
        self.local_broker_id = local_broker_id
        self.log = log
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._alter = alter_partition
        self._clock_ms = clock_ms
        self._listener: PartitionListener = listener or _NoListener()
        self._eligible = is_replica_eligible or (lambda _broker_id, _broker_epoch: True)
        # the broker epoch the metadata image registers for a broker (-1: unknown), for KIP-903
        self._registered_broker_epoch = registered_broker_epoch or (lambda _broker_id: -1)
        self._alter_retry_ms = alter_partition_retry_ms
        self._leader_id = NO_LEADER
        self._leader_epoch = -1
        self._partition_epoch = -1
        self._replicas: tuple[int, ...] = ()
        self._isr_state = IsrState.committed(())
        self._remote: dict[int, ReplicaState] = {}
        self._leader_epoch_start_offset: int | None = None
        self._stopped = False
        self._log = _log.bind(node_id=local_broker_id, topic=topic, partition=partition_id)

    # ============================================================== state

    @property
    def is_leader(self) -> bool:
        return not self._stopped and self._leader_id == self.local_broker_id

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR."""
        return self._isr_state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self._isr_state.maximal_isr

    @property
    def isr_state(self) -> IsrState:
        return self._isr_state

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def leader_epoch_start_offset(self) -> int | None:
        return self._leader_epoch_start_offset

    def replica_state(self, broker_id: int) -> ReplicaState | None:
        """The leader's view of a follower (None for unknown replicas and on followers)."""
        st = self._remote.get(broker_id)
        return None if st is None else dataclasses.replace(st)

    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self._isr_state.isr) < self.min_insync_replicas

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else "follower"
        return (
            f"Partition({self.topic}-{self.partition_id}, {role}, leader={self._leader_id}, "
            f"epoch={self._leader_epoch}/{self._partition_epoch}, isr={list(self._isr_state.isr)}, "
            f"hw={self.log.high_watermark}, leo={self.log.log_end_offset})"
        )

    # ============================================================== metadata

    def make_leader(self, reg: PartitionRegistration) -> bool:
        """Become (or stay) leader from the metadata registration.

        Ignored (returns False) when ``reg`` is older than what the partition has: a lower leader
        epoch, or the same leader epoch with a partition epoch not newer. A new leader epoch starts
        in the epoch cache at the current LEO, and every follower's state is reset (Kafka's rule: a
        follower in the ISR counts as caught up now, others as never). The same leader epoch with a
        newer partition epoch (an ISR change committed) replaces the ISR, cancelling any proposal in
        flight. Returns True when anything changed.
        """
        if reg.leader != self.local_broker_id:
            raise ValueError(f"registration names leader {reg.leader}, not {self.local_broker_id}")
        if self._is_stale(reg):
            self._log.debug(
                "skipped_stale_leader_registration",
                leader_epoch=reg.leader_epoch,
                partition_epoch=reg.partition_epoch,
                current_leader_epoch=self._leader_epoch,
                current_partition_epoch=self._partition_epoch,
            )
            return False
        now = self._clock_ms()
        was_leader = self.is_leader
        new_epoch = reg.leader_epoch > self._leader_epoch or self._stopped
        self._stopped = False
        self._replicas = tuple(reg.replicas)
        self._isr_state = IsrState.committed(reg.isr)
        remote_ids = [r for r in reg.replicas if r != self.local_broker_id]
        self._remote = {r: self._remote.get(r) or ReplicaState(r) for r in remote_ids}
        log = self.log
        if new_epoch:
            leo = log.log_end_offset
            with log.lock:
                log.epoch_cache.assign(reg.leader_epoch, leo)
            for rid, st in self._remote.items():
                caught_up = now if rid in self._isr_state.isr else 0
                if not was_leader:
                    self._remote[rid] = ReplicaState(rid, last_caught_up_time_ms=caught_up)
                else:
                    st.last_fetch_leader_log_end_offset = leo
                    st.last_fetch_time_ms = now
                    st.last_caught_up_time_ms = caught_up
            self._leader_epoch_start_offset = leo
            self._log.info(
                "became_leader",
                leader_epoch=reg.leader_epoch,
                partition_epoch=reg.partition_epoch,
                isr=list(reg.isr),
                replicas=list(reg.replicas),
                log_end_offset=leo,
                high_watermark=log.high_watermark,
            )
        else:
            self._log.info("leader_isr_updated", partition_epoch=reg.partition_epoch, isr=list(reg.isr))
        self._leader_id = self.local_broker_id
        self._leader_epoch = reg.leader_epoch
        self._partition_epoch = reg.partition_epoch
        self.maybe_increment_high_watermark()
        return True

    def make_follower(self, reg: PartitionRegistration) -> bool:
        """Become (or stay) a follower of ``reg.leader`` (possibly NO_LEADER).

        Stale registrations are ignored as in `make_leader`. The log is NOT truncated here: the
        fetcher truncates once the leader says where the logs diverge. Returns True when the
        fetcher must (re)start: a new leader epoch, a new leader, or a role change.
        """
        if reg.leader == self.local_broker_id:
            raise ValueError("registration names this broker as leader")
        if self._is_stale(reg):
            return False
        role_change = self._leader_id == self.local_broker_id or self._stopped
        new_epoch = reg.leader_epoch > self._leader_epoch
        leader_changed = reg.leader != self._leader_id
        self._stopped = False
        self._leader_id = reg.leader
        self._leader_epoch = reg.leader_epoch
        self._partition_epoch = reg.partition_epoch
        self._replicas = tuple(reg.replicas)
        self._isr_state = IsrState.committed(reg.isr)
        self._remote = {}
        self._leader_epoch_start_offset = None
        changed = role_change or new_epoch or leader_changed
        if changed:
            self._log.info(
                "became_follower",
                leader=reg.leader,
                leader_epoch=reg.leader_epoch,
                partition_epoch=reg.partition_epoch,
                log_end_offset=self.log.log_end_offset,
                high_watermark=self.log.high_watermark,
            )
        return changed

    def stop(self) -> None:
        """This broker no longer hosts the replica (deleted or reassigned away): stop serving."""
        self._stopped = True
        self._leader_id = NO_LEADER
        self._remote = {}
        self._isr_state = IsrState.committed(())
        self._log.info("stopped")

    def update_config(
        self, log_config: storage.LogConfig | None = None, min_insync_replicas: int | None = None
    ) -> None:
        if log_config is not None:
            self.log.update_config(log_config)
        if min_insync_replicas is not None:
            self.min_insync_replicas = min_insync_replicas

    def _is_stale(self, reg: PartitionRegistration) -> bool:
        if self._stopped:
            return reg.leader_epoch < self._leader_epoch
        if reg.leader_epoch < self._leader_epoch:
            return True
        return reg.leader_epoch == self._leader_epoch and reg.partition_epoch <= self._partition_epoch

    # ============================================================== leader: epochs

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> None:
        """Kafka's order: the request's epoch first (FENCED / UNKNOWN_LEADER_EPOCH), then leadership.

        A negative ``current_leader_epoch`` is not checked.
        """
        if current_leader_epoch >= 0:
            if current_leader_epoch < self._leader_epoch:
                raise kerr.FencedLeaderEpochError(
                    f"leader epoch {current_leader_epoch} is older than the current {self._leader_epoch}"
                )
            if current_leader_epoch > self._leader_epoch:
                raise kerr.UnknownLeaderEpochError(
                    f"leader epoch {current_leader_epoch} is newer than the current {self._leader_epoch}"
                )
        if require_leader and not self.is_leader:
            raise _not_leader(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition_id}",
                self._leader_id,
                self._leader_epoch,
            )

    # ============================================================== leader: produce

    def append_records_to_leader(
        self,
        records: bytes,
        required_acks: int,
        origin: storage.AppendOrigin = storage.AppendOrigin.CLIENT,
        prepared: storage.PreparedAppend | Exception | None = None,
        transaction_version: int = 0,
        verification_guard: object | None = None,
    ) -> storage.LogAppendInfo:
        """Append a produce payload as leader. ``transaction_version`` 2: a coordinator's marker
        ending a KIP-890 transaction (see `Log.append_as_leader`).

        With acks=-1 the committed ISR must hold at least ``min.insync.replicas`` replicas before
        anything is written (NOT_ENOUGH_REPLICAS). The records are in the log before this returns;
        the caller acknowledges acks=1 at once and acks=-1 once
        `check_enough_replicas_reach_offset` says so. ``prepared``: the payload as `Log.prepare_append`
        checked it off the loop (see `Log.append_as_leader`), or what that check raised, raised here
        after the leader's own checks (Kafka checks the ISR before it validates).
        """
        if not self.is_leader:
            raise _not_leader(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition_id}",
                self._leader_id,
                self._leader_epoch,
            )
        isr_size = len(self._isr_state.isr)
        if required_acks == -1 and isr_size < self.min_insync_replicas:
            raise kerr.NotEnoughReplicasError(
                f"the ISR {list(self._isr_state.isr)} of {self.topic}-{self.partition_id} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}"
            )
        if isinstance(prepared, Exception):
            raise prepared
        info = self.log.append_as_leader(
            records,
            self._leader_epoch,
            origin=origin,
            prepared=prepared,
            transaction_version=transaction_version,
            verification_guard=verification_guard,
        )
        self._listener.on_records_appended(self.tp)
        self.maybe_increment_high_watermark()
        return info

    def check_enough_replicas_reach_offset(
        self, required_offset: int, leader_epoch: int | None = None
    ) -> tuple[bool, type[kerr.KafkaError] | None]:
        """For acks=-1: ``(done, error)``. Done when the HW reached ``required_offset`` (the offset
        after the batch), with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the *maximal* ISR (the committed
        one plus a pending expansion, Kafka's rule) shrank below ``min.insync.replicas`` meanwhile:
        the HW is computed over that same set, so every replica it counts holds the records. Done
        with NOT_LEADER_OR_FOLLOWER once this broker is no longer the leader of the epoch the
        records were appended in."""
        if not self.is_leader or (leader_epoch is not None and leader_epoch != self._leader_epoch):
            return True, kerr.NotLeaderOrFollowerError
        if self.log.high_watermark >= required_offset:
            if len(self._isr_state.maximal_isr) >= self.min_insync_replicas:
                return True, None
            return True, kerr.NotEnoughReplicasAfterAppendError
        return False, None

    # ============================================================== leader: high watermark

    # ============================================================== leader: fetch

    # ============================================================== leader: ISR changes

    # ============================================================== leader: other requests

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, *, require_leader: bool = True
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end_offset)`` of the largest epoch <= ``leader_epoch``."""
        self.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        return self.log.end_offset_for_epoch(leader_epoch)

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        *,
        current_leader_epoch: int = -1,
        is_consumer: bool = True,
        require_leader: bool = True,
        isolation_level: int = 0,
    ) -> storage.TimestampAndOffset | None:
        """ListOffsets. Consumers see offsets below the HW only (the "latest" offset is the HW, or
        the last stable offset for read_committed, ``isolation_level`` 1); replicas see the LEO. A
        new leader whose HW is still below the start of its epoch answers OFFSET_NOT_AVAILABLE to
        consumers for "latest" (KIP-207)."""
        self.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        log = self.log
        if not is_consumer:
            last_fetchable = log.log_end_offset
        else:
            last_fetchable = log.last_stable_offset if isolation_level == 1 else log.high_watermark
        start = self._leader_epoch_start_offset
        lagging_hw = is_consumer and start is not None and start > log.high_watermark
        if timestamp == storage.LATEST_TIMESTAMP:
            if lagging_hw:
                raise kerr.OffsetNotAvailableError(
                    f"the high watermark {log.high_watermark} is below the leader epoch start offset {start}"
                )
            return storage.TimestampAndOffset(-1, last_fetchable, self._leader_epoch)
        found = log.offset_for_timestamp(timestamp)
        if timestamp == storage.EARLIEST_TIMESTAMP:
            return found
        if found is not None and found.offset < last_fetchable:
            return found
        if lagging_hw:
            raise kerr.OffsetNotAvailableError(
                f"the high watermark {log.high_watermark} is below the leader epoch start offset {start}"
            )
        return None

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1: the HW); it may not pass the
        HW (OFFSET_OUT_OF_RANGE), and a topic whose cleanup.policy lacks ``delete`` refuses it
        (POLICY_VIOLATION, as Kafka's Partition.deleteRecordsOnLeader). Returns the new low
        watermark."""
        if not self.is_leader:
            raise _not_leader(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition_id}",
                self._leader_id,
                self._leader_epoch,
            )
        if not self.log.config.delete:
            raise kerr.PolicyViolationError(
                f"Records of partition {self.topic}-{self.partition_id} can not be deleted due to the configured policy"
            )
        hw = self.log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise kerr.OffsetOutOfRangeError(
                f"cannot delete records before offset {offset}: it is past the high watermark {hw}"
            )
        if self.log.maybe_increment_log_start_offset(target):
            self._log.info("log_start_offset_incremented", log_start_offset=target, reason="delete_records")
        self._listener.on_replica_state_changed(self.tp)
        return self.low_watermark()

    # ============================================================== follower

    def append_records_to_follower(self, records: bytes, *, checked: bool = False) -> storage.LogAppendInfo | None:
        """Append the leader's batches unchanged (offsets and epochs kept); ``checked``: their CRC
        and framing were checked off the loop already (`Log.check_replicated`)."""
        return self.log.append_as_follower(records, checked=checked)

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_log_start_offset: int = -1) -> None:
        """Follower: HW = min(leader HW, own LEO); then follow the leader's log start offset.

        A moved HW completes the consumers' long polls waiting on this follower (KIP-392; Kafka's
        fetcher completes the delayed fetches of partitions with a new high watermark)."""
        log = self.log
        new_hw = min(leader_high_watermark, log.log_end_offset)
        if new_hw >= 0 and new_hw != log.high_watermark:
            log.update_high_watermark(new_hw)
            self._listener.on_high_watermark_advanced(self.tp)
        if leader_log_start_offset > log.log_start_offset:
            target = min(leader_log_start_offset, log.high_watermark)
            if target > log.log_start_offset:
                log.maybe_increment_log_start_offset(target)

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation (after the leader named a diverging epoch).

        Even when nothing is truncated, epoch-cache entries starting at or past the LEO are dropped
        (Kafka does the same): a broker that became leader in an epoch and wrote nothing in it
        before losing leadership keeps that epoch in its cache, and would otherwise keep sending
        it as ``last_fetched_epoch`` and be told to diverge forever.
        """
        log = self.log
        truncated = log.truncate_to(offset)
        if not truncated:
            with log.lock:
                log.epoch_cache.truncate_from_end(log.log_end_offset)
        else:
            self._log.info("follower_truncated", to_offset=offset, log_end_offset=log.log_end_offset)
        return truncated

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self._log.info("follower_truncated_fully", start_offset=offset)
