"""SaslService reads the SASL exchange from call metadata, never from a message body (issue 24:
grpc reads a message whole before a handler could refuse it, so a stranger's 64 MiB
SaslAuthenticate cost +210 MiB). The client's exchange (proto/_channels.py) is driven against the
servicer in process."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.common.security import (
    SASL_AUTH_METADATA,
    SASL_EXCHANGE_METADATA,
    SASL_MECHANISM_METADATA,
    SaslLogin,
    SaslSessions,
)
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._listener_security import ListenerSecurity
from kraftlog.common.security._scram import scram_credential
from kraftlog.node._grpc_sasl import SASL_SERVICE, SaslServicer, add_sasl_service
from kraftlog.proto import sasl_metadata
from kraftlog.proto._channels import _exchange

_CREDENTIAL = scram_credential(ScramMechanism.SCRAM_SHA_512, "alice-secret", salt=b"s" * 16, iterations=4096)


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class _Context:
    def __init__(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        self._metadata = metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code, details)


class _Unread:
    """A request iterator that fails the test when anything asks for the message."""

    def __aiter__(self) -> _Unread:
        return self

    async def __anext__(self) -> Any:
        raise AssertionError("the request message was read")


def _servicer(cap: int = 524_288, protocol: str = "SASL_PLAINTEXT") -> SaslServicer:
    if protocol == "PLAINTEXT":
        return SaslServicer(None)
    security = ListenerSecurity("BROKER", protocol, None, ("SCRAM-SHA-512",), {}, {}, sasl_max_receive_bytes=cap)
    tokens = (f"tok-{i}" for i in itertools.count())

    def lookup(mechanism: ScramMechanism, user: str) -> Any:
        return _CREDENTIAL if user == "alice" else None

    return SaslServicer(SaslSessions(security, lookup, token_factory=lambda: next(tokens)))


def _call(servicer: SaslServicer, method: str, metadata: tuple[tuple[str, Any], ...]) -> Any:
    return asyncio.run(getattr(servicer, method)(_Unread(), _Context(metadata)))


def _login(servicer: SaslServicer, password: str = "alice-secret") -> tuple[str, int]:
    steps = _exchange(SaslLogin("SCRAM-SHA-512", "alice", password))
    method, metadata = next(steps)
    try:
        while True:
            method, metadata = steps.send(_call(servicer, method, metadata))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def test_the_clients_exchange_travels_in_metadata_and_yields_a_session() -> None:
    servicer = _servicer()
    token, lifetime_ms = _login(servicer)
    assert token.startswith("tok-") and lifetime_ms == 0
    assert servicer.sessions is not None and servicer.sessions.known(token)
    with pytest.raises(kerr.SaslAuthenticationFailedError):
        _login(servicer, password="wrong")


def test_sasl_metadata_names_the_keys_the_server_reads() -> None:
    assert sasl_metadata(mechanism="PLAIN") == ((SASL_MECHANISM_METADATA, "PLAIN"),)
    assert sasl_metadata(exchange_id="x", auth_bytes=b"\0a") == (
        (SASL_EXCHANGE_METADATA, "x"),
        (SASL_AUTH_METADATA, b"\0a"),
    )
    assert SASL_AUTH_METADATA.endswith("-bin")  # binary metadata: grpc base64-encodes it


@pytest.mark.parametrize(
    ("method", "metadata"),
    [
        ("SaslHandshake", ()),
        ("SaslAuthenticate", ()),
        ("SaslAuthenticate", ((SASL_EXCHANGE_METADATA, "x"),)),  # no SASL message
    ],
)
def test_a_call_without_the_metadata_is_refused_unread_naming_the_key(
    method: str, metadata: tuple[tuple[str, Any], ...]
) -> None:
    with pytest.raises(_Aborted) as refused:
        _call(_servicer(cap=4096), method, metadata)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "sasl.server.max.receive.size=4096" in refused.value.details
    assert "never from a message body" in refused.value.details


def test_a_sasl_message_over_the_cap_is_refused_and_one_at_the_cap_is_taken() -> None:
    servicer = _servicer(cap=64)
    exchange = _call(servicer, "SaslHandshake", sasl_metadata(mechanism="SCRAM-SHA-512")).exchange_id
    with pytest.raises(_Aborted) as refused:
        _call(servicer, "SaslAuthenticate", sasl_metadata(exchange_id=exchange, auth_bytes=b"n" * 65))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "65 bytes is over sasl.server.max.receive.size=64" in refused.value.details
    # 64 bytes are read (and fail as SCRAM, answered in the message as Kafka does)
    answer = _call(servicer, "SaslAuthenticate", sasl_metadata(exchange_id=exchange, auth_bytes=b"n" * 64))
    assert answer.error.code == kerr.SaslAuthenticationFailedError.error_code


def test_a_listener_without_sasl_answers_illegal_sasl_state_unread() -> None:
    answer = _call(_servicer(protocol="PLAINTEXT"), "SaslAuthenticate", ())
    assert answer.error.code == kerr.IllegalSaslStateError.error_code


class _Server:
    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def add_generic_rpc_handlers(self, handlers: tuple[Any, ...]) -> None:
        self.handlers.extend(handlers)


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method, self.invocation_metadata = method, ()


def test_both_methods_are_served_request_streaming_so_grpc_reads_no_body() -> None:
    server = _Server()
    add_sasl_service(server, _servicer().sessions)
    for method in ("SaslHandshake", "SaslAuthenticate"):
        handler = server.handlers[0].service(_Details(f"/{SASL_SERVICE}/{method}"))
        assert handler.stream_unary is not None and handler.unary_unary is None, method


_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="n" password="p";'


def _config(**extra: object) -> NodeConfig:
    return NodeConfig(
        {
            "process.roles": "broker",
            "node.id": 1,
            "controller.quorum.voters": "0@127.0.0.1:9093",
            "listeners": "BROKER://127.0.0.1:9092",
            "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "BROKER",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.jaas.config": _JAAS,
            **extra,
        }
    )


def _caps() -> Iterator[tuple[dict[str, object], int]]:
    yield {}, 524_288
    yield {"sasl.server.max.receive.size": 4096}, 4096
    yield {"sasl.server.max.receive.size": 4096, "listener.name.broker.sasl.server.max.receive.size": 1024}, 1024


@pytest.mark.parametrize(("extra", "cap"), list(_caps()))
def test_the_cap_is_the_listeners_sasl_server_max_receive_size(extra: dict[str, object], cap: int) -> None:
    assert ListenerSecurity.from_config(_config(**extra), "BROKER").sasl_max_receive_bytes == cap
