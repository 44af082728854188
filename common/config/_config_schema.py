"""The node-level keys kraftlog knows (Kafka's KafkaConfig in KRaft mode, plus kraftlog's own), with
Kafka's names, types and defaults, and how they default the topic-level keys of
`kraftlog.common.config._config_schema_topic`. See `kraftlog.common.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kraftlog.common._config_def import (
    INT_MAX,
    NO_DEFAULT,
    ConfigDef,
    ConfigKey,
    Custom,
    OneOf,
    Range,
)
from kraftlog.common.config._config_parse import _check_protocol_map, _listeners
from kraftlog.common.config._config_schema_connections import define_connection_keys
from kraftlog.common.config._config_schema_group_share import define_share_group_keys
from kraftlog.common.config._config_schema_inert import DYNAMIC_WITHOUT_EFFECT, define_inert_keys
from kraftlog.common.config._config_schema_log import define_log_keys
from kraftlog.common.config._config_schema_quorum import define_quorum_keys
from kraftlog.common.config._config_schema_share import define_share_keys
from kraftlog.common.config._config_schema_topic import (
    _B,
    _COMPRESSION_TYPES,
    _I,
    _L,
    _LS,
    _S,
    TOPIC_CONFIG_DEFS,
)
from kraftlog.common.security import define_security_keys, listener_prefixed_key

__all__ = ["NODE_CONFIG_DEFS", "TOPIC_CONFIG_DEFS", "TOPIC_SYNONYMS"]

#: The one replica selector kraftlog has (Kafka's class name, so that a Kafka config loads).
_RACK_AWARE_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(value: object) -> bool:
    return value in (None, "", _RACK_AWARE_SELECTOR)


# ---------------------------------------------------------------------------------------------
# Node-level keys (Kafka's KafkaConfig in KRaft mode, plus kraftlog's own)
# ---------------------------------------------------------------------------------------------

NODE_CONFIG_DEFS: Final = ConfigDef("node")
(
    NODE_CONFIG_DEFS
    # --- identity and roles
    .define("node.id", _I, NO_DEFAULT, Range(0), "This node's id, unique across brokers and controllers; required.")
    .define(
        "process.roles",
        _LS,
        [],
        OneOf("broker", "controller"),
        "broker, controller, or both (combined mode, for small and dev clusters).",
    )
    .define(
        "broker.rack",
        _S,
        None,
        None,
        "Rack of this broker, used to spread replicas across racks and, with replica.selector.class, to let"
        " consumers fetch from a replica in their own rack (KIP-392).",
    )
    .define(
        "replica.selector.class",
        _S,
        None,
        Custom(_replica_selector, f"unset (consumers fetch from the leader) or {_RACK_AWARE_SELECTOR}"),
        "How the leader picks the replica a consumer (Fetch v11+) should fetch from (KIP-392): unset, every"
        f" consumer fetches from the leader; {_RACK_AWARE_SELECTOR}, an in-sync replica in the consumer's"
        " client.rack (the leader when it is in that rack, or when none is). Other classes are refused:"
        " kraftlog loads no Java classes.",
    )
    .define("controller.listener.names", _LS, None, None, "Names of the listeners used by the controllers.")
    # --- listeners
    .define(
        "listeners",
        _LS,
        ["PLAINTEXT://:9092"],
        Custom(_listeners, "a comma-separated list of NAME://host:port"),
        "Endpoints this node listens on; an empty host binds every interface.",
    )
    .define(
        "advertised.listeners",
        _LS,
        None,
        Custom(_listeners, "a comma-separated list of NAME://host:port"),
        "Endpoints published to clients and other nodes; defaults to listeners.",
    )
    .define(
        "listener.security.protocol.map",
        _LS,
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        Custom(_check_protocol_map, "a comma-separated list of LISTENER_NAME:PROTOCOL"),
        "Security protocol of each listener name.",
    )
    .define("inter.broker.listener.name", _S, None, None, "Listener brokers use to reach each other.")
    .define("num.network.threads", _I, 3, Range(1), "Threads receiving requests and sending responses.")
    .define(
        "num.io.threads",
        _I,
        8,
        Range(1),
        "Threads processing requests; kraftlog: the workers that decompress and validate produced batches.",
    )
    .define("background.threads", _I, 10, Range(1), "Threads for background tasks.")
    .define("queued.max.requests", _I, 500, Range(1), "Requests queued before network threads stop reading.")
    .define("socket.send.buffer.bytes", _I, 102_400, None, "SO_SNDBUF of server sockets; -1: OS default.")
    .define("socket.receive.buffer.bytes", _I, 102_400, None, "SO_RCVBUF of server sockets; -1: OS default.")
    .define("socket.request.max.bytes", _I, 104_857_600, Range(1), "Largest request a server accepts.")
    # --- storage locations and the metadata log
    .define("log.dirs", _LS, None, None, "Directories holding partition logs; overrides log.dir.")
    .define("log.dir", _LS, ["/tmp/kafka-logs"], None, "Log directory used when log.dirs is not set.")
    .define("metadata.log.dir", _S, None, None, "Directory of the metadata log; defaults to the first log directory.")
    .define("metadata.log.segment.bytes", _I, 1_073_741_824, Range(12), "Segment size of the metadata log.")
    .define("metadata.log.segment.ms", _L, 604_800_000, Range(1), "Age at which a metadata log segment rolls.")
    .define(
        "metadata.log.max.record.bytes.between.snapshots",
        _L,
        20_971_520,
        Range(1),
        "Bytes of new metadata records after which a snapshot is taken.",
    )
    .define(
        "metadata.log.max.snapshot.interval.ms",
        _L,
        3_600_000,
        Range(0),
        "Time after which a snapshot is taken if there are new records; 0 disables.",
    )
    .define(
        "metadata.max.retention.bytes",
        _L,
        104_857_600,
        None,
        "Metadata log bytes kept before old snapshots and segments are deleted; -1: unlimited.",
    )
    .define(
        "metadata.max.retention.ms",
        _L,
        604_800_000,
        None,
        "Age of metadata snapshots and segments before deletion; -1: unlimited.",
    )
    .define(
        "metadata.max.idle.interval.ms",
        _I,
        500,
        Range(0),
        "Interval of no-op records the active controller appends so followers see progress.",
    )
    .define(
        "num.recovery.threads.per.data.dir",
        _I,
        2,
        Range(1),
        "Threads per log directory for recovery at start-up and flushing at shutdown.",
    )
    # --- topic creation defaults and placement
    .define("num.partitions", _I, 1, Range(1), "Partition count of auto-created topics.")
    .define("default.replication.factor", _I, 1, Range(1), "Replication factor of auto-created topics.")
    .define("auto.create.topics.enable", _B, True, None, "Create a topic when a client first uses it.")
    .define("delete.topic.enable", _B, True, None, "Allow topics to be deleted.")
    .define(
        "auto.leader.rebalance.enable", _B, True, None, "Move leadership back to preferred replicas when it drifts."
    )
    .define(
        "leader.imbalance.check.interval.seconds",
        _L,
        300,
        Range(1),
        "How often the controller checks leader imbalance.",
    )
    .define(
        "leader.imbalance.per.broker.percentage",
        _I,
        10,
        Range(0, 100),
        "Imbalance percentage per broker that triggers a preferred-leader election.",
    )
    # --- replication
    .define(
        "min.insync.replicas",
        _I,
        1,
        Range(1),
        "Default of the topic-level min.insync.replicas.",
        topic_key="min.insync.replicas",
    )
    .define(
        "unclean.leader.election.enable",
        _B,
        False,
        None,
        "Default of the topic-level unclean.leader.election.enable.",
        topic_key="unclean.leader.election.enable",
    )
    .define(
        "replica.lag.time.max.ms",
        _L,
        30_000,
        Range(0),
        "A follower that has not caught up within this time is removed from the ISR.",
    )
    .define("replica.fetch.max.bytes", _I, 1_048_576, Range(0), "Bytes per partition a follower fetch asks for.")
    .define(
        "replica.fetch.wait.max.ms",
        _I,
        500,
        Range(0),
        "Longest time a follower fetch waits for data; must not exceed replica.lag.time.max.ms.",
    )
    .define("replica.fetch.min.bytes", _I, 1, Range(0), "Bytes a follower fetch waits for before returning.")
    .define(
        "replica.fetch.response.max.bytes", _I, 10_485_760, Range(0), "Size cap of a whole follower fetch response."
    )
    .define("replica.fetch.backoff.ms", _I, 1000, Range(0), "Back-off after a failed follower fetch.")
    .define("replica.socket.timeout.ms", _I, 30_000, None, "Timeout of follower fetch requests.")
    .define("num.replica.fetchers", _I, 1, Range(1), "Fetcher threads per source broker.")
    .define(
        "replica.high.watermark.checkpoint.interval.ms",
        _L,
        5000,
        Range(1),
        "How often high watermarks are saved to disk.",
    )
    .define("fetch.max.bytes", _I, 57_671_680, Range(1024), "Size cap of a consumer fetch response.")
    .define(
        "max.incremental.fetch.session.cache.slots", _I, 1000, Range(0), "Incremental fetch sessions kept (KIP-227)."
    )
    .define(
        "message.max.bytes",
        _I,
        1_048_588,
        Range(0),
        "Largest record batch accepted; topic default.",
        topic_key="max.message.bytes",
    )
    .define(
        "compression.type",
        _S,
        "producer",
        OneOf(*_COMPRESSION_TYPES),
        "Default topic compression.",
        topic_key="compression.type",
    )
    # --- broker lifecycle
    .define("broker.heartbeat.interval.ms", _I, 2000, Range(1), "Interval of broker heartbeats to the controller.")
    .define(
        "broker.session.timeout.ms", _I, 9000, Range(1), "A broker that has not heartbeated for this long is fenced."
    )
    .define(
        "initial.broker.registration.timeout.ms",
        _I,
        60_000,
        Range(1),
        "How long a starting broker tries to register before giving up.",
    )
    .define("controlled.shutdown.enable", _B, True, None, "Move leadership away before a broker shuts down.")
    # --- internal topics and coordinators
    .define("offsets.topic.replication.factor", _I, 3, Range(1), "Replication factor of __consumer_offsets.")
    .define("offsets.topic.num.partitions", _I, 50, Range(1), "Partitions of __consumer_offsets.")
    .define("offsets.topic.segment.bytes", _I, 104_857_600, Range(1), "Segment size of __consumer_offsets.")
    .define("offsets.retention.minutes", _I, 10_080, Range(1), "How long committed offsets of empty groups are kept.")
    .define("offsets.retention.check.interval.ms", _L, 600_000, Range(1), "How often stale offsets are checked.")
    .define("offsets.commit.timeout.ms", _I, 5000, Range(1), "How long an offset commit waits for replication.")
    .define("offsets.load.buffer.size", _I, 5_242_880, Range(1), "Read size when loading offsets into the cache.")
    .define("offset.metadata.max.bytes", _I, 4096, Range(0), "Largest metadata string an offset commit may carry.")
    .define("transaction.state.log.replication.factor", _I, 3, Range(1), "Replication factor of __transaction_state.")
    .define("transaction.state.log.min.isr", _I, 2, Range(1), "min.insync.replicas of __transaction_state.")
    .define(
        "transaction.partition.verification.enable",
        _B,
        True,
        None,
        "Verify with the transaction coordinator that a transactional batch's partition is in the "
        "producer's open transaction before the leader writes it (KIP-890).",
    )
    .define("transaction.state.log.num.partitions", _I, 50, Range(1), "Partitions of __transaction_state.")
    .define("transaction.state.log.segment.bytes", _I, 104_857_600, Range(1), "Segment size of __transaction_state.")
    .define("transaction.max.timeout.ms", _I, 900_000, Range(1), "Largest transaction timeout a producer may ask for.")
    .define(
        "transactional.id.expiration.ms",
        _I,
        604_800_000,
        Range(1),
        "Idle time after which a transactional id is forgotten.",
    )
    .define(
        "producer.id.expiration.ms",
        _I,
        86_400_000,
        Range(1),
        "Idle time after which an idempotent producer's state is forgotten.",
    )
    .define(
        "producer.id.expiration.check.interval.ms",
        _I,
        600_000,
        Range(1),
        "How often brokers look for producers idle past producer.id.expiration.ms.",
    )
    .define(
        "group.initial.rebalance.delay.ms",
        _I,
        3000,
        Range(0),
        "Wait for more members before the first rebalance of a new group.",
    )
    .define("group.min.session.timeout.ms", _I, 6000, None, "Smallest session timeout a member may ask for.")
    .define("group.max.session.timeout.ms", _I, 1_800_000, None, "Largest session timeout a member may ask for.")
    .define("group.max.size", _I, INT_MAX, Range(1), "Maximum members of one group.")
    .define(
        "group.coordinator.rebalance.protocols",
        _LS,
        ["classic", "consumer"],
        Custom(
            lambda v: set(v) <= {"classic", "consumer"} and "classic" in v,
            "a comma-separated list from [classic, consumer] that includes classic",
        ),
        "Group protocols the coordinator serves; without consumer, ConsumerGroupHeartbeat is UNSUPPORTED_VERSION.",
    )
    .define(
        "group.consumer.session.timeout.ms",
        _I,
        45_000,
        Range(1),
        "Session timeout of consumer-protocol (KIP-848) group members.",
    )
    .define(
        "group.consumer.heartbeat.interval.ms",
        _I,
        5_000,
        Range(1),
        "Heartbeat interval the coordinator gives consumer-protocol (KIP-848) group members.",
    )
    .define(
        "group.consumer.min.session.timeout.ms",
        _I,
        45_000,
        Range(1),
        "Smallest consumer.session.timeout.ms a consumer group's own config (KIP-848) may set.",
    )
    .define(
        "group.consumer.max.session.timeout.ms",
        _I,
        60_000,
        Range(1),
        "Largest consumer.session.timeout.ms a consumer group's own config (KIP-848) may set.",
    )
    .define(
        "group.consumer.min.heartbeat.interval.ms",
        _I,
        5_000,
        Range(1),
        "Smallest consumer.heartbeat.interval.ms a consumer group's own config (KIP-848) may set.",
    )
    .define(
        "group.consumer.max.heartbeat.interval.ms",
        _I,
        15_000,
        Range(1),
        "Largest consumer.heartbeat.interval.ms a consumer group's own config (KIP-848) may set.",
    )
    .define("group.consumer.max.size", _I, INT_MAX, Range(1), "Maximum members of one consumer-protocol group.")
    .define(
        "group.consumer.regex.refresh.interval.ms",
        _I,
        600_000,
        Range(10_000),
        "How long the coordinator keeps a consumer-protocol group's resolution of its members' topic "
        "regexes before a heartbeat has them resolved again (also on a new regex or a created topic, "
        "at most every 10 s).",
    )
    .define(
        "group.consumer.assignors",
        _LS,
        ["uniform", "range"],
        OneOf("uniform", "range"),
        "Server-side assignors of consumer-protocol groups; the first is the default.",
    )
    # --- kraftlog's own keys
    .define(
        "metrics.port",
        _I,
        -1,
        Range(-1, 65535),
        "kraftlog: port of the Prometheus metrics endpoint; -1 turns it off. It binds the host of the "
        "node's first listener and serves HTTPS with that listener's ssl.* certificate when it is SSL or SASL_SSL.",
        kraftlog_only=True,
    )
    .define(
        "metrics.listener.authentication",
        _S,
        "none",
        OneOf("none", "certificate", "token"),
        "kraftlog: who may scrape the metrics endpoint: none (anyone who reaches it); certificate (a client "
        "certificate chaining to the first listener's trust store, checked in the TLS handshake); token "
        "(an 'Authorization: Bearer' header equal to the content of metrics.listener.token.file).",
        kraftlog_only=True,
    )
    .define(
        "metrics.listener.token.file",
        _S,
        None,
        None,
        "kraftlog: the file holding the metrics endpoint's bearer token (surrounding whitespace ignored; read "
        "again on every scrape, so rotating it needs no restart); required by "
        "metrics.listener.authentication=token. Keep it 0600.",
        kraftlog_only=True,
    )
    .define(
        "metrics.listener.topic.labels",
        _B,
        False,
        None,
        "kraftlog: with an authorizer on (authorizer.class.name), the metrics endpoint leaves out every sample "
        "labelled with a topic, consumer group, user or client id, as Metadata, ListGroups and "
        "DescribeClientQuotas hide them from principals without Describe; true shows them. "
        "Without an authorizer they are always shown.",
        kraftlog_only=True,
    )
    .define(
        "grpc.max.message.bytes",
        _I,
        104_857_600,
        Range(1024, INT_MAX),
        "kraftlog: largest gRPC message sent or received; the gRPC twin of socket.request.max.bytes.",
        kraftlog_only=True,
    )
    .define(
        "kafka.sendfile.enable",
        _B,
        True,
        None,
        "kraftlog: Kafka-listener fetches send record batches with sendfile (zero copy); false copies them.",
        kraftlog_only=True,
    )
    .define(
        "produce.validation.max.bytes",
        _L,
        536_870_912,
        Range(1),
        "kraftlog: bytes a broker's produce payloads may hold while they are decompressed and validated "
        "on the num.io.threads workers (the payload plus twice the limit its compressed batches "
        "inflate under, stepped up to the inflate bound); past it a produce waits its turn.",
        kraftlog_only=True,
    )
    .define(
        "produce.validation.max.bytes.per.connection",
        _L,
        268_435_456,
        Range(1),
        "kraftlog: the same bound for the produce requests of one Kafka-protocol connection.",
        kraftlog_only=True,
    )
)

define_quorum_keys(NODE_CONFIG_DEFS)
define_log_keys(NODE_CONFIG_DEFS)
define_security_keys(NODE_CONFIG_DEFS)
define_connection_keys(NODE_CONFIG_DEFS)
define_share_group_keys(NODE_CONFIG_DEFS)  # share groups' membership (KIP-932, issue 27)
define_share_keys(NODE_CONFIG_DEFS)  # share groups' delivery and the share coordinator (issue 27)

# --- client quotas (KIP-13 / KIP-124 / KIP-599): the sampled windows the rates are measured over
(
    NODE_CONFIG_DEFS.define(
        "quota.window.num", _I, 11, Range(1), "Samples kept for the client byte-rate and request quotas."
    )
    .define("quota.window.size.seconds", _I, 1, Range(1), "Length of each client quota sample, in seconds.")
    .define("controller.quota.window.num", _I, 11, Range(1), "Samples kept for the controller mutation quota.")
    .define(
        "controller.quota.window.size.seconds",
        _I,
        1,
        Range(1),
        "Length of each controller mutation quota sample, in seconds.",
    )
)
define_inert_keys(NODE_CONFIG_DEFS)  # Kafka 4.0 keys kraftlog has no machinery for (issue 25)


def _listener_key(defs: ConfigDef, name: str) -> ConfigKey | None:
    found = listener_prefixed_key(defs, name)
    return None if found is None else found[1]


NODE_CONFIG_DEFS.resolve_prefixes(_listener_key)


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    """Group broker keys by the topic key they default, in definition (= precedence) order."""
    synonyms: dict[str, list[str]] = {name: [] for name in TOPIC_CONFIG_DEFS}
    for key in NODE_CONFIG_DEFS.values():
        if key.topic_key is not None:
            if key.topic_key not in synonyms:
                raise ValueError(f"{key.name} names unknown topic key {key.topic_key}")
            synonyms[key.topic_key].append(key.name)
    return {topic: tuple(names) for topic, names in synonyms.items()}


#: Topic-level key -> the broker-level keys that default it, highest precedence first.
TOPIC_SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(_build_synonyms())

#: the broker keys that may be set dynamically (IncrementalAlterConfigs on a BROKER resource, per
#: broker or as the cluster default): the log defaults of topics, as Kafka's DynamicLogConfig
#: What a BROKER resource takes at run time: the broker-wide defaults of topic configs, and the SASL
#: listener keys Kafka reconfigures, which are without effect here (DYNAMIC_WITHOUT_EFFECT).
DYNAMIC_BROKER_KEYS: Final = (
    frozenset(key for group in TOPIC_SYNONYMS.values() for key in group) | DYNAMIC_WITHOUT_EFFECT
)

# A topic key in a node file, or a broker key in a topic request, is a predictable mix-up.
for _topic_key, _broker_keys in TOPIC_SYNONYMS.items():
    if _broker_keys and _topic_key not in NODE_CONFIG_DEFS:
        NODE_CONFIG_DEFS.hint(_topic_key, _broker_keys[0])
    for _broker_key in _broker_keys:
        if _broker_key not in TOPIC_CONFIG_DEFS:
            TOPIC_CONFIG_DEFS.hint(_broker_key, _topic_key)
del _topic_key, _broker_keys, _broker_key

TOPIC_CONFIG_DEFS.freeze()
NODE_CONFIG_DEFS.freeze()
