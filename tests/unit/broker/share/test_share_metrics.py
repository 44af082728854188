"""Share groups' lag metrics on the share-partition leader (issue 27): records available (in flight
and past the window up to the high watermark), acquired, archived by REJECT or the delivery limit,
KIP-1226's lag, and the DLQ records written, as the Prometheus collector exports them."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from kraftlog.broker.share import AcknowledgementBatch, ShareGroupMetrics
from tests.unit.broker.share.test_share_dlq import TID, acquire, make


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name.startswith("kraftlog_share_group")
    }


def test_the_records_of_a_share_partition_by_state_and_its_lag() -> None:
    async def scenario() -> dict[Any, float]:
        manager, log, _cluster, _events, _now = make()
        log.append(6)
        await acquire(manager)  # 0-5 acquired by a
        await manager.acknowledge(
            "g",
            "a",
            TID,
            "t",
            0,
            [AcknowledgementBatch(0, 0, (1,)), AcknowledgementBatch(1, 1, (3,)), AcknowledgementBatch(3, 3, (2,))],
        )
        log.append(4)  # 6-9: past the window, not delivered yet
        registry = CollectorRegistry()
        registry.register(ShareGroupMetrics(manager))
        return samples(registry)

    got = asyncio.run(scenario())
    part = (("group", "g"), ("partition", "0"), ("topic", "t"))
    assert got[("kraftlog_share_group_records_available", part)] == 1 + 4  # offset 3 released, 6-9 new
    assert got[("kraftlog_share_group_records_acquired", part)] == 3  # 2, 4, 5
    assert got[("kraftlog_share_group_records_archived_total", part)] == 1  # offset 1 rejected
    # high watermark 10, start offset 2 (0 accepted, 1 archived), nothing done in the window yet
    assert got[("kraftlog_share_group_lag", part)] == 8
    assert got[("kraftlog_share_group_dlq_records_total", (("group", "g"),))] == 1
    assert ("kraftlog_share_group_dlq_failed_total", (("group", "g"),)) not in got
