"""SASL/SCRAM-SHA-256 and -512 (RFC 5802, RFC 7677): credentials, and both halves of the exchange.

What is stored is a `ScramCredential` (salt, StoredKey, ServerKey, iteration count), as Kafka's
``UserScramCredentialRecord`` holds it: never the password, and nothing a thief of the metadata log
could log in with directly. Both exchanges are pure: no sockets, no clock; the nonces come from an
injected ``nonce_factory`` and the salt from an injected ``rng``, so tests replay RFC 7677's vector.

Message order (each side is a small state machine; a call out of order raises
`IllegalSaslStateError`, and so does any call after completion or failure):

    client                                   server (`ScramServer.evaluate`, twice)
    first_message()        -- client-first -->  returns server-first (salt, iterations, nonce)
    final_message(sf)      -- client-final -->  checks nonce, channel binding, proof;
    verify(server_final)  <-- server-final --   returns v=ServerSignature, then `complete`

Where this follows Kafka's ScramSaslServer, and where it is stricter (each a deliberate choice):

* gs2 header: only ``n`` (no channel binding), as Kafka; ``y`` and ``p=`` are refused.
* An authorization id (``a=``), if present, must equal the user name, as Kafka.
* Extensions after the nonce are ignored, as Kafka, except ``tokenauth=true``: Kafka would switch
  to delegation-token credentials; kraftlog has no delegation tokens, so it refuses.
* ``m=`` (reserved mandatory extension) fails, as RFC 5802 section 5.1 requires (Kafka ignores it).
* The client-final nonce must equal client nonce + server nonce exactly (Kafka checks a suffix),
  and the channel-binding attribute must echo the client's gs2 header (``c=biws`` for ``n,,``).
* An unknown user does not fail at client-first, as Kafka does: the server answers with a made-up
  salt and fails at client-final with the very message a wrong password gets (RFC 5802 section 9).
  The salt is `unknown_user_salt`: an HMAC of the mechanism and the name under a cluster-wide secret
  (``fake_salt_key``, see `scram_unknown_user_key`), so every node and every try gives the same salt,
  as for a real user, and the iteration count is `SCRAM_DEFAULT_ITERATIONS`, the count credentials are
  made with by default. Neither the step, the numbers nor the text tells a prober which names exist;
  what a real user's non-default iteration count still reveals is said in docs/security.md.
* Passwords are UTF-8 bytes without SASLprep, as Kafka's ScramFormatter, so credentials made by
  Kafka's tools and by kraftlog agree.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kraftlog.common.errors import IllegalSaslStateError, SaslAuthenticationFailedError, UnacceptableCredentialError

if TYPE_CHECKING:
    from kraftlog.common.security._acl import ScramMechanism

__all__ = [
    "SCRAM_DEFAULT_ITERATIONS",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "ScramClient",
    "ScramCredential",
    "ScramServer",
    "scram_credential",
    "scram_credential_from_salted_password",
    "scram_salted_password",
    "scram_unknown_user_key",
    "unknown_user_salt",
    "validate_scram_iterations",
]

#: Kafka's bounds for both mechanisms (ScramMechanism.minIterations, ScramControlManager.MAX_ITERATIONS)
SCRAM_MIN_ITERATIONS: Final = 4096
SCRAM_MAX_ITERATIONS: Final = 16384
#: the count of credentials made without one (kraftlog's CLI, Kafka's kafka-configs and
#: kafka-storage --add-scram), and the one an unknown user's made-up answer carries
SCRAM_DEFAULT_ITERATIONS: Final = 4096
#: salt length of credentials made here; the made-up salt for unknown users has the same length
_SALT_BYTES: Final = 32

_HASH_BY_MECHANISM: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_EXTENSION = re.compile(r"([A-Za-z]+)=([^\x00]+)")
_DIGITS = re.compile(r"[1-9][0-9]{0,9}")
#: used only when no cluster-wide secret is configured (then the salt differs from node to node)
_PROCESS_FAKE_SALT_KEY: Final = secrets.token_bytes(32)
_UNKNOWN_USER_LABEL: Final = b"kraftlog SCRAM unknown-user salt v1"


def scram_unknown_user_key(cluster_secret: str | None) -> bytes:
    """The key of `unknown_user_salt` from a cluster-wide secret (the same on every node, unknown
    to clients): an HMAC of a fixed label under it, so the secret itself is used for nothing else.
    None (no secret configured) gives this process's random key."""
    if cluster_secret is None:
        return _PROCESS_FAKE_SALT_KEY
    return hmac.new(cluster_secret.encode("utf-8"), _UNKNOWN_USER_LABEL, "sha256").digest()


def unknown_user_salt(key: bytes, mechanism_name: str, username: str) -> bytes:
    """The made-up salt of an unknown ``username``: HMAC-SHA-256(key, mechanism NUL name), as long
    as a real credential's salt. The mechanism is part of it because a real user's two credentials
    have two independent salts."""
    message = mechanism_name.encode("ascii") + b"\x00" + username.encode("utf-8")
    return hmac.new(key, message, "sha256").digest()[:_SALT_BYTES]


def _hash_name(mechanism: ScramMechanism) -> str:
    try:
        return _HASH_BY_MECHANISM[mechanism.mechanism_name]
    except (KeyError, AttributeError) as err:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from err


_NONCE_ALPHABET: Final = "0123456789abcdefghijklmnopqrstuvwxyz"


def _default_nonce() -> str:
    """192 random bits in base 36 (letters and digits only, as Kafka's server nonce): printable
    and comma-free as RFC 5802 asks, and nothing older clients could mis-parse (librdkafka 2.0
    fails an exchange whose nonce holds '-' or '_')."""
    value = secrets.randbits(192)
    digits = []
    while value:
        value, digit = divmod(value, 36)
        digits.append(_NONCE_ALPHABET[digit])
    return "".join(digits) or "0"


@dataclass(frozen=True)
class ScramCredential:
    """One user's SCRAM credential for one mechanism: what the server keeps instead of a password.

    ``stored_key`` = H(HMAC(SaltedPassword, "Client Key")) checks a client's proof; ``server_key`` =
    HMAC(SaltedPassword, "Server Key") signs the server's answer. Both are secret (with StoredKey
    and one observed exchange a thief could log in), so neither shows in ``repr``.
    """

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def validate_scram_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    """Kafka's AlterUserScramCredentials check: UNACCEPTABLE_CREDENTIAL (93) outside 4096..16384."""
    _hash_name(mechanism)
    if iterations < SCRAM_MIN_ITERATIONS:
        raise UnacceptableCredentialError("Too few iterations")
    if iterations > SCRAM_MAX_ITERATIONS:
        raise UnacceptableCredentialError("Too many iterations")


def scram_salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(password, salt, i): PBKDF2-HMAC with the mechanism's hash, one block.

    This is what Kafka's Admin client sends in AlterUserScramCredentials (``salted_password``).
    """
    return _salted(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def scram_credential_from_salted_password(
    mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential the controller stores for an AlterUserScramCredentials upsertion.

    Raises `UnacceptableCredentialError` for iterations outside Kafka's bounds or an empty salt.
    """
    validate_scram_iterations(mechanism, iterations)
    if not salt:
        raise UnacceptableCredentialError("Empty salt")
    hash_name = _hash_name(mechanism)
    _, stored_key, server_key = _keys(hash_name, salted_password)
    return ScramCredential(salt=bytes(salt), stored_key=stored_key, server_key=server_key, iterations=iterations)


def scram_credential(
    mechanism: ScramMechanism,
    password: str,
    salt: bytes | None = None,
    iterations: int = SCRAM_DEFAULT_ITERATIONS,
    rng: Callable[[int], bytes] = secrets.token_bytes,
) -> ScramCredential:
    """Salt and iterate ``password`` into a credential; the password itself is not kept.

    ``salt`` None draws 32 bytes from ``rng`` (`secrets.token_bytes` unless a test injects one).
    Iterations outside 4096..16384 raise `UnacceptableCredentialError`, before any hashing.
    """
    validate_scram_iterations(mechanism, iterations)
    if salt is None:
        salt = rng(_SALT_BYTES)
    salted = scram_salted_password(mechanism, password, salt, iterations)
    return scram_credential_from_salted_password(mechanism, salted, salt, iterations)


# --- RFC 5802 primitives (hash named by hashlib name, so tests can run RFC 5802's SHA-1 example)


def _salted(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    # Hi() is PBKDF2 with HMAC-H and dkLen = the digest size (RFC 5802 section 2.2)
    return hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _keys(hash_name: str, salted_password: bytes) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) of a salted password."""
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted_password, b"Server Key")
    return client_key, stored_key, server_key


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise _failure(f"{what} is not base64") from err


def _escape(username: str) -> str:
    """RFC 5802 saslname: '=' as '=3D' and ',' as '=2C' (in that order)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _unescape(saslname: str, what: str) -> str:
    if not saslname or "\x00" in saslname:
        raise _failure(f"invalid {what}")
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise _failure(f"invalid {what}: '=' must be escaped as =3D")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _failure(reason: str) -> SaslAuthenticationFailedError:
    return SaslAuthenticationFailedError(f"Authentication failed: {reason}")


def _decode(message: bytes) -> str:
    try:
        return bytes(message).decode("utf-8")
    except (UnicodeDecodeError, TypeError) as err:
        raise _failure("the SCRAM message is not UTF-8") from err


class _State(enum.Enum):
    FIRST = "first"
    FINAL = "final"
    SENT_FIRST = "sent_first"
    SENT_FINAL = "sent_final"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class _ClientFirst:
    gs2_header: str
    bare: str
    username: str
    nonce: str
    extensions: dict[str, str]


def _parse_client_first(text: str) -> _ClientFirst:
    if text.startswith(("y,", "p=")):
        raise _failure("channel binding is not supported (gs2 header must be 'n')")
    if not text.startswith("n,"):
        raise _failure("invalid SCRAM client-first message (gs2 header must be 'n')")
    authz, sep, bare = text[2:].partition(",")
    if not sep:
        raise _failure("invalid SCRAM client-first message")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise _failure("invalid SCRAM client-first message (authorization id)")
        authzid = _unescape(authz[2:], "authorization id")
    attributes = bare.split(",")
    if attributes[0].startswith("m="):
        raise _failure("mandatory SCRAM extensions (m=) are not supported")
    if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
        raise _failure("invalid SCRAM client-first message")
    username = _unescape(attributes[0][2:], "user name")
    nonce = attributes[1][2:]
    if not _PRINTABLE_NONCE.fullmatch(nonce):
        raise _failure("invalid SCRAM client nonce")
    extensions: dict[str, str] = {}
    for attribute in attributes[2:]:
        match = _EXTENSION.fullmatch(attribute)
        if match is None:
            raise _failure("invalid SCRAM extension")
        extensions[match.group(1)] = match.group(2)
    if authzid and authzid != username:
        raise _failure("Client requested an authorization id that is different from username")
    return _ClientFirst(f"n,{authz},", bare, username, nonce, extensions)


class ScramServer:
    """The server half of one SCRAM exchange (Kafka's ScramSaslServer); use once.

    ``lookup(username)`` returns the user's credential for this mechanism, or None for an unknown
    user (any exception it raises fails the exchange). ``nonce_factory()`` returns the server's
    nonce part (printable ASCII without ','). ``fake_salt_key`` keys the made-up salt of unknown
    users (`scram_unknown_user_key` of the cluster-wide secret; a per-process one when not given).

    Every failure raises `SaslAuthenticationFailedError` whose message never holds the password,
    the proof or any key; after completion or a failure `evaluate` raises `IllegalSaslStateError`.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce_factory: Callable[[], str] = _default_nonce,
        *,
        fake_salt_key: bytes = _PROCESS_FAKE_SALT_KEY,
    ) -> None:
        self._mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self._nonce_factory = nonce_factory
        self._fake_salt_key = fake_salt_key
        self._state = _State.FIRST
        self._first: _ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._known_user = False
        self.username: str | None = None
        """The authenticated user name, set once the exchange completes (the principal is User:<it>)."""

    @property
    def mechanism_name(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        """True once the client's proof checked out and server-final was returned."""
        return self._state is _State.COMPLETE

    def evaluate(self, client_message: bytes) -> bytes:
        """Take client-first (returns server-first) or client-final (returns server-final)."""
        if self._state not in (_State.FIRST, _State.FINAL):
            raise IllegalSaslStateError(f"SCRAM exchange already {self._state.value}")
        try:
            if self._state is _State.FIRST:
                return self._on_client_first(client_message)
            return self._on_client_final(client_message)
        except SaslAuthenticationFailedError:
            self._state = _State.FAILED
            self._credential = None
            raise

    def _on_client_first(self, message: bytes) -> bytes:
        first = _parse_client_first(_decode(message))
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise _failure("delegation tokens are not supported")
        try:
            credential = self._lookup(first.username)
        except Exception as err:
            raise _failure("Credentials could not be obtained") from err
        self._known_user = credential is not None
        if credential is None:
            # RFC 5802 section 9: go on with a made-up salt and the default count; the proof check
            # fails later exactly as for a wrong password. The keys are random: no password matches.
            salt = unknown_user_salt(self._fake_salt_key, self.mechanism_name, first.username)
            digest = hashlib.new(self._hash).digest_size
            credential = ScramCredential(
                salt, secrets.token_bytes(digest), secrets.token_bytes(digest), SCRAM_DEFAULT_ITERATIONS
            )
        elif credential.iterations < SCRAM_MIN_ITERATIONS:
            raise _failure(f"the stored credential has fewer than {SCRAM_MIN_ITERATIONS} iterations")
        server_nonce = self._nonce_factory()
        if not _PRINTABLE_NONCE.fullmatch(server_nonce):
            raise ValueError("nonce_factory must return printable ASCII without ','")
        self._first = first
        self._credential = credential
        self._nonce = first.nonce + server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = _State.FINAL
        return self._server_first.encode("ascii")

    def _on_client_final(self, message: bytes) -> bytes:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        text = _decode(message)
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attributes = without_proof.split(",")
        if not sep or len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
            raise _failure("invalid SCRAM client-final message")
        for attribute in attributes[2:]:
            if _EXTENSION.fullmatch(attribute) is None:
                raise _failure("invalid SCRAM extension")
        # Kafka's check: the nonce ends with this exchange's nonce (client + server part), which
        # no other exchange has; librdkafka before 2.x's fix sends the client nonce twice in front
        nonce = attributes[1][2:].encode("utf-8")
        expected = self._nonce.encode("ascii")
        if len(nonce) < len(expected) or not hmac.compare_digest(nonce[len(nonce) - len(expected) :], expected):
            raise _failure("Invalid client nonce in the final client message")
        binding = _unb64(attributes[0][2:], "channel binding")
        if binding != first.gs2_header.encode("utf-8"):
            raise _failure("channel binding does not match the gs2 header")
        proof = _unb64(proof_b64, "client proof")
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) == len(signature):
            computed = hashlib.new(self._hash, _xor(proof, signature)).digest()
        else:
            computed = bytes(len(credential.stored_key))
        matches = hmac.compare_digest(computed, credential.stored_key)
        if not (matches and self._known_user):
            raise _failure(f"invalid credentials with SASL mechanism {self.mechanism_name}")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self.username = first.username
        self._credential = None
        self._state = _State.COMPLETE
        return f"v={_b64(server_signature)}".encode("ascii")


class ScramClient:
    """The client half of one SCRAM exchange (Kafka's ScramSaslClient); use once.

    The password is dropped as soon as the salted password is computed. `verify` checks the
    server's signature: a server that does not hold the user's ServerKey (an impostor, or one that
    answered an unknown user with made-up keys) is detected there. Failures raise
    `SaslAuthenticationFailedError`; calls out of order `IllegalSaslStateError`.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        nonce_factory: Callable[[], str] = _default_nonce,
    ) -> None:
        self._mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._username = username
        self._password: bytes | None = password.encode("utf-8")
        self._nonce_factory = nonce_factory
        self._state = _State.FIRST
        self._bare = ""
        self._nonce = ""
        self._expected_signature = b""

    @property
    def mechanism_name(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        """True once the server's signature checked out."""
        return self._state is _State.COMPLETE

    def _expect(self, state: _State) -> None:
        if self._state is not state:
            raise IllegalSaslStateError(f"SCRAM client is {self._state.value}, not {state.value}")

    def first_message(self) -> bytes:
        """client-first: ``n,,n=<saslname>,r=<client nonce>``."""
        self._expect(_State.FIRST)
        nonce = self._nonce_factory()
        if not _PRINTABLE_NONCE.fullmatch(nonce):
            raise ValueError("nonce_factory must return printable ASCII without ','")
        self._nonce = nonce
        self._bare = f"n={_escape(self._username)},r={nonce}"
        self._state = _State.SENT_FIRST
        return f"n,,{self._bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final for the server's salt, iterations and nonce: ``c=biws,r=<nonce>,p=<proof>``."""
        self._expect(_State.SENT_FIRST)
        try:
            text = _decode(server_first)
            attributes = text.split(",")
            if attributes[0].startswith("m="):
                raise _failure("mandatory SCRAM extensions (m=) are not supported")
            if len(attributes) < 3 or [a[:2] for a in attributes[:3]] != ["r=", "s=", "i="]:
                raise _failure("invalid SCRAM server-first message")
            nonce = attributes[0][2:]
            if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
                raise _failure("Invalid server nonce: does not extend the client nonce")
            if not _PRINTABLE_NONCE.fullmatch(nonce):
                raise _failure("invalid SCRAM server nonce")
            salt = _unb64(attributes[1][2:], "salt")
            if not salt or not _DIGITS.fullmatch(attributes[2][2:]):
                raise _failure("invalid SCRAM server-first message")
            iterations = int(attributes[2][2:])
            if iterations < SCRAM_MIN_ITERATIONS:
                raise _failure(f"Requested iterations {iterations} is less than the minimum {SCRAM_MIN_ITERATIONS}")
            assert self._password is not None
            salted = _salted(self._hash, self._password, salt, iterations)
            self._password = None
            client_key, stored_key, server_key = _keys(self._hash, salted)
            without_proof = f"c={_b64(b'n,,')},r={nonce}"
            auth_message = f"{self._bare},{text},{without_proof}".encode()
            proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
            self._expected_signature = _hmac(self._hash, server_key, auth_message)
        except SaslAuthenticationFailedError:
            self._state = _State.FAILED
            self._password = None
            raise
        self._state = _State.SENT_FINAL
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        """Check server-final: ``v=<ServerSignature>`` must match, ``e=<error>`` fails."""
        self._expect(_State.SENT_FINAL)
        self._state = _State.FAILED
        text = _decode(server_final)
        attribute = text.split(",")[0]
        if attribute.startswith("e="):
            raise _failure(f"the server refused: {attribute[2:]}")
        if not attribute.startswith("v="):
            raise _failure("invalid SCRAM server-final message")
        signature = _unb64(attribute[2:], "server signature")
        if not hmac.compare_digest(signature, self._expected_signature):
            raise _failure("Invalid server signature in server final message")
        self._state = _State.COMPLETE
