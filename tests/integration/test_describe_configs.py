"""DescribeConfigs' config types, documentation and synonyms, and ApiVersions v4 (issue 25), driven by
clients nobody here wrote: confluent-kafka (librdkafka), kafka-python, and kio's encoding of the
Kafka 4.x schemas on a raw socket.

One combined node with a static ``log.retention.hours`` of 100; the cluster-wide dynamic default
sets ``log.retention.minutes``, broker 1's own dynamic config ``log.retention.ms``, and the topic
its own ``retention.ms``: every layer Kafka lists a topic key's synonyms from is in play, and the
answer must name them in Kafka's order (dynamic topic, dynamic broker, dynamic default broker,
static broker, default) with each key's own value.
"""

from __future__ import annotations

from typing import Any

import pytest

from kraftlog.common.config import TOPIC_CONFIG_DEFS
from kraftlog.deploy._cluster import LocalCluster, wait_until
from tests.integration._security_helpers import kafka_exchange, read_answer

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

TOPIC = "dc-layers"
GROUP = "dc-group"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("descfg") / "c",
        controllers=1,
        combined=True,
        overrides={"log.retention.hours": 100, "broker.heartbeat.interval.ms": 500},
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as own:  # librdkafka names no cluster-wide default resource
            own.incremental_alter_configs({(ResourceType.BROKER.value, ""): [("log.retention.minutes", 0, "600")]})
        admin = AdminClient({"bootstrap.servers": c.kafka_bootstrap_servers})
        for resource, key, value in (
            (ConfigResource(ResourceType.BROKER, "1"), "log.retention.ms", "7000000"),
            (ConfigResource(ResourceType.GROUP, GROUP), "consumer.session.timeout.ms", "50000"),
        ):
            resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
            admin.incremental_alter_configs([resource])[resource].result(30)
        # broker 1 answers its own resource from its image, which follows the controller's log
        mine = ConfigResource(ResourceType.BROKER, "1")

        def applied() -> bool:
            entry = admin.describe_configs([mine])[mine].result(30)["log.retention.ms"]
            return bool(entry.value == "7000000")

        wait_until(applied, 30, what="broker 1's dynamic config in its image")
        topic = NewTopic(TOPIC, 1, 1, config={"retention.ms": "123456", "cleanup.policy": "compact"})
        admin.create_topics([topic])[TOPIC].result(30)
        wait_until(lambda: TOPIC in admin.list_topics(timeout=10).topics, 30, what="the topic")
        yield c
    finally:
        c.stop()


RETENTION_SYNONYMS = [
    ("retention.ms", "123456", "DYNAMIC_TOPIC_CONFIG"),
    ("log.retention.ms", "7000000", "DYNAMIC_BROKER_CONFIG"),
    ("log.retention.minutes", "600", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
    ("log.retention.hours", "168", "DEFAULT_CONFIG"),
]


def _kafka_python(cluster: LocalCluster, resource_type: Any, name: str, synonyms: bool = True) -> dict[str, Any]:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20_000)
    try:
        answer = admin.describe_configs(
            [KpResource(resource_type, name)], include_synonyms=synonyms, config_filter="all"
        )
    finally:
        admin.close()
    configs: dict[str, Any] = answer[resource_type.name.lower()][name]
    return configs


def _synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def test_topic_configs_carry_types_and_synonyms_in_kafkas_order(cluster: LocalCluster) -> None:
    from kafka.admin import ConfigResourceType

    configs = _kafka_python(cluster, ConfigResourceType.TOPIC, TOPIC)
    retention = configs["retention.ms"]
    assert (retention["value"], retention["config_source"], retention["config_type"]) == (
        "123456",
        "DYNAMIC_TOPIC_CONFIG",
        "LONG",
    )
    assert _synonyms(retention) == RETENTION_SYNONYMS
    assert configs["cleanup.policy"]["config_type"] == "LIST"
    assert _synonyms(configs["cleanup.policy"]) == [
        ("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG"),
    ]
    assert configs["min.insync.replicas"]["config_type"] == "INT"
    assert configs["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
    assert configs["preallocate"]["config_type"] == "BOOLEAN"
    assert configs["compression.type"]["config_type"] == "STRING"
    segment = configs["segment.ms"]  # no synonym set anywhere but the defaults
    assert (segment["config_source"], _synonyms(segment)) == (
        "DEFAULT_CONFIG",
        [("log.roll.hours", "168", "DEFAULT_CONFIG")],
    )
    # without include_synonyms there are none, and the source stays
    plain = _kafka_python(cluster, ConfigResourceType.TOPIC, TOPIC, synonyms=False)
    assert plain["retention.ms"]["synonyms"] == [] and plain["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    # librdkafka reads the same synonyms (its view is a name -> entry map, so the last
    # log.retention.hours, the default, stands for both)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.TOPIC, TOPIC)
    entry = admin.describe_configs([resource])[resource].result(30)["retention.ms"]
    assert entry.source == 1 and entry.value == "123456"
    assert [(s.name, s.value, int(s.source)) for s in entry.synonyms.values()] == [
        ("retention.ms", "123456", 1),
        ("log.retention.ms", "7000000", 2),
        ("log.retention.minutes", "600", 3),
        ("log.retention.hours", "168", 5),
    ]


def test_kraftlog_configs_describe_prints_the_synonyms(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI asks the controller over gRPC, as no broker: no broker's own layer."""
    from kraftlog.cli.__main__ import main

    argv = ["configs", "describe", "--entity-type", "topics", "--entity-name", TOPIC]
    assert main([*argv, "--bootstrap-server", cluster.bootstrap_servers]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "  retention.ms=123456 sensitive=false synonyms={"
        + ", ".join(
            f"{source}:{name}={value}"
            for name, value, source in RETENTION_SYNONYMS
            if source != "DYNAMIC_BROKER_CONFIG"
        )
        + "}"
        in lines
    )


def test_broker_configs_carry_types_synonyms_and_hide_passwords(cluster: LocalCluster) -> None:
    from kafka.admin import ConfigResourceType

    configs = _kafka_python(cluster, ConfigResourceType.BROKER, "1")
    retention = configs["log.retention.ms"]
    assert (retention["value"], retention["config_source"], retention["config_type"]) == (
        "7000000",
        "DYNAMIC_BROKER_CONFIG",
        "LONG",
    )
    assert _synonyms(retention) == RETENTION_SYNONYMS[1:]
    hours = configs["log.retention.hours"]  # Kafka lists no synonym before the key itself
    assert (hours["value"], hours["config_type"], _synonyms(hours)) == ("100", "INT", RETENTION_SYNONYMS[3:])
    assert configs["num.io.threads"]["read_only"] and configs["num.io.threads"]["config_type"] == "INT"
    assert configs["log.dirs"]["config_type"] == "LIST"
    secret = configs["ssl.key.password"]
    assert (secret["value"], secret["is_sensitive"], secret["config_type"]) == (None, True, "PASSWORD")

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entry = admin.describe_configs([resource])[resource].result(30)["log.retention.ms"]
    assert entry.source == 2 and entry.value == "7000000"
    assert [int(s.source) for s in entry.synonyms.values()] == [2, 3, 5]


def test_group_configs_carry_types_and_their_one_synonym(cluster: LocalCluster) -> None:
    from kafka.admin import ConfigResourceType

    configs = _kafka_python(cluster, ConfigResourceType.GROUP, GROUP)
    session = configs["consumer.session.timeout.ms"]
    assert (session["value"], session["config_source"], session["config_type"]) == (
        "50000",
        "DYNAMIC_GROUP_CONFIG",
        "INT",
    )
    assert _synonyms(session) == [("consumer.session.timeout.ms", "50000", "DYNAMIC_GROUP_CONFIG")]
    heartbeat = configs["consumer.heartbeat.interval.ms"]
    assert (heartbeat["config_source"], heartbeat["config_type"]) == ("DEFAULT_CONFIG", "INT")
    assert _synonyms(heartbeat) == [("consumer.heartbeat.interval.ms", "5000", "DEFAULT_CONFIG")]


# ---------------------------------------------------------------------------- raw requests (kio)


@pytest.mark.parametrize("documentation", [True, False])
def test_documentation_only_when_asked(cluster: LocalCluster, documentation: bool) -> None:
    values = {
        "resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": ["retention.ms"]}],
        "include_synonyms": False,
        "include_documentation": documentation,
    }
    answer = read_answer(kafka_exchange(cluster, None, 32, 4, values), 32, 4)
    (entry,) = answer.results[0].configs
    assert entry.config_type == 5  # LONG
    if documentation:
        assert entry.documentation and entry.documentation == TOPIC_CONFIG_DEFS["retention.ms"].doc
    else:
        assert entry.documentation is None


def test_api_versions_v4_and_an_unsupported_version(cluster: LocalCluster) -> None:
    answer = read_answer(
        kafka_exchange(cluster, None, 18, 4, {"client_software_name": "t", "client_software_version": "1"}), 18, 4
    )
    assert answer.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys if k.api_key == 18} == {(18, 0, 4)}
    # a version past the highest: UNSUPPORTED_VERSION with a v0 body listing what is served
    # (KIP-511), so the client retries with one it and the broker share
    frame = kafka_exchange(
        cluster, None, 18, 4, {"client_software_name": "t", "client_software_version": "1"}, labelled=5
    )
    v0 = read_answer(frame, 18, 0)
    assert v0.error_code == 35
    assert (18, 0, 4) in {(k.api_key, k.min_version, k.max_version) for k in v0.api_keys}


def test_a_dynamic_broker_config_is_applied_to_the_brokers_logs(cluster: LocalCluster) -> None:
    """What DescribeConfigs reports is what the broker does: a dynamic ``log.segment.bytes`` on
    broker 1 rolls the segments of a topic without its own ``segment.bytes`` at that size (on main
    the broker accepted it, reported it, and kept rolling at the static 1 GiB)."""
    from confluent_kafka import Producer

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    broker = ConfigResource(ResourceType.BROKER, "1")
    broker.add_incremental_config(
        ConfigEntry("log.segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([broker])[broker].result(30)
    try:
        wait_until(
            lambda: admin.describe_configs([broker])[broker].result(30)["log.segment.bytes"].value == "65536",
            30,
            what="broker 1's dynamic log.segment.bytes in its image",
        )
        admin.create_topics([NewTopic("dc-segments", 1, 1)])["dc-segments"].result(30)
        wait_until(lambda: "dc-segments" in admin.list_topics(timeout=10).topics, 30, what="the topic")
        # batches under the segment size: a larger one is RECORD_LIST_TOO_LARGE, as in Kafka
        producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "batch.size": 16384})
        failed: list[str] = []
        for _ in range(300):
            producer.produce("dc-segments", b"s" * 1000, on_delivery=lambda e, m: e and failed.append(str(e)))
            producer.poll(0)
        assert producer.flush(30) == 0 and not failed, failed[:3]
        segments = sorted(cluster.base_dir.rglob("dc-segments-0/*.log"))
        assert len(segments) >= 4, segments  # 300 kB in 64 KiB segments
    finally:
        undo = ConfigResource(ResourceType.BROKER, "1")
        undo.add_incremental_config(
            ConfigEntry("log.segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
        )
        admin.incremental_alter_configs([undo])[undo].result(30)
