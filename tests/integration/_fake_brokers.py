"""Brokers as far as the controllers can tell: registration and heartbeats over real gRPC.

Until the broker role exists, controller tests need unfenced brokers to place replicas on. Each
fake broker registers once, then heartbeats from a thread, following NOT_CONTROLLER to the active
controller across failovers, and reports its metadata offset as caught up.
"""

from __future__ import annotations

import threading
import time
import uuid

import grpc

from kraftlog.proto import controller_pb2, controller_pb2_grpc

CAUGHT_UP = 2**62


class FakeBrokers:
    def __init__(self, controllers: list[str], cluster_id: str, broker_ids: list[int], interval_s: float = 0.5) -> None:
        self.controllers = controllers
        self.cluster_id = cluster_id
        self.broker_ids = broker_ids
        self.interval_s = interval_s
        self.epochs: dict[int, int] = {}
        self._incarnations = {b: str(uuid.uuid4()) for b in broker_ids}
        self._target: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-brokers", daemon=True)
        self._channels = {a: grpc.insecure_channel(a) for a in controllers}

    def start(self) -> FakeBrokers:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for ch in self._channels.values():
            ch.close()

    def _call(self, method: str, request: object) -> object | None:
        order = ([self._target] if self._target else []) + [a for a in self.controllers if a != self._target]
        for address in order:
            stub = controller_pb2_grpc.ControllerServiceStub(self._channels[address])
            try:
                resp = getattr(stub, method)(request, timeout=2)
            except grpc.RpcError:
                continue
            if resp.error.code == 41:  # NOT_CONTROLLER: follow the hint next time
                if resp.controller.leader_address in self._channels:
                    self._target = resp.controller.leader_address
                continue
            self._target = address
            return resp
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            for b in self.broker_ids:
                if b not in self.epochs:
                    resp = self._call(
                        "RegisterBroker",
                        controller_pb2.RegisterBrokerRequest(
                            broker_id=b,
                            cluster_id=self.cluster_id,
                            incarnation_id=self._incarnations[b],
                            # as a real broker: its gRPC listener, then its Kafka listener
                            listeners=[
                                controller_pb2.Endpoint(name="BROKER", host="127.0.0.1", port=1 + b),
                                controller_pb2.Endpoint(
                                    name="PLAINTEXT", host="127.0.0.1", port=10_001 + b, security_protocol="PLAINTEXT"
                                ),
                            ],
                        ),
                    )
                    if resp is not None and resp.error.code == 0:
                        self.epochs[b] = resp.broker_epoch
                    continue
                resp = self._call(
                    "BrokerHeartbeat",
                    controller_pb2.BrokerHeartbeatRequest(
                        broker_id=b, broker_epoch=self.epochs[b], current_metadata_offset=CAUGHT_UP
                    ),
                )
                if resp is not None and resp.error.code in (77, 102):  # stale epoch / not registered
                    self.epochs.pop(b, None)
            self._stop.wait(self.interval_s)

    def wait_unfenced(self, admin: object, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                resp = admin.describe_cluster()
                live = {b.broker_id for b in resp.brokers if not b.fenced}
                if set(self.broker_ids) <= live:
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"brokers {self.broker_ids} were not unfenced within {timeout_s}s")
