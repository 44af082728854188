"""gRPC channel options every kraftlog client of a kraftlog service uses (brokers, controllers' peers,
the client library).

gRPC's defaults suit the public internet, not a broker cluster: a connection attempt to a peer whose
packets are dropped (a cut link, a paused host) waits up to 20 s (``min_reconnect_backoff_ms`` is also
the connect timeout) and the reconnect backoff grows to 120 s, so a node could stay unreachable for
many seconds after the network healed. Kafka's clients cap the reconnect backoff at
``reconnect.backoff.max.ms`` = 1 s; these options do the same.
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
from collections.abc import Generator, Sequence
from typing import Any, Final

import grpc

from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common.security import (
    SASL_AUTH_METADATA,
    SASL_EXCHANGE_METADATA,
    SASL_MECHANISM_METADATA,
    SESSION_METADATA,
    SaslLogin,
    TlsSettings,
    grpc_channel_credentials,
)

__all__ = [
    "RECONNECT_OPTIONS",
    "channel_credentials",
    "open_aio_channel",
    "open_channel",
    "sasl_metadata",
]

RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 1000),  # also the timeout of one connection attempt
    ("grpc.max_reconnect_backoff_ms", 1000),
)


@functools.lru_cache(maxsize=16)
def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    """gRPC channel credentials of ``tls`` (trust store, and the client's key and chain for mutual
    TLS); read once per settings, since the PEM files are read and a key may be decrypted."""
    creds = grpc_channel_credentials(tls)
    return grpc.ssl_channel_credentials(
        root_certificates=creds.root_certificates_pem,
        private_key=creds.private_key_pem,
        certificate_chain=creds.certificate_chain_pem,
    )


def open_channel(
    address: str,
    *,
    options: Sequence[tuple[str, Any]] = (),
    tls: TlsSettings | None = None,
    sasl: SaslLogin | None = None,
) -> grpc.Channel:
    """A blocking channel to a kraftlog node: TLS when ``tls`` is given, else plaintext; logged
    in over SASL as ``sasl`` (a SASL listener) when given."""
    if tls is None:
        raw = grpc.insecure_channel(address, options=list(options))
    else:
        raw = grpc.secure_channel(address, channel_credentials(tls), options=list(options))
    return raw if sasl is None else grpc.intercept_channel(raw, _SaslInterceptor(raw, sasl))


def open_aio_channel(
    address: str,
    *,
    options: Sequence[tuple[str, Any]] = (),
    tls: TlsSettings | None = None,
    sasl: SaslLogin | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel to a kraftlog node, as `open_channel`."""
    interceptors: list[Any] = []
    if sasl is not None:
        unary = _AioSaslInterceptor(address, options, tls, sasl)
        interceptors = [unary, _AioSaslStreamInterceptor(unary)]
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=list(options), interceptors=interceptors)


# --------------------------------------------------------------------------- SASL over gRPC

#: the share of a session's lifetime after which a channel logs in again (KIP-368: Kafka's Java
#: client re-authenticates at 85-95% of it, at random, so a fleet's logins do not come together)
REAUTH_AT_FRACTION: Final = (0.85, 0.95)


class SessionToken:
    """A channel's SASL session token and when to log in again (KIP-368): at a random point in
    `REAUTH_AT_FRACTION` of the lifetime the server answered (never when it answered 0), so
    that no call fails because the session expired. Time and randomness are parameters."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, rng: random.Random | None = None) -> None:
        self._clock = clock
        self._rng = rng or random.Random()
        self.token: str | None = None
        self.refresh_at_ms: int | None = None  # monotonic; None: no re-authentication due

    def set(self, token: str, lifetime_ms: int) -> None:
        self.token = token
        self.refresh_at_ms = None
        if lifetime_ms > 0:
            self.refresh_at_ms = self._clock.monotonic_ms() + int(lifetime_ms * self._rng.uniform(*REAUTH_AT_FRACTION))

    def needs_login(self, stale: str | None = None) -> bool:
        """Whether to log in (again): no token yet, the server refused ``stale`` (the token
        held), or the session is near its end."""
        if self.token is None or self.token == stale:
            return True
        return self.refresh_at_ms is not None and self._clock.monotonic_ms() >= self.refresh_at_ms


def sasl_metadata(
    *, mechanism: str | None = None, exchange_id: str | None = None, auth_bytes: bytes | None = None
) -> tuple[tuple[str, str | bytes], ...]:
    """The call metadata of one SaslService call: SaslHandshake names ``mechanism``,
    SaslAuthenticate ``exchange_id`` and its SASL message ``auth_bytes``. The server reads the
    exchange from here only, never from the (empty) request message (node/_grpc_sasl.py says why)."""
    pairs: list[tuple[str, str | bytes]] = []
    if mechanism is not None:
        pairs.append((SASL_MECHANISM_METADATA, mechanism))
    if exchange_id is not None:
        pairs.append((SASL_EXCHANGE_METADATA, exchange_id))
    if auth_bytes is not None:
        pairs.append((SASL_AUTH_METADATA, auth_bytes))
    return tuple(pairs)


#: one call of a SaslService exchange: the method and its metadata (the request message is empty)
SaslCall = tuple[str, tuple[tuple[str, str | bytes], ...]]


def _sasl_request(method: str) -> Any:
    from kraftlog.proto import security_pb2

    return security_pb2.SaslHandshakeRequest() if method == "SaslHandshake" else security_pb2.SaslAuthenticateRequest()


def _exchange(login: SaslLogin) -> Generator[SaslCall, Any, tuple[str, int]]:
    """The client's side of one SASL exchange over SaslService: yields (method, metadata), is sent
    each answer, returns the session token and its lifetime in ms (0: no limit asked). Failures
    raise the Kafka error the server named; a SCRAM server that cannot prove it knows the
    credential is refused."""
    from kraftlog.common import errors as kerr
    from kraftlog.common.security import ScramClient, ScramMechanism

    handshake = yield ("SaslHandshake", sasl_metadata(mechanism=login.mechanism))
    if handshake.error.code:
        raise kerr.error_for_code(handshake.error.code)(handshake.error.message)
    scram = None
    if login.mechanism == "PLAIN":
        message = f"\0{login.username}\0{login.password}".encode()
    else:
        scram = ScramClient(ScramMechanism.from_name(login.mechanism), login.username, login.password)
        message = scram.first_message()
    while True:
        answer = yield ("SaslAuthenticate", sasl_metadata(exchange_id=handshake.exchange_id, auth_bytes=message))
        if answer.error.code:
            raise kerr.error_for_code(answer.error.code)(answer.error.message)
        if answer.session:
            if scram is not None:
                scram.verify(bytes(answer.auth_bytes))
            return str(answer.session), int(answer.session_lifetime_ms)
        if scram is None:
            raise kerr.IllegalSaslStateError("the server asked for more than one PLAIN message")
        message = scram.final_message(bytes(answer.auth_bytes))


def _with_session(details: Any, token: str, *, aio: bool = False) -> Any:
    """The call's details with the session token added to its metadata (both grpc flavours pass
    named tuples; asyncio wants a `grpc.aio.Metadata`)."""
    pairs = [(k, v) for k, v in (details.metadata or ()) if k != SESSION_METADATA]
    pairs.append((SESSION_METADATA, token))
    return details._replace(metadata=grpc.aio.Metadata(*pairs) if aio else pairs)


class _SaslInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Logs a blocking channel in (once, again before its session's lifetime ends, and when the
    server forgot the session) and sends the session token with every call."""

    def __init__(self, raw: grpc.Channel, login: SaslLogin, clock: Clock = SYSTEM_CLOCK) -> None:
        self._raw = raw
        self._login = login
        self._token = SessionToken(clock)
        self._lock = threading.Lock()

    def _session(self, stale: str | None = None) -> str:
        with self._lock:
            if self._token.needs_login(stale):
                from kraftlog.proto import security_pb2_grpc

                stub = security_pb2_grpc.SaslServiceStub(self._raw)
                steps = _exchange(self._login)
                method, metadata = next(steps)
                try:
                    while True:
                        call = getattr(stub, method)
                        method, metadata = steps.send(call(_sasl_request(method), metadata=metadata, timeout=30))
                except StopIteration as done:
                    self._token.set(*done.value)
            assert self._token.token is not None
            return self._token.token

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        token = self._session()
        outcome = continuation(_with_session(details, token), request)
        if outcome.code() == grpc.StatusCode.UNAUTHENTICATED:  # the session expired: log in again
            outcome = continuation(_with_session(details, self._session(stale=token)), request)
        return outcome

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_with_session(details, self._session()), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return continuation(_with_session(details, self._session()), request_iterator)

    def intercept_stream_stream(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return continuation(_with_session(details, self._session()), request_iterator)


class _AioSaslInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """`_SaslInterceptor` for asyncio channels (a node's own connections to other nodes): unary
    calls; `_AioSaslStreamInterceptor` shares its session for server streams (grpc.aio files an
    interceptor under one call kind only). The exchange runs over a second, plain channel."""

    def __init__(
        self, address: str, options: Sequence[tuple[str, Any]], tls: TlsSettings | None, login: SaslLogin
    ) -> None:
        self._address, self._options, self._tls, self._login = address, options, tls, login
        self._token = SessionToken()
        self._lock = asyncio.Lock()

    async def session(self, stale: str | None = None) -> str:
        async with self._lock:
            if self._token.needs_login(stale):
                from kraftlog.proto import security_pb2_grpc

                async with open_aio_channel(self._address, options=self._options, tls=self._tls) as raw:
                    stub = security_pb2_grpc.SaslServiceStub(raw)
                    steps = _exchange(self._login)
                    method, metadata = next(steps)
                    try:
                        while True:
                            call = getattr(stub, method)
                            answer = await call(_sasl_request(method), metadata=metadata, timeout=30)
                            method, metadata = steps.send(answer)
                    except StopIteration as done:
                        self._token.set(*done.value)
            assert self._token.token is not None
            return self._token.token

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        token = await self.session()
        call = await continuation(_with_session(details, token, aio=True), request)
        if await call.code() == grpc.StatusCode.UNAUTHENTICATED:
            call = await continuation(_with_session(details, await self.session(stale=token), aio=True), request)
        return call


class _AioSaslStreamInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, unary: _AioSaslInterceptor) -> None:
        self._unary = unary

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_session(details, await self._unary.session(), aio=True), request)
