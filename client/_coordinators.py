"""Calls to the broker in charge of a key: finding a group's or a transactional id's coordinator,
and the base the admin clients that talk to brokers (not the controller) share.

Both sit on `ChannelPool` and `ClusterMetadata` and retry with the one retry policy
(`retry_until`, KIP-580's back-off).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

import grpc

from kraftlog.client._channels import ChannelPool
from kraftlog.client._metadata import ClusterMetadata
from kraftlog.client._security import client_security
from kraftlog.common import Done, Outcome, Retry, RetryPolicy, retry_until
from kraftlog.common import errors as kerr
from kraftlog.proto import group_pb2

__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "BrokerAdminClient", "find_coordinator"]


class BrokerAdminClient:
    """What the admin clients that talk to brokers (not the controller) share: a channel pool and
    the brokers' metadata, closed together; a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        security_protocol: str = "PLAINTEXT",
        **ssl: Any,
    ) -> None:
        """``security_protocol`` and kafka-python's ``ssl_*`` arguments or ``tls``: see
        `client_security`."""
        self.request_timeout_ms = request_timeout_ms
        self._pool = ChannelPool(security=client_security(security_protocol, **ssl))
        self._metadata = ClusterMetadata(bootstrap_servers, self._pool, request_timeout_ms=request_timeout_ms)
        # retries start at 100 ms and back off to 1 s (the one retry policy, KIP-580)
        self._policy = RetryPolicy(backoff_ms=100, backoff_max_ms=1000, attempt_timeout_ms=request_timeout_ms)
        self._sleep: Callable[[float], object] = time.sleep  # how retries wait (a unit test's no-op)

    def _retry(self, attempt: Callable[[float], Outcome], deadline: float, what: str) -> Any:
        """Run ``attempt`` until it is done or ``deadline`` passes (see `retry_until`)."""
        timeout_s = deadline - time.monotonic()
        return retry_until(attempt, timeout_s=timeout_s, policy=self._policy, what=what, sleep=self._sleep)

    def close(self) -> None:
        self._metadata.close()
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


GROUP_KEY = 0  # FindCoordinator key types: a group id, a transactional id
TRANSACTION_KEY = 1
_COORDINATOR_RETRY = {
    kerr.CoordinatorNotAvailableError.error_code,
    kerr.NotCoordinatorError.error_code,
    kerr.CoordinatorLoadInProgressError.error_code,
}


def find_coordinator(
    pool: ChannelPool,
    metadata: ClusterMetadata,
    key: str,
    key_type: int,
    deadline: float,
    *,
    backoff_s: float = 0.1,
    stop: threading.Event | None = None,
) -> tuple[int, str]:
    """``(node id, address)`` of the coordinator of a group (``key_type`` 0) or transactional id
    (1), asking FindCoordinator of every broker in turn until one names it; a coordinator not
    there yet (being created, loading) is asked for again until ``deadline``
    (COORDINATOR_NOT_AVAILABLE then), any other error is raised as its type."""
    if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
        raise kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} (no time left)")
    request = group_pb2.FindCoordinatorRequest(key_type=key_type, keys=[key])

    def one_round(_timeout_s: float) -> Outcome:
        """Ask every known broker once; a round that found nothing is retried after a back-off."""
        last = "stopped"
        if stop is not None and stop.is_set():
            raise kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} ({last})")
        for address in metadata.candidates():
            try:
                r = pool.group_stub(address).FindCoordinator(request, timeout=5.0)
            except grpc.RpcError as err:
                last = str(err.code())
                continue
            c = r.coordinators[0]
            if c.error.code == 0:
                host = f"[{c.host}]" if ":" in c.host else c.host
                return Done((c.node_id, f"{host}:{c.port}"))
            if c.error.code not in _COORDINATOR_RETRY:
                kerr.raise_for_code(c.error.code, c.error.message or c.error.name)
            last = c.error.name
        return Retry(last, error=kerr.CoordinatorNotAvailableError(f"no coordinator found for {key!r} ({last})"))

    found: tuple[int, str] = retry_until(
        one_round,
        timeout_s=deadline - time.monotonic(),
        policy=RetryPolicy(backoff_ms=backoff_s * 1000.0, backoff_max_ms=max(backoff_s * 1000.0, 1000.0)),
        what="FindCoordinator",
        sleep=stop.wait if stop is not None else time.sleep,
    )
    return found
