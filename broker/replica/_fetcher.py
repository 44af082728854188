"""Follower replication: one fetcher task per source broker (Kafka's ``ReplicaFetcherThread``).

`ReplicaFetcherManager` keeps one `ReplicaFetcher` per leader (broker id + address); each batches
every partition this broker follows from that leader into one long-polling Fetch request, sent
through the injected ``fetch(address, FetchRequest) -> FetchResponse`` coroutine.

Per partition, the follower sends ``fetch_offset`` = its LEO, ``last_fetched_epoch`` = the latest
epoch in its log and ``current_leader_epoch`` = the epoch the metadata names. On the answer:

- records are appended unchanged (`Log.append_as_follower`), then the follower's HW becomes
  min(leader HW, own LEO) and its log start offset follows the leader's;
- a ``diverging_epoch`` (epoch E, end offset O) means the logs departed: the follower truncates to
  min(O, its own end offset for E) when it knows E; when it only knows an older epoch, it truncates
  to its own end offset for the largest epoch <= E and refetches, so the leader checks again
  (KIP-320). Truncation always happens before the next append;
- OFFSET_OUT_OF_RANGE: behind the leader's log start offset -> truncate fully and start there;
  otherwise ask OffsetForLeaderEpoch for its latest epoch and truncate as above (the leader's log
  is shorter: an unclean election);
- FENCED_LEADER_EPOCH (the metadata moved on): the partition waits for the next metadata update;
  NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH (the leader has not applied the metadata that
  names it yet) back the partition off briefly (``leader_not_ready_backoff_ms``, 50 ms, so a
  failover does not stall for a whole back-off); other errors back it off for
  ``replica.fetch.backoff.ms``; a failed request backs off the whole fetcher.

An answer is applied only if the partition is still fetched from this leader, in the same leader
epoch, from the same offset as in the request; otherwise it is dropped (the partition moved).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import structlog

from kraftlog.broker.replica._partition import Partition, TopicPartition
from kraftlog.broker.replica._replica_manager import FollowTarget, ReplicaChanges, ReplicaManager
from kraftlog.common import errors as kerr
from kraftlog.common.security import spawn
from kraftlog.proto import broker_pb2

__all__ = ["ReplicaFetcher", "ReplicaFetcherManager", "FetchFn", "OffsetForLeaderEpochFn"]

_log = structlog.get_logger(__name__)

FetchFn = Callable[[str, broker_pb2.FetchRequest], Awaitable[broker_pb2.FetchResponse]]
OffsetForLeaderEpochFn = Callable[
    [str, broker_pb2.OffsetForLeaderEpochRequest], Awaitable[broker_pb2.OffsetForLeaderEpochResponse]
]

_CODE_NONE = 0
_OFFSET_OUT_OF_RANGE = kerr.OffsetOutOfRangeError.error_code
_FENCED_LEADER_EPOCH = kerr.FencedLeaderEpochError.error_code
_LEADER_NOT_READY = frozenset({kerr.UnknownLeaderEpochError.error_code, kerr.NotLeaderOrFollowerError.error_code})


@dataclass(slots=True)
class _PartitionFetchState:
    target: FollowTarget
    partition: Partition
    delayed_until: float = 0.0  # loop time
    fenced: bool = False  # wait for new metadata


class ReplicaFetcher:
    """Fetches every partition followed from one leader, in one task."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, address: str) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.address = address
        self.partitions: dict[TopicPartition, _PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._log = _log.bind(node_id=manager.node_id, leader=leader_id, address=address)
        self.rounds = 0

    def start(self) -> None:
        if self._task is None:
            self._task = spawn(self._run(), name=f"replica-fetcher-{self.manager.node_id}-from-{self.leader_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as err:
                self._log.error("fetcher_failed", error=repr(err))

    def add(self, target: FollowTarget, partition: Partition) -> None:
        old = self.partitions.get(target.tp)
        if old is not None and old.target == target and old.partition is partition and not old.fenced:
            return
        self.partitions[target.tp] = _PartitionFetchState(target, partition)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> bool:
        return self.partitions.pop(tp, None) is not None

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        m = self.manager
        while True:
            now = loop.time()
            req, sent = self._build_request(now)
            if not sent:
                delays = [
                    s.delayed_until - now for s in self.partitions.values() if not s.fenced and s.delayed_until > now
                ]
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout=min(delays) if delays else None)
                except TimeoutError:
                    pass
                continue
            self.rounds += 1
            try:
                resp = await m.fetch_fn(self.address, req)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self._log.warning("fetch_failed", error=repr(err), partitions=len(sent))
                self._delay(sent, m.backoff_ms)
                continue
            if resp.error.code != _CODE_NONE:
                self._log.warning("fetch_error", error=resp.error.name, message=resp.error.message)
                self._delay(sent, m.backoff_ms)
                continue
            try:
                await self._process_response(sent, resp)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # never let one bad answer kill replication
                self._log.error("fetch_response_failed", error=repr(err), exc_info=err)
                self._delay(sent, m.backoff_ms)

    def _delay(self, sent: dict[TopicPartition, tuple[_PartitionFetchState, int]], backoff_ms: int) -> None:
        until = asyncio.get_running_loop().time() + backoff_ms / 1000
        for tp, (state, _offset) in sent.items():
            if self.partitions.get(tp) is state:
                state.delayed_until = until

    def _build_request(
        self, now: float
    ) -> tuple[broker_pb2.FetchRequest, dict[TopicPartition, tuple[_PartitionFetchState, int]]]:
        m = self.manager
        req = broker_pb2.FetchRequest(
            replica_id=m.node_id,
            replica_epoch=m.broker_epoch(),
            max_wait_ms=m.max_wait_ms,
            min_bytes=m.min_bytes,
            max_bytes=m.response_max_bytes,
            isolation_level=0,
        )
        sent: dict[TopicPartition, tuple[_PartitionFetchState, int]] = {}
        topics: dict[str, broker_pb2.FetchRequest.FetchTopic] = {}
        for tp, state in self.partitions.items():
            if state.fenced or state.delayed_until > now:
                continue
            log = state.partition.log
            ft = topics.get(tp[0])
            if ft is None:
                ft = req.topics.add(topic=tp[0])
                topics[tp[0]] = ft
            leo = log.log_end_offset
            ft.partitions.add(
                partition=tp[1],
                current_leader_epoch=state.target.leader_epoch,
                fetch_offset=leo,
                last_fetched_epoch=log.latest_epoch,
                log_start_offset=log.log_start_offset,
                partition_max_bytes=m.partition_max_bytes,
            )
            sent[tp] = (state, leo)
        return req, sent

    def _current(self, tp: TopicPartition, state: _PartitionFetchState, offset: int) -> bool:
        """The answer still applies: same state object (leader, epoch), same partition, same LEO."""
        rm = self.manager.replica_manager
        return (
            self.partitions.get(tp) is state
            and rm.get_partition(*tp) is state.partition
            and not state.partition.stopped
            and state.partition.log.log_end_offset == offset
        )

    async def _process_response(
        self, sent: dict[TopicPartition, tuple[_PartitionFetchState, int]], resp: broker_pb2.FetchResponse
    ) -> None:
        m = self.manager
        for tr in resp.responses:
            for pd in tr.partitions:
                tp = (tr.topic, pd.partition_index)
                entry = sent.get(tp)
                if entry is None:
                    continue
                state, offset = entry
                if not self._current(tp, state, offset):
                    continue
                part = state.partition
                code = pd.error.code
                if code == _CODE_NONE:
                    try:
                        if pd.HasField("diverging_epoch") and (
                            pd.diverging_epoch.epoch >= 0 or pd.diverging_epoch.end_offset >= 0
                        ):
                            if not self._truncate_on_divergence(
                                part, pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset
                            ):
                                # no progress possible now: never spin on the same answer
                                self._delay({tp: entry}, m.backoff_ms)
                            continue
                        if pd.records:
                            # compressed or large: CRC and framing checked on the pool, off the loop
                            checked = await m.replica_manager.produce_preparation.check_replicated(pd.records)
                            if checked and not self._current(tp, state, offset):
                                continue  # the partition moved on while it was checked
                            part.append_records_to_follower(pd.records, checked=checked)
                            m.replica_manager.metrics.record_replication_in(len(pd.records))
                        part.update_follower_high_watermark(pd.high_watermark, pd.log_start_offset)
                    except Exception as err:
                        self._log.warning("follower_append_failed", topic=tp[0], partition=tp[1], error=repr(err))
                        self._delay({tp: entry}, m.backoff_ms)
                elif code == _OFFSET_OUT_OF_RANGE:
                    try:
                        await self._handle_out_of_range(tp, state, offset, pd)
                    except asyncio.CancelledError:
                        raise
                    except Exception as err:
                        self._log.warning("out_of_range_handling_failed", topic=tp[0], partition=tp[1], error=repr(err))
                        self._delay({tp: entry}, m.backoff_ms)
                elif code == _FENCED_LEADER_EPOCH:
                    self._log.info(
                        "partition_fenced",
                        topic=tp[0],
                        partition=tp[1],
                        leader_epoch=state.target.leader_epoch,
                        message=pd.error.message,
                    )
                    state.fenced = True
                else:
                    self._log.info(
                        "partition_fetch_error",
                        topic=tp[0],
                        partition=tp[1],
                        error=pd.error.name,
                        message=pd.error.message,
                    )
                    # the leader has not applied the metadata naming it yet: it will, shortly
                    not_ready = code in _LEADER_NOT_READY
                    self._delay({tp: entry}, m.leader_not_ready_backoff_ms if not_ready else m.backoff_ms)

    # ------------------------------------------------------------------ truncation

    def _truncate_on_divergence(self, part: Partition, leader_epoch: int, leader_end_offset: int) -> bool:
        """Kafka's rule: truncate to min(leader's end offset, own end offset) for the epoch the
        leader named when this log knows that epoch; else to the own end offset of the largest
        known epoch below it (and let the leader check again on the next fetch). Returns whether
        the log or its epoch cache changed (the next fetch then asks something new)."""
        log = part.log
        leo = log.log_end_offset
        before = (leo, log.latest_epoch)
        if leader_epoch < 0 or leader_end_offset < 0:
            target = min(part.high_watermark, leo)
        else:
            own_epoch, own_end = log.end_offset_for_epoch(leader_epoch)
            if own_epoch < 0 or own_end < 0:
                target = min(leader_end_offset, leo)
            elif own_epoch != leader_epoch:
                target = min(own_end, leo)
            else:
                target = min(own_end, leader_end_offset, leo)
        self._log.info(
            "diverging_epoch",
            topic=part.topic,
            partition=part.partition_id,
            leader_epoch=leader_epoch,
            leader_end_offset=leader_end_offset,
            log_end_offset=leo,
            truncate_to=target,
        )
        part.truncate_to(target)
        return (log.log_end_offset, log.latest_epoch) != before

    async def _handle_out_of_range(
        self, tp: TopicPartition, state: _PartitionFetchState, offset: int, pd: broker_pb2.FetchResponse.PartitionData
    ) -> None:
        part = state.partition
        leo = part.log.log_end_offset
        leader_start = pd.log_start_offset
        if leader_start >= 0 and leo < leader_start:
            self._log.info(
                "behind_leader_log_start",
                topic=tp[0],
                partition=tp[1],
                log_end_offset=leo,
                leader_log_start_offset=leader_start,
            )
            part.truncate_fully_and_start_at(leader_start)
            return
        epoch = part.log.latest_epoch
        if epoch < 0:
            # nothing to compare with: start over at the leader's log start
            if leader_start >= 0 and leo != leader_start:
                part.truncate_fully_and_start_at(leader_start)
            else:
                self._delay({tp: (state, offset)}, self.manager.backoff_ms)
            return
        req = broker_pb2.OffsetForLeaderEpochRequest(
            replica_id=self.manager.node_id,
            topics=[
                broker_pb2.OffsetForLeaderEpochRequest.Topic(
                    topic=tp[0],
                    partitions=[
                        broker_pb2.OffsetForLeaderEpochRequest.Partition(
                            partition=tp[1], current_leader_epoch=state.target.leader_epoch, leader_epoch=epoch
                        )
                    ],
                )
            ],
        )
        resp = await self.manager.offset_for_leader_epoch_fn(self.address, req)
        if not self._current(tp, state, offset):
            return
        for t in resp.topics:
            for p in t.partitions:
                if t.topic != tp[0] or p.partition != tp[1]:
                    continue
                if p.error.code != _CODE_NONE:
                    self._log.info("offset_for_leader_epoch_error", topic=tp[0], partition=tp[1], error=p.error.name)
                    self._delay({tp: (state, offset)}, self.manager.backoff_ms)
                    return
                if not self._truncate_on_divergence(part, p.leader_epoch, p.end_offset):
                    # nothing to truncate: the leader's answer will change (back off, retry)
                    self._delay({tp: (state, offset)}, self.manager.backoff_ms)
                return
        self._delay({tp: (state, offset)}, self.manager.backoff_ms)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader; partitions move as the metadata changes.

    ``fetch`` and ``offset_for_leader_epoch`` are the transport (the server wires gRPC clients;
    tests wire other replica managers directly). ``broker_epoch()`` is sent in every fetch.
    """

    def __init__(
        self,
        replica_manager: ReplicaManager,
        *,
        fetch: FetchFn,
        offset_for_leader_epoch: OffsetForLeaderEpochFn,
        broker_epoch: Callable[[], int],
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        partition_max_bytes: int = 1_048_576,
        response_max_bytes: int = 10_485_760,
        backoff_ms: int = 1000,
        leader_not_ready_backoff_ms: int = 50,
    ) -> None:
        self.replica_manager = replica_manager
        self.node_id = replica_manager.node_id
        self.fetch_fn = fetch
        self.offset_for_leader_epoch_fn = offset_for_leader_epoch
        self.broker_epoch = broker_epoch
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.partition_max_bytes = partition_max_bytes
        self.response_max_bytes = response_max_bytes
        self.backoff_ms = backoff_ms
        self.leader_not_ready_backoff_ms = min(leader_not_ready_backoff_ms, backoff_ms)
        self.fetchers: dict[tuple[int, str], ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False
        self._log = _log.bind(node_id=self.node_id)

    @classmethod
    def from_config(
        cls,
        replica_manager: ReplicaManager,
        *,
        fetch: FetchFn,
        offset_for_leader_epoch: OffsetForLeaderEpochFn,
        broker_epoch: Callable[[], int],
    ) -> ReplicaFetcherManager:
        """Settings from ``replica.fetch.*`` of the replica manager's node config."""
        cfg = replica_manager.config
        return cls(
            replica_manager,
            fetch=fetch,
            offset_for_leader_epoch=offset_for_leader_epoch,
            broker_epoch=broker_epoch,
            max_wait_ms=int(cfg["replica.fetch.wait.max.ms"]),
            min_bytes=int(cfg["replica.fetch.min.bytes"]),
            partition_max_bytes=int(cfg["replica.fetch.max.bytes"]),
            response_max_bytes=int(cfg["replica.fetch.response.max.bytes"]),
            backoff_ms=int(cfg["replica.fetch.backoff.ms"]),
        )

    def apply_changes(self, changes: ReplicaChanges) -> None:
        """Drop partitions that are led here or no longer followed; (re)add the new targets."""
        self.remove_partitions(changes.not_fetching)
        self.add_partitions(changes.followers)

    def add_partitions(self, targets: Iterable[FollowTarget]) -> None:
        if self._closed:
            return
        for target in targets:
            part = self.replica_manager.get_partition(target.topic, target.partition)
            if part is None:
                continue
            key = (target.leader_id, target.address)
            for k, f in list(self.fetchers.items()):
                if k != key and f.remove(target.tp):
                    self._maybe_stop_idle(k)
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(self, target.leader_id, target.address)
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.add(target, part)
            self._log.debug(
                "fetching",
                topic=target.topic,
                partition=target.partition,
                leader=target.leader_id,
                leader_epoch=target.leader_epoch,
            )

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            for key, f in list(self.fetchers.items()):
                if f.remove(tp):
                    self._maybe_stop_idle(key)

    def _maybe_stop_idle(self, key: tuple[int, str]) -> None:
        f = self.fetchers.get(key)
        if f is not None and not f.partitions:
            del self.fetchers[key]
            task = spawn(f.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def fetched_partitions(self) -> dict[TopicPartition, int]:
        """partition -> the leader it is fetched from."""
        return {tp: f.leader_id for f in self.fetchers.values() for tp in f.partitions}

    async def shutdown(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers), *self._stopping, return_exceptions=True)
