"""The replicated voter change (issue 26, KIP-853) on `quorum.raft.MetadataQuorum`: in-process
controllers on 127.0.0.1 free ports, each with its own pysyncobj thread and its own node key
(``node-key`` mode: a new voter's public key reaches the others only inside the change).

A joining controller is started knowing the voter set it will be part of (the observer path of
``--no-initial-controllers`` is the next step); until the change that adds it is in a voter's log,
that voter refuses its connections, so it can neither vote nor be voted for.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kraftlog.common.errors import NotControllerError, RequestTimedOutError
from kraftlog.metadata_log._records import ConfigRecord, LogEntry
from kraftlog.quorum.raft import (
    VOTER_ADD,
    VOTER_REMOVE,
    MetadataQuorum,
    NodeIdentity,
    RaftVoter,
    VoterChange,
    generate_identity_key,
    load_private_key,
)
from kraftlog.quorum.raft._identity import parse_public_key
from tests.integration.test_raft_seam import free_ports, wait_until

pytestmark = pytest.mark.integration

ELECTION_MS = 400
CLUSTER_ID = "VoterChangeTestCluster0"


def config(i: int) -> ConfigRecord:
    return ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=str(i))


class Node:
    def __init__(self, base: Path, voter: RaftVoter, key_file: Path) -> None:
        self.voter = voter
        self.base = base
        self.key_file = key_file
        self.entries: list[LogEntry] = []
        self.q: MetadataQuorum | None = None

    def make(self, voters: dict[int, RaftVoter], **kw: Any) -> MetadataQuorum:
        if self.voter.node_id not in voters:
            kw["observer_endpoint"] = (self.voter.host, self.voter.port)
        identity = NodeIdentity(
            node_id=self.voter.node_id,
            private_key=load_private_key(self.key_file, config_key="test"),
            voter_keys={vid: parse_public_key(v.public_key or "") for vid, v in voters.items()},
            directory_id=self.voter.directory_id,
        )
        self.q = MetadataQuorum(
            node_id=self.voter.node_id,
            voters={vid: (v.host, v.port) for vid, v in voters.items()},
            data_dir=self.base / f"n{self.voter.node_id}",
            password=None,
            cluster_id=CLUSTER_ID,
            election_timeout_ms=ELECTION_MS,
            loop=asyncio.get_running_loop(),
            on_committed=self.entries.extend,
            on_leader_change=lambda leader, epoch: None,
            identity=identity,
            directory_ids={vid: v.directory_id for vid, v in voters.items() if v.directory_id},
            compaction_entries=20,
            compaction_interval_s=0.5,
            admit_observers=True,
            **kw,
        )
        return self.q


def make_voters(tmp_path: Path, n: int) -> tuple[dict[int, RaftVoter], dict[int, Path]]:
    ports = free_ports(n)
    voters, keys = {}, {}
    for i, port in enumerate(ports, start=1):
        keys[i] = tmp_path / f"key{i}.pem"
        public = generate_identity_key(keys[i])
        voters[i] = RaftVoter(i, "127.0.0.1", port, f"AAAAAAAAAAAAAAAAAAAAA{'ABCDEFGHIJ'[i]}", public)
    return voters, keys


def leader(nodes: dict[int, Node]) -> Node | None:
    found = [n for n in nodes.values() if n.q is not None and n.q.is_leader]
    return found[0] if len(found) == 1 else None


async def change_on_leader(nodes: dict[int, Node], change: VoterChange) -> Node:
    """Propose ``change`` on whichever node leads, retrying the retriable refusals."""
    for _ in range(40):
        await wait_until(lambda: leader(nodes) is not None, timeout=10, what="a leader")
        lead = leader(nodes)
        assert lead is not None and lead.q is not None
        try:
            await lead.q.change_voters(change, timeout_s=5)
            return lead
        except (NotControllerError, RequestTimedOutError):
            await asyncio.sleep(0.05)
    raise AssertionError(f"no leader committed {change}")


async def propose(nodes: dict[int, Node], value: int) -> int:
    for _ in range(20):
        await wait_until(lambda: leader(nodes) is not None, timeout=10, what="a leader")
        lead = leader(nodes)
        assert lead is not None and lead.q is not None
        try:
            return await lead.q.propose([config(value)], epoch=lead.q.epoch, timeout_s=5)
        except (NotControllerError, RequestTimedOutError):
            await asyncio.sleep(0.05)
    raise AssertionError("no leader accepted the proposal")


def test_grow_one_to_three_fail_over_remove_and_restart_from_the_log(tmp_path: Path) -> None:
    async def body() -> None:
        voters, keys = make_voters(tmp_path, 3)
        nodes = {i: Node(tmp_path, voters[i], keys[i]) for i in voters}
        try:
            await nodes[1].make({1: voters[1]}).start()
            await wait_until(lambda: leader(nodes) is nodes[1], timeout=10, what="the standalone leader")
            await propose(nodes, 0)

            # node 2 runs, but voter 1 refuses it until the change adding it (with its key) is in its log
            await nodes[2].make({1: voters[1], 2: voters[2]}).start()
            for i in range(1, 30):
                await propose(nodes, i)  # compactions: voter 2 catches up through the dump
            assert not nodes[2].entries, "a node that is not a voter receives nothing"
            await change_on_leader(nodes, VoterChange(VOTER_ADD, voters[2]))
            assert nodes[1].q is not None and set(nodes[1].q.voters()) == {1, 2}
            await wait_until(lambda: len(nodes[2].entries) == 30, timeout=10, what="voter 2 to catch up")

            await nodes[3].make(dict(voters)).start()
            await change_on_leader(nodes, VoterChange(VOTER_ADD, voters[3]))
            last = await propose(nodes, 100)
            await wait_until(
                lambda: all(len(n.entries) == last + 1 for n in nodes.values()), timeout=10, what="three voters"
            )
            await wait_until(
                lambda: all(n.q is not None and set(n.q.voters()) == {1, 2, 3} for n in nodes.values()),
                timeout=10,
                what="every voter to commit the set {1, 2, 3}",
            )

            # kill the leader: the two voters added at run time elect one of themselves
            old = leader(nodes)
            assert old is not None and old.q is not None
            await old.q.stop()
            old.q = None
            survivors = {i: n for i, n in nodes.items() if n.q is not None}
            await wait_until(lambda: leader(survivors) is not None, timeout=10, what="a new leader")
            await propose(survivors, 200)

            # remove the dead voter; the two left commit on their own (a majority of two)
            await change_on_leader(survivors, VoterChange(VOTER_REMOVE, old.voter))
            await wait_until(
                lambda: all(n.q is not None and set(n.q.voters()) == set(survivors) for n in survivors.values()),
                timeout=10,
                what="the survivors to commit the removal",
            )
            last = await propose(survivors, 300)

            # a survivor restarts from its own journal and dump, started with a stale voter list:
            # the log, not the configuration, says who votes
            first = min(survivors)
            node = survivors[first]
            assert node.q is not None
            await node.q.stop()
            node.entries.clear()
            await node.make({1: voters[1], first: voters[first]}).start()
            await wait_until(
                lambda: set(node.q.voters()) == set(survivors) if node.q else False, timeout=10, what="restart"
            )
            last = await propose(survivors, 400)
            await wait_until(
                lambda: all(n.entries and n.entries[-1].offset == last for n in survivors.values()),
                timeout=10,
                what="both survivors to commit after the restart",
            )
        finally:
            await asyncio.gather(*(n.q.stop() for n in nodes.values() if n.q is not None))

    asyncio.run(body())


def test_an_observer_catches_up_without_voting_then_joins(tmp_path: Path) -> None:
    """A controller outside the voter set (formatted with --no-initial-controllers) dials the voters
    as an observer: it receives the log, no voter counts it or hears a vote request from it, and the
    change adding it turns it into a voter (with the key its handshake proved)."""

    async def body() -> None:
        voters, keys = make_voters(tmp_path, 3)
        nodes = {i: Node(tmp_path, voters[i], keys[i]) for i in voters}
        try:
            await nodes[1].make({1: voters[1]}).start()
            await wait_until(lambda: leader(nodes) is nodes[1], timeout=10, what="the standalone leader")
            for i in range(30):
                await propose(nodes, i)
            q1 = nodes[1].q
            assert q1 is not None
            epoch = q1.epoch

            # observers know only the voter set (as bootstrap servers would tell them)
            for i in (2, 3):
                await nodes[i].make({1: voters[1]}).start()
            await wait_until(
                lambda: all(len(nodes[i].entries) == 30 for i in (2, 3)), timeout=10, what="observers to catch up"
            )
            last = await propose(nodes, 30)
            await wait_until(lambda: all(len(n.entries) == last + 1 for n in nodes.values()), timeout=10, what="tail")
            assert q1.epoch == epoch and q1.is_leader, "observers never campaign"
            assert set(q1.voters()) == {1}
            assert all(n.q is not None and not n.q.is_leader for i, n in nodes.items() if i != 1)

            # add 2, then 3: each observer becomes a voter once the change is in its log
            await change_on_leader(nodes, VoterChange(VOTER_ADD, voters[2]))
            await change_on_leader(nodes, VoterChange(VOTER_ADD, voters[3]))
            await wait_until(
                lambda: all(n.q is not None and set(n.q.voters()) == {1, 2, 3} for n in nodes.values()),
                timeout=10,
                what="every node to commit the set {1, 2, 3}",
            )
            # the new voters vote: with the first one gone, they elect a leader between them
            await q1.stop()
            nodes[1].q = None
            rest = {i: nodes[i] for i in (2, 3)}
            await wait_until(lambda: leader(rest) is not None, timeout=10, what="a leader among the added voters")
            last = await propose(rest, 31)
            # both know the leader (ids of voters added at run time) and count a majority of three
            lead = leader(rest)
            assert lead is not None
            await wait_until(
                lambda: all(n.q is not None and n.q.leader_id == lead.voter.node_id for n in rest.values()),
                timeout=10,
                what="both to name the leader",
            )
            await wait_until(
                lambda: all(n.entries[-1].offset == last for n in rest.values()), timeout=10, what="commit by 2 and 3"
            )
        finally:
            await asyncio.gather(*(n.q.stop() for n in nodes.values() if n.q is not None))

    asyncio.run(body())


def test_a_removed_voter_that_keeps_running_cannot_move_the_epoch(tmp_path: Path) -> None:
    """Raft's removed voter never gets the entry removing it, so it still thinks it votes and
    campaigns: the others refuse its connections, so its pre-votes get no grant and the epoch stays."""

    async def body() -> None:
        voters, keys = make_voters(tmp_path, 3)
        nodes = {i: Node(tmp_path, voters[i], keys[i]) for i in voters}
        try:
            await asyncio.gather(*(n.make(dict(voters)).start() for n in nodes.values()))
            await wait_until(lambda: leader(nodes) is not None, timeout=10, what="a leader")
            lead = leader(nodes)
            assert lead is not None and lead.q is not None
            victim = next(n for n in nodes.values() if n is not lead)
            await change_on_leader(nodes, VoterChange(VOTER_REMOVE, victim.voter))
            rest = {i: n for i, n in nodes.items() if n is not victim}
            await wait_until(
                lambda: all(n.q is not None and set(n.q.voters()) == set(rest) for n in rest.values()),
                timeout=10,
                what="the two left to commit the removal",
            )
            epoch = lead.q.epoch
            # the removed node campaigns for several election timeouts; the epoch does not move
            loop = asyncio.get_running_loop()
            until = loop.time() + 6 * ELECTION_MS / 1000
            while loop.time() < until:  # a window to watch, not a wait for something
                assert lead.q.epoch == epoch, f"the removed voter moved the epoch to {lead.q.epoch}"
                await asyncio.sleep(0.05)
            last = await propose(rest, 1)
            await wait_until(
                lambda: all(n.entries and n.entries[-1].offset == last for n in rest.values()),
                timeout=10,
                what="commit",
            )
            assert lead.q.epoch == epoch and lead.q.is_leader, "the removed voter disturbed the quorum"
        finally:
            await asyncio.gather(*(n.q.stop() for n in nodes.values() if n.q is not None))

    asyncio.run(body())


def test_a_voter_restarted_with_a_stale_voter_set_does_not_elect_itself_alone(tmp_path: Path) -> None:
    """A voter formatted --standalone whose log has since added a second voter restarts with its
    formatted set ({1}) while the other is down: it must not lead that stale set alone (it would
    commit without the voter its log added) but wait for the log's set {1, 2} -- no leader, no
    epoch change -- and elect with voter 2 once it is back."""

    async def body() -> None:
        voters, keys = make_voters(tmp_path, 2)
        nodes = {i: Node(tmp_path, voters[i], keys[i]) for i in voters}
        try:
            await nodes[1].make({1: voters[1]}).start()
            await wait_until(lambda: leader(nodes) is nodes[1], timeout=10, what="the standalone leader")
            await propose(nodes, 0)
            await nodes[2].make(dict(voters)).start()
            await change_on_leader(nodes, VoterChange(VOTER_ADD, voters[2]))
            last = await propose(nodes, 1)
            await wait_until(lambda: len(nodes[2].entries) == last + 1, timeout=10, what="voter 2 to catch up")
            assert nodes[1].q is not None
            epoch = nodes[1].q.epoch
            for n in nodes.values():
                assert n.q is not None
                await n.q.stop()
                n.q = None
                n.entries.clear()

            q1 = nodes[1].make({1: voters[1]})  # the formatted set: itself alone
            await q1.start()
            loop = asyncio.get_running_loop()
            until = loop.time() + 6 * ELECTION_MS / 1000
            while loop.time() < until:  # a window to watch, not a wait for something
                assert not q1.is_leader and q1.status().leader_id is None, "it led the stale set {1} alone"
                await asyncio.sleep(0.02)
            assert q1.epoch == epoch, "a solo election moved the epoch"
            await wait_until(lambda: set(q1.voters()) == {1, 2}, timeout=10, what="the log's voter set")

            await nodes[2].make(dict(voters)).start()
            last = await propose(nodes, 2)
            await wait_until(
                lambda: all(n.entries and n.entries[-1].offset == last for n in nodes.values()),
                timeout=10,
                what="both voters to commit after the restart",
            )
        finally:
            await asyncio.gather(*(n.q.stop() for n in nodes.values() if n.q is not None))

    asyncio.run(body())
