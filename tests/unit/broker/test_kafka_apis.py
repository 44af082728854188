"""KafkaApis dispatches from one table to handler objects (issue 23 §3): every served API reaches
the handler named after it, ApiVersions advertises exactly the table, and a request that reached
no authorization decision is not answered."""

from __future__ import annotations

import asyncio
import inspect
import re
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.kafka._kafka_apis import KafkaApis
from kraftlog.broker.kafka._kafka_server import CLOSE_CONNECTION
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.broker.quota import QuotaManagers
from kraftlog.common.config import NodeConfig
from kraftlog.common.security._request_context import ANONYMOUS, Session
from kraftlog.metadata_log import ClientQuotasImage


def _apis() -> KafkaApis:
    """KafkaApis over a stand-in broker: building the handlers reads only these attributes."""
    config = NodeConfig.from_mapping(
        {"node.id": 1, "process.roles": "broker", "controller.quorum.voters": "100@127.0.0.1:9999", "log.dirs": "/x"}
    )
    broker: Any = SimpleNamespace(
        broker_id=1,
        cluster_id="c",
        config=config,
        channel=None,
        acl_gate=lambda *_args: True,
        group_service=None,
        txn_service=None,
        txn_verify_client=None,
        share_state_service=None,
        share_fetch_service=None,
        init_producer_id=None,
        follower=None,
        replicas=None,
        quotas=QuotaManagers(lambda: ClientQuotasImage.EMPTY),
    )
    return KafkaApis(broker)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_api_goes_to_the_async_handler_named_after_it() -> None:
    apis = _apis()
    for key, route in apis._routes.items():
        assert inspect.iscoroutinefunction(route.handler), route.name
        assert route.handler.__name__ == _snake(route.name), (key, route.name, route.handler.__name__)


def test_api_versions_advertises_the_table() -> None:
    apis = _apis()
    assert apis.supported() == {key: (r.min_version, r.max_version) for key, r in apis._routes.items()}
    assert apis.supported()[18] == (0, 4)  # ApiVersions itself (v4: Kafka 4.x, issue 25)
    assert 0 in apis.supported() and 36 in apis.supported()


def test_a_handler_that_decides_nothing_is_not_answered() -> None:
    apis = _apis()
    calls: list[str] = []

    async def silent(request: ParsedRequest, conn: Any) -> dict[str, Any]:
        calls.append("called")
        return {"error_code": 0}

    apis._routes[16] = apis._routes[16]._replace(handler=silent)  # ListGroups
    conn: Any = SimpleNamespace(
        authenticated=True, session=Session(ANONYMOUS, "127.0.0.1", "PLAINTEXT", "PLAINTEXT"), peer="127.0.0.1:1"
    )
    request: Any = SimpleNamespace(api_key=16, api_version=4, client_id="app", body=None)
    assert asyncio.run(apis.dispatch(request, conn)) is CLOSE_CONNECTION
    assert calls == ["called"]
