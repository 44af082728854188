"""DescribeQuorum (55), AddRaftVoter (80) and RemoveRaftVoter (81) on a broker's Kafka listener,
forwarded to the active controller as Kafka 4.x's brokers forward them (issue 26, KIP-853). Real
processes on 127.0.0.1; the requests are built with kio, the codec the listener itself uses.

On main the broker answered none of the three (its ApiVersions did not list them; a request was
refused as an unsupported API).
"""

from __future__ import annotations

import io
import json
import socket
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest
from kio.schema.add_raft_voter.v1.response import AddRaftVoterResponse
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest
from kio.schema.describe_quorum.v2.response import DescribeQuorumResponse
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.schema.remove_raft_voter.v0.response import RemoveRaftVoterResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from kraftlog.broker.kafka._kafka_quorum import directory_text
from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.common import parse_uuid
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.storage import read_meta_properties

from .test_kafka_clients import _answer

pytestmark = pytest.mark.integration

BROKER = 101
METADATA = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def _call(cluster: LocalCluster, request_type: type, response_type: type, body: dict[str, Any]) -> Any:
    buf = io.BytesIO()
    header = {
        "request_api_key": int(request_type.__api_key__),
        "request_api_version": int(request_type.__version__),
        "correlation_id": 11,
        "client_id": "quorum-test",
    }
    entity_writer(RequestHeader)(buf, build(RequestHeader, header))
    entity_writer(request_type)(buf, build(request_type, body))
    spec = cluster.nodes[BROKER]
    with socket.create_connection((spec.host, spec.kafka_port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        answer = _answer(sock)
    return entity_reader(response_type)(answer, 5)[0]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftlog.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def _describe(cluster: LocalCluster) -> Any:
    return _call(cluster, DescribeQuorumRequest, DescribeQuorumResponse, METADATA)


def _voters(resp: Any) -> dict[int, uuid.UUID]:
    partition = resp.topics[0].partitions[0]
    return {v.replica_id: v.replica_directory_id for v in partition.current_voters}


def test_a_controller_is_added_and_removed_through_a_brokers_kafka_listener(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c",
        controllers=2,
        brokers=1,
        overrides={"controller.quorum.election.timeout.ms": 1000},
        quorum="dynamic",
        initial_controllers=1,
    )
    cluster.plan()
    observer = cluster.nodes[2]
    dir_text = read_meta_properties(Path(observer.dir) / "metadata").directory_id
    directory = parse_uuid(dir_text)
    try:
        cluster.start_node(1)
        cluster.start_node(BROKER)
        cluster.start_node(2)
        cluster.wait_unfenced_brokers(1, timeout_s=60)

        def observed() -> Any:
            resp = _describe(cluster)
            partition = resp.topics[0].partitions[0] if resp.topics else None
            return resp if partition is not None and [o.replica_id for o in partition.observers] == [2] else None

        resp = wait_until(observed, 60, what="DescribeQuorum through the broker listing observer 2")
        partition = resp.topics[0].partitions[0]
        assert resp.error_code == 0 and partition.leader_id == 1 and list(_voters(resp)) == [1]
        assert partition.observers[0].replica_directory_id == directory
        assert [(n.node_id, n.listeners[0].name, n.listeners[0].port) for n in resp.nodes] == [
            (1, "CONTROLLER", cluster.nodes[1].controller_port)
        ]
        # another topic partition is not the metadata log
        other = _call(
            cluster,
            DescribeQuorumRequest,
            DescribeQuorumResponse,
            {"topics": [{"topic_name": "t", "partitions": [{"partition_index": 0}]}]},
        )
        assert other.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION

        add = {
            "cluster_id": str(cluster.cluster_id),
            "timeout": 30_000,
            "voter_id": 2,
            "voter_directory_id": directory,
            "listeners": [{"name": "CONTROLLER", "host": observer.host, "port": observer.controller_port}],
            "ack_when_committed": True,
        }
        wrong = _call(cluster, AddRaftVoterRequest, AddRaftVoterResponse, {**add, "cluster_id": "another"})
        assert wrong.error_code == 104  # INCONSISTENT_CLUSTER_ID, checked before forwarding
        last: list[Any] = []

        def added() -> bool:
            answer = _call(cluster, AddRaftVoterRequest, AddRaftVoterResponse, add)
            last[:] = [answer]
            return answer.error_code == 0

        wait_until(added, 60, what=f"AddRaftVoter through the broker (last: {last})")
        assert _voters(_describe(cluster)) == {1: _voters(_describe(cluster))[1], 2: directory}

        remove = {"cluster_id": None, "voter_id": 2, "voter_directory_id": uuid.uuid4()}
        missing = _call(cluster, RemoveRaftVoterRequest, RemoveRaftVoterResponse, remove)
        assert missing.error_code == 127  # VOTER_NOT_FOUND: another directory is another replica
        removed = _call(
            cluster, RemoveRaftVoterRequest, RemoveRaftVoterResponse, {**remove, "voter_directory_id": directory}
        )
        assert removed.error_code == 0, removed.error_message
        wait_until(lambda: list(_voters(_describe(cluster))) == [1], 30, what="voter 2 removed")

        # the metadata log shows each change as Kafka's VotersRecord (the whole set after it)
        metadata = str(Path(cluster.nodes[1].dir) / "metadata")

        def voter_sets() -> list[list[tuple[int, str, int]]]:
            dumped = _cli("metadata", "dump", metadata, "--output", "json")
            assert dumped.returncode == 0, dumped.stderr
            entries = [e for line in dumped.stdout.splitlines() if line.strip() for e in json.loads(line)["entries"]]
            return [
                [(v["voter_id"], v["voter_directory_id"], v["endpoints"][0]["port"]) for v in e["record"]["voters"]]
                for e in entries
                if e["record_type"] == "VotersRecord"
            ]

        first_dir = _voters(_describe(cluster))[1]
        expected = [
            [(1, directory_text(first_dir), cluster.nodes[1].controller_port), (2, dir_text, observer.controller_port)],
            [(1, directory_text(first_dir), cluster.nodes[1].controller_port)],
        ]
        wait_until(lambda: voter_sets() == expected, 30, what=f"the VotersRecords in the metadata log ({voter_sets()})")
        # the offline ZooKeeper-style tree replays them (as no-ops), as the controller does
        tree = _cli("metadata", "tree", "--log-dir", metadata)
        assert tree.returncode == 0 and "/brokers" in tree.stdout, tree.stderr
    finally:
        cluster.stop()
