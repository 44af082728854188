"""Consumer lag as Prometheus metrics on each group coordinator (issue 14).

For every group a broker coordinates and every partition it committed an offset for:
``kraftlog_consumer_group_committed_offset`` and ``kraftlog_consumer_group_lag`` (log end offset,
as a consumer sees it — the high watermark — minus the committed offset), labelled ``group``,
``topic``, ``partition``. The log ends come from the partitions' leaders (ListOffsets latest),
refreshed every ``REFRESH_S`` by one task, so a scrape never waits on another broker; a partition
whose leader did not answer keeps its last known end, and one never answered has no lag sample.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import structlog
from prometheus_client.core import GaugeMetricFamily, Metric

from kraftlog.broker.groups._group_coordinator import GroupCoordinator
from kraftlog.proto import broker_pb2

__all__ = ["GroupLag", "REFRESH_S", "LatestOffsets", "latest_offsets"]

REFRESH_S = 5.0
_LATEST = -1

_log = structlog.get_logger(__name__)


def _latest(partition: int) -> broker_pb2.ListOffsetsRequest.Partition:
    return broker_pb2.ListOffsetsRequest.Partition(
        partition_index=partition, current_leader_epoch=-1, timestamp=_LATEST
    )


ListOffsetsOn = Callable[[int, broker_pb2.ListOffsetsRequest], Awaitable[broker_pb2.ListOffsetsResponse]]

#: the log ends (high watermarks, ListOffsets latest) of partitions, where their leaders answered
LatestOffsets = Callable[[Iterable[tuple[str, int]]], Awaitable[dict[tuple[str, int], int]]]


async def latest_offsets(
    parts: Iterable[tuple[str, int]], leader_of: Callable[[str, int], int], list_offsets: ListOffsetsOn
) -> dict[tuple[str, int], int]:
    """The log end (high watermark) of each partition from its leader, one ListOffsets per
    leader; a partition without a leader, or whose leader failed or refused, is left out."""
    by_leader: dict[int, dict[str, set[int]]] = {}
    for topic, partition in parts:
        leader = leader_of(topic, partition)
        if leader >= 0:
            by_leader.setdefault(leader, {}).setdefault(topic, set()).add(partition)
    ends: dict[tuple[str, int], int] = {}
    for leader, topics in sorted(by_leader.items()):
        request = broker_pb2.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                broker_pb2.ListOffsetsRequest.Topic(name=t, partitions=[_latest(p) for p in sorted(ps)])
                for t, ps in sorted(topics.items())
            ],
        )
        try:
            response = await list_offsets(leader, request)
        except Exception as err:  # noqa: BLE001 - that leader's partitions stay unknown
            _log.info("list_offsets_latest_failed", leader=leader, error=str(err))
            continue
        for t in response.topics:
            for p in t.partitions:
                if p.error.code == 0 and p.offset >= 0:
                    ends[(t.name, p.partition_index)] = p.offset
    return ends


class GroupLag:
    """The refresh task and the Prometheus collector. ``list_offsets(node_id, request)`` asks a
    broker (this one included) for log ends; ``leader_of(topic, partition)`` reads the image."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        leader_of: Callable[[str, int], int],
        list_offsets: ListOffsetsOn,
    ) -> None:
        self._coordinator = coordinator
        self._leader_of = leader_of
        self._list_offsets = list_offsets
        self._ends: dict[tuple[str, int], int] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="group-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _committed(self) -> Iterator[tuple[str, str, int, int]]:
        for shard in self._coordinator.shards():
            for group, offsets in list(shard.offsets.items()):
                for (topic, partition), value in list(offsets.items()):
                    yield group, topic, partition, value.offset

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as err:  # noqa: BLE001 - a failed round keeps the last figures
                _log.info("group_lag_refresh_failed", error=str(err))
            await asyncio.sleep(REFRESH_S)

    async def refresh(self) -> None:
        """Ask each partition's leader for its log end (one ListOffsets per leader)."""
        parts = {(topic, partition) for _group, topic, partition, _offset in self._committed()}
        self._ends.update(await latest_offsets(parts, self._leader_of, self._list_offsets))

    def collect(self) -> Iterator[Metric]:
        committed = GaugeMetricFamily(
            "kraftlog_consumer_group_committed_offset",
            "Committed offset of a group for a partition (on the group's coordinator).",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kraftlog_consumer_group_lag",
            "Log end offset (high watermark) minus the group's committed offset, per partition.",
            labels=["group", "topic", "partition"],
        )
        for group, topic, partition, offset in self._committed():
            labels = [group, topic, str(partition)]
            committed.add_metric(labels, offset)
            end = self._ends.get((topic, partition))
            if end is not None and offset >= 0:
                lag.add_metric(labels, max(0, end - offset))
        yield committed
        yield lag

    def describe(self) -> Iterator[Any]:
        return iter(())
