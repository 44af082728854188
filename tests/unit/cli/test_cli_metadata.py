"""Tests of ``kraftlog metadata dump`` and ``kraftlog metadata tree`` on metadata log files built
offline with `metadata_log.MetadataLogWriter` and `metadata_log.write_snapshot` (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from kraftlog import storage
from kraftlog.cli.__main__ import main
from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    ConfigRecord,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataLogWriter,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
    write_snapshot,
)

TS = 1_700_000_000_000
ORDERS = "b3JkZXJzLXRvcGljLWlkMQ"
PAYMENTS = "cGF5bWVudHMtdG9waWMtaWQ"
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
PART_DIR = "__cluster_metadata-0"


@pytest.fixture(autouse=True)
def _uncached_logging(monkeypatch):
    """Keep structlog loggers uncached: `node._logging` caches loggers on first use, which would
    pin the CLI's configuration into module loggers that later tests capture with
    `structlog.testing.capture_logs`. The CLI's fallback setup (stderr, no caching) is used."""
    import kraftlog.cli.__main__ as cli_main

    structlog.reset_defaults()
    cli_main._fallback_logging("warning")
    monkeypatch.setattr(cli_main, "_configure_logging", cli_main._fallback_logging)
    yield
    structlog.reset_defaults()


def _records() -> list[tuple[int, object]]:
    """(epoch, record) in log order: three brokers, two topics, configs, a reassignment."""
    out: list[tuple[int, object]] = [(1, NoOpRecord())]
    for b in (1, 2, 3):
        out.append(
            (
                1,
                RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=f"inc-{b}",
                    broker_epoch=10 + b,
                    endpoints=(BrokerEndpoint("PLAINTEXT", f"host{b}", 9092),),
                    rack=f"rack-{b % 2}",
                    fenced=True,
                ),
            )
        )
        out.append((1, UnfenceBrokerRecord(broker_id=b, broker_epoch=10 + b)))
    out += [
        (1, TopicRecord(name="orders", topic_id=ORDERS)),
        (1, PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=(1, 2), isr=(1, 2), leader=1)),
        (1, PartitionRecord(partition_id=1, topic_id=ORDERS, replicas=(2, 3), isr=(2, 3), leader=2)),
        (1, ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy", value="compact")),
        (2, NoOpRecord()),
        (2, TopicRecord(name="payments", topic_id=PAYMENTS)),
        (2, PartitionRecord(partition_id=0, topic_id=PAYMENTS, replicas=(3,), isr=(3,), leader=3)),
        (2, ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value="2")),
        (2, ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="16")),
        (2, ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=1000)),
        # a reassignment of orders-0 from [1,2] to [2,3]: 3 is being added, 1 removed
        (
            2,
            PartitionChangeRecord(
                partition_id=0, topic_id=ORDERS, replicas=(1, 2, 3), adding_replicas=(3,), removing_replicas=(1,)
            ),
        ),
        (2, PartitionChangeRecord(partition_id=1, topic_id=ORDERS, isr=(2,))),
    ]
    return out


def _entries(start: int = 0) -> list[LogEntry]:
    return [LogEntry(i, epoch, TS + i, rec) for i, (epoch, rec) in enumerate(_records()) if i >= start]


def _image(entries: list[LogEntry]) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for entry in entries:
        delta.replay(entry)
    return delta.apply()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A metadata log dir (meta.properties + __cluster_metadata-0) with several small segments."""
    root = tmp_path / "meta"
    with MetadataLogWriter(root / PART_DIR, segment_bytes=400, fsync=False) as w:
        w.append(_entries())
    storage.write_meta_properties(root, storage.MetaProperties(cluster_id=CLUSTER_ID, node_id=3000))
    return root


def _segments(root: Path) -> list[Path]:
    return sorted((root / PART_DIR).glob("*.log"))


def _tree_lines(out: str) -> dict[str, object]:
    nodes: dict[str, object] = {}
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        path, _, data = line.partition(": ")
        nodes[path] = json.loads(data)
    return nodes


# ------------------------------------------------------------------------------ dump


def test_dump_segment_lines(log_dir: Path, capsys) -> None:
    segments = _segments(log_dir)
    assert len(segments) > 1  # the fixture rolls
    assert main(["metadata", "dump", *map(str, segments)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("offset: ")]
    assert len(lines) == len(_records())
    assert lines[0] == f"offset: 0 epoch: 1 timestamp: {TS} NoOpRecord {{}}"
    topic_line = next(line for line in lines if "TopicRecord" in line)
    assert topic_line == (
        f'offset: 7 epoch: 1 timestamp: {TS + 7} TopicRecord {{"name":"orders","topic_id":"{ORDERS}"}}'
    )
    register = next(line for line in lines if "RegisterBrokerRecord" in line)
    assert '"endpoints":[{"name":"PLAINTEXT","host":"host1","port":9092' in register
    assert out.count("Dumping ") == len(segments)
    assert "Found torn tail" not in out


def test_dump_segment_json(log_dir: Path, capsys) -> None:
    segments = _segments(log_dir)
    assert main(["metadata", "dump", "--output", "json", *map(str, segments)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(objs) == len(segments)
    entries = [e for o in objs for e in o["entries"]]
    assert [e["offset"] for e in entries] == list(range(len(_records())))
    assert objs[0]["type"] == "segment" and objs[0]["base_offset"] == 0 and objs[0]["torn_at"] is None
    change = entries[-2]
    assert change["record_type"] == "PartitionChangeRecord"
    assert change["record"]["adding_replicas"] == [3] and change["epoch"] == 2
    assert change["timestamp_ms"] == TS + change["offset"]


def test_dump_reports_torn_tail(log_dir: Path, capsys) -> None:
    last = _segments(log_dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as fh:
        fh.write(b"\x00\x00\x01\x00garbage")  # a frame header claiming 256 bytes, cut short
    assert main(["metadata", "dump", str(last)]) == 0
    out = capsys.readouterr().out
    assert f"Found torn tail at position {size}" in out
    assert main(["metadata", "dump", "--output", "json", str(last)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["torn_at"] == size and obj["valid_bytes"] == size and obj["size_bytes"] == size + 11
    assert obj["torn_reason"]


def test_dump_snapshot(tmp_path: Path, capsys) -> None:
    image = _image(_entries())
    snap = write_snapshot(tmp_path, image.offset, image.epoch, image.timestamp_ms, image.to_records())
    assert main(["metadata", "dump", str(snap)]) == 0
    out = capsys.readouterr().out.splitlines()
    n = len(image.to_records())
    assert out[0] == f"Dumping {snap}"
    assert out[1] == f"Snapshot offset: {image.offset} epoch: 2 timestamp: {image.timestamp_ms} records: {n}"
    assert out[2].startswith("record: 0 RegisterBrokerRecord {")
    assert len(out) == 2 + n
    assert main(["metadata", "dump", "--output", "json", str(snap)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["type"] == "snapshot" and obj["offset"] == image.offset and obj["record_count"] == n
    assert {r["record_type"] for r in obj["records"]} >= {
        "TopicRecord",
        "PartitionRecord",
        "ConfigRecord",
        "ProducerIdsRecord",
    }


def test_dump_directory_dumps_every_file(log_dir: Path, capsys) -> None:
    assert main(["metadata", "dump", str(log_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("Dumping ") == len(_segments(log_dir))


def test_dump_bad_arguments_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["metadata", "dump", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert main(["metadata", "dump", str(other)]) == 2
    assert "not a metadata log file" in capsys.readouterr().err
    assert main(["metadata", "dump"]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["metadata", "dump", str(tmp_path / "empty")]) == 2


def test_dump_corrupt_snapshot_exits_1_but_dumps_the_rest(log_dir: Path, tmp_path: Path, capsys) -> None:
    snap = write_snapshot(tmp_path / "snaps", 3, 1, TS, [NoOpRecord()])
    data = snap.read_bytes()
    snap.write_bytes(data[:-3])  # footer torn: an incomplete snapshot
    first = _segments(log_dir)[0]
    assert main(["metadata", "dump", str(snap), str(first)]) == 1
    captured = capsys.readouterr()
    assert "Dumping " + str(first) in captured.out
    assert "cannot dump" in captured.err and str(snap) in captured.err


# ------------------------------------------------------------------------------ tree


def test_tree_from_log_dir(log_dir: Path, capsys) -> None:
    assert main(["metadata", "tree", "--log-dir", str(log_dir)]) == 0
    out = capsys.readouterr().out
    last = len(_records()) - 1
    assert out.splitlines()[0].startswith("# metadata image from log dir") and f"at offset {last}" in out
    nodes = _tree_lines(out)
    assert nodes["/cluster/id"] == {"version": "1", "id": CLUSTER_ID}
    assert nodes["/controller_epoch"] == 2
    assert "/controller" not in nodes  # offline: who leads now is unknown
    # ZooKeeper's broker node v5: host/port of the PLAINTEXT endpoint, registration time as a string
    assert nodes["/brokers/ids/1"] == {
        "version": 5,
        "host": "host1",
        "port": 9092,
        "timestamp": str(TS + 1),
        "jmx_port": -1,
        "endpoints": ["PLAINTEXT://host1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "rack": "rack-1",
        "features": {},  # v5 has them (issue 25): no feature is finalized in this log
        "epoch": 11,
        "fenced": False,
        "in_controlled_shutdown": False,
        "incarnation_id": "inc-1",
    }
    assert nodes["/brokers/topics/orders"] == {
        "version": 3,
        "topic_id": ORDERS,
        "partitions": {"0": [1, 2, 3], "1": [2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [1]},
    }
    assert nodes["/brokers/topics/orders/partitions/0/state"] == {
        "version": 1,
        "controller_epoch": 2,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
        "partition_epoch": 1,
    }
    assert nodes["/brokers/topics/orders/partitions/1/state"] == {
        "version": 1,
        "controller_epoch": 2,
        "leader": 2,
        "leader_epoch": 0,
        "isr": [2],
        "partition_epoch": 1,
    }
    assert nodes["/brokers/topics/payments/partitions/0/state"]["controller_epoch"] == 2
    assert nodes["/config/topics/orders"] == {"version": 1, "config": {"cleanup.policy": "compact"}}
    assert nodes["/config/topics/payments"] == {"version": 1, "config": {}}
    assert nodes["/config/brokers/1"] == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert nodes["/config/brokers/<default>"] == {"version": 1, "config": {"num.io.threads": "16"}}
    assert nodes["/latest_producer_id_block"] == {"version": 1, "next_producer_id": 1000}
    assert nodes["/admin/reassign_partitions"] == {
        "version": 1,
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "replicas": [1, 2, 3],
                "target_replicas": [2, 3],
                "adding_replicas": [3],
                "removing_replicas": [1],
            }
        ],
    }
    # tree order: /admin before /brokers before /cluster ...; partitions numerically
    paths = list(nodes)
    assert paths == sorted(paths, key=lambda p: [(0, int(c), "") if c.isdigit() else (1, 0, c) for c in p.split("/")])


def test_tree_accepts_the_partition_dir_itself(log_dir: Path, capsys) -> None:
    assert main(["metadata", "tree", "--log-dir", str(log_dir / PART_DIR)]) == 0
    nodes = _tree_lines(capsys.readouterr().out)
    assert nodes["/cluster/id"]["id"] == CLUSTER_ID  # meta.properties of the parent
    assert "/brokers/topics/payments" in nodes


def test_tree_as_of_offset(log_dir: Path, capsys) -> None:
    # offset 10 is the ConfigRecord of orders: payments, broker configs and the reassignment come later
    assert main(["metadata", "tree", "--log-dir", str(log_dir), "--as-of-offset", "10"]) == 0
    out = capsys.readouterr().out
    assert "at offset 10 (epoch 1)" in out
    nodes = _tree_lines(out)
    assert "/brokers/topics/payments" not in nodes
    assert "/admin/reassign_partitions" not in nodes
    assert nodes["/brokers/topics/orders/partitions/0/state"] == {
        "version": 1,
        "controller_epoch": 1,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
        "partition_epoch": 0,
    }
    assert nodes["/controller_epoch"] == 1
    assert "/latest_producer_id_block" not in nodes
    # past the end: the whole log, with a warning
    assert main(["metadata", "tree", "--log-dir", str(log_dir), "--as-of-offset", "999"]) == 0
    captured = capsys.readouterr()
    assert "/brokers/topics/payments" in captured.out and "ends at offset" in captured.err


def test_tree_json(log_dir: Path, capsys) -> None:
    assert main(["metadata", "tree", "--log-dir", str(log_dir), "--output", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["offset"] == len(_records()) - 1 and obj["epoch"] == 2
    assert obj["nodes"]["/brokers/topics/orders/partitions/1/state"]["isr"] == [2]
    assert obj["nodes"]["/cluster/id"]["id"] == CLUSTER_ID


def test_tree_path_filter(log_dir: Path, capsys) -> None:
    assert main(["metadata", "tree", "--log-dir", str(log_dir), "--path", "/brokers/topics/orders"]) == 0
    nodes = _tree_lines(capsys.readouterr().out)
    assert set(nodes) == {
        "/brokers/topics/orders",
        "/brokers/topics/orders/partitions/0/state",
        "/brokers/topics/orders/partitions/1/state",
    }


def test_tree_from_snapshot_alone_and_with_the_log(tmp_path: Path, capsys) -> None:
    entries = _entries()
    cut = 13  # snapshot through offset 13 (payments exists, broker configs not yet)
    image = _image(entries[: cut + 1])
    root = tmp_path / "meta"
    mdir = root / PART_DIR
    snap = write_snapshot(mdir, image.offset, image.epoch, image.timestamp_ms, image.to_records())
    with MetadataLogWriter(mdir, segment_bytes=1 << 20, fsync=False) as w:
        assert w.next_offset == cut + 1  # the log continues after the snapshot (older segments gone)
        w.append(entries[cut + 1 :])

    assert main(["metadata", "tree", "--snapshot", str(snap)]) == 0
    out = capsys.readouterr().out
    assert f"from snapshot {snap} at offset {cut} (epoch 2)" in out
    nodes = _tree_lines(out)
    assert "/brokers/topics/payments" in nodes and "/config/brokers/1" not in nodes
    assert nodes["/brokers/topics/orders/partitions/0/state"]["controller_epoch"] == 2  # the snapshot's

    # --log-dir alone starts from the dir's latest snapshot and replays the rest
    assert main(["metadata", "tree", "--log-dir", str(root)]) == 0
    nodes = _tree_lines(capsys.readouterr().out)
    assert nodes["/config/brokers/1"] == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert "/admin/reassign_partitions" in nodes

    # explicit snapshot + log dir, and --as-of-offset between them
    assert (
        main(["metadata", "tree", "--snapshot", str(snap), "--log-dir", str(root), "--as-of-offset", str(cut + 1)]) == 0
    )
    nodes = _tree_lines(capsys.readouterr().out)
    assert nodes["/config/brokers/1"] == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert "/config/brokers/<default>" not in nodes

    # an offset before the snapshot cannot be rebuilt from this dir: the log does not reach back
    assert main(["metadata", "tree", "--log-dir", str(root), "--as-of-offset", "3"]) == 1
    assert "no longer in the log" in capsys.readouterr().err


def test_tree_after_topic_deletion(tmp_path: Path, capsys) -> None:
    entries = _entries()
    entries.append(LogEntry(len(entries), 2, TS, RemoveTopicRecord(topic_id=ORDERS)))
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append(entries)
    assert main(["metadata", "tree", "--log-dir", str(tmp_path), "--output", "json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert not any("orders" in path for path in nodes)
    assert "/admin/reassign_partitions" not in nodes
    assert "/cluster/id" not in nodes  # no meta.properties here
    assert "/brokers/topics/payments" in nodes


def test_tree_argument_errors(log_dir: Path, tmp_path: Path, capsys) -> None:
    for argv in (
        ["metadata", "tree"],
        ["metadata", "tree", "--snapshot", str(tmp_path / "x.checkpoint"), "--as-of-offset", "3"],
        ["metadata", "tree", "--log-dir", str(log_dir), "--bootstrap-server", "localhost:9093"],
        ["metadata", "tree", "--log-dir", str(tmp_path / "nowhere")],
        ["metadata", "tree", "--snapshot", str(tmp_path / "missing.checkpoint")],
        ["metadata", "tree", "--log-dir", str(log_dir), "--path", "brokers"],
        ["metadata", "tree", "--log-dir", str(log_dir), "--as-of-offset", "-1"],
    ):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, (argv, captured.err)


def test_tree_corrupt_log_exits_1(tmp_path: Path, capsys) -> None:
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        # a change to a partition that was never created cannot be replayed
        w.append([LogEntry(0, 1, TS, PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=(1,)))])
    assert main(["metadata", "tree", "--log-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot rebuild the metadata image" in err


def test_tree_shows_acls_and_scram_users_without_secrets(tmp_path: Path, capsys) -> None:
    def acl(i: int, rtype: int, name: str, ptype: int, principal: str, op: int, perm: int = 3, host: str = "*"):
        return AccessControlEntryRecord(
            f"00000000-0000-4000-8000-{i:012d}", rtype, name, ptype, principal, host, op, perm
        )

    records = [
        acl(1, 2, "orders", 3, "User:bob", 3),  # Topic, LITERAL, Read, Allow
        acl(2, 2, "orders", 3, "User:alice", 4, 2, "10.0.0.1"),  # Write, Deny
        acl(3, 2, "*", 3, "User:*", 8),  # the wildcard topic, Describe
        acl(4, 3, "app-", 4, "User:alice", 3),  # Group, PREFIXED
        acl(5, 4, "kafka-cluster", 3, "User:alice", 12),  # Cluster, IdempotentWrite
        acl(6, 5, "tx-", 4, "User:alice", 2),  # TransactionalId, PREFIXED, All
        acl(7, 2, "gone", 3, "User:bob", 3),
        RemoveAccessControlEntryRecord("00000000-0000-4000-8000-000000000007"),
        UserScramCredentialRecord("alice", 1, b"SECRET-salt", b"SECRET-stored", b"SECRET-server", 4096),
        UserScramCredentialRecord("alice", 2, b"SECRET-salt", b"SECRET-stored", b"SECRET-server", 8192),
        UserScramCredentialRecord("CN=svc one*", 2, b"SECRET-salt", b"SECRET-stored", b"SECRET-server", 4096),
    ]
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append([LogEntry(i, 1, TS + i, r) for i, r in enumerate(records)])
    assert main(["metadata", "tree", "--log-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "SECRET" not in out and "salt" not in out and "stored" not in out
    nodes = _tree_lines(out)
    assert nodes["/kafka-acl/Topic/orders"] == {
        "version": 1,
        "acls": [
            {"host": "10.0.0.1", "permissionType": "Deny", "operation": "Write", "principal": "User:alice"},
            {"host": "*", "permissionType": "Allow", "operation": "Read", "principal": "User:bob"},
        ],
    }
    assert nodes["/kafka-acl/Topic/*"]["acls"] == [
        {"host": "*", "permissionType": "Allow", "operation": "Describe", "principal": "User:*"}
    ]
    assert nodes["/kafka-acl-extended/prefixed/Group/app-"]["acls"][0]["operation"] == "Read"
    assert nodes["/kafka-acl/Cluster/kafka-cluster"]["acls"][0]["operation"] == "IdempotentWrite"
    assert nodes["/kafka-acl-extended/prefixed/TransactionalId/tx-"]["acls"][0]["operation"] == "All"
    assert "/kafka-acl/Topic/gone" not in nodes
    assert nodes["/config/users/alice"] == {
        "version": 1,
        "config": {"SCRAM-SHA-256": "iterations=4096", "SCRAM-SHA-512": "iterations=8192"},
    }
    # user names are sanitized as Kafka's ZooKeeper config nodes were (URL encoding, %20, %2A)
    assert nodes["/config/users/CN%3Dsvc%20one%2A"] == {"version": 1, "config": {"SCRAM-SHA-512": "iterations=4096"}}

    assert main(["metadata", "tree", "--log-dir", str(tmp_path), "--path", "/kafka-acl-extended"]) == 0
    assert set(_tree_lines(capsys.readouterr().out)) == {
        "/kafka-acl-extended/prefixed/Group/app-",
        "/kafka-acl-extended/prefixed/TransactionalId/tx-",
    }
