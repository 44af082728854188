"""The clients' Kafka properties on common's `ConfigDef`, and the settings this client refuses.

`PRODUCER_CONFIG` and `CONSUMER_CONFIG` are the one place where a client key's type, default and
meaning live, as the server's keys live in `kraftlog.common.config`: `Producer` and `Consumer`
take their keyword defaults from them, and ``producer_config_from_properties`` /
``consumer_config_from_properties`` parse ``.properties`` values with them (one way to parse
booleans, integers and lists; errors name the key).

Some of Kafka's settings name what this client cannot do: Java classes (``partitioner.class``,
serializers), security given as client properties instead of the client's arguments. A client
that took them and went on would pretend, so each is accepted only with a value that keeps Kafka's
meaning here (``partitioner.ignore.keys=false``, ``ByteArraySerializer``, ``PLAINTEXT``) and any
other value is refused with `UnsupportedConfigError`, naming the setting and what to use instead.
Idempotence, transactions, consumer groups with auto commit and ``read_committed`` all exist
(issues 14 and 15): their settings are parsed like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kraftlog.common.config import NO_DEFAULT, ConfigDef, ConfigKey, ConfigType

__all__ = [
    "UnsupportedConfigError",
    "Unsupported",
    "check_unsupported_properties",
    "refuse",
    "java_class_is",
    "PLAINTEXT_ONLY",
    "BYTES_SERIALIZER",
    "BYTES_DESERIALIZER",
    "FALSE_ONLY",
    "ClientConfig",
    "PRODUCER_CONFIG",
    "CONSUMER_CONFIG",
    "SHARE_CONSUMER_CONFIG",
]


class UnsupportedConfigError(ValueError):
    """A setting asks for what this client cannot do (a `ValueError`, so callers that
    catch bad settings catch it too)."""


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A property whose feature is missing: ``accepts(value)`` says whether the value keeps
    Kafka's meaning without it; ``why`` and ``instead`` go into the error."""

    accepts: Callable[[str], bool]
    why: str
    instead: str


def refuse(option: str, value: object, why: str, instead: str) -> UnsupportedConfigError:
    """The error for ``option=value`` (returned, so the caller raises it where it stands)."""
    return UnsupportedConfigError(f"{option}={value} is not supported yet: {why}; {instead}")


def check_unsupported_properties(props: Mapping[str, str], table: Mapping[str, Unsupported]) -> None:
    """Raise `UnsupportedConfigError` for the first property of ``table`` with a refused value."""
    for key, value in props.items():
        rule = table.get(key)
        if rule is not None and not rule.accepts(value):
            raise refuse(key, value, rule.why, rule.instead)


def java_class_is(*names: str) -> Callable[[str], bool]:
    """Accepts an empty value or one of Kafka's class names ``names`` (simple or qualified)."""

    def accepts(value: str) -> bool:
        text = value.strip()
        return not text or text.rsplit(".", 1)[-1] in names

    return accepts


def _is(*allowed: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() in allowed


PLAINTEXT_ONLY = Unsupported(
    _is("plaintext"),
    "security settings do not travel as client properties here",
    "pass --command-config FILE (security.protocol, ssl.*, sasl.*) or the client's security_protocol, "
    "ssl_* and sasl_* arguments",
)
BYTES_SERIALIZER = Unsupported(
    java_class_is("ByteArraySerializer", "StringSerializer"),
    "this client sends bytes (or UTF-8 text) as given",
    "serialize in the application, or pass key_serializer/value_serializer",
)
BYTES_DESERIALIZER = Unsupported(
    java_class_is("ByteArrayDeserializer", "StringDeserializer"),
    "this client returns the bytes as stored",
    "deserialize in the application, or pass key_deserializer/value_deserializer",
)
FALSE_ONLY = _is("false")


@dataclass(frozen=True)
class ClientConfig:
    """One client's Kafka properties: their `ConfigDef` (types, defaults, docs), the keyword of
    the client's constructor each maps to (Kafka's name with ``_`` for ``.`` unless ``renamed``),
    the keys whose empty value means None, the refused values, and the keys accepted and ignored."""

    definitions: ConfigDef
    renamed: Mapping[str, str] = field(default_factory=dict)
    empty_is_none: frozenset[str] = frozenset()
    unsupported: Mapping[str, Unsupported] = field(default_factory=dict)
    ignored: frozenset[str] = frozenset()

    def keyword(self, key: str) -> str:
        """The constructor keyword of Kafka's ``key``."""
        return self.renamed.get(key, key.replace(".", "_"))

    def default(self, key: str) -> Any:
        """The default of ``key`` (the constructor's default for its keyword)."""
        value = self.definitions[key].default
        if value is NO_DEFAULT:
            raise KeyError(f"{key} has no default")
        return value

    def from_properties(self, props: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        """Kafka properties -> constructor keywords, plus the keys this client does not know
        (Kafka warns about those and goes on). A refused value raises `UnsupportedConfigError`,
        a malformed one `ConfigError` (both ValueErrors naming the key)."""
        check_unsupported_properties(props, self.unsupported)
        out: dict[str, Any] = {}
        unknown: list[str] = []
        for key, raw in props.items():
            if key in self.definitions:
                value = self.definitions.parse_value(key, raw)
                out[self.keyword(key)] = None if key in self.empty_is_none and value == "" else value
            elif key not in self.ignored and key not in self.unsupported:
                unknown.append(key)
        return out, unknown


def _keys(label: str, *keys: tuple[str, ConfigType, object, str]) -> ConfigDef:
    definitions = ConfigDef(label, (ConfigKey(name, type_, default, doc=doc) for name, type_, default, doc in keys))
    definitions.freeze()
    return definitions


_I, _L, _B, _S = ConfigType.INT, ConfigType.LONG, ConfigType.BOOLEAN, ConfigType.STRING

#: `Producer`'s settings (Kafka's names, types and defaults; see `Producer` for their meaning).
PRODUCER_CONFIG = ClientConfig(
    _keys(
        "producer",
        ("bootstrap.servers", _S, NO_DEFAULT, "host:port of some brokers, comma-separated"),
        ("acks", _S, "all", "all (-1), 1 or 0: the acknowledgements a send waits for"),
        ("batch.size", _I, 16_384, "bytes of records gathered per partition before a batch is sent"),
        ("linger.ms", _I, 5, "how long a batch waits for more records"),
        ("compression.type", _S, "none", "none, gzip, snappy, lz4 or zstd"),
        ("max.in.flight.requests.per.connection", _I, 5, "unanswered Produce requests per broker"),
        ("retries", _I, 2**31 - 1, "resends of a failed batch (bounded by delivery.timeout.ms)"),
        ("retry.backoff.ms", _L, 100, "first wait before a retry (KIP-580)"),
        ("retry.backoff.max.ms", _L, 1000, "longest wait before a retry (KIP-580)"),
        ("delivery.timeout.ms", _I, 120_000, "bound on the time from send to acknowledgement"),
        ("request.timeout.ms", _I, 30_000, "bound on one request's answer"),
        ("max.request.size", _I, 1_048_576, "largest request (and record) sent"),
        ("buffer.memory", _L, 33_554_432, "bytes of unsent records before send blocks"),
        ("max.block.ms", _L, 60_000, "how long send may block (buffer full, metadata missing)"),
        ("metadata.max.age.ms", _L, 300_000, "metadata refresh interval"),
        ("allow.auto.create.topics", _B, True, "ask brokers to create a missing topic"),
        ("enable.idempotence", _B, None, "deduplicate retries (default: on when acks, retries allow)"),
        ("transactional.id", _S, None, "the id of a transactional producer"),
        ("transaction.timeout.ms", _I, 60_000, "how long a transaction may stay open"),
    ),
    renamed={"allow.auto.create.topics": "allow_auto_topic_creation"},
    empty_is_none=frozenset({"transactional.id"}),
    unsupported={
        "partitioner.class": Unsupported(
            java_class_is("DefaultPartitioner", "BuiltInPartitioner"),
            "Java partitioner classes cannot run here",
            "pass partitioner= to Producer",
        ),
        "partitioner.ignore.keys": Unsupported(
            FALSE_ONLY, "keyed records always go to murmur2(key)", "use partitioner.ignore.keys=false"
        ),
        "security.protocol": PLAINTEXT_ONLY,
        "key.serializer": BYTES_SERIALIZER,
        "value.serializer": BYTES_SERIALIZER,
    },
    # accepted and ignored: they change nothing a user of this client can observe
    ignored=frozenset({"client.id", "send.buffer.bytes", "receive.buffer.bytes"}),
)

#: `Consumer`'s settings (Kafka's names, types and defaults; see `Consumer` for their meaning).
CONSUMER_CONFIG = ClientConfig(
    _keys(
        "consumer",
        ("bootstrap.servers", _S, NO_DEFAULT, "host:port of some brokers, comma-separated"),
        ("fetch.min.bytes", _I, 1, "bytes a fetch waits for"),
        ("fetch.max.wait.ms", _I, 500, "how long a fetch waits for fetch.min.bytes"),
        ("fetch.max.bytes", _I, 52_428_800, "bytes one fetch returns at most"),
        ("max.partition.fetch.bytes", _I, 1_048_576, "bytes one partition returns per fetch at most"),
        ("isolation.level", _S, "read_uncommitted", "read_uncommitted or read_committed"),
        ("auto.offset.reset", _S, "latest", "earliest, latest or none"),
        ("max.poll.records", _I, 500, "records one poll returns at most"),
        ("check.crcs", _B, True, "verify the CRC of every fetched batch"),
        ("request.timeout.ms", _I, 30_000, "bound on one request's answer"),
        ("retry.backoff.ms", _L, 100, "first wait before a retry (KIP-580)"),
        ("retry.backoff.max.ms", _L, 1000, "longest wait before a retry (KIP-580)"),
        ("metadata.max.age.ms", _L, 300_000, "metadata refresh interval"),
        ("default.api.timeout.ms", _I, 60_000, "bound on blocking calls without a timeout"),
        ("client.rack", _S, "", "this client's rack, for fetching from the closest replica"),
        ("allow.auto.create.topics", _B, True, "ask brokers to create a missing topic"),
        ("group.id", _S, None, "the consumer group"),
        ("enable.auto.commit", _B, None, "commit positions in the background (default: with a group)"),
        ("auto.commit.interval.ms", _I, 5000, "how often positions are committed"),
        ("session.timeout.ms", _I, None, "how long the group waits for a silent member"),
        ("heartbeat.interval.ms", _I, None, "how often a member heartbeats"),
        ("max.poll.interval.ms", _I, 300_000, "longest time between polls of a member"),
        ("group.instance.id", _S, None, "a static member's id (KIP-345)"),
        ("partition.assignment.strategy", _S, None, "classic groups' assignors, comma-separated"),
        ("group.protocol", _S, "classic", "classic or consumer (KIP-848)"),
        ("group.remote.assignor", _S, None, "the server-side assignor of a consumer group (KIP-848)"),
        ("client.id", _S, "kraftlog-consumer", "this client's name in the group"),
    ),
    renamed={"allow.auto.create.topics": "allow_auto_topic_creation"},
    empty_is_none=frozenset({"group.id", "group.instance.id", "group.remote.assignor"}),
    unsupported={
        "security.protocol": PLAINTEXT_ONLY,
        "key.deserializer": BYTES_DESERIALIZER,
        "value.deserializer": BYTES_DESERIALIZER,
    },
    # accepted and ignored: gRPC sizes its sockets' buffers itself
    ignored=frozenset({"receive.buffer.bytes", "send.buffer.bytes"}),
)

#: `ShareConsumer`'s settings (Kafka's ``ShareConsumerConfig``; see `ShareConsumer`). A share
#: group's offsets, isolation and membership timing are the group's own configs on the brokers,
#: so Kafka's share consumer refuses the consumer-group keys; so does this one (unknown keys).
SHARE_CONSUMER_CONFIG = ClientConfig(
    _keys(
        "share consumer",
        ("bootstrap.servers", _S, NO_DEFAULT, "host:port of some brokers, comma-separated"),
        ("group.id", _S, NO_DEFAULT, "the share group"),
        ("share.acknowledgement.mode", _S, "implicit", "implicit (a poll accepts the last one's records) or explicit"),
        ("share.acquire.mode", _S, "batch_optimized", "batch_optimized or record_limit (KIP-1206)"),
        ("fetch.min.bytes", _I, 1, "bytes a share fetch waits for"),
        ("fetch.max.wait.ms", _I, 500, "how long a share fetch waits for fetch.min.bytes"),
        ("fetch.max.bytes", _I, 52_428_800, "bytes one share fetch returns at most"),
        ("max.poll.records", _I, 500, "records one share fetch acquires at most, per broker"),
        ("check.crcs", _B, True, "verify the CRC of every fetched batch"),
        ("request.timeout.ms", _I, 30_000, "bound on one request's answer"),
        ("retry.backoff.ms", _L, 100, "first wait before a retry (KIP-580)"),
        ("retry.backoff.max.ms", _L, 1000, "longest wait before a retry (KIP-580)"),
        ("metadata.max.age.ms", _L, 300_000, "metadata refresh interval"),
        ("default.api.timeout.ms", _I, 60_000, "bound on blocking calls without a timeout"),
        ("client.rack", _S, "", "this client's rack"),
        ("client.id", _S, "kraftlog-share-consumer", "this client's name in the group"),
    ),
    unsupported={
        "security.protocol": PLAINTEXT_ONLY,
        "key.deserializer": BYTES_DESERIALIZER,
        "value.deserializer": BYTES_DESERIALIZER,
    },
    ignored=frozenset({"receive.buffer.bytes", "send.buffer.bytes"}),
)
