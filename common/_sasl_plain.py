"""SASL/PLAIN (RFC 4616), checked against the SCRAM credentials of the metadata log.

Kafka's PlainSaslServer checks the password against a list of clear-text passwords in the JAAS
file. kraftlog keeps no second password store: a PLAIN login is verified by salting the offered
password with the user's stored SCRAM salt and iteration count and comparing the resulting StoredKey
with the stored one in constant time (`verify_password_against_scram`). So `kraftlog` users have one
credential, created with AlterUserScramCredentials, and PLAIN works for every user that has a SCRAM
credential. The password crosses the wire in clear, so a listener offers PLAIN only over TLS
(SASL_SSL); that rule is the listener's, not this module's.

Like `ScramServer`, `PlainServer` is pure (no sockets, no clock) and used once: ``evaluate`` takes
the one client message, returns the (empty) server answer and sets ``complete`` and ``username``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from kraftlog.common._scram import (
    SCRAM_MIN_ITERATIONS,
    ScramCredential,
    _hash_name,
    _keys,
    scram_salted_password,
)
from kraftlog.common.errors import IllegalSaslStateError, SaslAuthenticationFailedError

if TYPE_CHECKING:
    from kraftlog.common._acl import ScramMechanism

__all__ = ["PLAIN_MECHANISM", "PlainServer", "plain_verifier_from_scram", "verify_password_against_scram"]

PLAIN_MECHANISM: Final = "PLAIN"
_DUMMY_SALT: Final = secrets.token_bytes(32)


def verify_password_against_scram(credential: ScramCredential, mechanism: ScramMechanism, password: str) -> bool:
    """True when ``password`` is the one ``credential`` was made from.

    Recomputes Hi(password, salt, iterations) with the credential's own salt and iteration count,
    derives StoredKey = H(HMAC(salted, "Client Key")) and compares it with the stored one with
    `hmac.compare_digest`. The cost is the credential's iteration count (4096..16384 PBKDF2 rounds),
    the same a SCRAM client pays, which is what makes a stolen credential slow to brute-force.
    """
    salted = scram_salted_password(mechanism, password, credential.salt, credential.iterations)
    _, stored_key, _ = _keys(_hash_name(mechanism), salted)
    return hmac.compare_digest(stored_key, credential.stored_key)


def plain_verifier_from_scram(
    lookup: Callable[[str], Iterable[tuple[ScramMechanism, ScramCredential]]],
) -> Callable[[str, str], bool]:
    """A ``verify(username, password)`` for `PlainServer` over the metadata log's SCRAM credentials.

    ``lookup(username)`` yields the user's (mechanism, credential) pairs, none for an unknown user.
    The password is accepted if it matches any of them. An unknown user still costs one PBKDF2 run
    of the minimum iteration count, so the answer's timing does not tell which user names exist.
    """

    def verify(username: str, password: str) -> bool:
        found = False
        for mechanism, credential in lookup(username):
            found = True
            if verify_password_against_scram(credential, mechanism, password):
                return True
        if not found:
            hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), _DUMMY_SALT, SCRAM_MIN_ITERATIONS)
        return False

    return verify


class PlainServer:
    """The server side of one SASL/PLAIN exchange (Kafka's PlainSaslServer); use once.

    The message is ``[authzid] NUL authcid NUL passwd`` (RFC 4616), UTF-8. The user name and the
    password must be non-empty; an authorization id, if given, must equal the user name (checked
    after the password, as Kafka does). ``verify(username, password)`` decides; an exception from
    it fails the exchange. Every failure raises `SaslAuthenticationFailedError` with a message that
    never holds the password; a second `evaluate` raises `IllegalSaslStateError`.
    """

    mechanism_name: Final = PLAIN_MECHANISM

    def __init__(self, verify: Callable[[str, str], bool]) -> None:
        self._verify = verify
        self._used = False
        self.complete = False
        """True once the password was accepted."""
        self.username: str | None = None
        """The authenticated user name (the principal is User:<it>), set on completion."""

    def evaluate(self, client_message: bytes) -> bytes:
        """Check the one PLAIN message; returns the empty server answer."""
        if self._used:
            state = "complete" if self.complete else "failed"
            raise IllegalSaslStateError(f"SASL/PLAIN exchange already {state}")
        self._used = True
        try:
            text = bytes(client_message).decode("utf-8")
        except (UnicodeDecodeError, TypeError) as err:
            raise SaslAuthenticationFailedError("Invalid SASL/PLAIN response: not UTF-8") from err
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationFailedError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationFailedError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailedError("Authentication failed: password not specified")
        try:
            accepted = self._verify(username, password)
        except Exception as err:
            raise SaslAuthenticationFailedError(
                "Authentication failed: credentials for user could not be verified"
            ) from err
        if not accepted:
            raise SaslAuthenticationFailedError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = username
        self.complete = True
        return b""
