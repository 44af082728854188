"""``kraftlog produce``, ``consume``, ``perf produce`` and ``perf consume`` against the in-process
fake cluster of ``test_producer.py``: argument checks, Kafka's console formats, exit codes."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
import structlog

from kraftlog.cli.__main__ import main
from kraftlog.cli._common import UserError
from kraftlog.cli._produce import LineReader
from kraftlog.common.records import Header, RecordBatchBuilder

from .test_producer import FakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def _plain_logging(monkeypatch):
    import kraftlog.cli.__main__ as cli_main

    structlog.reset_defaults()
    cli_main._fallback_logging("warning")
    monkeypatch.setattr(cli_main, "_configure_logging", cli_main._fallback_logging)
    yield
    structlog.reset_defaults()


@pytest.fixture
def cluster():
    c = FakeCluster(brokers=2)
    yield c
    c.close()


def boot(cluster: FakeCluster) -> list[str]:
    return ["--bootstrap-server", cluster.bootstrap]


def stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def values(cluster: FakeCluster, topic: str, partition: int = 0) -> list[tuple]:
    return [(r.key, r.value, [tuple(h) for h in r.headers]) for r in cluster.partition(topic, partition).records()]


def write(cluster: FakeCluster, topic: str, partition: int, items: list[tuple]) -> None:
    b = RecordBatchBuilder()
    for i, (key, value, headers) in enumerate(items):
        b.append(TS + i, key, value, [Header(k, v) for k, v in headers])
    cluster.append(topic, partition, b.build())


# ------------------------------------------------------------------------------------- produce


def test_produce_lines_from_stdin(cluster, monkeypatch, capsys) -> None:
    cluster.create_topic("t", 1)
    stdin(monkeypatch, "hello\nworld\n\nlast")
    assert main(["produce", *boot(cluster), "--topic", "t"]) == 0
    assert values(cluster, "t") == [(None, b"hello", []), (None, b"world", []), (None, b"", []), (None, b"last", [])]
    assert capsys.readouterr().out == ""
    assert cluster.requests("Produce")[0].acks == -1


def test_produce_keys_headers_and_options(cluster, monkeypatch) -> None:
    cluster.create_topic("t", 3)
    stdin(monkeypatch, "h1:a,h2:b|k1:v1\nh3|k2:v:2\n|k3:NULL\n")
    assert (
        main(
            [
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--partition",
                "2",
                "--acks",
                "1",
                "--compression-type",
                "gzip",
                "--property",
                "parse.key=true",
                "key.separator=:",
                "--property",
                "parse.headers=true",
                "--property",
                "headers.delimiter=|",
                "--property",
                "null.marker=NULL",
                "--header",
                "src=cli",
            ]
        )
        == 0
    )
    assert values(cluster, "t", 2) == [
        (b"k1", b"v1", [("h1", b"a"), ("h2", b"b"), ("src", b"cli")]),
        (b"k2", b"v:2", [("h3", None), ("src", b"cli")]),
        (b"k3", None, [("src", b"cli")]),
    ]
    assert cluster.requests("Produce")[0].acks == 1
    assert {b.compression.name for b in cluster.partition("t", 2).raw_batches()} == {"GZIP"}


def test_produce_keyed_lines_use_kafkas_partitioner(cluster, monkeypatch) -> None:
    from kraftlog.client import partition_for_key

    cluster.create_topic("t", 5)
    keys = [f"user-{i}" for i in range(20)]
    stdin(monkeypatch, "".join(f"{k}\tv\n" for k in keys))
    assert main(["produce", *boot(cluster), "--topic", "t", "--property", "parse.key=true"]) == 0
    for k in keys:
        p = partition_for_key(k.encode(), 5)
        assert (k.encode(), b"v", []) in values(cluster, "t", p)


def test_produce_line_without_separator_fails(cluster, monkeypatch, capsys) -> None:
    cluster.create_topic("t", 1)
    stdin(monkeypatch, "a:1\nno separator\nb:2\n")
    assert main(["produce", *boot(cluster), "--topic", "t", "--property", "parse.key=true", "key.separator=:"]) == 1
    assert "No key separator found on line number 2: 'no separator'" in capsys.readouterr().err
    assert values(cluster, "t") == [(b"a", b"1", [])]  # what came before was sent
    stdin(monkeypatch, "no separator\n")
    assert (
        main(
            [
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--property",
                "parse.key=true",
                "--property",
                "ignore.error=true",
            ]
        )
        == 0
    )
    assert values(cluster, "t")[-1] == (None, b"no separator", [])


def test_produce_reports_failed_sends(cluster, monkeypatch, capsys) -> None:
    from kraftlog.common import errors as kerr

    cluster.create_topic("t", 1)
    cluster.produce_errors[("t", 0)] = [kerr.TopicAuthorizationFailedError]
    stdin(monkeypatch, "x\n")
    assert main(["produce", *boot(cluster), "--topic", "t", "--sync"]) == 1
    err = capsys.readouterr().err
    assert (
        "Error when sending message to topic t with key: null, value: 1 bytes with error: "
        "TOPIC_AUTHORIZATION_FAILED" in err
    )


def test_produce_bad_input_is_a_usage_error(cluster, monkeypatch, capsys) -> None:
    stdin(monkeypatch, "x\n")
    assert main(["produce", *boot(cluster), "--topic", "t", "--property", "oops"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err
    assert main(["produce", *boot(cluster), "--topic", "t", "--producer-property", "linger.ms=soon"]) == 2
    assert main(["produce", "--topic", "t"]) == 2  # no bootstrap server
    assert main(["produce", *boot(cluster), "--topic", "t", "--acks", "2"]) == 2


def test_settings_of_missing_features_are_usage_errors(cluster, monkeypatch, capsys) -> None:
    """Issue 12: --producer-property asking for what the command does not do (transactions) fails
    with the setting named, not silently (consumer groups exist since issue 14, idempotence and
    read_committed since issue 15; ``perf produce`` sends transactions since issue 25)."""
    cluster.create_topic("t", 1)
    stdin(monkeypatch, "x\n")
    cases = [
        (
            ["produce", *boot(cluster), "--topic", "t", "--producer-property", "transactional.id=tx"],
            "transactional.id",
        ),
    ]
    for argv, named in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert named in err and "sends no transactions" in err, err
    assert not cluster.partition("t").records()
    # the values that keep Kafka's meaning are fine
    assert (
        main(
            [
                "consume",
                *boot(cluster),
                "--topic",
                "t",
                "--timeout-ms",
                "100",
                "--consumer-property",
                "group.id=g",
                "--consumer-property",
                "enable.auto.commit=false",
            ]
        )
        == 0
    )


def test_produce_producer_config_file_and_unknown_property(cluster, monkeypatch, capsys, tmp_path) -> None:
    cluster.create_topic("t", 1)
    cfg = tmp_path / "producer.properties"
    cfg.write_text("# comment\nacks=0\ncompression.type=lz4\nmystery.setting=1\n")
    stdin(monkeypatch, "v\n")
    assert main(["produce", *boot(cluster), "--topic", "t", "--producer.config", str(cfg)]) == 0
    assert "The configuration 'mystery.setting' was supplied but isn't a known config." in capsys.readouterr().err
    assert cluster.requests("Produce")[0].acks == 0


def test_line_reader_rules() -> None:
    r = LineReader({"parse.key": "true", "parse.headers": "true"})
    assert r.parse("a:1,b\tk\tv\tw", 1) == (b"k", b"v\tw", [("a", b"1"), ("b", None)])
    with pytest.raises(UserError, match="No headers delimiter"):
        r.parse("no tabs", 3)
    with pytest.raises(UserError):
        LineReader({"key.separator": ""})


# ------------------------------------------------------------------------------------- consume


def test_consume_from_beginning_prints_values(cluster, capsysbinary) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, [(b"k0", b"v0", []), (None, b"v1", []), (b"k2", None, [])])
    assert main(["consume", *boot(cluster), "--topic", "t", "--from-beginning", "--max-messages", "3"]) == 0
    out = capsysbinary.readouterr()
    assert out.out == b"v0\nv1\nnull\n"
    assert b"Processed a total of 3 messages" in out.err


def test_consume_print_properties(cluster, capsysbinary) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, [(b"k0", b"v0", [("h1", b"x"), ("h2", None)]), (None, b"v1", [])])
    assert (
        main(
            [
                "consume",
                *boot(cluster),
                "--topic",
                "t",
                "--from-beginning",
                "--max-messages",
                "2",
                "--property",
                "print.key=true",
                "print.partition=true",
                "print.offset=true",
                "print.timestamp=true",
                "print.headers=true",
                "key.separator=|",
            ]
        )
        == 0
    )
    assert capsysbinary.readouterr().out.decode().splitlines() == [
        f"CreateTime:{TS}|Partition:0|Offset:0|h1:x,h2:null|k0|v0",
        f"CreateTime:{TS + 1}|Partition:0|Offset:1|NO_HEADERS|null|v1",
    ]


def test_consume_partition_and_offset(cluster, capsysbinary) -> None:
    cluster.create_topic("t", 2)
    write(cluster, "t", 1, [(None, b"v%d" % i, []) for i in range(6)])
    assert (
        main(["consume", *boot(cluster), "--topic", "t", "--partition", "1", "--offset", "4", "--timeout-ms", "500"])
        == 0
    )
    assert capsysbinary.readouterr().out == b"v4\nv5\n"
    assert (
        main(
            [
                "consume",
                *boot(cluster),
                "--topic",
                "t",
                "--partition",
                "1",
                "--offset",
                "earliest",
                "--max-messages",
                "1",
            ]
        )
        == 0
    )
    assert capsysbinary.readouterr().out == b"v0\n"


def test_consume_all_partitions_and_timeout(cluster, capsysbinary) -> None:
    cluster.create_topic("t", 3)
    for p in range(3):
        write(cluster, "t", p, [(None, b"p%d" % p, [])])
    assert (
        main(
            [
                "consume",
                *boot(cluster),
                "--topic",
                "t",
                "--from-beginning",
                "--timeout-ms",
                "600",
                "--property",
                "print.partition=true",
            ]
        )
        == 0
    )
    out = capsysbinary.readouterr()
    assert sorted(out.out.decode().splitlines()) == ["Partition:0\tp0", "Partition:1\tp1", "Partition:2\tp2"]
    assert b"Processed a total of 3 messages" in out.err


def test_consume_default_starts_at_the_end(cluster, capsysbinary) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, [(None, b"old", [])])
    assert main(["consume", *boot(cluster), "--topic", "t", "--timeout-ms", "300"]) == 0
    assert capsysbinary.readouterr().out == b""


def test_consume_argument_errors(cluster, capsys) -> None:
    cluster.create_topic("t", 1)
    assert main(["consume", *boot(cluster), "--topic", "t", "--offset", "3"]) == 2
    assert "The partition is required when offset is specified." in capsys.readouterr().err
    assert (
        main(["consume", *boot(cluster), "--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"]) == 2
    )
    assert main(["consume", *boot(cluster), "--topic", "t", "--partition", "0", "--offset", "soon"]) == 2
    assert main(["consume", *boot(cluster), "--topic", "t", "--partition", "5", "--timeout-ms", "100"]) == 1
    assert "partition 5 of topic 't' does not exist" in capsys.readouterr().err
    assert main(["consume", *boot(cluster), "--topic", "missing", "--timeout-ms", "300"]) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err


def test_produce_then_consume_round_trip(cluster, monkeypatch, capsysbinary) -> None:
    cluster.create_topic("t", 2)
    stdin(monkeypatch, "".join(f"key{i}:value {i} ü\n" for i in range(10)))
    assert (
        main(
            [
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--property",
                "parse.key=true",
                "key.separator=:",
                "--compression-type",
                "zstd",
            ]
        )
        == 0
    )
    capsysbinary.readouterr()
    assert (
        main(
            [
                "consume",
                *boot(cluster),
                "--topic",
                "t",
                "--from-beginning",
                "--max-messages",
                "10",
                "--property",
                "print.key=true",
                "key.separator==",
            ]
        )
        == 0
    )
    lines = capsysbinary.readouterr().out.decode().splitlines()
    assert sorted(lines) == sorted(f"key{i}=value {i} ü" for i in range(10))


# ------------------------------------------------------------------------------------- perf


PERIODIC = re.compile(
    r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$"
)
FINAL = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
    r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def test_perf_produce_prints_kafkas_lines_and_json(cluster, capsys) -> None:
    cluster.create_topic("t", 2)
    assert (
        main(
            [
                "perf",
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--num-records",
                "3000",
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--reporting-interval",
                "1",
                "--producer-props",
                "acks=1",
                "linger.ms=2",
                "batch.size=8192",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    figures = json.loads(lines[-1])
    assert FINAL.match(lines[-2]) and FINAL.match(lines[-2]).group(1) == "3000"
    assert all(PERIODIC.match(line) for line in lines[:-2])
    assert figures["records"] == 3000 and figures["failed"] == 0 and figures["bytes"] == 300_000
    assert figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"] <= figures["p999_ms"]
    assert figures["max_latency_ms"] >= figures["p999_ms"]
    stored = [r for p in range(2) for r in cluster.partition("t", p).records()]
    assert len(stored) == 3000 and all(len(r.value) == 100 and r.value.isupper() for r in stored)


def test_perf_produce_throttles(cluster, capsys) -> None:
    import time

    cluster.create_topic("t", 1)
    start = time.monotonic()
    assert (
        main(
            [
                "perf",
                "produce",
                "--topic",
                "t",
                "--num-records",
                "50",
                "--record-size",
                "10",
                "--throughput",
                "100",
                "--producer-props",
                f"bootstrap.servers={cluster.bootstrap}",
            ]
        )
        == 0
    )
    assert time.monotonic() - start >= 0.45
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["records"] == 50


def test_perf_produce_payload_file_and_errors(cluster, capsys, tmp_path) -> None:
    cluster.create_topic("t", 1)
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\n")
    assert (
        main(
            [
                "perf",
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--num-records",
                "20",
                "--payload-file",
                str(payloads),
                "--throughput",
                "-1",
            ]
        )
        == 0
    )
    assert {r.value for r in cluster.partition("t").records()} <= {b"alpha", b"beta"}
    capsys.readouterr()
    assert (
        main(["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"]) == 2
    )
    assert "bootstrap.servers" in capsys.readouterr().err
    assert (
        main(
            [
                "perf",
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--num-records",
                "1",
                "--record-size",
                "1",
                "--throughput",
                "0",
            ]
        )
        == 2
    )
    cluster.produce_errors[("t", 0)] = [
        __import__("kraftlog.common.errors").common.errors.TopicAuthorizationFailedError
    ]
    assert (
        main(
            [
                "perf",
                "produce",
                *boot(cluster),
                "--topic",
                "t",
                "--num-records",
                "1",
                "--record-size",
                "1",
                "--throughput",
                "-1",
            ]
        )
        == 1
    )
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["failed"] == 1


def test_perf_consume_prints_kafkas_figures_and_json(cluster, capsys) -> None:
    cluster.create_topic("t", 2)
    for p in range(2):
        write(cluster, "t", p, [(b"k", b"x" * 98, []) for _ in range(500)])
    assert main(["perf", "consume", *boot(cluster), "--topic", "t", "--messages", "1000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    fields = lines[1].split(", ")
    assert len(fields) == 10
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}$", fields[0])
    assert fields[2] == "%.4f" % (99_000 / 1024 / 1024) and fields[4] == "1000"
    figures = json.loads(lines[2])
    assert figures["records"] == 1000 and figures["bytes"] == 99_000 and not figures["timed_out"]


def test_perf_output_json_prints_only_the_figures(cluster, capsys) -> None:
    cluster.create_topic("t", 1)
    produce = ["perf", "produce", *boot(cluster), "--topic", "t", "--num-records", "200", "--record-size", "10"]
    assert main([*produce, "--throughput", "-1", "--reporting-interval", "1", "--output", "json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()  # no periodic or total lines for people
    assert json.loads(line)["records"] == 200
    consume = ["perf", "consume", *boot(cluster), "--topic", "t", "--messages", "200", "--show-detailed-stats"]
    assert main([*consume, "--reporting-interval", "1", "--output", "json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["records"] == 200


def test_perf_consume_stops_short_after_timeout(cluster, capsys) -> None:
    cluster.create_topic("t", 1)
    write(cluster, "t", 0, [(None, b"v", [])])
    assert (
        main(
            ["perf", "consume", *boot(cluster), "--topic", "t", "--messages", "5", "--timeout", "300", "--hide-header"]
        )
        == 1
    )
    out = capsys.readouterr()
    assert "WARNING: Exiting before consuming the expected number of messages: timeout (300 ms) exceeded." in out.err
    lines = out.out.splitlines()
    assert len(lines) == 2 and lines[0].split(", ")[4] == "1"
    assert json.loads(lines[1])["timed_out"] is True
