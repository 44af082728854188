"""SASL/PLAIN (kraftlog.common.security._sasl_plain): RFC 4616 parsing, Kafka's PlainSaslServer checks, and
PLAIN passwords verified against the SCRAM credentials of the metadata log."""

from __future__ import annotations

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.common.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._sasl_plain import PlainServer

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class _Verifier:
    """Accepts alice/wonderland and records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, username: str, password: str) -> bool:
        self.calls.append((username, password))
        return (username, password) == ("alice", "wonderland")


@pytest.mark.parametrize("message", [b"\x00alice\x00wonderland", b"alice\x00alice\x00wonderland"])
def test_valid_login_completes_with_the_user_name(message: bytes) -> None:
    verify = _Verifier()
    server = PlainServer(verify)
    assert server.mechanism_name == "PLAIN"
    assert server.evaluate(message) == b""
    assert server.complete and server.username == "alice"
    assert verify.calls == [("alice", "wonderland")]


def test_utf8_names_and_passwords() -> None:
    server = PlainServer(lambda user, password: (user, password) == ("jos\u00e9", "p\u00e4ss"))
    server.evaluate("\x00jos\u00e9\x00p\u00e4ss".encode())
    assert server.username == "jos\u00e9"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00bob\x00wonderland", "Invalid username or password"),
        (b"bob\x00alice\x00wonderland", "authorization id"),
        (b"\x00\x00wonderland", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"alice\x00wonderland", "expected 3 tokens, got 2"),
        (b"a\x00alice\x00wonderland\x00extra", "expected 3 tokens"),
        (b"", "expected 3 tokens, got 1"),
        (b"\x00alice\x00wonder\xffland", "UTF-8"),
    ],
)
def test_failures(message: bytes, reason: str) -> None:
    server = PlainServer(_Verifier())
    with pytest.raises(SaslAuthenticationFailedError, match=reason) as caught:
        server.evaluate(message)
    assert "wonderland" not in str(caught.value) and "wrong" not in str(caught.value)
    assert not server.complete and server.username is None


def test_authorization_id_is_checked_only_after_the_password() -> None:
    verify = _Verifier()
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid username or password"):
        PlainServer(verify).evaluate(b"bob\x00alice\x00nope")
    assert verify.calls == [("alice", "nope")]


def test_verifier_exception_fails_the_exchange() -> None:
    def broken(_user: str, _password: str) -> bool:
        raise OSError("no image")

    with pytest.raises(SaslAuthenticationFailedError, match="could not be verified") as caught:
        PlainServer(broken).evaluate(b"\x00alice\x00wonderland")
    assert isinstance(caught.value.__cause__, OSError)


def test_second_use_is_illegal_after_success_or_failure() -> None:
    done = PlainServer(_Verifier())
    done.evaluate(b"\x00alice\x00wonderland")
    with pytest.raises(IllegalSaslStateError):
        done.evaluate(b"\x00alice\x00wonderland")
    failed = PlainServer(_Verifier())
    with pytest.raises(SaslAuthenticationFailedError):
        failed.evaluate(b"\x00alice\x00wrong")
    with pytest.raises(IllegalSaslStateError):
        failed.evaluate(b"\x00alice\x00wonderland")


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=100))
def test_random_bytes_only_fail_as_authentication_failures(message: bytes) -> None:
    server = PlainServer(_Verifier())
    try:
        server.evaluate(message)
    except SaslAuthenticationFailedError:
        assert not server.complete
    else:
        assert message in (b"\x00alice\x00wonderland", b"alice\x00alice\x00wonderland")
