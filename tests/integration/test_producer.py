"""Tests of `client.Producer` against an in-process fake cluster (no real broker).

`FakeCluster` (also used by ``test_consumer.py`` and ``test_cli_produce_consume.py``) runs one
`grpc.server` per fake broker on 127.0.0.1, each implementing BrokerService's Metadata, Produce,
Fetch and ListOffsets over shared in-memory partition logs (offsets assigned with `storage`'s batch
code, so what the client sends is checked by an independent decoder). Hooks inject errors, delays,
stale metadata and leader moves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from concurrent import futures as _futures
from typing import Any

import grpc
import pytest

from kraftlog.client import (
    AsyncProducer,
    Producer,
    ProducerClosedError,
    RecordMetadata,
    partition_for_key,
    producer_config_from_properties,
)
from kraftlog.common import errors as kerr
from kraftlog.common.records import RecordBatch, rewrite_offset_and_epoch
from kraftlog.proto import broker_pb2, broker_pb2_grpc, errors_pb2
from kraftlog.storage._errors import CorruptRecordError, InvalidRecordError, StorageError
from kraftlog.storage._record_set import validate_record_set

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

B = broker_pb2


# =========================================================================== the fake cluster


def _err(cls: type[kerr.KafkaError] | None, message: str = "") -> errors_pb2.Error:
    if cls is None:
        return errors_pb2.Error(code=0, name="NONE")
    return errors_pb2.Error(code=cls.error_code, name=cls.error_name, message=message)


class FakePartition:
    def __init__(self, topic: str, index: int, leader: int, replicas: list[int]) -> None:
        self.topic = topic
        self.index = index
        self.leader = leader
        self.epoch = 0
        self.replicas = replicas
        self.batches: list[tuple[int, bytes]] = []  # (base offset, batch bytes)
        self.log_start = 0
        self.next_offset = 0
        self.aborted: list[tuple[int, int]] = []  # (producer id, first offset)
        self.log_append_time = False
        self.epochs: list[tuple[int, int]] = [(0, 0)]  # leader-epoch cache: (epoch, start offset)

    def truncate(self, offset: int) -> None:
        """Drop every batch from ``offset`` on (a batch boundary), as an unclean election does."""
        self.batches = [(b, raw) for b, raw in self.batches if b < offset]
        self.next_offset = offset
        self.epochs = [(e, start) for e, start in self.epochs if start < offset] or [(self.epoch, offset)]

    def end_offset_for(self, requested: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, by Kafka's rule: the largest epoch <= ``requested`` and the start
        of the next epoch (the log end for the latest)."""
        if requested < 0 or not self.epochs or requested < self.epochs[0][0]:
            return -1, -1
        floor = max(e for e, _s in self.epochs if e <= requested)
        later = [start for e, start in self.epochs if e > requested]
        return floor, (later[0] if later else self.next_offset)

    def append(self, payload: bytes) -> tuple[int, int]:
        """Assign offsets to the batches of ``payload``; returns (base offset, append time)."""
        headers = validate_record_set(payload, from_client=False)
        buf = bytearray(payload)
        base = self.next_offset
        now = int(time.time() * 1000)
        for h in headers:
            rewrite_offset_and_epoch(buf, h.position, self.next_offset, self.epoch)
            if self.log_append_time:
                from kraftlog.common.records import set_log_append_time

                set_log_append_time(buf, h.position, h.size, now)
            self.batches.append((self.next_offset, bytes(buf[h.position : h.position + h.size])))
            self.next_offset += h.last_offset_delta + 1
        return base, (now if self.log_append_time else -1)

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for _base, raw in self.batches:
            batch = RecordBatch(raw)
            if batch.last_offset < offset:
                continue
            if out and len(out) + len(raw) > max_bytes:
                break
            out += raw
        return bytes(out)

    def records(self) -> list[Any]:
        return [r for _b, raw in self.batches for r in RecordBatch(raw).records()]

    def raw_batches(self) -> list[RecordBatch]:
        return [RecordBatch(raw) for _b, raw in self.batches]


class _Servicer(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    def Metadata(self, request: Any, context: Any) -> Any:
        return self.cluster.metadata(self.node_id, request)

    def Produce(self, request: Any, context: Any) -> Any:
        return self.cluster.produce(self.node_id, request)

    def Fetch(self, request: Any, context: Any) -> Any:
        return self.cluster.fetch(self.node_id, request)

    def ListOffsets(self, request: Any, context: Any) -> Any:
        return self.cluster.list_offsets(self.node_id, request)

    def OffsetForLeaderEpoch(self, request: Any, context: Any) -> Any:
        return self.cluster.offset_for_leader_epoch(self.node_id, request)

    def InitProducerId(self, request: Any, context: Any) -> Any:
        return self.cluster.init_producer_id(self.node_id, request)


class FakeCluster:
    """Brokers 1..n on 127.0.0.1 sharing in-memory partition logs (RF=1 semantics: the high
    watermark is the log end)."""

    def __init__(self, brokers: int = 2) -> None:
        self.cond = threading.Condition()
        self.partitions: dict[tuple[str, int], FakePartition] = {}
        self.calls: list[tuple[int, str, Any]] = []
        self.produce_errors: dict[tuple[str, int], list[type[kerr.KafkaError]]] = {}
        self.fetch_errors: dict[tuple[str, int], list[type[kerr.KafkaError]]] = {}
        self.produce_delay = 0.0
        self.metadata_delay = 0.0
        self.hints = True
        self.frozen: dict[tuple[str, int], tuple[int, int]] | None = None
        self.message_max_bytes = 1 << 30
        self.auto_create = False
        self.in_flight: dict[int, int] = {}
        self.max_in_flight: dict[int, int] = {}
        self.servers: dict[int, grpc.Server] = {}
        self.ports: dict[int, int] = {}
        for node_id in range(1, brokers + 1):
            server = grpc.server(_futures.ThreadPoolExecutor(max_workers=24))
            broker_pb2_grpc.add_BrokerServiceServicer_to_server(_Servicer(self, node_id), server)
            self.ports[node_id] = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self.servers[node_id] = server

    # ---------------------------------------------------------------- control

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.ports[node_id]}"

    def create_topic(self, name: str, partitions: int = 1, leaders: list[int] | None = None) -> None:
        with self.cond:
            for i in range(partitions):
                leader = leaders[i % len(leaders)] if leaders else sorted(self.ports)[i % len(self.ports)]
                self.partitions[(name, i)] = FakePartition(name, i, leader, [leader])

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.cond:
            p = self.partitions[(topic, partition)]
            p.leader = leader
            p.epoch += 1
            p.epochs.append((p.epoch, p.next_offset))
            p.replicas = [leader]
            self.cond.notify_all()

    def freeze_metadata(self) -> None:
        """From now on Metadata answers report the leaders (and epochs) of this moment."""
        with self.cond:
            self.frozen = {k: (p.leader, p.epoch) for k, p in self.partitions.items()}

    def stop_broker(self, node_id: int) -> None:
        self.servers[node_id].stop(0).wait()

    def close(self) -> None:
        for server in self.servers.values():
            server.stop(0)

    def partition(self, topic: str, index: int = 0) -> FakePartition:
        return self.partitions[(topic, index)]

    def count(self, method: str, node_id: int | None = None) -> int:
        return sum(1 for n, m, _r in list(self.calls) if m == method and (node_id is None or n == node_id))

    def requests(self, method: str, node_id: int | None = None) -> list[Any]:
        return [r for n, m, r in list(self.calls) if m == method and (node_id is None or n == node_id)]

    def append(self, topic: str, partition: int, payload: bytes) -> int:
        with self.cond:
            base, _ = self.partitions[(topic, partition)].append(payload)
            self.cond.notify_all()
            return base

    def _endpoint(self, node_id: int) -> B.NodeEndpoint:
        return B.NodeEndpoint(node_id=node_id, host="127.0.0.1", port=self.ports[node_id])

    def _hint(self, p: FakePartition) -> B.LeaderIdAndEpoch | None:
        return B.LeaderIdAndEpoch(leader_id=p.leader, leader_epoch=p.epoch) if self.hints else None

    # ---------------------------------------------------------------- RPCs

    def init_producer_id(self, node_id: int, request: Any) -> Any:
        """A fresh producer id, epoch 0 (the fake partitions keep no producer state)."""
        with self.cond:
            self.calls.append((node_id, "InitProducerId", request))
            pid = 1000 + self.count("InitProducerId")
        return B.InitProducerIdResponse(error=_err(None), producer_id=pid, producer_epoch=0)

    def metadata(self, node_id: int, request: Any) -> Any:
        if self.metadata_delay:
            time.sleep(self.metadata_delay)
        with self.cond:
            self.calls.append((node_id, "Metadata", request))
            names = sorted({t for t, _p in self.partitions}) if request.all_topics else list(request.topics)
            topics = []
            for name in names:
                parts = sorted((p for (t, _i), p in self.partitions.items() if t == name), key=lambda p: p.index)
                if not parts and self.auto_create and request.allow_auto_topic_creation:
                    self.create_topic(name, 1)
                    topics.append(B.MetadataResponse.Topic(name=name, error=_err(kerr.LeaderNotAvailableError)))
                    continue
                if not parts:
                    topics.append(B.MetadataResponse.Topic(name=name, error=_err(kerr.UnknownTopicOrPartitionError)))
                    continue
                out = []
                for p in parts:
                    leader, epoch = (self.frozen or {}).get((name, p.index), (p.leader, p.epoch))
                    out.append(
                        B.MetadataResponse.Partition(
                            error=_err(None),
                            partition_index=p.index,
                            leader_id=leader,
                            leader_epoch=epoch,
                            replica_nodes=[leader],
                            isr_nodes=[leader],
                        )
                    )
                topics.append(B.MetadataResponse.Topic(name=name, error=_err(None), partitions=out))
            return B.MetadataResponse(
                brokers=[self._endpoint(n) for n in sorted(self.ports)],
                cluster_id="fake-cluster",
                controller_id=1,
                topics=topics,
            )

    def produce(self, node_id: int, request: Any) -> Any:
        with self.cond:
            self.calls.append((node_id, "Produce", request))
            self.in_flight[node_id] = self.in_flight.get(node_id, 0) + 1
            self.max_in_flight[node_id] = max(self.max_in_flight.get(node_id, 0), self.in_flight[node_id])
        try:
            if self.produce_delay:
                time.sleep(self.produce_delay)
            return self._produce(node_id, request)
        finally:
            with self.cond:
                self.in_flight[node_id] -= 1

    def _produce(self, node_id: int, request: Any) -> Any:
        if request.acks not in (-1, 0, 1):
            return B.ProduceResponse(error=_err(kerr.InvalidRequiredAcksError))
        endpoints: set[int] = set()
        topics = []
        with self.cond:
            for t in request.topics:
                results = []
                for pd in t.partitions:
                    key = (t.name, pd.index)
                    p = self.partitions.get(key)
                    res = B.ProduceResponse.PartitionResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1)
                    injected = self.produce_errors.get(key)
                    if p is None:
                        res.error.CopyFrom(_err(kerr.UnknownTopicOrPartitionError))
                    elif injected:
                        cls = injected.pop(0)
                        res.error.CopyFrom(_err(cls, "injected"))
                    elif p.leader != node_id:
                        res.error.CopyFrom(
                            _err(kerr.NotLeaderOrFollowerError, f"broker {node_id} does not lead {t.name}-{pd.index}")
                        )
                        hint = self._hint(p)
                        if hint is not None:
                            res.current_leader.CopyFrom(hint)
                            endpoints.add(p.leader)
                    elif any(
                        h.size > self.message_max_bytes for h in validate_record_set(pd.records, from_client=True)
                    ):
                        res.error.CopyFrom(_err(kerr.MessageTooLargeError))
                    else:
                        try:
                            validate_record_set(pd.records, from_client=True)
                            res.base_offset, res.log_append_time_ms = p.append(pd.records)
                            res.log_start_offset = p.log_start
                        except CorruptRecordError as err:
                            res.error.CopyFrom(_err(kerr.CorruptMessageError, str(err)))
                        except (InvalidRecordError, StorageError) as err:
                            res.error.CopyFrom(_err(kerr.InvalidRecordError, str(err)))
                    results.append(res)
                topics.append(B.ProduceResponse.TopicResponse(name=t.name, partitions=results))
            self.cond.notify_all()
        return B.ProduceResponse(topics=topics, node_endpoints=[self._endpoint(n) for n in sorted(endpoints)])

    def fetch(self, node_id: int, request: Any) -> Any:
        with self.cond:
            self.calls.append((node_id, "Fetch", request))
        deadline = time.monotonic() + request.max_wait_ms / 1000.0
        while True:
            with self.cond:
                response, size, errors = self._fetch(node_id, request)
                remaining = deadline - time.monotonic()
                if size >= request.min_bytes or errors or remaining <= 0:
                    return response
                self.cond.wait(remaining)

    def _fetch(self, node_id: int, request: Any) -> tuple[Any, int, bool]:
        total = 0
        errors = False
        endpoints: set[int] = set()
        topics = []
        for t in request.topics:
            parts = []
            for fp in t.partitions:
                key = (t.topic, fp.partition)
                p = self.partitions.get(key)
                data = B.FetchResponse.PartitionData(
                    partition_index=fp.partition, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1
                )
                injected = self.fetch_errors.get(key)
                if p is None:
                    data.error.CopyFrom(_err(kerr.UnknownTopicOrPartitionError))
                elif injected:
                    data.error.CopyFrom(_err(injected.pop(0), "injected"))
                elif p.leader != node_id:
                    data.error.CopyFrom(_err(kerr.NotLeaderOrFollowerError))
                    hint = self._hint(p)
                    if hint is not None:
                        data.current_leader.CopyFrom(hint)
                        endpoints.add(p.leader)
                elif fp.current_leader_epoch >= 0 and fp.current_leader_epoch != p.epoch:
                    cls = (
                        kerr.FencedLeaderEpochError
                        if fp.current_leader_epoch < p.epoch
                        else kerr.UnknownLeaderEpochError
                    )
                    data.error.CopyFrom(_err(cls))
                elif fp.fetch_offset < p.log_start or fp.fetch_offset > p.next_offset:
                    data.error.CopyFrom(_err(kerr.OffsetOutOfRangeError))
                    data.high_watermark, data.log_start_offset = p.next_offset, p.log_start
                else:
                    data.error.CopyFrom(_err(None))
                    budget = max(1, min(fp.partition_max_bytes, request.max_bytes - total))
                    data.records = p.read(fp.fetch_offset, budget) if total < request.max_bytes or not total else b""
                    total += len(data.records)
                    data.high_watermark = data.last_stable_offset = p.next_offset
                    data.log_start_offset = p.log_start
                    if request.isolation_level == 1:
                        for pid, first in p.aborted:
                            data.aborted_transactions.add(producer_id=pid, first_offset=first)
                if data.error.code:
                    errors = True
                parts.append(data)
            topics.append(B.FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=parts))
        response = B.FetchResponse(
            error=_err(None), responses=topics, node_endpoints=[self._endpoint(n) for n in sorted(endpoints)]
        )
        return response, total, errors

    def offset_for_leader_epoch(self, node_id: int, request: Any) -> Any:
        R = B.OffsetForLeaderEpochResponse
        with self.cond:
            self.calls.append((node_id, "OffsetForLeaderEpoch", request))
            topics = []
            for t in request.topics:
                parts = []
                for rp in t.partitions:
                    p = self.partitions.get((t.topic, rp.partition))
                    out = R.Partition(partition=rp.partition, leader_epoch=-1, end_offset=-1)
                    if p is None:
                        out.error.CopyFrom(_err(kerr.UnknownTopicOrPartitionError))
                    elif p.leader != node_id:
                        out.error.CopyFrom(_err(kerr.NotLeaderOrFollowerError))
                    elif rp.current_leader_epoch >= 0 and rp.current_leader_epoch != p.epoch:
                        out.error.CopyFrom(
                            _err(
                                kerr.FencedLeaderEpochError
                                if rp.current_leader_epoch < p.epoch
                                else kerr.UnknownLeaderEpochError
                            )
                        )
                    else:
                        out.error.CopyFrom(_err(None))
                        out.leader_epoch, out.end_offset = p.end_offset_for(rp.leader_epoch)
                    parts.append(out)
                topics.append(R.Topic(topic=t.topic, partitions=parts))
            return R(topics=topics)

    def list_offsets(self, node_id: int, request: Any) -> Any:
        with self.cond:
            self.calls.append((node_id, "ListOffsets", request))
            topics = []
            for t in request.topics:
                parts = []
                for lp in t.partitions:
                    p = self.partitions.get((t.name, lp.partition_index))
                    out = B.ListOffsetsResponse.Partition(
                        partition_index=lp.partition_index, timestamp=-1, offset=-1, leader_epoch=-1
                    )
                    if p is None:
                        out.error.CopyFrom(_err(kerr.UnknownTopicOrPartitionError))
                    elif p.leader != node_id:
                        out.error.CopyFrom(_err(kerr.NotLeaderOrFollowerError))
                    else:
                        out.error.CopyFrom(_err(None))
                        out.leader_epoch = p.epoch
                        records = [r for r in p.records() if r.offset >= p.log_start]
                        if lp.timestamp == -2:
                            out.offset = p.log_start
                        elif lp.timestamp == -1:
                            out.offset = p.next_offset
                        elif lp.timestamp == -3:
                            if records:
                                best = max(records, key=lambda r: (r.timestamp_ms, -r.offset))
                                out.offset, out.timestamp = best.offset, best.timestamp_ms
                        else:
                            hit = next((r for r in records if r.timestamp_ms >= lp.timestamp), None)
                            if hit is not None:
                                out.offset, out.timestamp = hit.offset, hit.timestamp_ms
                    parts.append(out)
                topics.append(B.ListOffsetsResponse.Topic(name=t.name, partitions=parts))
            return B.ListOffsetsResponse(topics=topics)


@pytest.fixture
def cluster():
    c = FakeCluster(brokers=2)
    yield c
    c.close()


def make_producer(cluster: FakeCluster, **config: Any) -> Producer:
    config.setdefault("max_block_ms", 5000)
    config.setdefault("retry_backoff_ms", 20)
    config.setdefault("request_timeout_ms", 5000)
    config.setdefault(
        "delivery_timeout_ms", max(20_000, config["request_timeout_ms"] + config.get("linger_ms", 5) + 1000)
    )
    return Producer(cluster.bootstrap, **config)


# =========================================================================== tests


def test_send_returns_futures_with_offsets_and_the_broker_stores_the_records(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, linger_ms=0) as producer:
        futures = [
            producer.send(
                "t", b"v%d" % i, key=b"k%d" % i, headers=[("h", b"x"), ("n", None)], timestamp_ms=1_700_000_000_000 + i
            )
            for i in range(5)
        ]
        metas = [f.result(10) for f in futures]
    assert [m.offset for m in metas] == [0, 1, 2, 3, 4]
    assert all(isinstance(m, RecordMetadata) and m.topic == "t" and m.partition == 0 for m in metas)
    assert [m.timestamp for m in metas] == [1_700_000_000_000 + i for i in range(5)]
    stored = cluster.partition("t").records()
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in stored] == [
        (i, b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i) for i in range(5)
    ]
    assert [tuple(h) for h in stored[0].headers] == [("h", b"x"), ("n", None)]


def test_str_values_dict_headers_and_serializers(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(
        cluster, key_serializer=lambda k: k.upper().encode(), value_serializer=lambda v: repr(v).encode()
    ) as producer:
        producer.send_sync("t", {"a": 1}, key="key", headers={"x": "ü"})
    rec = cluster.partition("t").records()[0]
    assert (rec.key, rec.value, [tuple(h) for h in rec.headers]) == (b"KEY", b"{'a': 1}", [("x", "ü".encode())])
    with make_producer(cluster) as producer:
        with pytest.raises(TypeError):
            producer.send("t", 12345)


def test_linger_batches_records_into_one_request(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, linger_ms=600, batch_size=1 << 20) as producer:
        start = time.monotonic()
        futures = [producer.send("t", b"x" * 10, partition=0) for _ in range(50)]
        time.sleep(0.1)
        assert not any(f.done() for f in futures)  # still lingering
        [f.result(10) for f in futures]
        assert time.monotonic() - start >= 0.59
    produce = cluster.requests("Produce")
    assert len(produce) == 1
    batches = cluster.partition("t").raw_batches()
    assert len(batches) == 1 and batches[0].records_count == 50


def test_batch_size_limits_each_batch(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, linger_ms=50, batch_size=1000) as producer:
        futures = [producer.send("t", b"y" * 90, partition=0) for _ in range(100)]
        producer.flush()
        assert all(f.done() for f in futures)
    batches = cluster.partition("t").raw_batches()
    assert len(batches) >= 10
    assert all(b.size_bytes <= 1000 for b in batches)
    assert sum(b.records_count for b in batches) == 100
    # one batch per partition per request, so every batch went in its own request
    assert all(len(r.topics[0].partitions) == 1 for r in cluster.requests("Produce"))


def test_a_record_bigger_than_batch_size_goes_alone(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, batch_size=100) as producer:
        meta = producer.send_sync("t", b"z" * 5000)
    assert meta.offset == 0
    assert cluster.partition("t").raw_batches()[0].records_count == 1


def test_keyed_records_land_on_kafkas_partition(cluster) -> None:
    cluster.create_topic("t", 7)
    keys = [b"key-%d" % i for i in range(60)] + [b"", b"\x00\xff", "ü".encode()]
    with make_producer(cluster, linger_ms=0) as producer:
        futures = {k: producer.send("t", b"v", key=k) for k in keys}
        got = {k: f.result(10).partition for k, f in futures.items()}
    assert got == {k: partition_for_key(k, 7) for k in keys}


def test_records_without_key_stick_to_one_partition_per_batch(cluster) -> None:
    cluster.create_topic("t", 6)
    with make_producer(cluster, linger_ms=10_000, batch_size=1 << 20) as producer:
        futures = [producer.send("t", b"v%d" % i) for i in range(30)]
        producer.flush()
        first = {f.result().partition for f in futures}
        assert len(first) == 1  # all in the one sticky batch
        later = []
        for _ in range(5):
            futures = [producer.send("t", b"w") for _ in range(3)]
            producer.flush()
            later.append({f.result().partition for f in futures})
    assert all(len(s) == 1 for s in later)
    sequence = [first.pop()] + [s.pop() for s in later]
    assert all(a != b for a, b in zip(sequence, sequence[1:], strict=False))  # a new batch moves to another partition


def test_explicit_partition_and_unknown_partition(cluster) -> None:
    cluster.create_topic("t", 3)
    with make_producer(cluster, max_block_ms=300) as producer:
        assert producer.send_sync("t", b"v", partition=2).partition == 2
        future = producer.send("t", b"v", partition=9)
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            future.result(5)
        assert producer.partitions_for("t") == [0, 1, 2]


def test_unknown_topic_fails_the_future_after_max_block_ms(cluster) -> None:
    seen = []
    with make_producer(cluster, max_block_ms=300) as producer:
        start = time.monotonic()
        future = producer.send("missing", b"v", callback=lambda m, e: seen.append((m, e)))
        assert time.monotonic() - start >= 0.25
        with pytest.raises(kerr.UnknownTopicOrPartitionError, match="not present in metadata"):
            future.result(1)
    assert seen and seen[0][0] is None and isinstance(seen[0][1], kerr.UnknownTopicOrPartitionError)


def test_auto_created_topic_is_waited_for(cluster) -> None:
    cluster.auto_create = True
    with make_producer(cluster) as producer:
        assert producer.send_sync("fresh", b"v", timeout=10).offset == 0


def test_callbacks_run_in_order_with_metadata_or_error(cluster) -> None:
    cluster.create_topic("t", 1)
    seen: list[tuple[Any, Any]] = []
    with make_producer(cluster, linger_ms=20) as producer:
        for i in range(20):
            producer.send("t", b"%d" % i, callback=lambda m, e: seen.append((m, e)))
        producer.flush()
    assert [m.offset for m, e in seen] == list(range(20)) and all(e is None for _m, e in seen)


def test_not_leader_with_hint_goes_to_the_new_leader_without_refetching_metadata(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    with make_producer(cluster, linger_ms=0, retry_backoff_ms=2000, retry_backoff_max_ms=2000) as producer:
        assert producer.send_sync("t", b"a").offset == 0
        cluster.freeze_metadata()  # Metadata answers keep saying broker 1 leads
        cluster.move_leader("t", 0, 2)
        metadata_calls = cluster.count("Metadata")
        start = time.monotonic()
        meta = producer.send_sync("t", b"b", timeout=10)
        elapsed = time.monotonic() - start
    assert meta.offset == 1
    assert cluster.count("Produce", 1) == 2 and cluster.count("Produce", 2) == 1
    assert cluster.count("Metadata") == metadata_calls  # the hint was enough
    assert elapsed < 1.5  # no retry backoff either
    assert [r.value for r in cluster.partition("t").records()] == [b"a", b"b"]


def test_not_leader_without_hint_refreshes_metadata(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    cluster.hints = False
    with make_producer(cluster, linger_ms=0) as producer:
        producer.send_sync("t", b"a")
        cluster.move_leader("t", 0, 2)
        metadata_calls = cluster.count("Metadata")
        assert producer.send_sync("t", b"b", timeout=10).offset == 1
    assert cluster.count("Metadata") > metadata_calls
    assert cluster.count("Produce", 2) == 1


def test_retriable_errors_are_retried(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError, kerr.RequestTimedOutError]
    with make_producer(cluster) as producer:
        assert producer.send_sync("t", b"v", timeout=10).offset == 0
    assert cluster.count("Produce") == 3


def test_retries_run_out(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError] * 10
    seen = []
    with make_producer(cluster, retries=2) as producer:
        future = producer.send("t", b"v", callback=lambda m, e: seen.append(e))
        with pytest.raises(kerr.NotEnoughReplicasError) as info:
            future.result(10)
    assert info.value.retriable
    assert cluster.count("Produce") == 3  # the first attempt and two retries
    assert isinstance(seen[0], kerr.NotEnoughReplicasError)


def test_non_retriable_error_fails_at_once(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.TopicAuthorizationFailedError]
    with make_producer(cluster) as producer:
        with pytest.raises(kerr.TopicAuthorizationFailedError):
            producer.send_sync("t", b"v", timeout=10)
        assert producer.send_sync("t", b"w", timeout=10).offset == 0  # the producer goes on
    assert cluster.count("Produce") == 2


def test_unreachable_leader_triggers_metadata_refresh_and_retry(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    with make_producer(cluster, linger_ms=0) as producer:
        producer.send_sync("t", b"a")
        cluster.stop_broker(1)
        cluster.move_leader("t", 0, 2)
        assert producer.send_sync("t", b"b", timeout=15).offset == 1


def test_delivery_timeout_expires_records_that_cannot_be_sent(cluster) -> None:
    cluster.create_topic("t", 1, leaders=[1])
    with make_producer(cluster, linger_ms=0, request_timeout_ms=500, delivery_timeout_ms=1200) as producer:
        producer.send_sync("t", b"a")
        cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError] * 1000
        start = time.monotonic()
        with pytest.raises((kerr.RequestTimedOutError, kerr.NotEnoughReplicasError)):
            producer.send_sync("t", b"b", timeout=10)
        assert 1.0 <= time.monotonic() - start < 5


def test_acks_zero_completes_without_offsets(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, acks=0) as producer:
        meta = producer.send_sync("t", b"v", timeout=10)
        producer.flush()
    assert meta.offset == -1
    assert cluster.requests("Produce")[0].acks == 0
    deadline = time.monotonic() + 5
    while not cluster.partition("t").records() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cluster.partition("t").records()[0].value == b"v"


def _stream_until_stored_at(cluster: FakeCluster, producer: Producer, node_id: int, timeout_s: float) -> int:
    """Send acks=0 records (paced, as a steady stream) until one is stored by ``node_id``'s
    Produce; returns how many were sent."""
    deadline = time.monotonic() + timeout_s
    sent = 0
    while time.monotonic() < deadline:
        producer.send("t", b"x%d" % sent)
        sent += 1
        if any(r.value.startswith(b"x") for r in cluster.partition("t").records()) and cluster.count(
            "Produce", node_id
        ):
            return sent
        time.sleep(0.005)
    raise AssertionError(f"no acks=0 record reached broker {node_id} within {timeout_s} s ({sent} sent)")


@pytest.mark.parametrize("dead", [True, False], ids=["leader-down", "leader-deposed"])
def test_acks_zero_follows_a_moved_leader(cluster, dead: bool) -> None:
    """Issue 12: with acks=0 nothing is acknowledged, but the producer still learns from a broken
    connection or a NOT_LEADER_OR_FOLLOWER answer that the leader moved (as Kafka's client does
    on a disconnect), instead of sending into the void until metadata.max.age.ms (300 s)."""
    cluster.create_topic("t", 1, leaders=[1])
    with make_producer(cluster, acks=0, linger_ms=0) as producer:
        producer.send_sync("t", b"first", timeout=10)
        if dead:
            cluster.stop_broker(1)
        cluster.move_leader("t", 0, 2)
        _stream_until_stored_at(cluster, producer, 2, timeout_s=5)
        producer.flush(10)
    assert producer.metadata.metadata_max_age_ms == 300_000


@pytest.mark.parametrize("acks,wire", [("all", -1), (-1, -1), ("1", 1), (1, 1)])
def test_acks_on_the_wire(cluster, acks: Any, wire: int) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, acks=acks) as producer:
        producer.send_sync("t", b"v", timeout=10)
    assert cluster.requests("Produce")[0].acks == wire
    with pytest.raises(ValueError):
        Producer(cluster.bootstrap, acks=2)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs_reach_the_broker(cluster, codec: str) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, compression_type=codec, linger_ms=50) as producer:
        futures = [producer.send("t", b"compressible value " * 20, key=b"k%d" % i) for i in range(30)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(30))
    batches = cluster.partition("t").raw_batches()
    assert {b.compression.name.lower() for b in batches} == {codec}
    assert [r.key for r in cluster.partition("t").records()] == [b"k%d" % i for i in range(30)]


@pytest.mark.parametrize("in_flight", [1, 5])
def test_message_too_large_splits_the_batch(cluster, in_flight: int) -> None:
    cluster.create_topic("t", 1)
    cluster.message_max_bytes = 700
    with make_producer(
        cluster, linger_ms=100, batch_size=1 << 20, max_in_flight_requests_per_connection=in_flight
    ) as producer:
        futures = [producer.send("t", b"%03d" % i + b"-" * 100) for i in range(20)]
        producer.flush()
        metas = [f.result() for f in futures]
    stored = {r.offset: r.value[:3] for r in cluster.partition("t").records()}
    assert {m.offset: b"%03d" % i for i, m in enumerate(metas)} == stored  # each future names its record
    assert all(b.size_bytes <= 700 for b in cluster.partition("t").raw_batches())
    if in_flight == 1:  # halves are retried in order only when nothing else is in flight
        assert [m.offset for m in metas] == list(range(20))


def test_a_single_record_too_large_for_the_broker_fails(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.message_max_bytes = 100
    with make_producer(cluster) as producer:
        with pytest.raises(kerr.MessageTooLargeError):
            producer.send_sync("t", b"x" * 500, timeout=10)


def test_record_over_max_request_size_fails_before_sending(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, max_request_size=1000) as producer:
        future = producer.send("t", b"x" * 2000)
        with pytest.raises(kerr.MessageTooLargeError, match="max.request.size"):
            future.result(1)
    assert cluster.count("Produce") == 0


def test_max_in_flight_requests_per_broker(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_delay = 0.05
    with make_producer(cluster, linger_ms=0, batch_size=200, max_in_flight_requests_per_connection=2) as producer:
        futures = [producer.send("t", b"%04d" % i + b"." * 150) for i in range(40)]
        producer.flush()
        [f.result() for f in futures]
    assert cluster.max_in_flight[1] == 2
    assert len(cluster.requests("Produce")) >= 10


def test_one_in_flight_keeps_order_across_retries(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError, kerr.NotEnoughReplicasError]
    with make_producer(cluster, linger_ms=0, batch_size=100, max_in_flight_requests_per_connection=1) as producer:
        futures = [producer.send("t", b"%03d" % i + b"." * 60) for i in range(30)]
        producer.flush()
        offsets = [f.result().offset for f in futures]
    assert offsets == sorted(offsets) == list(range(30))
    assert cluster.max_in_flight[1] == 1
    assert [r.value[:3] for r in cluster.partition("t").records()] == [b"%03d" % i for i in range(30)]


def test_requests_go_to_each_partitions_leader_in_one_request_per_broker(cluster) -> None:
    cluster.create_topic("t", 4, leaders=[1, 2])
    with make_producer(cluster, linger_ms=200) as producer:
        futures = [producer.send("t", b"v", partition=i % 4) for i in range(40)]
        producer.flush()
        [f.result() for f in futures]
    assert cluster.count("Produce", 1) == 1 and cluster.count("Produce", 2) == 1
    assert sorted(p.index for p in cluster.requests("Produce", 1)[0].topics[0].partitions) == [0, 2]
    assert sorted(p.index for p in cluster.requests("Produce", 2)[0].topics[0].partitions) == [1, 3]


def test_flush_sends_lingering_batches_at_once(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, linger_ms=30_000) as producer:
        future = producer.send("t", b"v")
        start = time.monotonic()
        producer.flush(timeout=10)
        assert future.done() and time.monotonic() - start < 5


def test_close_sends_what_is_queued(cluster) -> None:
    cluster.create_topic("t", 1)
    producer = make_producer(cluster, linger_ms=30_000)
    futures = [producer.send("t", b"%d" % i) for i in range(10)]
    start = time.monotonic()
    producer.close()
    assert time.monotonic() - start < 5
    assert [f.result(0).offset for f in futures] == list(range(10))
    with pytest.raises(ProducerClosedError):
        producer.send("t", b"late")
    producer.close()  # twice is fine


def test_close_with_timeout_fails_what_cannot_be_sent(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError] * 10_000
    producer = make_producer(cluster, linger_ms=0)
    future = producer.send("t", b"v")
    start = time.monotonic()
    producer.close(timeout=0.5)
    assert time.monotonic() - start < 5
    with pytest.raises(ProducerClosedError):
        future.result(0)


def test_buffer_memory_blocks_send_until_space_frees(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.produce_delay = 0.1
    with make_producer(cluster, buffer_memory=4000, batch_size=1000, linger_ms=0) as producer:
        futures = [producer.send("t", b"x" * 300) for _ in range(40)]
        producer.flush()
        assert sorted(f.result().offset for f in futures) == list(range(40))
    with make_producer(cluster, buffer_memory=1000, max_block_ms=200, linger_ms=10_000) as producer:
        cluster.produce_errors[("t", 0)] = [kerr.NotEnoughReplicasError] * 10_000
        producer.send("t", b"x" * 600)
        with pytest.raises(kerr.RequestTimedOutError, match="allocate memory"):
            producer.send("t", b"x" * 600).result(5)
        producer.close(timeout=0)


def test_log_append_time_is_reported(cluster) -> None:
    cluster.create_topic("t", 1)
    cluster.partition("t").log_append_time = True
    with make_producer(cluster) as producer:
        meta = producer.send_sync("t", b"v", timestamp_ms=1000, timeout=10)
    assert meta.timestamp > 1_600_000_000_000


def test_metadata_max_age_refreshes_metadata(cluster) -> None:
    cluster.create_topic("t", 1)
    with make_producer(cluster, metadata_max_age_ms=100) as producer:
        producer.send_sync("t", b"v", timeout=10)
        before = cluster.count("Metadata")
        time.sleep(0.6)
        assert cluster.count("Metadata") >= before + 2


def test_many_threads_share_a_producer(cluster) -> None:
    cluster.create_topic("t", 3)
    with make_producer(cluster, linger_ms=2) as producer:

        def work(n: int) -> list[concurrent.futures.Future]:
            return [producer.send("t", b"%d-%d" % (n, i), key=b"%d" % i) for i in range(200)]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            all_futures = [f for fs in pool.map(work, range(4)) for f in fs]
        producer.flush()
    metas = [f.result() for f in all_futures]
    assert len({(m.partition, m.offset) for m in metas}) == 800
    assert sum(len(cluster.partition("t", p).records()) for p in range(3)) == 800


def test_async_producer_and_send_async(cluster) -> None:
    cluster.create_topic("t", 2)

    async def main() -> list[RecordMetadata]:
        async with AsyncProducer(cluster.bootstrap, linger_ms=1, max_block_ms=5000) as producer:
            first = await producer.send_and_wait("t", b"a", key=b"k")
            pending = [await producer.send("t", b"b%d" % i, partition=1) for i in range(5)]
            rest = await asyncio.gather(*pending)
            await producer.flush()
            assert await producer.partitions_for("t") == [0, 1]
            return [first, *rest]

    metas = asyncio.run(main())
    assert metas[0].partition == partition_for_key(b"k", 2)
    assert [m.offset for m in metas[1:]] == list(range(5))

    with make_producer(cluster) as producer:
        meta = asyncio.run(producer.send_async("t", b"c", partition=0))
    assert meta.partition == 0 and meta.offset >= 0


def test_custom_partitioner_callable(cluster) -> None:
    cluster.create_topic("t", 4)
    with make_producer(cluster, partitioner=lambda key, all_parts, available: all_parts[-1]) as producer:
        assert producer.send_sync("t", b"v", key=b"x", timeout=10).partition == 3


def test_producer_config_from_properties() -> None:
    config, unknown = producer_config_from_properties(
        {
            "acks": "1",
            "linger.ms": "7",
            "batch.size": "100",
            "compression.type": "lz4",
            "client.id": "x",
            "foo.bar": "1",
        }
    )
    assert config == {"acks": "1", "linger_ms": 7, "batch_size": 100, "compression_type": "lz4"}
    assert unknown == ["foo.bar"]
    with pytest.raises(ValueError):
        producer_config_from_properties({"linger.ms": "soon"})


def test_settings_of_missing_features_are_refused_not_ignored(cluster) -> None:
    """Issue 12: settings of missing features are refused with an error naming the setting; the
    values that keep Kafka's meaning without them pass. Idempotence and transactions (issue 15) are
    refused only with settings they cannot work with, as Kafka refuses them."""
    from kraftlog.client import UnsupportedConfigError

    refused = [
        {"security.protocol": "SASL_SSL"},
        {"partitioner.ignore.keys": "true"},
        {"partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"},
        {"value.serializer": "org.apache.kafka.common.serialization.LongSerializer"},
    ]
    for props in refused:
        with pytest.raises(UnsupportedConfigError) as info:
            config, _unknown = producer_config_from_properties(props)
            Producer(cluster.bootstrap, **config).close()
        assert any(key in str(info.value) for key in props), info.value
        assert "not supported yet" in str(info.value)
    for conflict in ({"acks": 1}, {"retries": 0}, {"max_in_flight_requests_per_connection": 6}):
        with pytest.raises(ValueError, match="enable.idempotence=true"):
            Producer(cluster.bootstrap, enable_idempotence=True, **conflict)  # type: ignore[arg-type]
        Producer(cluster.bootstrap, **conflict).close()  # type: ignore[arg-type]  # the default gives way
    with pytest.raises(ValueError, match="transactional.id needs enable.idempotence"):
        Producer(cluster.bootstrap, transactional_id="tx", enable_idempotence=False)
    config, unknown = producer_config_from_properties(
        {
            "enable.idempotence": "false",
            "security.protocol": "plaintext",
            "partitioner.ignore.keys": "false",
            "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
        }
    )
    assert config == {"enable_idempotence": False} and not unknown
    Producer(cluster.bootstrap, **config).close()


def test_invalid_settings_are_refused(cluster) -> None:
    with pytest.raises(kerr.UnsupportedCompressionTypeError):
        Producer(cluster.bootstrap, compression_type="brotli")
    with pytest.raises(ValueError, match="delivery_timeout_ms"):
        Producer(cluster.bootstrap, delivery_timeout_ms=100)
    with pytest.raises(ValueError):
        Producer("no-port")


# =========================================================================== the metadata cache


def _metadata_response(epoch: int, leader: int = 1, topic_id: str = "id-1") -> Any:
    return B.MetadataResponse(
        brokers=[B.NodeEndpoint(node_id=1, host="h1", port=1), B.NodeEndpoint(node_id=2, host="h2", port=2)],
        topics=[
            B.MetadataResponse.Topic(
                name="t",
                topic_id=topic_id,
                error=_err(None),
                partitions=[
                    B.MetadataResponse.Partition(
                        error=_err(None),
                        partition_index=0,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=[1, 2],
                        isr_nodes=[1, 2],
                    ),
                    B.MetadataResponse.Partition(error=_err(None), partition_index=1, leader_id=-1, leader_epoch=epoch),
                ],
            )
        ],
    )


def test_metadata_cache_never_goes_back_in_leader_epoch() -> None:
    from kraftlog.client import ClusterMetadata, TopicPartition
    from kraftlog.client._channels import ChannelPool

    md = ClusterMetadata("h1:1", ChannelPool())
    md._apply(_metadata_response(epoch=3, leader=2))
    tp = TopicPartition("t", 0)
    assert md.leader_for(tp).address == "h2:2" and md.leader_epoch(tp) == 3
    assert md.partitions_for_topic("t") == [0, 1] and md.available_partitions_for_topic("t") == [0]
    md._apply(_metadata_response(epoch=2, leader=1))  # a lagging broker
    assert md.leader_for(tp).node_id == 2
    md._apply(_metadata_response(epoch=4, leader=1))
    assert md.leader_for(tp).node_id == 1
    md._apply(_metadata_response(epoch=0, leader=2, topic_id="id-2"))  # deleted and recreated
    assert md.leader_for(tp).node_id == 2 and md.leader_epoch(tp) == 0


def test_leader_hints_need_a_newer_epoch_and_a_known_endpoint() -> None:
    from kraftlog.client import ClusterMetadata, TopicPartition
    from kraftlog.client._channels import ChannelPool

    md = ClusterMetadata("h1:1", ChannelPool())
    md._apply(_metadata_response(epoch=5, leader=1))
    tp = TopicPartition("t", 0)
    assert not md.apply_leader_hint(tp, 2, 5)  # not newer
    assert not md.apply_leader_hint(tp, 9, 6)  # broker 9 unknown and no endpoint given
    assert md.apply_leader_hint(tp, 9, 6, [B.NodeEndpoint(node_id=9, host="h9", port=9)])
    assert md.leader_for(tp).address == "h9:9" and md.leader_epoch(tp) == 6
    assert md.available_partitions_for_topic("t") == [0]
    assert not md.apply_leader_hint(TopicPartition("unknown", 0), 1, 9)
    assert not md.apply_leader_hint(tp, -1, 99)


def test_metadata_asks_unreachable_brokers_last(monkeypatch: pytest.MonkeyPatch) -> None:
    from kraftlog.client import ClusterMetadata
    from kraftlog.client._channels import ChannelPool

    now = [100.0]
    monkeypatch.setattr("kraftlog.client._metadata.time.monotonic", lambda: now[0])
    pool = ChannelPool()
    md = ClusterMetadata("h1:1,h2:2,h3:3", pool)
    pool.mark_unreachable("h2:2")
    for _ in range(20):  # shuffled, but the unreachable one is always last
        assert md._candidates()[-1] == "h2:2"
    now[0] += ChannelPool.UNREACHABLE_BACKOFF_S + 0.1
    assert {md._candidates()[-1] for _ in range(60)} == {"h1:1", "h2:2", "h3:3"}
    pool.mark_unreachable("h3:3")
    pool.mark_reachable("h3:3")
    assert not pool.recently_unreachable("h3:3")


def test_unknown_topic_is_dropped_from_the_cache() -> None:
    from kraftlog.client import ClusterMetadata
    from kraftlog.client._channels import ChannelPool

    md = ClusterMetadata("h1:1", ChannelPool())
    md._apply(_metadata_response(epoch=1))
    md._apply(
        B.MetadataResponse(topics=[B.MetadataResponse.Topic(name="t", error=_err(kerr.UnknownTopicOrPartitionError))])
    )
    assert md.partitions_for_topic("t") is None
    assert md.topic_error("t") == kerr.UnknownTopicOrPartitionError.error_code
    assert md.brokers()  # an answer without brokers keeps the known ones


def test_bootstrap_servers_parsing() -> None:
    from kraftlog.client._metadata import parse_bootstrap_servers

    assert parse_bootstrap_servers("a:1, b:2,") == ["a:1", "b:2"]
    assert parse_bootstrap_servers(["a:1,b:2", "c:3"]) == ["a:1", "b:2", "c:3"]
    for bad in ("", "a", "a:x", ":1"):
        with pytest.raises(ValueError):
            parse_bootstrap_servers(bad)


def test_no_broker_reachable_times_out() -> None:
    with Producer(
        "127.0.0.1:1", max_block_ms=300, request_timeout_ms=200, delivery_timeout_ms=1000, retry_backoff_ms=20
    ) as producer:
        future = producer.send("t", b"v")
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            future.result(5)


def test_a_node_that_did_not_answer_waits_for_newer_metadata() -> None:
    with Producer("127.0.0.1:1", request_timeout_ms=2000, max_block_ms=100) as producer:
        md = producer._metadata
        version = md.version
        producer._unreachable[7] = (version, 100.0)
        assert producer._awaiting_metadata(7, 100.5)  # no newer answer yet: do not send there
        assert not producer._awaiting_metadata(8, 100.5)
        md._version = version + 1  # a refresh landed: send wherever it says the leader is
        assert not producer._awaiting_metadata(7, 100.6) and 7 not in producer._unreachable
        producer._unreachable[7] = (md.version, 100.0)
        assert not producer._awaiting_metadata(7, 102.0)  # no refresh within a request timeout: try again
