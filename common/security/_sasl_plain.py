"""SASL/PLAIN (RFC 4616): the server side of the exchange.

As Kafka's PlainSaslServer, the password is checked by a ``verify(username, password)`` the listener
gives: `common.security._listener_security.ListenerSecurity.verify_plain`, against the ``user_<name>``
entries of the listener's JAAS config (Kafka's PlainLoginModule). The password crosses the wire in
clear, so a listener offers PLAIN only over TLS (SASL_SSL); that rule is the listener's, not this
module's.

Like `ScramServer`, `PlainServer` is pure (no sockets, no clock) and used once: ``evaluate`` takes
the one client message, returns the (empty) server answer and sets ``complete`` and ``username``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kraftlog.common.errors import IllegalSaslStateError, SaslAuthenticationFailedError

if TYPE_CHECKING:
    pass

__all__ = ["PLAIN_MECHANISM", "PlainServer"]

PLAIN_MECHANISM: Final = "PLAIN"
_DUMMY_SALT: Final = secrets.token_bytes(32)


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
