"""DescribeConfigs on the Kafka listener (issue 25): the broker forwards the client's IncludeSynonyms
and IncludeDocumentation and its own id (whose per-broker dynamic configs are a layer of a topic
key's synonyms), and answers Kafka's ids for sources and types; a sensitive entry shows no value in
any synonym. Its own broker resource it answers itself, from its own node config (the static
layer) and image, in the request's order among the forwarded ones."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kio.index import load_request_schema

from kraftlog.broker.kafka._kafka_admin import AdminApis
from kraftlog.broker.kafka._kafka_wire import ParsedRequest, build
from kraftlog.common.config import NodeConfig
from kraftlog.common.security import RequestContext, request_scope
from kraftlog.common.security._request_context import ANONYMOUS, Session
from kraftlog.metadata_log import ConfigurationsImage
from kraftlog.proto import admin_pb2

CONFIG = NodeConfig.from_mapping(
    {
        "node.id": 3,
        "process.roles": "broker",
        "controller.quorum.voters": "100@127.0.0.1:9999",
        "log.dirs": "/x",
        "log.retention.hours": 100,
        "ssl.key.password": "k3y",
    }
)

R = admin_pb2.DescribeConfigsResponse


class _Forward:
    def __init__(self, answer: R) -> None:
        self.answer = answer
        self.sent: list[tuple[str, Any]] = []

    async def __call__(self, name: str, request: Any) -> Any:
        self.sent.append((name, request))
        return self.answer


def _admin(forward: _Forward) -> AdminApis:
    configs = ConfigurationsImage(
        resources={(4, "3"): {"log.retention.ms": "7000000"}, (4, ""): {"log.retention.minutes": "600"}}
    )
    return AdminApis(
        forward,  # type: ignore[arg-type]
        node_id=3,
        cluster_id="c",
        image=lambda: SimpleNamespace(configs=configs),  # type: ignore[arg-type,return-value]
        log_dirs=[],
        replicas=lambda: None,  # type: ignore[arg-type,return-value]
        config=CONFIG,
    )


def _request(version: int, resources: list[tuple[int, str]] | None = None, **values: Any) -> ParsedRequest:
    asked = [
        {"resource_type": t, "resource_name": n, "configuration_keys": None}
        for t, n in (resources if resources is not None else [(2, "t")])
    ]
    body = build(load_request_schema(32, version), {"resources": asked, **values})
    return ParsedRequest(32, version, 1, "c", body)


def _run(admin: AdminApis, request: ParsedRequest, *, allowed: bool = True) -> dict[str, Any]:
    ctx = RequestContext(Session(ANONYMOUS, "127.0.0.1"), api="DescribeConfigs", authorize_fn=lambda *_a: allowed)
    with request_scope(ctx):
        return asyncio.run(admin.describe_configs(request, None))  # type: ignore[arg-type]


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
    out = _run(_admin(forward), _request(4, include_synonyms=True, include_documentation=True))
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
    _run(_admin(forward), _request(1, include_synonyms=False))
    ((_name, sent),) = forward.sent
    assert not sent.include_synonyms and not sent.include_documentation


def test_its_own_broker_resource_is_answered_here_in_the_requests_order() -> None:
    answer = R(
        results=[
            R.Result(resource=admin_pb2.ConfigResource(resource_type=2, resource_name="t")),
            R.Result(resource=admin_pb2.ConfigResource(resource_type=4, resource_name="")),
        ]
    )
    forward = _Forward(answer)
    asked = [(4, ""), (4, "3"), (2, "t")]
    out = _run(_admin(forward), _request(4, asked, include_synonyms=True, include_documentation=True))
    ((_name, sent),) = forward.sent  # the broker's own resource is not forwarded
    assert [(r.resource.resource_type, r.resource.resource_name) for r in sent.resources] == [(4, ""), (2, "t")]
    assert [(r["resource_type"], r["resource_name"]) for r in out["results"]] == asked
    mine = {c["name"]: c for c in out["results"][1]["configs"]}
    retention = mine["log.retention.ms"]
    assert (retention["value"], retention["config_source"], retention["config_type"]) == ("7000000", 2, 5)
    assert [(s["name"], s["value"], s["source"]) for s in retention["synonyms"]] == [
        ("log.retention.ms", "7000000", 2),
        ("log.retention.minutes", "600", 3),
        ("log.retention.hours", "100", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert (mine["node.id"]["value"], mine["node.id"]["config_source"], mine["node.id"]["read_only"]) == ("3", 4, True)
    assert mine["process.roles"]["value"] == "broker"  # this broker's static config, not the controller's
    assert mine["num.io.threads"]["documentation"]
    secret = mine["ssl.key.password"]
    assert (secret["value"], secret["is_sensitive"], secret["config_type"]) == (None, True, 9)
    assert secret["synonyms"] == [{"name": "ssl.key.password", "value": None, "source": 4}]


def test_its_own_broker_resource_needs_describe_configs_on_the_cluster() -> None:
    forward = _Forward(R())
    out = _run(_admin(forward), _request(4, [(4, "3")]), allowed=False)
    assert forward.sent == []
    (result,) = out["results"]
    assert (result["error_code"], result["configs"]) == (31, [])  # CLUSTER_AUTHORIZATION_FAILED


def test_an_empty_request_is_answered_empty() -> None:
    forward = _Forward(R())
    ctx = RequestContext(Session(ANONYMOUS, "127.0.0.1"), api="DescribeConfigs")
    with request_scope(ctx):
        out = asyncio.run(_admin(forward).describe_configs(_request(4, []), None))  # type: ignore[arg-type]
    assert out["results"] == [] and forward.sent == [] and ctx.decided
