"""Dead-letter topics of share groups (KIP-1191): the share-partition leader writes each record
archived by a REJECT or by reaching the delivery count limit to the group's dead-letter topic.

A group names its topic with the GROUP config ``errors.deadletterqueue.topic.name`` (blank: none);
with ``errors.deadletterqueue.copy.record.enable`` the DLQ record carries the original key and
value, else only the context headers (Kafka's default). Each DLQ record's headers are Kafka's
(`ShareGroupDLQStateManager`): ``__dlq.errors.topic``, ``__dlq.errors.partition``,
``__dlq.errors.offset``, ``__dlq.errors.group``, ``__dlq.errors.delivery.count`` and
``__dlq.errors.message`` (the reason: "Offset rejected by client." or "Offset delivery count
exceeded the threshold."), every value a UTF-8 string. A record of source partition ``p`` goes to
partition ``p % partitions`` of the DLQ topic, with the time of the write as its timestamp.

What may be used as a DLQ topic (Kafka's checks, made at each write since the configs are
dynamic): its name does not start with ``__`` and starts with the broker's
``errors.deadletterqueue.topic.name.prefix`` (``dlq.``; blank: any name); an existing topic must
have ``errors.deadletterqueue.group.enable=true``; a missing one is created (broker defaults, with
``errors.deadletterqueue.group.enable=true`` and CreateTime timestamps) when the broker's
``errors.deadletterqueue.auto.create.topics.enable`` is on (off by default, as in Kafka).

Ordering rules (why nothing lands in the DLQ twice):
- the share partition archives the records in memory first (terminal: no fetch, lock expiry or
  acknowledgement can reach them again), under the share partition's lock;
- then the DLQ records are written with acks=all and the write is awaited (bounded by
  ``timeout_ms``) before the archive is written to the share coordinator, and only then is the
  acknowledgement answered. Once the coordinator holds ARCHIVED, no leader delivers or archives
  the records again, so no second DLQ copy is made. The one window left is a leader that dies
  after the DLQ write and before the coordinator write: the new leader finds the records
  AVAILABLE (or ACQUIRED, given back) and a second REJECT would write them again, as Kafka's own
  resume of ARCHIVING records would (at least once across a leader crash, exactly once otherwise);
- a DLQ write that cannot be made (no such topic and no auto-creation, a name the checks refuse,
  no leader, a timeout, a refused produce) is logged and the records are archived anyway, as
  Kafka's ``SharePartition`` archives after the DLQ future completes either way: a record that
  cannot be dead-lettered must not hold the share-partition start offset for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

import structlog

from kraftlog.broker.share._share_types import ArchivedRecord, ArchiveReason
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatchBuilder, iter_batches
from kraftlog.metadata_log import ConfigResourceType
from kraftlog.proto import broker_pb2

__all__ = [
    "DeadLetterWriter",
    "DlqTarget",
    "HEADER_TOPIC",
    "HEADER_PARTITION",
    "HEADER_OFFSET",
    "HEADER_GROUP",
    "HEADER_DELIVERY_COUNT",
    "HEADER_MESSAGE",
    "dlq_headers",
    "dlq_topic_problem",
    "dlq_payload",
    "originals_reader",
    "broker_append",
]

_log = structlog.get_logger(__name__)

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

_MESSAGES = {
    ArchiveReason.REJECTED: "Offset rejected by client.",
    ArchiveReason.DELIVERY_LIMIT: "Offset delivery count exceeded the threshold.",
}

#: group id -> that group's own configs (the GROUP resource's stored values)
GroupConfigs = Callable[[str], Mapping[str, str]]
#: (leader broker id, topic, partition, one record batch) -> None once written, else the error
Append = Callable[[int, str, int, bytes], Awaitable[type[kerr.KafkaError] | None]]


class DlqTarget(NamedTuple):
    """Where one group's DLQ records go."""

    topic: str
    copy_record: bool


def dlq_headers(group_id: str, topic: str, partition: int, rec: ArchivedRecord) -> list[tuple[str, bytes]]:
    """The context headers of one DLQ record, as Kafka writes them."""
    return [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(rec.offset).encode()),
        (HEADER_GROUP, group_id.encode()),
        (HEADER_DELIVERY_COUNT, str(rec.delivery_count).encode()),
        (HEADER_MESSAGE, _MESSAGES[rec.reason].encode()),
    ]


def dlq_topic_problem(name: str, prefix: str, exists: bool, enabled: bool, auto_create: bool) -> str | None:
    """Why ``name`` cannot take a group's DLQ records now (None: it can): Kafka's checks, in
    Kafka's order (``ShareGroupDLQStateManager.validateDlqTopic``)."""
    if not name:
        return "no DLQ topic is configured"
    if name.startswith("__"):
        return f"DLQ topic {name} cannot start with __"
    if exists and not enabled:
        return f"topic {name} does not have errors.deadletterqueue.group.enable=true"
    if prefix and not name.startswith(prefix):
        return f"DLQ topic {name} does not start with errors.deadletterqueue.topic.name.prefix {prefix!r}"
    if not exists and not auto_create:
        return f"DLQ topic {name} does not exist and errors.deadletterqueue.auto.create.topics.enable is false"
    return None


def dlq_payload(
    group_id: str,
    topic: str,
    partition: int,
    records: Sequence[ArchivedRecord],
    now_ms: int,
    originals: Mapping[int, tuple[bytes | None, bytes | None]] | None = None,
) -> bytes:
    """One record batch holding a DLQ record per archived record, in offset order; with
    ``originals`` (offset -> key, value) the original key and value are copied."""
    builder = RecordBatchBuilder()
    for rec in sorted(records):
        key, value = (originals or {}).get(rec.offset, (None, None))
        builder.append(now_ms, key, value, dlq_headers(group_id, topic, partition, rec))
    return builder.build()


class DeadLetterWriter:
    """Writes a share partition's archived records to its group's DLQ topic (see the module
    docstring); never raises: a write that cannot be made is logged and given up."""

    def __init__(
        self,
        *,
        group_configs: GroupConfigs,
        image: Callable[[], Any],
        append: Append,
        create_topic: Callable[[str], Awaitable[None]],
        broker_config: Callable[[str], Any],
        clock_ms: Callable[[], int],
        timeout_ms: int = 5_000,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._group_configs = group_configs
        self._image = image
        self._append = append
        self._create_topic = create_topic
        self._broker = broker_config
        self._clock_ms = clock_ms
        self.timeout_ms = timeout_ms
        self._sleep = sleep
        #: DLQ records written, per group (the share-group DLQ produce metric)
        self.written: dict[str, int] = {}
        #: archived records that could not be written, per group
        self.failed: dict[str, int] = {}

    def target(self, group_id: str) -> DlqTarget | None:
        """The group's DLQ topic, when it names one."""
        own = self._group_configs(group_id)
        name = str(own.get("errors.deadletterqueue.topic.name", "")).strip()
        if not name:
            return None
        copy = str(own.get("errors.deadletterqueue.copy.record.enable", "false")).strip().lower() == "true"
        return DlqTarget(name, copy)

    async def write(
        self,
        group_id: str,
        topic: str,
        partition: int,
        records: Sequence[ArchivedRecord],
        read_originals: Callable[[Sequence[int]], Mapping[int, tuple[bytes | None, bytes | None]]] | None = None,
    ) -> bool:
        """Write ``records`` (archived from ``topic``-``partition`` by ``group_id``) to the group's
        DLQ topic; True once replicated there, False when there is none or the write failed."""
        if not records:
            return False
        target = self.target(group_id)
        if target is None:
            return False
        log = _log.bind(group_id=group_id, topic=topic, partition=partition, dlq_topic=target.topic)
        try:
            originals = None
            if target.copy_record and read_originals is not None:
                originals = read_originals([r.offset for r in records])
            payload = dlq_payload(group_id, topic, partition, records, self._clock_ms(), originals)
            error = await asyncio.wait_for(self._write(target.topic, partition, payload), self.timeout_ms / 1000.0)
        except TimeoutError:
            error = kerr.RequestTimedOutError(f"no DLQ write within {self.timeout_ms} ms")
        except Exception as err:  # noqa: BLE001 - the records are archived whatever happens here
            error = kerr.UnknownServerError(repr(err))
        if error is not None:
            self.failed[group_id] = self.failed.get(group_id, 0) + len(records)
            log.warning("share_dlq_write_failed", records=len(records), error=str(error))
            return False
        self.written[group_id] = self.written.get(group_id, 0) + len(records)
        log.info("share_dlq_written", records=len(records), offsets=[r.offset for r in records])
        return True

    async def _write(self, name: str, source_partition: int, payload: bytes) -> kerr.KafkaError | None:
        """Check the topic, create it when missing, wait for a leader, append."""
        created = False
        while True:
            t = self._image().topics.get_by_name(name)
            enabled = t is not None and self._topic_enabled(name)
            problem = dlq_topic_problem(
                name,
                str(self._broker("errors.deadletterqueue.topic.name.prefix") or ""),
                t is not None,
                enabled or created,
                bool(self._broker("errors.deadletterqueue.auto.create.topics.enable")),
            )
            if problem is not None:
                return kerr.InvalidConfigError(problem)
            if t is None:
                if not created:
                    await self._create_topic(name)
                    created = True
                await self._sleep(0.05)  # the topic reaches this broker's image
                continue
            count = len(t.partitions)
            p = t.partitions.get(source_partition % count) if count else None
            if p is None or p.leader < 0:
                await self._sleep(0.05)  # a new topic's partitions get leaders
                continue
            error = await self._append(p.leader, name, source_partition % count, payload)
            return None if error is None else error(f"DLQ produce to {name} refused")

    def _topic_enabled(self, name: str) -> bool:
        values = self._image().configs.config(ConfigResourceType.TOPIC, name)
        return str(values.get("errors.deadletterqueue.group.enable", "false")).strip().lower() == "true"


def originals_reader(
    read: Callable[[int, int], bytes], max_bytes: int = 1 << 20
) -> Callable[[Sequence[int]], dict[int, tuple[bytes | None, bytes | None]]]:
    """(offset -> key, value) of the given offsets, from ``read(offset, max_bytes)`` (the log's
    record batches from an offset on)."""

    def originals(offsets: Sequence[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
        out: dict[int, tuple[bytes | None, bytes | None]] = {}
        wanted = set(offsets)
        for offset in sorted(wanted):
            if offset in out:
                continue
            for _pos, batch in iter_batches(read(offset, max_bytes)):
                for rec in batch.records():
                    if rec.offset in wanted:
                        out[rec.offset] = (rec.key, rec.value)
                if batch.last_offset >= max(wanted):
                    break
        return out

    return originals


def broker_append(
    broker_id: int,
    replicas: Callable[[], Any],
    peer: Callable[[str], Any],
    address_of: Callable[[int], str | None],
    timeout_ms: int,
) -> Append:
    """How a broker appends a DLQ batch: with acks=all through its own replica manager when it
    leads the DLQ partition (the path its coordinators write by), else as a Produce (acks=all)
    on the leader's BrokerService over gRPC (``peer``: the stub of an address)."""

    async def append(leader: int, topic: str, partition: int, payload: bytes) -> type[kerr.KafkaError] | None:
        if leader == broker_id:
            error: type[kerr.KafkaError] | None = await replicas().append_internal(
                topic, partition, payload, timeout_ms
            )
            return error
        address = address_of(leader)
        if address is None:
            return kerr.LeaderNotAvailableError
        req = broker_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=timeout_ms,
            topics=[
                broker_pb2.ProduceRequest.TopicData(
                    name=topic, partitions=[broker_pb2.ProduceRequest.PartitionData(index=partition, records=payload)]
                )
            ],
        )
        resp = await peer(address).Produce(req, timeout=timeout_ms / 1000.0 + 5.0)
        code = resp.error.code or next((p.error.code for t in resp.topics for p in t.partitions), 0)
        return None if code == 0 else kerr.error_for_code(code)

    return append
