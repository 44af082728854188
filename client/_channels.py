"""The client's gRPC channels to brokers, and how a failed call reads as a typed Kafka error.

`ChannelPool` holds one gRPC channel per broker address for all of a client's calls (BrokerService,
GroupService and TxnService stubs share it) and remembers which addresses failed lately, so that
metadata requests ask the others first. `grpc_error` is the one mapping from a transport failure to
Kafka's error types; `timed_out` the error a retry loop raises at its deadline.
"""

from __future__ import annotations

import threading
import time

import grpc

from kraftlog.client._security import ClientSecurity
from kraftlog.client._transport import Transport
from kraftlog.common import errors as kerr
from kraftlog.proto import RECONNECT_OPTIONS, broker_pb2_grpc, group_pb2_grpc, share_pb2_grpc, txn_pb2_grpc

__all__ = ["UNREACHABLE_CODES", "ChannelPool", "grpc_error", "timed_out"]


def timed_out(message: str, cause: BaseException) -> kerr.RequestTimedOutError:
    """The `RequestTimedOutError` a retry loop raises at its deadline, caused by ``cause``."""
    error = kerr.RequestTimedOutError(message)
    error.__cause__ = cause
    return error


def grpc_error(err: grpc.RpcError, what: str) -> kerr.KafkaError:
    """A transport failure as a typed Kafka error: a deadline is REQUEST_TIMED_OUT, an unreachable
    or cancelled call NETWORK_EXCEPTION (both retriable); anything else UNKNOWN_SERVER_ERROR."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    text = f"{what}: {code.name if code is not None else 'error'}: {details}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return kerr.RequestTimedOutError(text)
    if code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.UNKNOWN,
    ):
        return kerr.NetworkError(text)
    return kerr.UnknownServerError(text)


# a broker that did not answer at all (down, or cut off the network), as opposed to one that answered
UNREACHABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class ChannelPool:
    """One gRPC channel (and BrokerService stub) per address, and which addresses failed lately.

    A broker cut off the network does not refuse connections: calls to it hang until their deadline.
    Like Kafka's clients, which back off from a node whose connection failed, callers report such
    failures (`mark_unreachable`) and metadata requests try the other brokers first for
    ``UNREACHABLE_BACKOFF_S``.
    """

    UNREACHABLE_BACKOFF_S = 5.0

    def __init__(self, max_message_bytes: int = 104_857_600, *, security: Transport | None = None) -> None:
        max_message_bytes = min(max_message_bytes, 2**31 - 1)  # gRPC takes a C int
        self.security = security or ClientSecurity()  # default: plaintext channels
        self._options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            *RECONNECT_OPTIONS,
        ]
        self._stubs: dict[str, broker_pb2_grpc.BrokerServiceStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._unreachable_at: dict[str, float] = {}

    def mark_unreachable(self, address: str) -> None:
        self._unreachable_at[address] = time.monotonic()

    def mark_reachable(self, address: str) -> None:
        self._unreachable_at.pop(address, None)

    def recently_unreachable(self, address: str) -> bool:
        at = self._unreachable_at.get(address)
        return at is not None and time.monotonic() - at < self.UNREACHABLE_BACKOFF_S

    def stub(self, address: str) -> broker_pb2_grpc.BrokerServiceStub:
        stub = self._stubs.get(address)
        if stub is None:
            with self._lock:
                stub = self._stubs.get(address)
                if stub is None:
                    channel = self.security.open(address, self._options)
                    self._channels[address] = channel
                    stub = broker_pb2_grpc.BrokerServiceStub(channel)
                    self._stubs[address] = stub
        return stub

    def group_stub(self, address: str) -> group_pb2_grpc.GroupServiceStub:
        """GroupService on the same channel as `stub` (a consumer's group coordinator)."""
        self.stub(address)
        with self._lock:
            return group_pb2_grpc.GroupServiceStub(self._channels[address])

    def txn_stub(self, address: str) -> txn_pb2_grpc.TxnServiceStub:
        """TxnService on the same channel as `stub` (a producer's transaction coordinator)."""
        self.stub(address)
        with self._lock:
            return txn_pb2_grpc.TxnServiceStub(self._channels[address])

    def share_stub(self, address: str) -> share_pb2_grpc.ShareServiceStub:
        """ShareService on the same channel as `stub` (a share consumer's partition leaders)."""
        self.stub(address)
        with self._lock:
            return share_pb2_grpc.ShareServiceStub(self._channels[address])

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
