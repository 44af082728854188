"""What a partition leader does for replication: serve fetches and track each follower's state,
advance the high watermark, and expand or shrink the ISR through AlterPartition (part of
`broker.replica._partition.Partition`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftlog import storage
from kraftlog.broker.replica._alter_partition import AlterPartitionResult
from kraftlog.broker.replica._partition_types import (
    AlterPartitionSender,
    IsrState,
    PartitionListener,
    PartitionRead,
    ReplicaState,
    TopicPartition,
    _not_leader,
)
from kraftlog.common import errors as kerr


class _LeaderReplication:
    """The leader's view of its followers: fetches, their state, the high watermark and ISR changes."""

    # Partition's fields and methods this part uses (set in Partition.__init__).
    topic: str
    partition_id: int
    topic_id: str
    tp: TopicPartition
    local_broker_id: int
    log: storage.Log
    min_insync_replicas: int
    replica_lag_time_max_ms: int
    _alter: AlterPartitionSender
    _clock_ms: Callable[[], int]
    _listener: PartitionListener
    _eligible: Callable[[int, int], bool]
    _registered_broker_epoch: Callable[[int], int]
    _alter_retry_ms: int
    _leader_id: int
    _leader_epoch: int
    _partition_epoch: int
    _replicas: tuple[int, ...]
    _isr_state: IsrState
    _remote: dict[int, ReplicaState]
    _leader_epoch_start_offset: int | None
    _log: Any

    if TYPE_CHECKING:

        @property
        def is_leader(self) -> bool: ...

        def is_under_min_isr(self) -> bool: ...

        def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> None: ...

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (the leader counts with its own LEO); forward only.

        A follower whose LEO the leader does not know yet (after an election), or whose LEO was
        reported by an earlier incarnation (the metadata registers it with a newer broker epoch
        than its fetches carried, KIP-903), holds the HW back until it fetches. Notifies the
        listener when the HW moved.
        """
        if not self.is_leader:
            return False
        log = self.log
        new_hw = log.log_end_offset
        for rid in self._isr_state.maximal_isr:
            if rid == self.local_broker_id:
                continue
            st = self._remote.get(rid)
            leo = -1 if st is None or self._from_older_incarnation(st) else st.log_end_offset
            if leo < new_hw:
                new_hw = leo
        old_hw = log.high_watermark
        if new_hw > old_hw:
            log.update_high_watermark(new_hw)
            self._log.debug("high_watermark_advanced", old=old_hw, new=log.high_watermark)
            self._listener.on_high_watermark_advanced(self.tp)
            return True
        return False

    def _from_older_incarnation(self, st: ReplicaState) -> bool:
        return 0 < st.broker_epoch < self._registered_broker_epoch(st.broker_id)

    def low_watermark(self) -> int:
        """min log start offset over the leader and the followers of the maximal ISR that reported
        one (DeleteRecords completes when this reaches the requested offset)."""
        low = self.log.log_start_offset
        for rid in self._isr_state.maximal_isr:
            st = self._remote.get(rid)
            if st is not None and st.log_start_offset >= 0:
                low = min(low, st.log_start_offset)
        return low

    def fetch_records(
        self,
        *,
        fetch_offset: int,
        max_bytes: int,
        min_one_message: bool = True,
        current_leader_epoch: int = -1,
        replica_id: int = -1,
        replica_epoch: int = -1,
        last_fetched_epoch: int = -1,
        follower_log_start_offset: int = -1,
        update_fetch_state: bool = True,
        isolation_level: int = 0,
        zero_copy: bool = False,
        fetch_only_leader: bool = True,
    ) -> PartitionRead:
        """Read for a consumer (``replica_id`` < 0: up to the HW, or with ``isolation_level`` 1,
        read_committed, up to the last stable offset, with the aborted transactions of what it
        read) or a follower (up to the LEO).

        A follower fetch names the epoch of its last fetched batch; when its log departs from the
        leader's (the leader's end offset for that epoch is below ``fetch_offset``, or the leader
        only knows an older epoch) the answer is the diverging epoch and no records (KIP-320), and
        the follower's state is not updated. Otherwise the follower's fetch offset becomes its LEO
        on the leader (which may expand the ISR and advance the HW).

        ``zero_copy``: the batches come as ``region`` (the caller sends and closes it), see
        `Log.read_region`.

        ``fetch_only_leader`` False (a consumer's Fetch v11+, KIP-392, Kafka's
        ``FetchParams.fetchOnlyLeader``): a follower serves it too, up to its own high watermark
        (last stable offset for read_committed), after the same epoch checks (FENCED_LEADER_EPOCH /
        UNKNOWN_LEADER_EPOCH against the epoch this replica knows). As in Kafka, an offset above
        its HW but not above its LEO reads nothing, one above its LEO is OFFSET_OUT_OF_RANGE.
        Followers' fetches always need the leader.

        KIP-903: a follower fetch whose ``replica_epoch`` is older than the broker epoch the
        metadata registers for that broker comes from an earlier incarnation of the replica (sent
        before it restarted, possibly losing unflushed data): it is refused with
        NOT_LEADER_OR_FOLLOWER before anything is read or recorded, so it neither moves the HW nor
        keeps the replica in (or brings it into) the ISR. ``replica_epoch`` -1 is not checked.
        """
        is_replica = replica_id >= 0
        self.check_leader_epoch(current_leader_epoch, require_leader=is_replica or fetch_only_leader)
        if is_replica and replica_id not in self._remote:
            raise _not_leader(
                f"broker {replica_id} is not a replica of {self.topic}-{self.partition_id} "
                f"(replicas {list(self._replicas)})",
                self._leader_id,
                self._leader_epoch,
            )
        if is_replica and replica_epoch >= 0:
            registered = self._registered_broker_epoch(replica_id)
            if registered > replica_epoch:
                raise _not_leader(
                    f"stale fetch from broker {replica_id} of {self.topic}-{self.partition_id}: "
                    f"broker epoch {replica_epoch} is older than the registered {registered}",
                    self._leader_id,
                    self._leader_epoch,
                )
        log = self.log
        leo = log.log_end_offset
        if last_fetched_epoch >= 0:  # followers, and consumers of Fetch v12+ (KIP-320)
            epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0 or end < 0:
                raise kerr.OffsetOutOfRangeError(
                    f"cannot determine the end offset of epoch {last_fetched_epoch} on the leader"
                )
            if fetch_offset < log.log_start_offset:
                raise kerr.OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} is below the log start offset {log.log_start_offset}"
                )
            if epoch < last_fetched_epoch or end < fetch_offset:
                return PartitionRead(b"", log.high_watermark, log.log_start_offset, leo, (epoch, end))
        committed = not is_replica and isolation_level == 1
        lso = log.last_stable_offset
        read = log.read_region if zero_copy else log.read
        info = read(
            fetch_offset,
            max_bytes,
            max_offset=None if is_replica else (lso if committed else log.high_watermark),
            min_one_message=min_one_message,
        )
        if is_replica and update_fetch_state:
            self.update_follower_fetch_state(
                replica_id, fetch_offset, follower_log_start_offset, self._clock_ms(), leo, replica_epoch
            )
        aborted: tuple[tuple[int, int], ...] = ()
        if committed and info.num_bytes:
            aborted = tuple((t.producer_id, t.first_offset) for t in log.collect_aborted(fetch_offset, lso))
        return PartitionRead(
            info.records, log.high_watermark, log.log_start_offset, log.log_end_offset, None, lso, aborted, info.region
        )

    def read_replica_candidates(self, fetch_offset: int, now_ms: int) -> list[tuple[int, int, int]]:
        """``(broker id, LEO, ms since last caught up)`` of the followers a consumer at
        ``fetch_offset`` may be sent to (Kafka's ``findPreferredReadReplica``): in the ISR, with
        the offset between their log start offset and their LEO as this leader last saw them."""
        out = []
        for rid in self._isr_state.isr:
            st = self._remote.get(rid)
            if rid == self.local_broker_id or st is None:
                continue
            if st.log_end_offset >= fetch_offset and st.log_start_offset <= fetch_offset:
                out.append((rid, st.log_end_offset, now_ms - st.last_caught_up_time_ms))
        return out

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> None:
        """Record a follower's fetch (Kafka's rule for the caught-up time), then maybe expand the
        ISR and advance the HW.

        The follower was caught up at this fetch when its fetch offset reached the leader's LEO at
        the time of the fetch; when it reached the LEO of its *previous* fetch, it was caught up at
        the time of that previous fetch.
        """
        st = self._remote.get(replica_id)
        if st is None or not self.is_leader:
            return
        if fetch_offset >= leader_end_offset:
            st.last_caught_up_time_ms = max(st.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= st.last_fetch_leader_log_end_offset:
            st.last_caught_up_time_ms = max(st.last_caught_up_time_ms, st.last_fetch_time_ms)
        if log_start_offset >= 0:
            st.log_start_offset = log_start_offset
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_log_end_offset = leader_end_offset
        st.last_fetch_time_ms = fetch_time_ms
        if broker_epoch > 0:
            st.broker_epoch = broker_epoch
        self._maybe_expand_isr(replica_id)
        self.maybe_increment_high_watermark()
        self._listener.on_replica_state_changed(self.tp)

    def _is_follower_in_sync(self, st: ReplicaState) -> bool:
        start = self._leader_epoch_start_offset
        return st.log_end_offset >= self.log.high_watermark and start is not None and st.log_end_offset >= start

    def _maybe_expand_isr(self, replica_id: int) -> None:
        state = self._isr_state
        if state.inflight or replica_id in state.isr or not self.is_leader:
            return
        st = self._remote.get(replica_id)
        if st is None or not self._is_follower_in_sync(st):
            return
        if not self._eligible(replica_id, st.broker_epoch):
            self._log.debug("isr_expansion_ineligible", replica=replica_id)
            return
        proposed = state.isr + (replica_id,)
        new_state = IsrState(state.isr, proposed, proposed)
        self._log.info(
            "proposing_isr_expansion",
            replica=replica_id,
            isr=list(state.isr),
            proposed=list(proposed),
            follower_leo=st.log_end_offset,
            high_watermark=self.log.high_watermark,
        )
        self._isr_state = new_state
        self._submit_alter_partition(new_state)

    def out_of_sync_replicas(self, now_ms: int | None = None) -> list[int]:
        """ISR followers that have not caught up for ``replica.lag.time.max.ms``."""
        now = self._clock_ms() if now_ms is None else now_ms
        leo = self.log.log_end_offset
        out = []
        for rid in self._isr_state.isr:
            if rid == self.local_broker_id:
                continue
            st = self._remote.get(rid)
            if st is None:
                continue
            if st.log_end_offset != leo and now - st.last_caught_up_time_ms > self.replica_lag_time_max_ms:
                out.append(rid)
        return out

    def maybe_shrink_isr(self, now_ms: int | None = None) -> bool:
        """Propose removing lagging followers from the ISR; True when a proposal was made.

        Nothing is proposed while another proposal is in flight. The HW keeps using the committed
        ISR (which still holds the lagging followers) until the controller commits the shrink.
        """
        if not self.is_leader or self._isr_state.inflight:
            return False
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return False
        state = self._isr_state
        proposed = tuple(r for r in state.isr if r not in out)
        new_state = IsrState(state.isr, state.isr, proposed)
        self._log.info(
            "proposing_isr_shrink",
            out_of_sync=out,
            isr=list(state.isr),
            proposed=list(proposed),
            log_end_offset=self.log.log_end_offset,
            high_watermark=self.log.high_watermark,
        )
        self._isr_state = new_state
        self._submit_alter_partition(new_state)
        return True

    def _submit_alter_partition(self, state: IsrState) -> None:
        assert state.proposed_isr is not None
        fut = self._alter.submit(
            self.topic_id, self.partition_id, self._leader_epoch, self._partition_epoch, state.proposed_isr
        )
        fut.add_done_callback(lambda f: self._on_alter_partition_done(state, f))

    def _on_alter_partition_done(self, state: IsrState, fut: asyncio.Future[AlterPartitionResult]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            result = AlterPartitionResult(
                type(exc) if isinstance(exc, kerr.KafkaError) else kerr.UnknownServerError, str(exc)
            )
        else:
            result = fut.result()
        self.handle_alter_partition_result(state, result)

    def handle_alter_partition_result(self, state: IsrState, result: AlterPartitionResult) -> None:
        """Apply the controller's answer to the proposal ``state`` (ignored if superseded)."""
        if self._isr_state is not state or not self.is_leader:
            self._log.debug("ignored_alter_partition_result", reason="superseded")
            return
        err = result.error
        if err is None:
            if result.leader_epoch != self._leader_epoch:
                self._log.info(
                    "ignored_alter_partition_result",
                    reason="stale_leader_epoch",
                    result_leader_epoch=result.leader_epoch,
                )
                return
            if result.partition_epoch < self._partition_epoch:
                self._log.info(
                    "ignored_alter_partition_result",
                    reason="stale_partition_epoch",
                    result_partition_epoch=result.partition_epoch,
                )
                return
            self._isr_state = IsrState.committed(result.isr)
            self._partition_epoch = result.partition_epoch
            self._listener.on_isr_committed(self.tp, state.isr, self._isr_state.isr)
            self._log.info(
                "isr_updated",
                isr=list(result.isr),
                partition_epoch=result.partition_epoch,
                under_min_isr=self.is_under_min_isr(),
            )
            self.maybe_increment_high_watermark()
            # a shrink below min.insync fails the pending acks=all; an expansion may allow more
            self._listener.on_replica_state_changed(self.tp)
            return
        if err in (kerr.OperationNotAttemptedError, kerr.IneligibleReplicaError):
            # the controller says it did not apply it, and the partition epoch is current: revert
            self._isr_state = state.last_committed()
            self._log.info("alter_partition_not_applied", error=err.error_name, message=result.message)
        elif err in (
            kerr.FencedLeaderEpochError,
            kerr.InvalidUpdateVersionError,
            kerr.UnknownTopicOrPartitionError,
            kerr.UnknownTopicIdError,
            kerr.NotLeaderOrFollowerError,
            kerr.NewLeaderElectedError,
        ):
            # our view is stale: keep the proposal pending until the metadata log brings news
            self._log.info("alter_partition_awaiting_metadata", error=err.error_name, message=result.message)
        else:
            self._log.warning("alter_partition_failed_retrying", error=err.error_name, message=result.message)
            asyncio.get_running_loop().call_later(self._alter_retry_ms / 1000, self._retry_alter_partition, state)

    def _retry_alter_partition(self, state: IsrState) -> None:
        if self._isr_state is state and self.is_leader:
            self._submit_alter_partition(state)
