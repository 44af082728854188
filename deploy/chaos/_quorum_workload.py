"""The quorum profile's workload and its observer.

`AdminWorkload`: several concurrent admin clients, each owning the topics it creates (unique names),
creating, deleting, altering configs and adding partitions. A call gets a short timeout (shorter
than the controller's propose timeout), so during a fault it really times out; a timed-out call is
sent again with the same arguments, to the same controller, until it gets a definitive answer or the
operation's deadline passes. Each client speaks raw AdminService stubs (`_ControllerCaller`) rather
than `client.Admin`, whose retries forget the controller after a timeout: Kafka's admin client sends
a retry to the controller its metadata names, which after a timeout is still the same one. Every
operation is recorded with its outcome (`deploy.chaos._quorum_check.AdminOp`): acknowledged,
rejected, or in doubt. Ordering rule: one client
runs its operations one after another, and after an in-doubt operation it never touches that topic
again, so each topic's history is a simple sequence the checker can replay.

`ActiveSampler`: asks every controller DescribeQuorum every ``interval_s`` and records whether an
active controller exists (`deploy.chaos._quorum_check.has_active_controller`).
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import grpc
import structlog

from kraftlog.common import backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.deploy.chaos._quorum_check import ACKED, IN_DOUBT, REJECTED, AdminOp, has_active_controller
from kraftlog.deploy.chaos._security import PLAINTEXT, ChaosSecurity
from kraftlog.proto import admin_pb2, admin_pb2_grpc

__all__ = ["AdminWorkload", "ActiveSampler", "CONFIG_KEYS", "classify", "is_stale_answer"]

_NOT_CONTROLLER = kerr.NotControllerError.error_code

_log = structlog.get_logger("deploy.chaos")

TOPIC_RESOURCE = 2
#: topic configs the workload sets (valid for any value it draws)
CONFIG_KEYS = ("retention.ms", "max.message.bytes")

#: answers after which the operation may still have been applied: the request reached a controller
#: that may have proposed its records (or it never reached one): send it again
_MAYBE_APPLIED = frozenset(
    {kerr.RequestTimedOutError.error_code, kerr.NotControllerError.error_code, kerr.UnknownServerError.error_code}
)


#: answers that, after an attempt that may have applied, prove it did (a client's names are its own)
_PROOF_OF_EARLIER_ATTEMPT = frozenset(
    {
        ("create", kerr.TopicAlreadyExistsError.error_code),
        ("delete", kerr.UnknownTopicOrPartitionError.error_code),
        ("create_partitions", kerr.InvalidPartitionsError.error_code),
    }
)


def classify(kind: str, code: int, maybe_applied_before: bool) -> str | None:
    """The outcome an answer with error ``code`` gives an operation, or None: send it again.

    After an attempt that may have applied, an answer that proves it did is an acknowledgement: a
    create of a name only this client uses answered TOPIC_ALREADY_EXISTS, a delete of its own topic
    answered UNKNOWN_TOPIC_OR_PARTITION, a create_partitions to a total the topic already has
    answered INVALID_PARTITIONS. The same answer to a first attempt proves nothing (it is a stale
    answer, e.g. from a deposed controller that does not know yet): a refusal. Any other definitive
    refusal after an attempt that may have applied leaves the operation in doubt.
    """
    if code == 0:
        return ACKED
    if code in _MAYBE_APPLIED:
        return None
    if (kind, code) in _PROOF_OF_EARLIER_ATTEMPT:
        return ACKED if maybe_applied_before else REJECTED
    return IN_DOUBT if maybe_applied_before else REJECTED


def is_stale_answer(kind: str, code: int, maybe_applied_before: bool) -> bool:
    """A first attempt answered as if the client's own earlier, acknowledged operations had not
    happened (or as if an unused name were taken): the answering controller's image is stale."""
    return not maybe_applied_before and (kind, code) in _PROOF_OF_EARLIER_ATTEMPT


class AdminWorkload:
    """``clients`` admin clients, each on its own thread, until `stop`. ``security``: how their
    channels reach the controllers (`ChaosSecurity`)."""

    def __init__(
        self,
        controllers: str,
        *,
        seed: int,
        prefix: str,
        clients: int = 5,
        call_timeout_ms: int = 1500,
        op_deadline_s: float = 30.0,
        pause_s: tuple[float, float] = (0.05, 0.3),
        max_live: int = 8,
        clock: Callable[[], float] = time.monotonic,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        self.controllers = controllers
        self.security = security
        self.prefix = prefix
        self.seed = seed
        self.call_timeout_ms = call_timeout_ms
        self.op_deadline_s = op_deadline_s
        self.pause_s = pause_s
        self.max_live = max_live
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.ops: list[AdminOp] = []
        self.calls = 0
        self.timeouts = 0  # calls that ended without an answer, or answered REQUEST_TIMED_OUT
        self.retries = 0
        self.stale_answers = 0  # see `is_stale_answer`
        self._in_flight = 0
        self._threads = [
            threading.Thread(target=self._client, args=(c,), name=f"chaos-admin-{c}", daemon=True)
            for c in range(clients)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """No new operation or retry starts; each client finishes the call it is in (an operation
        stopped before a definitive answer is recorded in doubt)."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def snapshot(self) -> list[AdminOp]:
        with self._lock:
            return list(self.ops)

    def acked(self) -> int:
        with self._lock:
            return sum(1 for op in self.ops if op.outcome == ACKED)

    # ------------------------------------------------------------------ one client

    def _client(self, client: int) -> None:
        rng = random.Random(self.seed * 1009 + client)
        admin = _ControllerCaller(
            self.controllers.split(","), self.call_timeout_ms / 1000.0, rng, security=self.security
        )
        live: dict[str, int] = {}  # topics of this client known exactly: name -> partition count
        n = 0
        try:
            while not self._stop.is_set():
                kind = self._choose(rng, live)
                if kind == "create":
                    n += 1
                    topic = f"{self.prefix}-c{client}-{n}"
                    op = AdminOp(
                        client,
                        kind,
                        topic,
                        "",
                        partitions=rng.randint(1, 3),
                        config=(rng.choice(CONFIG_KEYS), _config_value(rng, "")) if rng.random() < 0.5 else None,
                    )
                else:
                    topic = rng.choice(sorted(live))
                    if kind == "create_partitions":
                        op = AdminOp(client, kind, topic, "", partitions=live[topic] + rng.randint(1, 2))
                    elif kind == "alter_config":
                        key = rng.choice(CONFIG_KEYS)
                        op = AdminOp(client, kind, topic, "", config=(key, _config_value(rng, key)))
                    else:
                        op = AdminOp(client, kind, topic, "")
                done = self._execute(admin, op)
                with self._lock:
                    self.ops.append(done)
                if done.outcome == ACKED and kind in ("create", "create_partitions"):
                    live[topic] = done.partitions
                elif (done.outcome == ACKED and kind == "delete") or done.outcome == IN_DOUBT:
                    live.pop(topic, None)  # deleted, or in doubt: never touched again
                self._stop.wait(rng.uniform(*self.pause_s))
        except Exception:  # a client bug must show, not silently shrink the workload
            _log.exception("chaos_admin_client_failed", client=client)
        finally:
            admin.close()

    def _choose(self, rng: random.Random, live: Mapping[str, int]) -> str:
        if not live:
            return "create"
        if len(live) >= self.max_live:
            return rng.choice(["delete", "alter_config", "create_partitions"])
        return rng.choices(["create", "delete", "alter_config", "create_partitions"], weights=[4, 2, 3, 2])[0]

    def _execute(self, admin: _ControllerCaller, op: AdminOp) -> AdminOp:
        """Send ``op`` until a definitive answer, the operation's deadline, or `stop`."""
        started = self._clock()
        deadline = time.monotonic() + self.op_deadline_s
        attempts = 0
        maybe_applied = False
        last = ""
        while True:
            attempts += 1
            with self._lock:
                self.calls += 1
                self._in_flight += 1
                if attempts > 1:
                    self.retries += 1
            try:
                code, last = self._call(admin, op)
            except (kerr.KafkaError, grpc.RpcError) as err:  # no answer: it may have reached a controller
                code, last = kerr.RequestTimedOutError.error_code, type(err).__name__
            finally:
                with self._lock:
                    self._in_flight -= 1
            if code == kerr.RequestTimedOutError.error_code:
                with self._lock:
                    self.timeouts += 1
            if is_stale_answer(op.kind, code, maybe_applied):
                with self._lock:
                    self.stale_answers += 1
            outcome = classify(op.kind, code, maybe_applied)
            if outcome is not None:
                break
            maybe_applied = True
            if self._stop.is_set() or time.monotonic() >= deadline:
                outcome = IN_DOUBT
                break
            # Kafka's retry.backoff.ms / retry.backoff.max.ms (KIP-580): 50 ms doubling to 800 ms, so a
            # controller that refuses connections outright is not hammered
            self._stop.wait(backoff_ms(attempts - 1, base_ms=50, max_ms=800, jitter=0) / 1000.0)
        _log.debug(
            "chaos_admin_op",
            client=op.client,
            kind=op.kind,
            topic=op.topic,
            outcome=outcome,
            error=last,
            attempts=attempts,
        )
        return AdminOp(
            op.client, op.kind, op.topic, outcome, op.partitions, op.config, last, attempts, started, self._clock()
        )

    def _call(self, admin: _ControllerCaller, op: AdminOp) -> tuple[int, str]:
        """One call; the error code and name of the operation's result."""
        timeout = self.call_timeout_ms
        if op.kind == "create":
            configs = dict([op.config]) if op.config else {}
            resp: Any = admin.call(
                "CreateTopics",
                admin_pb2.CreateTopicsRequest(
                    timeout_ms=timeout,
                    topics=[
                        admin_pb2.CreateTopicsRequest.CreatableTopic(
                            name=op.topic, num_partitions=op.partitions, replication_factor=1, configs=configs
                        )
                    ],
                ),
            )
            items = resp.topics
        elif op.kind == "delete":
            resp = admin.call("DeleteTopics", admin_pb2.DeleteTopicsRequest(names=[op.topic], timeout_ms=timeout))
            items = resp.topics
        elif op.kind == "create_partitions":
            resp = admin.call(
                "CreatePartitions",
                admin_pb2.CreatePartitionsRequest(
                    timeout_ms=timeout,
                    topics=[admin_pb2.CreatePartitionsRequest.Topic(name=op.topic, count=op.partitions)],
                ),
            )
            items = resp.results
        else:
            assert op.config is not None
            R = admin_pb2.IncrementalAlterConfigsRequest
            resp = admin.call(
                "IncrementalAlterConfigs",
                R(
                    resources=[
                        R.Resource(
                            resource=admin_pb2.ConfigResource(resource_type=TOPIC_RESOURCE, resource_name=op.topic),
                            configs=[R.Op(name=op.config[0], op=0, value=op.config[1])],
                        )
                    ]
                ),
            )
            items = resp.results
        err = resp.error if resp.error.code == _NOT_CONTROLLER or not items else items[0].error
        return err.code, err.name or "NONE"


class _ControllerCaller:
    """One client's AdminService calls: to the controller it believes active, following a
    NOT_CONTROLLER answer's hint within the call's timeout. A call that gets no answer leaves that
    belief alone (the retry goes to the same controller, as Kafka's admin client does) until two
    calls in a row got none, then the next controller is tried."""

    def __init__(
        self, addresses: list[str], timeout_s: float, rng: random.Random, *, security: ChaosSecurity = PLAINTEXT
    ) -> None:
        self.addresses = list(addresses)
        self.timeout_s = timeout_s
        self.security = security
        self._channels = {a: security.channel(a) for a in self.addresses}
        self._stubs = {a: admin_pb2_grpc.AdminServiceStub(ch) for a, ch in self._channels.items()}
        self.controller = rng.choice(self.addresses)
        self._silent = 0

    def call(self, method: str, request: Any) -> Any:
        """The answer (errors and all). Raises `grpc.RpcError` when the controller did not answer
        within the timeout, `RequestTimedOutError` when no controller said it was active in time."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise kerr.RequestTimedOutError(f"{method}: no active controller answered within {self.timeout_s} s")
            stub = self._stubs.get(self.controller)
            if stub is None:  # a hint naming an address outside the bootstrap list
                self._channels[self.controller] = self.security.channel(self.controller)
                stub = self._stubs[self.controller] = admin_pb2_grpc.AdminServiceStub(self._channels[self.controller])
            try:
                resp = getattr(stub, method)(request, timeout=remaining)
            except grpc.RpcError:
                self._silent += 1
                if self._silent >= 2:
                    self._next()
                raise
            self._silent = 0
            if resp.error.code != _NOT_CONTROLLER:
                return resp
            hint = resp.controller.leader_address
            if hint and hint != self.controller:
                self.controller = hint  # follow at once
                continue
            self._next()  # no leader known there: ask the next one after a short pause
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _next(self) -> None:
        i = self.addresses.index(self.controller) if self.controller in self.addresses else -1
        self.controller = self.addresses[(i + 1) % len(self.addresses)]
        self._silent = 0

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()


def _config_value(rng: random.Random, key: str) -> str:
    if key == "max.message.bytes":
        return str(rng.randint(10_000, 2_000_000))
    return str(rng.randint(60_000, 1_000_000_000))


class ActiveSampler:
    """Every ``interval_s``, DescribeQuorum to every controller at once (each with ``timeout_s``);
    a sample is ``(time_s, active controller id or None)``. Runs on its own thread until `stop`.
    ``security``: how its channels reach the controllers."""

    def __init__(
        self,
        addresses: Mapping[int, str],
        *,
        fetch_timeout_ms: int = 2000,
        interval_s: float = 0.1,
        timeout_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        security: ChaosSecurity = PLAINTEXT,
    ) -> None:
        self.fetch_timeout_ms = fetch_timeout_ms
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._channels = {n: security.channel(a) for n, a in addresses.items()}
        self._stubs = {n: admin_pb2_grpc.AdminServiceStub(ch) for n, ch in self._channels.items()}
        self._lock = threading.Lock()
        self.samples: list[tuple[float, int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-active-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for ch in self._channels.values():
            ch.close()

    def snapshot(self) -> list[tuple[float, int | None]]:
        with self._lock:
            return list(self.samples)

    def sample(self) -> int | None:
        """One sample: the active controller some controller's answer shows, or None."""
        calls = [
            stub.DescribeQuorum.future(admin_pb2.DescribeQuorumRequest(), timeout=self.timeout_s)
            for stub in self._stubs.values()
        ]
        active = None
        for call in calls:
            try:
                leader = has_active_controller(call.result(), self.fetch_timeout_ms)
            except (grpc.RpcError, concurrent.futures.CancelledError):
                continue
            if leader is not None:
                active = leader
        return active

    def _run(self) -> None:
        while not self._stop.is_set():
            t = self._clock()
            try:
                active = self.sample()
            except Exception as err:  # one failed sample is a sample without an active controller
                _log.warning("chaos_sample_failed", error=repr(err))
                active = None
            with self._lock:
                self.samples.append((t, active))
            self._stop.wait(max(0.0, self.interval_s - (self._clock() - t)))
