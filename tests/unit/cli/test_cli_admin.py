"""Tests of the admin subcommands (``topics``, ``configs``, ``reassign``, ``elect-leaders``,
``quorum``, ``metadata tree --bootstrap-server``): argument checking, exit codes and output, with a
fake admin client injected through each module's ``make_admin`` — no network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from kraftlog.cli import _configs, _elect_leaders, _metadata, _quorum, _reassign, _topics
from kraftlog.cli.__main__ import main
from kraftlog.common import errors as kerr
from kraftlog.proto import admin_pb2, errors_pb2

BOOT = ["--bootstrap-server", "localhost:9093"]
R = admin_pb2


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


def err(name: str, message: str = "", code: int | None = None) -> errors_pb2.Error:
    if code is None:
        code = kerr.error_for_name(name).error_code
    return errors_pb2.Error(code=code, name=name, message=message)


class FakeAdmin:
    """Answers each admin method with a canned response (or raises it, or calls it)."""

    def __init__(self, responses: dict[str, Any]) -> None:
        self.responses = responses
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.closed = False
        self.servers: list[str] | None = None
        self.timeout_ms: int | None = None

    def close(self) -> None:
        self.closed = True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.responses:
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            answer = self.responses[name]
            if isinstance(answer, BaseException):
                raise answer
            if callable(answer):
                return answer(*args, **kwargs)
            return answer

        return method

    def called(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]


@pytest.fixture
def fake(monkeypatch):
    """``fake(module, method=response, ...)`` installs a FakeAdmin as ``module.make_admin``."""

    def install(module: Any, **responses: Any) -> FakeAdmin:
        admin = FakeAdmin(responses)

        def factory(servers, *, request_timeout_ms):
            admin.servers = list(servers)
            admin.timeout_ms = request_timeout_ms
            return admin

        monkeypatch.setattr(module, "make_admin", factory)
        return admin

    return install


def one_line_error(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    for needle in needles:
        assert needle in captured.err, captured.err
    assert "Traceback" not in captured.err
    return captured.err


# ================================================================================ topics

P = R.DescribeTopicsResponse.Partition


def describe_response() -> admin_pb2.DescribeTopicsResponse:
    return R.DescribeTopicsResponse(
        topics=[
            R.DescribeTopicsResponse.Topic(
                name="orders",
                topic_id="T1",
                configs={"retention.ms": "1000", "cleanup.policy": "compact"},
                partitions=[
                    P(partition_index=1, leader_id=2, replicas=[2, 3, 1], isr=[2, 3]),
                    P(partition_index=0, leader_id=1, replicas=[1, 2, 3], isr=[1, 2, 3]),
                    P(
                        partition_index=2,
                        leader_id=-1,
                        replicas=[3, 1, 2],
                        isr=[3],
                        offline_replicas=[3],
                        controller_epoch=6,
                    ),
                ],
            ),
            R.DescribeTopicsResponse.Topic(
                name="__consumer_offsets",
                topic_id="T0",
                partitions=[P(partition_index=0, leader_id=1, replicas=[1], isr=[1])],
            ),
            R.DescribeTopicsResponse.Topic(
                name="moving",
                topic_id="T2",
                partitions=[
                    P(
                        partition_index=0,
                        leader_id=1,
                        replicas=[1, 2, 3],
                        isr=[1, 2, 3],
                        adding_replicas=[3],
                        removing_replicas=[1],
                    )
                ],
            ),
        ]
    )


def test_topics_create(fake, capsys) -> None:
    admin = fake(
        _topics,
        create_topics=R.CreateTopicsResponse(
            topics=[R.CreateTopicsResponse.Result(name="orders", topic_id="T1", num_partitions=3, replication_factor=2)]
        ),
    )
    assert (
        main(
            [
                "topics",
                "create",
                "--topic",
                "orders",
                "--partitions",
                "3",
                "--replication-factor",
                "2",
                "--config",
                "cleanup.policy=compact",
                "--config",
                "retention.ms=1000",
                *BOOT,
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == "Created topic orders.\n"
    ((args, kwargs),) = admin.called("create_topics")
    (topic,) = args[0]
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("orders", 3, 2)
    assert topic.configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert kwargs["validate_only"] is False
    assert admin.servers == ["localhost:9093"] and admin.timeout_ms == 30_000 and admin.closed


def test_topics_create_defaults_assignment_validate_only_and_json(fake, capsys) -> None:
    admin = fake(
        _topics,
        create_topics=R.CreateTopicsResponse(
            topics=[R.CreateTopicsResponse.Result(name="t", topic_id="X", num_partitions=3, replication_factor=2)]
        ),
    )
    assert (
        main(
            [
                "topics",
                "create",
                "--topic",
                "t",
                "--replica-assignment",
                "1:2, 2:3,3:1",
                "--validate-only",
                "--request-timeout-ms",
                "500",
                *BOOT,
            ]
        )
        == 0
    )
    assert "validate only" in capsys.readouterr().out
    ((args, kwargs),) = admin.called("create_topics")
    (topic,) = args[0]
    assert topic.assignments == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)
    assert kwargs["validate_only"] is True and admin.timeout_ms == 500
    assert main(["topics", "create", "--topic", "t", "--output", "json", *BOOT]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj == {
        "name": "t",
        "topic_id": "X",
        "partitions": 3,
        "replication_factor": 2,
        "configs": {},
        "validate_only": False,
        "created": True,
    }
    topic = admin.called("create_topics")[-1][0][0][0]
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)  # the cluster's defaults


def test_topics_create_already_exists(fake, capsys) -> None:
    fake(
        _topics,
        create_topics=R.CreateTopicsResponse(
            topics=[
                R.CreateTopicsResponse.Result(name="t", error=err("TOPIC_ALREADY_EXISTS", "topic 't' already exists"))
            ]
        ),
    )
    assert main(["topics", "create", "--topic", "t", *BOOT]) == 1
    one_line_error(capsys, "TOPIC_ALREADY_EXISTS", "topic 't' already exists")
    assert main(["topics", "create", "--topic", "t", "--if-not-exists", *BOOT]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--replica-assignment", "1:x"], "not a list of broker ids"),
        (["--replica-assignment", "1:1"], "duplicate"),
        (["--replica-assignment", "1:2,3"], "different replication factor"),
        (["--replica-assignment", "1:2,,3:4"], "no replicas"),
        (["--replica-assignment", "1:-2"], "negative"),
        (["--replica-assignment", "1:2", "--partitions", "1"], "cannot be used with"),
        (["--partitions", "0"], "--partitions"),
        (["--replication-factor", "two"], "--replication-factor"),
        (["--config", "novalue"], "key=value"),
    ],
)
def test_topics_create_bad_input_exits_2(fake, capsys, argv, needle) -> None:
    admin = fake(_topics, create_topics=AssertionError("must not be called"))
    assert main(["topics", "create", "--topic", "t", *argv, *BOOT]) == 2
    one_line_error(capsys, needle)
    assert admin.calls == []


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["topics", "create", *BOOT], "--topic"),
        (["topics", "create", "--topic", "t"], "--bootstrap-server"),
        (["topics", "create", "--topic", "t", "--bootstrap-server", "nohost"], "not host:port"),
        (["topics", "alter", "--topic", "t", *BOOT], "--partitions"),
        (["topics", "delete", *BOOT], "--topic"),
        (["topics"], "ACTION"),
        (["topics", "describe", *BOOT, "--output", "yaml"], "--output"),
    ],
)
def test_topics_missing_options_exit_2(capsys, argv, needle) -> None:
    assert main(argv) == 2
    one_line_error(capsys, needle)


def test_topics_timeout_is_exit_1(fake, capsys) -> None:
    fake(_topics, describe_topics=kerr.RequestTimedOutError("DescribeTopics: no controller answered"))
    assert main(["topics", "list", *BOOT]) == 1
    one_line_error(capsys, "REQUEST_TIMED_OUT", "no controller answered")


def test_topics_list(fake, capsys) -> None:
    fake(_topics, describe_topics=describe_response())
    assert main(["topics", "list", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == ["__consumer_offsets", "moving", "orders"]
    assert main(["topics", "list", "--exclude-internal", "--output", "json", *BOOT]) == 0
    assert json.loads(capsys.readouterr().out) == {"topics": ["moving", "orders"]}


def test_topics_describe_kafka_format(fake, capsys) -> None:
    admin = fake(_topics, describe_topics=describe_response())
    assert main(["topics", "describe", "--topic", "orders", *BOOT]) == 0
    assert admin.called("describe_topics")[0][0] == (["orders"],)
    assert capsys.readouterr().out.splitlines() == [
        "Topic: orders\tTopicId: T1\tPartitionCount: 3\tReplicationFactor: 3\t"
        "Configs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tOffline: ",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3\tOffline: ",
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tOffline: 3",
    ]


def test_topics_describe_all_with_reassignment_and_filters(fake, capsys) -> None:
    fake(_topics, describe_topics=describe_response())
    assert main(["topics", "describe", "--exclude-internal", *BOOT]) == 0
    out = capsys.readouterr().out
    assert "__consumer_offsets" not in out
    assert "Topic: moving\tTopicId: T2\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: " in out
    assert "\tAdding Replicas: 3\tRemoving Replicas: 1" in out
    assert main(["topics", "describe", "--under-replicated-partitions", *BOOT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in lines] == ["Partition: 1", "Partition: 2"]
    assert all("TopicId" not in line for line in lines)  # no topic lines with a filter, as Kafka
    assert main(["topics", "describe", "--unavailable-partitions", *BOOT]) == 0
    assert (
        capsys.readouterr().out == "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tOffline: 3\n"
    )


def test_topics_describe_json(fake, capsys) -> None:
    fake(_topics, describe_topics=describe_response())
    assert main(["topics", "describe", "--output", "json", *BOOT]) == 0
    obj = json.loads(capsys.readouterr().out)
    orders = next(t for t in obj["topics"] if t["name"] == "orders")
    assert orders["partition_count"] == 3 and orders["replication_factor"] == 3
    assert orders["configs"] == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert [p["partition"] for p in orders["partitions"]] == [0, 1, 2]
    assert orders["partitions"][2] == {
        "topic": "orders",
        "partition": 2,
        "leader": None,
        "leader_epoch": 0,
        "partition_epoch": 0,
        "replicas": [3, 1, 2],
        "isr": [3],
        "offline": [3],
        "adding_replicas": [],
        "removing_replicas": [],
    }


def test_topics_describe_unknown_topic(fake, capsys) -> None:
    fake(
        _topics,
        describe_topics=R.DescribeTopicsResponse(
            topics=[
                R.DescribeTopicsResponse.Topic(
                    name="nope", error=err("UNKNOWN_TOPIC_OR_PARTITION", "topic 'nope' does not exist")
                )
            ]
        ),
    )
    assert main(["topics", "describe", "--topic", "nope", *BOOT]) == 1
    one_line_error(capsys, "UNKNOWN_TOPIC_OR_PARTITION", "does not exist")
    assert main(["topics", "describe", "--topic", "nope", "--if-exists", *BOOT]) == 0
    assert capsys.readouterr().err == ""


def test_topics_delete(fake, capsys) -> None:
    admin = fake(
        _topics,
        delete_topics=R.DeleteTopicsResponse(
            topics=[
                R.DeleteTopicsResponse.Result(name="a", topic_id="A"),
                R.DeleteTopicsResponse.Result(
                    name="b", error=err("UNKNOWN_TOPIC_OR_PARTITION", "topic b does not exist")
                ),
            ]
        ),
    )
    assert main(["topics", "delete", "--topic", "a", "--topic", "b", *BOOT]) == 1
    captured = capsys.readouterr()
    assert captured.out == "Deleted topic a.\n"
    assert "UNKNOWN_TOPIC_OR_PARTITION" in captured.err
    assert admin.called("delete_topics")[0][0] == (["a", "b"], [])
    assert main(["topics", "delete", "--topic", "a", "--topic", "b", "--if-exists", "--output", "json", *BOOT]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["topics"] == [
        {"name": "a", "topic_id": "A", "deleted": True},
        {"name": "b", "deleted": False, "exists": False},
    ]


ORDERS_ID = "6f1c0b8e-3c1a-4a53-9d2e-0b6c1e2f3a4b"
ORDERS_KAFKA_ID = "bxwLjjwaSlOdLgtsHi86Sw"  # the same 16 bytes in Kafka's URL-safe base64


def test_topic_ids_are_shown_and_accepted_in_kafkas_form(fake, capsys) -> None:
    topics = R.DescribeTopicsResponse(
        topics=[
            R.DescribeTopicsResponse.Topic(
                name="orders", topic_id=ORDERS_ID, partitions=[P(partition_index=0, leader_id=1, replicas=[1], isr=[1])]
            )
        ]
    )
    admin = fake(_topics, describe_topics=topics)
    assert main(["topics", "describe", "--topic", "orders", *BOOT]) == 0
    assert f"TopicId: {ORDERS_KAFKA_ID}\t" in capsys.readouterr().out
    # by id, in Kafka's form or the hex form
    for given in (ORDERS_KAFKA_ID, ORDERS_ID):
        assert main(["topics", "describe", "--topic-id", given, "--output", "json", *BOOT]) == 0
        described = json.loads(capsys.readouterr().out)["topics"]
        assert [(t["name"], t["topic_id"]) for t in described] == [("orders", ORDERS_KAFKA_ID)]
    assert admin.called("describe_topics")[-1][0] == (["orders"],)
    assert main(["topics", "describe", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAA", *BOOT]) == 1
    assert "UNKNOWN_TOPIC_ID" in capsys.readouterr().err
    assert main(["topics", "describe", "--topic-id", "not-an-id", *BOOT]) == 2
    assert "not a UUID" in capsys.readouterr().err
    deleting = fake(
        _topics,
        delete_topics=R.DeleteTopicsResponse(topics=[R.DeleteTopicsResponse.Result(name="orders", topic_id=ORDERS_ID)]),
    )
    assert main(["topics", "delete", "--topic-id", ORDERS_KAFKA_ID, "--output", "json", *BOOT]) == 0
    assert json.loads(capsys.readouterr().out)["topics"][0]["topic_id"] == ORDERS_KAFKA_ID
    assert deleting.called("delete_topics")[0][0] == ([], [ORDERS_ID])  # the cluster gets the canonical form
    assert main(["topics", "delete", *BOOT]) == 2


def test_topics_alter(fake, capsys) -> None:
    admin = fake(
        _topics,
        create_partitions=R.CreatePartitionsResponse(results=[R.CreatePartitionsResponse.Result(name="orders")]),
        describe_topics=describe_response(),
    )
    assert main(["topics", "alter", "--topic", "orders", "--partitions", "6", *BOOT]) == 0
    assert "Adding partitions succeeded!" in capsys.readouterr().out
    ((args, kwargs),) = admin.called("create_partitions")
    assert args == ({"orders": 6},) and kwargs["assignments"] is None
    # with an assignment of every partition, only the new ones are sent
    assert (
        main(
            [
                "topics",
                "alter",
                "--topic",
                "orders",
                "--partitions",
                "5",
                "--replica-assignment",
                "1:2:3,2:3:1,3:1:2,1:3:2,2:1:3",
                *BOOT,
            ]
        )
        == 0
    )
    args, kwargs = admin.called("create_partitions")[-1]
    assert kwargs["assignments"] == {"orders": [[1, 3, 2], [2, 1, 3]]}
    assert (
        main(["topics", "alter", "--topic", "orders", "--partitions", "4", "--replica-assignment", "1:2", *BOOT]) == 2
    )
    one_line_error(capsys, "lists 1 partitions")


def test_topics_alter_errors(fake, capsys) -> None:
    fake(
        _topics,
        create_partitions=R.CreatePartitionsResponse(
            results=[
                R.CreatePartitionsResponse.Result(
                    name="orders", error=err("INVALID_PARTITIONS", "topic already has 3 partitions")
                )
            ]
        ),
    )
    assert main(["topics", "alter", "--topic", "orders", "--partitions", "3", *BOOT]) == 1
    one_line_error(capsys, "INVALID_PARTITIONS", "already has 3 partitions")
    fake(
        _topics,
        create_partitions=R.CreatePartitionsResponse(
            results=[R.CreatePartitionsResponse.Result(name="gone", error=err("UNKNOWN_TOPIC_OR_PARTITION"))]
        ),
    )
    assert main(["topics", "alter", "--topic", "gone", "--partitions", "3", "--if-exists", *BOOT]) == 0


def test_error_name_looked_up_by_code_when_missing(fake, capsys) -> None:
    fake(
        _topics,
        create_topics=R.CreateTopicsResponse(
            topics=[R.CreateTopicsResponse.Result(name="t", error=errors_pb2.Error(code=38, message="only 1 broker"))]
        ),
    )
    assert main(["topics", "create", "--topic", "t", *BOOT]) == 1
    one_line_error(capsys, "INVALID_REPLICATION_FACTOR: only 1 broker")


# ================================================================================ configs

E = R.DescribeConfigsResponse.Entry


def configs_response(name: str, rtype: int = 2) -> admin_pb2.DescribeConfigsResponse:
    return R.DescribeConfigsResponse(
        results=[
            R.DescribeConfigsResponse.Result(
                resource=R.ConfigResource(resource_type=rtype, resource_name=name),
                configs=[
                    E(name="retention.ms", value="1000", has_value=True, source="DYNAMIC_TOPIC_CONFIG"),
                    E(name="cleanup.policy", value="delete", has_value=True, is_default=True, source="DEFAULT_CONFIG"),
                    E(name="log.cleaner.threads", value="2", has_value=True, source="DYNAMIC_BROKER_CONFIG"),
                    E(name="num.io.threads", value="16", has_value=True, source="DYNAMIC_DEFAULT_BROKER_CONFIG"),
                    E(
                        name="ssl.key.password",
                        value="",
                        has_value=False,
                        is_sensitive=True,
                        source="DYNAMIC_BROKER_CONFIG",
                    ),
                ],
            )
        ]
    )


def test_configs_describe_topic(fake, capsys) -> None:
    admin = fake(_configs, describe_configs=configs_response("orders"))
    assert main(["configs", "describe", "--entity-type", "topics", "--entity-name", "orders", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for topic orders are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
    ]
    assert admin.called("describe_configs")[0][0] == ([(2, "orders")],)
    assert (
        main(
            [
                "configs",
                "describe",
                "--entity-type",
                "topics",
                "--entity-name",
                "orders",
                "--all",
                "--output",
                "json",
                *BOOT,
            ]
        )
        == 0
    )
    obj = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in obj["configs"]] == sorted(c["name"] for c in obj["configs"])
    assert {
        "name": "ssl.key.password",
        "value": None,
        "source": "DYNAMIC_BROKER_CONFIG",
        "is_default": False,
        "read_only": False,
        "is_sensitive": True,
    } in obj["configs"]


def test_configs_describe_prints_every_synonym_in_the_clusters_order(fake, capsys) -> None:
    R = admin_pb2.DescribeConfigsResponse
    entry = R.Entry(
        name="retention.ms",
        value="1000",
        has_value=True,
        source="DYNAMIC_TOPIC_CONFIG",
        synonyms=[
            R.Synonym(name="retention.ms", value="1000", has_value=True, source="DYNAMIC_TOPIC_CONFIG"),
            R.Synonym(name="log.retention.hours", value="168", has_value=True, source="DEFAULT_CONFIG"),
        ],
    )
    response = R(
        results=[
            R.Result(
                resource=admin_pb2.ConfigResource(resource_type=2, resource_name="orders"),
                error=errors_pb2.Error(code=0, name="NONE"),
                configs=[entry],
            )
        ]
    )
    admin = fake(_configs, describe_configs=response)
    assert main(["configs", "describe", "--entity-type", "topics", "--entity-name", "orders", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  retention.ms=1000 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.hours=168}"
    )
    assert admin.called("describe_configs")[0][1] == {"include_synonyms": True}  # as kafka-configs asks


def test_configs_describe_brokers(fake, capsys) -> None:
    admin = fake(_configs, describe_configs=configs_response("1", 4))
    assert main(["configs", "describe", "--entity-type", "brokers", "--entity-name", "1", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2}",
        "  ssl.key.password=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:ssl.key.password=null}",
    ]
    assert main(["configs", "describe", "--entity-type", "brokers", "--entity-default", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  num.io.threads=16 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=16}",
    ]
    assert admin.called("describe_configs")[-1][0] == ([(4, "")],)


def test_configs_describe_error(fake, capsys) -> None:
    fake(
        _configs,
        describe_configs=R.DescribeConfigsResponse(
            results=[
                R.DescribeConfigsResponse.Result(error=err("UNKNOWN_TOPIC_OR_PARTITION", "topic 'x' does not exist"))
            ]
        ),
    )
    assert main(["configs", "describe", "--entity-type", "topics", "--entity-name", "x", *BOOT]) == 1
    one_line_error(capsys, "UNKNOWN_TOPIC_OR_PARTITION")


def test_configs_alter(fake, capsys) -> None:
    admin = fake(
        _configs,
        incremental_alter_configs=R.IncrementalAlterConfigsResponse(
            results=[R.IncrementalAlterConfigsResponse.Result()]
        ),
    )
    assert (
        main(
            [
                "configs",
                "alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "orders",
                "--add-config",
                "retention.ms=1000,cleanup.policy=[compact,delete]",
                "--delete-config",
                "segment.bytes,max.message.bytes",
                *BOOT,
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == "Completed updating config for topic orders.\n"
    ((args, _),) = admin.called("incremental_alter_configs")
    assert args == (
        {
            (2, "orders"): [
                ("retention.ms", 0, "1000"),
                ("cleanup.policy", 0, "compact,delete"),
                ("segment.bytes", 1, ""),
                ("max.message.bytes", 1, ""),
            ]
        },
    )
    assert (
        main(
            [
                "configs",
                "alter",
                "--entity-type",
                "brokers",
                "--entity-default",
                "--add-config",
                "num.io.threads=16",
                *BOOT,
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == "Completed updating default config for brokers in the cluster.\n"
    assert admin.called("incremental_alter_configs")[-1][0] == ({(4, ""): [("num.io.threads", 0, "16")]},)
    assert (
        main(
            [
                "configs",
                "alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "2",
                "--append-config",
                "a=x",
                "--subtract-config",
                "b=y",
                "--output",
                "json",
                *BOOT,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["appended"] == {"a": "x"}
    assert admin.called("incremental_alter_configs")[-1][0] == ({(4, "2"): [("a", 2, "x"), ("b", 3, "y")]},)


def test_configs_alter_cluster_error(fake, capsys) -> None:
    fake(
        _configs,
        incremental_alter_configs=R.IncrementalAlterConfigsResponse(
            results=[R.IncrementalAlterConfigsResponse.Result(error=err("INVALID_CONFIG", "bad retention.ms"))]
        ),
    )
    assert (
        main(
            [
                "configs",
                "alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "t",
                "--add-config",
                "retention.ms=-5",
                *BOOT,
            ]
        )
        == 1
    )
    one_line_error(capsys, "INVALID_CONFIG: bad retention.ms")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["describe", "--entity-type", "topics"], "--entity-name is required"),
        (["describe", "--entity-type", "users", "--entity-name", "x"], "--entity-type"),
        (["describe", "--entity-type", "brokers", "--entity-name", "one"], "broker id"),
        (["describe", "--entity-type", "topics", "--entity-default"], "only valid with --entity-type brokers"),
        (["alter", "--entity-type", "topics", "--entity-name", "t"], "at least one of"),
        (["alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "novalue"], "key=value"),
        (
            ["alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "a=1", "--delete-config", "a"],
            "both",
        ),
    ],
)
def test_configs_bad_input_exits_2(fake, capsys, argv, needle) -> None:
    admin = fake(_configs)
    assert main(["configs", *argv, *BOOT]) == 2
    one_line_error(capsys, needle)
    assert admin.calls == []


# ================================================================================ reassign


def write_json(path: Path, obj: Any) -> str:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


PLAN = {
    "version": 1,
    "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 3, 4]},
        {"topic": "orders", "partition": 1, "replicas": [3, 4, 2]},
    ],
}


def no_reassignments(*_a: Any, **_k: Any) -> admin_pb2.ListPartitionReassignmentsResponse:
    return R.ListPartitionReassignmentsResponse()


def test_reassign_execute(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(tmp_path / "plan.json", PLAN)
    admin = fake(
        _reassign,
        list_partition_reassignments=no_reassignments,
        describe_topics=describe_response(),
        alter_partition_reassignments=R.AlterPartitionReassignmentsResponse(
            results=[
                R.AlterPartitionReassignmentsResponse.PartitionResult(topic="orders", partition=0),
                R.AlterPartitionReassignmentsResponse.PartitionResult(topic="orders", partition=1),
            ]
        ),
    )
    assert main(["reassign", "execute", "--reassignment-json-file", plan, *BOOT]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert json.loads(out[2]) == {
        "version": 1,
        "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]},
            {"topic": "orders", "partition": 1, "replicas": [2, 3, 1], "log_dirs": ["any", "any", "any"]},
        ],
    }
    assert out[4] == "Save this to use as the --reassignment-json-file option during rollback"
    assert out[5] == "Successfully started partition reassignments for orders-0,orders-1"
    ((args, _),) = admin.called("alter_partition_reassignments")
    assert args == ({("orders", 0): [2, 3, 4], ("orders", 1): [3, 4, 2]},)


def test_reassign_execute_refuses_when_one_is_in_progress(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(tmp_path / "plan.json", PLAN)
    ongoing = R.ListPartitionReassignmentsResponse(
        reassignments=[R.ListPartitionReassignmentsResponse.Ongoing(topic="moving", partition=0, replicas=[1, 2, 3])]
    )
    admin = fake(
        _reassign,
        list_partition_reassignments=ongoing,
        describe_topics=describe_response(),
        alter_partition_reassignments=R.AlterPartitionReassignmentsResponse(
            results=[
                R.AlterPartitionReassignmentsResponse.PartitionResult(
                    topic="orders", partition=0, error=err("INVALID_REPLICA_ASSIGNMENT", "broker 4 unknown")
                ),
                R.AlterPartitionReassignmentsResponse.PartitionResult(topic="orders", partition=1),
            ]
        ),
    )
    assert main(["reassign", "execute", "--reassignment-json-file", plan, *BOOT]) == 1
    one_line_error(capsys, "REASSIGNMENT_IN_PROGRESS", "--additional", "moving-0")
    assert admin.called("alter_partition_reassignments") == []
    assert main(["reassign", "execute", "--additional", "--reassignment-json-file", plan, *BOOT]) == 1
    captured = capsys.readouterr()
    assert "Successfully started partition reassignments for orders-1" in captured.out
    assert "orders-0: INVALID_REPLICA_ASSIGNMENT: broker 4 unknown" in captured.err


def test_reassign_execute_unknown_topic(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(
        tmp_path / "plan.json", {"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]}
    )
    fake(
        _reassign,
        list_partition_reassignments=no_reassignments,
        describe_topics=R.DescribeTopicsResponse(
            topics=[
                R.DescribeTopicsResponse.Topic(name="nope", error=err("UNKNOWN_TOPIC_OR_PARTITION", "no such topic"))
            ]
        ),
    )
    assert main(["reassign", "execute", "--reassignment-json-file", plan, *BOOT]) == 1
    one_line_error(capsys, "UNKNOWN_TOPIC_OR_PARTITION", "nope")


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
        ({"version": 1}, "'partitions' must be a list"),
        ({"version": 2, "partitions": []}, "unsupported version"),
        ({"version": 1, "partitions": []}, "cannot be empty"),
        ({"partitions": [{"topic": "t", "partition": 0}]}, "'replicas'"),
        ({"partitions": [{"topic": "t", "partition": True, "replicas": [1]}]}, "'partition'"),
        ({"partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}, "'topic'"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "cannot be empty"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "duplicate entries"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, "2"]}]}, "list of broker ids"),
        (
            {
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [1]},
                    {"topic": "t", "partition": 0, "replicas": [2]},
                ]
            },
            "duplicate topic partitions: t-0",
        ),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}]}, "log dirs"),
    ],
)
def test_reassign_bad_plan_exits_2(fake, tmp_path: Path, capsys, content, needle) -> None:
    admin = fake(_reassign)
    plan = write_json(tmp_path / "plan.json", content)
    for action in ("execute", "verify", "cancel"):
        assert main(["reassign", action, "--reassignment-json-file", plan, *BOOT]) == 2
        one_line_error(capsys, needle)
    assert admin.calls == []


def test_reassign_missing_file_and_options_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["reassign", "execute", "--reassignment-json-file", str(tmp_path / "none.json"), *BOOT]) == 2
    one_line_error(capsys, "no such file")
    assert main(["reassign", "verify", *BOOT]) == 2
    one_line_error(capsys, "--reassignment-json-file")
    assert main(["reassign", "generate", "--broker-list", "1,x", "--topics-to-move-json-file", "f", *BOOT]) == 2
    one_line_error(capsys, "broker id")


def test_reassign_verify(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(
        tmp_path / "plan.json",
        {
            "version": 1,
            "partitions": [
                {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]},  # completed
                {"topic": "orders", "partition": 1, "replicas": [2, 3, 4]},  # in progress
                {"topic": "orders", "partition": 2, "replicas": [3, 1, 2]},
            ],
        },
    )  # completed
    ongoing = R.ListPartitionReassignmentsResponse(
        reassignments=[
            R.ListPartitionReassignmentsResponse.Ongoing(
                topic="orders", partition=1, replicas=[2, 3, 1, 4], adding_replicas=[4], removing_replicas=[1]
            )
        ]
    )
    admin = fake(_reassign, list_partition_reassignments=ongoing, describe_topics=describe_response())
    assert main(["reassign", "verify", "--reassignment-json-file", plan, *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition orders-0 is completed.",
        "Reassignment of partition orders-1 is still in progress.",
        "Reassignment of partition orders-2 is completed.",
    ]
    assert admin.called("list_partition_reassignments")[0][0] == ({"orders": [0, 1, 2]},)
    assert main(["reassign", "verify", "--reassignment-json-file", plan, "--output", "json", *BOOT]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["complete"] is False
    assert [p["status"] for p in obj["partitions"]] == ["completed", "in_progress", "completed"]


def test_reassign_verify_mismatch_exits_1(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(
        tmp_path / "plan.json",
        {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 5, 6]}]},
    )
    fake(_reassign, list_partition_reassignments=no_reassignments, describe_topics=describe_response())
    assert main(["reassign", "verify", "--reassignment-json-file", plan, *BOOT]) == 1
    assert (
        "There is no active reassignment of partition orders-0, but replica set is 1,2,3 rather "
        "than 4,5,6." in capsys.readouterr().out
    )


def test_reassign_cancel(fake, tmp_path: Path, capsys) -> None:
    plan = write_json(tmp_path / "plan.json", PLAN)
    ongoing = R.ListPartitionReassignmentsResponse(
        reassignments=[R.ListPartitionReassignmentsResponse.Ongoing(topic="orders", partition=1, replicas=[2, 3, 1, 4])]
    )
    admin = fake(
        _reassign,
        list_partition_reassignments=ongoing,
        alter_partition_reassignments=R.AlterPartitionReassignmentsResponse(
            results=[R.AlterPartitionReassignmentsResponse.PartitionResult(topic="orders", partition=1)]
        ),
    )
    assert main(["reassign", "cancel", "--reassignment-json-file", plan, *BOOT]) == 0
    assert capsys.readouterr().out == "Successfully cancelled partition reassignments for: orders-1\n"
    ((args, _),) = admin.called("alter_partition_reassignments")
    assert args == ({("orders", 1): None},)
    fake(_reassign, list_partition_reassignments=no_reassignments)
    assert main(["reassign", "cancel", "--reassignment-json-file", plan, *BOOT]) == 0
    assert capsys.readouterr().out == "None of the specified partition reassignments are active.\n"


def cluster_response(racks: dict[int, str] | None = None) -> admin_pb2.DescribeClusterResponse:
    racks = racks or {}
    return R.DescribeClusterResponse(
        cluster_id="CID",
        controller_id=3000,
        brokers=[
            R.DescribeClusterResponse.Broker(
                broker_id=b,
                host=f"h{b}",
                port=9092,
                rack=racks.get(b, ""),
                broker_epoch=10 + b,
                security_protocol="PLAINTEXT",
                registration_timestamp_ms=1_700_000_000_000 + b,
            )
            for b in (1, 2, 3, 4)
        ],
    )


def test_reassign_generate(fake, tmp_path: Path, capsys) -> None:
    topics = write_json(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": "orders"}]})
    fake(_reassign, describe_topics=describe_response(), describe_cluster=cluster_response())
    assert main(["reassign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "2,3,4", *BOOT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert [p["partition"] for p in proposed["partitions"]] == [0, 1, 2]
    for p in proposed["partitions"]:
        assert sorted(p["replicas"]) == [2, 3, 4] and p["log_dirs"] == ["any"] * 3
    # the proposal is a valid plan for execute
    assert _reassign.parse_plan(proposed)
    assert main(["reassign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "2,9", *BOOT]) == 2
    one_line_error(capsys, "unknown broker id(s) in --broker-list: 9")
    assert (
        main(
            [
                "reassign",
                "generate",
                "--topics-to-move-json-file",
                topics,
                "--broker-list",
                "2,3",
                "--output",
                "json",
                *BOOT,
            ]
        )
        == 2
    )  # replication factor 3 on 2 brokers
    one_line_error(capsys, "cannot place topic 'orders'")


def test_reassign_generate_mixed_racks(fake, tmp_path: Path, capsys) -> None:
    topics = write_json(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": "orders"}]})
    fake(_reassign, describe_topics=describe_response(), describe_cluster=cluster_response({1: "a"}))
    assert main(["reassign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3", *BOOT]) == 2
    one_line_error(capsys, "--disable-rack-aware")
    assert (
        main(
            [
                "reassign",
                "generate",
                "--topics-to-move-json-file",
                topics,
                "--broker-list",
                "1,2,3",
                "--disable-rack-aware",
                "--output",
                "json",
                *BOOT,
            ]
        )
        == 0
    )
    obj = json.loads(capsys.readouterr().out)
    assert len(obj["proposed"]["partitions"]) == 3 and len(obj["current"]["partitions"]) == 3


# ================================================================================ elect-leaders

PR = R.ElectLeadersResponse.PartitionResult


def election_response() -> admin_pb2.ElectLeadersResponse:
    return R.ElectLeadersResponse(
        results=[
            PR(topic="orders", partition=1),
            PR(topic="orders", partition=0),
            PR(topic="orders", partition=2, error=err("ELECTION_NOT_NEEDED", "the preferred replica already leads")),
            PR(topic="gone", partition=0, error=err("UNKNOWN_TOPIC_OR_PARTITION", "unknown topic or partition")),
        ]
    )


def test_elect_leaders_output(fake, capsys) -> None:
    admin = fake(_elect_leaders, elect_leaders=election_response())
    assert main(["elect-leaders", "--election-type", "preferred", "--all-topic-partitions", *BOOT]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions orders-0, orders-1",
        "Valid replica already elected for partitions orders-2",
    ]
    assert (
        "Error completing leader election (PREFERRED) for partition: gone-0: "
        "UNKNOWN_TOPIC_OR_PARTITION: unknown topic or partition"
    ) in captured.err
    assert "1 replica(s) could not be elected" in captured.err
    ((args, _),) = admin.called("elect_leaders")
    assert args == (0, None)


def test_elect_leaders_selections(fake, tmp_path: Path, capsys) -> None:
    admin = fake(_elect_leaders, elect_leaders=R.ElectLeadersResponse(results=[PR(topic="t", partition=3)]))
    assert main(["elect-leaders", "--election-type", "UNCLEAN", "--topic", "t", "--partition", "3", *BOOT]) == 0
    assert capsys.readouterr().out == "Successfully completed leader election (UNCLEAN) for partitions t-3\n"
    assert admin.called("elect_leaders")[-1][0] == (1, {"t": [3]})
    path = write_json(
        tmp_path / "p.json", {"partitions": [{"topic": "t", "partition": 3}, {"topic": "u", "partition": 0}]}
    )
    assert (
        main(["elect-leaders", "--election-type", "PREFERRED", "--path-to-json-file", path, "--output", "json", *BOOT])
        == 0
    )
    assert admin.called("elect_leaders")[-1][0] == (0, {"t": [3], "u": [0]})
    assert json.loads(capsys.readouterr().out) == {
        "election_type": "PREFERRED",
        "results": [{"topic": "t", "partition": 3, "status": "elected", "error": None}],
    }


def test_elect_leaders_top_level_error(fake, capsys) -> None:
    fake(
        _elect_leaders,
        elect_leaders=R.ElectLeadersResponse(error=err("CLUSTER_AUTHORIZATION_FAILED", "not allowed")),
    )
    assert main(["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", *BOOT]) == 1
    one_line_error(capsys, "CLUSTER_AUTHORIZATION_FAILED: not allowed")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--election-type", "PREFERRED"], "exactly one of"),
        (
            ["--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
            "exactly one of",
        ),
        (["--election-type", "PREFERRED", "--topic", "t"], "--topic needs --partition"),
        (["--election-type", "PREFERRED", "--partition", "1"], "--partition needs --topic"),
        (["--election-type", "RANDOM", "--all-topic-partitions"], "PREFERRED or UNCLEAN"),
        (["--all-topic-partitions"], "--election-type"),
        (["--election-type", "PREFERRED", "--topic", "t", "--partition", "-1"], "negative"),
    ],
)
def test_elect_leaders_bad_input_exits_2(fake, capsys, argv, needle) -> None:
    admin = fake(_elect_leaders, elect_leaders=election_response())
    assert main(["elect-leaders", *argv, *BOOT]) == 2
    one_line_error(capsys, needle)
    assert admin.calls == []


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[]", "'partitions' list"),
        ({"partitions": [{"topic": "t"}]}, "'partition'"),
        ({"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}, "duplicate partitions: t-0"),
        ({"partitions": []}, "empty"),
        ("nope", "not valid JSON"),
    ],
)
def test_elect_leaders_bad_json_file(tmp_path: Path, capsys, content, needle) -> None:
    path = write_json(tmp_path / "p.json", content)
    assert main(["elect-leaders", "--election-type", "PREFERRED", "--path-to-json-file", path, *BOOT]) == 2
    one_line_error(capsys, needle)


# ================================================================================ quorum

QR = R.DescribeQuorumResponse.Replica


def quorum_response() -> admin_pb2.DescribeQuorumResponse:
    return R.DescribeQuorumResponse(
        leader_id=3001,
        leader_epoch=7,
        high_watermark=120,
        voters=[
            QR(
                replica_id=3000,
                log_end_offset=118,
                last_fetch_timestamp_ms=1_000_500,
                last_caught_up_timestamp_ms=999_000,
            ),
            QR(
                replica_id=3001,
                log_end_offset=125,
                last_fetch_timestamp_ms=1_001_000,
                last_caught_up_timestamp_ms=1_001_000,
            ),
            QR(
                replica_id=3002,
                log_end_offset=125,
                last_fetch_timestamp_ms=1_000_900,
                last_caught_up_timestamp_ms=1_000_900,
            ),
        ],
        observers=[
            QR(replica_id=2, log_end_offset=100, last_fetch_timestamp_ms=-1, last_caught_up_timestamp_ms=-1),
            QR(
                replica_id=1,
                log_end_offset=125,
                last_fetch_timestamp_ms=1_000_950,
                last_caught_up_timestamp_ms=1_000_950,
            ),
        ],
    )


def test_quorum_status(fake, capsys) -> None:
    fake(_quorum, describe_quorum=quorum_response(), describe_cluster=cluster_response())
    assert main(["quorum", "status", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ClusterId:              CID",
        "LeaderId:               3001",
        "LeaderEpoch:            7",
        "HighWatermark:          120",
        "MaxFollowerLag:         7",
        "MaxFollowerLagTimeMs:   2000",
        "CurrentVoters:          [3000,3001,3002]",
        "CurrentObservers:       [1,2]",
    ]
    assert main(["quorum", "describe", "--status", "--output", "json", *BOOT]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "cluster_id": "CID",
        "leader_id": 3001,
        "leader_epoch": 7,
        "high_watermark": 120,
        "max_follower_lag": 7,
        "max_follower_lag_time_ms": 2000,
        "current_voters": [3000, 3001, 3002],
        "current_observers": [1, 2],
    }


def test_quorum_status_caught_up_has_no_lag_time() -> None:
    q = R.DescribeQuorumResponse(
        leader_id=1,
        leader_epoch=1,
        high_watermark=5,
        voters=[
            QR(replica_id=0, log_end_offset=5, last_caught_up_timestamp_ms=10),
            QR(replica_id=1, log_end_offset=5, last_caught_up_timestamp_ms=50),
        ],
    )
    status = _quorum.quorum_status(q, None)
    assert status["max_follower_lag"] == 0 and status["max_follower_lag_time_ms"] == 0


def test_quorum_replication(fake, capsys) -> None:
    fake(_quorum, describe_quorum=quorum_response())
    assert main(["quorum", "replication", *BOOT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [line.split() for line in lines[1:]] == [
        ["3001", "125", "0", "1001000", "1001000", "Leader"],
        ["3000", "118", "7", "1000500", "999000", "Follower"],
        ["3002", "125", "0", "1000900", "1000900", "Follower"],
        ["1", "125", "0", "1000950", "1000950", "Observer"],
        ["2", "100", "25", "-1", "-1", "Observer"],
    ]
    assert main(["quorum", "describe", "--replication", "--output", "json", *BOOT]) == 0
    rows = json.loads(capsys.readouterr().out)["replicas"]
    assert rows[1] == {
        "node_id": 3000,
        "log_end_offset": 118,
        "lag": 7,
        "last_fetch_timestamp": 1_000_500,
        "last_caught_up_timestamp": 999_000,
        "status": "Follower",
    }


def test_quorum_errors(fake, capsys) -> None:
    fake(_quorum, describe_quorum=R.DescribeQuorumResponse(error=err("NOT_CONTROLLER", "no leader yet")))
    assert main(["quorum", "status", *BOOT]) == 1
    one_line_error(capsys, "NOT_CONTROLLER: no leader yet")
    assert main(["quorum", "describe", *BOOT]) == 2
    one_line_error(capsys, "--status")
    assert main(["quorum", "status"]) == 2
    one_line_error(capsys, "--bootstrap-server")


# ================================================================================ metadata tree (online)


def _tree_response(**fields: Any) -> Any:
    T = R.DescribeMetadataTreeResponse
    nodes = fields.pop("nodes", {})
    return T(nodes=[T.Node(path=p, data_json=json.dumps(d)) for p, d in nodes.items()], **fields)


def test_metadata_tree_online(fake, capsys) -> None:
    # the controller draws the tree (the builder the offline tree uses); the CLI prints its nodes
    # as they came, in their order, with the image's offset (issue 25)
    broker = {
        "version": 5,
        "host": "h1",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000001",
        "endpoints": ["PLAINTEXT://h1:9092", "SSL://h1:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "rack": "r1",
        "features": {},
    }
    controller = {"version": 2, "brokerid": 3001, "timestamp": "1700000000000", "kraftControllerEpoch": 7}
    answer = _tree_response(
        offset=42, epoch=7, timestamp_ms=1700000000009, nodes={"/brokers/ids/1": broker, "/controller": controller}
    )
    admin = fake(_metadata, call=lambda method, request: answer)
    assert main(["metadata", "tree", *BOOT, "--output", "json"]) == 0
    captured = capsys.readouterr()
    obj = json.loads(captured.out)
    assert obj["offset"] == 42 and obj["epoch"] == 7 and obj["timestamp_ms"] == 1700000000009
    assert obj["source"] == "cluster localhost:9093"
    assert list(obj["nodes"]) == ["/brokers/ids/1", "/controller"]
    assert obj["nodes"]["/brokers/ids/1"] == broker and obj["nodes"]["/controller"] == controller
    assert captured.err == ""
    ((args, _kwargs),) = admin.called("call")
    assert args[0] == "DescribeMetadataTree" and isinstance(args[1], R.DescribeMetadataTreeRequest)
    assert admin.closed
    # text output and --path work on the online tree as on the offline one
    assert main(["metadata", "tree", *BOOT, "--path", "/controller"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# metadata image from cluster localhost:9093 at offset 42 (epoch 7)"
    assert out[1:] == [
        '/controller: {"version":2,"brokerid":3001,"timestamp":"1700000000000","kraftControllerEpoch":7}'
    ]


def test_metadata_tree_online_says_what_it_may_not_show(fake, capsys) -> None:
    answer = _tree_response(offset=3, epoch=1, omitted=["ACLs, SCRAM users (Describe on the cluster)"])
    fake(_metadata, call=lambda method, request: answer)
    assert main(["metadata", "tree", *BOOT]) == 0
    captured = capsys.readouterr()
    assert (
        captured.err
        == "kraftlog metadata: warning: not authorized, left out: ACLs, SCRAM users (Describe on the cluster)\n"
    )


def test_metadata_tree_online_error(fake, capsys) -> None:
    fake(_metadata, call=kerr.RequestTimedOutError("DescribeMetadataTree: no controller answered"))
    assert main(["metadata", "tree", *BOOT]) == 1
    one_line_error(capsys, "REQUEST_TIMED_OUT")
    fake(_metadata, call=lambda method, request: _tree_response(error=err("NOT_CONTROLLER", "standby")))
    assert main(["metadata", "tree", *BOOT]) == 1
    one_line_error(capsys, "NOT_CONTROLLER")


def test_every_admin_command_has_its_own_factory() -> None:
    for module in (_topics, _configs, _reassign, _elect_leaders, _quorum, _metadata):
        admin = module.make_admin(["localhost:1"], request_timeout_ms=1234)  # no connection is made
        try:
            assert admin.servers == ["localhost:1"] and admin.request_timeout_ms == 1234
        finally:
            admin.close()


def test_help_lists_the_admin_commands(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("topics", "configs", "reassign", "elect-leaders", "quorum", "metadata"):
        assert command in out


# ================================================================================ --output json errors


def _only_json(out: str) -> dict[str, Any]:
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"stdout must be one JSON object, got {out!r}"
    return json.loads(lines[0])


def test_json_error_when_the_cluster_does_not_answer(fake, capsys) -> None:
    fake(_topics, describe_topics=kerr.RequestTimedOutError("no controller answered in 300 ms"))
    assert main(["topics", "describe", *BOOT, "--output", "json"]) == 1
    captured = capsys.readouterr()
    message = "REQUEST_TIMED_OUT: no controller answered in 300 ms"
    assert _only_json(captured.out) == {"error": {"name": "REQUEST_TIMED_OUT", "code": 7, "message": message}}
    assert "REQUEST_TIMED_OUT" in captured.err  # and the line for people, on stderr


def test_json_error_for_a_cluster_error_answer(fake, capsys) -> None:
    answer = R.DescribeMetadataTreeResponse(error=err("NOT_CONTROLLER", "ask 3001"))
    fake(_metadata, call=lambda method, request: answer)  # the tree's one call (issue 25)
    assert main(["metadata", "tree", *BOOT, "--output", "json"]) == 1
    error = _only_json(capsys.readouterr().out)["error"]
    assert (error["name"], error["code"]) == ("NOT_CONTROLLER", 41) and "ask 3001" in error["message"]


def test_json_error_for_bad_input_and_bad_arguments(capsys) -> None:
    assert main(["metadata", "tree", "--output", "json"]) == 2  # no source named
    error = _only_json(capsys.readouterr().out)["error"]
    assert (error["name"], error["code"]) == ("INVALID_REQUEST", 42) and "--bootstrap-server" in error["message"]
    assert main(["topics", "describe", *BOOT, "--output=json", "--no-such-option"]) == 2
    captured = capsys.readouterr()
    error = _only_json(captured.out)["error"]
    assert error["name"] == "INVALID_REQUEST" and "--no-such-option" in error["message"]
    assert "--no-such-option" in captured.err
    # without --output json the failure stays one line on stderr and stdout stays empty
    assert main(["topics", "describe", *BOOT, "--no-such-option"]) == 2
    assert capsys.readouterr().out == ""


def test_configs_of_groups(fake, capsys) -> None:
    """``--entity-type groups`` (issue 25): config resource type 32, the group's own configs."""
    group_configs = R.DescribeConfigsResponse(
        results=[
            R.DescribeConfigsResponse.Result(
                configs=[
                    R.DescribeConfigsResponse.Entry(
                        name="consumer.heartbeat.interval.ms", value="5000", has_value=True, source="DEFAULT_CONFIG"
                    ),
                    R.DescribeConfigsResponse.Entry(
                        name="consumer.session.timeout.ms", value="50000", has_value=True, source="GROUP_CONFIG"
                    ),
                ]
            )
        ]
    )
    admin = fake(
        _configs,
        describe_configs=group_configs,
        incremental_alter_configs=R.IncrementalAlterConfigsResponse(
            results=[R.IncrementalAlterConfigsResponse.Result()]
        ),
    )
    assert main(["configs", "describe", "--entity-type", "groups", "--entity-name", "readers", *BOOT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for group readers are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}",
    ]
    assert admin.called("describe_configs")[0][0] == ([(32, "readers")],)
    argv = ["configs", "alter", "--entity-type", "groups", "--entity-name", "readers"]
    assert main([*argv, "--add-config", "consumer.session.timeout.ms=50000", *BOOT]) == 0
    assert capsys.readouterr().out.strip() == "Completed updating config for group readers."
    assert admin.called("incremental_alter_configs")[0][0] == (
        {(32, "readers"): [("consumer.session.timeout.ms", 0, "50000")]},
    )
