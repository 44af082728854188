"""SASL/SCRAM (kraftlog.common.security._scram): RFC 7677's and RFC 5802's test vectors, both halves of the
exchange against each other, and every way a client can get it wrong failing the same way.

The RFC vectors pin the exact bytes on the wire, so a client or server of another implementation
(Kafka's Java client, librdkafka) interoperates; the failure tests pin that nothing but
SaslAuthenticationFailedError escapes `ScramServer.evaluate` and that no failure leaks the
password, the proof or whether the user exists.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import kraftlog.common.security._scram as _scram
from kraftlog.common.errors import IllegalSaslStateError, SaslAuthenticationFailedError, UnacceptableCredentialError
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._scram import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MIN_ITERATIONS,
    ScramClient,
    ScramCredential,
    ScramServer,
    scram_credential,
    scram_credential_from_salted_password,
    scram_salted_password,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3 (SCRAM-SHA-256): user "user", password "pencil"
RFC7677_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _fixed(value: str) -> Callable[[], str]:
    return lambda: value


def _counter(prefix: str) -> Callable[[], str]:
    numbers = itertools.count()
    return lambda: f"{prefix}{next(numbers)}"


@pytest.fixture(scope="module")
def pencil() -> ScramCredential:
    return scram_credential(SHA256, "pencil", salt=RFC7677_SALT, iterations=4096)


def _rfc_server(credential: ScramCredential) -> ScramServer:
    return ScramServer(SHA256, {"user": credential}.get, _fixed(RFC7677_SERVER_NONCE))


def test_rfc7677_server_produces_the_exact_messages(pencil: ScramCredential) -> None:
    server = _rfc_server(pencil)
    assert server.evaluate(RFC7677_CLIENT_FIRST) == RFC7677_SERVER_FIRST
    assert not server.complete and server.username is None
    assert server.evaluate(RFC7677_CLIENT_FINAL) == RFC7677_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_client_produces_the_exact_messages() -> None:
    client = ScramClient(SHA256, "user", "pencil", _fixed(RFC7677_CLIENT_NONCE))
    assert client.first_message() == RFC7677_CLIENT_FIRST
    assert client.final_message(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not client.complete
    client.verify(RFC7677_SERVER_FINAL)
    assert client.complete


def test_rfc5802_sha1_example_through_the_primitives() -> None:
    """RFC 5802 section 5 is SCRAM-SHA-1, which Kafka does not offer: check its proof and server
    signature with the same primitives the SHA-256/512 exchanges use."""
    salt = base64.b64decode("QSXCR+Q6sek8bf92")
    salted = _scram._salted("sha1", b"pencil", salt, 4096)
    client_key, stored_key, server_key = _scram._keys("sha1", salted)
    auth = (
        b"n=user,r=fyko+d2lbbFgONRv9qkxdawL,"
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096,"
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    )
    proof = _scram._xor(client_key, _scram._hmac("sha1", stored_key, auth))
    assert base64.b64encode(proof) == b"v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    assert base64.b64encode(_scram._hmac("sha1", server_key, auth)) == b"rmF9pqV8S7suAoZWja4dJRkFsKQ="


def test_credential_holds_no_password_and_hides_its_keys(pencil: ScramCredential) -> None:
    assert pencil.salt == RFC7677_SALT and pencil.iterations == 4096
    assert len(pencil.stored_key) == len(pencil.server_key) == 32
    assert "pencil" not in repr(pencil)
    assert pencil.stored_key.hex() not in repr(pencil) and "stored_key" not in repr(pencil)
    # the salted-password path (AlterUserScramCredentials) gives the same credential
    salted = scram_salted_password(SHA256, "pencil", RFC7677_SALT, 4096)
    assert scram_credential_from_salted_password(SHA256, salted, RFC7677_SALT, 4096) == pencil


def test_credential_salt_comes_from_the_injected_rng() -> None:
    asked: list[int] = []

    def rng(size: int) -> bytes:
        asked.append(size)
        return b"\x01" * size

    credential = scram_credential(SHA512, "secret", rng=rng)
    assert asked == [32] and credential.salt == b"\x01" * 32
    assert len(credential.stored_key) == 64
    assert scram_credential(SHA512, "secret", rng=rng) == credential  # same salt, same keys


@pytest.mark.parametrize(
    ("iterations", "message"),
    [(SCRAM_MIN_ITERATIONS - 1, "Too few iterations"), (SCRAM_MAX_ITERATIONS + 1, "Too many iterations"), (0, "few")],
)
def test_iterations_outside_kafkas_bounds_are_unacceptable(iterations: int, message: str) -> None:
    with pytest.raises(UnacceptableCredentialError, match=message) as caught:
        scram_credential(SHA256, "pw", salt=b"salt", iterations=iterations)
    assert caught.value.error_code == 93 and caught.value.error_name == "UNACCEPTABLE_CREDENTIAL"


def test_iteration_bounds_themselves_are_accepted() -> None:
    assert scram_credential(SHA256, "pw", salt=b"s", iterations=SCRAM_MAX_ITERATIONS).iterations == 16384
    with pytest.raises(UnacceptableCredentialError, match="Empty salt"):
        scram_credential(SHA256, "pw", salt=b"")


def _exchange(
    mechanism: ScramMechanism, server: ScramServer, username: str, password: str
) -> tuple[ScramClient, bytes]:
    client = ScramClient(mechanism, username, password)
    server_final = server.evaluate(client.final_message(server.evaluate(client.first_message())))
    return client, server_final


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_client_and_server_agree(mechanism: ScramMechanism) -> None:
    credential = scram_credential(mechanism, "s3cr\u00e9t", iterations=8192)
    server = ScramServer(mechanism, {"alice": credential}.get)
    client, server_final = _exchange(mechanism, server, "alice", "s3cr\u00e9t")
    client.verify(server_final)
    assert client.complete and server.complete and server.username == "alice"
    assert server.mechanism_name == client.mechanism_name == mechanism.mechanism_name


def test_user_names_with_comma_and_equals_are_escaped() -> None:
    credential = scram_credential(SHA256, "pw")
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return credential

    client = ScramClient(SHA256, "a,b=c", "pw", _fixed("nonce"))
    first = client.first_message()
    assert first == b"n,,n=a=2Cb=3Dc,r=nonce"
    server = ScramServer(SHA256, lookup)
    client.verify(server.evaluate(client.final_message(server.evaluate(first))))
    assert seen == ["a,b=c"] and server.username == "a,b=c"


def _fails(server: ScramServer, message: bytes) -> SaslAuthenticationFailedError:
    with pytest.raises(SaslAuthenticationFailedError) as caught:
        server.evaluate(message)
    return caught.value


def test_wrong_password_and_unknown_user_fail_alike_at_client_final(pencil: ScramCredential) -> None:
    key = b"k" * 32
    known = ScramServer(SHA256, {"user": pencil}.get, fake_salt_key=key)
    unknown = ScramServer(SHA256, {"user": pencil}.get, fake_salt_key=key)
    wrong = ScramClient(SHA256, "user", "pencil!")
    nobody = ScramClient(SHA256, "nobody", "pencil")
    first_known = known.evaluate(wrong.first_message())
    first_unknown = unknown.evaluate(nobody.first_message())  # no failure yet: a made-up salt
    assert b",s=" in first_unknown and first_unknown.endswith(b",i=4096")
    error_known = _fails(known, wrong.final_message(first_known))
    error_unknown = _fails(unknown, nobody.final_message(first_unknown))
    assert str(error_known) == str(error_unknown)
    assert "pencil" not in str(error_known) and "nobody" not in str(error_unknown)
    assert not known.complete and known.username is None and unknown.username is None


def test_unknown_users_made_up_salt_is_stable_per_name() -> None:
    def salt_of(name: str) -> bytes:
        server = ScramServer(SHA256, lambda _: None, fake_salt_key=b"k" * 32)
        server_first = server.evaluate(f"n,,n={name},r=abc".encode())
        return base64.b64decode(server_first.split(b",")[1][2:])

    assert salt_of("ghost") == salt_of("ghost") != salt_of("phantom")
    assert len(salt_of("ghost")) == 32  # as long as a real credential's salt


def test_unknown_users_answer_is_the_same_on_every_node_and_like_a_real_one() -> None:
    """Issue 24: two nodes of one cluster (two servers built from the same cluster secret) give
    an unknown name one salt; another secret (another cluster) another; the mechanism matters (a
    real user's two credentials have two salts); the count is the default one."""
    from kraftlog.common.security._scram import SCRAM_DEFAULT_ITERATIONS, scram_unknown_user_key

    def first_of(secret: str | None, name: str, mechanism: ScramMechanism = SHA256) -> tuple[bytes, int]:
        server = ScramServer(mechanism, lambda _: None, fake_salt_key=scram_unknown_user_key(secret))
        fields = dict(f.split("=", 1) for f in server.evaluate(f"n,,n={name},r=abc".encode()).decode().split(","))
        return base64.b64decode(fields["s"]), int(fields["i"])

    node1, node2 = first_of("cluster-secret-1", "ghost"), first_of("cluster-secret-1", "ghost")
    assert node1 == node2 and node1[1] == SCRAM_DEFAULT_ITERATIONS
    assert first_of("cluster-secret-2", "ghost")[0] != node1[0]
    assert first_of("cluster-secret-1", "ghost", SHA512)[0] != node1[0]
    assert first_of("cluster-secret-1", "phantom")[0] != node1[0]
    assert scram_unknown_user_key("s") != b"s" and len(scram_unknown_user_key("s")) == 32
    assert scram_unknown_user_key(None) == scram_unknown_user_key(None)  # this process's own key


def test_the_cluster_secret_comes_from_the_config() -> None:
    from kraftlog.common._config_def import Password
    from kraftlog.common.security import ListenerSecurity, scram_secret_of
    from kraftlog.common.security._scram import scram_unknown_user_key

    assert scram_secret_of({}) is None
    assert scram_secret_of({"controller.quorum.raft.password": Password("raft-pw")}) == "raft-pw"
    both = {
        "sasl.scram.unknown.user.secret": Password("dedicated-secret-1234"),
        "controller.quorum.raft.password": Password("raft-pw"),
    }
    assert scram_secret_of(both) == "dedicated-secret-1234"
    security = ListenerSecurity.from_config({"controller.quorum.raft.password": Password("raft-pw")}, "BROKER")
    assert security.scram_unknown_user_key == scram_unknown_user_key("raft-pw")
    assert "raft-pw" not in repr(security) and repr(security.scram_unknown_user_key) not in repr(security)


def test_replayed_client_final_fails_against_a_new_exchange(pencil: ScramCredential) -> None:
    first = _rfc_server(pencil)
    first.evaluate(RFC7677_CLIENT_FIRST)
    first.evaluate(RFC7677_CLIENT_FINAL)
    assert first.complete
    replay = ScramServer(SHA256, {"user": pencil}.get, _fixed("another-server-nonce"))
    replay.evaluate(RFC7677_CLIENT_FIRST)
    assert "nonce" in str(_fails(replay, RFC7677_CLIENT_FINAL))


def test_tampered_server_signature_is_detected() -> None:
    credential = scram_credential(SHA256, "pw")
    server = ScramServer(SHA256, {"bob": credential}.get)
    client, server_final = _exchange(SHA256, server, "bob", "pw")
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[0] ^= 1
    with pytest.raises(SaslAuthenticationFailedError, match="server signature"):
        client.verify(b"v=" + base64.b64encode(bytes(signature)))
    assert not client.complete


def test_a_server_without_the_users_server_key_is_detected() -> None:
    """An impostor that knows only StoredKey (enough to check the proof) cannot sign."""
    real = scram_credential(SHA256, "pw", salt=b"salt")
    impostor_credential = ScramCredential(real.salt, real.stored_key, b"\x00" * 32, real.iterations)
    server = ScramServer(SHA256, {"bob": impostor_credential}.get)
    client, server_final = _exchange(SHA256, server, "bob", "pw")
    with pytest.raises(SaslAuthenticationFailedError):
        client.verify(server_final)


def test_server_error_in_server_final_fails_the_client() -> None:
    client = ScramClient(SHA256, "bob", "pw", _fixed("cn"))
    client.first_message()
    client.final_message(b"r=cnsn,s=c2FsdA==,i=4096")
    with pytest.raises(SaslAuthenticationFailedError, match="other-error"):
        client.verify(b"e=other-error")


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=cn,s=c2FsdA==,i=4096",  # the server added no nonce of its own
        b"r=XXsn,s=c2FsdA==,i=4096",  # does not extend the client nonce
        b"r=cnsn,s=c2FsdA==,i=4095",  # below Kafka's minimum
        b"r=cnsn,s=!!!,i=4096",
        b"r=cnsn,s=,i=4096",
        b"r=cnsn,s=c2FsdA==,i=-1",
        b"r=cnsn,s=c2FsdA==",
        b"m=x,r=cnsn,s=c2FsdA==,i=4096",
        b"\xff",
    ],
)
def test_client_refuses_bad_server_first(server_first: bytes) -> None:
    client = ScramClient(SHA256, "bob", "pw", _fixed("cn"))
    client.first_message()
    with pytest.raises(SaslAuthenticationFailedError):
        client.final_message(server_first)
    with pytest.raises(IllegalSaslStateError):
        client.verify(b"v=AAAA")


def test_client_calls_out_of_order_are_illegal() -> None:
    client = ScramClient(SHA256, "bob", "pw")
    with pytest.raises(IllegalSaslStateError):
        client.final_message(b"r=x,s=c2FsdA==,i=4096")
    client.first_message()
    with pytest.raises(IllegalSaslStateError):
        client.first_message()


def test_server_used_after_completion_or_failure_is_illegal(pencil: ScramCredential) -> None:
    done = _rfc_server(pencil)
    done.evaluate(RFC7677_CLIENT_FIRST)
    done.evaluate(RFC7677_CLIENT_FINAL)
    with pytest.raises(IllegalSaslStateError):
        done.evaluate(RFC7677_CLIENT_FIRST)
    failed = _rfc_server(pencil)
    _fails(failed, b"garbage")
    with pytest.raises(IllegalSaslStateError):
        failed.evaluate(RFC7677_CLIENT_FIRST)


@pytest.mark.parametrize(
    ("client_first", "reason"),
    [
        (b"y,,n=user,r=abc", "channel binding"),
        (b"p=tls-unique,,n=user,r=abc", "channel binding"),
        (b"n,a=other,n=user,r=abc", "authorization id"),
        (b"n,,m=ext,n=user,r=abc", "mandatory"),
        (b"n,,n=user,r=abc,tokenauth=true", "delegation tokens"),
        (b"n,,n=us=er,r=abc", "escaped"),
        (b"n,,n=,r=abc", "user name"),
        (b"n,,n=user,r=", "nonce"),
        (b"n,,n=user,r=a\x7fb", "nonce"),
        (b"n,,n=user", "client-first"),
        (b"n,,r=abc,n=user", "client-first"),
        (b"n,,n=user,r=abc,bad-ext", "extension"),
        (b"n,x=1,n=user,r=abc", "authorization id"),
        (b"n,,n=user,r=abc\xff", "UTF-8"),
        (b"", "gs2 header"),
    ],
)
def test_malformed_client_first_fails(pencil: ScramCredential, client_first: bytes, reason: str) -> None:
    assert reason in str(_fails(_rfc_server(pencil), client_first))


def test_authzid_equal_to_the_user_and_unknown_extensions_are_accepted(pencil: ScramCredential) -> None:
    server = _rfc_server(pencil)
    server_first = server.evaluate(b"n,a=user,n=user,r=abc,foo=bar,tokenauth=false")
    assert server_first.startswith(b"r=abc" + RFC7677_SERVER_NONCE.encode())


def _final_for(server: ScramServer, mutate: Callable[[bytes], bytes]) -> bytes:
    client = ScramClient(SHA256, "user", "pencil", _fixed(RFC7677_CLIENT_NONCE))
    return mutate(client.final_message(server.evaluate(client.first_message())))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m.replace(b"c=biws", b"c=eSws"),  # "y,," echoed: not the header sent
        lambda m: m.replace(b"c=biws", b"c=b!ws"),
        lambda m: m.replace(b"k0,p=", b"k1,p="),  # nonce
        lambda m: m[: m.index(b",p=")],  # no proof
        lambda m: m[: m.index(b",p=") + 3] + b"AAAA",  # short proof
        lambda m: m[: m.index(b",p=") + 3] + b"not base64!",
        lambda m: m.replace(b"c=biws,", b""),
        lambda m: m + b"\xff",
        lambda m: b"",
    ],
)
def test_malformed_or_forged_client_final_fails_without_leaking(
    pencil: ScramCredential, mutate: Callable[[bytes], bytes]
) -> None:
    server = _rfc_server(pencil)
    message = _final_for(server, mutate)
    error = _fails(server, message)
    proof = RFC7677_CLIENT_FINAL.split(b"p=")[1].decode()
    assert "pencil" not in str(error) and proof not in str(error)
    assert not server.complete and server.username is None


def test_lookup_failure_fails_the_exchange() -> None:
    def broken(_: str) -> ScramCredential | None:
        raise OSError("metadata image unavailable")

    server = ScramServer(SHA256, broken)
    error = _fails(server, b"n,,n=user,r=abc")
    assert isinstance(error.__cause__, OSError)


def test_stored_credential_below_minimum_iterations_is_refused() -> None:
    weak = ScramCredential(b"salt", b"\x00" * 32, b"\x00" * 32, 1000)
    assert "iterations" in str(_fails(ScramServer(SHA256, lambda _: weak), b"n,,n=user,r=abc"))


@settings(max_examples=examples(300), deadline=None)
@given(first=st.binary(max_size=200), final=st.binary(max_size=200))
def test_random_bytes_only_ever_fail_as_authentication_failures(first: bytes, final: bytes) -> None:
    credential = scram_credential(SHA256, "pw", salt=b"salt")
    server = ScramServer(SHA256, lambda _: credential, _counter("sn"))
    try:
        server.evaluate(first)
        server.evaluate(final)
    except SaslAuthenticationFailedError:
        assert not server.complete
    else:  # pragma: no cover - random bytes forging a proof
        pytest.fail("random bytes authenticated")


@settings(max_examples=examples(200), deadline=None)
@given(
    user=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=20),
    extra=st.lists(st.text(alphabet="abcXYZ=,", min_size=0, max_size=8), max_size=3),
)
def test_structured_client_first_messages_never_raise_anything_else(user: str, extra: list[str]) -> None:
    message = "n,,n=" + user + ",r=abc" + "".join("," + part for part in extra)
    server = ScramServer(SHA256, lambda _: None)
    try:
        server.evaluate(message.encode())
    except SaslAuthenticationFailedError:
        return
    # reached server-first (for a user it does not know): any final message must still fail
    with pytest.raises(SaslAuthenticationFailedError):
        server.evaluate(b"c=biws,r=abc,p=AAAA")


@settings(max_examples=examples(300), deadline=None)
@given(final=st.one_of(st.binary(max_size=200), st.text(alphabet="cprbiws=,AZ+/09", max_size=80).map(str.encode)))
def test_random_client_final_after_a_valid_client_first_fails(final: bytes) -> None:
    credential = scram_credential(SHA256, "pw", salt=b"salt")
    server = ScramServer(SHA256, lambda _: credential, _fixed("sn"))
    server.evaluate(b"n,,n=user,r=cn")
    with pytest.raises(SaslAuthenticationFailedError):
        server.evaluate(final)
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(final)


def _final_with_nonce(password: str, server_first: bytes, client_first_bare: str, nonce: str) -> bytes:
    """A client-final message for ``nonce`` with a correct proof (RFC 5802 by hand)."""
    import hashlib
    import hmac as _hmac

    attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = _hmac.new(salted, b"Client Key", "sha256").digest()
    stored = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = _hmac.new(stored, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_a_final_nonce_ending_with_the_exchanges_nonce_is_accepted_as_kafka_does() -> None:
    """librdkafka 2.0 sends its client nonce in front of the combined nonce (Kafka accepts any
    nonce that ends with the exchange's); a nonce not ending so is refused."""
    credential = scram_credential(ScramMechanism.SCRAM_SHA_256, "pencil", b"saltsaltsalt", 4096)
    for doubled, accepted in ((True, True), (False, False)):
        server = ScramServer(ScramMechanism.SCRAM_SHA_256, lambda user: credential, lambda: "servernonce")
        server_first = server.evaluate(b"n,,n=user,r=clientnonce")
        combined = "clientnonceservernonce"
        nonce = "clientnonce" + combined if doubled else combined + "x"
        final = _final_with_nonce("pencil", server_first, "n=user,r=clientnonce", nonce)
        if accepted:
            assert server.evaluate(final).startswith(b"v=") and server.complete
        else:
            with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
                server.evaluate(final)
