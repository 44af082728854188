"""`quorum._server.ControllerServer` over a scripted quorum: the active controller's write path.

`ScriptedQuorum` stands in for the Raft seam (`quorum.raft.MetadataQuorum`) with its contract: a
batch proposed in epoch E commits only while the term is still E, batches commit in proposal order,
offsets are dense and assigned at commit, and ``propose`` raises REQUEST_TIMED_OUT when the batch was
not committed in time (outcome unknown: it may still commit later). ``hold`` keeps proposals queued,
as a leader does whose followers are paused. No sockets, no processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log._records import LogEntry, MetadataRecord, RegisterBrokerRecord, TopicRecord
from kraftlog.proto import admin_pb2, controller_pb2
from kraftlog.quorum._server import ControllerServer, _AdminService, _ControllerService

pytestmark = pytest.mark.timeout(60)

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
REQUEST_TIMEOUT_MS = 150


class ScriptedQuorum:
    """The Raft seam's contract without Raft (see the module docstring)."""

    def __init__(
        self,
        *,
        node_id: int,
        loop: asyncio.AbstractEventLoop,
        on_committed: Callable[..., Any],
        on_leader_change: Callable[..., Any],
        last_durable_offset: int = -1,
        **_: Any,
    ) -> None:
        self.node_id = node_id
        self._loop = loop
        self._on_committed = on_committed
        self._on_leader_change = on_leader_change
        self.next_offset = last_durable_offset + 1
        self.epoch = 0
        self.leader_id: int | None = None
        self.is_leader = False
        self.hold = False
        self.queue: list[tuple[int, list[MetadataRecord], asyncio.Future[int]]] = []
        self.proposed: list[list[MetadataRecord]] = []
        self.commit_errors: list[BaseException] = []
        #: raised by the next proposals, one each (what a leader sees while its quorum flaps)
        self.failures: list[kerr.KafkaError] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def elect(self, leader_id: int | None, epoch: int) -> None:
        """A new term: anything still queued from an older epoch can never commit."""
        self.epoch = epoch
        self.leader_id = leader_id
        self.is_leader = leader_id == self.node_id
        for queued_epoch, _records, fut in self.queue:
            if queued_epoch != epoch and not fut.done():
                fut.set_exception(kerr.NotControllerError("deposed", leader_id=leader_id))
        self.queue = [q for q in self.queue if q[0] == epoch]
        self._on_leader_change(leader_id if self.is_leader or leader_id != self.node_id else None, epoch)

    async def propose(self, records: Sequence[MetadataRecord], *, epoch: int, timeout_s: float) -> int:
        if not self.is_leader or epoch != self.epoch:
            raise kerr.NotControllerError("not the leader", leader_id=self.leader_id)
        if self.failures:
            raise self.failures.pop(0)
        fut: asyncio.Future[int] = self._loop.create_future()
        self.proposed.append(list(records))
        self.queue.append((epoch, list(records), fut))
        if not self.hold:
            self.commit_queued()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            raise kerr.RequestTimedOutError("not committed in time; outcome unknown") from None

    def commit_queued(self) -> None:
        """Commit every queued batch of the current epoch, in order."""
        queue, self.queue = self.queue, []
        for epoch, records, fut in queue:
            entries = [LogEntry(self.next_offset + i, epoch, 1_700_000_000_000, r) for i, r in enumerate(records)]
            self.next_offset += len(entries)
            try:
                self._on_committed(entries)
            except BaseException as err:  # what the real seam turns into a stalled delivery
                self.commit_errors.append(err)
            if not fut.done():
                fut.set_result(entries[-1].offset)

    def topic_records(self, name: str) -> int:
        return sum(1 for batch in self.proposed for r in batch if isinstance(r, TopicRecord) and r.name == name)


def _config(tmp_path: Path) -> NodeConfig:
    return NodeConfig.from_mapping(
        {
            "node.id": 1,
            "process.roles": "controller",
            "controller.quorum.voters": "1@127.0.0.1:19093",
            "metadata.log.dir": str(tmp_path / "meta"),
            "controller.quorum.request.timeout.ms": REQUEST_TIMEOUT_MS,
            "controller.quorum.raft.password": "unused-by-the-scripted-quorum",
        }
    )


async def _eventually(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def _server(tmp_path: Path) -> tuple[ControllerServer, ScriptedQuorum]:
    quorums: list[ScriptedQuorum] = []

    def factory(**kwargs: Any) -> ScriptedQuorum:
        quorums.append(ScriptedQuorum(**kwargs))
        return quorums[-1]

    server = ControllerServer(_config(tmp_path), CLUSTER_ID, quorum_factory=factory)
    await server.start()
    return server, quorums[0]


async def _active_server(tmp_path: Path) -> tuple[ControllerServer, ScriptedQuorum]:
    server, quorum = await _server(tmp_path)
    quorum.elect(1, 1)
    await _eventually(lambda: server.is_active, "the controller to become active")
    return server, quorum


def _register(broker_id: int) -> controller_pb2.RegisterBrokerRequest:
    return controller_pb2.RegisterBrokerRequest(
        broker_id=broker_id,
        cluster_id=CLUSTER_ID,
        incarnation_id=f"incarnation-{broker_id}",
        listeners=[
            controller_pb2.Endpoint(
                name="BROKER", host="127.0.0.1", port=9100 + broker_id, security_protocol="PLAINTEXT"
            )
        ],
        log_dirs=["/tmp/kraftlog"],
        previous_broker_epoch=-1,
    )


async def _unfenced_broker(server: ControllerServer, broker_id: int) -> None:
    svc = _ControllerService(server)
    resp = await svc.RegisterBroker(_register(broker_id), None)
    assert resp.error.code == 0, resp.error
    beat = await svc.BrokerHeartbeat(
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=resp.broker_epoch, current_metadata_offset=server.image.offset
        ),
        None,
    )
    assert beat.error.code == 0 and not beat.is_fenced, beat


def _create(name: str) -> admin_pb2.CreateTopicsRequest:
    return admin_pb2.CreateTopicsRequest(
        topics=[admin_pb2.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)]
    )


def test_retried_create_topics_after_a_timeout_never_commits_a_second_topic_record(tmp_path: Path) -> None:
    asyncio.run(_retried_create_topics(tmp_path))


async def _retried_create_topics(tmp_path: Path) -> None:
    """Defect: the retry was decided against the committed image, which lacked the first, still
    uncommitted TopicRecord; both committed and replay failed on every controller."""
    server, quorum = await _active_server(tmp_path)
    try:
        await _unfenced_broker(server, 1)
        admin = _AdminService(server)
        quorum.hold = True  # the followers are paused: nothing commits
        first = await admin.CreateTopics(_create("orders"), None)
        assert first.topics[0].error.name == "REQUEST_TIMED_OUT"
        retry = await admin.CreateTopics(_create("orders"), None)
        assert retry.topics[0].error.name in ("REQUEST_TIMED_OUT", "NOT_CONTROLLER")
        quorum.hold = False  # the followers come back: the queued batches commit in order
        quorum.commit_queued()
        assert quorum.commit_errors == []
        assert quorum.topic_records("orders") == 1
        again = await admin.CreateTopics(_create("orders"), None)
        assert again.topics[0].error.name == "TOPIC_ALREADY_EXISTS"
        assert quorum.topic_records("orders") == 1
        assert server.image.topics.get_by_name("orders") is not None
        assert server.is_active
    finally:
        await server.stop()


def test_a_record_that_does_not_replay_is_refused_before_it_is_proposed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_unreplayable_record(tmp_path, monkeypatch))


async def _unreplayable_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler that returns a record the image cannot replay fails its own request; nothing is
    proposed, other requests of the same group still commit, and the controller stays active."""
    import kraftlog.quorum.controller as ctl

    server, quorum = await _active_server(tmp_path)
    try:
        await _unfenced_broker(server, 1)
        real = ctl.create_topics

        def twice(image: Any, req: Any, ctx: Any) -> Any:
            records, response = real(image, req, ctx)
            return records + [r for r in records if isinstance(r, TopicRecord)], response

        monkeypatch.setattr(ctl, "create_topics", twice)
        before = len(quorum.proposed)
        bad = await _AdminService(server).CreateTopics(_create("twice"), None)
        assert bad.topics[0].error.name == "UNKNOWN_SERVER_ERROR"
        assert len(quorum.proposed) == before and quorum.commit_errors == []
        monkeypatch.setattr(ctl, "create_topics", real)
        ok = await _AdminService(server).CreateTopics(_create("once"), None)
        assert ok.topics[0].error.name == "NONE"
        assert server.is_active
    finally:
        await server.stop()


def test_registrations_grouped_into_one_commit_get_distinct_broker_epochs(tmp_path: Path) -> None:
    asyncio.run(_grouped_registrations(tmp_path))


async def _grouped_registrations(tmp_path: Path) -> None:
    """Each broker epoch is the offset of its own RegisterBrokerRecord, also when several
    registrations are decided in one group and proposed as one batch."""
    server, quorum = await _active_server(tmp_path)
    try:
        svc = _ControllerService(server)
        quorum.hold = True
        pending = [asyncio.ensure_future(svc.RegisterBroker(_register(b), None)) for b in (1, 2, 3, 4)]
        await _eventually(lambda: len(quorum.queue) >= 1, "the first registration to be proposed")
        quorum.hold = False
        quorum.commit_queued()
        responses = await asyncio.gather(*pending)
        epochs = [r.broker_epoch for r in responses]
        assert all(r.error.code == 0 for r in responses), responses
        assert len(set(epochs)) == 4, epochs
        for broker_id, epoch in zip((1, 2, 3, 4), epochs, strict=False):
            reg = server.image.cluster.broker(broker_id)
            assert reg is not None and reg.broker_epoch == epoch
        offsets = {}
        for batch_start, batch in _offsets(quorum):
            for i, record in enumerate(batch):
                if isinstance(record, RegisterBrokerRecord):
                    offsets[record.broker_id] = batch_start + i
        assert {b: server.image.cluster.broker(b).broker_epoch for b in (1, 2, 3, 4)} == offsets
    finally:
        await server.stop()


def _offsets(quorum: ScriptedQuorum) -> list[tuple[int, list[MetadataRecord]]]:
    out = []
    offset = 0
    for batch in quorum.proposed:
        out.append((offset, batch))
        offset += len(batch)
    return out


def test_a_new_leader_keeps_trying_to_become_active_while_it_leads(tmp_path: Path) -> None:
    asyncio.run(_become_active_retries(tmp_path))


async def _become_active_retries(tmp_path: Path) -> None:
    """The first NoOp of an epoch can fail while the quorum flaps (NOT_CONTROLLER from a view that
    briefly lost its majority, a timeout); the leader of that epoch must retry, not give up."""
    server, quorum = await _server(tmp_path)
    try:
        quorum.failures = [
            kerr.NotControllerError("no majority for a moment", leader_id=1),
            kerr.RequestTimedOutError("outcome unknown"),
            kerr.NotControllerError("no majority for a moment", leader_id=1),
        ]
        quorum.elect(1, 1)
        await _eventually(lambda: server.is_active, "the controller to become active")
        assert quorum.failures == []
        quorum.elect(2, 2)  # leadership moved: no more attempts in epoch 1
        assert not server.is_active
    finally:
        await server.stop()


def test_records_older_than_the_snapshot_interval_get_a_snapshot(tmp_path: Path) -> None:
    asyncio.run(_snapshot_interval(tmp_path))


async def _snapshot_interval(tmp_path: Path) -> None:
    from kraftlog.metadata_log import list_snapshots

    server, _quorum = await _active_server(tmp_path)
    try:
        server.config = NodeConfig.from_mapping(
            {**server.config.originals, "metadata.log.max.snapshot.interval.ms": 300}
        )
        server._last_snapshot_at = time.monotonic()
        assert list_snapshots(server.metadata_dir) == []
        await _unfenced_broker(server, 1)  # a few hundred bytes: far below the size trigger
        offset = server.image.offset
        await _eventually(lambda: bool(list_snapshots(server.metadata_dir)), "a snapshot by time", timeout_s=10)
        assert max(s.offset for s in list_snapshots(server.metadata_dir)) >= offset
        assert server._bytes_since_snapshot == 0
    finally:
        await server.stop()


def test_the_first_active_controller_commits_the_bootstrap_records_once(tmp_path: Path) -> None:
    asyncio.run(_bootstrap_once(tmp_path))


async def _bootstrap_once(tmp_path: Path) -> None:
    """``storage format --add-scram`` (issue 25): the credentials of ``bootstrap.checkpoint`` commit in
    the first active controller's NoOp batch, so they are there before any other decision; a later
    epoch, whose image holds them, proposes them no more."""
    from kraftlog.common.security import ScramMechanism
    from kraftlog.common.security._scram import scram_credential
    from kraftlog.metadata_log import NoOpRecord
    from kraftlog.metadata_log.image import credential_to_record
    from kraftlog.quorum import write_bootstrap_records

    credential = scram_credential(ScramMechanism.SCRAM_SHA_512, "alice-secret", salt=b"s" * 32)
    record = credential_to_record(credential, "alice", ScramMechanism.SCRAM_SHA_512)
    write_bootstrap_records(tmp_path / "meta", [record])
    server, quorum = await _active_server(tmp_path)
    try:
        assert quorum.proposed[0] == [NoOpRecord(), record]
        assert server.image.scram.credential(ScramMechanism.SCRAM_SHA_512, "alice") == credential
        quorum.elect(1, 2)
        await _eventually(lambda: server.is_active, "the controller to become active again")
        assert quorum.proposed[1:] == [[NoOpRecord()]]
    finally:
        await server.stop()


def test_the_metadata_tree_is_the_builders_over_the_committed_image_minus_what_the_caller_may_not_see(
    tmp_path: Path,
) -> None:
    asyncio.run(_metadata_tree(tmp_path))


async def _metadata_tree(tmp_path: Path) -> None:
    """DescribeMetadataTree (issue 25): the nodes `zk_tree_nodes` draws from the image and its
    provenance; /controller from the NoOp this controller committed on becoming active; a principal
    allowed only Describe on one topic sees that topic and the public nodes, and is told the rest."""
    import json

    from kraftlog.common.security import AclOperation, RequestContext, ResourceType, Session, request_scope
    from kraftlog.metadata_log import zk_tree_nodes

    server, quorum = await _active_server(tmp_path)
    try:
        await _unfenced_broker(server, 1)
        admin = _AdminService(server)
        for name in ("seen", "unseen"):
            assert (await admin.CreateTopics(_create(name), None)).topics[0].error.code == 0
        full = await admin.DescribeMetadataTree(admin_pb2.DescribeMetadataTreeRequest(), None)
        assert full.error.code == 0 and list(full.omitted) == []
        nodes = [(n.path, json.loads(n.data_json)) for n in full.nodes]
        assert nodes == zk_tree_nodes(server.image, server.provenance, cluster_id=CLUSTER_ID)
        assert (full.offset, full.epoch) == (server.image.offset, server.image.epoch)
        assert dict(nodes)["/controller"]["brokerid"] == 1 and dict(nodes)["/controller"]["kraftControllerEpoch"] == 1

        def only_seen(session: Any, op: AclOperation, rtype: ResourceType, name: str | None) -> bool:
            return op == AclOperation.DESCRIBE and rtype == ResourceType.TOPIC and name == "seen"

        ctx = RequestContext(Session("User:bob", "127.0.0.1"), api="DescribeMetadataTree", authorize_fn=only_seen)
        with request_scope(ctx):
            partial = await admin.DescribeMetadataTree(admin_pb2.DescribeMetadataTreeRequest(), None)
        paths = {n.path for n in partial.nodes}
        assert "/brokers/topics/seen" in paths and not any("unseen" in p for p in paths)
        assert "/config/topics/seen" not in paths and "/brokers/ids/1" in paths and "/controller" in paths
        assert len(partial.omitted) == 4 and ctx.decided  # topics, topic configs, cluster, cluster configs

        quorum.elect(None, 2)  # an election under way: no active controller answers
        standby = await admin.DescribeMetadataTree(admin_pb2.DescribeMetadataTreeRequest(), None)
        assert standby.error.name == "NOT_CONTROLLER" and not standby.nodes
    finally:
        await server.stop()
