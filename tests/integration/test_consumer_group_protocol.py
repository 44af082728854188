"""Consumers of the KIP-848 protocol (``group_protocol="consumer"``) on real brokers (issue 14): the
coordinator assigns (uniform), three members own disjoint partitions that together cover all, a
member that leaves or is killed -9 has its partitions taken over, a classic consumer cannot join a
consumer-protocol group, and an operator sees the group as Kafka 4 shows it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from kraftlog.client import Consumer, NewTopic, Producer
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.consumer._consumer_group import RebalanceListener
from kraftlog.common import errors as kerr
from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 12
OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.heartbeat.interval.ms": 300,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("kip848") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        yield c
    finally:
        c.stop()


def produce(cluster: LocalCluster, n: int, start: int = 0) -> None:
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=2) as producer:
        for i in range(start, start + n):
            producer.send(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)


class Member(threading.Thread):
    """A consumer-protocol consumer polling in its own thread; what it got and owns is kept, and
    every moment two members held one partition is counted."""

    def __init__(self, cluster: LocalCluster, group: str, name: str, owners: dict[TopicPartition, str]) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = Consumer(
            cluster.bootstrap_servers,
            group_id=group,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            auto_commit_interval_ms=200,
            client_id=name,
        )
        self.records: list[bytes] = []
        self.owned: set[TopicPartition] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.double_owned = 0
        member = self

        class Track(RebalanceListener):
            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                member.owned -= revoked
                for tp in revoked:
                    if owners.get(tp) == name:
                        del owners[tp]

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                member.owned |= assigned
                for tp in assigned:
                    if tp in owners:
                        member.double_owned += 1
                    owners[tp] = name

        self.consumer.subscribe([TOPIC], listener=Track())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.records.extend(r.value for r in self.consumer.poll(100))
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err
        finally:
            self.consumer.close()


def disjoint_cover(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    return all(owned) and len(set().union(*owned)) == PARTITIONS and sum(len(o) for o in owned) == PARTITIONS


def test_the_coordinator_assigns_and_members_take_over_from_a_leaver(cluster: LocalCluster) -> None:
    produce(cluster, 120)
    owners: dict[TopicPartition, str] = {}
    members = [Member(cluster, "n1", f"m{i}", owners) for i in range(3)]
    for m in members:
        m.start()
    # uniform once reconciled: a disjoint cover can come first while a member still holds partitions
    # it is revoking for a member that gets them next (KIP-848 revokes before it assigns), which a
    # loaded machine showed as [2, 4, 6]
    wait_until(
        lambda: disjoint_cover(members) and sorted(len(m.owned) for m in members) == [4, 4, 4],
        60,
        what="three members sharing the 12 partitions, 4 each",
    )
    wait_until(lambda: sum(len(m.records) for m in members) >= 120, 60, what="every record consumed")
    assert sorted(r for m in members for r in m.records) == sorted(f"v{i}".encode() for i in range(120))

    from kraftlog.client import GroupAdmin

    with GroupAdmin(cluster.bootstrap_servers) as admin:
        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed["n1"].group_type == "consumer" and listed["n1"].state == "Stable"

    leaver = members.pop()
    leaver.stop.set()
    leaver.join(30)
    assert leaver.error is None
    wait_until(lambda: disjoint_cover(members), 60, what="two members taking the leaver's partitions over")
    produce(cluster, 24, start=120)
    wait_until(lambda: sum(len(m.records) for m in members) >= 144 - len(leaver.records), 60, what="new records")
    for m in members:
        m.stop.set()
        m.join(30)
        assert m.error is None
    assert sum(m.double_owned for m in [*members, leaver]) == 0
    got = [r for m in [*members, leaver] for r in m.records]
    assert set(got) == {f"v{i}".encode() for i in range(144)}


CONSUMER_PROCESS = """
import sys
from kraftlog.client import Consumer
c = Consumer(sys.argv[1], group_id=sys.argv[2], group_protocol="consumer", auto_offset_reset="earliest",
             client_id="victim")
c.subscribe([sys.argv[3]])
while True:
    c.poll(100)
    print("OWNED", len(c.assignment()), flush=True)
"""


def test_a_member_killed_9_is_replaced_within_its_session(cluster: LocalCluster) -> None:
    owners: dict[TopicPartition, str] = {}
    members = [Member(cluster, "n2", f"k{i}", owners) for i in range(2)]
    victim = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_PROCESS, cluster.bootstrap_servers, "n2", TOPIC],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        owned_by_victim = [0]

        def read_victim() -> None:
            assert victim.stdout is not None
            for line in victim.stdout:
                if line.startswith("OWNED "):
                    owned_by_victim[0] = int(line.split()[1])

        threading.Thread(target=read_victim, daemon=True).start()
        for m in members:
            m.start()

        def three_way() -> bool:
            mine = [m.owned for m in members]
            return (
                all(mine)
                and owned_by_victim[0] > 0
                and sum(len(o) for o in mine) + owned_by_victim[0] == PARTITIONS
                and len(set().union(*mine)) + owned_by_victim[0] == PARTITIONS
            )

        wait_until(three_way, 60, what="two threads and one process sharing the partitions")
        victim.kill()
        victim.wait(10)
        killed_at = time.monotonic()
        wait_until(lambda: disjoint_cover(members), 30, what="the survivors taking the killed member's partitions")
        assert time.monotonic() - killed_at < 15  # group.consumer.session.timeout.ms 3 s, then reconciliation
    finally:
        if victim.poll() is None:
            victim.kill()
        for m in members:
            m.stop.set()
            m.join(30)
    assert all(m.error is None for m in members)


def test_protocols_do_not_mix_and_bad_settings_are_refused(cluster: LocalCluster) -> None:
    with Consumer(cluster.bootstrap_servers, group_id="n3", group_protocol="consumer") as modern:
        modern.subscribe([TOPIC])
        wait_until(lambda: bool(modern.poll(100)) or len(modern.assignment()) == PARTITIONS, 60, what="a member")
        with Consumer(cluster.bootstrap_servers, group_id="n3", session_timeout_ms=6000) as classic:
            classic.subscribe([TOPIC])
            with pytest.raises(kerr.InconsistentGroupProtocolError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    classic.poll(100)
    with pytest.raises(ValueError, match="partition.assignment.strategy"):
        Consumer(
            cluster.bootstrap_servers,
            group_id="n4",
            group_protocol="consumer",
            partition_assignment_strategy="range",
        )
    with Consumer(
        cluster.bootstrap_servers, group_id="n5", group_protocol="consumer", group_remote_assignor="sticky"
    ) as wrong:
        wrong.subscribe([TOPIC])
        with pytest.raises(kerr.UnsupportedAssignorError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                wrong.poll(100)


def test_consumer_groups_command_shows_a_consumer_protocol_group(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from kraftlog.cli.__main__ import main

    boot = ["--bootstrap-server", cluster.bootstrap_servers]
    with Consumer(
        cluster.bootstrap_servers, group_id="n6", group_protocol="consumer", auto_offset_reset="earliest"
    ) as c:
        c.subscribe([TOPIC])
        wait_until(lambda: bool(c.poll(100)) or len(c.assignment()) == PARTITIONS, 60, what="a member")
        wait_until(lambda: len(c.assignment()) == PARTITIONS and not c.poll(50), 60, what="all partitions")
        c.commit()
        capsys.readouterr()
        assert main(["consumer-groups", "--describe", "--group", "n6", "--state", *boot, "--output", "json"]) == 0
        state = json.loads(capsys.readouterr().out)
        assert state["type"] == "consumer" and state["assignment_strategy"] == "uniform"
        assert state["state"] == "Stable" and state["group_epoch"] == state["target_assignment_epoch"] >= 1
        assert main(["consumer-groups", "--describe", "--group", "n6", "--members", *boot, "--output", "json"]) == 0
        (member,) = json.loads(capsys.readouterr().out)["members"]
        assert len(member["partitions"]) == PARTITIONS and member["target_partitions"] == member["partitions"]
        assert member["member_epoch"] == state["group_epoch"]
        assert main(["consumer-groups", "--describe", "--group", "n6", *boot, "--output", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["partitions"]
        assert len(rows) == PARTITIONS and all(r["consumer_id"] == member["member_id"] for r in rows)
        assert main(["consumer-groups", "--list", "--type", "consumer", *boot, "--output", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)["groups"]
        assert "n6" in {g["group"] for g in listed} and {g["type"] for g in listed} == {"consumer"}
        assert main(["consumer-groups", "--delete", "--group", "n6", *boot]) == 1  # NON_EMPTY_GROUP: a member
        capsys.readouterr()
    assert main(["consumer-groups", "--delete", "--group", "n6", *boot]) == 0


def test_group_metadata_names_the_member_and_its_epoch(cluster: LocalCluster) -> None:
    with Consumer(cluster.bootstrap_servers, group_id="n7", group_protocol="consumer") as c:
        c.subscribe([TOPIC])
        wait_until(lambda: bool(c.poll(100)) or len(c.assignment()) == PARTITIONS, 60, what="a member")
        meta = c.group_metadata()
        assert meta.group_id == "n7" and meta.member_id and meta.generation_id >= 1
        assert meta.group_instance_id is None
