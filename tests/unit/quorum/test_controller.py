"""Tests of `quorum.controller`: the active controller's decisions as pure functions.

Every handler is ``(image, request, ctx) -> (records, response)``. The harness below keeps an image,
runs a handler against it with an injected clock (``ControllerContext.now_ms``) and a seeded
``random.Random``, and commits the returned records by replaying them as `LogEntry`s with increasing
offsets, exactly as the quorum does after commit (so ``ctx.next_offset`` is the offset the first
proposed record gets). No sockets, no sleeps. Expectations and error names are Kafka's (KRaft mode).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

import kraftlog.quorum.controller as ctl
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import _placement as placement
from kraftlog.metadata_log._records import (
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    LogEntry,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kraftlog.metadata_log.image import MetadataDelta, MetadataImage, PartitionRegistration, TopicImage
from kraftlog.proto import admin_pb2, controller_pb2
from kraftlog.quorum.controller import BrokerHeartbeats, ControllerContext

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
SESSION_MS = 9000
BASE_CONFIG: dict[str, object] = {
    "node.id": 1,
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "broker.session.timeout.ms": SESSION_MS,
}

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# ================================================================================ harness


class Harness:
    """An image, a clock, an rng and the active controller's heartbeat table.

    ``run`` calls a handler on the current image and (by default) commits its records; ``commit``
    replays records as log entries at the next offsets, the only way the image changes.
    """

    def __init__(
        self, settings: dict[str, object] | None = None, *, seed: int = 7, image: MetadataImage = MetadataImage.EMPTY
    ) -> None:
        self.config = NodeConfig.from_mapping({**BASE_CONFIG, **(settings or {})})
        self.image = image
        self.rng = random.Random(seed)
        self.now = 1_700_000_000_000
        self.heartbeats = BrokerHeartbeats()
        self.epochs: dict[int, int] = {}
        self.controller_epoch = 1

    # ---- clock, context, commit

    def tick(self, ms: int) -> None:
        self.now += ms

    @property
    def next_offset(self) -> int:
        return self.image.offset + 1

    def ctx(self) -> ControllerContext:
        return ControllerContext(
            cluster_id=CLUSTER_ID, config=self.config, now_ms=self.now, rng=self.rng, next_offset=self.next_offset
        )

    def commit(self, records: Iterable[MetadataRecord]) -> MetadataImage:
        records = list(records)
        if not records:
            return self.image
        delta = MetadataDelta(self.image)
        offset = self.next_offset
        for record in records:
            delta.replay(LogEntry(offset, self.controller_epoch, self.now, record))
            offset += 1
        self.image = delta.apply()
        return self.image

    def run(
        self, handler: Callable[..., tuple[list[MetadataRecord], Any]], req: Any, *extra: Any, commit: bool = True
    ) -> tuple[list[MetadataRecord], Any]:
        before = self.image
        records, resp = handler(self.image, req, self.ctx(), *extra)
        assert self.image is before, "a handler must not replace the image"
        if commit:
            self.commit(records)
        return records, resp

    # ---- brokers

    def register(
        self,
        broker_id: int,
        *,
        rack: str | None = None,
        incarnation: str | None = None,
        cluster_id: str = CLUSTER_ID,
        commit: bool = True,
    ) -> tuple[list[MetadataRecord], Any]:
        req = controller_pb2.RegisterBrokerRequest(
            broker_id=broker_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation or f"incarnation-{broker_id}",
            listeners=[
                controller_pb2.Endpoint(
                    name="BROKER", host="127.0.0.1", port=9100 + broker_id, security_protocol="PLAINTEXT"
                ),
                controller_pb2.Endpoint(
                    name="EXTERNAL",
                    host=f"broker{broker_id}.example",
                    port=19100 + broker_id,
                    security_protocol="PLAINTEXT",
                ),
            ],
            rack=rack or "",
            log_dirs=[f"/var/lib/kraftlog/{broker_id}"],
            previous_broker_epoch=-1,
        )
        records, resp = self.run(ctl.register_broker, req, self.heartbeats, commit=commit)
        if resp.error.code == 0:
            self.epochs[broker_id] = resp.broker_epoch
        return records, resp

    def heartbeat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        epoch: int | None = None,
        want_shutdown: bool = False,
        want_fence: bool = False,
        commit: bool = True,
    ) -> tuple[list[MetadataRecord], Any]:
        req = controller_pb2.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=self.epochs.get(broker_id, 0) if epoch is None else epoch,
            current_metadata_offset=self.image.offset if offset is None else offset,
            want_fence=want_fence,
            want_shutdown=want_shutdown,
        )
        return self.run(ctl.broker_heartbeat, req, self.heartbeats, commit=commit)

    def start_brokers(self, ids: Sequence[int], racks: Sequence[str | None] | None = None) -> None:
        """Register the brokers, then let each heartbeat caught up so it is unfenced."""
        for i, broker_id in enumerate(ids):
            _, resp = self.register(broker_id, rack=racks[i] if racks else None)
            assert resp.error.name == "NONE", resp.error
        for broker_id in ids:
            self.heartbeat(broker_id)
            assert not self.broker(broker_id).fenced

    def keep_alive(self, ids: Iterable[int]) -> None:
        for broker_id in ids:
            _, resp = self.heartbeat(broker_id)
            assert resp.error.name == "NONE"

    def fence_expired(self) -> list[MetadataRecord]:
        records = ctl.fence_expired_brokers(self.image, self.ctx(), self.heartbeats)
        self.commit(records)
        return records

    def broker(self, broker_id: int):  # -> BrokerRegistration
        reg = self.image.cluster.broker(broker_id)
        assert reg is not None
        return reg

    # ---- topics

    def create(
        self,
        name: str,
        partitions: int = -1,
        rf: int = -1,
        *,
        assignments: Sequence[Sequence[int]] | dict[int, Sequence[int]] | None = None,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
        commit: bool = True,
        expect: str | None = "NONE",
    ) -> tuple[list[MetadataRecord], Any]:
        """CreateTopics for one topic; asserts the outcome is ``expect`` unless that is None."""
        records, resp = self.run(
            ctl.create_topics,
            create_request((name, partitions, rf, assignments, configs), validate_only=validate_only),
            commit=commit,
        )
        assert len(resp.topics) == 1
        if expect is not None:
            assert resp.topics[0].error.name == expect, resp.topics[0].error
        return records, resp.topics[0]

    def topic(self, name: str) -> TopicImage:
        topic = self.image.topics.get_by_name(name)
        assert topic is not None, name
        return topic

    def part(self, name: str, pid: int = 0) -> PartitionRegistration:
        part = self.topic(name).partitions.get(pid)
        assert part is not None
        return part

    def alter_isr(
        self,
        name: str,
        pid: int,
        new_isr: Sequence[int],
        *,
        broker: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        broker_epoch: int | None = None,
        topic_id: str | None = None,
        commit: bool = True,
    ) -> tuple[list[MetadataRecord], Any]:
        """AlterPartition from ``broker`` (the current leader by default) with the current epochs."""
        part = self.part(name, pid) if topic_id is None else None
        broker = part.leader if broker is None else broker
        req = controller_pb2.AlterPartitionRequest(
            broker_id=broker,
            broker_epoch=self.epochs.get(broker, 0) if broker_epoch is None else broker_epoch,
            topics=[
                controller_pb2.AlterPartitionRequest.TopicData(
                    topic_id=topic_id or self.topic(name).topic_id,
                    partitions=[
                        controller_pb2.AlterPartitionRequest.PartitionData(
                            partition_index=pid,
                            leader_epoch=(part.leader_epoch if part else 0) if leader_epoch is None else leader_epoch,
                            partition_epoch=(part.partition_epoch if part else 0)
                            if partition_epoch is None
                            else partition_epoch,
                            new_isr=list(new_isr),
                        )
                    ],
                )
            ],
        )
        return self.run(ctl.alter_partition, req, commit=commit)

    def set_leader(self, name: str, pid: int, leader: int) -> None:
        """Move a leadership by committing a hand-written change (a test shortcut)."""
        self.commit([PartitionChangeRecord(partition_id=pid, topic_id=self.topic(name).topic_id, leader=leader)])

    def elect(
        self, election_type: int, *targets: tuple[str, Sequence[int]], commit: bool = True
    ) -> tuple[list[MetadataRecord], Any]:
        req = admin_pb2.ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=[admin_pb2.TopicPartitions(topic=t, partitions=list(ps)) for t, ps in targets],
        )
        return self.run(ctl.elect_leaders, req, commit=commit)

    def reassign(
        self, name: str, pid: int, replicas: Sequence[int] | None, commit: bool = True
    ) -> tuple[list[MetadataRecord], Any]:
        P = admin_pb2.AlterPartitionReassignmentsRequest.Partition
        part = (
            P(partition_index=pid, cancel=True) if replicas is None else P(partition_index=pid, replicas=list(replicas))
        )
        req = admin_pb2.AlterPartitionReassignmentsRequest(
            topics=[admin_pb2.AlterPartitionReassignmentsRequest.Topic(name=name, partitions=[part])]
        )
        return self.run(ctl.alter_partition_reassignments, req, commit=commit)

    def alter_configs(
        self,
        *resources: tuple[int, str, Sequence[tuple[str, int, str]]],
        validate_only: bool = False,
        commit: bool = True,
    ) -> tuple[list[MetadataRecord], Any]:
        Req = admin_pb2.IncrementalAlterConfigsRequest
        req = Req(
            validate_only=validate_only,
            resources=[
                Req.Resource(
                    resource=admin_pb2.ConfigResource(resource_type=rtype, resource_name=rname),
                    configs=[Req.Op(name=k, op=op, value=v) for k, op, v in ops],
                )
                for rtype, rname, ops in resources
            ],
        )
        return self.run(ctl.incremental_alter_configs, req, commit=commit)

    def describe_configs(
        self,
        rtype: int,
        name: str,
        keys: Sequence[str] = (),
        *,
        synonyms: bool = False,
        documentation: bool = False,
        broker_id: int | None = None,
    ) -> Any:
        Req = admin_pb2.DescribeConfigsRequest
        req = Req(
            resources=[
                Req.Resource(
                    resource=admin_pb2.ConfigResource(resource_type=rtype, resource_name=name),
                    config_names=list(keys),
                )
            ],
            include_synonyms=synonyms,
            include_documentation=documentation,
        )
        if broker_id is not None:
            req.broker_id = broker_id
        _, resp = self.run(ctl.describe_configs, req)
        assert len(resp.results) == 1
        return resp.results[0]


def create_request(*topics: tuple, validate_only: bool = False) -> admin_pb2.CreateTopicsRequest:
    """``topics``: ``(name, num_partitions, replication_factor, assignments, configs)`` tuples."""
    T = admin_pb2.CreateTopicsRequest.CreatableTopic
    out = []
    for name, partitions, rf, assignments, configs in topics:
        if isinstance(assignments, dict):
            items = list(assignments.items())
        else:
            items = list(enumerate(assignments or []))
        out.append(
            T(
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                configs=configs or {},
                assignments=[admin_pb2.ReplicaAssignment(partition_index=i, broker_ids=list(b)) for i, b in items],
            )
        )
    return admin_pb2.CreateTopicsRequest(topics=out, timeout_ms=30_000, validate_only=validate_only)


def of_type(records: Iterable[MetadataRecord], cls: type) -> list[Any]:
    return [r for r in records if isinstance(r, cls)]


def changes_by_partition(records: Iterable[MetadataRecord]) -> dict[int, PartitionChangeRecord]:
    out: dict[int, PartitionChangeRecord] = {}
    for r in of_type(records, PartitionChangeRecord):
        assert r.partition_id not in out, "one change per partition per decision"
        out[r.partition_id] = r
    return out


def cluster(
    n: int = 3, settings: dict[str, object] | None = None, *, seed: int = 7, racks: Sequence[str | None] | None = None
) -> Harness:
    h = Harness(settings, seed=seed)
    h.start_brokers(list(range(1, n + 1)), racks)
    return h


def assert_no_records(records: list[MetadataRecord]) -> None:
    assert records == []


# ================================================================================ register_broker


def test_new_registration_is_fenced_and_its_epoch_is_the_record_offset() -> None:
    h = Harness()
    h.commit([NoOpRecord(), NoOpRecord(), NoOpRecord()])
    assert h.next_offset == 3
    records, resp = h.register(1, rack="rack-a")
    assert resp.error.code == 0 and resp.error.name == "NONE"
    assert [type(r) for r in records] == [RegisterBrokerRecord]
    assert resp.broker_epoch == records[0].broker_epoch == 3
    reg = h.broker(1)
    assert reg.broker_epoch == 3 == h.image.offset  # the offset the record was committed at
    assert reg.fenced and not reg.in_controlled_shutdown
    assert reg.incarnation_id == "incarnation-1"
    assert reg.rack == "rack-a"
    assert reg.endpoints[0] == BrokerEndpoint("BROKER", "127.0.0.1", 9101, "PLAINTEXT")
    assert reg.log_dirs == ("/var/lib/kraftlog/1",)


def test_broker_without_rack_has_none() -> None:
    h = Harness()
    h.register(1)
    assert h.broker(1).rack is None


def test_same_incarnation_registering_again_is_idempotent() -> None:
    h = Harness()
    h.register(1)
    epoch = h.epochs[1]
    h.commit([NoOpRecord()])
    records, resp = h.register(1)
    assert records == [] and resp.error.name == "NONE" and resp.broker_epoch == epoch
    h.heartbeat(1)  # unfenced now; still the same registration
    assert not h.broker(1).fenced
    records, resp = h.register(1)
    assert records == [] and resp.broker_epoch == epoch and not h.broker(1).fenced


def test_other_incarnation_while_the_session_lives_is_a_duplicate_registration() -> None:
    h = cluster(1)
    h.tick(SESSION_MS)  # exactly at the timeout the session is still alive
    records, resp = h.register(1, incarnation="impostor", commit=False)
    assert records == []
    assert resp.error.name == "DUPLICATE_BROKER_REGISTRATION" and resp.error.code == 101
    assert h.broker(1).incarnation_id == "incarnation-1"


def test_new_incarnation_after_the_session_expired_gets_a_new_epoch() -> None:
    h = cluster(1)
    old = h.epochs[1]
    h.tick(SESSION_MS + 1)
    expected_epoch = h.next_offset
    records, resp = h.register(1, incarnation="restarted")
    assert resp.error.name == "NONE"
    assert isinstance(records[0], RegisterBrokerRecord)
    assert resp.broker_epoch == expected_epoch > old
    reg = h.broker(1)
    assert reg.incarnation_id == "restarted" and reg.broker_epoch == expected_epoch and reg.fenced
    # the old epoch is stale from now on
    _, hb = h.heartbeat(1, epoch=old, commit=False)
    assert hb.error.name == "STALE_BROKER_EPOCH"


def test_new_incarnation_after_fencing_registers_at_once() -> None:
    h = cluster(2)
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()
    assert h.broker(1).fenced
    records, resp = h.register(1, incarnation="second")
    assert resp.error.name == "NONE" and resp.broker_epoch == records[0].broker_epoch


def test_a_fenced_registration_can_be_replaced_while_its_session_lives() -> None:
    # Kafka: a fenced broker has no valid session (BrokerHeartbeatManager.hasValidSession).
    h = Harness()
    h.register(1)
    assert h.broker(1).fenced
    records, resp = h.register(1, incarnation="second")
    assert resp.error.name == "NONE" and h.broker(1).incarnation_id == "second"


def test_new_incarnation_takes_the_old_one_out_of_isrs_and_leaderships() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3], [2, 1, 3]])
    h.create("solo", assignments=[[1]])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2, 3])
    # broker 1 restarted and registers before the periodic fencing ran
    records, resp = h.register(1, incarnation="restarted")
    assert resp.error.name == "NONE" and resp.broker_epoch == records[0].broker_epoch
    assert h.broker(1).fenced
    p0, p1, p2 = h.part("t", 0), h.part("t", 1), h.part("solo", 0)
    assert (p0.leader, p0.isr) == (2, (2, 3))
    assert (p1.leader, p1.isr) == (2, (2, 3))
    assert (p2.leader, p2.isr) == (NO_LEADER, (1,))  # sole replica: offline, kept in the ISR
    # once caught up, the new incarnation is unfenced and leads its sole-replica partition again
    h.heartbeat(1)
    assert h.part("solo", 0).leader == 1


def test_wrong_cluster_id_is_inconsistent_cluster_id() -> None:
    h = Harness()
    records, resp = h.register(1, cluster_id="some-other-cluster")
    assert records == [] and resp.error.name == "INCONSISTENT_CLUSTER_ID" and resp.error.code == 104
    assert h.image.cluster.broker(1) is None


def test_negative_broker_id_is_an_invalid_request() -> None:
    h = Harness()
    records, resp = h.register(-1)
    assert records == [] and resp.error.name == "INVALID_REQUEST"


# ================================================================================ broker_heartbeat


def test_heartbeat_from_an_unknown_broker() -> None:
    h = Harness()
    records, resp = h.heartbeat(5, epoch=0)
    assert records == [] and resp.error.name == "BROKER_ID_NOT_REGISTERED" and resp.error.code == 102


def test_heartbeat_with_a_stale_epoch() -> None:
    h = Harness()
    h.register(1)
    for wrong in (h.epochs[1] - 1, h.epochs[1] + 1):
        records, resp = h.heartbeat(1, epoch=wrong)
        assert records == [] and resp.error.name == "STALE_BROKER_EPOCH" and resp.error.code == 77


def test_broker_stays_fenced_until_caught_up_with_its_registration() -> None:
    h = Harness()
    h.commit([NoOpRecord()])
    h.register(1)
    epoch = h.epochs[1]
    assert epoch == 1
    records, resp = h.heartbeat(1, offset=epoch - 1)
    assert records == [] and resp.error.name == "NONE"
    assert resp.is_fenced and not resp.is_caught_up and not resp.should_shutdown
    records, resp = h.heartbeat(1, offset=epoch)
    assert records == [UnfenceBrokerRecord(broker_id=1, broker_epoch=epoch)]
    assert resp.is_caught_up and not resp.is_fenced
    assert not h.broker(1).fenced
    records, resp = h.heartbeat(1)
    assert records == [] and not resp.is_fenced


def test_heartbeat_answer_carries_the_committed_metadata_offset() -> None:
    """The broker's metadata follower compares its source with this (issue 11, defect 4)."""
    h = Harness()
    h.commit([NoOpRecord()])
    h.register(1)
    committed = h.image.offset
    records, resp = h.heartbeat(1, offset=0)
    assert records == [] and resp.metadata_high_watermark == committed
    records, resp = h.heartbeat(1)  # unfences: its own record is not committed when the handler answers
    assert records and resp.metadata_high_watermark == committed
    _, resp = h.heartbeat(1)
    assert resp.metadata_high_watermark == h.image.offset == committed + 1
    _, resp = h.heartbeat(1, epoch=99)
    assert resp.error.name == "STALE_BROKER_EPOCH"


def test_unfencing_elects_leaders_for_offline_partitions_it_is_in_the_isr_of() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2], [3, 1], [2, 3]])
    h.alter_isr("t", 0, [1])  # leader 1 alone in the ISR
    h.alter_isr("t", 1, [3])  # leader 3 alone; 1 out of the ISR
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()
    p0, p1 = h.part("t", 0), h.part("t", 1)
    assert (p0.leader, p0.isr) == (NO_LEADER, (1,))
    assert (p1.leader, p1.isr) == (NO_LEADER, (3,))
    epoch0 = p0.leader_epoch
    records, resp = h.heartbeat(1)
    assert isinstance(records[0], UnfenceBrokerRecord)
    changes = changes_by_partition(records)
    assert set(changes) == {0}  # p1: 1 is a replica but not in the ISR, 3 is fenced
    p0 = h.part("t", 0)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, (1,), epoch0 + 1)
    assert h.part("t", 1).leader == NO_LEADER
    assert not resp.is_fenced


def test_unfencing_with_unclean_election_enabled_elects_an_out_of_isr_replica() -> None:
    h = cluster(3)
    h.create("t", assignments=[[3, 1]], configs={"unclean.leader.election.enable": "false"})
    h.create("u", assignments=[[3, 1]], configs={"unclean.leader.election.enable": "true"})
    h.alter_isr("t", 0, [3])
    h.alter_isr("u", 0, [3])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()  # 1 and 3 fenced: both partitions offline
    assert h.part("t").leader == h.part("u").leader == NO_LEADER
    h.heartbeat(1)
    assert h.part("t").leader == NO_LEADER
    assert (h.part("u").leader, h.part("u").isr) == (1, (1,))


def test_controlled_shutdown_moves_leaderships_and_leaves_isrs() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3], [2, 1, 3], [1, 2, 3], [3, 2, 1], [1, 3, 2]])
    h.alter_isr("t", 2, [1])  # the broker alone in the ISR
    h.create("u", assignments=[[3, 2]])
    before = h.topic("t").partitions
    untouched = h.part("u")
    records, resp = h.heartbeat(1, want_shutdown=True)
    assert resp.error.name == "NONE"
    assert records[0] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=h.epochs[1], in_controlled_shutdown=1)
    assert not resp.should_shutdown  # it led partitions in the image the heartbeat was judged on
    reg = h.broker(1)
    assert reg.in_controlled_shutdown and not reg.fenced
    p = h.topic("t").partitions
    # leadership moved to the first other ISR replica in assignment order, leader epoch bumped
    assert (p[0].leader, p[0].isr, p[0].leader_epoch) == (2, (2, 3), before[0].leader_epoch + 1)
    assert (p[4].leader, p[4].isr, p[4].leader_epoch) == (3, (3, 2), before[4].leader_epoch + 1)
    # a follower left the ISR; the leader did not change, so neither did the leader epoch
    assert (p[1].leader, p[1].isr, p[1].leader_epoch) == (2, (2, 3), before[1].leader_epoch)
    assert p[1].partition_epoch == before[1].partition_epoch + 1
    # the broker was the whole ISR: the partition goes offline, the ISR is never emptied
    assert (p[2].leader, p[2].isr) == (NO_LEADER, (1,))
    assert (p[3].leader, p[3].isr) == (3, (3, 2))
    # a partition the broker has no replica of: the very same object
    assert h.part("u") is untouched
    assert h.image.topics.partitions_led_by(1) == []
    # next heartbeat (the moves are committed): shutdown granted, and the broker is fenced
    records, resp = h.heartbeat(1, want_shutdown=True)
    assert resp.should_shutdown and resp.is_fenced
    assert records == [FenceBrokerRecord(broker_id=1, broker_epoch=h.epochs[1])]
    assert h.broker(1).fenced
    # and stays granted
    records, resp = h.heartbeat(1, want_shutdown=True)
    assert records == [] and resp.should_shutdown


def test_controlled_shutdown_of_a_broker_leading_nothing_is_granted_at_once() -> None:
    h = cluster(3)
    h.create("t", assignments=[[2, 1, 3]])
    records, resp = h.heartbeat(1, want_shutdown=True)
    assert resp.should_shutdown and resp.is_fenced
    assert isinstance(records[0], BrokerRegistrationChangeRecord)
    assert h.part("t").isr == (2, 3) and h.broker(1).in_controlled_shutdown


def test_a_broker_in_controlled_shutdown_gets_no_leadership_and_is_not_unfenced_again() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2]])
    h.alter_isr("t", 0, [1])
    h.heartbeat(1, want_shutdown=True)
    assert (h.part("t").leader, h.part("t").isr) == (NO_LEADER, (1,))
    h.heartbeat(1, want_shutdown=True)
    assert h.broker(1).fenced
    records, resp = h.heartbeat(1)  # changed its mind: the registration stays shut down
    assert records == [] and resp.is_fenced
    assert h.part("t").leader == NO_LEADER
    # a new incarnation registers at once (the old one was fenced), and leads once caught up
    _, reg = h.register(1, incarnation="after-restart")
    assert reg.error.name == "NONE"
    h.heartbeat(1)
    assert h.part("t").leader == 1


def test_shutdown_of_a_fenced_broker_is_granted_without_records() -> None:
    h = Harness()
    h.register(1)
    records, resp = h.heartbeat(1, offset=-1, want_shutdown=True)
    assert records == [] and resp.should_shutdown and resp.is_fenced


def test_want_fence_fences_and_moves_leaderships() -> None:
    h = cluster(2)
    h.create("t", assignments=[[1, 2]])
    records, resp = h.heartbeat(1, want_fence=True)
    assert records[0] == FenceBrokerRecord(broker_id=1, broker_epoch=h.epochs[1])
    assert resp.is_fenced and h.broker(1).fenced
    assert (h.part("t").leader, h.part("t").isr) == (2, (2,))


def test_no_heartbeat_records_when_nothing_changes() -> None:
    h = cluster(2)
    records, resp = h.heartbeat(1)
    assert records == [] and resp.is_caught_up and not resp.is_fenced and not resp.should_shutdown


# ================================================================================ fence_expired_brokers


def test_silent_broker_is_fenced_after_the_session_timeout() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3], [2, 1, 3], [3, 2, 1]])
    h.create("u", assignments=[[2, 3]])
    before = h.topic("t").partitions
    untouched = h.part("u")
    h.tick(5000)
    h.keep_alive([2, 3])
    h.tick(SESSION_MS - 5000)
    assert h.fence_expired() == []  # silent for exactly the timeout: still alive
    h.tick(1)
    records = h.fence_expired()
    assert of_type(records, FenceBrokerRecord) == [FenceBrokerRecord(broker_id=1, broker_epoch=h.epochs[1])]
    assert records[0] == FenceBrokerRecord(broker_id=1, broker_epoch=h.epochs[1])
    assert h.broker(1).fenced
    p = h.topic("t").partitions
    assert (p[0].leader, p[0].isr, p[0].leader_epoch) == (2, (2, 3), before[0].leader_epoch + 1)
    assert (p[1].leader, p[1].isr, p[1].leader_epoch) == (2, (2, 3), before[1].leader_epoch)
    assert (p[2].leader, p[2].isr) == (3, (3, 2))
    assert h.part("u") is untouched
    assert h.fence_expired() == []  # a fenced broker is not fenced again


def test_new_leader_is_the_first_live_isr_replica_in_assignment_order() -> None:
    h = cluster(4)
    h.create("t", assignments=[[1, 4, 3, 2]])
    h.alter_isr("t", 0, [1, 2])
    h.alter_isr("t", 0, [1, 2, 3, 4])  # ISR order differs from assignment order
    assert h.part("t").isr == (1, 2, 3, 4)
    h.tick(SESSION_MS + 1)
    h.keep_alive([2, 3])
    h.fence_expired()  # 1 and 4 fenced
    assert (h.part("t").leader, h.part("t").isr) == (3, (2, 3))


def test_partition_whose_only_isr_member_is_fenced_goes_offline_keeping_it() -> None:
    h = cluster(2)
    h.create("t", assignments=[[1, 2]])
    h.alter_isr("t", 0, [1])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()
    part = h.part("t")
    assert (part.leader, part.isr) == (NO_LEADER, (1,))
    resp = ctl.describe_topics(h.image, admin_pb2.DescribeTopicsRequest(names=["t"]))
    desc = resp.topics[0].partitions[0]
    assert desc.leader_id == -1 and list(desc.isr) == [1] and list(desc.offline_replicas) == [1]


@pytest.mark.parametrize(
    "node_unclean, topic_unclean, elected",
    [
        (False, None, False),
        (True, None, True),
        (False, "true", True),
        (True, "false", False),  # the topic config wins over the node's
    ],
)
def test_unclean_election_on_fencing(node_unclean: bool, topic_unclean: str | None, elected: bool) -> None:
    h = cluster(2, {"unclean.leader.election.enable": node_unclean})
    configs = {} if topic_unclean is None else {"unclean.leader.election.enable": topic_unclean}
    h.create("t", assignments=[[1, 2]], configs=configs)
    h.alter_isr("t", 0, [1])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()
    part = h.part("t")
    if elected:
        assert (part.leader, part.isr) == (2, (2,))  # live out-of-ISR replica; ISR shrinks to it
    else:
        assert (part.leader, part.isr) == (NO_LEADER, (1,))


def test_several_brokers_expiring_at_once() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3], [2, 3, 1]])
    h.tick(SESSION_MS + 1)
    h.keep_alive([3])
    records = h.fence_expired()
    assert [r.broker_id for r in of_type(records, FenceBrokerRecord)] == [1, 2]
    assert (h.part("t", 0).leader, h.part("t", 0).isr) == (3, (3,))
    assert (h.part("t", 1).leader, h.part("t", 1).isr) == (3, (3,))


def test_reset_gives_every_broker_a_fresh_session_after_failover() -> None:
    h = cluster(3)
    h.tick(60_000)  # the brokers were silent while no controller was active
    new_active = BrokerHeartbeats()
    new_active.reset(h.image.cluster.broker_ids(), h.now)
    assert ctl.fence_expired_brokers(h.image, h.ctx(), new_active) == []
    h.tick(SESSION_MS)
    assert ctl.fence_expired_brokers(h.image, h.ctx(), new_active) == []
    new_active.touch(2, h.now)
    h.tick(1)
    records = ctl.fence_expired_brokers(h.image, h.ctx(), new_active)
    assert [r.broker_id for r in of_type(records, FenceBrokerRecord)] == [1, 3]
    # the old table would have fenced everyone at once
    assert len(of_type(ctl.fence_expired_brokers(h.image, h.ctx(), h.heartbeats), FenceBrokerRecord)) == 3


def test_heartbeat_table_basics() -> None:
    hb = BrokerHeartbeats()
    hb.touch(1, 100)
    assert hb.is_alive(1, 100 + SESSION_MS, SESSION_MS)
    assert not hb.is_alive(1, 101 + SESSION_MS, SESSION_MS)
    assert not hb.is_alive(2, 100, SESSION_MS)
    assert hb.expired([1], 101 + SESSION_MS, SESSION_MS) == [1]
    hb.forget(1)
    assert not hb.is_alive(1, 100, SESSION_MS)


# ================================================================================ create_topics


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "a" * 250,
        "has space",
        "slash/name",
        "colon:name",
        "ünïcödé",
        "topic\n",
        "tab\tname",
        "star*",
        "comma,name",
    ],
)
def test_illegal_topic_names_are_invalid_topic_exception(name: str) -> None:
    h = cluster(1)
    records, res = h.create(name, 1, 1, expect=None)
    assert records == []
    assert res.error.name == "INVALID_TOPIC_EXCEPTION" and res.error.code == 17
    assert ctl.validate_topic_name(name) is not None


@pytest.mark.parametrize("name", ["a" * 249, "Orders.v1_eu-west", "...", "_internal", "-", "9"])
def test_legal_topic_names(name: str) -> None:
    h = cluster(1)
    _, res = h.create(name, 1, 1)
    assert res.error.name == "NONE"
    assert ctl.validate_topic_name(name) is None


def test_dot_underscore_collision_is_refused() -> None:
    h = cluster(1)
    h.create("metrics.cpu", 1, 1)
    records, res = h.create("metrics_cpu", 1, 1, expect=None)
    assert records == [] and res.error.name == "INVALID_TOPIC_EXCEPTION"
    assert "metrics.cpu" in res.error.message
    # the same collision inside one request
    records, resp = h.run(ctl.create_topics, create_request(("x.y", 1, 1, None, None), ("x_y", 1, 1, None, None)))
    assert [t.error.name for t in resp.topics] == ["NONE", "INVALID_TOPIC_EXCEPTION"]
    # and validate_only judges the request the same way
    _, resp = h.run(
        ctl.create_topics, create_request(("p.q", 1, 1, None, None), ("p_q", 1, 1, None, None), validate_only=True)
    )
    assert [t.error.name for t in resp.topics] == ["NONE", "INVALID_TOPIC_EXCEPTION"]


def test_duplicate_names_in_one_request_are_invalid_request() -> None:
    h = cluster(1)
    records, resp = h.run(
        ctl.create_topics,
        create_request(("dup", 1, 1, None, None), ("ok", 1, 1, None, None), ("dup", 2, 1, None, None)),
    )
    assert [(t.name, t.error.name) for t in resp.topics] == [
        ("dup", "INVALID_REQUEST"),
        ("ok", "NONE"),
        ("dup", "INVALID_REQUEST"),
    ]
    assert [r.name for r in of_type(records, TopicRecord)] == ["ok"]


def test_existing_topic_is_topic_already_exists() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    records, res = h.create("t", 1, 1, expect=None)
    assert records == [] and res.error.name == "TOPIC_ALREADY_EXISTS" and res.error.code == 36
    _, res = h.create("t", 1, 1, validate_only=True, expect=None)
    assert res.error.name == "TOPIC_ALREADY_EXISTS"


@pytest.mark.parametrize("partitions", [0, -2, -100])
def test_partition_count_below_one_is_invalid_partitions(partitions: int) -> None:
    h = cluster(3)
    records, res = h.create("t", partitions, 1, expect=None)
    assert records == [] and res.error.name == "INVALID_PARTITIONS" and res.error.code == 37


@pytest.mark.parametrize("rf", [0, -2, 4])
def test_bad_replication_factor_is_invalid_replication_factor(rf: int) -> None:
    h = cluster(3)
    records, res = h.create("t", 3, rf, expect=None)
    assert records == [] and res.error.name == "INVALID_REPLICATION_FACTOR" and res.error.code == 38


def test_replication_factor_counts_only_unfenced_brokers() -> None:
    h = cluster(3)
    h.heartbeat(3, want_fence=True)
    _, res = h.create("t", 1, 3, expect=None)
    assert res.error.name == "INVALID_REPLICATION_FACTOR"
    _, res = h.create("t", 1, 2)
    assert res.error.name == "NONE"
    h.heartbeat(2, want_shutdown=True)  # shutting down: not a placement target either
    _, res = h.create("u", 1, 2, expect=None)
    assert res.error.name == "INVALID_REPLICATION_FACTOR"


def test_defaults_come_from_num_partitions_and_default_replication_factor() -> None:
    h = cluster(3, {"num.partitions": 6, "default.replication.factor": 2})
    records, res = h.create("t")  # -1 / -1
    assert res.error.name == "NONE" and (res.num_partitions, res.replication_factor) == (6, 2)
    topic = h.topic("t")
    assert topic.partition_count == 6
    assert all(len(p.replicas) == 2 for p in topic.partitions.values())
    _, res = h.create("u", -1, 3, expect=None)
    assert (res.num_partitions, res.replication_factor) == (6, 3)
    _, res = h.create("v", 2, -1, expect=None)
    assert (res.num_partitions, res.replication_factor) == (2, 2)


def test_created_topic_records_and_partition_state() -> None:
    h = cluster(4)
    records, res = h.create("orders", 8, 3, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    assert res.error.name == "NONE" and res.num_partitions == 8 and res.replication_factor == 3
    assert isinstance(records[0], TopicRecord) and records[0].name == "orders"
    assert records[0].topic_id == res.topic_id
    parts = of_type(records, PartitionRecord)
    assert [p.partition_id for p in parts] == list(range(8))
    assert of_type(records, ConfigRecord) == [
        ConfigRecord(resource_type=TOPIC, resource_name="orders", name="cleanup.policy", value="compact"),
        ConfigRecord(resource_type=TOPIC, resource_name="orders", name="retention.ms", value="3600000"),
    ]
    topic = h.topic("orders")
    assert topic.topic_id == res.topic_id
    for p in topic.partitions.values():
        assert len(set(p.replicas)) == 3
        assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
        assert not p.is_reassigning
    # leaders spread evenly: 8 partitions over 4 brokers -> 2 each; replicas too: 6 each
    assert Counter(p.leader for p in topic.partitions.values()) == {1: 2, 2: 2, 3: 2, 4: 2}
    assert Counter(r for p in topic.partitions.values() for r in p.replicas) == {1: 6, 2: 6, 3: 6, 4: 6}
    assert dict(h.image.configs.topic_config("orders")) == {"retention.ms": "3600000", "cleanup.policy": "compact"}


def test_placement_is_kafkas_and_uses_the_injected_rng() -> None:
    h = cluster(4)
    records, _ = h.create("t", 6, 2, commit=False)
    expected = placement.assign_replicas({1: None, 2: None, 3: None, 4: None}, 6, 2, random.Random(7))
    assert {p.partition_id: list(p.replicas) for p in of_type(records, PartitionRecord)} == expected


def test_fenced_and_shutting_down_brokers_get_no_replicas() -> None:
    h = cluster(5)
    h.heartbeat(4, want_fence=True)
    h.heartbeat(5, want_shutdown=True)
    _, res = h.create("t", 12, 3)
    assert res.error.name == "NONE"
    used = {r for p in h.topic("t").partitions.values() for r in p.replicas}
    assert used == {1, 2, 3}


def test_rack_aware_placement_spreads_replicas_over_racks() -> None:
    h = cluster(4, racks=["a", "a", "b", "b"])
    _, res = h.create("t", 8, 2)
    assert res.error.name == "NONE"
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for p in h.topic("t").partitions.values():
        assert {racks[r] for r in p.replicas} == {"a", "b"}


def test_mixed_racks_are_refused() -> None:
    h = cluster(3, racks=["a", None, "b"])
    records, res = h.create("t", 3, 2, expect=None)
    assert records == [] and res.error.name == "INVALID_REPLICA_ASSIGNMENT"


def test_explicit_assignment() -> None:
    h = cluster(4)
    records, res = h.create("t", assignments=[[3, 1], [1, 4], [4, 2]])
    assert res.error.name == "NONE" and (res.num_partitions, res.replication_factor) == (3, 2)
    assert [(p.replicas, p.isr, p.leader) for p in of_type(records, PartitionRecord)] == [
        ((3, 1), (3, 1), 3),
        ((1, 4), (1, 4), 1),
        ((4, 2), (4, 2), 4),
    ]


def test_explicit_assignment_with_a_fenced_broker_leaves_it_out_of_the_isr() -> None:
    h = cluster(3)
    h.heartbeat(1, want_fence=True)
    _, res = h.create("t", assignments=[[1, 2], [2, 3]])
    assert res.error.name == "NONE"
    assert (h.part("t", 0).leader, h.part("t", 0).isr) == (2, (2,))
    records, res = h.create("u", assignments=[[1]], expect=None)
    assert records == [] and res.error.name == "INVALID_REPLICA_ASSIGNMENT"


@pytest.mark.parametrize(
    "assignments",
    [
        {0: [1, 2], 2: [2, 3]},  # not consecutive
        {1: [1, 2], 2: [2, 3]},  # not 0-based
        [[1, 1]],  # a broker twice
        [[1, 9]],  # an unregistered broker
        [[1, 2], [3]],  # inconsistent replication factor
        [[]],  # empty replica list
        [(0, [1, 2]), (0, [2, 3])],  # the same partition twice
    ],
)
def test_bad_explicit_assignments_are_invalid_replica_assignment(assignments: Any) -> None:
    h = cluster(3)
    if isinstance(assignments, list) and assignments and isinstance(assignments[0], tuple):
        T = admin_pb2.CreateTopicsRequest.CreatableTopic
        req = admin_pb2.CreateTopicsRequest(
            topics=[
                T(
                    name="t",
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=[admin_pb2.ReplicaAssignment(partition_index=i, broker_ids=b) for i, b in assignments],
                )
            ]
        )
        records, resp = h.run(ctl.create_topics, req)
        res = resp.topics[0]
    else:
        records, res = h.create("t", assignments=assignments, expect=None)
    assert records == [] and res.error.name == "INVALID_REPLICA_ASSIGNMENT" and res.error.code == 39


@pytest.mark.parametrize("partitions, rf", [(2, -1), (-1, 2), (2, 2)])
def test_explicit_assignment_with_counts_set_is_invalid_request(partitions: int, rf: int) -> None:
    h = cluster(3)
    records, res = h.create("t", partitions, rf, assignments=[[1, 2], [2, 3]], expect=None)
    assert records == [] and res.error.name == "INVALID_REQUEST" and res.error.code == 42


def test_validate_only_writes_nothing_but_answers_like_a_real_create() -> None:
    h = cluster(3)
    image = h.image
    records, res = h.create("t", 4, 2, configs={"retention.ms": "1000"}, validate_only=True, expect=None)
    assert records == [] and h.image is image
    assert res.error.name == "NONE" and (res.num_partitions, res.replication_factor) == (4, 2)
    assert res.topic_id
    _, res = h.create("u", 4, 9, validate_only=True, expect=None)
    assert res.error.name == "INVALID_REPLICATION_FACTOR"
    _, res = h.create("v", 1, 1, configs={"retention.ms": "soon"}, validate_only=True, expect=None)
    assert res.error.name == "INVALID_CONFIG"
    assert h.image.topics.topic_count == 0


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.ms": "a week"},
        {"cleanup.policy": "shred"},
        {"min.insync.replicas": "0"},
        {"no.such.config": "1"},
        {"log.retention.ms": "1000"},  # a broker key, not a topic key
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        {"cleanup.policy": ""},  # the log accepts no topic without a cleanup policy
    ],
)
def test_bad_topic_configs_are_invalid_config(configs: dict[str, str]) -> None:
    h = cluster(1)
    records, res = h.create("t", 1, 1, configs=configs, expect=None)
    assert records == [] and res.error.name == "INVALID_CONFIG" and res.error.code == 40
    assert h.image.topics.get_by_name("t") is None


def test_one_failed_topic_does_not_stop_the_others() -> None:
    h = cluster(2)
    records, resp = h.run(
        ctl.create_topics, create_request(("a", 1, 1, None, None), ("b", 1, 5, None, None), ("c", 2, 2, None, None))
    )
    assert [t.error.name for t in resp.topics] == ["NONE", "INVALID_REPLICATION_FACTOR", "NONE"]
    assert sorted(h.image.topics.by_name) == ["a", "c"]


# ================================================================================ delete_topics


def test_delete_topic_by_name_removes_it_and_its_configs() -> None:
    h = cluster(2)
    _, created = h.create("t", 2, 2, configs={"retention.ms": "1000"})
    records, resp = h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(names=["t"]))
    assert records == [RemoveTopicRecord(topic_id=created.topic_id)]
    assert [(r.name, r.topic_id, r.error.name) for r in resp.topics] == [("t", created.topic_id, "NONE")]
    assert h.image.topics.get_by_name("t") is None
    assert dict(h.image.configs.topic_config("t")) == {}


def test_delete_topic_by_id() -> None:
    h = cluster(1)
    _, created = h.create("t", 1, 1)
    records, resp = h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(topic_ids=[created.topic_id]))
    assert records == [RemoveTopicRecord(topic_id=created.topic_id)]
    assert (resp.topics[0].name, resp.topics[0].error.name) == ("t", "NONE")
    assert h.image.topics.get_by_id(created.topic_id) is None


def test_delete_unknown_topics() -> None:
    h = cluster(1)
    records, resp = h.run(
        ctl.delete_topics,
        admin_pb2.DeleteTopicsRequest(names=["nope"], topic_ids=["00000000-0000-4000-8000-000000000000"]),
    )
    assert records == []
    assert [r.error.name for r in resp.topics] == ["UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID"]


def test_delete_disabled_is_topic_deletion_disabled() -> None:
    h = cluster(1, {"delete.topic.enable": False})
    h.create("t", 1, 1)
    records, resp = h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(names=["t"]))
    assert records == [] and resp.topics[0].error.name == "TOPIC_DELETION_DISABLED"
    assert resp.topics[0].error.code == 73
    assert h.image.topics.get_by_name("t") is not None


def test_one_topic_named_by_name_and_by_id_is_removed_once() -> None:
    h = cluster(1)
    _, created = h.create("t", 1, 1)
    records, resp = h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(names=["t"], topic_ids=[created.topic_id]))
    assert records == [RemoveTopicRecord(topic_id=created.topic_id)]
    assert [r.error.name for r in resp.topics] == ["NONE", "NONE"]


def test_a_name_repeated_in_one_delete_request_is_invalid_request() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    h.create("u", 1, 1)
    records, resp = h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(names=["t", "u", "t"]))
    assert [(r.name, r.error.name) for r in resp.topics] == [
        ("t", "INVALID_REQUEST"),
        ("u", "NONE"),
        ("t", "INVALID_REQUEST"),
    ]
    assert len(records) == 1 and h.image.topics.get_by_name("t") is not None


def test_recreated_topic_gets_a_new_id_and_default_configs() -> None:
    h = cluster(1)
    _, first = h.create("t", 1, 1, configs={"retention.ms": "1000"})
    h.run(ctl.delete_topics, admin_pb2.DeleteTopicsRequest(names=["t"]))
    _, second = h.create("t", 1, 1)
    assert second.error.name == "NONE" and second.topic_id != first.topic_id
    assert dict(h.image.configs.topic_config("t")) == {}


# ================================================================================ create_partitions


def grow(
    h: Harness, name: str, count: int, assignments: Sequence[Sequence[int]] | None = None, validate_only: bool = False
) -> tuple[list[MetadataRecord], Any]:
    T = admin_pb2.CreatePartitionsRequest.Topic
    req = admin_pb2.CreatePartitionsRequest(
        validate_only=validate_only,
        topics=[
            T(
                name=name,
                count=count,
                assignments=[admin_pb2.ReplicaAssignment(broker_ids=list(b)) for b in assignments or []],
            )
        ],
    )
    records, resp = h.run(ctl.create_partitions, req)
    assert len(resp.results) == 1
    return records, resp.results[0]


def test_growing_a_topic_continues_its_assignment() -> None:
    h = cluster(4)
    brokers = {1: None, 2: None, 3: None, 4: None}
    whole = placement.assign_replicas(brokers, 8, 3, start_index=1)  # start == shift, as Kafka fixes it
    h.create("t", assignments=[whole[p] for p in range(3)])
    records, res = grow(h, "t", 8)
    assert res.error.name == "NONE"
    assert [p.partition_id for p in of_type(records, PartitionRecord)] == [3, 4, 5, 6, 7]
    topic = h.topic("t")
    assert {pid: list(p.replicas) for pid, p in topic.partitions.items()} == whole
    for pid in range(3, 8):
        p = topic.partitions[pid]
        assert p.leader == p.replicas[0] and p.isr == p.replicas and p.leader_epoch == 0


def test_growing_a_randomly_placed_topic_keeps_its_replication_factor() -> None:
    h = cluster(3)
    h.create("t", 2, 2)
    _, res = grow(h, "t", 5)
    assert res.error.name == "NONE"
    assert all(len(p.replicas) == 2 for p in h.topic("t").partitions.values())
    assert h.topic("t").partition_count == 5


@pytest.mark.parametrize("count", [3, 2, 0])
def test_count_not_above_current_is_invalid_partitions(count: int) -> None:
    h = cluster(2)
    h.create("t", 3, 1)
    records, res = grow(h, "t", count)
    assert records == [] and res.error.name == "INVALID_PARTITIONS"


def test_growing_an_unknown_topic() -> None:
    h = cluster(1)
    records, res = grow(h, "ghost", 2)
    assert records == [] and res.error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_growing_with_explicit_assignments() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2]])
    records, res = grow(h, "t", 3, [[2, 3], [3, 1]])
    assert res.error.name == "NONE"
    assert [(p.partition_id, p.replicas) for p in of_type(records, PartitionRecord)] == [(1, (2, 3)), (2, (3, 1))]


@pytest.mark.parametrize(
    "assignments",
    [
        [[2, 3]],  # one assignment for two new partitions
        [[2, 3], [3, 3]],  # a broker twice
        [[2, 3], [3, 9]],  # unregistered broker
        [[2, 3, 1], [3, 1, 2]],  # not the topic's replication factor
        [[2], [3]],  # not the topic's replication factor either
    ],
)
def test_bad_growth_assignments_are_invalid_replica_assignment(assignments: list[list[int]]) -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2]])
    records, res = grow(h, "t", 3, assignments)
    assert records == [] and res.error.name == "INVALID_REPLICA_ASSIGNMENT"
    assert h.topic("t").partition_count == 1


def test_growing_validate_only_writes_nothing() -> None:
    h = cluster(2)
    h.create("t", 1, 1)
    records, res = grow(h, "t", 4, validate_only=True)
    assert records == [] and res.error.name == "NONE" and h.topic("t").partition_count == 1


# ================================================================================ alter_partition


@pytest.fixture
def three() -> Harness:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3]])
    return h


def test_alter_partition_shrink_and_expand(three: Harness) -> None:
    h = three
    records, resp = h.alter_isr("t", 0, [1, 2])
    assert records == [PartitionChangeRecord(partition_id=0, topic_id=h.topic("t").topic_id, isr=(1, 2))]
    assert resp.error.name == "NONE"
    data = resp.topics[0].partitions[0]
    assert data.error.name == "NONE"
    assert (data.leader_id, data.leader_epoch, list(data.isr), data.partition_epoch) == (1, 0, [1, 2], 1)
    part = h.part("t")
    assert (part.isr, part.leader_epoch, part.partition_epoch) == ((1, 2), 0, 1)
    records, resp = h.alter_isr("t", 0, [1, 2, 3])
    data = resp.topics[0].partitions[0]
    assert (list(data.isr), data.leader_epoch, data.partition_epoch) == ([1, 2, 3], 0, 2)


def test_alter_partition_without_change_writes_nothing(three: Harness) -> None:
    records, resp = three.alter_isr("t", 0, [1, 2, 3])
    assert records == []
    data = resp.topics[0].partitions[0]
    assert data.error.name == "NONE" and data.partition_epoch == 0


def test_alter_partition_with_a_stale_broker_epoch(three: Harness) -> None:
    records, resp = three.alter_isr("t", 0, [1], broker_epoch=three.epochs[1] - 1)
    assert records == [] and resp.error.name == "STALE_BROKER_EPOCH"


def test_alter_partition_from_a_non_leader(three: Harness) -> None:
    records, resp = three.alter_isr("t", 0, [2, 3], broker=2)
    assert records == [] and resp.topics[0].partitions[0].error.name == "NOT_LEADER_OR_FOLLOWER"


def test_deposed_leader_is_fenced_by_its_leader_epoch(three: Harness) -> None:
    h = three
    stale = h.part("t")
    h.heartbeat(1, want_fence=True)  # leadership moves to 2
    h.heartbeat(1)  # 1 comes back (unfenced, not in the ISR, not leader)
    assert h.part("t").leader == 2 and not h.broker(1).fenced
    records, resp = h.alter_isr(
        "t", 0, [1, 3], broker=1, leader_epoch=stale.leader_epoch, partition_epoch=stale.partition_epoch
    )
    assert records == [] and resp.topics[0].partitions[0].error.name == "FENCED_LEADER_EPOCH"
    # the new leader with the old leader epoch too
    records, resp = h.alter_isr("t", 0, [2, 3], leader_epoch=stale.leader_epoch)
    assert records == [] and resp.topics[0].partitions[0].error.name == "FENCED_LEADER_EPOCH"


def test_alter_partition_with_a_stale_partition_epoch(three: Harness) -> None:
    h = three
    h.alter_isr("t", 0, [1, 2])
    records, resp = h.alter_isr("t", 0, [1], partition_epoch=0)
    assert records == [] and resp.topics[0].partitions[0].error.name == "INVALID_UPDATE_VERSION"


def test_alter_partition_with_epochs_from_the_future_is_not_controller(three: Harness) -> None:
    records, resp = three.alter_isr("t", 0, [1, 2], leader_epoch=5)
    assert records == [] and resp.topics[0].partitions[0].error.name == "NOT_CONTROLLER"
    records, resp = three.alter_isr("t", 0, [1, 2], partition_epoch=5)
    assert records == [] and resp.topics[0].partitions[0].error.name == "NOT_CONTROLLER"


@pytest.mark.parametrize("isr", [[1, 4], [2, 3], [1, 1, 2], []])
def test_alter_partition_with_an_impossible_isr_is_invalid_request(isr: list[int]) -> None:
    h = cluster(4)
    h.create("t", assignments=[[1, 2, 3]])
    records, resp = h.alter_isr("t", 0, isr)
    assert records == [] and resp.topics[0].partitions[0].error.name == "INVALID_REQUEST"


def test_adding_a_fenced_or_shutting_down_replica_is_ineligible(three: Harness) -> None:
    h = three
    h.alter_isr("t", 0, [1])
    h.heartbeat(3, want_fence=True)
    records, resp = h.alter_isr("t", 0, [1, 3])
    assert records == [] and resp.topics[0].partitions[0].error.name == "INELIGIBLE_REPLICA"
    assert resp.topics[0].partitions[0].error.code == 107
    h.heartbeat(2, want_shutdown=True)
    records, resp = h.alter_isr("t", 0, [1, 2])
    assert records == [] and resp.topics[0].partitions[0].error.name == "INELIGIBLE_REPLICA"
    assert h.part("t").isr == (1,)


def test_alter_partition_unknown_topic_or_partition(three: Harness) -> None:
    records, resp = three.alter_isr("t", 0, [1], topic_id="00000000-0000-4000-8000-000000000000", broker=1)
    assert records == [] and resp.topics[0].partitions[0].error.name == "UNKNOWN_TOPIC_ID"
    records, resp = three.alter_isr("t", 7, [1], topic_id=three.topic("t").topic_id, broker=1)
    assert records == [] and resp.topics[0].partitions[0].error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_alter_partition_handles_several_partitions_independently() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2], [1, 3], [2, 1]])
    topic = h.topic("t")
    PD = controller_pb2.AlterPartitionRequest.PartitionData
    req = controller_pb2.AlterPartitionRequest(
        broker_id=1,
        broker_epoch=h.epochs[1],
        topics=[
            controller_pb2.AlterPartitionRequest.TopicData(
                topic_id=topic.topic_id,
                partitions=[
                    PD(partition_index=0, leader_epoch=0, partition_epoch=0, new_isr=[1]),
                    PD(partition_index=1, leader_epoch=0, partition_epoch=3, new_isr=[1]),
                    PD(partition_index=2, leader_epoch=0, partition_epoch=0, new_isr=[1]),
                ],
            )
        ],
    )
    records, resp = h.run(ctl.alter_partition, req)
    assert [p.error.name for p in resp.topics[0].partitions] == ["NONE", "NOT_CONTROLLER", "NOT_LEADER_OR_FOLLOWER"]
    assert len(records) == 1 and h.part("t", 0).isr == (1,)


# ================================================================================ elect_leaders


def test_preferred_election_not_needed_when_the_preferred_replica_leads(three: Harness) -> None:
    records, resp = three.elect(0, ("t", [0]))
    assert records == [] and resp.results[0].error.name == "ELECTION_NOT_NEEDED"


def test_preferred_election_out_of_isr_then_successful(three: Harness) -> None:
    h = three
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)  # back, but not in the ISR
    records, resp = h.elect(0, ("t", [0]))
    assert records == [] and resp.results[0].error.name == "PREFERRED_LEADER_NOT_AVAILABLE"
    h.alter_isr("t", 0, [2, 3, 1])  # leader 2 lets 1 back into the ISR
    before = h.part("t")
    records, resp = h.elect(0, ("t", [0]))
    assert resp.results[0].error.name == "NONE"
    after = h.part("t")
    assert after.leader == 1 and after.leader_epoch == before.leader_epoch + 1 and after.isr == before.isr


def test_preferred_election_when_the_preferred_replica_is_fenced() -> None:
    h = cluster(2)
    h.create("t", assignments=[[1, 2]])
    h.alter_isr("t", 0, [1])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()  # 1 fenced but kept as the last ISR member
    records, resp = h.elect(0, ("t", [0]))
    assert records == [] and resp.results[0].error.name == "PREFERRED_LEADER_NOT_AVAILABLE"


def test_unclean_election() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2], [3, 2], [1, 3]])
    h.alter_isr("t", 0, [1])
    h.alter_isr("t", 2, [1])
    h.tick(SESSION_MS + 1)
    h.keep_alive([2])
    h.fence_expired()  # 1 and 3 fenced
    assert h.part("t", 0).leader == h.part("t", 2).leader == NO_LEADER
    records, resp = h.elect(1, ("t", [0, 1, 2]))
    assert [r.error.name for r in resp.results] == ["NONE", "ELECTION_NOT_NEEDED", "ELIGIBLE_LEADERS_NOT_AVAILABLE"]
    assert (h.part("t", 0).leader, h.part("t", 0).isr) == (2, (2,))
    assert h.part("t", 1).leader == 2
    assert h.part("t", 2).leader == NO_LEADER


def test_election_on_unknown_topics_and_partitions(three: Harness) -> None:
    records, resp = three.elect(0, ("t", [4]), ("ghost", [0]), ("phantom", []))
    assert records == []
    assert [(r.topic, r.partition, r.error.name) for r in resp.results] == [
        ("t", 4, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("ghost", 0, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("phantom", -1, "UNKNOWN_TOPIC_OR_PARTITION"),
    ]


def test_unknown_election_type_is_invalid_request(three: Harness) -> None:
    records, resp = three.elect(7, ("t", [0]))
    assert records == [] and resp.error.name == "INVALID_REQUEST"


def test_election_of_every_partition_reports_only_those_that_needed_one() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2], [2, 1], [3, 1]])
    h.set_leader("t", 0, 2)
    records, resp = h.elect(0)
    assert [(r.topic, r.partition, r.error.name) for r in resp.results] == [("t", 0, "NONE")]
    assert len(records) == 1 and h.part("t", 0).leader == 1


def test_a_partition_named_twice_is_elected_once() -> None:
    h = cluster(2)
    h.create("t", assignments=[[1, 2]])
    h.set_leader("t", 0, 2)
    records, resp = h.elect(0, ("t", [0, 0]))
    assert len(records) == 1 and len(resp.results) == 1


def imbalanced(settings: dict[str, object] | None = None) -> Harness:
    """Broker 1 prefers p0-p4 and leads 4 of them (20% off); broker 2 prefers p5-p9 and leads 3
    (40% off)."""
    h = cluster(3, settings)
    h.create("t", assignments=[[1, 2, 3]] * 5 + [[2, 3, 1]] * 5)
    h.set_leader("t", 0, 2)
    h.set_leader("t", 5, 3)
    h.set_leader("t", 6, 3)
    return h


def test_preferred_leader_rebalance_respects_the_imbalance_percentage() -> None:
    h = imbalanced({"leader.imbalance.per.broker.percentage": 25})
    records = ctl.preferred_leader_rebalance(h.image, h.ctx())
    assert sorted(changes_by_partition(records)) == [5, 6]  # broker 2 is 40% off, broker 1 only 20%
    h.commit(records)
    assert h.part("t", 5).leader == h.part("t", 6).leader == 2 and h.part("t", 0).leader == 2
    h = imbalanced()  # Kafka's default: 10%
    records = ctl.preferred_leader_rebalance(h.image, h.ctx())
    assert sorted(changes_by_partition(records)) == [0, 5, 6]
    h.commit(records)
    assert ctl.preferred_leader_rebalance(h.image, h.ctx()) == []


def test_preferred_leader_rebalance_skips_unavailable_preferred_replicas() -> None:
    h = imbalanced()
    h.alter_isr("t", 5, [3, 1])  # preferred 2 out of the ISR of p5
    h.heartbeat(1, want_fence=True)  # preferred 1 fenced
    records = ctl.preferred_leader_rebalance(h.image, h.ctx())
    assert sorted(changes_by_partition(records)) == [6]


# ================================================================================ reassignments


@pytest.fixture
def four() -> Harness:
    h = cluster(4)
    h.create("t", assignments=[[1, 2, 3]])
    return h


def ongoing(h: Harness, *topics: tuple[str, Sequence[int]]) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    req = admin_pb2.ListPartitionReassignmentsRequest(
        topics=[admin_pb2.TopicPartitions(topic=t, partitions=list(ps)) for t, ps in topics]
    )
    records, resp = h.run(ctl.list_partition_reassignments, req)
    assert records == [] and resp.error.name == "NONE"
    return [
        (o.topic, o.partition, list(o.replicas), list(o.adding_replicas), list(o.removing_replicas))
        for o in resp.reassignments
    ]


def test_reassignment_adding_a_broker_then_completing(four: Harness) -> None:
    h = four
    records, resp = h.reassign("t", 0, [1, 2, 4])
    assert [(r.topic, r.partition, r.error.name) for r in resp.results] == [("t", 0, "NONE")]
    part = h.part("t")
    assert part.replicas == (1, 2, 4, 3)  # target + removing
    assert (part.adding_replicas, part.removing_replicas) == ((4,), (3,))
    assert (part.leader, part.isr, part.leader_epoch) == (1, (1, 2, 3), 0)
    assert ongoing(h) == [("t", 0, [1, 2, 4, 3], [4], [3])]
    # the new replica is not in sync yet: the reassignment waits
    assert ctl.complete_reassignments(h.image, h.ctx()) == []
    records, resp = h.alter_isr("t", 0, [1, 2, 3, 4])
    data = resp.topics[0].partitions[0]
    assert data.error.name == "NONE" and list(data.isr) == [1, 2, 4]
    part = h.part("t")
    assert part.replicas == (1, 2, 4) and part.isr == (1, 2, 4) and not part.is_reassigning
    assert part.leader == 1
    assert ongoing(h) == []


def test_reassignment_that_removes_the_leader_moves_leadership(four: Harness) -> None:
    h = four
    h.reassign("t", 0, [4, 3, 2])
    assert (h.part("t").adding_replicas, h.part("t").removing_replicas) == ((4,), (1,))
    epoch = h.part("t").leader_epoch
    records, resp = h.alter_isr("t", 0, [1, 2, 3, 4])
    data = resp.topics[0].partitions[0]
    assert data.error.name == "NEW_LEADER_ELECTED"  # Kafka: the records are written anyway
    assert len(records) == 2
    part = h.part("t")
    assert part.replicas == (4, 3, 2) and part.isr == (2, 3, 4) and part.leader == 4
    assert part.leader_epoch == epoch + 1 and not part.is_reassigning


def test_reassignment_to_a_subset_completes_at_once(four: Harness) -> None:
    h = four
    records, resp = h.reassign("t", 0, [2, 3])
    assert resp.results[0].error.name == "NONE"
    part = h.part("t")
    assert part.replicas == (2, 3) and part.isr == (2, 3) and part.leader == 2 and not part.is_reassigning
    assert ongoing(h) == []


def test_reassignment_that_only_reorders_replicas(four: Harness) -> None:
    h = four
    h.reassign("t", 0, [3, 1, 2])
    part = h.part("t")
    assert part.replicas == (3, 1, 2) and part.leader == 1 and not part.is_reassigning
    h.elect(0, ("t", [0]))
    assert h.part("t").leader == 3


def test_reassignment_to_the_current_replicas_writes_nothing(four: Harness) -> None:
    records, resp = four.reassign("t", 0, [1, 2, 3])
    assert records == [] and resp.results[0].error.name == "NONE"


def test_cancel_reverts_a_reassignment() -> None:
    h = cluster(5)
    h.create("t", assignments=[[1, 2, 3]])
    h.reassign("t", 0, [1, 4, 5])
    assert h.part("t").replicas == (1, 4, 5, 2, 3)
    h.alter_isr("t", 0, [1, 2, 3, 4])  # 4 caught up, 5 not yet: still in progress
    assert h.part("t").is_reassigning
    records, resp = h.reassign("t", 0, None)
    assert resp.results[0].error.name == "NONE"
    part = h.part("t")
    assert part.replicas == (1, 2, 3) and part.isr == (1, 2, 3) and part.leader == 1
    assert not part.is_reassigning
    assert ongoing(h) == []


def test_cancel_without_a_reassignment(four: Harness) -> None:
    records, resp = four.reassign("t", 0, None)
    assert records == [] and resp.results[0].error.name == "NO_REASSIGNMENT_IN_PROGRESS"
    assert resp.results[0].error.code == 85


def test_cancel_that_would_need_an_unclean_election_is_refused() -> None:
    h = cluster(4)
    h.create("t", assignments=[[1, 2]])
    h.reassign("t", 0, [3, 4])
    h.alter_isr("t", 0, [1, 2, 3])
    h.tick(SESSION_MS + 1)
    h.keep_alive([3, 4])
    h.fence_expired()  # 1 and 2 fenced: 3 leads, the ISR holds only an adding replica
    assert (h.part("t").leader, h.part("t").isr) == (3, (3,))
    records, resp = h.reassign("t", 0, None)
    assert records == [] and resp.results[0].error.name == "INVALID_REPLICA_ASSIGNMENT"


@pytest.mark.parametrize("target", [[], [1, 1, 2], [1, 2, 9]])
def test_bad_reassignment_targets(four: Harness, target: list[int]) -> None:
    records, resp = four.reassign("t", 0, target)
    assert records == [] and resp.results[0].error.name == "INVALID_REPLICA_ASSIGNMENT"


def test_reassigning_unknown_partitions(four: Harness) -> None:
    records, resp = four.reassign("t", 3, [1])
    assert records == [] and resp.results[0].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    records, resp = four.reassign("ghost", 0, [1])
    assert records == [] and resp.results[0].error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_new_target_on_top_of_a_reassignment_in_progress() -> None:
    h = cluster(5)
    h.create("t", assignments=[[1, 2, 3]])
    h.reassign("t", 0, [1, 4, 5])
    h.alter_isr("t", 0, [1, 2, 3, 4])  # 4 in the ISR, 5 not yet
    # back to the original replicas: replicas in the ISR (4) must stay replicas until done
    records, resp = h.reassign("t", 0, [1, 2, 3])
    assert resp.results[0].error.name == "NONE"
    part = h.part("t")
    assert part.replicas == (1, 2, 3) and part.isr == (1, 2, 3) and not part.is_reassigning
    # another target that keeps a replica the previous one was still adding: it must catch up
    h.reassign("t", 0, [1, 4, 5])
    h.reassign("t", 0, [1, 2, 5])
    part = h.part("t")
    assert set(part.adding_replicas) == {5} and set(part.removing_replicas) == {3, 4}
    h.alter_isr("t", 0, [1, 2, 3, 5])
    part = h.part("t")
    assert part.replicas == (1, 2, 5) and part.isr == (1, 2, 5) and not part.is_reassigning


def test_reassignment_waits_for_an_in_sync_replica_that_stays() -> None:
    h = cluster(3)
    h.create("t", assignments=[[1, 2, 3]])
    h.alter_isr("t", 0, [1])
    records, resp = h.reassign("t", 0, [2, 3])
    assert resp.results[0].error.name == "NONE"
    part = h.part("t")
    # completing now would leave an ISR of replicas that never caught up: wait
    assert part.is_reassigning and part.removing_replicas == (1,) and part.isr == (1,)
    assert ctl.complete_reassignments(h.image, h.ctx()) == []
    _, resp = h.alter_isr("t", 0, [1, 2])
    assert resp.topics[0].partitions[0].error.name == "NEW_LEADER_ELECTED"
    part = h.part("t")
    assert part.replicas == (2, 3) and part.isr == (2,) and part.leader == 2 and not part.is_reassigning


def test_complete_reassignments_sweeps_every_partition() -> None:
    h = cluster(4)
    h.create("t", assignments=[[1, 2], [2, 3]])
    h.reassign("t", 0, [1, 2, 4])
    h.reassign("t", 1, [2, 4])
    # a hand-written ISR change (as a replayed AlterPartition would leave it) without completion
    topic_id = h.topic("t").topic_id
    h.commit(
        [
            PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1, 2, 4)),
            PartitionChangeRecord(partition_id=1, topic_id=topic_id, isr=(2, 3, 4)),
        ]
    )
    records = ctl.complete_reassignments(h.image, h.ctx())
    assert sorted(changes_by_partition(records)) == [0, 1]
    h.commit(records)
    assert h.part("t", 0).replicas == (1, 2, 4) and h.part("t", 1).replicas == (2, 4)
    assert h.part("t", 1).isr == (2, 4)


def test_list_partition_reassignments_filters() -> None:
    h = cluster(4)
    h.create("a", assignments=[[1, 2], [2, 3]])
    h.create("b", assignments=[[1, 2]])
    h.reassign("a", 1, [3, 4])
    h.reassign("b", 0, [1, 4])
    assert ongoing(h) == [("a", 1, [3, 4, 2], [4], [2]), ("b", 0, [1, 4, 2], [4], [2])]
    assert ongoing(h, ("b", [])) == [("b", 0, [1, 4, 2], [4], [2])]
    assert ongoing(h, ("a", [0])) == []
    assert ongoing(h, ("ghost", [])) == []


# ================================================================================ producer ids


def allocate(h: Harness, broker: int, epoch: int | None = None) -> tuple[list[MetadataRecord], Any]:
    req = controller_pb2.AllocateProducerIdsRequest(
        broker_id=broker, broker_epoch=h.epochs.get(broker, 0) if epoch is None else epoch
    )
    return h.run(ctl.allocate_producer_ids, req)


def test_producer_id_blocks_are_consecutive_and_disjoint() -> None:
    h = cluster(2)
    blocks = []
    for broker in (1, 2, 1):
        records, resp = allocate(h, broker)
        assert resp.error.name == "NONE" and resp.producer_id_len == ctl.PRODUCER_ID_BLOCK_SIZE == 1000
        assert records == [
            ProducerIdsRecord(
                broker_id=broker, broker_epoch=h.epochs[broker], next_producer_id=resp.producer_id_start + 1000
            )
        ]
        blocks.append(resp.producer_id_start)
    assert blocks == [0, 1000, 2000]
    assert h.image.producer_ids.next_producer_id == 3000


def test_producer_ids_refused_for_a_stale_or_unknown_broker() -> None:
    h = cluster(1)
    records, resp = allocate(h, 1, epoch=h.epochs[1] + 1)
    assert records == [] and resp.error.name == "STALE_BROKER_EPOCH"
    records, resp = allocate(h, 9, epoch=0)
    assert records == [] and resp.error.name == "STALE_BROKER_EPOCH"
    assert h.image.producer_ids.next_producer_id == 0


# ================================================================================ configs


def config_of(h: Harness, name: str) -> dict[str, str]:
    return dict(h.image.configs.topic_config(name))


def test_set_and_delete_topic_configs() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", SET, "1000"), ("segment.bytes", SET, "1048576")]))
    assert [r.error.name for r in resp.results] == ["NONE"]
    assert records == [
        ConfigRecord(TOPIC, "t", "retention.ms", "1000"),
        ConfigRecord(TOPIC, "t", "segment.bytes", "1048576"),
    ]
    assert config_of(h, "t") == {"retention.ms": "1000", "segment.bytes": "1048576"}
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", DELETE, "")]))
    assert records == [ConfigRecord(TOPIC, "t", "retention.ms", None)]
    assert config_of(h, "t") == {"segment.bytes": "1048576"}
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", DELETE, "")]))  # not set: no change
    assert records == [] and resp.results[0].error.name == "NONE"
    records, _ = h.alter_configs((TOPIC, "t", [("segment.bytes", SET, "1048576")]))  # same value
    assert records == []


def test_append_and_subtract_on_list_configs() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    # unset: APPEND starts from the default ("delete"), as Kafka does
    h.alter_configs((TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))
    assert config_of(h, "t") == {"cleanup.policy": "delete,compact"}
    h.alter_configs((TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))  # already there
    assert config_of(h, "t") == {"cleanup.policy": "delete,compact"}
    records, _ = h.alter_configs((TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert records == [ConfigRecord(TOPIC, "t", "cleanup.policy", "compact")]
    records, resp = h.alter_configs((TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")]))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"  # no policy left
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", APPEND, "5")]))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"  # not a LIST key


@pytest.mark.parametrize(
    "ops",
    [
        [("retention.ms", SET, "1000"), ("no.such.key", SET, "1")],
        [("retention.ms", SET, "1000"), ("cleanup.policy", SET, "shred")],
        [("min.insync.replicas", SET, "zero")],
        [("retention.ms", 9, "1")],
        [("cleanup.policy", SET, " , ")],
    ],
)
def test_bad_config_changes_write_nothing(ops: list[tuple[str, int, str]]) -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    records, resp = h.alter_configs((TOPIC, "t", ops))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"
    assert config_of(h, "t") == {}


def test_a_key_named_twice_is_invalid_request() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, "")]))
    assert records == [] and resp.results[0].error.name == "INVALID_REQUEST"


def test_config_change_of_an_unknown_topic() -> None:
    h = cluster(1)
    records, resp = h.alter_configs((TOPIC, "ghost", [("retention.ms", SET, "1")]))
    assert records == [] and resp.results[0].error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_validate_only_config_change() -> None:
    h = cluster(1)
    h.create("t", 1, 1)
    records, resp = h.alter_configs((TOPIC, "t", [("retention.ms", SET, "1")]), validate_only=True)
    assert records == [] and resp.results[0].error.name == "NONE" and config_of(h, "t") == {}


def test_resources_are_judged_independently() -> None:
    h = cluster(1)
    h.create("a", 1, 1)
    h.create("b", 1, 1)
    records, resp = h.alter_configs(
        (TOPIC, "a", [("retention.ms", SET, "x")]), (TOPIC, "b", [("retention.ms", SET, "5")])
    )
    assert [r.error.name for r in resp.results] == ["INVALID_CONFIG", "NONE"]
    assert records == [ConfigRecord(TOPIC, "b", "retention.ms", "5")]


def test_broker_level_dynamic_configs() -> None:
    h = cluster(2)
    records, resp = h.alter_configs(
        (BROKER, "", [("log.retention.ms", SET, "60000")]), (BROKER, "1", [("log.cleanup.policy", SET, "compact")])
    )
    assert [r.error.name for r in resp.results] == ["NONE", "NONE"]
    assert records == [
        ConfigRecord(BROKER, "", "log.retention.ms", "60000"),
        ConfigRecord(BROKER, "1", "log.cleanup.policy", "compact"),
    ]
    assert dict(h.image.configs.broker_config("")) == {"log.retention.ms": "60000"}
    records, resp = h.alter_configs(
        (BROKER, "", [("num.io.threads", SET, "16")]),
        (BROKER, "", [("no.such.key", SET, "1")]),
        (BROKER, "2", [("log.retention.ms", SET, "soon")]),
        (BROKER, "9", [("log.retention.ms", SET, "1")]),
    )
    assert [r.error.name for r in resp.results] == [
        "INVALID_REQUEST",
        "INVALID_REQUEST",
        "INVALID_CONFIG",
        "INVALID_REQUEST",
    ]  # "" named twice
    records, resp = h.alter_configs((BROKER, "", [("num.io.threads", SET, "16")]))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"
    records, resp = h.alter_configs((BROKER, "", [("no.such.key", SET, "1")]))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"


def test_broker_takes_the_sasl_keys_kafka_reconfigures() -> None:
    """Kafka reconfigures the listener SASL keys at run time (librdkafka's 0081 sets one); they are
    without effect here, and every one of them is a key the node schema knows as such."""
    from kraftlog.common.config import DYNAMIC_WITHOUT_EFFECT, WITHOUT_EFFECT

    assert DYNAMIC_WITHOUT_EFFECT <= set(WITHOUT_EFFECT)
    h = cluster(1)
    records, resp = h.alter_configs((BROKER, "1", [("sasl.kerberos.min.time.before.relogin", SET, "58000")]))
    assert resp.results[0].error.name == "NONE"
    assert records == [ConfigRecord(BROKER, "1", "sasl.kerberos.min.time.before.relogin", "58000")]
    records, resp = h.alter_configs((BROKER, "1", [("sasl.enabled.mechanisms", SET, "PLAIN")]))
    assert records == [] and resp.results[0].error.name == "INVALID_CONFIG"


def entries(result: Any) -> dict[str, tuple[str, str, bool]]:
    return {e.name: (e.value, e.source, e.is_default) for e in result.configs}


def test_describe_topic_configs_shows_sources() -> None:
    h = cluster(1, {"log.retention.hours": 24})
    h.create("t", 1, 1, configs={"cleanup.policy": "compact"})
    result = h.describe_configs(TOPIC, "t")
    assert result.error.name == "NONE"
    e = entries(result)
    assert e["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG", False)
    assert e["retention.ms"] == ("86400000", "STATIC_BROKER_CONFIG", False)
    assert e["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG", True)
    assert e["unclean.leader.election.enable"] == ("false", "DEFAULT_CONFIG", True)
    # a dynamic cluster default, in the topic key's unit
    h.alter_configs((BROKER, "", [("log.retention.hours", SET, "2"), ("log.segment.bytes", SET, "1048576")]))
    e = entries(h.describe_configs(TOPIC, "t"))
    assert e["retention.ms"] == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG", False)
    assert e["segment.bytes"] == ("1048576", "DYNAMIC_DEFAULT_BROKER_CONFIG", False)
    only = h.describe_configs(TOPIC, "t", ["cleanup.policy", "retention.ms"])
    assert [c.name for c in only.configs] == ["cleanup.policy", "retention.ms"]


def test_describe_configs_of_unknown_resources() -> None:
    h = cluster(1)
    assert h.describe_configs(TOPIC, "ghost").error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert h.describe_configs(BROKER, "9").error.name == "INVALID_REQUEST"


def test_describe_broker_configs() -> None:
    h = cluster(1, {"num.io.threads": 16, "controller.quorum.raft.password": "s3cret"})
    h.alter_configs((BROKER, "", [("log.retention.ms", SET, "60000")]))
    result = h.describe_configs(BROKER, "")
    assert result.error.name == "NONE"
    by_name = {c.name: c for c in result.configs}
    assert (by_name["num.io.threads"].value, by_name["num.io.threads"].source) == ("16", "STATIC_BROKER_CONFIG")
    assert (by_name["num.network.threads"].value, by_name["num.network.threads"].source) == ("3", "DEFAULT_CONFIG")
    assert (by_name["log.retention.ms"].value, by_name["log.retention.ms"].source) == (
        "60000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    secret = by_name["controller.quorum.raft.password"]
    assert secret.is_sensitive and not secret.has_value and secret.value == ""


def test_every_password_typed_broker_config_is_described_as_sensitive() -> None:
    key_pem = "-----BEGIN PRIVATE KEY-----\nMIIsecret\n-----END PRIVATE KEY-----"
    h = cluster(1, {"ssl.keystore.key": key_pem, "ssl.key.password": "k3y"})
    by_name = {c.name: c for c in h.describe_configs(BROKER, "").configs}
    for name in ("ssl.keystore.key", "ssl.key.password", "ssl.keystore.certificate.chain", "sasl.jaas.config"):
        assert by_name[name].is_sensitive and not by_name[name].has_value and by_name[name].value == "", name
    assert "MIIsecret" not in str(h.describe_configs(BROKER, ""))


# ================================================================================ describe


def test_describe_cluster() -> None:
    h = Harness()
    h.start_brokers([1, 2], racks=["r1", None])
    h.register(3)
    resp = ctl.describe_cluster(h.image, h.ctx(), controller_id=1)
    assert resp.error.name == "NONE" and resp.cluster_id == CLUSTER_ID and resp.controller_id == 1
    assert [(b.broker_id, b.host, b.port, b.rack, b.fenced, b.broker_epoch) for b in resp.brokers] == [
        (1, "127.0.0.1", 9101, "r1", False, h.epochs[1]),
        (2, "127.0.0.1", 9102, "", False, h.epochs[2]),
        (3, "127.0.0.1", 9103, "", True, h.epochs[3]),
    ]
    external = ctl.describe_cluster(h.image, h.ctx(), controller_id=1, listener="EXTERNAL")
    assert [(b.host, b.port) for b in external.brokers][0] == ("broker1.example", 19101)
    h.heartbeat(1, want_shutdown=True)
    resp = ctl.describe_cluster(h.image, h.ctx(), controller_id=1)
    assert resp.brokers[0].in_controlled_shutdown


def test_describe_topics() -> None:
    h = cluster(3)
    _, created = h.create("t", assignments=[[1, 2, 3], [3, 2, 1]], configs={"retention.ms": "1000"})
    h.create("a", 1, 1)
    h.heartbeat(2, want_fence=True)
    resp = ctl.describe_topics(h.image, admin_pb2.DescribeTopicsRequest(names=["t", "ghost"]))
    t, ghost = resp.topics
    assert ghost.error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert (t.name, t.topic_id, t.error.name) == ("t", created.topic_id, "NONE")
    assert dict(t.configs) == {"retention.ms": "1000"}
    p0, p1 = t.partitions
    assert (p0.partition_index, p0.leader_id, list(p0.replicas), list(p0.isr), list(p0.offline_replicas)) == (
        0,
        1,
        [1, 2, 3],
        [1, 3],
        [2],
    )
    assert (p0.leader_epoch, p0.partition_epoch) == (0, 1)
    assert (p1.leader_id, list(p1.isr), list(p1.offline_replicas)) == (3, [3, 1], [2])
    every = ctl.describe_topics(h.image, admin_pb2.DescribeTopicsRequest())
    assert [x.name for x in every.topics] == ["a", "t"]


def test_describe_topics_shows_reassignments(four: Harness) -> None:
    four.reassign("t", 0, [1, 2, 4])
    p = ctl.describe_topics(four.image, admin_pb2.DescribeTopicsRequest(names=["t"])).topics[0].partitions[0]
    assert (list(p.adding_replicas), list(p.removing_replicas)) == ([4], [3])


# ================================================================================ determinism and purity


def scripted(seed: int) -> tuple[list[MetadataRecord], MetadataImage]:
    h = Harness(seed=seed)
    h.start_brokers([1, 2, 3, 4, 5])
    all_records: list[MetadataRecord] = []
    for name, n, rf in (("a", 7, 3), ("b", 3, 2), ("c", 1, 1)):
        records, _ = h.create(name, n, rf)
        all_records += records
    records, _ = grow(h, "b", 6)
    all_records += records
    return all_records, h.image


def test_same_image_request_and_seed_give_identical_records() -> None:
    first, image1 = scripted(11)
    second, image2 = scripted(11)
    assert first == second and image1 == image2
    other, _ = scripted(12)
    assert other != first  # topic ids and placement come from the rng
    h = cluster(5)
    req = create_request(("x", 10, 3, None, None))

    def fresh() -> ControllerContext:
        return ControllerContext(CLUSTER_ID, h.config, h.now, random.Random(3), h.next_offset)

    r1, resp1 = ctl.create_topics(h.image, req, fresh())
    r2, resp2 = ctl.create_topics(h.image, req, fresh())
    assert r1 == r2 and resp1 == resp2


def test_topic_ids_are_uuid4_strings_from_the_rng() -> None:
    rng = random.Random(5)
    a, b = ctl.new_topic_id(rng), ctl.new_topic_id(rng)
    assert a != b and len(a) == 36 and a[14] == "4"
    assert ctl.new_topic_id(random.Random(5)) == a


def test_error_pb() -> None:
    ok = ctl.error_pb()
    assert (ok.code, ok.name) == (0, "NONE")
    from kraftlog.common import errors as kerr

    err = ctl.error_pb(kerr.InvalidPartitionsError, "nope")
    assert (err.code, err.name, err.message) == (37, "INVALID_PARTITIONS", "nope")


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_records_of_a_long_scenario_always_replay(seed: int) -> None:
    """A mixed random scenario: every decision's records replay on the image they were made for,
    and the invariants hold after each step."""
    h = cluster(5, seed=99)
    h.create("t", 12, 3)
    h.create("u", 4, 2, configs={"unclean.leader.election.enable": "true"})
    rng = random.Random(seed)
    for step in range(80):
        broker = rng.randint(1, 5)
        action = rng.choice(["shrink", "expand", "fence", "unfence", "tick", "reassign", "elect", "shutdown"])
        if action == "shutdown":
            h.heartbeat(broker, want_shutdown=True)
            h.heartbeat(broker, want_shutdown=True)
            continue
        if action == "tick":
            h.tick(rng.choice([1000, SESSION_MS + 1]))
            h.keep_alive(
                [
                    b
                    for b in range(1, 6)
                    if b != broker
                    and not h.broker(b).in_controlled_shutdown
                    and h.broker(b).broker_epoch == h.epochs[b]
                ]
            )
            h.fence_expired()
        elif action == "fence":
            h.heartbeat(broker, want_fence=True)
        elif action == "unfence":
            if h.broker(broker).in_controlled_shutdown:
                h.register(broker, incarnation=f"inc-{broker}-{step}")  # a restart
            h.heartbeat(broker)
        elif action in ("shrink", "expand"):
            name = rng.choice(["t", "u"])
            pid = rng.randrange(h.topic(name).partition_count)
            part = h.part(name, pid)
            if part.leader == NO_LEADER:
                continue
            live = [r for r in part.replicas if h.image.cluster.is_unfenced(r)]
            keep = [r for r in live if r != part.leader and (action == "expand" or rng.random() < 0.5)]
            new_isr = [part.leader] + keep
            h.alter_isr(name, pid, new_isr)
        elif action == "reassign":
            target = rng.sample(range(1, 6), 3)
            h.reassign("t", rng.randrange(12), target)
        else:
            h.elect(rng.choice([0, 1]))
        h.commit(ctl.complete_reassignments(h.image, h.ctx()))
        for topic in h.image.topics.by_id.values():
            for part in topic.partitions.values():
                assert part.isr, "an ISR is never emptied"
                if part.leader != NO_LEADER:
                    assert part.leader in part.isr and h.image.cluster.is_unfenced(part.leader)
                    assert not h.broker(part.leader).in_controlled_shutdown
                if len(part.isr) > 1:
                    assert all(h.image.cluster.is_unfenced(r) for r in part.isr)
