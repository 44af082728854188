"""Consumers in a group on real brokers (issue 14): three consumers of one group over a 12-partition
topic own disjoint partitions that together cover all; when one leaves, the others take its
partitions over; committed offsets let a restarted group carry on where it stopped."""

from __future__ import annotations

import threading
import time

import pytest

from kraftlog.client import Consumer, NewTopic, Producer
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.consumer._consumer_group import RebalanceListener
from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "events"
PARTITIONS = 12
OVERRIDES = {
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("groups") / "c", controllers=1, combined=True, overrides=OVERRIDES)
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
    """A consumer polling in its own thread until told to stop; what it got and owned is kept."""

    def __init__(self, cluster: LocalCluster, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = Consumer(
            cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            auto_commit_interval_ms=200,
            client_id=name,
        )
        self.records: list[bytes] = []
        self.owned: set[TopicPartition] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        member = self

        class Track(RebalanceListener):
            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                member.owned -= revoked

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                member.owned |= assigned

        self.consumer.subscribe([TOPIC], listener=Track())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.records.extend(r.value for r in self.consumer.poll(100))
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err
        finally:
            self.consumer.close()


def test_members_share_partitions_and_take_over_from_a_leaver(cluster: LocalCluster) -> None:
    produce(cluster, 120)
    members = [Member(cluster, "g1", f"m{i}") for i in range(3)]
    for m in members:
        m.start()

    def disjoint_cover(ms: list[Member]) -> bool:
        owned = [m.owned for m in ms]
        union = set().union(*owned)
        return len(union) == PARTITIONS and sum(len(o) for o in owned) == PARTITIONS and all(owned)

    wait_until(lambda: disjoint_cover(members), 60, what="three members sharing the 12 partitions")
    wait_until(lambda: sum(len(m.records) for m in members) >= 120, 60, what="every record consumed")
    assert sorted(r for m in members for r in m.records) == sorted(f"v{i}".encode() for i in range(120))

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
    got = [r for m in [*members, leaver] for r in m.records]
    assert set(got) == {f"v{i}".encode() for i in range(144)}  # nothing lost across the rebalance


def test_committed_offsets_carry_a_group_across_restarts(cluster: LocalCluster) -> None:
    produce(cluster, 36)
    every = [(TOPIC, p) for p in range(PARTITIONS)]
    with Consumer(
        cluster.bootstrap_servers, group_id="g2", auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.subscribe([TOPIC])
        ends = c.end_offsets(every)

        def caught_up() -> bool:
            c.poll(100)
            return len(c.assignment()) == PARTITIONS and all(c.position(tp) >= ends[tp] for tp in ends)

        wait_until(caught_up, 60, what="the only member reading to the end")
        c.commit()
        committed = c.committed(every)
        assert {tp[1]: v.offset for tp, v in committed.items() if v is not None} == {tp[1]: ends[tp] for tp in ends}
    produce(cluster, 12, start=1000)
    with Consumer(cluster.bootstrap_servers, group_id="g2", auto_offset_reset="earliest") as again:
        again.subscribe([TOPIC])
        later: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(later) < 12:
            later.extend(r.value for r in again.poll(200))
        assert sorted(later) == sorted(f"v{i}".encode() for i in range(1000, 1012))  # only what came after


def test_consumer_groups_command(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """``kraftlog consumer-groups`` as an operator runs it (kafka-consumer-groups)."""
    import json

    from kraftlog.cli.__main__ import main

    boot = ["--bootstrap-server", cluster.bootstrap_servers]
    with Consumer(cluster.bootstrap_servers, group_id="ops", auto_offset_reset="earliest") as c:
        c.subscribe([TOPIC])
        wait_until(lambda: bool(c.poll(100)) or len(c.assignment()) == PARTITIONS, 60, what="a member")
        c.commit()
        capsys.readouterr()  # the consumer's own log lines, before the command configures logging
        assert main(["consumer-groups", "--describe", "--group", "ops", "--members", *boot, "--output", "json"]) == 0
        members = json.loads(capsys.readouterr().out)["members"]
        assert len(members) == 1 and len(members[0]["partitions"]) == PARTITIONS
        assert main(["consumer-groups", "--tree", "--group", "ops", *boot, "--output", "json"]) == 0
        tree = json.loads(capsys.readouterr().out)["nodes"]
        member_id = members[0]["member_id"]
        assert tree[f"/consumers/ops/ids/{member_id}"]["subscription"] == {TOPIC: 1}
        assert tree[f"/consumers/ops/owners/{TOPIC}/0"] == member_id
        assert {p for p in tree if p.startswith(f"/consumers/ops/offsets/{TOPIC}/")} == {
            f"/consumers/ops/offsets/{TOPIC}/{i}" for i in range(PARTITIONS)
        }
    assert main(["consumer-groups", "--list", *boot, "--output", "json"]) == 0
    listed = {g["group"]: g["state"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert listed["ops"] == "Empty"
    assert main(["consumer-groups", "--describe", "--group", "ops", *boot, "--output", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert len(described["partitions"]) == PARTITIONS
    assert all(p["lag"] == p["log_end_offset"] - p["current_offset"] for p in described["partitions"])
    reset = ["consumer-groups", "--reset-offsets", "--group", "ops", "--topic", TOPIC, "--to-earliest", *boot]
    assert main([*reset, "--output", "json"]) == 0  # a dry run by default
    plan = json.loads(capsys.readouterr().out)
    assert not plan["executed"] and {o["new_offset"] for o in plan["offsets"]} == {0}
    assert main([*reset, "--execute"]) == 0
    capsys.readouterr()
    assert main(["consumer-groups", "--describe", "--group", "ops", *boot, "--output", "json"]) == 0
    after = json.loads(capsys.readouterr().out)["partitions"]
    assert {p["current_offset"] for p in after} == {0}
    assert main(["consumer-groups", "--delete-offsets", "--group", "ops", "--topic", f"{TOPIC}:0", *boot]) == 0
    capsys.readouterr()
    assert main(["consumer-groups", "--describe", "--group", "ops", *boot, "--output", "json"]) == 0
    assert 0 not in {p["partition"] for p in json.loads(capsys.readouterr().out)["partitions"]}
    assert main(["consumer-groups", "--delete", "--group", "ops", *boot]) == 0
    capsys.readouterr()
    assert main(["consumer-groups", "--list", *boot, "--output", "json"]) == 0
    assert "ops" not in {g["group"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert main(["consumer-groups", "--describe", *boot]) == 2  # no --group: bad input


CONSUMER_PROCESS = """
import sys
from kraftlog.client import Consumer
c = Consumer(sys.argv[1], group_id=sys.argv[2], session_timeout_ms=3000, heartbeat_interval_ms=300,
             auto_offset_reset="earliest", client_id="victim")
c.subscribe([sys.argv[3]])
while True:
    c.poll(100)
    print("OWNED", len(c.assignment()), flush=True)
"""


def test_a_member_killed_9_is_replaced_within_its_session(cluster: LocalCluster) -> None:
    import subprocess
    import sys

    members = [Member(cluster, "g3", f"k{i}") for i in range(2)]
    victim = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_PROCESS, cluster.bootstrap_servers, "g3", TOPIC],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        owned_by_victim = [0]

        def read_victim() -> None:
            assert victim.stdout is not None
            for line in victim.stdout:  # the client's own log lines go there too
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
                and len(set().union(*mine)) + owned_by_victim[0] == PARTITIONS
                and sum(len(o) for o in mine) + owned_by_victim[0] == PARTITIONS
            )

        wait_until(three_way, 60, what="two threads and one process sharing the partitions")
        victim.kill()  # kill -9: no LeaveGroup, the session must expire
        victim.wait(10)
        killed_at = time.monotonic()
        wait_until(
            lambda: (
                len(set().union(*(m.owned for m in members))) == PARTITIONS
                and sum(len(m.owned) for m in members) == PARTITIONS
            ),
            30,
            what="the survivors taking the killed member's partitions",
        )
        # session.timeout.ms 3 s, then one rebalance (heartbeats every 300 ms)
        assert time.monotonic() - killed_at < 15
    finally:
        if victim.poll() is None:
            victim.kill()
        for m in members:
            m.stop.set()
            m.join(30)
    assert all(m.error is None for m in members)
