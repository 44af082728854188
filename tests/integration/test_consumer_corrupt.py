"""The consumer and CORRUPT_MESSAGE (issue 12 §1): a fetch that answers CORRUPT_MESSAGE for a
batch on disk must raise a typed error at that offset, as Kafka's FetchCollector does, instead of
backing off and refetching the same bytes forever (the stall the issue describes)."""

from __future__ import annotations

import time

import pytest

from kraftlog.common import errors as kerr

from .test_consumer import TP, cluster, make_consumer, poll_until, write  # noqa: F401 - fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_corrupt_message_from_the_broker_is_raised_at_the_offset(cluster) -> None:  # noqa: F811
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, 3)
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        assert len(poll_until(consumer, 3)) == 3
        write(cluster, "t", 0, 2, start=3)
        # every fetch from offset 3 on meets the corrupt batch (a broker answers the same each time)
        cluster.fetch_errors[TP] = [kerr.CorruptMessageError] * 1000
        deadline = time.monotonic() + 10
        with pytest.raises(kerr.CorruptMessageError) as info:
            while time.monotonic() < deadline:
                consumer.poll(100)
        assert info.value.offset == 3
        assert "fetching offset 3 for topic-partition t-0" in str(info.value)
        assert consumer.position(TP) == 3  # the position stays: the caller may seek past it
        cluster.fetch_errors[TP] = []
        consumer.seek(TP, 4)
        assert [r.offset for r in poll_until(consumer, 1)] == [4]
