"""Re-authentication of SASL sessions (KIP-368, ``connections.max.reauth.ms``), pure.

A SASL session on a Kafka connection lives at most ``connections.max.reauth.ms`` (per mechanism:
``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` wins over the listener's, which wins
over the node's), or until its credential expires when that comes first; 0 means for ever (Kafka's
default). The lifetime is told to the client in SaslAuthenticate v1+ (``SessionLifetimeMs``), and
a client that wants to keep its connection re-authenticates on it before the end: SaslHandshake and
SaslAuthenticate again, between its other requests. The rules, Kafka's
(``SaslServerAuthenticator``, ``KafkaChannel``, ``SocketServer``):

- a request other than SaslHandshake that arrives after the session expired closes the connection
  unanswered (the answers of earlier requests went out first: this listener answers in order);
- a SaslHandshake on an authenticated connection begins a re-authentication only when the session
  has a lifetime and the last one began at least `MIN_REAUTH_INTERVAL_MS` ago; otherwise it is
  the illegal second handshake it always was;
- the mechanism must stay the same (else the exchange fails: Kafka answers the handshake, then
  fails the authentication) and so must the principal ("Cannot change principals during
  re-authentication"); a failed re-authentication closes the connection after its answer;
- during the re-authentication the connection sends nothing but its exchange.

`SessionExpiry` holds one connection's state; time comes from the injected `Clock` (monotonic for
the lifetime, wall time for a credential's expiry as Kafka stores it), so the rules are unit tested
without sleeping.
"""

from __future__ import annotations

from typing import Final

from kraftlog.common import errors as kerr
from kraftlog.common._clock import SYSTEM_CLOCK, Clock

__all__ = ["MIN_REAUTH_INTERVAL_MS", "SessionExpiry", "session_lifetime_ms"]

#: Kafka's KafkaChannel: a connection re-authenticates at most once a second
MIN_REAUTH_INTERVAL_MS: Final = 1000


def session_lifetime_ms(max_reauth_ms: int, credential_expiry_wall_ms: int | None, now_wall_ms: int) -> int | None:
    """The lifetime of a session that completed at ``now_wall_ms``: at most ``max_reauth_ms``
    (when positive) and never past its credential's expiry (e.g. a token's, when the mechanism
    has one); None when neither bounds it (the session lives as long as its connection). A
    credential already expired gives 0, as Kafka's ``zeroIfNegative``."""
    bounded = max_reauth_ms > 0
    if credential_expiry_wall_ms is None:
        return max_reauth_ms if bounded else None
    left_ms = max(0, credential_expiry_wall_ms - now_wall_ms)
    return min(left_ms, max_reauth_ms) if bounded else left_ms


class SessionExpiry:
    """One connection's SASL session lifetime and re-authentication state.

    Order: `authenticated` when an exchange completes (the first, or a re-authentication's);
    `begin` when an authenticated connection sends SaslHandshake; `check_mechanism` with the
    mechanism it names; `expired` before serving any other request.
    """

    def __init__(self, max_reauth_ms: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.max_reauth_ms = max_reauth_ms
        self._clock = clock
        self.expires_ms: int | None = None  # monotonic; None: the session does not expire
        self.principal: str | None = None
        self.mechanism: str | None = None
        #: a re-authentication is in progress since this monotonic time
        self.reauth_started_ms: int | None = None
        self._last_reauth_start_ms: int | None = None
        self.bad_mechanism: str | None = None  # why the re-authentication in progress must fail
        self.reauthentications = 0  # completed ones
        self.failures = 0  # failed ones
        self.lifetime_ms = 0  # of the current session, as SaslAuthenticate answers it (0: no limit)

    @property
    def reauthenticating(self) -> bool:
        return self.reauth_started_ms is not None

    def authenticated(self, principal: str, mechanism: str, credential_expiry_wall_ms: int | None = None) -> int:
        """An exchange completed as ``principal``: the session's lifetime in ms (0: no limit, as
        SaslAuthenticate answers it). A re-authentication as another principal raises
        `SaslAuthenticationFailedError` with Kafka's message (the connection is then closed)."""
        if self.reauthenticating:
            if principal != self.principal:
                self.failed()
                raise kerr.SaslAuthenticationFailedError(
                    f"Cannot change principals during re-authentication from {_dotted(self.principal)}: "
                    f"{_dotted(principal)}"
                )
            self.reauth_started_ms = None
            self.reauthentications += 1
        self.principal, self.mechanism = principal, mechanism
        lifetime = session_lifetime_ms(self.max_reauth_ms, credential_expiry_wall_ms, self._clock.wall_ms())
        self.expires_ms = None if lifetime is None else self._clock.monotonic_ms() + lifetime
        self.lifetime_ms = lifetime or 0
        return self.lifetime_ms

    def begin(self) -> bool:
        """A SaslHandshake arrived on the authenticated connection: whether it begins a
        re-authentication (the session has a lifetime, and the last one began at least
        `MIN_REAUTH_INTERVAL_MS` ago). False: the handshake is refused as an illegal state."""
        if self.expires_ms is None or self.reauthenticating:
            return False
        now_ms = self._clock.monotonic_ms()
        last = self._last_reauth_start_ms
        if last is not None and now_ms - last < MIN_REAUTH_INTERVAL_MS:
            return False
        self._last_reauth_start_ms = self.reauth_started_ms = now_ms
        self.bad_mechanism = None
        return True

    def check_mechanism(self, mechanism: str) -> None:
        """The re-authentication's handshake names ``mechanism``: another one than the session's
        makes the exchange fail (Kafka answers the handshake, then fails the authentication)."""
        if self.reauthenticating and mechanism != self.mechanism:
            self.bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self.mechanism}'"
            )

    def failed(self) -> None:
        """The re-authentication in progress failed (its connection is closed after the answer)."""
        if self.reauthenticating:
            self.reauth_started_ms = None
            self.failures += 1

    def latency_ms(self) -> int | None:
        """How long the re-authentication in progress has taken so far (None: none is)."""
        if self.reauth_started_ms is None:
            return None
        return self._clock.monotonic_ms() - self.reauth_started_ms

    def expired(self) -> bool:
        """Whether the session is past its lifetime (a request other than SaslHandshake then
        closes the connection)."""
        return self.expires_ms is not None and self._clock.monotonic_ms() > self.expires_ms


def _dotted(principal: str | None) -> str:
    """``User:alice`` as Kafka's message writes a principal: ``User.alice``."""
    kind, _, name = str(principal).partition(":")
    return f"{kind}.{name}"
