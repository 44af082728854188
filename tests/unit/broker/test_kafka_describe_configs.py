"""DescribeConfigs on the Kafka listener (issue 25): the broker forwards the client's IncludeSynonyms
and IncludeDocumentation and its own id (whose per-broker dynamic configs are a layer of a topic
key's synonyms), and answers Kafka's ids for sources and types; a sensitive entry shows no value in
any synonym."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.index import load_request_schema

from kraftlog.broker.kafka._kafka_admin import AdminApis
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, build
from kraftlog.proto import admin_pb2

R = admin_pb2.DescribeConfigsResponse


class _Forward:
    def __init__(self, answer: R) -> None:
        self.answer = answer
        self.sent: list[tuple[str, Any]] = []

    async def __call__(self, name: str, request: Any) -> Any:
        self.sent.append((name, request))
        return self.answer


def _admin(forward: _Forward) -> AdminApis:
    return AdminApis(
        forward,  # type: ignore[arg-type]
        node_id=3,
        cluster_id="c",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        log_dirs=[],
        replicas=lambda: None,  # type: ignore[arg-type,return-value]
    )


def _request(version: int, **values: Any) -> ParsedRequest:
    body = build(
        load_request_schema(32, version),
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}], **values},
    )
    return ParsedRequest(32, version, 1, "c", body)


def test_flags_and_broker_id_are_forwarded_and_the_answer_carries_kafkas_ids() -> None:
    entry = R.Entry(
        name="retention.ms",
        value="123",
        has_value=True,
        source="DYNAMIC_TOPIC_CONFIG",
        config_type="LONG",
        documentation="How long.",
        synonyms=[
            R.Synonym(name="retention.ms", value="123", has_value=True, source="DYNAMIC_TOPIC_CONFIG"),
            R.Synonym(name="log.retention.hours", value="168", has_value=True, source="DEFAULT_CONFIG"),
        ],
    )
    secret = R.Entry(
        name="x.password",
        is_sensitive=True,
        source="STATIC_BROKER_CONFIG",
        config_type="PASSWORD",
        synonyms=[R.Synonym(name="x.password", value="leak", has_value=True, source="STATIC_BROKER_CONFIG")],
    )
    answer = R(results=[R.Result(resource=admin_pb2.ConfigResource(resource_type=2, resource_name="t"))])
    answer.results[0].configs.extend([entry, secret])
    forward = _Forward(answer)
    out = asyncio.run(
        _admin(forward).describe_configs(
            _request(4, include_synonyms=True, include_documentation=True),
            None,  # type: ignore[arg-type]
        )
    )
    ((name, sent),) = forward.sent
    assert name == "DescribeConfigs" and sent.include_synonyms and sent.include_documentation
    assert sent.HasField("broker_id") and sent.broker_id == 3
    got, hidden = out["results"][0]["configs"]
    assert (got["config_source"], got["config_type"], got["documentation"]) == (1, 5, "How long.")
    assert got["synonyms"] == [
        {"name": "retention.ms", "value": "123", "source": 1},
        {"name": "log.retention.hours", "value": "168", "source": 5},
    ]
    assert (hidden["value"], hidden["config_type"], hidden["config_source"]) == (None, 9, 4)
    assert hidden["synonyms"] == [{"name": "x.password", "value": None, "source": 4}]
    assert hidden["documentation"] is None  # the controller sent none


def test_a_v1_request_asks_for_no_documentation() -> None:
    forward = _Forward(R())
    asyncio.run(_admin(forward).describe_configs(_request(1, include_synonyms=False), None))  # type: ignore[arg-type]
    ((_name, sent),) = forward.sent
    assert not sent.include_synonyms and not sent.include_documentation
