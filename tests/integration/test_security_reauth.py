"""Re-authentication of SASL sessions (KIP-368, ``connections.max.reauth.ms``, issue 25) on a SCRAM
cluster whose sessions live 3 s: confluent-kafka (librdkafka re-authenticates on its own) keeps
producing and consuming across several lifetimes; a raw client that does not re-authenticate is
disconnected; SaslAuthenticate answers the lifetime; a re-authentication as another user is
refused; kraftlog's gRPC clients log in again in time and a stale session token is refused.

On main the node refused to start: ``'connections.max.reauth.ms' = 3000 is not supported``."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections import Counter
from typing import Any

import grpc
import pytest

from kraftlog.client import NewTopic
from kraftlog.common.security import TlsSettings
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._scram import ScramClient
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, open_channel, sasl_metadata, security_pb2, security_pb2_grpc
from tests.integration.test_security_sasl import _call_on, _sasl_socket

LIFETIME_MS = 3000
#: how late after its session's end a connection may be closed (a 2-core machine under load)
MARGIN_MS = 2500


@pytest.fixture(scope="module")
def reauth_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The scram cluster of test_security_sasl with sessions of LIFETIME_MS on every listener."""
    c = LocalCluster(
        tmp_path_factory.mktemp("reauth"),
        controllers=1,
        combined=True,
        security="scram",
        overrides={"connections.max.reauth.ms": LIFETIME_MS},
    )
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(1, timeout_s=60)
        with c.admin() as admin:
            assert admin.create_topics([NewTopic("reauth-t", 1, 1)]).topics[0].error.code == 0
            answer = admin.alter_user_scram_credentials([("alice", 2, "alice-secret", 4096)])
            assert [r.error.code for r in answer.results] == [0]
        yield c
    finally:
        c.stop()


def _log(cluster: LocalCluster) -> str:
    node = next(iter(cluster.nodes.values()))
    return node.log_path.read_text(encoding="utf-8", errors="replace")


def _events(cluster: LocalCluster, name: str) -> list[dict[str, Any]]:
    """The node's structured log events called ``name``, in order."""
    events = []
    for line in _log(cluster).splitlines():
        if name in line:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == name:
                    events.append(event)
    return events


def _expired_closes(cluster: LocalCluster) -> list[dict[str, Any]]:
    closes = _events(cluster, "kafka_connection_closed")
    return [e for e in closes if "connections.max.reauth.ms" in str(e.get("reason"))]


def _authenticate(sock: socket.socket, user: str, password: str, version: int = 2) -> object:
    """A SCRAM-SHA-512 exchange on ``sock``: the final SaslAuthenticate answer."""
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, user, password)
    assert int(_call_on(sock, 17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code) == 0
    first = _call_on(sock, 36, version, {"auth_bytes": client.first_message()})
    assert int(first.error_code) == 0, first
    return _call_on(sock, 36, version, {"auth_bytes": client.final_message(first.auth_bytes)})


def _admin_password(cluster: LocalCluster) -> str:
    return cluster.scram_password_file.read_text().strip()


def test_confluent_kafka_keeps_working_across_reauthentications(reauth_cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer

    security = reauth_cluster.kafka_client_security()
    conf = {
        "bootstrap.servers": reauth_cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": security["ssl_cafile"],
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": security["sasl_plain_username"],
        "sasl.password": security["sasl_plain_password"],
    }
    errors: list[str] = []
    before = len(_events(reauth_cluster, "sasl_reauthenticated"))
    expired_before = len(_expired_closes(reauth_cluster))
    producer = Producer({**conf, "acks": "all", "error_cb": lambda e: errors.append(str(e))})
    consumer = Consumer(
        {
            **conf,
            "group.id": "reauth-g",
            "auto.offset.reset": "earliest",
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    consumer.subscribe(["reauth-t"])
    delivered: list[object] = []
    sent = received = 0
    try:
        end = time.monotonic() + 3.5 * LIFETIME_MS / 1000.0
        while time.monotonic() < end or received < sent:
            assert time.monotonic() < end + 30, f"{received} of {sent} records consumed"
            if time.monotonic() < end and sent - received < 10:
                producer.produce("reauth-t", value=f"r{sent}".encode(), on_delivery=lambda e, m: delivered.append(e))
                sent += 1
            producer.poll(0)
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                received += 1
        assert producer.flush(30) == 0
    finally:
        consumer.close()
    assert all(e is None for e in delivered) and len(delivered) == sent
    assert errors == []  # no disconnect, no authentication failure
    reauths = _events(reauth_cluster, "sasl_reauthenticated")[before:]
    per_connection = Counter(event["peer"] for event in reauths)
    print(f"sent={sent} received={received} reauthentications per connection={dict(per_connection)}")
    # librdkafka re-authenticated its connections, each several times on the same connection
    assert len(per_connection) >= 2 and max(per_connection.values()) >= 2
    assert all(event["principal"] == "User:admin" for event in reauths)
    assert len(_expired_closes(reauth_cluster)) == expired_before  # none of them lapsed


def test_a_connection_that_does_not_reauthenticate_is_closed(reauth_cluster: LocalCluster) -> None:
    with _sasl_socket(reauth_cluster) as sock:
        done = _authenticate(sock, "admin", _admin_password(reauth_cluster))
        authenticated = time.monotonic()
        assert int(done.error_code) == 0
        assert done.session_lifetime.total_seconds() * 1000 == LIFETIME_MS  # SaslAuthenticate v1+ tells the lifetime
        closed_after_ms = None
        deadline = authenticated + (LIFETIME_MS + 10 * MARGIN_MS) / 1000.0
        while time.monotonic() < deadline:
            try:
                _call_on(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
            except (ConnectionError, OSError):
                closed_after_ms = (time.monotonic() - authenticated) * 1000.0
                break
            select.select([sock], [], [], 0.05)  # pace the requests; a close shows as readable
    print(f"closed {closed_after_ms} ms after authenticating (lifetime {LIFETIME_MS} ms)")
    assert closed_after_ms is not None
    assert LIFETIME_MS <= closed_after_ms <= LIFETIME_MS + MARGIN_MS
    assert _expired_closes(reauth_cluster)  # the close says why


def test_reauthentication_keeps_the_connection_and_the_principal(reauth_cluster: LocalCluster) -> None:
    password = _admin_password(reauth_cluster)
    with _sasl_socket(reauth_cluster) as sock:
        assert int(_authenticate(sock, "admin", password).error_code) == 0
        again = _authenticate(sock, "admin", password)  # a re-authentication on the same connection
        assert int(again.error_code) == 0 and again.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
        assert len(_call_on(sock, 3, 12, {"topics": None}).brokers) == 1  # still served
    with _sasl_socket(reauth_cluster) as sock:
        assert int(_authenticate(sock, "admin", password).error_code) == 0
        refused = _authenticate(sock, "alice", "alice-secret")
        assert int(refused.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication from User.admin: User.alice" in str(
            refused.error_message
        )
        with pytest.raises((ConnectionError, OSError)):
            _call_on(sock, 3, 12, {"topics": None})  # and the connection is closed after the answer


def test_grpc_sessions_expire_and_kraftlog_clients_log_in_again(
    reauth_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kraftlog.client import Admin
    from kraftlog.proto import _channels

    ca = TlsSettings(truststore_location=str(reauth_cluster.tls_dir / "ca.crt"))
    address = reauth_cluster.bootstrap_servers.split(",")[0]
    with open_channel(address, tls=ca) as channel:
        sasl = security_pb2_grpc.SaslServiceStub(channel)
        client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", "alice-secret")
        # the exchange travels in call metadata; the request messages stay empty (never read)
        hs = sasl.SaslHandshake(
            security_pb2.SaslHandshakeRequest(), metadata=sasl_metadata(mechanism="SCRAM-SHA-512"), timeout=10
        )
        first = sasl.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(),
            metadata=sasl_metadata(exchange_id=hs.exchange_id, auth_bytes=client.first_message()),
            timeout=10,
        )
        done = sasl.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(),
            metadata=sasl_metadata(exchange_id=hs.exchange_id, auth_bytes=client.final_message(first.auth_bytes)),
            timeout=10,
        )
        logged_in = time.monotonic()
        assert done.session and done.session_lifetime_ms == LIFETIME_MS
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        metadata = (("kraftlog-sasl-session", done.session),)

        def refused() -> bool:
            try:
                stub.Metadata(broker_pb2.MetadataRequest(), metadata=metadata, timeout=10)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err
                assert "SASL_AUTHENTICATION_FAILED" in str(err.details())
                return True
            return False

        assert not refused()
        wait_until(refused, timeout_s=(LIFETIME_MS + MARGIN_MS) / 1000.0, interval_s=0.05)
        refused_after_ms = (time.monotonic() - logged_in) * 1000.0
    print(f"stale token refused {refused_after_ms:.0f} ms after login (lifetime {LIFETIME_MS} ms)")
    assert LIFETIME_MS - 200 <= refused_after_ms <= LIFETIME_MS + MARGIN_MS  # the server started it before we heard

    alice = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(reauth_cluster.tls_dir / "ca.crt"),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin",
        "sasl_plain_password": _admin_password(reauth_cluster),
    }
    logins: list[bool] = []  # per login: whether a refusal forced it (the session had expired)
    original = _channels.SessionToken.needs_login

    def needs_login(self: _channels.SessionToken, stale: str | None = None) -> bool:
        due = original(self, stale)
        if due:
            logins.append(stale is not None and stale == self.token)
        return due

    monkeypatch.setattr(_channels.SessionToken, "needs_login", needs_login)
    calls = 0
    with Admin(reauth_cluster.bootstrap_servers, request_timeout_ms=10_000, **alice) as admin:
        end = time.monotonic() + 3.5 * LIFETIME_MS / 1000.0
        while time.monotonic() < end:
            assert admin.describe_cluster().error.code == 0
            calls += 1
            time.sleep(0.02)  # pacing, not synchronisation: about 50 calls a second
    print(f"{calls} admin calls across {3.5 * LIFETIME_MS:.0f} ms, logins {logins}")
    assert len(logins) >= 4  # the first and one per lifetime, before it ended
    assert not any(logins)  # no call was refused for an expired session
